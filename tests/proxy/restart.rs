//! SIGUSR2: the running proxy hands its listening sockets to a new process
//! and drains, while wrk keeps loading it through real nginx; the new
//! process applies listener and certificate changes. A config with
//! problems, or a new process that cannot start, leaves the old one
//! serving.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const WRK: &str = "/usr/bin/wrk";
pub(crate) const SIGUSR2: i32 = 12;

/// A proxy process the test did not start itself (the one a restart
/// started): killed by its pid when the test ends, if still running.
pub(crate) struct Successor(pub(crate) u32);

impl Successor {
    pub(crate) fn alive(&self) -> bool {
        std::fs::read(format!("/proc/{}/cmdline", self.0))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("rdmalb"))
    }
}

impl Drop for Successor {
    fn drop(&mut self) {
        if self.alive() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

/// The certificate `addr` serves in a TLS handshake for www.example.com
/// (any of `roots` is trusted).
async fn served_certificate(addr: SocketAddr, roots: &[&[u8]]) -> Vec<u8> {
    let mut store = rustls::RootCertStore::empty();
    for der in roots {
        store
            .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
            .unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("www.example.com").unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// Sends a GET on `s` and reads until the response's body (`ok\n`) or the
/// end of the stream; returns what was read.
async fn exchange_on(s: &mut tokio::net::TcpStream) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(b"GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
        .await
        .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !text.ends_with(b"\r\n\r\nok\n") {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The number after `key` in `text` (`new_pid=123` in a log line).
pub(crate) fn number_after(text: &str, key: &str) -> Option<u32> {
    let rest = &text[text.rfind(key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr2_hands_the_sockets_over_under_load_and_applies_new_listeners_and_certificates() {
    const TEST: &str =
        "sigusr2_hands_the_sockets_over_under_load_and_applies_new_listeners_and_certificates";
    if !Path::new(WRK).exists() {
        skip(
            TEST,
            &format!("{WRK} is not installed (apt-get install wrk)"),
        );
        return;
    }
    let nginx_dir = tempfile::tempdir().unwrap();
    let app = free_addr();
    let site = format!("server {{ listen {app}; location / {{ return 200 \"ok\\n\"; }} }}\n");
    let Some(_nginx) = GroupNginx::start_with(nginx_dir.path(), app, &site) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (old_cert, old_key, old_der) = certificate(dir.path(), "old", &["www.example.com"]);
    let (new_cert, new_key, new_der) = certificate(dir.path(), "new", &["www.example.com"]);
    let (web, tls, added, admin) = (free_addr(), free_addr(), free_addr(), free_addr());
    let config = |cert: &Path, key: &Path, extra: &str| {
        format!(
            "[[listener]]\nname = \"web\"\nlisten = \"{web}\"\n\n\
             [[listener]]\nname = \"secure\"\nlisten = \"{tls}\"\n\
             tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\n{extra}\
             [admin]\nlisten = \"{admin}\"\n\n\
             [global]\naccess_log = \"off\"\nshutdown_grace = \"20s\"\n\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
            cert.display(),
            key.display(),
            node_toml("nginx", app, "www"),
        )
    };
    // systemd's notification socket, as a `Type=notify` unit has it.
    let notify_path = nginx_dir.path().join("notify");
    let systemd = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    systemd
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let notified = || {
        let mut buf = [0u8; 256];
        let n = systemd.recv(&mut buf).expect("an sd_notify message");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut proxy = Proxy::start_with_env(
        dir,
        &config(&old_cert, &old_key, ""),
        &[web, tls, admin],
        &[("NOTIFY_SOCKET", notify_path.as_os_str())],
    );
    let old_pid = proxy.pid();
    assert_eq!(notified(), "READY=1");
    // A keep-alive connection that will be idle on the old process when
    // the restart happens.
    let mut idle = tokio::net::TcpStream::connect(web).await.unwrap();
    let first = exchange_on(&mut idle).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        !first.to_ascii_lowercase().contains("connection: close"),
        "{first}"
    );
    assert_eq!(
        served_certificate(tls, &[&old_der, &new_der]).await,
        old_der
    );

    // wrk through the plain listener, bounded: 6 s, 8 connections.
    let mut wrk = ChildGuard {
        child: Command::new(WRK)
            .args(["-t1", "-c8", "-d6s", "--timeout", "5s"])
            .args(["-H", "Host: www.example.com"])
            .arg(format!("http://{web}/"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wrk"),
    };
    let wrk_out = wrk.child.stdout.take().unwrap();
    let wrk_report = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut { wrk_out }, &mut text).unwrap();
        text
    });
    // Mid-run: a listener added and the certificate replaced.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let extra = format!("[[listener]]\nname = \"added\"\nlisten = \"{added}\"\n\n");
    std::fs::write(&proxy.config, config(&new_cert, &new_key, &extra)).unwrap();
    signal(old_pid, SIGUSR2);

    // The old process keeps the idle connection open (a request may be on
    // its way); its next response says `Connection: close`, then it closes.
    assert!(
        proxy.wait_for_text(&proxy.stderr, "the new process serves"),
        "{}",
        proxy.stderr_text()
    );
    let last = exchange_on(&mut idle).await;
    assert!(last.starts_with("HTTP/1.1 200"), "{last}");
    assert!(
        last.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{last}"
    );
    let mut rest = [0u8; 16];
    let eof = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncReadExt::read(&mut idle, &mut rest),
    )
    .await;
    assert!(
        matches!(eof, Ok(Ok(0))),
        "closed after that response: {eof:?}"
    );

    let status = proxy.wait_exit();
    assert!(
        status.is_some_and(|s| s.success()),
        "the old process drains and exits 0: {status:?}\n{}",
        proxy.stderr_text()
    );
    let log = proxy.stderr_text();
    let new_pid = number_after(&log, "new_pid=").unwrap_or_else(|| panic!("no new pid:\n{log}"));
    let successor = Successor(new_pid);
    assert_ne!(new_pid, old_pid);
    // systemd follows the service to the new process.
    assert_eq!(notified(), format!("MAINPID={new_pid}\nREADY=1"));
    assert!(successor.alive(), "{log}");
    assert!(log.contains("the new process serves"), "{log}");
    assert_eq!(
        served_certificate(tls, &[&old_der, &new_der]).await,
        new_der,
        "the replaced certificate is served after the restart"
    );
    let c = client();
    for addr in [web, added] {
        let resp = get_host(&c, addr, "www.example.com", "/").await;
        assert_eq!(resp.status(), 200, "{addr}");
    }
    assert!(admin_text(admin, "/status").await.contains("www"));

    let report = wrk_report.await.unwrap();
    let _ = wrk.child.wait();
    let requests = report
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .map(|(n, _)| n.to_string())
        })
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no request count in wrk's report:\n{report}"));
    assert!(requests > 0, "{report}");
    assert!(
        !report.contains("Socket errors"),
        "no connect/read/write/timeout error across the restart:\n{report}\n{}",
        proxy.stderr_text()
    );
    assert!(!report.contains("Non-2xx"), "{report}");

    // A config with problems: logged, and the running process stays.
    std::fs::write(&proxy.config, "[[listener]]\nname = 7\n").unwrap();
    signal(new_pid, SIGUSR2);
    assert!(
        proxy.wait_for_text(
            &proxy.stderr,
            "restart rejected; this process keeps serving"
        ),
        "{}",
        proxy.stderr_text()
    );
    assert!(proxy
        .stderr_text()
        .contains("restart rejected: config problem"));

    // A valid config the new process cannot start with (its new listener's
    // address is taken): it exits, the running one keeps serving.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap();
    let extra = format!("[[listener]]\nname = \"taken\"\nlisten = \"{taken_addr}\"\n\n");
    std::fs::write(&proxy.config, config(&new_cert, &new_key, &extra)).unwrap();
    signal(new_pid, SIGUSR2);
    assert!(
        proxy.wait_for_text(&proxy.stderr, "exited before serving"),
        "{}",
        proxy.stderr_text()
    );
    assert!(successor.alive());
    let resp = get_host(&c, web, "www.example.com", "/").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        served_certificate(tls, &[&old_der, &new_der]).await,
        new_der
    );

    signal(new_pid, SIGTERM);
    eventually(
        "the new process exits on SIGTERM",
        Duration::from_secs(30),
        || async {
            (!successor.alive())
                .then_some(())
                .ok_or("still running".to_string())
        },
    )
    .await;
}
