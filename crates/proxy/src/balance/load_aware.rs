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
use rand::Rng;

use super::load::{Candidate, NodeLoad, Unknown};
use super::node_windows::{read_now, NodeWindow, NodeWindows, Observation, Table};
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

    /// Fills `scores` with each candidate's score (shown in /status as
    /// its last index) and returns the winner's position in
    /// `decision.slots`.
    fn choose(&self, decision: &Decision<'_, '_>, scores: &mut Vec<f64>) -> usize;
}

/// What a [`LoadRule`] decides from.
pub struct Decision<'d, 'a> {
    pub site: usize,
    /// The sampled candidates with their loads.
    pub slots: &'d [Slot<'a>],
    /// Each slot's scored load and in-flight count, in the same order.
    pub view: &'d [Candidate<'d>],
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
        let mut best = self.start % n;
        for k in 1..n {
            let i = (self.start + k) % n;
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

type Read = Pin<Box<dyn Future<Output = (usize, NodeLoad)> + Send>>;

/// One sampled candidate during a decision, borrowing the candidate list
/// and the decision's [`Table`] of windows (no reference count touched).
pub struct Slot<'a> {
    pub node: &'a Arc<NodeState>,
    pub window: Option<&'a Arc<NodeWindow>>,
    /// The load read (or why none is known).
    pub load: NodeLoad,
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

    /// The nodes compared in this decision: all of them when `d` covers
    /// the site, else `d` distinct ones drawn uniformly; their windows from
    /// `table`.
    fn sample<'a>(&self, table: &'a Table, candidates: &'a [Arc<NodeState>]) -> Vec<Slot<'a>> {
        let n = candidates.len();
        let d = match self.candidates {
            Candidates::All => n,
            Candidates::Count(d) => d.min(n),
        };
        let slot = |node: &'a Arc<NodeState>| Slot {
            // By name too: between a reload's window update and its
            // backends swap, an index may name another node.
            window: table.node(node.index).filter(|w| w.node == node.name),
            node,
            load: NodeLoad::Unknown(Unknown::Disconnected),
            with_unseen: None,
            reading: false,
        };
        if d == n {
            return candidates.iter().map(slot).collect();
        }
        let mut rng = rand::thread_rng();
        if d == 2 {
            let a = rng.gen_range(0..n);
            let b = (a + 1 + rng.gen_range(0..n - 1)) % n;
            return vec![slot(&candidates[a]), slot(&candidates[b])];
        }
        rand::seq::index::sample(&mut rng, n, d)
            .into_iter()
            .map(|i| slot(&candidates[i]))
            .collect()
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
        let mut slots = self.sample(&table, candidates);
        let now = SystemTime::now();
        let mut pending: Vec<Read> = Vec::new();
        let mut deadline = None;
        for (i, s) in slots.iter_mut().enumerate() {
            let Some(w) = &s.window else {
                continue;
            };
            let settings = w.settings();
            match settings.mode {
                ReadMode::Interval(_) => s.load = w.snapshot(now),
                ReadMode::PerRequest => {
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
                    let w = Arc::clone(*w);
                    let mut read: Read = Box::pin(async move {
                        (i, read_now(&w, window.as_ref(), settings.staleness).await)
                    });
                    // shm completes on the first poll: no timer needed.
                    match (&mut read).now_or_never() {
                        Some((_, load)) => s.load = load,
                        None => {
                            deadline.get_or_insert(settings.deadline);
                            s.reading = true;
                            pending.push(read);
                        }
                    }
                }
            }
        }
        if let Some(deadline) = deadline {
            // Slots whose read is still out count as timed out unless their
            // read lands before the deadline.
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
        Some(self.choose(site, &mut slots, now, true))
    }

    /// `s.load` with this proxy's requests dispatched to the node after the
    /// block's `updated_at` added (at most its in-flight count; [`unseen`]);
    /// `None` when there are none (or the load is not fresh).
    fn with_unseen(&self, s: &Slot) -> Option<NodeLoad> {
        let (Unseen::Count, NodeLoad::Fresh(block), Some(w)) = (self.unseen, &s.load, &s.window)
        else {
            return None;
        };
        let n = unseen::unseen(w.dispatches(), block.updated_at_ns, s.node.inflight());
        (n > 0).then(|| {
            NodeLoad::Fresh(rdmalb_window::LoadBlock {
                sample: unseen::with_unseen(&block.sample, n),
                ..*block
            })
        })
    }

    /// Scores the sampled nodes, records what was seen (and, for `fresh`
    /// loads of this decision, counts them in the metrics and records the
    /// dispatch to the winner) and returns the winner.
    fn choose(
        &self,
        site: usize,
        slots: &mut [Slot<'_>],
        now: SystemTime,
        count: bool,
    ) -> Arc<NodeState> {
        for s in slots.iter_mut() {
            s.with_unseen = self.with_unseen(s);
        }
        let slots = &*slots;
        let view: Vec<Candidate<'_>> = slots
            .iter()
            .map(|s| Candidate {
                load: s.scored(),
                inflight: s.node.inflight(),
            })
            .collect();
        let mut scores = Vec::with_capacity(slots.len());
        let decision = Decision {
            site,
            slots,
            view: &view,
            start: self.cursors.next(site),
            now,
            fresh: count,
            weights: self.weights(site),
            full_queue: self.full_queue,
        };
        let best = self.rule.choose(&decision, &mut scores);
        for (s, score) in slots.iter().zip(&scores) {
            if let Some(w) = &s.window {
                if count {
                    w.count(&s.load);
                }
                w.record(Observation {
                    at: now,
                    load: s.load,
                    index: Some(*score),
                });
            }
        }
        if count {
            if let Some(w) = &slots[best].window {
                w.dispatches().record(rdmalb_base::time::unix_ns(now));
            }
        }
        Arc::clone(slots[best].node)
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
        let table = self.windows.table();
        let mut slots = self.sample(&table, candidates);
        for s in &mut slots {
            if let Some(w) = &s.window {
                s.load = match w.settings().mode {
                    ReadMode::Interval(_) => w.snapshot(now),
                    ReadMode::PerRequest => w
                        .last()
                        .map_or(NodeLoad::Unknown(Unknown::Disconnected), |o| o.load),
                };
            }
        }
        Some(self.choose(site, &mut slots, now, false))
    }
}

#[cfg(test)]
mod tests;
