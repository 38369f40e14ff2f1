//! Prequal's hot-cold lexicographic rule (HCL; Wydrowski, Kleinberg,
//! Rumble, NSDI 2024), shared by the `prequal` policy (asynchronous,
//! reusable probes, as published) and the `hot-cold` policy ([`HotCold`]:
//! the same rule on every request, fed by fresh window reads).
//!
//! Each candidate carries its requests in flight (RIF) and a latency
//! estimate. A candidate is *hot* when its RIF is above the [`Q_RIF`]
//! quantile of the RIFs seen recently for the site; the rule takes the cold
//! candidate with the lowest latency, or, when every candidate is hot, the
//! one with the lowest RIF.
//!
//! RIF here is the node's own count when its window tells it (the app's
//! busy workers plus its queue, across every proxy: what Prequal's probe
//! reply carries), else this proxy's in-flight count. Latency is the app's
//! own recent response time when its window has one (`latency_us`, pushed
//! by the app: Prequal's server-side estimate), else this proxy's
//! peak-EWMA of the node's response time (`balance::latency`).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::load::NodeLoad;
use super::load_aware::{Decision, LoadRule, INLINE};
use super::NodeState;
use crate::config::Balance;

/// The hot threshold's quantile (the paper's default).
pub const Q_RIF: f64 = 0.84;
/// RIF observations kept per site for the quantile.
const HISTORY: usize = 64;
/// The threshold is recomputed every this many observations.
const RECOMPUTE: usize = 8;

/// Recent RIF observations of one site (a lock-free ring) and the hot
/// threshold computed from them.
#[derive(Debug)]
pub(crate) struct RifHistory {
    ring: [AtomicU32; HISTORY],
    next: AtomicUsize,
    /// The threshold as `f64` bits (infinity until the ring has data).
    threshold: AtomicU64,
}

impl Default for RifHistory {
    fn default() -> Self {
        RifHistory {
            ring: std::array::from_fn(|_| AtomicU32::new(0)),
            next: AtomicUsize::new(0),
            threshold: AtomicU64::new(f64::INFINITY.to_bits()),
        }
    }
}

impl RifHistory {
    /// Records one observed RIF.
    pub(crate) fn record(&self, rif: f64) {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let v = rif.clamp(0.0, f64::from(u32::MAX)) as u32;
        self.ring[i % HISTORY].store(v, Ordering::Relaxed);
        if (i + 1) % RECOMPUTE == 0 {
            let filled = (i + 1).min(HISTORY);
            // On the stack: this runs on the request path.
            let mut values = [0u32; HISTORY];
            for (v, a) in values.iter_mut().zip(&self.ring[..filled]) {
                *v = a.load(Ordering::Relaxed);
            }
            let k = ((filled as f64 * Q_RIF).ceil() as usize).clamp(1, filled) - 1;
            let (_, q, _) = values[..filled].select_nth_unstable(k);
            self.threshold
                .store(f64::from(*q).to_bits(), Ordering::Relaxed);
        }
    }

    /// RIF above this is hot.
    pub(crate) fn threshold(&self) -> f64 {
        f64::from_bits(self.threshold.load(Ordering::Relaxed))
    }
}

/// One candidate as the rule sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Probe {
    pub rif: f64,
    pub latency_ns: f64,
}

/// The position of the chosen candidate (`None` for none). Ties go to
/// the earlier one: callers start the list at a rotating offset.
pub(crate) fn choose(probes: &[Probe], threshold: f64) -> Option<usize> {
    let by = |key: fn(&Probe) -> f64, hot: bool| {
        probes
            .iter()
            .enumerate()
            .filter(|(_, p)| (p.rif > threshold) == hot)
            .min_by(|(_, a), (_, b)| key(a).total_cmp(&key(b)))
            .map(|(i, _)| i)
    };
    by(|p| p.latency_ns, false).or_else(|| by(|p| p.rif, true))
}

/// The node's RIF from a load read: the app's busy workers plus its queue
/// when the app reports them, else the app's connections; `None` without a
/// fresh read.
pub(crate) fn rif_of(load: &NodeLoad) -> Option<f64> {
    let s = &load.fresh()?.sample;
    Some(
        if s.app_capacity > 0 || s.app_busy > 0 || s.app_queue_len > 0 {
            (s.app_busy + s.app_queue_len) as f64
        } else {
            s.active_connections as f64
        },
    )
}

/// A probe of `node` from its load read, or from what this proxy knows
/// (its in-flight count, its latency estimate) where the read gave
/// nothing usable.
pub(crate) fn probe_of(node: &NodeState, load: &NodeLoad) -> Probe {
    let app_latency = load
        .fresh()
        .map(|b| b.sample.app_latency_us)
        .filter(|&us| us > 0);
    Probe {
        rif: rif_of(load).unwrap_or(node.inflight() as f64),
        latency_ns: app_latency.map_or_else(|| node.latency_ns(), |us| us as f64 * 1000.0),
    }
}

/// The `hot-cold` policy's rule: HCL on the candidates' fresh reads, with
/// each site's recent RIFs for the threshold.
#[derive(Debug)]
pub struct HotCold {
    /// Per site, plus one for unknown indices.
    history: Vec<RifHistory>,
}

impl HotCold {
    pub fn new(sites: usize) -> HotCold {
        HotCold {
            history: (0..=sites).map(|_| RifHistory::default()).collect(),
        }
    }
}

impl LoadRule for HotCold {
    fn balance(&self) -> Balance {
        Balance::HotCold
    }

    fn choose(&self, d: &Decision<'_, '_>, scores: &mut [f64]) -> usize {
        // The load index is still scored: /status shows it.
        let best = d.rank_by_load(scores).unwrap_or(0);
        let history = &self.history[d.site.min(self.history.len() - 1)];
        let n = d.slots.len();
        // On the stack for up to INLINE candidates (the request path).
        let (mut stack, mut heap) = ([Probe::default(); INLINE], Vec::new());
        let probes: &mut [Probe] = if n <= INLINE {
            &mut stack[..n]
        } else {
            heap.resize(n, Probe::default());
            &mut heap
        };
        // From the rotating start, so ties take turns.
        for (k, p) in probes.iter_mut().enumerate() {
            let s = &d.slots[(d.start + k) % n];
            *p = probe_of(s.node, s.scored());
            history.record(p.rif);
        }
        match choose(probes, history.threshold()) {
            Some(k) => (d.start + k) % n,
            None => best,
        }
    }
}

#[cfg(test)]
mod tests;
