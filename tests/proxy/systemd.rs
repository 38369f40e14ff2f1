//! The shipped systemd units (conf/systemd/): valid for systemd's own
//! checker (`systemd-analyze verify`, with the real binary in place of
//! /usr/local/bin/rdmalb), and wired as the docs say: reload = check, then
//! SIGHUP; stop = SIGTERM with time for the drain; readiness and the main
//! pid after a restart by sd_notify.

use std::path::Path;
use std::process::Command;

use crate::support::{skip, RDMALB};

const UNITS: [(&str, &str); 2] = [
    ("rdmalb-proxy.service", "rdmalb-proxy.service"),
    ("rdmalb-sidecar@.service", "rdmalb-sidecar@n1.service"),
];

fn unit(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conf/systemd")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    let test = "proxy::systemd::the_units_pass_systemd_analyze_verify";
    let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(analyze) = analyze else {
        skip(
            test,
            "systemd-analyze is not installed (apt-get install systemd)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (file, instance) in UNITS {
        let text = unit(file).replace("/usr/local/bin/rdmalb", RDMALB);
        let p = dir.path().join(instance);
        std::fs::write(&p, text).unwrap();
        let out = Command::new(analyze)
            .arg("verify")
            .arg(&p)
            .output()
            .expect("run systemd-analyze");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{file}: systemd-analyze verify: {}\n{said}",
            out.status
        );
    }
}

#[test]
fn reload_checks_then_signals_and_stop_leaves_time_to_drain() {
    let proxy = unit("rdmalb-proxy.service");
    let lines: Vec<&str> = proxy.lines().map(str::trim).collect();
    let reloads: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("ExecReload="))
        .collect();
    assert_eq!(
        reloads,
        [
            &"ExecReload=/usr/local/bin/rdmalb check -c /etc/rdmalb/rdmalb.toml",
            &"ExecReload=/bin/kill -HUP $MAINPID"
        ],
        "a broken file is refused before the signal"
    );
    assert!(lines.contains(&"KillSignal=SIGTERM"));
    // The proxy says READY=1 once it serves, and after a restart (SIGUSR2)
    // the new process sends MAINPID=, which systemd accepts only from a
    // process other than the main one with NotifyAccess=all.
    assert!(lines.contains(&"Type=notify"));
    assert!(lines.contains(&"NotifyAccess=all"));
    // TimeoutStopSec above the default shutdown_grace (10s), or systemd
    // kills the proxy mid-drain.
    let stop = lines
        .iter()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .expect("TimeoutStopSec");
    let stop = rdmalb_base::duration::parse(stop).expect("a duration");
    assert!(stop > std::time::Duration::from_secs(10), "{stop:?}");
    let sidecar = unit("rdmalb-sidecar@.service");
    assert!(sidecar.contains("StateDirectory=rdmalb"));
    assert!(sidecar.contains("-c /etc/rdmalb/sidecar-%i.toml"));
}
