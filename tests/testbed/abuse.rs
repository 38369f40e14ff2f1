//! `rdmalb-testbed abuse` against a real `rdmalb proxy`, at a tiny scale
//! (a couple of seconds, tens of connections): each attack reports what it
//! did, the proxy counts it in a metric, and still answers afterwards. The
//! full-scale, timed comparison with HAProxy is `bench/abuse/run.sh`, never
//! a test; nothing here depends on timing.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{admin_text, client, listener_toml, metric, www_config, Backend, Proxy};

/// Runs the attacker to completion; returns its JSON results.
fn abuse(target: std::net::SocketAddr, attacks: &str, extra: &[&str]) -> serde_json::Value {
    abuse_with(target, attacks, 20, 2000, extra)
}

/// [`abuse`] from `connections` connections at `rate` operations/s.
fn abuse_with(
    target: std::net::SocketAddr,
    attacks: &str,
    connections: usize,
    rate: u64,
    extra: &[&str],
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("abuse.json");
    let out = Command::new(crate::support::testbed_bin())
        .arg("abuse")
        .arg("--target")
        .arg(target.to_string())
        .args([
            "--attack",
            attacks,
            "--duration",
            "2s",
            "--connections",
            &connections.to_string(),
        ])
        .args([
            "--interval",
            "200ms",
            "--rate",
            &rate.to_string(),
            "--host",
            "www.example.com",
        ])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run rdmalb-testbed abuse");
    assert!(
        out.status.success(),
        "rdmalb-testbed abuse failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

async fn still_serves(addr: std::net::SocketAddr) {
    let r = client()
        .get(format!("http://{addr}/after"))
        .header("host", "www.example.com")
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("the proxy answers after the attack");
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_and_rapid_reset_are_reported_and_the_proxy_still_serves() {
    let www = Backend::start("www").await;
    let (listen, addr, admin) = listener_toml();
    // A short head timeout, so slowloris connections meet it within the
    // attack's two seconds.
    let proxy = Proxy::start(
        &www_config(&listen, "[timeouts]\nhttp_request = \"500ms\"\n", www.addr),
        &[addr, admin],
    );
    let results = abuse(addr, "slowloris", &["--source", "127.0.0.2"]);
    let results = results.as_array().expect("a JSON array");
    assert_eq!(results.len(), 1, "{results:?}");
    let slowloris = &results[0];
    assert_eq!(slowloris["attack"], "slowloris");
    assert!(slowloris["connected"].as_u64().unwrap() > 0, "{slowloris}");
    assert!(slowloris["ops"].as_u64().unwrap() > 0, "{slowloris}");
    // The proxy answered the heads that never ended with 408 and closed.
    assert!(
        slowloris["closed_by_server"].as_u64().unwrap() > 0,
        "{slowloris}"
    );
    // h2 counts the streams reset before they were accepted that are
    // pending at once: 4 connections at 20,000 streams/s send 50 HEADERS +
    // RST_STREAM pairs per write, past its limit of 20.
    let reset = abuse_with(addr, "rapid-reset", 4, 20_000, &[]);
    let reset = &reset[0];
    assert_eq!(reset["attack"], "rapid-reset");
    assert!(reset["ops"].as_u64().unwrap() > 0, "{reset}");
    let metrics = admin_text(admin, "/metrics").await;
    assert!(
        metric(&metrics, "rdmalb_client_errors_total{kind=\"408\"}") > 0.0,
        "no 408 counted:\n{metrics}"
    );
    // h2 ends a connection whose streams are reset before they are
    // accepted with GOAWAY(ENHANCE_YOUR_CALM); the proxy counts it.
    assert!(reset["h2_goaways"].as_u64().unwrap() > 0, "{reset}");
    assert!(
        metric(
            &metrics,
            "rdmalb_client_errors_total{kind=\"h2_enhance_your_calm\"}"
        ) > 0.0,
        "the rapid reset is not counted:\n{metrics}"
    );
    still_serves(addr).await;
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_floods_and_a_connection_flood_leave_the_proxy_serving() {
    let www = Backend::start("www").await;
    let (listen, addr, admin) = listener_toml();
    let proxy = Proxy::start(
        &www_config(&listen, "[limits]\nmax_connections = 10\n", www.addr),
        &[addr, admin],
    );
    let results = abuse(
        addr,
        "continuation,hpack-bomb,ping-flood,conn-flood",
        &[
            "--large-path",
            "/download/1000000",
            "--post-path",
            "/upload",
        ],
    );
    let results = results.as_array().expect("a JSON array");
    assert_eq!(results.len(), 4, "{results:?}");
    for r in results {
        assert!(r["connected"].as_u64().unwrap() > 0, "{r}");
        assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
    }
    // The flood filled the listener: accepting had to wait, and says so.
    let metrics = admin_text(admin, "/metrics").await;
    assert!(
        metric(
            &metrics,
            "rdmalb_connections_limited_total{listener=\"web\"}"
        ) > 0.0,
        "the connection flood is not counted:\n{metrics}"
    );
    // The flood's connections are gone with the attacker: a slot is free.
    still_serves(addr).await;
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_do_not_pin_large_node_buffers() {
    let www = Backend::start("www").await;
    let (listen, addr, admin) = listener_toml();
    let proxy = Proxy::start(&www_config(&listen, "", www.addr), &[addr, admin]);
    still_serves(addr).await;
    let (before, _) = proxy.memory_kib();
    // 60 clients that never read a 4 MB response: the node connections
    // read ahead of them until their buffers are full. With hyper's
    // default buffer limit (about 400 KiB) the proxy (a debug build) grew
    // by 75 MiB; at UPSTREAM_MAX_BUF (64 KiB) by 18 MiB.
    let results = abuse_with(
        addr,
        "slow-read",
        60,
        2000,
        &["--large-path", "/download/4000000"],
    );
    assert!(results[0]["connected"].as_u64().unwrap() >= 60, "{results}");
    let (_, peak) = proxy.memory_kib();
    let grew = peak.saturating_sub(before);
    assert!(
        grew < 40 * 1024,
        "60 slow readers grew the proxy by {grew} KiB (from {before} KiB)"
    );
    still_serves(addr).await;
    drop(proxy);
}
