//! The admin listener on a real loopback socket: `/status` JSON lists the
//! sites and nodes with their health (driven by the real checker against
//! in-process HTTP backends), `/metrics` renders the Prometheus recorder,
//! unknown paths get 404 and other methods 405, shutdown stops the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rdmalb_proxy::balance::{health, Backends, Outcome};
use rdmalb_proxy::front::admin::{self, AdminState};
use rdmalb_proxy::front::metrics;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::status_until;

/// In-process HTTP backend answering every request with `status`.
struct Backend {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    task: JoinHandle<()>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn backend() -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let status = Arc::new(AtomicU16::new(200));
    let st = status.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let st = st.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| {
                    let code = st.load(Ordering::SeqCst);
                    async move {
                        let mut r = http::Response::new(Empty::<Bytes>::new());
                        *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Backend { addr, status, task }
}

fn config(a: SocketAddr, b: SocketAddr, idle: SocketAddr) -> rdmalb_proxy::config::Config {
    let text = format!(
        r#"
[global]
proxy_id = 7
balance = "leastconn"

[health]
interval = "20ms"
timeout = "2s"
rise = 2
fall = 2
passive_failures = 2

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.test", "*.shop.test"]
path_prefixes = ["/"]
priority = 3
guarantee = 250.0

[[site]]
name = "blog"
hosts = ["blog.test"]

[[node]]
name = "a"
address = "{a}"
site = "shop"

[[node]]
name = "b"
address = "{b}"
site = "blog"

[[node]]
name = "spare"
address = "{idle}"
"#
    );
    rdmalb_proxy::config::parse(&text, Path::new("/etc/rdmalb/test.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
}

struct Admin {
    addr: SocketAddr,
    url: String,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
    backends: Arc<ArcSwap<Backends>>,
    checks: Option<health::HealthChecks>,
    _nodes: Vec<Backend>,
}

async fn start() -> Admin {
    let nodes = vec![backend().await, backend().await, backend().await];
    let cfg = config(nodes[0].addr, nodes[1].addr, nodes[2].addr);
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&cfg, None)));
    let config = Arc::new(ArcSwap::from_pointee(cfg));
    let state = AdminState::new(config, backends.clone(), metrics::install());
    let (stop, rx) = watch::channel(false);
    let checks = health::spawn_checks(backends.clone(), rx.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}");
    let server = tokio::spawn(admin::serve(listener, state, rx));
    Admin {
        addr,
        url,
        stop,
        server,
        backends,
        checks: Some(checks),
        _nodes: nodes,
    }
}

impl Admin {
    async fn stop(mut self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(20), &mut self.server)
            .await
            .expect("admin server stops on shutdown")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), self.checks.take().unwrap().join())
            .await
            .expect("checker stops on shutdown");
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn get_status(url: &str) -> Value {
    let r = client().get(format!("{url}/status")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    serde_json::from_slice(&r.bytes().await.unwrap()).expect("status is JSON")
}

fn node<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} listed in {status:#}"))
}

