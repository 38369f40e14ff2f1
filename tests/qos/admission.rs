//! The `[qos]` admission queue end to end: a real proxy process at
//! `qos.max_inflight = 1` in front of two in-process HTTP backends. While
//! one long request holds the only slot, requests of a best-effort site
//! queue first and requests of a guaranteed site after them; VirtualClock
//! dispatch serves the guaranteed site's first, FIFO the other way round
//! (the slot serialises the requests, so the order is exact, not a timing
//! claim). Overload answers: a full site queue and a queue timeout get 503
//! with `Retry-After` and a body naming the setting, are counted in
//! `/metrics`, and the proxy keeps serving.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;

fn config(listen: &str, qos: &str, gold: SocketAddr, bronze: SocketAddr) -> String {
    format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[timeouts]\nqueue = \"2s\"\n\n[qos]\nmax_inflight = 1\nbest_effort_floor = 1.0\n{qos}\n\n\
         [[site]]\nname = \"gold\"\nhosts = [\"gold.test\"]\nguarantee = 100\npriority = 10\n\n\
         [[site]]\nname = \"bronze\"\nhosts = [\"bronze.test\"]\n\n{}{}",
        node_toml("g1", gold, "gold"),
        node_toml("b1", bronze, "bronze")
    )
}

/// Waits until the proxy reports `want` for the metric line `prefix`.
async fn wait_metric(admin: SocketAddr, prefix: &str, want: f64) {
    eventually(prefix, Duration::from_secs(20), || async {
        let v = metric(&crate::support::admin_text(admin, "/metrics").await, prefix);
        if v == want {
            Ok(())
        } else {
            Err(format!("{prefix} = {v}, want {want}"))
        }
    })
    .await
}

/// Sends one request for `host` in a task; it returns its response status,
/// `Retry-After`, body and the instant the response ended.
fn send(
    addr: SocketAddr,
    host: &'static str,
    path: &'static str,
) -> tokio::task::JoinHandle<(u16, Option<String>, String, std::time::Instant)> {
    tokio::spawn(async move {
        let resp = client()
            .get(format!("http://{addr}{path}"))
            .header("host", host)
            .send()
            .await
            .expect("response");
        let status = resp.status().as_u16();
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or("").to_string());
        let body = resp.text().await.unwrap_or_default();
        (status, retry, body, std::time::Instant::now())
    })
}

/// Holds the slot, queues 3 bronze then 3 gold requests, and returns the
/// sites in the order their responses ended.
async fn completion_order(dispatch: &str) -> Vec<&'static str> {
    let gold = Backend::start("gold").await;
    let bronze = Backend::start("bronze").await;
    let (listen, addr, admin) = listener_toml();
    let qos = format!("dispatch = \"{dispatch}\"");
    let proxy = Proxy::start(
        &config(&listen, &qos, gold.addr, bronze.addr),
        &[addr, admin],
    );
    let holder = send(addr, "bronze.test", "/slow/1500");
    wait_metric(admin, "rdmalb_qos_inflight ", 1.0).await;
    let mut queued = Vec::new();
    for (site, host) in [("bronze", "bronze.test"), ("gold", "gold.test")] {
        for n in 1..=3 {
            queued.push((site, send(addr, host, "/slow/20")));
            wait_metric(
                admin,
                &format!("rdmalb_qos_queued{{site=\"{site}\"}} "),
                n as f64,
            )
            .await;
        }
    }
    let (status, ..) = holder.await.unwrap();
    assert_eq!(status, 200, "{}", proxy.stderr_text());
    let mut ends = Vec::new();
    for (site, task) in queued {
        let (status, _, body, end) = task.await.unwrap();
        assert_eq!(status, 200, "{site}: {body}");
        ends.push((end, site));
    }
    ends.sort();
    let text = crate::support::admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(
            &text,
            "rdmalb_qos_admitted_total{site=\"gold\",path=\"queued\"} "
        ),
        3.0,
        "{text}"
    );
    ends.into_iter().map(|(_, s)| s).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtualclock_serves_the_guaranteed_site_first_and_fifo_does_not() {
    assert_eq!(
        completion_order("virtualclock").await,
        ["gold", "gold", "gold", "bronze", "bronze", "bronze"]
    );
    assert_eq!(
        completion_order("fifo").await,
        ["bronze", "bronze", "bronze", "gold", "gold", "gold"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_answered_503_with_retry_after_and_the_proxy_keeps_serving() {
    let gold = Backend::start("gold").await;
    let bronze = Backend::start("bronze").await;
    let (listen, addr, admin) = listener_toml();
    let proxy = Proxy::start(
        &config(&listen, "max_queue = 1", gold.addr, bronze.addr),
        &[addr, admin],
    );
    // Longer than timeouts.queue (2 s): the queued request times out.
    let holder = send(addr, "gold.test", "/slow/4000");
    wait_metric(admin, "rdmalb_qos_inflight ", 1.0).await;
    let waiting = send(addr, "bronze.test", "/");
    wait_metric(admin, "rdmalb_qos_queued{site=\"bronze\"} ", 1.0).await;

    // `/status` shows the slot in use and the waiting request.
    let text = client()
        .get(format!("http://{admin}/status"))
        .send()
        .await
        .expect("status")
        .text()
        .await
        .expect("status body");
    let status: serde_json::Value = serde_json::from_str(&text).expect("status json");
    let qos = &status["qos"];
    assert_eq!(qos["max_inflight"], 1, "{status}");
    assert_eq!(qos["dispatch"], "virtualclock");
    assert_eq!(qos["inflight"], 1);
    assert_eq!(qos["queued"]["bronze"], 1);
    assert_eq!(qos["queued"]["gold"], 0);

    // bronze's queue (1) is full: refused at once.
    let (status, retry, body, _) = send(addr, "bronze.test", "/").await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(
        body.contains("qos.max_queue") && body.contains("`bronze`"),
        "{body}"
    );

    // The queued one gives up after timeouts.queue.
    let (status, retry, body, _) = waiting.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(body.contains("timeouts.queue"), "{body}");

    let (status, ..) = holder.await.unwrap();
    assert_eq!(status, 200);
    // Nothing is left queued or in flight, and both sites are served.
    for host in ["gold.test", "bronze.test"] {
        let (status, _, body, _) = send(addr, host, "/").await.unwrap();
        assert_eq!(status, 200, "{host}: {body}\n{}", proxy.stderr_text());
    }
    let text = crate::support::admin_text(admin, "/metrics").await;
    for (line, want) in [
        (
            "rdmalb_qos_rejected_total{site=\"bronze\",reason=\"queue_full\"} ",
            1.0,
        ),
        (
            "rdmalb_qos_rejected_total{site=\"bronze\",reason=\"queue_timeout\"} ",
            1.0,
        ),
        ("rdmalb_qos_queued{site=\"bronze\"} ", 0.0),
        ("rdmalb_qos_inflight ", 0.0),
    ] {
        assert_eq!(metric(&text, line), want, "{line}\n{text}");
    }
}
