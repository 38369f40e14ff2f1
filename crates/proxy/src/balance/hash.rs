//! Hash balancing as HAProxy does it, so that the same key reaches the same
//! node through rdmalb as through HAProxy (`balance source|uri|hdr|
//! url_param`, `hash req.cook(...)`; `hash-type map-based|consistent`,
//! `hash-balance-factor`):
//!
//! - [`key_hash`]: the request's key hashed with the configured function
//!   ([`functions`]), then the `avalanche` mix; `None` when the request has
//!   no key (HAProxy then falls back to round robin over the same table);
//! - [`HashTable`]: the site's up nodes as HAProxy lays them out: the
//!   consistent-hash ring (each node at `weight × 16` points, point `j` of
//!   the node with id `p` at `full_hash(p × 4096 + j)`, a key going to the
//!   nearer of the points around it) or the map (each node `weight / gcd`
//!   slots, interleaved as HAProxy's `recalc_server_map`, a key going to
//!   slot `hash % slots`). Node ids are HAProxy's server ids: 1, 2, … in
//!   the site's config order;
//! - bounded loads (`hash-balance-factor`, Mirrokni, Thorup and
//!   Zadimoghaddam, arXiv:1608.01350): walking the ring from the key's
//!   point, a node whose load is at its share of `factor % × (total + 1)`
//!   is skipped. By default the load is this proxy's in-flight requests,
//!   as HAProxy counts; `bound_load = "published"` counts each node's work
//!   as published in its window (busy workers and queue, from every
//!   proxy), or its own in-flight requests when that is more (with 4
//!   proxies it let queues build: docs/benchmarks.md).
//!
//! Re-implemented from the behaviour of HAProxy 2.6 (`src/backend.c`,
//! `src/lb_chash.c`, `src/lb_map.c`, `src/hash.c`).

pub mod functions;
pub(crate) mod key;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub use key::key_hash;

use super::{NodeState, NodeWindows};
use crate::config::{BoundLoad, HashBalance};

/// HAProxy's `BE_WEIGHT_SCALE`: a weight-1 server has 16 ring points.
const WEIGHT_SCALE: u32 = 16;
/// HAProxy's `SRV_EWGHT_RANGE` (256 × 16): spacing of server ids' points.
const ID_SPACING: u32 = 4096;

/// The site's up nodes laid out for hashing; rebuilt with the up list.
#[derive(Debug)]
pub struct HashTable {
    nodes: Vec<Arc<NodeState>>,
    layout: Layout,
    /// Effective weight per node (ring: `weight × 16`; map: slots).
    eweights: Vec<u32>,
    /// Sum of the effective weights of the nodes before each one.
    cumulative: Vec<u32>,
    total: u32,
    balance_factor: Option<u32>,
    bound_load: BoundLoad,
    /// Round robin over the table for requests without a key.
    cursor: AtomicUsize,
}

#[derive(Debug)]
enum Layout {
    /// Points sorted by key: (key, node position).
    Ring(Vec<(u32, u32)>),
    /// Slot → node position.
    Map(Vec<u32>),
}

impl HashTable {
    /// Lays out `nodes` (the site's up nodes, config order); `id(i)` is node
    /// `i`'s HAProxy server id, `gcd` the gcd of the site's configured
    /// weights (the map's divisor).
    pub fn build(
        conf: &HashBalance,
        nodes: &[Arc<NodeState>],
        id: impl Fn(usize) -> u32,
        gcd: u32,
    ) -> HashTable {
        let gcd = gcd.max(1);
        let eweights: Vec<u32> = nodes
            .iter()
            .map(|n| {
                if conf.consistent {
                    n.weight() * WEIGHT_SCALE
                } else {
                    n.weight().div_ceil(gcd)
                }
            })
            .collect();
        let mut cumulative = Vec::with_capacity(nodes.len());
        let mut total = 0u32;
        for w in &eweights {
            cumulative.push(total);
            total += w;
        }
        let layout = if conf.consistent {
            let mut points = Vec::with_capacity(total as usize);
            for (i, w) in eweights.iter().enumerate() {
                let base = id(i).wrapping_mul(ID_SPACING);
                for j in 0..*w {
                    points.push((functions::full_hash(base.wrapping_add(j)), i as u32));
                }
            }
            // Stable: equal keys keep insertion order, as HAProxy's tree.
            points.sort_by_key(|p| p.0);
            Layout::Ring(points)
        } else {
            Layout::Map(server_map(&eweights, total))
        };
        HashTable {
            nodes: nodes.to_vec(),
            layout,
            eweights,
            cumulative,
            total,
            balance_factor: conf.balance_factor.filter(|_| conf.consistent),
            bound_load: conf.bound_load,
            cursor: AtomicUsize::new(0),
        }
    }

