//! The load index of the `weighted-least-load` policy: what a node's load
//! read means ([`NodeLoad`]), how each published field is normalised
//! ([`Normalised`]), and how one decision scores and ranks its candidates
//! ([`rank`]).
//!
//! `L = Σ w_k · x_k` over normalised indices plus this proxy's own in-flight
//! requests to the node (docs/routing.md, "The load index"). It is the IBM WebSphere scheme
//! seed 002 uses in section 5.2.1 (weighted CPU, memory, network and
//! connection load; the lowest wins), with the run queue, pending interrupts
//! (seed 002's e-RDMA-Sync, section 5.1.4) and the application's own
//! busy/capacity added. Weights come per site from the config, so a dynamic
//! site can weigh CPU and a static one network and connections: the seeds'
//! CPU/I-O load equivalence.
//!
//! Normalisations (each `x_k` is 0 for an idle node and grows with load):
//!
//! | index | published as | `x` |
//! |---|---|---|
//! | cpu | utilisation ppm | `ppm / 1e6` (0..1) |
//! | memory | used ppm | `ppm / 1e6` (0..1) |
//! | run queue | runnable tasks × 1000 | `r / (r + 4)`: 0.5 at 4 runnable tasks |
//! | network | rx + tx bytes/s | `b / (b + 125e6)`: 0.5 at 1 Gbit/s |
//! | connections | established to the app | `c / (c + 64)` |
//! | irq | interrupts/s | `i / (i + 50000)` |
//! | app | busy, queue, capacity | `(busy + queue) / capacity`, at most 4; without a capacity `n / (n + 8)` with `n = busy + queue` |
//! | in-flight | this proxy's requests to the node | `f / (f + 8)` |
//!
//! Quantities with a natural maximum are fractions of it; unbounded counts
//! use a saturating `v / (v + h)` whose half point `h` is a typical busy
//! value: still strictly increasing (the ranking of two nodes never
//! inverts), but bounded, so no single index can drown the weighted others
//! however large its raw unit.
//!
//! A node whose load is not [`NodeLoad::Fresh`] is scored from local
//! information only: its window part is taken as the mean window part of
//! the fresh candidates of the same decision (0 when none is fresh) and it
//! is told apart by its in-flight count. Assuming "average" rather than
//! "idle" keeps a node whose sidecar died from attracting all the traffic.

use std::time::{Duration, SystemTime};

use crate::config::{LoadIndices, LoadWeights};
use rdmalb_window::{LoadBlock, LoadSample};

/// Half point of the run-queue index, runnable tasks.
pub const RUN_QUEUE_HALF: f64 = 4.0;
/// Half point of the network index, bytes/s (1 Gbit/s).
pub const NETWORK_HALF: f64 = 125e6;
/// Half point of the connections index.
pub const CONNECTIONS_HALF: f64 = 64.0;
/// Half point of the irq index, interrupts/s.
pub const IRQ_HALF: f64 = 50_000.0;
/// Cap of the app index with a capacity (a queue three times the workers).
pub const APP_MAX: f64 = 4.0;
/// Half point of the app index when the app publishes no capacity.
pub const APP_HALF: f64 = 8.0;
/// Half point of the in-flight index.
pub const INFLIGHT_HALF: f64 = 8.0;
/// Load indexes closer than this are a tie: 1 % of the index's full
/// scale, below what sampling noise moves an idle node's index by (the
/// run queue alone is an instantaneous count) and below one busy worker
/// of an app with 20 or fewer (`0.2 / 20` with the default app weight).
pub const LOAD_TIE: f64 = 0.01;
/// Expected waits (milliseconds) closer than this are a tie: 1 µs.
pub const WAIT_TIE: f64 = 1e-3;

