//! Health and balancing through the real `rdmalb proxy` binary: passive
//! ejection by failed requests, active checks keeping a node out and bringing
//! it back, a down node receiving no traffic, and a SIGHUP reload that changes
//! the backend set while keeping the health of unchanged nodes. Observed via
//! responses and the admin `/status` and `/metrics`. No timing assertions:
//! every wait is for an eventual state with a generous bound.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::support::{client, free_addr, signal, status_until, Proxy, SIGHUP};

/// An in-process backend: `/healthz` answers `health`, every other path
/// answers `app`; responses carry `x-node: <name>`.
struct Node {
    name: &'static str,
    addr: SocketAddr,
    health: Arc<AtomicU16>,
    app: Arc<AtomicU16>,
    served: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn node(name: &'static str) -> Node {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let health = Arc::new(AtomicU16::new(200));
    let app = Arc::new(AtomicU16::new(200));
    let served = Arc::new(AtomicUsize::new(0));
    let (h, a, s) = (health.clone(), app.clone(), served.clone());
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (h, a, s) = (h.clone(), a.clone(), s.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let code = if req.uri().path() == "/healthz" {
                        h.load(Ordering::SeqCst)
                    } else {
                        s.fetch_add(1, Ordering::SeqCst);
                        a.load(Ordering::SeqCst)
                    };
                    async move {
                        let resp = http::Response::builder()
                            .status(code)
                            .header("x-node", name)
                            .body(Full::new(Bytes::from_static(b"hello\n")))
                            .unwrap();
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Node {
        name,
        addr,
        health,
        app,
        served,
        task,
    }
}

fn config_text(listen: SocketAddr, admin: SocketAddr, nodes: &[&Node]) -> String {
    let mut text = format!(
        r#"
[global]
balance = "roundrobin"
access_log = "off"

[health]
interval = "100ms"
timeout = "2s"
rise = 2
fall = 2
passive_failures = 2

[admin]
listen = "{admin}"

[[listener]]
name = "web"
listen = "{listen}"

[[site]]
name = "shop"
hosts = ["shop.test"]
health_path = "/healthz"
"#
    );
    for n in nodes {
        text.push_str(&format!(
            "\n[[node]]\nname = \"{}\"\naddress = \"{}\"\nsite = \"shop\"\n",
            n.name, n.addr
        ));
    }
    text
}

/// One request through the proxy: (status, x-node).
async fn request(listen: SocketAddr) -> (u16, String) {
    let r = client()
        .get(format!("http://{listen}/page"))
        .header("host", "shop.test")
        .send()
        .await
        .unwrap();
    let node = r
        .headers()
        .get("x-node")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (r.status().as_u16(), node)
}

fn node_status<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {s:#}"))
}

#[tokio::test]
async fn ejection_down_and_recovery_through_the_proxy() {
    let a = node("a").await;
    let b = node("b").await;
    let (listen, admin) = (free_addr(), free_addr());
    let proxy = Proxy::start(&config_text(listen, admin, &[&a, &b]), &[listen, admin]);

    // Both serve: round robin reaches both.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let (code, from) = request(listen).await;
        assert_eq!(code, 200);
        seen.insert(from);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");

    // a's application fails while its health endpoint passes: only passive
    // health can notice. Send traffic until a is ejected.
    a.app.store(500, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        request(listen).await;
        let s = crate::support::admin_status(admin).await;
        if node_status(&s, "a")["health"]["ejections_total"]
            .as_u64()
            .unwrap()
            >= 1
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a never ejected: {s:#}\n{}",
            proxy.stderr_text()
        );
    }

    // Now the checks fail too: a goes (or stays) down and gets no traffic.
    a.health.store(500, Ordering::SeqCst);
    status_until(admin, "a down by failed checks", |s| {
        let h = &node_status(s, "a")["health"];
        !h["up"].as_bool().unwrap() && h["consecutive_fail"].as_u64().unwrap() >= 2
    })
    .await;
    let before = a.served.load(Ordering::SeqCst);
    for _ in 0..20 {
        assert_eq!(request(listen).await, (200, "b".to_string()));
    }
    assert_eq!(
        a.served.load(Ordering::SeqCst),
        before,
        "a down node got traffic"
    );
    let s = crate::support::admin_status(admin).await;
    assert_eq!(node_status(&s, "a")["state"], "down");
    assert_eq!(
        node_status(&s, "a")["health"]["last_check_error"],
        "status 500"
    );
    assert_eq!(s["sites"][0]["nodes_up"], 1);
    let metrics = crate::support::admin_text(admin, "/metrics").await;
    assert!(
        metrics.contains(r#"rdmalb_node_up{node="a",site="shop"} 0"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"rdmalb_node_up{node="b",site="shop"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"node="a",code_class="5xx"} "#),
        "{metrics}"
    );

    // Repaired: rise passes bring a back and it serves again.
    a.health.store(200, Ordering::SeqCst);
    a.app.store(200, Ordering::SeqCst);
    status_until(admin, "a up again", |s| {
        node_status(s, "a")["state"] == "up"
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if request(listen).await == (200, "a".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "a never served again");
    }
    assert!(
        proxy
            .stderr_text()
            .contains("node ejected by passive health"),
        "{}",
        proxy.stderr_text()
    );
    assert!(
        proxy
            .stderr_text()
            .contains("node up: health checks passed"),
        "{}",
        proxy.stderr_text()
    );
}

#[tokio::test]
async fn reload_changes_the_backend_set_and_keeps_health() {
    let a = node("a").await;
    let b = node("b").await;
    let c = node("c").await;
    a.health.store(503, Ordering::SeqCst);
    let (listen, admin) = (free_addr(), free_addr());
    let proxy = Proxy::start(&config_text(listen, admin, &[&a, &b]), &[listen, admin]);
    let path = proxy.config.clone();
    let before = status_until(admin, "a down", |s| node_status(s, "a")["state"] == "down").await;
    let a_checks = node_status(&before, "a")["health"]["checks_total"]
        .as_u64()
        .unwrap();

    // Reload: b removed, c added, a kept (and moved).
    write(&path, &config_text(listen, admin, &[&c, &a]));
    signal(proxy.pid(), SIGHUP);
    let s = status_until(admin, "reload applied", |s| {
        s["nodes"].as_array().unwrap().len() == 2 && s["nodes"][0]["name"] == "c"
    })
    .await;
    // a kept its state: still down, its check count did not restart.
    let a_now = node_status(&s, "a");
    assert_eq!(a_now["state"], "down");
    assert_eq!(a_now["index"], 1);
    assert!(a_now["health"]["checks_total"].as_u64().unwrap() >= a_checks);
    assert_eq!(s["sites"][0]["nodes"], serde_json::json!(["c", "a"]));

    // Traffic goes to c only (b is gone, a is down).
    let b_before = b.served.load(Ordering::SeqCst);
    for _ in 0..10 {
        assert_eq!(request(listen).await, (200, "c".to_string()));
    }
    assert_eq!(b.served.load(Ordering::SeqCst), b_before);

    // A bad config is rejected and the current one keeps serving.
    write(&path, "[[site]]\nname = 1\n");
    signal(proxy.pid(), SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !proxy.stderr_text().contains("reload rejected") {
        assert!(
            Instant::now() < deadline,
            "no rejection logged:\n{}",
            proxy.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(request(listen).await, (200, "c".to_string()));
    assert_eq!(
        crate::support::admin_status(admin).await["nodes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// `[[node]] check = false` (HAProxy's `server` without `check`): a node
/// whose health path fails is assumed up and keeps its traffic, and failed
/// requests do not eject it (HAProxy never marks an unchecked server down);
/// its checked neighbour with the same failing health path is taken down.
#[tokio::test]
async fn a_node_without_check_is_assumed_up() {
    let a = node("a").await;
    let b = node("b").await;
    let c = node("c").await;
    a.health.store(500, Ordering::SeqCst);
    b.health.store(500, Ordering::SeqCst);
    let (listen, admin) = (free_addr(), free_addr());
    let text = config_text(listen, admin, &[&a, &b, &c]).replace(
        &format!("name = \"a\"\naddress = \"{}\"\n", a.addr),
        &format!("name = \"a\"\naddress = \"{}\"\ncheck = false\n", a.addr),
    );
    let text = text.replace(
        &format!("name = \"b\"\naddress = \"{}\"\n", b.addr),
        &format!("name = \"b\"\naddress = \"{}\"\ncheck = true\n", b.addr),
    );
    assert!(text.contains("check = false") && text.contains("check = true"));
    let proxy = Proxy::start(&text, &[listen, admin]);

    // b (checked, same failing path) goes down; by then a's loop has had
    // as many rounds, and c's count proves checks keep running.
    status_until(admin, "b down, c checked several times", |s| {
        node_status(s, "b")["state"] == "down"
            && node_status(s, "c")["health"]["checks_total"]
                .as_u64()
                .unwrap()
                >= 6
    })
    .await;
    let s = crate::support::admin_status(admin).await;
    let a_status = node_status(&s, "a");
    assert_eq!(a_status["state"], "up", "{s:#}");
    assert_eq!(a_status["health"]["check"], false, "{s:#}");
    assert_eq!(a_status["health"]["checks_total"], 0, "{s:#}");
    assert_eq!(node_status(&s, "b")["health"]["check"], true, "{s:#}");

    // a keeps its share of the traffic; b gets none.
    let b_before = b.served.load(Ordering::SeqCst);
    let mut from_a = 0;
    for _ in 0..10 {
        let (code, from) = request(listen).await;
        assert_eq!(code, 200);
        from_a += usize::from(from == "a");
    }
    assert!(
        from_a >= 4,
        "a served {from_a} of 10\n{}",
        proxy.stderr_text()
    );
    assert_eq!(b.served.load(Ordering::SeqCst), b_before);

    // Failed requests do not eject an unchecked node (passive_failures = 2).
    a.app.store(500, Ordering::SeqCst);
    for _ in 0..10 {
        request(listen).await;
    }
    let s = crate::support::admin_status(admin).await;
    assert_eq!(node_status(&s, "a")["state"], "up", "{s:#}");
    assert_eq!(
        node_status(&s, "a")["health"]["ejections_total"],
        0,
        "{s:#}"
    );
}
