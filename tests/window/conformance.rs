//! One conformance suite for every window transport.
//!
//! Each transport provides a factory returning a [`Target`]: the owner's
//! memory (what a sidecar holds) and a way to connect clients to it (what a
//! proxy does). The same cases run against every target; adding a transport
//! is one `conformance!(name, factory);` line at the bottom.
//!
//! Cases: READ freshness, seqlock consistency under a continuously
//! publishing writer (zero torn blocks accepted), CAS with exactly one
//! winner among N concurrent clients over many rounds, FAA totals from N
//! clients, refusal of atomics outside the control area (load block left
//! unchanged), and header mismatches (magic, version, site table, node id)
//! refused with the right error. Transport-specific refusals (unauthenticated
//! tcp peers) are in `tests/window_tcp.rs`.

use std::any::Any;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdmalb_window::layout::{self, word};
use rdmalb_window::seqlock::{publish_at, snapshot};
use rdmalb_window::{
    decode_block, publish, read_load, Expect, LoadRead, LoadSample, ReadPolicy, RemoteWindow,
    RoleState, RoleWord, ShmWindow, SiteSlot, TcpWindow, UnknownReason, WindowError, WindowMemory,
};

type Connected = Pin<Box<dyn Future<Output = Result<Arc<dyn RemoteWindow>, WindowError>> + Send>>;

/// A window owner plus a way for clients to reach it.
pub struct Target {
    /// The owner's memory (the sidecar side).
    pub owner: Arc<WindowMemory>,
    /// Connect a client as `proxy_id`, checking the header against `Expect`.
    pub connect: Box<dyn Fn(u16, Expect) -> Connected + Send + Sync>,
    /// Keeps servers and temporary files alive for the test.
    pub _keep: Box<dyn Any + Send + Sync>,
}

const NODE: u64 = 42;
const SITES: [&str; 3] = ["shop", "blog", "api"];

fn site_hash() -> u64 {
    layout::site_table_hash(&SITES)
}

fn expect() -> Expect {
    Expect {
        node_id: Some(NODE),
        site_hash: Some(site_hash()),
    }
}