#[tokio::test]
async fn status_lists_sites_and_nodes_with_health() {
    let admin = start().await;
    let s = get_status(&admin.url).await;
    assert_eq!(s["proxy_id"], 7);
    assert_eq!(s["config_file"], "/etc/rdmalb/test.toml");
    assert_eq!(s["balance"], "leastconn");
    assert!(s["loaded_at_unix"].as_u64().unwrap() > 0);
    assert!(s["loaded_at"].as_str().unwrap().ends_with("GMT"));
    let shop = &s["sites"][0];
    assert_eq!(shop["name"], "shop");
    assert_eq!(
        shop["hosts"],
        serde_json::json!(["shop.test", "*.shop.test"])
    );
    assert_eq!(shop["priority"], 3);
    assert_eq!(shop["guarantee"], 250.0);
    assert_eq!(shop["nodes"], serde_json::json!(["a"]));
    assert_eq!(s["sites"][1]["nodes"], serde_json::json!(["b"]));
    assert_eq!(s["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(node(&s, "a")["site"], "shop");
    assert_eq!(node(&s, "spare")["site"], Value::Null);
    assert_eq!(node(&s, "a")["address"], admin._nodes[0].addr.to_string());

    // An in-flight request shows up.
    let pick = admin.backends.load().pick(0, &[]).unwrap();
    let s = get_status(&admin.url).await;
    assert_eq!(node(&s, "a")["inflight"], 1);
    drop(pick);

    // Checks run (the idle node too) and failing ones take b down.
    admin._nodes[1].status.store(503, Ordering::SeqCst);
    let s = status_until(admin.addr, "b down", |s| node(s, "b")["state"] == "down").await;
    let b = node(&s, "b");
    assert_eq!(b["health"]["down_reason"], "checks");
    assert_eq!(b["health"]["last_check_error"], "status 503");
    assert_eq!(s["sites"][1]["nodes_up"], 0);
    status_until(admin.addr, "spare checked", |s| {
        node(s, "spare")["health"]["checks_total"].as_u64().unwrap() >= 2
    })
    .await;

    // Passive ejection shows its reason, and recovery comes from checks.
    let a = Arc::clone(&admin.backends.load().nodes()[0]);
    admin._nodes[0].status.store(500, Ordering::SeqCst);
    a.report(Outcome::ServerError);
    a.report(Outcome::ServerError);
    let s = get_status(&admin.url).await;
    assert_eq!(node(&s, "a")["state"], "down");
    assert_eq!(node(&s, "a")["health"]["ejections_total"], 1);
    admin._nodes[0].status.store(200, Ordering::SeqCst);
    status_until(admin.addr, "a back up", |s| node(s, "a")["state"] == "up").await;

    admin.stop().await;
}

#[tokio::test]
async fn metrics_render_prometheus_text() {
    let admin = start().await;
    ::metrics::counter!(metrics::REQUESTS_TOTAL, "site" => "shop", "node" => "a", "code_class" => "2xx")
        .increment(3);
    ::metrics::histogram!(metrics::REQUEST_DURATION, "site" => "shop").record(0.003);
    ::metrics::counter!(metrics::UPSTREAM_ERRORS, "node" => "a", "kind" => "connect").increment(1);

    let r = client()
        .get(format!("{}/metrics", admin.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let body = r.text().await.unwrap();
    assert!(
        body.contains(r#"rdmalb_requests_total{site="shop",node="a",code_class="2xx"} 3"#),
        "{body}"
    );
    assert!(body.contains("# HELP rdmalb_requests_total"), "{body}");
    assert!(
        body.contains("# TYPE rdmalb_request_duration_seconds histogram"),
        "{body}"
    );
    assert!(
        body.contains(r#"rdmalb_request_duration_seconds_bucket{site="shop",le="0.005"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(r#"rdmalb_upstream_errors_total{node="a",kind="connect"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(r#"rdmalb_node_up{node="a",site="shop"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(r#"rdmalb_node_up{node="spare",site="idle"} 1"#),
        "{body}"
    );

    // Checks are counted once they run.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = client()
            .get(format!("{}/metrics", admin.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if body.contains(r#"rdmalb_health_checks_total{node="b",result="pass"}"#) {
            break;
        }
        assert!(Instant::now() < deadline, "no health check counter: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin.stop().await;
}

#[tokio::test]
async fn unknown_paths_and_methods_are_refused() {
    let admin = start().await;
    let c = client();
    let r = c.get(format!("{}/nope", admin.url)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = c
        .post(format!("{}/status", admin.url))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET, HEAD");
    let r = c
        .delete(format!("{}/metrics", admin.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = c
        .head(format!("{}/status", admin.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Query strings are ignored.
    let r = c
        .get(format!("{}/status?pretty=1", admin.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    admin.stop().await;
}

#[tokio::test]
async fn mutations_are_refused_without_a_token_file() {
    let admin = start().await;
    let r = client()
        .post(format!("{}/reconfig/move?node=a&site=web", admin.url))
        .header("authorization", "Bearer anything-at-all-0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body = r.text().await.unwrap();
    assert!(body.contains("token_file"), "{body}");
    admin.stop().await;
}

#[tokio::test]
async fn reload_shows_in_status() {
    let admin = start().await;
    let before = get_status(&admin.url).await;
    // New config: node a removed, the rest kept; balance changed.
    let old = admin.backends.load_full();
    let mut cfg = config(
        admin._nodes[0].addr,
        admin._nodes[1].addr,
        admin._nodes[2].addr,
    );
    cfg.nodes.remove(0);
    for (i, n) in cfg.nodes.iter_mut().enumerate() {
        n.index = i;
    }
    cfg.global.balance = rdmalb_proxy::config::Balance::Random;
    let next = Arc::new(Backends::build(&cfg, Some(&old)));
    assert!(next.nodes()[0].same_node(&old.nodes()[1]));
    admin.backends.store(next);
    let s = get_status(&admin.url).await;
    assert_eq!(s["balance"], "random");
    assert_eq!(s["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(s["sites"][0]["nodes"], serde_json::json!([]));
    // b kept its check history across the reload.
    assert!(
        node(&s, "b")["health"]["checks_total"].as_u64()
            >= node(&before, "b")["health"]["checks_total"].as_u64()
    );
    admin.stop().await;
}
