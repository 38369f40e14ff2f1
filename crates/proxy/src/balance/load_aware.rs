//! The load-aware policies: per decision, take `routing.candidates` of the
//! site's usable nodes ("power of d choices", or all of them), get each
//! one's load — read from its window now (`per-request`) or from the
//! background snapshot (`interval:<d>`) — and let the policy's
//! [`LoadRule`] choose among them: `weighted-least-load`
//! ([`super::least_load::LeastLoad`]), `hot-cold`
//! ([`super::hot_cold::HotCold`]), `shortest-wait`
//! ([`super::drain::ShortestWait`]). [`LoadAware`] does the reading, the
//! rule only ranks, so a new load-aware policy is one [`LoadRule`].
//!
//! Per-request reads of the candidates are issued together and awaited
//! together under one `routing.read_deadline`: shm windows are read inline
//! (plain loads from the mapping: no future, no timer, no task switch);
//! every other read is polled once at once, and only reads still pending
//! (tcp, verbs) wait, jointly, until the deadline. A read that
//! misses it, or a torn, stale or unreadable block, leaves that node scored
//! from local information (its in-flight count), counted in
//! `rdmalb_load_unknown_total{node,reason}`. Down nodes never get here:
//! [`super::Backends`] passes only up, not-excluded, not-full nodes.
//!
//! Each read is combined with what the proxy knows and the window cannot
//! show yet: this proxy's requests dispatched to the node after the block
//! was published ([`unseen`]; `routing.unseen`, on by default), added to
//! its busy workers and queue before any rule scores it.
//!
//! A decision is one pass over its candidates' blocks: each sampled node's
//! block is read once (one seqlock-consistent read of the mapping for shm)
//! into its [`Slot`], and the rule scores the slots' blocks where they
//! lie, borrowed. Up to [`INLINE`] sampled candidates, their scores and
//! the rules' per-candidate values are kept on the stack of the decision:
//! a decision allocates nothing unless a read must wait (tcp, verbs) or it
//! compares more than [`INLINE`] nodes.
//!
//! [`LoadAware`] also implements the synchronous [`Selector`] (for callers
//! of `Backends::pick` outside the request path): it then scores from the
//! interval snapshots and from the last per-request reads (for /status and
//! benchmarks; the data path always uses [`LoadAware::select_loaded`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;

use super::load::{inflight_part, NodeLoad, Unknown, LOAD_TIE};
use super::node_windows::{read_now, NodeWindow, NodeWindows, Table};
use super::selector::Cursors;
use super::unseen;
use super::{NodeState, Selector};
use crate::config::{Balance, Candidates, Config, FullQueue, LoadWeights, ReadMode, Unseen};

/// How a load-aware policy chooses among the loads read: the one part
/// each such policy has of its own. Runs once per request attempt, so it
/// must be cheap and lock-free.
pub trait LoadRule: Send + Sync + std::fmt::Debug + 'static {
    /// The policy's config name.
    fn balance(&self) -> Balance;

    /// Fills `scores` (one per slot, in the order of `decision.slots`)
    /// with each candidate's score (shown in /status as its last index)
    /// and returns the winner's position in `decision.slots`.
    fn choose(&self, decision: &Decision<'_, '_>, scores: &mut [f64]) -> usize;
}

/// Sampled candidates a decision keeps on the stack (the default
/// `routing.candidates`); a decision comparing more keeps them in vectors.
pub const INLINE: usize = 16;

/// What a [`LoadRule`] decides from.
pub struct Decision<'d, 'a> {
    pub site: usize,
    /// The sampled candidates with their loads.
    pub slots: &'d [Slot<'a>],
    /// Where this decision's rotating tie-break starts.
    pub start: usize,
    pub now: SystemTime,
    /// A request-path decision: its reads are new and may be folded into
    /// what a rule measures over time (a synchronous one only looks).
    pub fresh: bool,
    /// The site's load weights.
    pub weights: &'d LoadWeights,
    /// `routing.full_queue`.
    pub full_queue: FullQueue,
}