/// Why a node's load could not be used for a decision; the `reason` label
/// of `rdmalb_load_unknown_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unknown {
    /// The block was consistent but older than `routing.staleness`.
    Stale,
    /// Every read (retries included) overlapped the owner's write.
    Torn,
    /// The read did not finish within `routing.read_deadline`.
    Timeout,
    /// The transport failed or the header was wrong.
    Unreadable,
    /// No connection to the node's window (yet, or any more).
    Disconnected,
    /// The sidecar has not published a block yet.
    Unpublished,
}

impl Unknown {
    /// Every reason, in the order of [`Unknown::slot`].
    pub const ALL: [Unknown; 6] = [
        Unknown::Stale,
        Unknown::Torn,
        Unknown::Timeout,
        Unknown::Unreadable,
        Unknown::Disconnected,
        Unknown::Unpublished,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Unknown::Stale => "stale",
            Unknown::Torn => "torn",
            Unknown::Timeout => "timeout",
            Unknown::Unreadable => "unreadable",
            Unknown::Disconnected => "disconnected",
            Unknown::Unpublished => "unpublished",
        }
    }

    /// Position in [`Unknown::ALL`] (for per-reason counter arrays).
    pub fn slot(self) -> usize {
        self as usize
    }
}

/// The outcome of reading one node's load block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NodeLoad {
    /// Consistent and within the staleness bound: the window part counts.
    Fresh(LoadBlock),
    /// Consistent but too old: shown in /status, scored locally.
    Stale(LoadBlock),
    /// Nothing usable.
    Unknown(Unknown),
}

impl NodeLoad {
    /// Classifies a consistent block read at `read_at` against `staleness`.
    pub fn classify(block: LoadBlock, read_at: SystemTime, staleness: Duration) -> NodeLoad {
        let staleness_ns = u64::try_from(staleness.as_nanos()).unwrap_or(u64::MAX);
        Self::classify_ns(block, rdmalb_base::time::unix_ns(read_at), staleness_ns)
    }

    /// [`NodeLoad::classify`] in unix nanoseconds (the request path computes
    /// the time of a decision once).
    pub fn classify_ns(block: LoadBlock, read_at_ns: u64, staleness_ns: u64) -> NodeLoad {
        // The age is zero if the owner's clock is ahead (`LoadBlock::age`).
        if read_at_ns.saturating_sub(block.updated_at_ns) > staleness_ns {
            NodeLoad::Stale(block)
        } else {
            NodeLoad::Fresh(block)
        }
    }

    /// The block if it may be used for scoring.
    pub fn fresh(&self) -> Option<&LoadBlock> {
        match self {
            NodeLoad::Fresh(b) => Some(b),
            _ => None,
        }
    }

    /// The block, fresh or stale.
    pub fn block(&self) -> Option<&LoadBlock> {
        match self {
            NodeLoad::Fresh(b) | NodeLoad::Stale(b) => Some(b),
            NodeLoad::Unknown(_) => None,
        }
    }

    /// Why the node is scored locally, `None` when it is fresh.
    pub fn unknown(&self) -> Option<Unknown> {
        match self {
            NodeLoad::Fresh(_) => None,
            NodeLoad::Stale(_) => Some(Unknown::Stale),
            NodeLoad::Unknown(u) => Some(*u),
        }
    }
}

fn saturating(v: f64, half: f64) -> f64 {
    if v <= 0.0 {
        0.0
    } else {
        v / (v + half)
    }
}

/// The published fields mapped onto comparable indices (module docs):
/// the indices [`LoadWeights::window`] weighs, one type with them.
pub type Normalised = LoadIndices;

impl Normalised {
    /// Normalises one load sample.
    pub fn of(s: &LoadSample) -> Normalised {
        let work = s.app_busy.saturating_add(s.app_queue_len) as f64;
        let app = if s.app_capacity > 0 {
            (work / s.app_capacity as f64).min(APP_MAX)
        } else {
            saturating(work, APP_HALF)
        };
        Normalised {
            cpu: (s.cpu_util_ppm as f64 / 1e6).min(1.0),
            run_queue: saturating(s.run_queue_milli as f64 / 1000.0, RUN_QUEUE_HALF),
            memory: (s.mem_used_ppm as f64 / 1e6).min(1.0),
            network: saturating(
                s.net_rx_bps.saturating_add(s.net_tx_bps) as f64,
                NETWORK_HALF,
            ),
            connections: saturating(s.active_connections as f64, CONNECTIONS_HALF),
            irq: saturating(s.irq_rate as f64, IRQ_HALF),
            app,
        }
    }

