//! The completion poller every verbs window of a process shares
//! (`crates/window/src/verbs/poller.rs`), tested on a real RDMA device: many
//! windows served by this process and read and CAS-ed concurrently through
//! one completion thread, a queue pair that fails without touching the
//! others, and the thread stopping with the last window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmalb_window::layout::{self, update_counter_word, word};
use rdmalb_window::verbs::{VerbsServer, VerbsWindow};
use rdmalb_window::{
    publish, read_load, Expect, LoadRead, LoadSample, Psk, ReadPolicy, RemoteWindow, RoleState,
    RoleWord, SiteSlot, WindowError, WindowMemory,
};
use tokio::sync::watch;

const SITES: [&str; 2] = ["shop", "blog"];

fn site_hash() -> u64 {
    layout::site_table_hash(&SITES)
}

/// Threads of this process named like the verbs completion thread.
pub fn completion_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "rdmalb-verbs-cq")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits (at most 5 s, polling) until `cond` holds; false if it never did.
async fn within_5s(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Sample `seq` of window `node`: every field is a function of the two,
/// so a read shows whose block it is and whether it is whole.
fn sample(node: u64, seq: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: seq % 1_000_000,
        run_queue_milli: node,
        net_rx_bps: seq.wrapping_mul(3).wrapping_add(node),
        requests_total: seq,
        app_capacity: 1000 + node,
        ..LoadSample::default()
    }
}

/// `n` windows served by this process (one [`VerbsServer`] each, a
/// publisher thread writing every window's load block) and `n`
/// [`VerbsWindow`]s to them.
pub struct Many {
    pub mems: Vec<Arc<WindowMemory>>,
    pub windows: Vec<Arc<VerbsWindow>>,
    servers: Vec<VerbsServer>,
    publishing: Arc<AtomicBool>,
    publisher: Option<std::thread::JoinHandle<()>>,
    _stop: watch::Sender<bool>,
}

