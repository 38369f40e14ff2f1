//! Unit tests of the weighted-least-load policy over real windows (shm files
//! in a temp dir; the tcp responder on loopback behind a relay that can
//! stall), through `Backends::pick_queued` as the data path calls it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::*;
use crate::balance::{Backends, Pick};
use crate::config::parse;
use rdmalb_window::{seqlock, LoadSample, WindowMemory};

fn site_hash() -> u64 {
    rdmalb_window::site_table_hash(&["web"])
}

fn cpu(ppm: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: ppm,
        ..Default::default()
    }
}

/// `n` shm nodes (with files in `dir`) plus `extra_nodes` TOML; returns the
/// config and each shm node's window memory.
fn setup(dir: &Path, n: usize, routing: &str, extra_nodes: &str) -> (Config, Vec<WindowMemory>) {
    setup_with(dir, "weighted-least-load", n, routing, extra_nodes)
}

/// [`setup`] with another `balance`.
fn setup_with(
    dir: &Path,
    balance: &str,
    n: usize,
    routing: &str,
    extra_nodes: &str,
) -> (Config, Vec<WindowMemory>) {
    let mut text = format!(
        "[global]\nbalance = \"{balance}\"\n[routing]\n{routing}\n\
         [weights]\ncpu = 1.0\nrun_queue = 0.0\nmemory = 0.0\nnetwork = 0.0\nconnections = 0.0\nirq = 0.0\napp = 0.0\ninflight = 0.1\n\
         [[listener]]\nlisten = \"127.0.0.1:1\"\n[[site]]\nname = \"web\"\nhosts = [\"web.test\"]\n"
    );
    let mut mems = Vec::new();
    for i in 0..n {
        let path = dir.join(format!("w{i}"));
        let m = WindowMemory::create_shm(&path, 0o600, i as u64 + 1, site_hash()).unwrap();
        seqlock::publish(&m, &cpu(0));
        mems.push(m);
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"web\"\ntransport = \"shm\"\nsidecar = \"{}\"\nnode_id = {}\n",
            9000 + i,
            path.display(),
            i + 1
        ));
    }
    text.push_str(extra_nodes);
    let cfg = parse(&text, &dir.join("rdmalb.toml")).unwrap_or_else(|e| panic!("{e}"));
    (cfg, mems)
}

async fn pick(b: &Backends) -> Pick {
    b.pick_queued(0, &[]).await.expect("a node")
}

/// Picks `rounds` times (each released at once) and counts per node index.
async fn spread(b: &Backends, rounds: usize) -> Vec<usize> {
    let mut hits = vec![0; b.nodes().len()];
    for _ in 0..rounds {
        hits[pick(b).await.node.index] += 1;
    }
    hits
}