    /// `Σ w_k · x_k` over the window's indices (in-flight excluded).
    pub fn weighted(&self, w: &LoadWeights) -> f64 {
        w.window.dot(self)
    }
}

/// The window part `Σ w_k · x_k` of a load, `None` unless it is fresh.
pub fn window_part(w: &LoadWeights, load: &NodeLoad) -> Option<f64> {
    load.fresh().map(|b| Normalised::of(&b.sample).weighted(w))
}

/// The in-flight term `w_inflight · f / (f + 8)`.
pub fn inflight_part(w: &LoadWeights, inflight: usize) -> f64 {
    w.inflight * saturating(inflight as f64, INFLIGHT_HALF)
}

/// One candidate of a decision as [`rank`] sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate<'a> {
    /// The read, or the interval snapshot.
    pub load: &'a NodeLoad,
    /// This proxy's requests in flight to the node.
    pub inflight: usize,
}

/// Scores every candidate (into `scores`, resized to one per candidate,
/// same order) and returns the position of the lowest score. Ties (within [`LOAD_TIE`]) go to fewer
/// requests in flight, then to the first one found scanning from `start`
/// (callers rotate it, so equal nodes share the traffic instead of the
/// first in config order taking it all). `None` only for no candidates.
pub fn rank(
    w: &LoadWeights,
    candidates: &[Candidate<'_>],
    start: usize,
    scores: &mut Vec<f64>,
) -> Option<usize> {
    scores.clear();
    scores.resize(candidates.len(), 0.0);
    rank_with(
        |i| window_part(w, candidates[i].load),
        |i| inflight_part(w, candidates[i].inflight),
        |i| candidates[i].inflight,
        LOAD_TIE,
        start,
        scores,
    )
}

/// [`rank`] over `scores.len()` candidates (the caller's storage, one per
/// candidate: a decision keeps it on the stack), with the window part of
/// candidate `i` given by `window(i)` (`None`: not known, scored as the
/// mean of the known ones), the local part by `local(i)` and its requests
/// in flight (the tie-break) by `inflight(i)`. `window` and `local` are
/// each called exactly once per candidate, in order, so `window` may fold
/// what it reads into state.
pub fn rank_with(
    window: impl Fn(usize) -> Option<f64>,
    local: impl Fn(usize) -> f64,
    inflight: impl Fn(usize) -> usize,
    tie: f64,
    start: usize,
    scores: &mut [f64],
) -> Option<usize> {
    let n = scores.len();
    if n == 0 {
        return None;
    }
    let mut sum = 0.0;
    let mut known = 0usize;
    for (i, s) in scores.iter_mut().enumerate() {
        let part = window(i).filter(|p| p.is_finite());
        if let Some(p) = part {
            sum += p;
            known += 1;
        }
        // Placeholder for unknown ones, filled in below with the mean.
        *s = part.unwrap_or(f64::NAN);
    }
    let mean = if known == 0 { 0.0 } else { sum / known as f64 };
    for (i, s) in scores.iter_mut().enumerate() {
        if s.is_nan() {
            *s = mean;
        }
        *s += local(i);
    }
    // Every score within `tie` of the lowest is a tie: of those, the one
    // with the fewest requests in flight, the first from `start`.
    let lowest = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let mut best = None::<usize>;
    for i in (start % n..n).chain(0..start % n) {
        if scores[i] <= lowest + tie && best.is_none_or(|b| inflight(i) < inflight(b)) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests;
