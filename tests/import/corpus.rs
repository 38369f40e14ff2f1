//! Every `tests/import/corpus/NAME.cfg` is imported by `rdmalb import` and
//! compared with `NAME.toml` (the TOML printed) and `NAME.notes` (the notes
//! on stderr and the exit status); the TOML must pass `rdmalb check`.
//! `RDMALB_IMPORT_BLESS=1` rewrites the golden files from the current
//! output (review the diff before committing it).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::RDMALB;

/// The corpus directory.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import/corpus")
}

/// The corpus configurations, by name.
fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("read the corpus directory")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cfg"))
        .collect();
    files.sort();
    files
}

/// A self-signed certificate and its key in one PEM file, as HAProxy's
/// `crt` wants them.
pub fn combined_pem(path: &Path, names: &[&str]) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).expect("rcgen");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("{}{}", ck.cert.pem(), ck.signing_key.serialize_pem()),
    )
    .unwrap();
}

/// Writes a certificate for every `crt` path `cfg` names, relative to
/// `dir` (and its `crt-base`; a path ending in `/` is a directory: two
/// certificates in it).
pub fn certificates_for(cfg: &str, dir: &Path) {
    let mut base = dir.to_path_buf();
    for line in cfg.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"crt-base") {
            base = dir.join(words[1]);
        }
        for w in words.windows(2).filter(|w| w[0] == "crt") {
            let path = base.join(w[1]);
            if w[1].ends_with('/') {
                combined_pem(&path.join("a.example.com.pem"), &["a.example.com"]);
                combined_pem(&path.join("b.example.com.pem"), &["b.example.com"]);
            } else {
                combined_pem(&path, &["app.example.com", "api.example.com", "localhost"]);
            }
        }
    }
}

/// `rdmalb import NAME.cfg -o NAME.toml` in `dir`: (TOML, stderr, exit status).
pub fn import(dir: &Path, name: &str, extra: &[&str]) -> (String, String, i32) {
    let out = Command::new(RDMALB)
        .current_dir(dir)
        .arg("import")
        .arg(format!("{name}.cfg"))
        .args(["-o", &format!("{name}.toml")])
        .args(extra)
        .output()
        .expect("run rdmalb import");
    let toml = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap_or_default();
    (
        toml,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `rdmalb check -c` on a file; panics with its problems.
pub fn check(path: &Path) {
    let out = Command::new(RDMALB)
        .arg("check")
        .arg("-c")
        .arg(path)
        .output()
        .expect("run rdmalb check");
    assert!(
        out.status.success(),
        "rdmalb check -c {} fails:\n{}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap_or_default()
    );
}

#[test]
fn corpus_imports_match_their_golden_files_and_pass_check() {
    let files = corpus();
    assert!(
        files.len() >= 12,
        "the corpus has {} configurations",
        files.len()
    );
    let bless = std::env::var_os("RDMALB_IMPORT_BLESS").is_some();
    let mut differ = Vec::new();
    for cfg in &files {
        let name = cfg.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(cfg).unwrap();
        std::fs::write(dir.path().join(format!("{name}.cfg")), &text).unwrap();
        certificates_for(&text, dir.path());
        let (toml, stderr, code) = import(dir.path(), &name, &[]);
        assert!(
            code == 0 || code == 3,
            "{name}: rdmalb import exits {code}:\n{stderr}"
        );
        check(&dir.path().join(format!("{name}.toml")));
        let notes = format!("{stderr}exit status: {code}\n");
        for (golden, got) in [
            (cfg.with_extension("toml"), &toml),
            (cfg.with_extension("notes"), &notes),
        ] {
            if bless {
                std::fs::write(&golden, got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&golden).unwrap_or_default();
            if want != *got {
                differ.push(format!(
                    "{}:\n--- expected\n{want}--- got\n{got}",
                    golden.display()
                ));
            }
        }
        // --allow-partial: the same output, exit status 0.
        let (again, _, code) = import(dir.path(), &name, &["--allow-partial"]);
        assert_eq!(
            (again.as_str(), code),
            (toml.as_str(), 0),
            "{name} with --allow-partial"
        );
    }
    // docs/migrating-from-haproxy.md shows the worked example's output.
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/migrating-from-haproxy.md"),
    )
    .unwrap();
    for ext in ["toml", "notes"] {
        let golden =
            std::fs::read_to_string(corpus_dir().join(format!("worked-example.{ext}"))).unwrap();
        let shown = golden.replace("worked-example.cfg", "haproxy.cfg");
        let shown = shown.split("exit status").next().unwrap();
        assert!(doc.contains(shown), "docs/migrating-from-haproxy.md does not show the current worked-example.{ext}:\n{shown}");
    }
    assert!(
        differ.is_empty(),
        "import output differs from the golden files (RDMALB_IMPORT_BLESS=1 rewrites them):\n{}",
        differ.join("\n")
    );
}
