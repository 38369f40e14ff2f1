//! Sticky sessions end to end with real sidecars: a client pinned by its
//! inserted cookie stays on its node (no new cookie while it does); with
//! `[site.sticky] max_load`, once the node's published load stays above
//! the bound the session moves to the least-loaded node, gets that node's
//! cookie, and the move is counted. The site's own `balance` shows in
//! `/status`. No timing assertions: every wait is for an eventual state
//! with a bound.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::load_aware::{get, push_load, start_sidecar, NodeUnderTest};
use crate::support::{client, eventually, listener_toml, metric, Backend};

/// One request with `cookie` (if any): the node that answered and the
/// `Set-Cookie` it came with.
async fn visit(addr: SocketAddr, cookie: Option<&str>) -> (String, Option<String>) {
    let mut req = client()
        .get(format!("http://{addr}/"))
        .header("host", "web.test");
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let r = req.send().await.expect("request");
    assert_eq!(r.status(), 200);
    let node = r.headers()["x-backend"].to_str().unwrap().to_string();
    let set = r
        .headers()
        .get("set-cookie")
        .map(|v| v.to_str().unwrap().to_string());
    (node, set)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_leaves_a_node_held_over_its_load_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes: Vec<NodeUnderTest> = Vec::new();
    for i in 0..3 {
        let (guard, push, window) = start_sidecar(dir.path(), i);
        nodes.push(NodeUnderTest {
            backend: Backend::start(&format!("n{i}")).await,
            sidecar: Some(guard),
            push,
            window,
        });
    }
    for n in &nodes {
        push_load(n, 1, 0).await;
    }
    let (listeners, addr, admin) = listener_toml();
    let mut config = format!(
        "[global]\nbalance = \"roundrobin\"\naccess_log = \"off\"\n\
         [routing]\nstaleness = \"5s\"\n\
         [health]\ninterval = \"1h\"\n\
         {listeners}\
         [[site]]\nname = \"web\"\nhosts = [\"web.test\"]\nbalance = \"leastconn\"\n\
         weights = {{ cpu = 0.0, run_queue = 0.0, memory = 0.0, network = 0.0, connections = 0.0, irq = 0.0, app = 1.0 }}\n\
         [site.sticky]\ncookie = \"SRV\"\nmax_load = 0.8\nmax_load_for = \"50ms\"\n"
    );
    for (i, n) in nodes.iter().enumerate() {
        config.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{}\"\nsite = \"web\"\ntransport = \"shm\"\nsidecar = \"{}\"\nnode_id = {}\ncookie = \"n{i}\"\n",
            n.backend.addr,
            n.window.display(),
            i + 1
        ));
    }
    let proxy = crate::support::Proxy::start(&config, &[addr, admin]);

    let status: Value = serde_json::from_str(&get(format!("http://{admin}/status")).await).unwrap();
    assert_eq!(status["balance"], "roundrobin");
    assert_eq!(status["sites"][0]["balance"], "leastconn", "{status}");
    assert_eq!(status["sites"][0]["sticky_cookie"], "SRV");

    // A new client is balanced and gets its node's cookie.
    let (home, set) = visit(addr, None).await;
    assert_eq!(set.as_deref(), Some(format!("SRV={home}; path=/").as_str()));
    let cookie = format!("SRV={home}");
    // While the node is under the bound the session stays, without a new
    // cookie.
    for _ in 0..10 {
        assert_eq!(visit(addr, Some(&cookie)).await, (home.clone(), None));
    }
    let moves = |page: &str| {
        metric(
            page,
            "rdmalb_sticky_moves_total{site=\"web\",reason=\"load\"}",
        )
    };
    assert_eq!(moves(&get(format!("http://{admin}/metrics")).await), 0.0);

    // Its app fills up: once the load has stayed above 0.8 for 50 ms, the
    // session is re-pinned to a lighter node, with that node's cookie.
    let i: usize = home[1..].parse().unwrap();
    push_load(&nodes[i], 8, 8).await;
    let (moved_to, set) = eventually(
        "the session leaves the loaded node",
        Duration::from_secs(20),
        || async {
            match visit(addr, Some(&cookie)).await {
                (n, set) if n != home => Ok((n, set)),
                _ => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Err("still on its node".to_string())
                }
            }
        },
    )
    .await;
    assert_eq!(
        set.as_deref(),
        Some(format!("SRV={moved_to}; path=/").as_str())
    );
    assert!(moves(&get(format!("http://{admin}/metrics")).await) >= 1.0);
    // With the new cookie it stays on the new node.
    let new_cookie = format!("SRV={moved_to}");
    for _ in 0..5 {
        assert_eq!(
            visit(addr, Some(&new_cookie)).await,
            (moved_to.clone(), None)
        );
    }
    drop(proxy);
}