#[tokio::test]
async fn per_request_reads_follow_the_published_load() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mems) = setup(dir.path(), 3, "candidates = \"all\"", "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    assert_eq!(b.balance(), "weighted-least-load");
    seqlock::publish(&mems[0], &cpu(800_000));
    seqlock::publish(&mems[1], &cpu(100_000));
    seqlock::publish(&mems[2], &cpu(500_000));
    assert_eq!(spread(&b, 50).await, vec![0, 50, 0]);
    // The load moves: so does the traffic, on the very next request.
    seqlock::publish(&mems[1], &cpu(900_000));
    assert_eq!(spread(&b, 50).await, vec![0, 0, 50]);
    // /status data: the last read and index per node.
    let last = windows.node(2).unwrap().last().unwrap();
    assert_eq!(last.load.fresh().unwrap().sample.cpu_util_ppm, 500_000);
    assert!((last.index.unwrap() - 0.5).abs() < 1e-9);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn in_flight_requests_spread_equal_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _mems) = setup(dir.path(), 2, "", "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    // Held picks raise the in-flight term: equal nodes alternate.
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(pick(&b).await);
    }
    let on0 = held.iter().filter(|p| p.node.index == 0).count();
    assert_eq!(on0, 5);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn a_down_node_is_never_a_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mems) = setup(dir.path(), 3, "candidates = 2", "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    // Node 0 is by far the least loaded, but down.
    seqlock::publish(&mems[0], &cpu(0));
    seqlock::publish(&mems[1], &cpu(600_000));
    seqlock::publish(&mems[2], &cpu(700_000));
    let fall = cfg.health.fall;
    for _ in 0..fall {
        b.nodes()[0].record_check(Err("test: down".into()));
    }
    assert!(!b.nodes()[0].is_up());
    let hits = spread(&b, 100).await;
    assert_eq!(hits[0], 0, "{hits:?}");
    assert_eq!(hits[1] + hits[2], 100);
    // Excluded (already tried) nodes are not candidates either.
    let p = b.pick_queued(0, &[1]).await.unwrap();
    assert_eq!(p.node.index, 2);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn stale_and_torn_blocks_are_scored_locally() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mems) = setup(
        dir.path(),
        3,
        "candidates = \"all\"\nstaleness = \"100ms\"",
        "",
    );
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    // n0 claims idle but its block is a minute old; n1 is torn for good (a
    // writer died mid-write); n2 is fresh and busy.
    let minute_ago = rdmalb_base::time::unix_now_ns() - 60_000_000_000;
    seqlock::publish_at(&mems[0], &cpu(0), minute_ago);
    mems[1].words()[rdmalb_window::layout::word::SEQ_BEGIN].store(7, Ordering::SeqCst);
    seqlock::publish(&mems[2], &cpu(900_000));
    let p = pick(&b).await;
    let last = |i| windows.node(i).unwrap().last().unwrap();
    assert_eq!(last(0).load.unknown(), Some(Unknown::Stale));
    assert_eq!(last(1).load.unknown(), Some(Unknown::Torn));
    assert!(last(2).load.fresh().is_some());
    // Unknown nodes count as the fresh mean (0.9), not as idle: the pick is
    // decided by in-flight and rotation, never by the stale "0".
    assert!((last(0).index.unwrap() - last(2).index.unwrap()).abs() < 1e-9);
    assert!((last(1).index.unwrap() - 0.9).abs() < 1e-9);
    drop(p);
    // With held picks the in-flight term spreads the three evenly.
    let mut held = Vec::new();
    for _ in 0..9 {
        held.push(pick(&b).await);
    }
    let mut hits = [0; 3];
    for h in &held {
        hits[h.node.index] += 1;
    }
    assert_eq!(hits, [3, 3, 3]);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn unconnected_nodes_are_scored_from_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    // n1 has a window file nobody created: never connected.
    let extra = format!(
        "[[node]]\nname = \"n1\"\naddress = \"127.0.0.1:9101\"\nsite = \"web\"\ntransport = \"shm\"\nsidecar = \"{}\"\n",
        dir.path().join("absent").display()
    );
    let (cfg, mems) = setup(dir.path(), 1, "candidates = \"all\"", &extra);
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    seqlock::publish(&mems[0], &cpu(500_000));
    let _held = pick(&b).await;
    let last = windows.node(1).unwrap().last().unwrap();
    assert_eq!(last.load.unknown(), Some(Unknown::Disconnected));
    tx.send(true).unwrap();
}

/// A loopback TCP relay whose forwarding can be stalled: a real slow peer.
struct Relay {
    addr: std::net::SocketAddr,
    stalled: Arc<AtomicBool>,
}

async fn relay(to: std::net::SocketAddr) -> Relay {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let stalled = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stalled);
    tokio::spawn(async move {
        while let Ok((a, _)) = l.accept().await {
            let Ok(b) = TcpStream::connect(to).await else {
                continue;
            };
            let (mut ar, mut aw) = a.into_split();
            let (mut br, mut bw) = b.into_split();
            let st2 = Arc::clone(&st);
            let st3 = Arc::clone(&st);
            tokio::spawn(async move { pump(&mut ar, &mut bw, &st2).await });
            tokio::spawn(async move { pump(&mut br, &mut aw, &st3).await });
        }
    });
    Relay { addr, stalled }
}

