//! The `prequal` policy: Prequal as published (Wydrowski, Kleinberg,
//! Rumble, NSDI 2024): asynchronous, reusable probes in a small pool per
//! site, and the hot-cold lexicographic rule ([`super::hot_cold`]) over the
//! pool.
//!
//! - Each request sends [`PROBES_PER_REQUEST`] probes to candidates drawn
//!   at random, off the request's path: a probe reads the node's window
//!   (RIF = the app's busy workers plus its queue); shm reads land at once,
//!   tcp and verbs reads in a spawned task bounded by
//!   `routing.read_deadline`. Probes land in the pool for later requests.
//! - The pool keeps at most [`POOL`] probes; a new probe replaces the oldest
//!   one. A probe older than [`MAX_AGE`], or used [`MAX_REUSE`] times, is
//!   dropped.
//! - A request takes the pool's probes of nodes it may use and applies
//!   HCL; the chosen probe's RIF goes up by one (the request it just
//!   placed), so the next requests see it. With no usable probe (a cold
//!   start, all probes of nodes already tried) it falls back to a random
//!   candidate.
//!
//! Latency in a probe is this proxy's latency estimate of the node when
//! the probe lands (the paper's servers estimate latency themselves; our
//! windows publish no latency).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rand::Rng;

use super::hot_cold::{self, Probe, RifHistory};
use super::load::NodeLoad;
use super::node_windows::{read_now, NodeWindows};
use super::{NodeState, Selector};
use crate::config::Balance;

/// Probes sent per request (the paper's r_probe is a small constant).
pub const PROBES_PER_REQUEST: usize = 2;
/// Probes kept per site (the paper's pool size).
pub const POOL: usize = 16;
/// A probe older than this is not used.
pub const MAX_AGE: Duration = Duration::from_millis(500);
/// A probe is used at most this many times.
pub const MAX_REUSE: u32 = 3;

/// One probe in the pool.
#[derive(Debug, Clone)]
struct Pooled {
    /// The node, by index in the snapshot and name (a reload may reuse an
    /// index for another node).
    index: usize,
    name: String,
    probe: Probe,
    at: Instant,
    uses: u32,
}

/// One site's pool and RIF history.
#[derive(Debug, Default)]
struct SitePool {
    probes: Mutex<Vec<Pooled>>,
    history: RifHistory,
}

impl SitePool {
    fn add(&self, node: &NodeState, probe: Probe) {
        self.history.record(probe.rif);
        let mut pool = self.probes.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() >= POOL {
            if let Some(oldest) = pool
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| p.at)
                .map(|(i, _)| i)
            {
                pool.swap_remove(oldest);
            }
        }
        pool.push(Pooled {
            index: node.index,
            name: node.name.clone(),
            probe,
            at: Instant::now(),
            uses: 0,
        });
    }

    /// HCL over the pool's probes of `candidates`; updates the chosen probe.
    fn take(&self, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        let threshold = self.history.threshold();
        let mut pool = self.probes.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        pool.retain(|p| now.duration_since(p.at) <= MAX_AGE && p.uses < MAX_REUSE);
        let usable: Vec<(usize, &Arc<NodeState>)> = pool
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                candidates
                    .iter()
                    .find(|n| n.index == p.index && n.name == p.name)
                    .map(|n| (i, n))
            })
            .collect();
        let probes: Vec<Probe> = usable.iter().map(|(i, _)| pool[*i].probe).collect();
        let k = hot_cold::choose(&probes, threshold)?;
        let (i, node) = usable[k];
        let node = Arc::clone(node);
        let chosen = &mut pool[i];
        chosen.probe.rif += 1.0;
        chosen.uses += 1;
        Some(node)
    }
}

/// The policy, built per config snapshot.
#[derive(Debug)]
pub struct Prequal {
    windows: Arc<NodeWindows>,
    /// Per site, plus a spare at the end for unknown indices.
    sites: Vec<Arc<SitePool>>,
}

impl Prequal {
    pub fn new(sites: usize, windows: Arc<NodeWindows>) -> Prequal {
        Prequal {
            windows,
            sites: (0..=sites).map(|_| Arc::default()).collect(),
        }
    }

    fn site(&self, site: usize) -> &Arc<SitePool> {
        &self.sites[site.min(self.sites.len() - 1)]
    }

    /// Sends probes to `PROBES_PER_REQUEST` random candidates.
    fn probe(&self, site: usize, candidates: &[Arc<NodeState>]) {
        let n = candidates.len();
        let mut rng = rand::thread_rng();
        let picks = rand::seq::index::sample(&mut rng, n, PROBES_PER_REQUEST.min(n));
        for i in picks {
            let node = &candidates[i];
            let pool = self.site(site);
            let Some(w) = self
                .windows
                .node(node.index)
                .filter(|w| w.node == node.name)
            else {
                // No window: the probe can only say what this proxy knows.
                pool.add(
                    node,
                    hot_cold::probe_of(
                        node,
                        &NodeLoad::Unknown(super::load::Unknown::Disconnected),
                    ),
                );
                continue;
            };
            let settings = w.settings();
            if let Some(read) = w.read_inline() {
                let load = match read {
                    Ok(block) => NodeLoad::classify(block, SystemTime::now(), settings.staleness),
                    Err(u) => NodeLoad::Unknown(u),
                };
                pool.add(node, hot_cold::probe_of(node, &load));
                continue;
            }
            let (Some(window), Ok(runtime)) = (w.window(), tokio::runtime::Handle::try_current())
            else {
                continue;
            };
            let (node, pool) = (Arc::clone(node), Arc::clone(pool));
            runtime.spawn(async move {
                let read = read_now(&w, window.as_ref(), settings.staleness);
                if let Ok(load) = tokio::time::timeout(settings.deadline, read).await {
                    pool.add(&node, hot_cold::probe_of(&node, &load));
                }
            });
        }
    }
}

impl Selector for Prequal {
    fn name(&self) -> &'static str {
        Balance::Prequal.as_str()
    }

    fn select(&self, site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        if candidates.len() <= 1 {
            return candidates.first().cloned();
        }
        let chosen = self.site(site).take(candidates).unwrap_or_else(|| {
            let i = rand::thread_rng().gen_range(0..candidates.len());
            Arc::clone(&candidates[i])
        });
        self.probe(site, candidates);
        Some(chosen)
    }
}

#[cfg(test)]
mod tests;
