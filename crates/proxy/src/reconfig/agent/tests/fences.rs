//! Claims under faults, on paused time, through a fault-injecting window
//! wrapper around the real in-process windows:
//! - a role CAS whose reply is lost is read back, never taken as failed
//!   (issue 12, defect 5);
//! - a lock taken over, or a lock home restarted, while a claim is under
//!   way stops it before its next write (defects 4 and 6);
//! - a node already on its way to the hot site gets no second claim
//!   (defect 4).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex as StdMutex;

use super::*;
use rdmalb_window::layout::{site_lock_word, update_counter_word};
use rdmalb_window::{SiteLock, TransportKind, WindowFuture};

/// How [`Faulty`] treats a CAS of the role word.
const CAS_OK: u8 = 0;
/// It lands, and its reply is lost.
const CAS_REPLY_LOST: u8 = 1;
/// It lands two seconds later, after the caller gave up.
const CAS_LATE: u8 = 2;

type Hook = Box<dyn FnOnce(&Faulty) + Send>;

/// A window whose faults the test chooses.
struct Faulty {
    inner: StdMutex<Arc<dyn RemoteWindow>>,
    role_cas: AtomicU8,
    /// Runs once, right after the first site-lock CAS that succeeds.
    after_lock: StdMutex<Option<Hook>>,
}

impl Faulty {
    fn new(inner: Arc<dyn RemoteWindow>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner: StdMutex::new(inner),
            role_cas: AtomicU8::new(CAS_OK),
            after_lock: StdMutex::new(None),
        })
    }

    fn cur(&self) -> Arc<dyn RemoteWindow> {
        self.inner.lock().unwrap().clone()
    }

    /// The peer restarted: from now on this window is `fresh`.
    fn replace(&self, fresh: Arc<dyn RemoteWindow>) {
        *self.inner.lock().unwrap() = fresh;
    }
}

impl RemoteWindow for Faulty {
    fn kind(&self) -> TransportKind {
        TransportKind::Shm
    }
    fn peer(&self) -> &str {
        "faulty"
    }
    fn is_alive(&self) -> bool {
        self.cur().is_alive()
    }
    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]> {
        let w = self.cur();
        Box::pin(async move { w.read_raw().await })
    }
    fn read_word(&self, wd: usize) -> WindowFuture<'_, u64> {
        let w = self.cur();
        Box::pin(async move { w.read_word(wd).await })
    }
    fn compare_swap(&self, wd: usize, expected: u64, new: u64) -> WindowFuture<'_, u64> {
        let w = self.cur();
        let mode = if wd == word::ROLE {
            self.role_cas.load(Ordering::SeqCst)
        } else {
            CAS_OK
        };
        let is_lock = (0..64).any(|s| site_lock_word(s) == Some(wd));
        Box::pin(async move {
            match mode {
                CAS_REPLY_LOST => {
                    let r = w.compare_swap(wd, expected, new).await;
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    r
                }
                CAS_LATE => {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        let _ = w.compare_swap(wd, expected, new).await;
                    });
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Err(rdmalb_window::WindowError::Closed {
                        peer: "faulty".into(),
                    })
                }
                _ => {
                    let old = w.compare_swap(wd, expected, new).await?;
                    if is_lock && old == expected {
                        let hook = self.after_lock.lock().unwrap().take();
                        if let Some(h) = hook {
                            h(self);
                        }
                    }
                    Ok(old)
                }
            }
        })
    }
    fn fetch_add(&self, wd: usize, delta: u64) -> WindowFuture<'_, u64> {
        let w = self.cur();
        Box::pin(async move { w.fetch_add(wd, delta).await })
    }
}

/// Proxy 2's agent, reaching the lock home (proxy 1) through `home` and the
/// nodes through `nodes` (each `None` stays direct).
fn agent2(c: &Cluster, home: Option<Arc<Faulty>>, nodes: &[Option<Arc<Faulty>>]) -> Arc<Agent> {
    let mut s = source(c);
    if let Some(h) = home {
        s.proxies.insert(1, h);
    }
    for (i, f) in nodes.iter().enumerate() {
        if let Some(f) = f {
            s.nodes[i] = f.clone();
        }
    }
    agent_over(c, 2, 2, s, None)
}

fn direct(m: &Arc<WindowMemory>) -> Arc<dyn RemoteWindow> {
    Arc::new(LocalWindow::new(m.clone()))
}

/// Site 0 (node 0) hot, site 1 (nodes 1 and 2) idle: rounds of `a` until it
/// attempts a claim; returns the outcome.
async fn hot_until_attempt(c: &Cluster, a: &Agent) -> Result<ClaimOutcome, ProtocolError> {
    for _ in 0..30 {
        load(&c.nodes[0], 0.95);
        for n in &c.nodes[1..] {
            load(n, 0.05);
        }
        let (_, outcomes) = a.round().await;
        if let Some((_, r)) = outcomes.into_iter().next() {
            return r;
        }
        tokio::time::sleep(S).await;
    }
    panic!("no claim attempted in 30 rounds");
}