async fn pump(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    stalled: &AtomicBool,
) {
    let mut buf = [0u8; 4096];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // While stalled, hold what came in (a peer that does not answer).
        while stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_slow_peer_costs_at_most_the_deadline_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let psk_path = dir.path().join("psk");
    std::fs::write(&psk_path, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(
        &psk_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let psk = rdmalb_window::Psk::from_file(&psk_path).unwrap();
    let mem = Arc::new(WindowMemory::anonymous(9, site_hash()).unwrap());
    seqlock::publish(&mem, &cpu(100_000));
    let (_stop_tx, stop_rx) = watch::channel(false);
    let server = rdmalb_window::tcp::serve(
        Arc::clone(&mem),
        "127.0.0.1:0".parse().unwrap(),
        psk,
        stop_rx,
    )
    .unwrap();
    let relay = relay(server.local_addr()).await;
    let extra = format!(
        "[cluster]\npsk_file = \"{}\"\n[[node]]\nname = \"t\"\naddress = \"127.0.0.1:9200\"\nsite = \"web\"\ntransport = \"tcp\"\nsidecar = \"{}\"\nnode_id = 9\n",
        psk_path.display(),
        relay.addr
    );
    // Per-request reads over tcp too, with a short deadline.
    let (cfg, mems) = setup(
        dir.path(),
        1,
        "candidates = \"all\"\nload_read = \"per-request\"\nread_deadline = \"30ms\"",
        &extra,
    );
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    assert!(windows.get(1).is_some(), "tcp window connected");
    let b = Backends::build_with_windows(&cfg, None, &windows);
    seqlock::publish(&mems[0], &cpu(700_000));
    // Both read fine: the tcp node (0.1) wins.
    assert_eq!(pick(&b).await.node.index, 1);
    assert!(windows
        .node(1)
        .unwrap()
        .last()
        .unwrap()
        .load
        .fresh()
        .is_some());
    // The tcp peer stops answering: the decision still completes (bounded by
    // the deadline), the tcp node is scored locally as a timeout, and the shm
    // node's read, issued alongside, still counts.
    relay.stalled.store(true, Ordering::SeqCst);
    let p = tokio::time::timeout(Duration::from_secs(10), pick(&b))
        .await
        .expect("the pick must not wait for a stalled peer");
    assert_eq!(
        windows.node(1).unwrap().last().unwrap().load.unknown(),
        Some(Unknown::Timeout)
    );
    assert!(windows
        .node(0)
        .unwrap()
        .last()
        .unwrap()
        .load
        .fresh()
        .is_some());
    drop(p);
    relay.stalled.store(false, Ordering::SeqCst);
    tx.send(true).unwrap();
}

#[tokio::test(start_paused = true)]
async fn interval_mode_decides_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mems) = setup(
        dir.path(),
        2,
        "candidates = \"all\"\nload_read = \"interval:1s\"\nstaleness = \"1h\"",
        "",
    );
    seqlock::publish(&mems[0], &cpu(100_000));
    seqlock::publish(&mems[1], &cpu(500_000));
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    let node0 = windows.node(0).unwrap();
    for _ in 0..100 {
        if node0.snapshot(SystemTime::now()).fresh().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(spread(&b, 10).await, vec![10, 0]);
    // The load flips, but until the next interval read the snapshot rules:
    // this is the coarse-grained monitoring seed 002 compares against.
    seqlock::publish(&mems[0], &cpu(900_000));
    assert_eq!(spread(&b, 10).await, vec![10, 0]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(spread(&b, 10).await, vec![0, 10]);
    tx.send(true).unwrap();
}

#[test]
fn sync_select_uses_the_last_reads() {
    // Without a runtime-driven read the sync path has nothing fresh: it
    // falls back to in-flight (never panics, never blocks).
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _mems) = setup(dir.path(), 2, "", "");
    let b = Backends::build(&cfg, None);
    let p = b.pick(0, &[]).unwrap();
    let q = b.pick(0, &[]).unwrap();
    assert_ne!(p.node.index, q.node.index);
}

fn app(busy: u64, queue: u64) -> LoadSample {
    queued(busy, queue, 64, 0)
}

#[tokio::test]
async fn hot_cold_avoids_a_node_with_many_requests_in_flight_and_then_takes_the_fastest() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mems) = setup_with(dir.path(), "hot-cold", 8, "candidates = \"all\"", "");
    let (_tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    assert_eq!(b.balance(), "hot-cold");
    // n0 answers fastest but has 40 requests in its app (from every proxy):
    // hot. Of the cold ones, n5 answers fastest.
    seqlock::publish(&mems[0], &app(40, 8));
    for m in &mems[1..] {
        seqlock::publish(m, &app(2, 0));
    }
    for (n, ms) in b.nodes().iter().zip([1, 9, 9, 9, 9, 3, 9, 9]) {
        n.observe_latency(Duration::from_millis(ms));
    }
    let hits = spread(&b, 40).await;
    // The first 8 reads carry no threshold yet (nothing is hot): n0 may win
    // those; never after.
    assert!(hits[0] <= 1, "{hits:?}");
    assert!(hits[5] >= 39, "{hits:?}");
}

