//! The checker against real in-process HTTP servers on loopback. Real time
//! with short intervals: paused time auto-advances while the runtime waits on
//! sockets, which would fire check timeouts spuriously. Assertions are on
//! eventual state within a generous bound, never on timing.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Mutex;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::*;
use crate::balance::Outcome;
use crate::config::Config;
use crate::fixtures::eventually;

/// An HTTP server answering every request with the current `status`,
/// recording the Host and path of each request.
struct Backend {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    task: JoinHandle<()>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn backend(status: u16) -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let status = Arc::new(AtomicU16::new(status));
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, h, sn) = (status.clone(), hits.clone(), seen.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (s, h, sn) = (s.clone(), h.clone(), sn.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (s, h, sn) = (s.clone(), h.clone(), sn.clone());
                    async move {
                        h.fetch_add(1, Ordering::SeqCst);
                        let host = req
                            .headers()
                            .get(header::HOST)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string();
                        sn.lock()
                            .unwrap()
                            .push((host, req.uri().path().to_string()));
                        let mut resp = http::Response::new(Empty::<Bytes>::new());
                        *resp.status_mut() =
                            StatusCode::from_u16(s.load(Ordering::SeqCst)).unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Backend {
        addr,
        status,
        hits,
        seen,
        task,
    }
}

fn config(nodes: &[(&str, SocketAddr, &str)], interval: &str) -> Config {
    let mut text = format!(
        r#"
[health]
interval = "{interval}"
timeout = "2s"
rise = 2
fall = 2
passive_failures = 1

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["*.shop.test", "shop.test"]
health_path = "/alive"
"#
    );
    for (name, addr, site) in nodes {
        text.push_str(&crate::fixtures::node(name, addr, site));
    }
    crate::fixtures::config(&text)
}

#[tokio::test]
async fn check_once_passes_2xx_3xx_and_fails_otherwise() {
    let b = backend(204).await;
    let t = Duration::from_secs(5);
    assert_eq!(
        check_once(b.addr, "h.test", "/p?q=1", t, None, None)
            .await
            .unwrap(),
        StatusCode::NO_CONTENT
    );
    b.status.store(302, Ordering::SeqCst);
    assert!(check_once(b.addr, "h.test", "/", t, None, None)
        .await
        .is_ok());
    b.status.store(503, Ordering::SeqCst);
    let e = check_once(b.addr, "h.test", "/", t, None, None)
        .await
        .unwrap_err();
    assert!(matches!(e, CheckError::Status(s) if s.as_u16() == 503));
    assert_eq!(CheckStatus::haproxy(Some(e.status())).status, "L7STS");
    // Before the first check, HAProxy's INI.
    let ini = CheckStatus::haproxy(None);
    assert_eq!(
        (ini.status, ini.description, ini.code),
        ("INI", "Initializing", 1)
    );
    assert_eq!(e.to_string(), "status 503");
    assert_eq!(
        b.seen.lock().unwrap()[0],
        ("h.test".to_string(), "/p".to_string())
    );
}

#[tokio::test]
async fn check_once_with_expect_status_passes_on_that_status_only() {
    let b = backend(200).await;
    let t = Duration::from_secs(5);
    assert!(check_once(b.addr, "h", "/", t, None, Some(200))
        .await
        .is_ok());
    // A 204 passes the default check but not `expect_status = 200` ...
    b.status.store(204, Ordering::SeqCst);
    let e = check_once(b.addr, "h", "/", t, None, Some(200))
        .await
        .unwrap_err();
    assert!(
        matches!(e, CheckError::Status(s) if s.as_u16() == 204),
        "{e}"
    );
    // ... and a 404 the check that expects it.
    b.status.store(404, Ordering::SeqCst);
    assert!(check_once(b.addr, "h", "/", t, None, Some(404))
        .await
        .is_ok());
    assert!(check_once(b.addr, "h", "/", t, None, None).await.is_err());
}

#[tokio::test]
async fn check_once_reports_connect_failure() {
    // Bind then drop to get a port nobody listens on.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let e = check_once(addr, "h", "/", Duration::from_secs(5), None, None)
        .await
        .unwrap_err();
    assert!(matches!(e, CheckError::Connect(_)), "{e}");
    assert_eq!(e.status(), CheckStatus::L4Con);
    assert_eq!(CheckStatus::haproxy(Some(e.status())).status, "L4CON");
}

#[tokio::test]
async fn check_once_times_out_on_a_silent_server() {
    // Accepts connections (kernel backlog) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let e = check_once(addr, "h", "/", Duration::from_millis(50), None, None)
        .await
        .unwrap_err();
    assert!(matches!(e, CheckError::Timeout(_)), "{e}");
    assert_eq!(e.to_string(), "no response within 50ms");
    // Connected (the backlog took it): HAProxy's layer 7 timeout.
    assert_eq!(e.status(), CheckStatus::L7Tout);
    assert_eq!(CheckStatus::haproxy(Some(e.status())).code, 12);
}

#[tokio::test]
async fn loop_takes_a_node_down_and_back_up() {
    let b = backend(200).await;
    let cfg = config(&[("n1", b.addr, "shop")], "20ms");
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&cfg, None)));
    let (stop, rx) = watch::channel(false);
    let checks = spawn_checks(backends.clone(), rx);
    let node = Arc::clone(&backends.load().nodes()[0]);

    eventually("first checks pass", || node.health().checks_total >= 2).await;
    assert!(node.is_up());
    let h = node.health();
    assert_eq!(
        (h.last_check_status, h.last_check_code),
        (Some(CheckStatus::L7Ok), Some(200))
    );
    // Host is the site's first exact host, path the site's health_path.
    assert_eq!(
        b.seen.lock().unwrap()[0],
        ("shop.test".to_string(), "/alive".to_string())
    );

    b.status.store(500, Ordering::SeqCst);
    eventually("node down after fall failures", || !node.is_up()).await;
    let h = node.health();
    assert_eq!(h.down_reason, Some(crate::balance::DownReason::Checks));
    assert_eq!(h.last_check_error.as_deref(), Some("status 500"));

    b.status.store(200, Ordering::SeqCst);
    eventually("node back up after rise passes", || node.is_up()).await;

    stop.send(true).unwrap();
    checks.join().await;
    // Stopped: no more checks.
    let hits = b.hits.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(b.hits.load(Ordering::SeqCst), hits);
}

