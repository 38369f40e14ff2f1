//! The `rdmalb` binary as an operator runs it: `rdmalb check --sidecar`
//! exit codes and messages, and `rdmalb sidecar -c FILE` publishing into a
//! window file until SIGTERM, then removing it and exiting 0.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdmalb_window::{read_load, site_table_hash, Expect, LoadRead, ReadPolicy, ShmWindow};

const BIN: &str = crate::support::RDMALB;

/// Kills the child on drop, so a failed assertion never leaks a sidecar.
struct Guard(Option<Child>);

impl Guard {
    fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        let child = self.0.as_mut().expect("child");
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                self.0 = None;
                return st;
            }
            assert!(Instant::now() < deadline, "sidecar did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn check_reports_every_problem_with_exit_status_2() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bad.toml");
    std::fs::write(&p, "node = \"n1\"\nnode_id = 0\nsites = [\"a\", \"a\"]\n[window.shm]\npath = \"x\"\n[[collector]]\nkind = \"psychic\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--sidecar", "-c"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for key in [
        "node_id:",
        "sites[1]:",
        "window.shm.path:",
        "collector[0].kind:",
    ] {
        assert!(
            err.contains(&format!("{}: {key}", p.display())),
            "{key} not reported:\n{err}"
        );
    }
}

#[test]
fn check_accepts_the_shipped_example() {
    // conf/sidecar.toml names cluster.psk beside it; check a copy next to a key.
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("sidecar.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/conf/sidecar.toml"),
        &conf,
    )
    .unwrap();
    let psk = d.path().join("cluster.psk");
    std::fs::write(&psk, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = Command::new(BIN)
        .args(["check", "--sidecar", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn sidecar_binary_publishes_until_sigterm_then_cleans_up() {
    let d = tempfile::tempdir().unwrap();
    let window = d.path().join("window");
    let conf = d.path().join("sidecar.toml");
    std::fs::write(
        &conf,
        format!(
            "node = \"nb\"\nnode_id = 11\nsites = [\"a\", \"b\"]\n[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\ninterval = \"10ms\"\n",
            window.display()
        ),
    )
    .unwrap();
    let mut child = Guard(Some(
        Command::new(BIN)
            .args(["sidecar", "-c"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let expect = Expect {
        node_id: Some(11),
        site_hash: Some(site_table_hash(&["a", "b"])),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let policy = ReadPolicy {
        retries: 8,
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    };
    // Wait for the window and for /proc numbers in it.
    loop {
        if let Ok(w) = ShmWindow::open(&window, &expect) {
            if let LoadRead::Fresh(b) = read_load(&w, &policy).await {
                if b.sample.mem_used_ppm > 0 && b.sample.cpu_util_ppm > 0 {
                    break;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no fresh load with /proc numbers from the sidecar binary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    send_signal(child.pid(), "TERM");
    let st = child.wait_exit(Duration::from_secs(20));
    assert!(st.success(), "exit status {st:?}");
    assert!(!window.exists(), "window file left behind");
}

/// Sends a signal to the child we spawned with the `kill` command (std
/// has no signal API, and the tests stay free of `unsafe`).
fn send_signal(pid: i32, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid} failed");
}
