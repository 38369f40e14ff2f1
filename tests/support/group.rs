//! A child process in its own process group, stopped with its whole group
//! on drop, and Debian's nginx started that way. Shared by the integration
//! tests (`tests/common`) and `bench/role_switch.rs` (included there by
//! path: a bench cannot use the tests' crate), so it depends on std only.
// Also compiled into bench/role_switch.rs, which uses what the tests do not.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where Debian installs nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// A child started in its own process group (output discarded). Dropping
/// it stops the child and everything it started: SIGTERM to the child, a
/// bounded wait, then SIGKILL to the group.
pub struct GroupChild {
    child: Child,
}

impl GroupChild {
    /// Spawns `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<GroupChild> {
        Self::spawn_with_stdio(cmd.stdout(Stdio::null()).stderr(Stdio::null()))
    }

    /// [`spawn`](Self::spawn) with the standard streams `cmd` sets up (pipes
    /// are taken through [`child`](Self::child)).
    pub fn spawn_with_stdio(cmd: &mut Command) -> std::io::Result<GroupChild> {
        let child = cmd.process_group(0).spawn()?;
        Ok(GroupChild { child })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child, for its pipes and exit status.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        let pid = self.child.id();
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        for _ in 0..200 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// Debian's nginx as an unmodified backend app for role-application tests
/// and benches: its own prefix `dir`, pid file and temp dirs, and an
/// `include` of `dir/site.conf` (the file a sidecar owns; it starts as a
/// placeholder answering 404 on `app`). It runs with a master process (a
/// single-process nginx does not listen on a reloaded config), in its own
/// process group so that dropping the guard stops master and workers
/// together.
pub struct GroupNginx {
    child: GroupChild,
}

/// Whether Debian's nginx is installed. Without it the calling test skips:
/// see [`skip`].
pub fn nginx_available(test: &str) -> bool {
    if Path::new(NGINX).exists() {
        return true;
    }
    skip(
        test,
        &format!("{NGINX} is not installed (apt-get install nginx)"),
    );
    false
}

/// A test that cannot run here because something it needs is missing.
/// Under `CI=true` that fails the test: a missing dependency must not pass
/// as a test. Elsewhere the skip is printed and, when `RDMALB_TEST_SKIPS`
/// names a file, recorded there; `scripts/test.sh` counts those lines as
/// skipped, not passed, in its summary.
pub fn skip(test: &str, why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: {why}; under CI=true a missing dependency fails the test (bash scripts/setup.sh installs it)"
    );
    eprintln!("SKIPPED {test}: {why}");
    if let Some(path) = std::env::var_os("RDMALB_TEST_SKIPS") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{test}: {why}");
        }
    }
}

impl GroupNginx {
    /// The process guard alone (nginx keeps running until it drops).
    pub fn into_child(self) -> GroupChild {
        self.child
    }

    /// Starts nginx in `dir` listening on `app`, and returns once its pid
    /// file exists and `app` accepts connections (bounded wait). `None` when
    /// nginx is not installed (the caller skips, printing why).
    pub fn start(dir: &Path, app: SocketAddr) -> Option<GroupNginx> {
        Self::start_with(
            dir,
            app,
            &format!("server {{ listen {app}; return 404; }}\n"),
        )
    }

    /// [`start`](Self::start) with `site` as the first `site.conf` (it must
    /// listen on `app`).
    pub fn start_with(dir: &Path, app: SocketAddr, site: &str) -> Option<GroupNginx> {
        if !nginx_available("nginx") {
            return None;
        }
        let p = dir.display();
        std::fs::write(
            dir.join("nginx.conf"),
            format!(
                "user root;\nworker_processes 1;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\n\
                 events {{ worker_connections 128; }}\nhttp {{\n    access_log off;\n\
                 client_body_temp_path {p}/cb;\n    proxy_temp_path {p}/px;\n    fastcgi_temp_path {p}/fc;\n\
                 uwsgi_temp_path {p}/uw;\n    scgi_temp_path {p}/sc;\n    include {p}/site.conf;\n}}\n"
            ),
        )
        .unwrap();
        std::fs::write(dir.join("site.conf"), site).unwrap();
        let child = GroupChild::spawn(
            Command::new(NGINX)
                .arg("-p")
                .arg(dir)
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .args(["-g", "daemon off;"]),
        )
        .expect("start nginx");
        for _ in 0..400 {
            if dir.join("nginx.pid").exists() && std::net::TcpStream::connect(app).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Some(GroupNginx { child })
    }
}