fn shm_dir() -> tempfile::TempDir {
    let base = std::path::Path::new("/dev/shm");
    if base.is_dir() {
        tempfile::tempdir_in(base).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// shm: the owner creates a file under /dev/shm; clients map it.
pub async fn shm_target() -> Target {
    let dir = shm_dir();
    let path = dir.path().join("node42.window");
    let owner = Arc::new(WindowMemory::create_shm(&path, 0o600, NODE, site_hash()).unwrap());
    Target {
        owner,
        connect: Box::new(move |_proxy, expect| {
            let path = path.clone();
            Box::pin(async move {
                Ok(Arc::new(ShmWindow::open(&path, &expect)?) as Arc<dyn RemoteWindow>)
            })
        }),
        _keep: Box::new(dir),
    }
}

/// tcp: the owner serves anonymous memory on a loopback port.
pub async fn tcp_target() -> Target {
    let owner = Arc::new(WindowMemory::anonymous(NODE, site_hash()).unwrap());
    let psk = rdmalb_window::tcp::Psk::generate();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = rdmalb_window::tcp::serve(
        owner.clone(),
        "127.0.0.1:0".parse().unwrap(),
        psk.clone(),
        stop_rx,
    )
    .unwrap();
    let addr = server.local_addr();
    Target {
        owner,
        connect: Box::new(move |proxy, expect| {
            let psk = psk.clone();
            Box::pin(async move {
                Ok(
                    Arc::new(TcpWindow::connect(addr, &psk, proxy, &expect).await?)
                        as Arc<dyn RemoteWindow>,
                )
            })
        }),
        _keep: Box::new((server, stop_tx)),
    }
}

/// A sample whose fields all derive from `k`: a mix of two writes fails
/// [`check_sample`].
fn sample(k: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: k,
        run_queue_milli: k.wrapping_mul(3),
        mem_used_ppm: k ^ 0xA5A5,
        net_rx_bps: k.wrapping_add(1_000),
        net_tx_bps: k.rotate_left(17),
        active_connections: !k,
        irq_rate: k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        app_busy: k >> 2,
        app_capacity: k | 0x100,
        requests_total: k.wrapping_sub(5),
        app_queue_len: k.swap_bytes(),
        app_latency_us: k.wrapping_mul(5),
        app_queue_limit: k.rotate_left(7),
    }
}

fn check_sample(s: &LoadSample) -> bool {
    *s == sample(s.cpu_util_ppm)
}

fn policy() -> ReadPolicy {
    ReadPolicy {
        retries: 8,
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    }
}

pub async fn read_freshness(t: Target) {
    let w = (t.connect)(1, expect()).await.unwrap();
    match read_load(w.as_ref(), &policy()).await {
        LoadRead::Unknown(UnknownReason::NeverPublished) => {}
        other => panic!("before the first publish: {other:?}"),
    }
    publish(&t.owner, &sample(7));
    let b = match read_load(w.as_ref(), &policy()).await {
        LoadRead::Fresh(b) => b,
        other => panic!("expected fresh: {other:?}"),
    };
    assert_eq!(b.sample, sample(7));
    assert_eq!(b.node_id, NODE);
    publish(&t.owner, &sample(8));
    let b2 = read_load(w.as_ref(), &policy())
        .await
        .fresh()
        .copied()
        .unwrap();
    assert_eq!(b2.sample, sample(8));
    assert!(b2.seq > b.seq);
    assert!(b2.updated_at_ns >= b.updated_at_ns);
    // A block published long ago is reported stale, not fresh.
    publish_at(
        &t.owner,
        &sample(9),
        rdmalb_base::time::unix_now_ns() - 60_000_000_000,
    );
    match read_load(w.as_ref(), &policy()).await {
        LoadRead::Stale(b) => assert_eq!(b.sample, sample(9)),
        other => panic!("expected stale: {other:?}"),
    }
}

pub async fn seqlock_consistency(t: Target) {
    const READERS: usize = 4;
    const READS: usize = 400;
    // Readers go on past READS until the writer has published this many
    // times during their reads (bounded by MAX_READS), so the test always
    // exercises reads that overlap writes, however the scheduler runs the
    // writer thread on a busy machine.
    const OVERLAP: u64 = 200;
    const MAX_READS: usize = 200_000;
    publish(&t.owner, &sample(1));
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let writer = {
        let owner = t.owner.clone();
        let stop = stop.clone();
        let published = published.clone();
        std::thread::spawn(move || {
            let mut k = 2u64;
            // Bounded by count as well as by the readers finishing.
            while !stop.load(Ordering::Relaxed) && k < 50_000_000 {
                publish(&owner, &sample(k));
                published.store(k, Ordering::Relaxed);
                k += 1;
                // A short stable stretch after each publish (still far
                // more often than a sidecar publishes): without it a
                // loaded machine can tear every single read, and the test
                // would prove nothing about accepted reads.
                for _ in 0..256 {
                    std::hint::spin_loop();
                }
            }
            k
        })
    };
    // Wait (bounded) until the writer is running.
    for _ in 0..10_000 {
        if published.load(Ordering::Relaxed) > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert!(
        published.load(Ordering::Relaxed) > 0,
        "the writer thread never ran"
    );
    let mut readers = Vec::new();
    for r in 0..READERS {
        let w = (t.connect)(r as u16 + 1, expect()).await.unwrap();
        let published = published.clone();
        readers.push(tokio::spawn(async move {
            let (mut ok, mut torn, mut last) = (0u32, 0u32, 0u64);
            let first = published.load(Ordering::Relaxed);
            let mut n = 0;
            while n < READS
                || (published.load(Ordering::Relaxed) < first + OVERLAP && n < MAX_READS)
            {
                n += 1;
                let raw = w.read_raw().await.unwrap();
                match decode_block(&raw) {
                    Ok(b) => {
                        assert!(check_sample(&b.sample), "torn block accepted: {b:?}");
                        assert!(b.seq >= last, "sequence went backwards");
                        last = b.seq;
                        ok += 1;
                    }
                    Err(e) => {
                        assert!(e.is_retryable(), "{e}");
                        torn += 1;
                    }
                }
                // The policy reader never hands out a torn block either.
                match read_load(w.as_ref(), &policy()).await {
                    LoadRead::Fresh(b) | LoadRead::Stale(b) => {
                        assert!(check_sample(&b.sample), "read_load returned a torn block")
                    }
                    LoadRead::Unknown(UnknownReason::Torn { .. }) => {}
                    LoadRead::Unknown(other) => panic!("{other}"),
                }
                if n % 64 == 0 {
                    // Let the writer thread in on a machine with few cores.
                    tokio::task::yield_now().await;
                }
            }
            let overlapped = published.load(Ordering::Relaxed).saturating_sub(first);
            (ok, torn, overlapped)
        }));
    }
    let mut accepted = 0;
    let mut overlapped = u64::MAX;
    for r in readers {
        let (ok, _torn, o) = r.await.unwrap();
        accepted += ok;
        overlapped = overlapped.min(o);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        overlapped > 0,
        "the writer never published while a reader read ({MAX_READS} reads each)"
    );
    assert!(accepted > 0, "some reads were consistent");
}

pub async fn cas_exactly_one_winner(t: Target) {
    const CLIENTS: usize = 8;
    const ROUNDS: u64 = 150;
    let mut clients = Vec::new();
    for i in 0..CLIENTS {
        clients.push((t.connect)(i as u16 + 1, expect()).await.unwrap());
    }
    let mut current = RoleWord {
        site: SiteSlot::Idle,
        state: RoleState::Active,
        epoch: 0,
    };
    t.owner.words()[word::ROLE].store(current.encode(), Ordering::Release);
    for round in 0..ROUNDS {
        let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
        let tasks: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let c = c.clone();
                let barrier = barrier.clone();
                let new = current.next(SiteSlot::Site(i as u16), RoleState::Switching);
                tokio::spawn(async move {
                    barrier.wait().await;
                    let old = c
                        .compare_swap(word::ROLE, current.encode(), new.encode())
                        .await
                        .unwrap();
                    (old == current.encode(), new, old)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (won, new, old) = task.await.unwrap();
            if won {
                winners.push(new);
            } else {
                // A loser sees the winner's value, never a stale one.
                let seen = RoleWord::decode(old).unwrap();
                assert_eq!(seen.epoch, current.epoch + 1, "round {round}");
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let now = clients[0].read_word(word::ROLE).await.unwrap();
        assert_eq!(now, winners[0].encode(), "round {round}");
        current = winners[0];
    }
    assert_eq!(current.epoch, ROUNDS);
}

pub async fn faa_totals(t: Target) {
    const CLIENTS: u64 = 6;
    const ADDS: u64 = 300;
    let counter = layout::update_counter_word(2).unwrap();
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let c = (t.connect)(i as u16 + 1, expect()).await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut olds = Vec::new();
            for _ in 0..ADDS {
                olds.push(c.fetch_add(counter, i + 1).await.unwrap());
            }
            olds
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for old in task.await.unwrap() {
            assert!(
                seen.insert(old),
                "two adds returned the same old value {old}"
            );
        }
    }
    let expected: u64 = (1..=CLIENTS).map(|d| d * ADDS).sum();
    assert_eq!(t.owner.load(counter), Some(expected));
    let c = (t.connect)(99, expect()).await.unwrap();
    assert_eq!(c.read_word(counter).await.unwrap(), expected);
    // Wrapping add: subtracting by adding the two's complement.
    c.fetch_add(counter, expected.wrapping_neg()).await.unwrap();
    assert_eq!(t.owner.load(counter), Some(0));
}

pub async fn refuse_outside_control_area(t: Target) {
    publish(&t.owner, &sample(5));
    let before = snapshot(&t.owner);
    let w = (t.connect)(1, expect()).await.unwrap();
    for bad in [
        0usize,
        1,
        3,
        8,
        9,
        20,
        31,
        192,
        300,
        511,
        512,
        1 << 20,
        usize::MAX,
    ] {
        let e = w
            .compare_swap(bad, before.get(bad).copied().unwrap_or(0), 1)
            .await;
        assert!(
            matches!(e, Err(WindowError::Refused { word, .. }) if word == bad),
            "cas {bad}: {e:?}"
        );
        let e = w.fetch_add(bad, 1).await;
        assert!(
            matches!(e, Err(WindowError::Refused { .. })),
            "faa {bad}: {e:?}"
        );
        let e = w.read_word(bad).await;
        assert!(
            matches!(e, Err(WindowError::Refused { .. })),
            "read_word {bad}: {e:?}"
        );
    }
    assert_eq!(
        snapshot(&t.owner),
        before,
        "header and load block unchanged"
    );
    for i in 192..layout::WINDOW_WORDS {
        assert_eq!(t.owner.load(i), Some(0), "reserved word {i} unchanged");
    }
    // The edges of the remote-atomic area work.
    assert_eq!(w.fetch_add(32, 1).await.unwrap(), 0);
    assert_eq!(w.compare_swap(191, 0, 9).await.unwrap(), 0);
    assert_eq!(t.owner.load(191), Some(9));
    // The connection is still usable after refusals.
    assert!(read_load(w.as_ref(), &policy()).await.fresh().is_some());
}

pub async fn header_mismatch_refused(t: Target) {
    let words = t.owner.words();
    match (t.connect)(
        1,
        Expect {
            node_id: None,
            site_hash: Some(site_hash() ^ 1),
        },
    )
    .await
    {
        Err(WindowError::SiteTableMismatch { ours, theirs, .. }) => {
            assert_eq!(ours, site_hash() ^ 1);
            assert_eq!(theirs, site_hash());
        }
        other => panic!("site table mismatch not refused: {:?}", other.map(|_| ())),
    }
    match (t.connect)(
        1,
        Expect {
            node_id: Some(NODE + 1),
            site_hash: None,
        },
    )
    .await
    {
        Err(WindowError::NodeIdMismatch {
            expected, found, ..
        }) => {
            assert_eq!((expected, found), (NODE + 1, NODE));
        }
        other => panic!("node id mismatch not refused: {:?}", other.map(|_| ())),
    }
    words[word::MAGIC].store(u64::from_le_bytes(*b"NOTAWNDW"), Ordering::Release);
    match (t.connect)(1, expect()).await {
        Err(e @ WindowError::BadMagic { .. }) => assert!(e.to_string().contains("RDMALBW1"), "{e}"),
        other => panic!("bad magic not refused: {:?}", other.map(|_| ())),
    }
    words[word::MAGIC].store(layout::MAGIC, Ordering::Release);
    words[word::VERSION].store(2, Ordering::Release);
    match (t.connect)(1, expect()).await {
        Err(WindowError::BadVersion { found: 2, .. }) => {}
        other => panic!("bad version not refused: {:?}", other.map(|_| ())),
    }
    words[word::VERSION].store(layout::LAYOUT_VERSION, Ordering::Release);
    // A window whose header goes bad after connecting reads as unknown with
    // the same error, never as a load block.
    let w = (t.connect)(1, expect()).await.unwrap();
    publish(&t.owner, &sample(3));
    words[word::VERSION].store(9, Ordering::Release);
    match read_load(w.as_ref(), &policy()).await {
        LoadRead::Unknown(UnknownReason::Error(WindowError::BadVersion { found: 9, .. })) => {}
        other => panic!("bad version read as {other:?}"),
    }
    words[word::VERSION].store(layout::LAYOUT_VERSION, Ordering::Release);
    assert!(read_load(w.as_ref(), &policy()).await.fresh().is_some());
}

/// Instantiate every case for one transport. Extra attributes apply to
/// every case, e.g. `conformance!(verbs, super::verbs_target, #[ignore =
/// "needs an RDMA device"]);`.
macro_rules! conformance {
    ($name:ident, $factory:path $(, #[$attr:meta])* $(,)?) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn read_freshness() {
                super::read_freshness($factory().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn seqlock_consistency() {
                super::seqlock_consistency($factory().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn cas_exactly_one_winner() {
                super::cas_exactly_one_winner($factory().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn faa_totals() {
                super::faa_totals($factory().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn refuse_outside_control_area() {
                super::refuse_outside_control_area($factory().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn header_mismatch_refused() {
                super::header_mismatch_refused($factory().await).await
            }
        }
    };
}

conformance!(shm, super::shm_target);
conformance!(tcp, super::tcp_target);