    /// The node for `hash` among those `allowed` (up nodes this attempt may
    /// use); `None` for no key: round robin over the table. Bounded loads
    /// skip nodes at their share, reading loads through `windows`.
    pub fn pick(
        &self,
        hash: Option<u32>,
        allowed: impl Fn(&NodeState) -> bool,
        windows: &NodeWindows,
    ) -> Option<Arc<NodeState>> {
        let len = match &self.layout {
            Layout::Ring(p) => p.len(),
            Layout::Map(m) => m.len(),
        };
        if len == 0 {
            return None;
        }
        let at = |k: usize| -> usize {
            match &self.layout {
                Layout::Ring(p) => p[k % len].1 as usize,
                Layout::Map(m) => m[k % len] as usize,
            }
        };
        let Some(hash) = hash else {
            let start = self.cursor.fetch_add(1, Ordering::Relaxed);
            return (0..len)
                .map(|k| &self.nodes[at(start + k)])
                .find(|n| allowed(n))
                .cloned();
        };
        let start = match &self.layout {
            Layout::Map(_) => hash as usize % len,
            Layout::Ring(points) => nearest(points, hash),
        };
        let bound = self.balance_factor.map(|f| Bound::of(self, f, windows));
        let eligible = |i: usize| bound.as_ref().is_none_or(|b| b.eligible(self, i));
        let mut first_allowed = None;
        for k in 0..len {
            let i = at(start + k);
            if !allowed(&self.nodes[i]) {
                continue;
            }
            first_allowed.get_or_insert(i);
            if eligible(i) {
                return Some(Arc::clone(&self.nodes[i]));
            }
        }
        // Every allowed node at its bound: the key's own one, as HAProxy
        // (its walk gives up after one turn).
        first_allowed.map(|i| Arc::clone(&self.nodes[i]))
    }
}

/// Position of the point nearest `hash` (HAProxy's `chash_get_server_hash`:
/// the one at or after it, or the one before when that is no farther).
fn nearest(points: &[(u32, u32)], hash: u32) -> usize {
    let len = points.len();
    let next = points.partition_point(|p| p.0 < hash) % len;
    let prev = (next + len - 1) % len;
    let dp = hash.wrapping_sub(points[prev].0);
    let dn = points[next].0.wrapping_sub(hash);
    if dp <= dn {
        prev
    } else {
        next
    }
}

/// HAProxy's server map: `total` slots, each node getting its effective
/// weight in slots, spread by the running-score rule of
/// `recalc_server_map` (ties to the first in config order).
fn server_map(eweights: &[u32], total: u32) -> Vec<u32> {
    let tot = i64::from(total);
    let mut score = vec![0i64; eweights.len()];
    let mut map = Vec::with_capacity(total as usize);
    for _ in 0..total {
        if tot == 1 {
            if let Some(i) = eweights.iter().position(|w| *w > 0) {
                map.push(i as u32);
            }
            continue;
        }
        let mut best: Option<(usize, i64)> = None;
        for (i, w) in eweights.iter().enumerate() {
            score[i] += i64::from(*w);
            let v = (score[i] + tot) / tot;
            if best.is_none_or(|(_, max)| v > max) {
                best = Some((i, v));
            }
        }
        if let Some((i, _)) = best {
            score[i] -= tot;
            map.push(i as u32);
        }
    }
    map
}

/// The loads a bounded-load decision compares: per node of the table, its
/// requests in progress (the window's busy workers and queue, or this
/// proxy's in-flight requests when more; only the latter with
/// `bound_load = "own"`), and their sum.
struct Bound {
    loads: Vec<u64>,
    /// Slots per unit of weight and the remainder to spread.
    per_weight: u64,
    remainder: u64,
}

impl Bound {
    fn of(t: &HashTable, factor: u32, windows: &NodeWindows) -> Bound {
        let loads: Vec<u64> = t
            .nodes
            .iter()
            .map(|n| {
                let own = n.inflight() as u64;
                match t.bound_load {
                    BoundLoad::Own => own,
                    BoundLoad::Published => {
                        published_work(windows, n.index).map_or(own, |w| w.max(own))
                    }
                }
            })
            .collect();
        let served: u64 = loads.iter().sum();
        // HAProxy: the slots of (served + 1) × factor %, rounded up.
        let slots = ((served + 1) * u64::from(factor)).div_ceil(100);
        let total = u64::from(t.total.max(1));
        Bound {
            loads,
            per_weight: slots / total,
            remainder: slots % total,
        }
    }

    /// Whether node `i` is below its share (HAProxy's
    /// `chash_server_is_eligible`).
    fn eligible(&self, t: &HashTable, i: usize) -> bool {
        let total = u64::from(t.total.max(1));
        let w = u64::from(t.eweights[i]);
        let cum = u64::from(t.cumulative[i]);
        let mut slots = w * self.per_weight;
        slots += (cum + w) * self.remainder / total - cum * self.remainder / total;
        self.loads[i] < slots.max(1)
    }
}

/// A node's requests in progress as its window last published them (busy
/// workers plus queue), `None` without a fresh block.
pub(crate) fn published_work(windows: &NodeWindows, node: usize) -> Option<u64> {
    let s = fresh_block(windows, node)?.sample;
    Some(s.app_busy.saturating_add(s.app_queue_len))
}

/// `node`'s newest fresh load block: an shm window read right here, else
/// the background read (interval mode); `None` without one.
pub(crate) fn fresh_block(windows: &NodeWindows, node: usize) -> Option<rdmalb_window::LoadBlock> {
    windows
        .with_node(node, |w| match w.read_inline() {
            Some(Ok(b)) => Some(b),
            Some(Err(_)) => None,
            None => w.snapshot(std::time::SystemTime::now()).fresh().copied(),
        })
        .flatten()
}

/// Greatest common divisor of the non-zero weights (1 when there are none).
pub fn weights_gcd(weights: impl Iterator<Item = u32>) -> u32 {
    weights
        .filter(|w| *w > 0)
        .fold(0, |a, b| {
            let (mut a, mut b) = (a, b);
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        })
        .max(1)
}

#[cfg(test)]
mod tests;
