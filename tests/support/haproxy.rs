//! Debian's HAProxy, started by a test on its own config in a temp dir, in
//! the foreground (`-db`) and in its own process group, so dropping the
//! guard stops it (and any worker) even when the test fails.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::group::{skip, GroupChild};

/// Where Debian installs HAProxy.
pub const HAPROXY: &str = "/usr/sbin/haproxy";

/// A running HAProxy; stopped with its process group on drop.
pub struct Haproxy {
    _child: GroupChild,
}

impl Haproxy {
    /// Writes `config` to `dir/haproxy.cfg`, checks it with `haproxy -c`
    /// (a config error fails the test with HAProxy's message), starts
    /// HAProxy and returns once every address in `wait_for` accepts
    /// connections (bounded wait). `None` when HAProxy is not installed:
    /// the test skips (a failure under `CI=true`, see [`skip`]).
    pub fn start(test: &str, dir: &Path, config: &str, wait_for: &[SocketAddr]) -> Option<Haproxy> {
        if !Path::new(HAPROXY).exists() {
            skip(
                test,
                &format!("{HAPROXY} is not installed (apt-get install haproxy)"),
            );
            return None;
        }
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, config).unwrap();
        let check = Command::new(HAPROXY)
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .output()
            .expect("run haproxy -c");
        assert!(
            check.status.success(),
            "haproxy rejects the test's config:\n{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let child = GroupChild::spawn(Command::new(HAPROXY).arg("-db").arg("-f").arg(&cfg))
            .expect("start haproxy");
        for addr in wait_for {
            let mut up = false;
            for _ in 0..400 {
                if std::net::TcpStream::connect(addr).is_ok() {
                    up = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            assert!(up, "haproxy does not listen on {addr}");
        }
        Some(Haproxy { _child: child })
    }
}
