//! scripts/docs-check.sh, the stage of scripts/test.sh that holds the
//! configuration reference to the code: an example config with a key the
//! reference does not have, a file it cannot classify and a stale
//! docs/configuration.md are each reported, and the shipped files pass.

use std::path::Path;
use std::process::Command;

use crate::support::RDMALB;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the check on `conf`: (success, stdout and stderr).
fn docs_check(conf: &Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/docs-check.sh"))
        .arg(conf)
        .env("RDMALB_BIN", RDMALB)
        .output()
        .expect("run scripts/docs-check.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn copy(from: &str, to: &Path) {
    std::fs::copy(repo().join(from), to).unwrap();
}

#[test]
fn the_shipped_reference_and_examples_pass() {
    let (ok, text) = docs_check(&repo().join("conf"));
    assert!(ok, "{text}");
    assert!(text.contains("matches the code"), "{text}");
}

#[test]
fn an_unknown_key_in_an_example_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = std::fs::read_to_string(repo().join("conf/rdmalb.toml")).unwrap();
    let misspelt = proxy.replacen("passive_failures = 3", "passive_failure = 3", 1);
    assert_ne!(
        proxy, misspelt,
        "conf/rdmalb.toml no longer sets passive_failures"
    );
    std::fs::write(dir.path().join("rdmalb.toml"), misspelt).unwrap();
    std::fs::create_dir(dir.path().join("role")).unwrap();
    let sidecar = std::fs::read_to_string(repo().join("conf/sidecar.toml")).unwrap();
    std::fs::write(
        dir.path().join("role/sidecar-extra.toml"),
        format!("{sidecar}\n[role]\nfile = \"x\"\nreloads = [\"true\"]\n"),
    )
    .unwrap();
    copy("conf/testsrv.toml", &dir.path().join("testsrv.toml"));

    let (ok, text) = docs_check(dir.path());
    assert!(!ok, "{text}");
    assert!(
        text.contains("rdmalb.toml: `health.passive_failure` is not a key of the proxy config"),
        "{text}"
    );
    assert!(
        text.contains("sidecar-extra.toml: `role.reloads` is not a key of the sidecar config"),
        "{text}"
    );
    // The test backend's config is not checked against the reference.
    assert!(!text.contains("testsrv.toml"), "{text}");
    assert_eq!(text.matches("is not a key").count(), 2, "{text}");
}

#[test]
fn an_example_of_unknown_kind_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    copy("conf/rdmalb.toml", &dir.path().join("edge.toml"));
    let (ok, text) = docs_check(dir.path());
    assert!(!ok, "{text}");
    assert!(text.contains("edge.toml: not named as a proxy"), "{text}");
}

#[test]
fn a_stale_reference_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let current = std::fs::read_to_string(repo().join("docs/configuration.md")).unwrap();
    let stale = dir.path().join("configuration.md");
    let edited = current.replacen(
        "| `retries` | integer | `3` |",
        "| `retries` | integer | `2` |",
        1,
    );
    assert_ne!(
        current, edited,
        "docs/configuration.md no longer has global.retries' row"
    );
    std::fs::write(&stale, edited).unwrap();
    let out = Command::new(RDMALB)
        .args(["config-reference", "--check"])
        .arg(&stale)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("differs from what the code generates, from line"),
        "{err}"
    );
    assert!(
        err.contains("config-reference > docs/configuration.md"),
        "{err}"
    );
}

/// `rdmalb --help` and every subcommand's help say what it does and give
/// one example, which starts with `rdmalb <subcommand>`.
#[test]
fn every_help_has_an_example_of_its_command() {
    let help = |args: &[&str]| {
        let out = Command::new(RDMALB)
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&[]);
    assert!(top.contains("Example:\n  rdmalb "), "{top}");
    // The subcommands as the top-level help lists them.
    let commands: Vec<&str> = top
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "{commands:?}");
    for c in commands {
        let text = help(&[c]);
        let example = text
            .split("Example:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`rdmalb {c} --help` has no example:\n{text}"));
        assert!(
            example.trim_start().starts_with(&format!("rdmalb {c} ")),
            "`rdmalb {c} --help`: the example is not of `rdmalb {c}`:\n{text}"
        );
    }
}