impl Decision<'_, '_> {
    /// The `weighted-least-load` ranking of the slots (the load index of
    /// their scored blocks, [`super::load::rank`]) into `scores`.
    pub fn rank_by_load(&self, scores: &mut [f64]) -> Option<usize> {
        let (w, slots) = (self.weights, self.slots);
        super::load::rank_with(
            |i| super::load::window_part(w, slots[i].scored()),
            |i| inflight_part(w, slots[i].inflight),
            |i| slots[i].inflight,
            LOAD_TIE,
            self.start,
            scores,
        )
    }

    /// Weighted nodes (`[[node]] weight`, the runtime API, an agent): the
    /// lowest score per unit of weight (a node of weight 2 at index 0.8
    /// ranks with one of weight 1 at 0.4), else `best`.
    pub fn per_weight(&self, scores: &[f64], best: usize) -> usize {
        let slots = self.slots;
        if !super::control::weights_may_differ()
            || slots
                .iter()
                .all(|s| s.node.weight() == slots[0].node.weight())
        {
            return best;
        }
        let per_weight = |i: usize| scores[i] / f64::from(slots[i].node.weight().max(1));
        let n = slots.len();
        let first = self.start % n;
        let mut best = first;
        for i in (first + 1..n).chain(0..first) {
            if per_weight(i) < per_weight(best) {
                best = i;
            }
        }
        best
    }
}

/// A load-aware policy, built per config snapshot: the reading, shared by
/// every load-aware policy, and its [`LoadRule`].
#[derive(Debug)]
pub struct LoadAware {
    rule: Box<dyn LoadRule>,
    windows: Arc<NodeWindows>,
    /// Per site, plus the global default at the end for unknown indices.
    weights: Vec<LoadWeights>,
    candidates: Candidates,
    /// `routing.unseen`.
    unseen: Unseen,
    /// `routing.full_queue`.
    full_queue: FullQueue,
    /// Rotating tie-break start per site.
    cursors: Cursors,
}

/// One sampled candidate during a decision, borrowing the candidate list
/// and the decision's [`Table`] of windows (no reference count touched).
pub struct Slot<'a> {
    pub node: &'a Arc<NodeState>,
    pub window: Option<&'a Arc<NodeWindow>>,
    /// The load read (or why none is known).
    pub load: NodeLoad,
    /// This proxy's requests in flight to the node, read once per decision.
    pub inflight: usize,
    /// `load` with this proxy's requests the block cannot show added
    /// ([`unseen`]), `None` when there are none: what the rules score is
    /// [`Slot::scored`].
    with_unseen: Option<NodeLoad>,
    /// A read was issued and has not landed yet.
    reading: bool,
}

impl Slot<'_> {
    /// What the rules score: the load read, with this proxy's unseen
    /// requests when there are any.
    pub fn scored(&self) -> &NodeLoad {
        self.with_unseen.as_ref().unwrap_or(&self.load)
    }
}

impl LoadAware {
    /// Builds the policy of `rule` for `config`, reading through `windows`.
    pub fn new(config: &Config, windows: Arc<NodeWindows>, rule: Box<dyn LoadRule>) -> LoadAware {
        let mut weights: Vec<LoadWeights> = config.sites.iter().map(|s| s.weights).collect();
        weights.push(LoadWeights::default());
        LoadAware {
            rule,
            windows,
            weights,
            candidates: config.routing.candidates,
            unseen: config.routing.unseen,
            full_queue: config.routing.full_queue,
            cursors: Cursors::new(config.sites.len()),
        }
    }

    /// The windows this policy reads.
    pub fn windows(&self) -> &Arc<NodeWindows> {
        &self.windows
    }

    fn weights(&self, site: usize) -> &LoadWeights {
        let last = self.weights.len() - 1;
        &self.weights[site.min(last)]
    }

