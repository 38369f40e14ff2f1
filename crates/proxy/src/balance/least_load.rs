//! The `weighted-least-load` policy: per decision, take `routing.candidates`
//! of the site's usable nodes ("power of d choices", or all of them), get
//! each one's load — read from its window now (`per-request`) or from the
//! background snapshot (`interval:<d>`) — score them with the site's weights
//! ([`super::load::rank`]) and take the lowest.
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
//! The same reads drive `hot-cold` (Prequal's rule, [`hot_cold`]) and
//! `shortest-wait` (the expected wait, [`drain`]: the node's queue beyond
//! its free workers over its drain rate, measured from these reads).
//!
//! The policy also implements the synchronous [`Selector`] (for callers of
//! `Backends::pick` outside the request path): it then scores from the
//! interval snapshots and from the last per-request reads (for /status and
//! benchmarks; the data path always uses [`WeightedLeastLoad::select_loaded`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use rand::Rng;

use super::drain;
use super::hot_cold::{self, RifHistory};
use super::load::{rank, rank_with, Candidate, NodeLoad, Unknown, WAIT_TIE};
use super::node_windows::{read_now, NodeWindow, NodeWindows, Observation, Table};
use super::selector::Cursors;
use super::unseen;
use super::{NodeState, Selector};
use crate::config::{Balance, Candidates, Config, FullQueue, LoadWeights, ReadMode, Unseen};

/// How a decision ranks the candidates it read.
#[derive(Debug)]
enum Rule {
    /// `weighted-least-load`: the lowest load index ([`rank`]).
    LeastLoad,
    /// `hot-cold`: Prequal's hot-cold lexicographic rule on the fresh reads
    /// ([`hot_cold`]), with each site's recent RIFs for the threshold.
    HotCold(Vec<RifHistory>),
    /// `shortest-wait`: the lowest expected wait ([`drain`]), drain rates
    /// measured with this time constant (`routing.drain_window`).
    ShortestWait(Duration),
}

/// The policy, built per config snapshot.
#[derive(Debug)]
pub struct WeightedLeastLoad {
    rule: Rule,
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
struct Slot<'a> {
    node: &'a Arc<NodeState>,
    window: Option<&'a Arc<NodeWindow>>,
    load: NodeLoad,
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
    fn scored(&self) -> &NodeLoad {
        self.with_unseen.as_ref().unwrap_or(&self.load)
    }
}

impl WeightedLeastLoad {
    /// Builds the policy for `config`, reading through `windows`.
    pub fn new(config: &Config, windows: Arc<NodeWindows>) -> WeightedLeastLoad {
        Self::for_balance(config, windows, config.global.balance)
    }

    /// Builds the policy `balance` names (a site's own `balance`).
    pub fn for_balance(
        config: &Config,
        windows: Arc<NodeWindows>,
        balance: Balance,
    ) -> WeightedLeastLoad {
        let mut weights: Vec<LoadWeights> = config.sites.iter().map(|s| s.weights).collect();
        weights.push(LoadWeights::default());
        let rule = match balance {
            Balance::HotCold => Rule::HotCold(
                (0..=config.sites.len())
                    .map(|_| RifHistory::default())
                    .collect(),
            ),
            Balance::ShortestWait => Rule::ShortestWait(config.routing.drain_window),
            _ => Rule::LeastLoad,
        };
        WeightedLeastLoad {
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
        let start = self.cursors.next(site);
        let mut best = match &self.rule {
            Rule::ShortestWait(window) => {
                let now_ns = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
                // A fresh decision folds its reads into the drain rates; a
                // synchronous one only looks at them. `rank_with` asks for
                // each candidate's part once, so each read is folded once.
                let part = |i: usize| {
                    let s = &slots[i];
                    // The rate from the block as published; the wait from
                    // it with this proxy's unseen requests.
                    let block = s.load.fresh()?;
                    let rate = s.window.as_ref().and_then(|w| {
                        if count {
                            w.drain().observe(block, *window)
                        } else {
                            w.drain().last()
                        }
                    });
                    let scored = &s.scored().fresh()?.sample;
                    let wait = drain::score(scored, rate)?;
                    let age_s = now_ns.saturating_sub(block.updated_at_ns) as f64 / 1e9;
                    let full = self.full_queue == FullQueue::Avoid
                        && drain::nearly_full(
                            scored,
                            rate.or_else(|| drain::nominal_rate(scored)),
                            age_s,
                        );
                    Some(if full { wait + drain::FULL } else { wait })
                };
                rank_with(&view, part, |_| 0.0, WAIT_TIE, start, &mut scores)
            }
            _ => rank(self.weights(site), &view, start, &mut scores),
        }
        .unwrap_or(0);
        if let Rule::HotCold(history) = &self.rule {
            let history = &history[site.min(history.len() - 1)];
            let n = slots.len();
            // From the rotating start, so ties take turns.
            let probes: Vec<hot_cold::Probe> = (0..n)
                .map(|k| {
                    let s = &slots[(start + k) % n];
                    let p = hot_cold::probe_of(s.node, s.scored());
                    history.record(p.rif);
                    p
                })
                .collect();
            if let Some(k) = hot_cold::choose(&probes, history.threshold()) {
                best = (start + k) % n;
            }
        } else if super::control::weights_may_differ()
            && slots
                .iter()
                .any(|s| s.node.weight() != slots[0].node.weight())
        {
            // Weighted nodes: the lowest load per unit of weight (a node of
            // weight 2 at index 0.8 ranks with one of weight 1 at 0.4).
            let per_weight = |i: usize| scores[i] / f64::from(slots[i].node.weight().max(1));
            let n = slots.len();
            best = start % n;
            for k in 1..n {
                let i = (start + k) % n;
                if per_weight(i) < per_weight(best) {
                    best = i;
                }
            }
        }
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
                w.dispatches().record(unseen::unix_ns(now));
            }
        }
        Arc::clone(slots[best].node)
    }
}

impl Selector for WeightedLeastLoad {
    fn name(&self) -> &'static str {
        match self.rule {
            Rule::LeastLoad => "weighted-least-load",
            Rule::HotCold(_) => "hot-cold",
            Rule::ShortestWait(_) => "shortest-wait",
        }
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
