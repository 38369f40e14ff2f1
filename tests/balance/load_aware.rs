//! Load-aware routing end to end, all real processes: three `rdmalb sidecar`
//! processes (push collector, shm windows) beside three in-process HTTP
//! backends, and the `rdmalb proxy` binary with `balance =
//! "weighted-least-load"` reading the windows per request.
//!
//! When one node's published load rises, its traffic stops; when a sidecar
//! dies its block goes stale and the node is scored from in-flight only,
//! counted in `/metrics`. A verbs node on a host without an RDMA device
//! stops start-up with a clear error and makes a reload be rejected. No timing assertions: counts of requests in each
//! phase are compared, and every wait is for an eventual state with a bound.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{client, eventually, free_addr, listener_toml, Backend, ChildGuard};
use rdmalb_sidecar::collect::push::{Client, PushSample};
use rdmalb_sidecar::config::PushListen;
use rdmalb_window::{read_load, site_table_hash, Expect, LoadRead, ReadPolicy, ShmWindow};

const NODES: usize = 3;

/// One node: backend app, its sidecar process, its push address.
pub(super) struct NodeUnderTest {
    pub backend: Backend,
    pub sidecar: Option<ChildGuard>,
    pub push: SocketAddr,
    pub window: PathBuf,
}

pub(super) fn start_sidecar(dir: &Path, i: usize) -> (ChildGuard, SocketAddr, PathBuf) {
    let push = free_addr();
    let window = dir.join(format!("window-n{i}"));
    let cfg = dir.join(format!("sidecar-n{i}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "node = \"n{i}\"\nnode_id = {}\nsites = [\"web\"]\nsite = \"web\"\npublish_interval = \"1ms\"\n\
             [window.shm]\npath = \"{}\"\n\
             [[collector]]\nkind = \"push\"\nlisten = \"{push}\"\n",
            i + 1,
            window.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join(format!("sidecar-n{i}.log"))).unwrap();
    let child = Command::new(crate::support::RDMALB)
        .arg("sidecar")
        .arg("-c")
        .arg(&cfg)
        .env("RDMALB_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn rdmalb sidecar");
    (ChildGuard { child }, push, window)
}

/// Pushes app numbers to a sidecar and waits until its window shows them.
pub(super) async fn push_load(node: &NodeUnderTest, busy: u64, queue: u64) {
    let listen = PushListen::Tcp(node.push);
    let mut c = eventually("push connection", Duration::from_secs(20), || async {
        Client::connect(&listen).await.map_err(|e| e.to_string())
    })
    .await;
    c.push(&PushSample {
        busy: Some(busy),
        queue: Some(queue),
        capacity: Some(8),
        ..Default::default()
    })
    .await
    .expect("push accepted");
    let w = ShmWindow::open(
        &node.window,
        &Expect {
            node_id: None,
            site_hash: Some(site_table_hash(&["web"])),
        },
    )
    .expect("window file");
    let policy = ReadPolicy {
        retries: 8,
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    };
    eventually("pushed load published", Duration::from_secs(20), || async {
        match read_load(&w, &policy).await {
            LoadRead::Fresh(b) if b.sample.app_busy == busy && b.sample.app_queue_len == queue => {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Sends `n` sequential requests; returns how many each node served.
async fn phase(
    proxy: &crate::support::Proxy,
    addr: SocketAddr,
    nodes: &[NodeUnderTest],
    n: usize,
) -> Vec<usize> {
    let before: Vec<usize> = nodes.iter().map(|x| x.backend.requests()).collect();
    let http = client();
    for _ in 0..n {
        let r = http
            .get(format!("http://{addr}/"))
            .header("host", "web.test")
            .send()
            .await
            .expect("request");
        let status = r.status();
        if status != 200 {
            let body = r.text().await.unwrap_or_default();
            panic!(
                "status {status}, body {body:?}; proxy log:\n{}",
                proxy.stderr_text()
            );
        }
    }
    nodes
        .iter()
        .zip(before)
        .map(|(x, b)| x.backend.requests() - b)
        .collect()
}

/// The value of one series in a Prometheus text page (0 when absent).
fn counter(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

pub(super) async fn get(url: String) -> String {
    client()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_moves_away_from_a_node_whose_published_load_rises() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    for i in 0..NODES {
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

    let (listeners, proxy_addr, admin) = listener_toml();
    let mut config = format!(
        "[global]\nbalance = \"weighted-least-load\"\naccess_log = \"off\"\n\
         [routing]\ncandidates = \"all\"\nstaleness = \"2s\"\n\
         [health]\ninterval = \"1h\"\n\
         {listeners}\
         [[site]]\nname = \"web\"\nhosts = [\"web.test\"]\nweights = {{ app = 1.0 }}\n"
    );
    for (i, n) in nodes.iter().enumerate() {
        config.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{}\"\nsite = \"web\"\ntransport = \"shm\"\nsidecar = \"{}\"\nnode_id = {}\n",
            n.backend.addr,
            n.window.display(),
            i + 1
        ));
    }
    let proxy = crate::support::Proxy::start(&config, &[proxy_addr, admin]);

    // Equal loads: every node serves (ties rotate).
    let even = phase(&proxy, proxy_addr, &nodes, 30).await;
    assert!(even.iter().all(|&c| c > 0), "phase 1: {even:?}");
    assert_eq!(even.iter().sum::<usize>(), 30);

    // n1's app fills up (busy = capacity, a queue as long again): it gets
    // nothing while the others are lighter.
    push_load(&nodes[1], 8, 8).await;
    // (A block older than `staleness` is scored as the mean of the others:
    // 2 s, so that a sidecar the loaded machine delays is not read as one
    // that stopped; the failure names the reads the proxy could not use.)
    let shifted = phase(&proxy, proxy_addr, &nodes, 30).await;
    if shifted[1] != 0 {
        let metrics = get(format!("http://{admin}/metrics")).await;
        let unknown: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("rdmalb_load_unknown_total"))
            .collect();
        panic!("phase 2: n1 was chosen: {shifted:?}; reads not used: {unknown:?}");
    }
    assert_eq!(shifted[0] + shifted[2], 30, "phase 2: {shifted:?}");

    // /status shows the last read and index per node; n1's is the highest.
    let status: Value = serde_json::from_str(&get(format!("http://{admin}/status")).await).unwrap();
    assert_eq!(status["balance"], "weighted-least-load");
    let index = |i: usize| {
        status["nodes"][i]["load"]["last"]["index"]
            .as_f64()
            .unwrap()
    };
    assert!(index(1) > index(0) && index(1) > index(2), "{status}");
    assert_eq!(status["nodes"][1]["load"]["last"]["result"], "fresh");
    assert_eq!(
        status["nodes"][1]["load"]["last"]["published"]["app_busy"],
        8
    );
    assert_eq!(status["nodes"][1]["load"]["mode"], "per-request");
    assert_eq!(status["nodes"][1]["load"]["transport"], "shm");

    // Its load drops back: it is chosen again.
    push_load(&nodes[1], 1, 0).await;
    let back = phase(&proxy, proxy_addr, &nodes, 30).await;
    assert!(back[1] > 0, "phase 3: {back:?}");

    // n2's sidecar dies (SIGKILL: its window file stays, nobody publishes).
    // Once the block is stale, n2 is scored from its in-flight count alone
    // and every such decision is counted, by reason.
    drop(nodes[2].sidecar.take());
    eventually("n2 scored as stale", Duration::from_secs(20), || async {
        phase(&proxy, proxy_addr, &nodes, 3).await;
        let metrics = get(format!("http://{admin}/metrics")).await;
        match counter(
            &metrics,
            "rdmalb_load_unknown_total{node=\"n2\",reason=\"stale\"}",
        ) {
            n if n > 0.0 => Ok(()),
            _ => Err("no stale count for n2 yet".to_string()),
        }
    })
    .await;
    let metrics = get(format!("http://{admin}/metrics")).await;
    assert!(
        counter(
            &metrics,
            "rdmalb_load_reads_total{node=\"n0\",transport=\"shm\"}"
        ) >= 90.0,
        "{metrics}"
    );
    // The live sidecars' blocks stayed fresh.
    assert_eq!(
        counter(
            &metrics,
            "rdmalb_load_unknown_total{node=\"n0\",reason=\"stale\"}"
        ),
        0.0
    );
    // A stale node still serves (it is not down): it is scored as the mean
    // of the fresh ones, which here equals them, so the three share.
    let after = phase(&proxy, proxy_addr, &nodes, 30).await;
    assert!(after[2] > 0, "stale node still gets traffic: {after:?}");
    drop(proxy);
}

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

fn psk_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("cluster.psk");
    std::fs::write(&p, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbs_without_rdma_fails_start_up_and_rejects_a_reload() {
    if has_rdma_device() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let psk = psk_file(dir.path());
    let backend = Backend::start("v0").await;
    let (sidecar, _push, window) = start_sidecar(dir.path(), 0);
    let _sidecar = sidecar;
    let (listeners, proxy_addr, admin) = listener_toml();
    let head = format!(
        "[global]\nbalance = \"weighted-least-load\"\naccess_log = \"off\"\n\
         [cluster]\npsk_file = \"{}\"\n{listeners}\
         [[site]]\nname = \"web\"\nhosts = [\"web.test\"]\n\
         [[node]]\nname = \"n0\"\naddress = \"{}\"\nsite = \"web\"\ntransport = \"shm\"\nsidecar = \"{}\"\nnode_id = 1\n",
        psk.display(),
        backend.addr,
        window.display()
    );
    let verbs_node = format!(
        "[[node]]\nname = \"rdma1\"\naddress = \"{}\"\nsite = \"web\"\ntransport = \"verbs\"\nsidecar = \"127.0.0.1:9\"\n",
        backend.addr
    );

    // Start-up with a verbs node: a clear error naming the alternatives, exit
    // status not 0, no panic.
    let mut bad = crate::support::Proxy::start(&format!("{head}{verbs_node}"), &[]);
    let status = bad.wait_exit().expect("the proxy exits");
    assert!(!status.success());
    let err = bad.stderr_text();
    assert!(err.contains("RDMA verbs unavailable"), "{err}");
    assert!(err.contains("transport = \"shm\""), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A running proxy: a reload that adds the verbs node is rejected; the
    // old configuration (one node, its window connected) keeps serving.
    let proxy = crate::support::Proxy::start(&head, &[proxy_addr, admin]);
    let status = || async {
        serde_json::from_str::<Value>(&get(format!("http://{admin}/status")).await).unwrap()
    };
    eventually("n0 window connected", Duration::from_secs(20), || async {
        let s = status().await;
        match s["nodes"][0]["load"]["connection"]["state"].as_str() {
            Some("connected") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    std::fs::write(&proxy.config, format!("{head}{verbs_node}")).unwrap();
    crate::support::signal(proxy.pid(), crate::support::SIGHUP);
    eventually("reload rejected", Duration::from_secs(20), || async {
        let e = proxy.stderr_text();
        if e.contains("reload rejected") && e.contains("RDMA verbs unavailable") {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await;
    let s = status().await;
    assert_eq!(s["nodes"].as_array().unwrap().len(), 1, "{s}");
    let r = client()
        .get(format!("http://{proxy_addr}/"))
        .header("host", "web.test")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
