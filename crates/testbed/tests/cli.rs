//! The `rdmalb-testbed` binary's own command line: it carries the four
//! testbed commands (and the appliance's `rdmalb` carries none of them),
//! a seeded trace is reproducible, and a broken spec is refused with its
//! problems. The end-to-end runs of these commands are in the workspace's
//! `tests/testbed/`.

use std::process::{Command, Output};

fn testbed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmalb-testbed"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run rdmalb-testbed")
}

#[test]
fn help_lists_the_testbed_commands() {
    let o = testbed(&["--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for cmd in ["testsrv", "trace", "load", "cluster"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(cmd)),
            "`{cmd}` missing from:\n{help}"
        );
    }
    for appliance in ["proxy", "sidecar", "check"] {
        assert!(
            !help.lines().any(|l| l.trim_start().starts_with(appliance)),
            "appliance command `{appliance}` in the testbed's help:\n{help}"
        );
    }
}

#[test]
fn a_seeded_trace_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |name: &str, seed: &str| {
        let p = dir.path().join(name);
        let o = testbed(&[
            "trace",
            "zipf",
            "--alpha",
            "0.8",
            "--sites",
            "a,b,c",
            "-n",
            "200",
            "--seed",
            seed,
            "-o",
            p.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&p).unwrap();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (one, again, other) = (gen("1", "7"), gen("2", "7"), gen("3", "8"));
    assert_eq!(one.len(), 200);
    assert_eq!(one, again, "same seed, same trace");
    assert_ne!(one, other, "another seed, another trace");
}

#[test]
fn a_broken_node_config_is_refused_with_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("node.toml");
    std::fs::write(&conf, "listen = \"nowhere\"\nslotz = 3\n").unwrap();
    let o = testbed(&["testsrv", "-c", conf.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "exit status 2 for an invalid config"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("node.toml"), "names the file: {err}");
    assert!(err.contains("slotz"), "names the unknown key: {err}");
}