fn queued(busy: u64, queue: u64, capacity: u64, total: u64) -> LoadSample {
    LoadSample {
        app_busy: busy,
        app_capacity: capacity,
        app_queue_len: queue,
        requests_total: total,
        ..Default::default()
    }
}

/// Two shm nodes under `shortest-wait` (d = 2: both read every time).
async fn two_draining(
    dir: &Path,
) -> (
    Backends,
    Arc<NodeWindows>,
    Vec<WindowMemory>,
    watch::Sender<bool>,
) {
    let (cfg, mems) = setup_with(dir, "shortest-wait", 2, "", "");
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let b = Backends::build_with_windows(&cfg, None, &windows);
    assert_eq!(b.balance(), "shortest-wait");
    (b, windows, mems, tx)
}

/// `steps` publications 5 ms apart from `base`, each followed by a pick
/// (released at once): both nodes show 4 of 4 workers busy and 2 queued
/// (the app index ties them); n0 completes 1 request per step, n1 4 (a
/// co-tenant holds 3 of n0's workers). Counts the picks from step `from`.
async fn drain_steps(
    b: &Backends,
    mems: &[WindowMemory],
    base: u64,
    steps: u64,
    from: u64,
) -> [usize; 2] {
    let mut hits = [0usize; 2];
    for k in 0..steps {
        let at = base + k * 5_000_000;
        seqlock::publish_at(&mems[0], &queued(4, 2, 4, 1000 + k), at);
        seqlock::publish_at(&mems[1], &queued(4, 2, 4, 1000 + 4 * k), at);
        let p = pick(b).await;
        if k >= from {
            hits[p.node.index] += 1;
        }
    }
    hits
}

#[tokio::test]
async fn shortest_wait_sends_to_the_node_that_drains_faster() {
    let dir = tempfile::tempdir().unwrap();
    let (b, windows, mems, tx) = two_draining(dir.path()).await;
    let base = rdmalb_base::time::unix_now_ns() - 150_000_000;
    let hits = drain_steps(&b, &mems, base, 30, 15).await;
    assert_eq!(hits, [0, 15]);
    // /status shows the expected wait: 3 requests at about 800/s, in ms.
    let index = windows.node(1).unwrap().last().unwrap().index.unwrap();
    assert!(
        index > 3.0 / 0.8 * 0.5 && index < 3.0 / 0.8 * 2.0,
        "{index}"
    );
    // A free worker on n0 beats any wait on n1.
    let at = base + 30 * 5_000_000;
    seqlock::publish_at(&mems[0], &queued(3, 0, 4, 1031), at);
    seqlock::publish_at(&mems[1], &queued(4, 1, 4, 1121), at);
    assert_eq!(pick(&b).await.node.index, 0);
    tx.send(true).unwrap();
}

