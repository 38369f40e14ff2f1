//! Unit tests of [`NodeWindows`] over real transports: shm files in a temp
//! dir and the tcp responder on loopback. Waits are bounded polls, never
//! timing claims.

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::parse;
use rdmalb_window::{seqlock, LoadSample, WindowMemory};

const SITES: [&str; 2] = ["shop", "blog"];

fn site_hash() -> u64 {
    rdmalb_window::site_table_hash(&SITES)
}

fn sample(cpu: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: cpu,
        app_capacity: 8,
        ..Default::default()
    }
}

/// A proxy config with the given `[[node]]` window lines (one node each).
fn config(dir: &Path, nodes: &[&str], extra: &str) -> Config {
    let mut text = format!(
        "[global]\nbalance = \"weighted-least-load\"\n{extra}\n[[listener]]\nlisten = \"127.0.0.1:1\"\n\
         [[site]]\nname = \"shop\"\nhosts = [\"shop.test\"]\n\
         [[site]]\nname = \"blog\"\nhosts = [\"blog.test\"]\n"
    );
    for (i, n) in nodes.iter().enumerate() {
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"shop\"\n{n}\n",
            9000 + i
        ));
    }
    parse(&text, &dir.join("rdmalb.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn shm_node(path: &Path) -> String {
    format!("transport = \"shm\"\nsidecar = \"{}\"", path.display())
}

fn shm_window(path: &Path, node_id: u64) -> WindowMemory {
    let m = WindowMemory::create_shm(path, 0o600, node_id, site_hash()).expect("create window");
    seqlock::publish(&m, &sample(100_000));
    m
}

/// One node with a published shm window (node id 7), its windows started:
/// the temp dir (keep it), the window, the windows and their stop switch.
async fn one_shm_node() -> (
    tempfile::TempDir,
    WindowMemory,
    Arc<NodeWindows>,
    watch::Sender<bool>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w0");
    let mem = shm_window(&path, 7);
    let cfg = config(dir.path(), &[&shm_node(&path)], "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    (dir, mem, windows, tx)
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn shm_window_connects_and_reads() {
    let (_dir, mem, windows, tx) = one_shm_node().await;
    // start() waits for the first attempt: an shm file is there at once.
    let w = windows.get(0).expect("connected after start");
    assert_eq!(w.kind(), rdmalb_window::TransportKind::Shm);
    let node = windows.node(0).unwrap();
    assert_eq!(node.settings().mode, ReadMode::PerRequest);
    let load = read_now(&node, w.as_ref(), Duration::from_secs(1)).await;
    assert_eq!(load.fresh().unwrap().sample, sample(100_000));
    assert_eq!(load.fresh().unwrap().node_id, 7);
    seqlock::publish(&mem, &sample(900_000));
    let load = read_now(&node, w.as_ref(), Duration::from_secs(1)).await;
    assert_eq!(load.fresh().unwrap().sample.cpu_util_ppm, 900_000);
    assert!(windows.get(1).is_none(), "no such node");
    assert!(matches!(node.state(), LinkState::Connected { .. }));
    tx.send(true).unwrap();
}

#[tokio::test]
async fn node_without_window_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &[""], "");
    let (_tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    assert_eq!(windows.len(), 1);
    assert!(windows.node(0).is_none());
    assert!(windows.get(0).is_none());
}

#[tokio::test]
async fn wrong_node_id_or_site_table_is_refused_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let p1 = dir.path().join("w1");
    let _m1 = shm_window(&p1, 5);
    let p2 = dir.path().join("w2");
    let m2 = WindowMemory::create_shm(
        &p2,
        0o600,
        6,
        rdmalb_window::site_table_hash(&["blog", "shop"]),
    )
    .unwrap();
    seqlock::publish(&m2, &sample(1));
    let cfg = config(
        dir.path(),
        &[&format!("{}\nnode_id = 9", shm_node(&p1)), &shm_node(&p2)],
        "",
    );
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    assert!(windows.get(0).is_none());
    assert!(windows.get(1).is_none());
    let LinkState::Failed { error, .. } = windows.node(0).unwrap().state() else {
        panic!("node 0 should have failed");
    };
    assert!(
        error.contains("belongs to node 5, expected node 9"),
        "{error}"
    );
    let LinkState::Failed { error, .. } = windows.node(1).unwrap().state() else {
        panic!("node 1 should have failed");
    };
    assert!(error.contains("site-table hash"), "{error}");
    tx.send(true).unwrap();
}

#[tokio::test]
async fn missing_file_is_retried_until_the_sidecar_creates_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late");
    let cfg = config(dir.path(), &[&shm_node(&path)], "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    assert!(windows.get(0).is_none());
    assert!(matches!(
        windows.node(0).unwrap().state(),
        LinkState::Failed { .. }
    ));
    let _mem = shm_window(&path, 1);
    wait_for("reconnect", || windows.get(0).is_some()).await;
    tx.send(true).unwrap();
}

#[tokio::test]
async fn replaced_shm_file_is_remapped() {
    let (dir, old, windows, tx) = one_shm_node().await;
    let path = dir.path().join("w0");
    let first = windows.get(0).unwrap();
    // A restarted sidecar: the old file goes, a new one (new inode) comes.
    drop(old);
    let _ = std::fs::remove_file(&path);
    let new = shm_window(&path, 7);
    seqlock::publish(&new, &sample(424_242));
    wait_for("remap", || {
        windows.get(0).is_some_and(|w| !Arc::ptr_eq(&w, &first))
    })
    .await;
    let node = windows.node(0).unwrap();
    let w = windows.get(0).unwrap();
    let load = read_now(&node, w.as_ref(), Duration::from_secs(1)).await;
    assert_eq!(load.fresh().unwrap().sample.cpu_util_ppm, 424_242);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn reload_keeps_unchanged_connections_and_updates_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (dir.path().join("a"), dir.path().join("b"));
    let (_a, _b) = (shm_window(&pa, 1), shm_window(&pb, 2));
    let cfg = config(dir.path(), &[&shm_node(&pa), &shm_node(&pb)], "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let (a0, b0) = (windows.get(0).unwrap(), windows.get(1).unwrap());
    // n1 now points at a's file (a new connection), n0 is unchanged but
    // switches to interval reads.
    let cfg2 = config(
        dir.path(),
        &[&shm_node(&pa), &shm_node(&pa)],
        "[routing]\nload_read = \"interval:20ms\"",
    );
    windows.reconfigure(&cfg2).await.unwrap();
    assert!(Arc::ptr_eq(&windows.get(0).unwrap(), &a0));
    assert!(!Arc::ptr_eq(&windows.get(1).unwrap(), &b0));
    let n0 = windows.node(0).unwrap();
    assert_eq!(
        n0.settings().mode,
        ReadMode::Interval(Duration::from_millis(20))
    );
    // The interval reader fills the snapshot.
    wait_for("interval snapshot", || {
        n0.snapshot(SystemTime::now()).fresh().is_some()
    })
    .await;
    assert!(n0.last().is_some());
    // A node removed from the config stops; the table shrinks.
    let cfg3 = config(dir.path(), &[&shm_node(&pa)], "");
    windows.reconfigure(&cfg3).await.unwrap();
    assert_eq!(windows.len(), 1);
    assert!(Arc::ptr_eq(&windows.get(0).unwrap(), &a0));
    tx.send(true).unwrap();
}

#[tokio::test]
async fn verbs_without_rdma_device_fails_at_start() {
    if std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some()) {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(&psk, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let cfg = config(
        dir.path(),
        &["transport = \"verbs\"\nsidecar = \"127.0.0.1:9\""],
        &format!("[cluster]\npsk_file = \"{}\"", psk.display()),
    );
    let (_tx, rx) = watch::channel(false);
    let err = NodeWindows::start(&cfg, rx).await.unwrap_err();
    assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
    assert!(err.to_string().contains("transport = \"shm\""), "{err}");
}

#[tokio::test]
async fn tcp_window_reconnects_after_the_responder_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let psk_path = dir.path().join("psk");
    std::fs::write(&psk_path, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(
        &psk_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let psk = Psk::from_file(&psk_path).unwrap();
    let mem = Arc::new(WindowMemory::anonymous(3, site_hash()).unwrap());
    seqlock::publish(&mem, &sample(300_000));
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = rdmalb_window::tcp::serve(
        Arc::clone(&mem),
        "127.0.0.1:0".parse().unwrap(),
        psk.clone(),
        stop_rx,
    )
    .unwrap();
    let addr = server.local_addr();
    let cfg = config(
        dir.path(),
        &[&format!(
            "transport = \"tcp\"\nsidecar = \"{addr}\"\nnode_id = 3"
        )],
        &format!("[cluster]\npsk_file = \"{}\"", psk_path.display()),
    );
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let node = windows.node(0).unwrap();
    // tcp defaults to interval reads.
    assert_eq!(
        node.settings().mode,
        ReadMode::Interval(crate::config::Routing::DEFAULT_TCP_INTERVAL)
    );
    let first = windows.get(0).expect("connected");
    assert_eq!(first.kind(), rdmalb_window::TransportKind::Tcp);
    // The responder goes away: the link breaks, the supervisor notices.
    server.stop();
    let _ = stop_tx.send(true);
    wait_for("disconnect", || windows.get(0).is_none()).await;
    // It comes back on the same address: the supervisor reconnects.
    let (_stop2_tx, stop2_rx) = watch::channel(false);
    let _server2 = rdmalb_window::tcp::serve(Arc::clone(&mem), addr, psk, stop2_rx).unwrap();
    wait_for("reconnect", || windows.get(0).is_some()).await;
    let w = windows.get(0).unwrap();
    assert!(!Arc::ptr_eq(&w, &first));
    let load = read_now(&node, w.as_ref(), Duration::from_secs(1)).await;
    assert_eq!(load.fresh().unwrap().sample.cpu_util_ppm, 300_000);
    tx.send(true).unwrap();
}

/// What /status keeps ([`NodeWindow::record`]): a new block and a read that
/// is not fresh are kept at once; the same block again only after
/// [`RECORD_EVERY`].
#[tokio::test]
async fn record_keeps_new_blocks_and_unknown_reads_at_once() {
    let (_dir, mem, windows, tx) = one_shm_node().await;
    let node = windows.node(0).unwrap();
    let read = |node: &NodeWindow| match node.read_inline() {
        Some(Ok(b)) => NodeLoad::Fresh(b),
        other => panic!("shm read: {other:?}"),
    };
    let t0 = SystemTime::now();
    let obs = |at, load, index| Observation {
        at,
        load,
        index: Some(index),
    };
    let first = read(&node);
    node.record(obs(t0, first, 1.0));
    assert_eq!(node.last().unwrap().index, Some(1.0));
    // The same block again, within RECORD_EVERY: the kept one stands.
    node.record(obs(t0 + RECORD_EVERY / 2, first, 2.0));
    assert_eq!(node.last().unwrap().index, Some(1.0));
    // ... and after it, is kept.
    node.record(obs(t0 + RECORD_EVERY, first, 3.0));
    assert_eq!(node.last().unwrap().index, Some(3.0));
    // A new block is kept at once.
    seqlock::publish(&mem, &sample(700_000));
    let second = read(&node);
    node.record(obs(t0 + RECORD_EVERY, second, 4.0));
    let last = node.last().unwrap();
    assert_eq!(last.load.fresh().unwrap().sample.cpu_util_ppm, 700_000);
    assert_eq!(last.index, Some(4.0));
    // So is a read that is not fresh, and a fresh one right after it.
    node.record(obs(
        t0 + RECORD_EVERY,
        NodeLoad::Unknown(Unknown::Torn),
        5.0,
    ));
    assert_eq!(node.last().unwrap().load.unknown(), Some(Unknown::Torn));
    node.record(obs(t0 + RECORD_EVERY, second, 6.0));
    assert_eq!(node.last().unwrap().index, Some(6.0));
    tx.send(true).unwrap();
}

/// A decision's record ([`NodeWindow::record_decision`]) keeps what
/// [`NodeWindow::record`] keeps: a new block at once, the same block again
/// only after [`RECORD_EVERY`].
#[tokio::test]
async fn a_decision_records_like_an_observation() {
    let (_dir, mem, windows, tx) = one_shm_node().await;
    let node = windows.node(0).unwrap();
    let read = |node: &NodeWindow| match node.read_inline() {
        Some(Ok(b)) => NodeLoad::Fresh(b),
        other => panic!("shm read: {other:?}"),
    };
    let t0 = SystemTime::now();
    let ns = |t: SystemTime| rdmalb_base::time::unix_ns(t);
    let first = read(&node);
    node.record_decision(t0, ns(t0), &first, 1.0);
    let last = node.last().unwrap();
    assert_eq!((last.at, last.index), (t0, Some(1.0)));
    let t1 = t0 + RECORD_EVERY / 2;
    node.record_decision(t1, ns(t1), &first, 2.0);
    assert_eq!(
        node.last().unwrap().index,
        Some(1.0),
        "same block, too soon"
    );
    let t2 = t0 + RECORD_EVERY;
    node.record_decision(t2, ns(t2), &first, 3.0);
    assert_eq!(node.last().unwrap().index, Some(3.0));
    seqlock::publish(&mem, &sample(700_000));
    let second = read(&node);
    node.record_decision(t2, ns(t2), &second, 4.0);
    let last = node.last().unwrap();
    assert_eq!(last.load, second);
    assert_eq!(last.index, Some(4.0));
    tx.send(true).unwrap();
}

/// The request path's two words agree with the settings stored.
#[test]
fn per_request_staleness_follows_the_mode() {
    let per_request = ReadSettings {
        mode: ReadMode::PerRequest,
        deadline: Duration::from_micros(500),
        staleness: Duration::from_millis(250),
    };
    let cell = SettingsCell::new(per_request);
    assert_eq!(cell.per_request_staleness_ns(), Some(250_000_000));
    cell.store(ReadSettings {
        mode: ReadMode::Interval(Duration::from_millis(64)),
        ..per_request
    });
    assert_eq!(cell.per_request_staleness_ns(), None);
}

#[test]
fn read_settings_round_trip_through_their_words() {
    let cases = [
        ReadSettings {
            mode: ReadMode::PerRequest,
            deadline: Duration::from_micros(500),
            staleness: Duration::from_millis(250),
        },
        ReadSettings {
            mode: ReadMode::Interval(Duration::from_millis(64)),
            deadline: Duration::from_millis(5),
            staleness: Duration::from_secs(3600),
        },
    ];
    let cell = SettingsCell::new(cases[0]);
    assert_eq!(cell.load(), cases[0]);
    cell.store(cases[1]);
    assert_eq!(cell.load(), cases[1]);
    cell.store(cases[0]);
    assert_eq!(cell.load(), cases[0], "back to per-request");
}