#[tokio::test]
async fn passively_ejected_node_recovers_through_active_checks() {
    let b = backend(200).await;
    let cfg = config(&[("n1", b.addr, "shop")], "20ms");
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&cfg, None)));
    let node = Arc::clone(&backends.load().nodes()[0]);
    node.report(Outcome::ConnectFailed);
    assert!(!node.is_up());
    let (_stop, rx) = watch::channel(false);
    let checks = spawn_checks(backends.clone(), rx);
    eventually("recovered by rise passes", || node.is_up()).await;
    assert!(node.health().checks_total >= 2);
    drop(_stop); // dropping the sender also stops the checker
    checks.join().await;
}

#[tokio::test]
async fn loops_follow_reloads_and_keep_state_of_kept_nodes() {
    let a = backend(200).await;
    let b = backend(200).await;
    let c = backend(500).await;
    let cfg1 = config(&[("a", a.addr, "shop"), ("b", b.addr, "shop")], "20ms");
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&cfg1, None)));
    let (stop, rx) = watch::channel(false);
    let checks = spawn_checks(backends.clone(), rx);
    let node_a = Arc::clone(&backends.load().nodes()[0]);
    eventually("a and b checked", || {
        a.hits.load(Ordering::SeqCst) >= 2 && b.hits.load(Ordering::SeqCst) >= 2
    })
    .await;

    // Reload: b removed, c added, a kept (moved to index 1).
    let cfg2 = config(&[("c", c.addr, "shop"), ("a", a.addr, "shop")], "20ms");
    let next = Backends::build(&cfg2, Some(&backends.load()));
    backends.store(Arc::new(next));
    checks.resync();
    let node_c = Arc::clone(&backends.load().nodes()[0]);
    eventually("c checked and found down", || !node_c.is_up()).await;
    let b_hits = b.hits.load(Ordering::SeqCst);
    // a's loop kept running with its counters (not restarted from zero).
    let before = node_a.health().checks_total;
    eventually("a still checked", || {
        node_a.health().checks_total > before + 2
    })
    .await;
    assert!(backends.load().nodes()[1].same_node(&node_a));
    // b's loop was stopped: at most one check that was already in flight.
    assert!(b.hits.load(Ordering::SeqCst) <= b_hits + 1);

    stop.send(true).unwrap();
    checks.join().await;
}

#[tokio::test]
async fn a_node_whose_new_role_is_applied_is_checked_at_once() {
    let b = backend(200).await;
    // One check an hour: within the test only the wake on an applied role
    // can check the node (issue 16: a node that landed waited up to an
    // interval for the check that routes it).
    let mut text = r#"
[health]
interval = "1h"
timeout = "2s"
rise = 1
fall = 2

[[listener]]
listen = "127.0.0.1:8080"
"#
    .to_string();
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&crate::fixtures::site("blog", &["blog.test"]));
    text.push_str(&crate::fixtures::node("n1", b.addr, "shop"));
    let cfg = crate::fixtures::config(&text);
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&cfg, None)));
    let (stop, rx) = watch::channel(false);
    let checks = spawn_checks(backends.clone(), rx);
    let node = Arc::clone(&backends.load().nodes()[0]);
    // Moved to the blog, not applied yet: down at once.
    assert!(node.follow_role(Some(1), false));
    assert!(!node.is_up());
    // Applied: checked as the blog at once, and up.
    assert!(node.follow_role(Some(1), true));
    eventually("the moved node checked and up", || node.is_up()).await;
    assert_eq!(b.seen.lock().unwrap()[0].0, "blog.test");
    assert_eq!(node.health().checks_total, 1);
    stop.send(true).unwrap();
    checks.join().await;
}