/// Proxy 2's agent reaching every node through a [`Faulty`] window whose
/// role CASes behave as `mode`; rounds until it attempts a claim.
async fn claim_through_faulty_nodes(
    c: &Cluster,
    mode: u8,
) -> (Arc<Agent>, Result<ClaimOutcome, ProtocolError>) {
    let faulty: Vec<_> = c
        .nodes
        .iter()
        .map(|m| Some(Faulty::new(direct(m))))
        .collect();
    for f in faulty.iter().flatten() {
        f.role_cas.store(mode, Ordering::SeqCst);
    }
    let a = agent2(c, None, &faulty);
    let out = hot_until_attempt(c, &a).await;
    (a, out)
}

fn counter(m: &WindowMemory, site: usize) -> u64 {
    m.load(update_counter_word(site).unwrap()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_reply_is_lost_is_read_back_and_counted() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 2);
    let (a, out) = claim_through_faulty_nodes(&c, CAS_REPLY_LOST).await;
    assert!(
        matches!(out, Ok(ClaimOutcome::Claimed { .. })),
        "the CAS landed, its reply was lost: {out:?}"
    );
    assert_eq!(epochs(&c), 1);
    assert_eq!(a.counters().snapshot().claims, 1);
    assert_eq!(counter(&c.proxies[0], 0), 1, "the peer was told");
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_lands_late_is_settled_from_the_role_word() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 2);
    let (a, out) = claim_through_faulty_nodes(&c, CAS_LATE).await;
    assert!(
        matches!(out, Ok(ClaimOutcome::Unresolved { .. })),
        "no reply, the word still at the old value: {out:?}"
    );
    assert_eq!(counter(&c.proxies[0], 0), 1, "the peer was told anyway");
    assert_eq!(a.counters().snapshot().claims, 0);
    // The CAS lands; the next round finds our word there and counts it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(epochs(&c), 1);
    a.round().await;
    let snap = a.counters().snapshot();
    assert_eq!((snap.claims, snap.unresolved), (1, 1));
}

/// Runs `hook` right after proxy 2 takes the site lock, then expects the
/// claim to stop with `LockLost` and no node moved by proxy 2.
async fn lock_lost_after(hook: Hook, c: &Cluster) -> Arc<Agent> {
    let home = Faulty::new(direct(&c.proxies[0]));
    *home.after_lock.lock().unwrap() = Some(hook);
    let a = agent2(c, Some(home), &[]);
    let out = hot_until_attempt(c, &a).await;
    assert!(
        matches!(out, Ok(ClaimOutcome::LockLost { .. })),
        "claimed without the lock: {out:?}"
    );
    assert_eq!(epochs(c), 0, "nothing written after the lock was lost");
    assert_eq!(counter(&c.proxies[0], 0), 0);
    assert_eq!(a.counters().snapshot().fenced, 1);
    a
}

#[tokio::test(start_paused = true)]
async fn a_lock_taken_over_while_held_stops_the_claim_before_any_write() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 2);
    let home = c.proxies[0].clone();
    // Proxy 1 takes the lock over (as if proxy 2's lease had run out).
    let steal: Hook = Box::new(move |_| {
        let w = site_lock_word(0).unwrap();
        let raw = home.load(w).unwrap();
        let theirs = SiteLock::held(1, u64::MAX >> 20).unwrap().encode();
        assert_eq!(home.compare_swap(w, raw, theirs), Some(raw));
    });
    lock_lost_after(steal, &c).await;
}

#[tokio::test(start_paused = true)]
async fn a_restarted_lock_home_stops_the_claim_before_any_write() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 2);
    // The lock home restarts: fresh memory, free locks, a new generation.
    let restart: Hook = Box::new(|f| {
        f.replace(Arc::new(LocalWindow::new(Arc::new(
            WindowMemory::anonymous(1, 0).unwrap(),
        ))));
    });
    lock_lost_after(restart, &c).await;
}

#[tokio::test(start_paused = true)]
async fn a_node_already_switching_to_the_site_gets_no_second_claim() {
    // Site 1 can spare two nodes, so only the check stops a second claim.
    let c = cluster(&[Some(0), Some(1), Some(1), Some(1)], 2);
    let n2 = c.nodes[2].clone();
    // Proxy 1 claimed node 2 for the site just before; its bump of proxy
    // 2's counter has not landed.
    let other: Hook = Box::new(move |_| {
        let old = role(&n2);
        let new = old.next(SiteSlot::Site(0), RoleState::Switching);
        assert_eq!(
            n2.compare_swap(word::ROLE, old.encode(), new.encode()),
            Some(old.encode())
        );
    });
    let home = Faulty::new(direct(&c.proxies[0]));
    *home.after_lock.lock().unwrap() = Some(other);
    let a = agent2(&c, Some(home), &[]);
    let out = hot_until_attempt(&c, &a).await;
    assert!(
        matches!(&out, Ok(ClaimOutcome::Coming { node }) if node == "n2"),
        "{out:?}"
    );
    assert_eq!(epochs(&c), 1, "only proxy 1's claim");
}
