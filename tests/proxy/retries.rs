//! Retries of requests whose node connection broke before any response
//! byte (`global.retries`, `global.retry_on`; docs/proxy.md, "Retries"):
//! an idempotent request without a body is sent again and answered, a POST
//! is never replayed once the node may have received it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::*;
use tokio::io::AsyncWriteExt;

/// A node that reads each request head and drops the connection without
/// answering, counting the requests for `/retry-me` it dropped (not the
/// health checks: the first one comes at a random time).
async fn dropping_node() -> (SocketAddr, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = l.accept().await else {
                continue;
            };
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                if read_head(&mut sock).await.contains(" /retry-me ") {
                    d.fetch_add(1, Ordering::SeqCst);
                }
                drop(sock);
            });
        }
    });
    (addr, dropped, task)
}

/// A node that drops the connection of the first request for each path
/// starting with `/once`, and answers every other request 200 `ok` with
/// `Connection: close` (health checks included).
async fn once_dropping_node() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = l.accept().await else {
                continue;
            };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let head = read_head(&mut sock).await;
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                if path.starts_with("/once") && seen.lock().unwrap().insert(path) {
                    return;
                }
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, task)
}

/// Reads up to the end of a request head.
async fn read_head(s: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const NO_HEALTH: &str = "[health]\npassive_failures = 0\ninterval = \"60s\"\n";
/// `global.retry_on` with broken connections retried (not the default).
const RETRY_ON: &str = "retry_on = [\"conn-failure\", \"empty-response\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_is_retried_on_another_node_after_an_empty_response() {
    let good = Backend::start("good").await;
    let (dropper, dropped, task) = dropping_node().await;
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n{RETRY_ON}{NO_HEALTH}\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}{}",
        node_toml("dropper", dropper, "www"),
        node_toml("good", good.addr, "www"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    for i in 0..6 {
        let resp = get_host(&c, addr, "www.example.com", "/retry-me").await;
        assert_eq!(resp.status().as_u16(), 200, "GET {i}");
    }
    task.abort();
    let dropped = dropped.load(Ordering::SeqCst);
    // Round robin over two nodes: the dropping node got some of the GETs,
    // and each was answered by the good node.
    assert!(dropped >= 1, "no request reached the dropping node");
    assert_eq!(good.requests(), 6);
    let metrics = admin_text(admin, "/metrics").await;
    let retried = metric(
        &metrics,
        "rdmalb_retries_total{site=\"www\",reason=\"empty-response\"}",
    );
    assert_eq!(retried, dropped as f64, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_node_gets_a_get_again_on_a_new_connection_but_never_a_post() {
    let (node, task) = once_dropping_node().await;
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"{{dir}}/access.log\"\n{RETRY_ON}{NO_HEALTH}\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", node, "www"),
    );
    let proxy = Proxy::start(&config, &[addr]);
    let c = client();
    for method in ["GET", "HEAD", "DELETE"] {
        let resp = c
            .request(
                method.parse().unwrap(),
                format!("http://{addr}/once-{method}"),
            )
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{method} was not retried");
    }
    let resp = c
        .post(format!("http://{addr}/once-post"))
        .header("host", "www.example.com")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 502, "a POST was replayed");
    // A POST without a body is not idempotent either.
    let resp = c
        .post(format!("http://{addr}/once-empty-post"))
        .header("host", "www.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 502, "a POST was replayed");
    task.abort();
    let metrics = admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "rdmalb_retries_total{site=\"www\",reason=\"empty-response\"}"
        ),
        3.0,
        "{metrics}"
    );
    // The access log counts the retry (HAProxy's retries field, `+1`).
    let log = proxy.dir.path().join("access.log");
    assert!(
        proxy.wait_for_text(&log, "/once-post"),
        "no access log line"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let get = text.lines().find(|l| l.contains("GET /once-GET")).unwrap();
    assert!(get.contains("/+1 "), "{get}");
    let post = text
        .lines()
        .find(|l| l.contains("POST /once-post"))
        .unwrap();
    assert!(post.contains(" 502 ") && post.contains("/0 "), "{post}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_zero_answers_502_for_a_get() {
    let (node, task) = once_dropping_node().await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\nretries = 0\n{RETRY_ON}{NO_HEALTH}\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", node, "www"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let resp = get_host(&client(), addr, "www.example.com", "/once").await;
    assert_eq!(resp.status().as_u16(), 502);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_only_connect_failures_are_retried() {
    // HAProxy's default `retry-on conn-failure`: a broken connection is
    // answered 502, whatever the method.
    let (node, task) = once_dropping_node().await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n{NO_HEALTH}\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", node, "www"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let resp = get_host(&client(), addr, "www.example.com", "/once").await;
    assert_eq!(resp.status().as_u16(), 502);
    task.abort();
}
