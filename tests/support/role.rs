//! Shared by the role-application end-to-end tests: the real `rdmalb
//! sidecar` binary on a config in a temp dir, and what a proxy's agent does
//! to the node's window (claim by CAS, wait for the sidecar's verdict).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{eventually, ChildGuard};
use rdmalb_window::layout::word;
use rdmalb_window::{RemoteWindow, RoleState, RoleStatus, RoleStatusCode, RoleWord, SiteSlot};

/// A running `rdmalb sidecar`; its stderr goes to `<dir>/sidecar.log`.
pub struct SidecarProc {
    pub guard: ChildGuard,
    pub log: PathBuf,
    /// Other log files shown with the sidecar's on failure (the app's).
    pub app_log: Option<PathBuf>,
}

impl SidecarProc {
    /// Writes `config` to `<dir>/sidecar.toml`, starts the binary and waits
    /// until its admin endpoint `admin` accepts connections.
    pub fn start(dir: &Path, config: &str, admin: SocketAddr, app_log: Option<PathBuf>) -> Self {
        let cfg = dir.join("sidecar.toml");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.join("sidecar.log");
        let child = Command::new(crate::support::RDMALB)
            .arg("sidecar")
            .arg("-c")
            .arg(&cfg)
            .env("RDMALB_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn rdmalb sidecar");
        let mut sc = SidecarProc {
            guard: ChildGuard { child },
            log,
            app_log,
        };
        for _ in 0..800 {
            if let Ok(Some(status)) = sc.guard.child.try_wait() {
                panic!("sidecar exited ({status}):\n{}", sc.logs());
            }
            if std::net::TcpStream::connect(admin).is_ok() {
                return sc;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("sidecar did not start:\n{}", sc.logs());
    }

    /// The sidecar's log and the app's, for failure messages.
    pub fn logs(&self) -> String {
        let sc = std::fs::read_to_string(&self.log).unwrap_or_default();
        let app = self
            .app_log
            .as_ref()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default();
        format!("--- sidecar:\n{sc}\n--- app:\n{app}")
    }

    pub fn assert_running(&mut self) {
        assert!(
            matches!(self.guard.child.try_wait(), Ok(None)),
            "sidecar died:\n{}",
            self.logs()
        );
    }
}

/// What a proxy's agent does: read the role word and CAS it to
/// `next(site, SWITCHING)`; the CAS must win (nobody else is claiming).
pub async fn claim(w: &dyn RemoteWindow, site: SiteSlot) -> RoleWord {
    let raw = w.read_word(word::ROLE).await.unwrap();
    let new = RoleWord::decode(raw)
        .unwrap()
        .next(site, RoleState::Switching);
    assert_eq!(
        w.compare_swap(word::ROLE, raw, new.encode()).await.unwrap(),
        raw,
        "claim lost"
    );
    new
}

/// Waits (bounded) until the sidecar's status word reports on `epoch` with
/// a final code (not APPLYING); returns it and ROLE_APPLIED.
pub async fn outcome(sc: &SidecarProc, w: &dyn RemoteWindow, epoch: u64) -> (RoleStatus, u64) {
    eventually(
        &format!("the sidecar's verdict on epoch {epoch}"),
        Duration::from_secs(30),
        || async move {
            let st = RoleStatus::decode(w.read_word(word::ROLE_STATUS).await.unwrap()).unwrap();
            let applied = w.read_word(word::ROLE_APPLIED).await.unwrap();
            if st.epoch == epoch && st.code != RoleStatusCode::Applying {
                Ok((st, applied))
            } else {
                Err(format!("status {st}, applied {applied}\n{}", sc.logs()))
            }
        },
    )
    .await
}

/// GET `path` on `app` with `Host: host`; returns the status and the value
/// of response header `site_header` (empty when absent).
pub async fn served(app: SocketAddr, host: &str, path: &str, site_header: &str) -> (u16, String) {
    let r = crate::support::client()
        .get(format!("http://{app}{path}"))
        .header("host", host)
        .send()
        .await
        .unwrap();
    let site = r
        .headers()
        .get(site_header)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (r.status().as_u16(), site)
}

/// GET a URL and parse the body as JSON.
pub async fn get_json(url: &str) -> serde_json::Value {
    let text = crate::support::client()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {text}"))
}
