//! Sticky sessions on the balancer's side: whether the node a request's
//! persistence cookie names may still take it, and where a session goes
//! when it may not.
//!
//! As HAProxy: a cookie naming a node that is up and still serves the site
//! sends the request there, even a draining node or one with weight 0
//! (HAProxy's `drain` keeps persistent sessions); a node down or in
//! maintenance sends it to balancing (HAProxy's redispatch).
//!
//! Beyond HAProxy, with `[site.sticky] max_load`, a session also leaves
//! its node when the node drains, or when its load index (the weighted mean
//! of its window's normalised indices under the site's `[site.weights]`,
//! 0 idle … 1 saturated) has stayed above `max_load` for `max_load_for`;
//! it is re-pinned to the least-loaded usable node (the response carries
//! the new cookie). A node the reconfiguration agent moved to another site
//! always releases its sessions. Each move is counted in
//! `rdmalb_sticky_moves_total{site,reason}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::Normalised;
use super::{AdminState, NodeState, NodeWindows};
use crate::config::{LoadWeights, Sticky};

/// Why a session left the node its cookie named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// The node is down or in maintenance (HAProxy redispatches too).
    Down,
    /// The node drains (load bound only).
    Drain,
    /// The node's load index stayed above `max_load` (load bound only).
    Load,
    /// The node now serves another site (or none).
    Moved,
}

impl Move {
    /// `reason` label values of `rdmalb_sticky_moves_total`, by [`index`](Self::index).
    pub const LABELS: [&'static str; 4] = ["down", "drain", "load", "moved"];

    /// Its `reason` label.
    pub fn label(self) -> &'static str {
        Self::LABELS[self.index()]
    }

    pub fn index(self) -> usize {
        match self {
            Move::Down => 0,
            Move::Drain => 1,
            Move::Load => 2,
            Move::Moved => 3,
        }
    }
}

/// How a pick went for a request that named a node in its cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned {
    /// The named node took it.
    Kept,
    /// The session left the named node.
    Left(Move),
}

/// Per-snapshot state of the load bound: since when each node's load index
/// has been above the bound (unix-less monotonic nanoseconds, 0 = not
/// above).
#[derive(Debug)]
pub struct LoadBound {
    over_since: Box<[AtomicU64]>,
    epoch: Instant,
}

impl LoadBound {
    pub fn new(nodes: usize) -> LoadBound {
        LoadBound {
            over_since: (0..nodes).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
        }
    }

    /// Whether `node`'s load index has been above `max` for `hold`;
    /// a node without a fresh window read is never over.
    fn held_over(&self, node: usize, index: Option<f64>, max: f64, hold: Duration) -> bool {
        let Some(slot) = self.over_since.get(node) else {
            return false;
        };
        if !index.is_some_and(|i| i > max) {
            slot.store(0, Ordering::Relaxed);
            return false;
        }
        // +1: 0 means "not above".
        let now = self.epoch.elapsed().as_nanos() as u64 + 1;
        let since = match slot.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => now,
            Err(s) => s,
        };
        Duration::from_nanos(now - since) >= hold
    }
}

/// Whether `node`, named by a request's cookie, takes the request for
/// `site`, or why the session leaves it.
pub(crate) fn keep(
    node: &NodeState,
    site: usize,
    sticky: &Sticky,
    bound: &LoadBound,
    windows: &NodeWindows,
    weights: &LoadWeights,
) -> Pinned {
    if !node.serves(site) {
        return Pinned::Left(Move::Moved);
    }
    if !node.is_up() || node.admin_state() == AdminState::Maint {
        return Pinned::Left(Move::Down);
    }
    let Some(max) = sticky.max_load else {
        return Pinned::Kept;
    };
    if node.admin_state() == AdminState::Drain {
        return Pinned::Left(Move::Drain);
    }
    let index = load_index(windows, node.index, weights);
    if bound.held_over(node.index, index, max, sticky.max_load_for) {
        return Pinned::Left(Move::Load);
    }
    Pinned::Kept
}

/// A node's load index from its window: the weighted mean of its
/// normalised indices (`None` without a fresh block).
pub(crate) fn load_index(windows: &NodeWindows, node: usize, w: &LoadWeights) -> Option<f64> {
    let sum: f64 = w.window.named().iter().map(|(_, x)| x).sum();
    if sum <= 0.0 {
        return None;
    }
    let block = super::hash::fresh_block(windows, node)?;
    Some(Normalised::of(&block.sample).weighted(w) / sum)
}

/// The least-loaded of `candidates` other than `left` (load index from the
/// windows; without one, fewer requests in flight from this proxy per unit
/// of weight): where a session that left its node goes.
pub(crate) fn least_loaded(
    candidates: &[Arc<NodeState>],
    left: usize,
    windows: &NodeWindows,
    w: &LoadWeights,
) -> Option<Arc<NodeState>> {
    let score = |n: &NodeState| {
        let local = (n.inflight() as f64 + 1.0) / f64::from(n.weight().max(1));
        (load_index(windows, n.index, w).unwrap_or(0.0), local)
    };
    candidates
        .iter()
        .filter(|n| n.index != left)
        .map(|n| (score(n), n))
        .min_by(|(a, _), (b, _)| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
        .map(|(_, n)| Arc::clone(n))
}

#[cfg(test)]
mod tests;