impl Many {
    pub async fn start(n: usize) -> Many {
        let psk = Psk::generate();
        let (stop, stop_rx) = watch::channel(false);
        let device = std::env::var("RDMALB_VERBS_DEVICE").ok();
        let mut mems = Vec::new();
        let mut servers = Vec::new();
        for i in 0..n {
            let node = i as u64 + 1;
            let mem = Arc::new(WindowMemory::anonymous(node, site_hash()).expect("memory"));
            let role = RoleWord {
                site: SiteSlot::Site(0),
                state: RoleState::Active,
                epoch: 1,
            };
            mem.compare_swap(word::ROLE, 0, role.encode());
            publish(&mem, &sample(node, 1));
            servers.push(
                VerbsServer::start(
                    mem.clone(),
                    "127.0.0.1:0".parse().unwrap(),
                    psk.clone(),
                    device.clone(),
                    stop_rx.clone(),
                )
                .expect("a verbs server (this test needs an RDMA device)"),
            );
            mems.push(mem);
        }
        let publishing = Arc::new(AtomicBool::new(true));
        let publisher = {
            let (mems, on) = (mems.clone(), publishing.clone());
            std::thread::spawn(move || {
                // Bounded: stops when asked, or after 10 minutes at the most.
                let end = Instant::now() + Duration::from_secs(600);
                let mut seq = 1;
                while on.load(Ordering::Acquire) && Instant::now() < end {
                    seq += 1;
                    for (i, m) in mems.iter().enumerate() {
                        publish(m, &sample(i as u64 + 1, seq));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let mut windows = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            let expect = Expect {
                node_id: Some(i as u64 + 1),
                site_hash: Some(site_hash()),
            };
            windows.push(Arc::new(
                VerbsWindow::connect(s.local_addr(), &psk, 7, &expect, device.as_deref())
                    .await
                    .unwrap_or_else(|e| panic!("connecting window {}: {e}", i + 1)),
            ));
        }
        Many {
            mems,
            windows,
            servers,
            publishing,
            publisher: Some(publisher),
            _stop: stop,
        }
    }
}

impl Drop for Many {
    fn drop(&mut self) {
        self.publishing.store(false, Ordering::Release);
        if let Some(p) = self.publisher.take() {
            let _ = p.join();
        }
        self.windows.clear();
        for s in self.servers.drain(..) {
            drop(s);
        }
    }
}

/// One window's round: a READ (contents checked), a CAS that must win, a
/// CAS that must lose, a FAA. Returns the problems found.
async fn round(w: &VerbsWindow, node: u64, k: u64, last_seq: &mut u64) -> Vec<String> {
    let mut bad = Vec::new();
    // Generous bounds: the guest emulates its CPUs, and 64 windows read at
    // once through one thread is the point; a bound, not a timing claim.
    let policy = ReadPolicy {
        retries: 20,
        staleness: Duration::from_secs(30),
        deadline: Duration::from_secs(10),
    };
    match read_load(w, &policy).await {
        LoadRead::Fresh(b) => {
            let s = b.sample;
            let seq = s.requests_total;
            if s != sample(node, seq) {
                bad.push(format!(
                    "window {node}: read a block that is not its own sample {seq}: {s:?}"
                ));
            }
            if seq < *last_seq {
                bad.push(format!(
                    "window {node}: sample went back from {last_seq} to {seq}"
                ));
            }
            *last_seq = seq;
        }
        other => bad.push(format!("window {node}: read {other:?}")),
    }
    // Role word: epoch k -> k + 1 must win; a CAS from the old value must lose.
    let from = RoleWord {
        site: SiteSlot::Site(0),
        state: RoleState::Active,
        epoch: k,
    };
    let to = from.next(SiteSlot::Site((k % 2) as u16), RoleState::Switching);
    match w.compare_swap(word::ROLE, from.encode(), to.encode()).await {
        Ok(old) if old == from.encode() => {}
        Ok(old) => bad.push(format!("window {node}: CAS {k} lost, word held {old:#x}")),
        Err(e) => bad.push(format!("window {node}: CAS {k}: {e}")),
    }
    let back = RoleWord {
        state: RoleState::Active,
        ..to
    };
    match w.compare_swap(word::ROLE, from.encode(), 1).await {
        Ok(old) if old == to.encode() => {}
        Ok(old) => bad.push(format!(
            "window {node}: stale CAS {k} saw {old:#x}, expected {:#x}",
            to.encode()
        )),
        Err(e) => bad.push(format!("window {node}: stale CAS {k}: {e}")),
    }
    // Leave it ACTIVE at epoch k + 1 for the next round.
    match w
        .compare_swap(
            word::ROLE,
            to.encode(),
            RoleWord {
                site: SiteSlot::Site(0),
                ..back
            }
            .encode(),
        )
        .await
    {
        Ok(old) if old == to.encode() => {}
        Ok(old) => bad.push(format!("window {node}: CAS back {k} saw {old:#x}")),
        Err(e) => bad.push(format!("window {node}: CAS back {k}: {e}")),
    }
    let counter = update_counter_word(0).expect("counter word");
    match w.fetch_add(counter, 1).await {
        Ok(old) if old == k - 1 => {}
        Ok(old) => bad.push(format!(
            "window {node}: FAA {k} returned {old}, expected {}",
            k - 1
        )),
        Err(e) => bad.push(format!("window {node}: FAA {k}: {e}")),
    }
    bad
}

/// `n` windows, `rounds` rounds on all of them at once through the one
/// completion thread; every read's contents and every CAS and FAA result
/// checked, and the owners' words at the end.
pub async fn many_windows(n: usize, rounds: u64) {
    assert!(
        within_5s(|| completion_threads() == 0).await,
        "a completion thread of an earlier test is still running"
    );
    let many = Many::start(n).await;
    assert_eq!(
        completion_threads(),
        1,
        "{n} verbs windows share one completion thread"
    );
    let mut last = vec![0u64; n];
    let mut problems = Vec::new();
    for k in 1..=rounds {
        let ops = many
            .windows
            .iter()
            .zip(last.iter_mut())
            .enumerate()
            .map(|(i, (w, l))| round(w, i as u64 + 1, k, l));
        for bad in futures_util::future::join_all(ops).await {
            problems.extend(bad);
        }
    }
    for (i, m) in many.mems.iter().enumerate() {
        let role = RoleWord::decode(m.load(word::ROLE).unwrap()).unwrap();
        if role.epoch != rounds + 1 || role.state != RoleState::Active {
            problems.push(format!("window {}: role at the end {role}", i + 1));
        }
        let counter = m.load(update_counter_word(0).unwrap()).unwrap();
        if counter != rounds {
            problems.push(format!(
                "window {}: counter {counter}, expected {rounds}",
                i + 1
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems, first: {:?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );
    println!(
        "CHECK shared-poller {n} windows x {rounds} rounds: {} reads, {} CAS, {} FAA checked ok",
        n as u64 * rounds,
        3 * n as u64 * rounds,
        n as u64 * rounds
    );
    drop(many);
    assert!(
        within_5s(|| completion_threads() == 0).await,
        "the completion thread stops with the last window"
    );
}

/// A queue pair that fails (the NIC refuses an atomic on the read-only
/// region) breaks its own window only: the others keep working.
pub async fn failed_qp_is_isolated(n: usize) {
    let many = Many::start(n).await;
    let victim = n / 2;
    let r = many.windows[victim]
        .unchecked_compare_swap_read_only(word::SEQ_BEGIN, 0, 1)
        .await;
    assert!(r.is_err(), "the NIC refuses an atomic on region 1: {r:?}");
    assert!(
        within_5s(|| many.windows[victim].broken().is_some()).await,
        "the window whose queue pair failed is broken"
    );
    let after = many.windows[victim].read_word(word::ROLE).await;
    assert!(
        matches!(after, Err(WindowError::Closed { .. })),
        "a broken window fails at once: {after:?}"
    );
    let mut last = vec![0u64; n];
    for k in 1..=5 {
        for (i, w) in many.windows.iter().enumerate() {
            if i == victim {
                continue;
            }
            let bad = round(w, i as u64 + 1, k, &mut last[i]).await;
            assert!(
                bad.is_empty(),
                "window {} after another failed: {bad:?}",
                i + 1
            );
            assert!(w.broken().is_none());
        }
    }
    println!(
        "CHECK shared-poller failed queue pair isolated: 1 of {n} broken, {} others ok",
        n - 1
    );
}