    /// The positions (in `candidates`, `n` of them) of the nodes compared
    /// in this decision: all of them, in order, when `d` covers the site,
    /// else `d` distinct ones drawn uniformly.
    fn sample(&self, n: usize) -> Sample {
        let d = match self.candidates {
            Candidates::All => n,
            Candidates::Count(d) => d.min(n),
        };
        if d > INLINE {
            if d == n {
                return Sample::Heap((0..n).collect());
            }
            let picked = rand::seq::index::sample(&mut rand::thread_rng(), n, d);
            return Sample::Heap(picked.into_vec());
        }
        let mut at = [0; INLINE];
        if d == n {
            for (i, a) in at.iter_mut().enumerate() {
                *a = i;
            }
        } else {
            draw(|bound| fastrand::usize(..bound), n, &mut at[..d]);
        }
        Sample::Inline(at, d)
    }

    /// Calls `f` with a slot per position of `candidates` (windows from
    /// `table`), kept on the stack for up to [`INLINE`] of them.
    fn with_slots<'a, R>(
        table: &'a Table,
        candidates: &'a [Arc<NodeState>],
        positions: &[usize],
        f: impl FnOnce(&mut [Slot<'a>]) -> R,
    ) -> R {
        match positions.len() {
            0..=2 => Self::on_stack::<2, R>(table, candidates, positions, f),
            3..=4 => Self::on_stack::<4, R>(table, candidates, positions, f),
            5..=8 => Self::on_stack::<8, R>(table, candidates, positions, f),
            9..=INLINE => Self::on_stack::<INLINE, R>(table, candidates, positions, f),
            _ => {
                let mut slots: Vec<Slot<'a>> = positions
                    .iter()
                    .map(|&i| Slot::new(table, &candidates[i]))
                    .collect();
                f(&mut slots)
            }
        }
    }

    /// [`LoadAware::with_slots`] in an array of `N >= positions.len()`
    /// (the rest repeat the last slot and are not passed to `f`).
    fn on_stack<'a, const N: usize, R>(
        table: &'a Table,
        candidates: &'a [Arc<NodeState>],
        positions: &[usize],
        f: impl FnOnce(&mut [Slot<'a>]) -> R,
    ) -> R {
        let Some(last) = positions.len().checked_sub(1) else {
            return f(&mut []);
        };
        let mut slots: [Slot<'a>; N] =
            std::array::from_fn(|k| Slot::new(table, &candidates[positions[k.min(last)]]));
        f(&mut slots[..positions.len()])
    }

    /// Chooses among `candidates` (up, not excluded) after reading the loads
    /// of the sampled ones; `None` only when `candidates` is empty.
    pub async fn select_loaded(
        &self,
        site: usize,
        candidates: &[Arc<NodeState>],
    ) -> Option<Arc<NodeState>> {
        if candidates.len() <= 1 {
            return candidates.first().cloned();
        }
        let table = self.windows.table();
        let sample = self.sample(candidates.len());
        let now = SystemTime::now();
        let now_ns = rdmalb_base::time::unix_ns(now);
        // Every read completes here (shm, interval snapshots): the whole
        // decision on the stack, no future polled.
        let inline = Self::with_slots(&table, candidates, sample.positions(), |slots| {
            read_inline(slots, now, now_ns).then(|| self.choose(site, slots, now, now_ns, true))
        });
        if inline.is_some() {
            return inline;
        }
        // A read that may wait (tcp, verbs): all of them under one deadline.
        let mut slots: Vec<Slot<'_>> = sample
            .positions()
            .iter()
            .map(|&i| Slot::new(&table, &candidates[i]))
            .collect();
        read_waiting(&mut slots, now).await;
        Some(self.choose(site, &mut slots, now, now_ns, true))
    }

    /// `s.load` with this proxy's requests dispatched to the node after the
    /// block's `updated_at` added (at most its in-flight count; [`unseen`]);
    /// `None` when there are none (or the load is not fresh).
    fn with_unseen(&self, s: &Slot) -> Option<NodeLoad> {
        let (Unseen::Count, NodeLoad::Fresh(block), Some(w)) = (self.unseen, &s.load, &s.window)
        else {
            return None;
        };
        let n = unseen::unseen(w.dispatches(), block.updated_at_ns, s.inflight);
        (n > 0).then(|| {
            NodeLoad::Fresh(rdmalb_window::LoadBlock {
                sample: unseen::with_unseen(&block.sample, n),
                ..*block
            })
        })
    }

    /// Scores the sampled nodes, records what was seen (and, for `fresh`
    /// loads of this decision, counts them in the metrics and records the
    /// dispatch to the winner) and returns the winner. `now_ns` is `now`
    /// in unix nanoseconds.
    fn choose(
        &self,
        site: usize,
        slots: &mut [Slot<'_>],
        now: SystemTime,
        now_ns: u64,
        count: bool,
    ) -> Arc<NodeState> {
        for s in slots.iter_mut() {
            s.with_unseen = self.with_unseen(s);
        }
        let slots = &*slots;
        let n = slots.len();
        let (mut stack, mut heap) = ([0.0; INLINE], Vec::new());
        let scores: &mut [f64] = if n <= INLINE {
            &mut stack[..n]
        } else {
            heap.resize(n, 0.0);
            &mut heap
        };
        let decision = Decision {
            site,
            slots,
            start: self.cursors.next(site),
            now,
            fresh: count,
            weights: self.weights(site),
            full_queue: self.full_queue,
        };
        let best = self.rule.choose(&decision, scores);
        for (s, &score) in slots.iter().zip(scores.iter()) {
            if let Some(w) = s.window {
                if count {
                    w.count(&s.load);
                }
                w.record_decision(now, now_ns, &s.load, score);
            }
        }
        if count {
            if let Some(w) = slots[best].window {
                w.dispatches().record(now_ns);
            }
        }
        Arc::clone(slots[best].node)
    }
}

/// The positions of one decision's sampled candidates.
enum Sample {
    /// The first `.1` of the array.
    Inline([usize; INLINE], usize),
    /// More than [`INLINE`].
    Heap(Vec<usize>),
}

impl Sample {
    fn positions(&self) -> &[usize] {
        match self {
            Sample::Inline(at, d) => &at[..*d],
            Sample::Heap(v) => v,
        }
    }
}

/// Fills `out` with `out.len()` distinct positions below `n` drawn
/// uniformly, in random order, from `below(b)` (uniform in `0..b`):
/// Floyd's algorithm in its fully shuffled form (what
/// `rand::seq::index::sample` does for a few of many), on the caller's
/// stack. Two, the common case, is two draws. The request path draws from
/// `fastrand`'s thread-local generator: a few nanoseconds a draw, where
/// `rand::thread_rng` (ChaCha12 behind a reference count) was a tenth of
/// a decision.
fn draw(mut below: impl FnMut(usize) -> usize, n: usize, out: &mut [usize]) {
    let d = out.len();
    debug_assert!(d <= n);
    if d == 2 {
        let a = below(n);
        out[0] = a;
        out[1] = (a + 1 + below(n - 1)) % n;
        return;
    }
    for (len, j) in (n - d..n).enumerate() {
        let t = below(j + 1);
        match out[..len].iter().position(|&x| x == t) {
            Some(pos) => {
                // `t` was drawn before: `j` takes its place in the order,
                // `t` moves up one.
                out.copy_within(pos..len, pos + 1);
                out[pos] = j;
            }
            None => out[len] = t,
        }
    }
}

impl<'a> Slot<'a> {
    /// `node`'s slot before its read: its window from `table`, its
    /// in-flight count now.
    fn new(table: &'a Table, node: &'a Arc<NodeState>) -> Slot<'a> {
        Slot {
            // By name too: between a reload's window update and its
            // backends swap, an index may name another node.
            window: table.node(node.index).filter(|w| w.node == node.name),
            node,
            load: NodeLoad::Unknown(Unknown::Disconnected),
            inflight: node.inflight(),
            with_unseen: None,
            reading: false,
        }
    }
}

/// Reads every slot's load without waiting: shm windows straight from the
/// mapping (one seqlock-consistent read each, retried when torn),
/// interval snapshots as they are; `false` as soon as one needs a read
/// that may wait (a connected tcp or verbs window read per request).
fn read_inline(slots: &mut [Slot<'_>], now: SystemTime, now_ns: u64) -> bool {
    for s in slots.iter_mut() {
        let Some(w) = s.window else {
            continue;
        };
        let Some(staleness_ns) = w.per_request_staleness_ns() else {
            s.load = w.snapshot(now);
            continue;
        };
        match w.read_inline() {
            Some(Ok(block)) => s.load = NodeLoad::classify_ns(block, now_ns, staleness_ns),
            Some(Err(u)) => s.load = NodeLoad::Unknown(u),
            None if w.window().is_some() => return false,
            // Not connected: stays `Disconnected`.
            None => {}
        }
    }
    true
}

type Read = Pin<Box<dyn Future<Output = (usize, NodeLoad)> + Send>>;

/// Reads every slot's load, the ones that may wait (tcp, verbs) issued
/// together and awaited under one `routing.read_deadline` (module docs).
async fn read_waiting(slots: &mut [Slot<'_>], now: SystemTime) {
    let mut pending: Vec<Read> = Vec::new();
    let mut deadline = None;
    for (i, s) in slots.iter_mut().enumerate() {
        let Some(w) = s.window else {
            continue;
        };
        let settings = w.settings();
        if let ReadMode::Interval(_) = settings.mode {
            s.load = w.snapshot(now);
            continue;
        }
        if let Some(read) = w.read_inline() {
            s.load = match read {
                Ok(block) => NodeLoad::classify(block, now, settings.staleness),
                Err(u) => NodeLoad::Unknown(u),
            };
            continue;
        }
        let Some(window) = w.window() else {
            continue;
        };
        let w = Arc::clone(w);
        let mut read: Read =
            Box::pin(async move { (i, read_now(&w, window.as_ref(), settings.staleness).await) });
        // A read that completes on its first poll needs no timer.
        match (&mut read).now_or_never() {
            Some((_, load)) => s.load = load,
            None => {
                deadline.get_or_insert(settings.deadline);
                s.reading = true;
                pending.push(read);
            }
        }
    }
    let Some(deadline) = deadline else {
        return;
    };
    // Slots whose read is still out count as timed out unless their read
    // lands before the deadline.
    let mut waiting: FuturesUnordered<Read> = pending.into_iter().collect();
    let sleep = tokio::time::sleep(deadline);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            next = waiting.next() => match next {
                Some((i, load)) => {
                    slots[i].load = load;
                    slots[i].reading = false;
                }
                None => break,
            },
            _ = &mut sleep => break,
        }
    }
    for s in slots.iter_mut().filter(|s| s.reading) {
        s.load = NodeLoad::Unknown(Unknown::Timeout);
    }
}

impl Selector for LoadAware {
    fn name(&self) -> &'static str {
        self.rule.balance().as_str()
    }

    /// Without reading: interval snapshots, else the last read seen.
    fn select(&self, site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        if candidates.len() <= 1 {
            return candidates.first().cloned();
        }
        let now = SystemTime::now();
        let now_ns = rdmalb_base::time::unix_ns(now);
        let table = self.windows.table();
        let sample = self.sample(candidates.len());
        Some(Self::with_slots(
            &table,
            candidates,
            sample.positions(),
            |slots| {
                for s in slots.iter_mut() {
                    if let Some(w) = s.window {
                        s.load = match w.settings().mode {
                            ReadMode::Interval(_) => w.snapshot(now),
                            ReadMode::PerRequest => w
                                .last()
                                .map_or(NodeLoad::Unknown(Unknown::Disconnected), |o| o.load),
                        };
                    }
                }
                self.choose(site, slots, now, now_ns, false)
            },
        ))
    }
}

#[cfg(test)]
mod tests;