#[tokio::test]
async fn shortest_wait_scores_a_restarted_or_stale_node_like_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _windows, mems, tx) = two_draining(dir.path()).await;
    let base = rdmalb_base::time::unix_now_ns() - 100_000_000;
    drain_steps(&b, &mems, base, 20, 20).await;
    // n1 restarts (its counter starts over): no rate, no latency word, so
    // it is neither preferred for a wait it cannot estimate nor starved:
    // it scores as the mean of the known ones and the two share requests
    // by in-flight count.
    let at = base + 20 * 5_000_000;
    seqlock::publish_at(&mems[0], &queued(4, 2, 4, 1020), at);
    seqlock::publish_at(&mems[1], &queued(4, 2, 4, 2), at);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pick(&b).await);
    }
    let on1 = held.iter().filter(|p| p.node.index == 1).count();
    assert_eq!(on1, 2);
    drop(held);
    // A stale n0 (not republished for longer than routing.staleness) is
    // scored the same way.
    seqlock::publish_at(&mems[0], &queued(0, 0, 4, 1020), base - 1_000_000_000);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pick(&b).await);
    }
    let on0 = held.iter().filter(|p| p.node.index == 0).count();
    assert_eq!(on0, 2);
    tx.send(true).unwrap();
}

/// Two shm nodes under `balance` with the app index only (weight 1) and
/// `routing`; n0 publishes `a`, n1 `b`, once. Takes `held` picks, held,
/// then `released` picks, each released at once; returns how many of each
/// went to n0 and n1.
async fn two_published(
    balance: &str,
    routing: &str,
    [a, b]: [LoadSample; 2],
    held: usize,
    released: usize,
) -> [[usize; 2]; 2] {
    let dir = tempfile::tempdir().unwrap();
    let (mut cfg, mems) = setup_with(dir.path(), balance, 2, routing, "");
    for s in &mut cfg.sites {
        s.weights.window.app = 1.0;
        s.weights.window.cpu = 0.0;
    }
    let (tx, rx) = watch::channel(false);
    let windows = NodeWindows::start(&cfg, rx).await.unwrap();
    let backends = Backends::build_with_windows(&cfg, None, &windows);
    seqlock::publish(&mems[0], &a);
    seqlock::publish(&mems[1], &b);
    let mut kept = Vec::new();
    for _ in 0..held {
        kept.push(pick(&backends).await);
    }
    let on1 = kept.iter().filter(|p| p.node.index == 1).count();
    let after = spread(&backends, released).await;
    tx.send(true).unwrap();
    [[held - on1, on1], [after[0], after[1]]]
}

#[tokio::test]
async fn requests_sent_after_the_block_count_as_load() {
    // n1 looks less loaded (0 of 4 busy against 1), and neither publishes
    // again. Counting this proxy's requests the blocks cannot show yet,
    // the second request already goes to n0 (both then have 1 busy);
    // the app index as published sends every one to n1 (the in-flight
    // term weighs 0.1 at most, a busy worker 0.25).
    let loads = [queued(1, 0, 4, 0), queued(0, 0, 4, 0)];
    let wll = "weighted-least-load";
    assert_eq!(two_published(wll, "", loads, 4, 0).await[0], [2, 2]);
    let ignore = "unseen = \"ignore\"";
    assert_eq!(two_published(wll, ignore, loads, 4, 0).await[0], [0, 4]);
    // Answered at once: nothing in flight, so nothing unseen; the less
    // loaded node takes every request.
    assert_eq!(two_published(wll, "", loads, 0, 10).await[1], [0, 10]);
}

#[tokio::test]
async fn shortest_wait_counts_unseen_requests_in_the_wait() {
    // n1 has a free worker (no wait), n0 none (a wait of one request at
    // the nominal 4 / 10 ms). The first request takes n1's free worker;
    // counting it, n1 has no free worker either and the two wait alike,
    // so the in-flight tie-break sends the second to n0. Ignoring it, n1
    // still shows a free worker and takes the second too.
    let loads = [queued(4, 0, 4, 0), queued(3, 0, 4, 0)].map(|s| LoadSample {
        app_latency_us: 10_000,
        ..s
    });
    let sw = "shortest-wait";
    assert_eq!(two_published(sw, "", loads, 2, 0).await[0], [1, 1]);
    let ignore = "unseen = \"ignore\"";
    assert_eq!(two_published(sw, ignore, loads, 2, 0).await[0], [0, 2]);
}

#[tokio::test]
async fn shortest_wait_avoids_a_node_whose_queue_is_full() {
    // n0 drains 4x faster (nominal 4 / 10 ms against 4 / 40 ms) and its
    // queue of 64 is full: its wait (65 at 400/s: 162 ms) is below n1's
    // (21 at 100/s: 210 ms), but a request sent there would be refused.
    let limited = |s: LoadSample, latency_us| LoadSample {
        app_latency_us: latency_us,
        app_queue_limit: 64,
        ..s
    };
    let loads = [
        limited(queued(4, 64, 4, 0), 10_000),
        limited(queued(4, 20, 4, 0), 40_000),
    ];
    let sw = "shortest-wait";
    assert_eq!(two_published(sw, "", loads, 0, 5).await[1], [0, 5]);
    let ignore = "full_queue = \"ignore\"";
    assert_eq!(two_published(sw, ignore, loads, 0, 5).await[1], [5, 0]);
    // Without a published queue limit nothing is full: the shorter wait.
    let unlimited = loads.map(|s| LoadSample {
        app_queue_limit: 0,
        ..s
    });
    assert_eq!(two_published(sw, "", unlimited, 0, 5).await[1], [5, 0]);
    // Both full: the shorter wait again.
    let loads = [loads[0], limited(queued(4, 64, 4, 0), 40_000)];
    assert_eq!(two_published(sw, "", loads, 0, 5).await[1], [5, 0]);
}

/// The candidates of one decision ([`draw`]): distinct, in range, each
/// node equally likely in every position, whatever the pool size and `d`.
#[test]
fn draw_is_uniform_and_distinct() {
    let mut rng = fastrand::Rng::with_seed(29);
    for (n, d) in [
        (2, 2),
        (3, 2),
        (4, 2),
        (64, 2),
        (5, 3),
        (16, 4),
        (9, 8),
        (40, 16),
    ] {
        let trials = 2000 * n;
        let mut first = vec![0usize; n];
        let mut any = vec![0usize; n];
        let mut out = [0usize; INLINE];
        for _ in 0..trials {
            draw(|b| rng.usize(..b), n, &mut out[..d]);
            let got = &out[..d];
            assert!(got.iter().all(|&i| i < n), "{got:?} of {n}");
            for (k, a) in got.iter().enumerate() {
                assert!(!got[k + 1..].contains(a), "{got:?} repeats {a}");
                any[*a] += 1;
            }
            first[got[0]] += 1;
        }
        // Each node: expected trials·d/n picks and trials/n first places;
        // allow 10 % (the counts are ≥ 2000, their spread ≤ 2.3 %).
        for i in 0..n {
            let (want_any, want_first) = ((trials * d / n) as f64, (trials / n) as f64);
            assert!(
                (any[i] as f64 - want_any).abs() < 0.1 * want_any,
                "n {n} d {d}: node {i} sampled {} times, want ≈{want_any}",
                any[i]
            );
            assert!(
                (first[i] as f64 - want_first).abs() < 0.1 * want_first,
                "n {n} d {d}: node {i} first {} times, want ≈{want_first}",
                first[i]
            );
        }
    }
}

/// `candidates = "all"` compares every node whether the decision keeps
/// them on the stack (up to INLINE, in arrays of 2, 4, 8 and 16 of which
/// only the first n count) or in vectors (more): the least loaded wins,
/// wherever it sits.
#[tokio::test]
async fn all_candidates_on_the_stack_or_not() {
    for n in [2, 3, 5, 9, INLINE, INLINE + 1, 20] {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, mems) = setup(dir.path(), n, "candidates = \"all\"", "");
        let (tx, rx) = watch::channel(false);
        let windows = NodeWindows::start(&cfg, rx).await.unwrap();
        let b = Backends::build_with_windows(&cfg, None, &windows);
        for (i, m) in mems.iter().enumerate() {
            seqlock::publish(m, &cpu(500_000 + 10_000 * i as u64));
        }
        for least in [0, n / 2, n - 1] {
            seqlock::publish(&mems[least], &cpu(100_000));
            assert_eq!(pick(&b).await.node.index, least, "{n} nodes");
            seqlock::publish(&mems[least], &cpu(900_000));
        }
        // Every node's index was scored and kept for /status.
        for i in 0..n {
            assert!(windows.node(i).unwrap().last().unwrap().index.is_some());
        }
        tx.send(true).unwrap();
    }
}
