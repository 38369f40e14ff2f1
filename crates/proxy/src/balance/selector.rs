//! Selection policies: which of a site's candidate nodes gets the next
//! request.
//!
//! A [`Selector`] sees only nodes that are up and not excluded (already tried
//! by this request); [`Backends::pick`](super::Backends::pick) does the
//! filtering. Policies are built per [`Backends`](super::Backends) snapshot,
//! so per-site state (cursors) is sized once and read without locks.
//!
//! The baselines kept for HAProxy users and for comparison (docs/routing.md):
//! [`RoundRobin`], [`LeastConn`], [`RandomTwo`] (power of two
//! choices on in-flight counts, as in linkerd2-proxy `pool/p2c`),
//! [`First`] (HAProxy's `balance first`). The
//! load-aware policy implements the same trait and reads node windows through
//! the candidates it is given.
//!
//! Every policy honours the nodes' weights (`[[node]] weight`, the runtime
//! API, an agent-check's `N%`) as HAProxy's do: round robin gives each node
//! its weight's share of every cycle, leastconn compares in-flight counts
//! per unit of weight, random draws by weight. With equal weights each is
//! exactly the unweighted policy. `first` alone ignores them, as
//! HAProxy's does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rand::Rng;

use super::NodeState;
use crate::config::Balance;

/// A selection policy. Implementations must be cheap and lock-free: `select`
/// runs once per request attempt.
pub trait Selector: Send + Sync + std::fmt::Debug + 'static {
    /// Name shown in `/status` (`roundrobin`, `leastconn`, `random`, …).
    fn name(&self) -> &'static str;

    /// Chooses among `candidates` (all up, none excluded; the order is the
    /// config order of the site's nodes, with the unavailable ones removed),
    /// or returns `None` when `candidates` is empty. `site` is the site index
    /// (for per-site state such as cursors or load weights); it may be out of
    /// the range the selector was built for, which must not panic.
    fn select(&self, site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>>;
}

/// Whether every candidate has the same weight (the common case: the
/// policies then skip the weight arithmetic). Without any weight ever set
/// this reads one flag, not every candidate.
pub(super) fn equal_weights(candidates: &[Arc<NodeState>]) -> bool {
    if !super::control::weights_may_differ() {
        return true;
    }
    let mut it = candidates.iter().map(|n| n.weight());
    let first = it.next();
    it.all(|w| Some(w) == first)
}

/// Whether `a` has less in flight per unit of weight than `b`, counting the
/// request being placed (HAProxy's `(conns + 1) / weight`), so that idle
/// nodes rank by weight.
fn lighter(a: &NodeState, b: &NodeState) -> bool {
    let (ia, ib) = (a.inflight() as u64 + 1, b.inflight() as u64 + 1);
    ia * u64::from(b.weight().max(1)) < ib * u64::from(a.weight().max(1))
}

/// Position `c` of a weighted rotation: every cycle of `W` (the sum of the
/// weights) consecutive positions gives each node exactly its weight in
/// slots. The cycle is walked with a stride coprime to `W` near `W / φ`,
/// so a heavy node's slots are spread over the cycle instead of coming in
/// one run.
fn weighted_slot(c: usize, candidates: &[Arc<NodeState>]) -> usize {
    let total: u64 = candidates.iter().map(|n| u64::from(n.weight())).sum();
    if total == 0 {
        return c % candidates.len();
    }
    let mut stride = ((total as f64 * 0.618) as u64).max(1);
    while gcd(stride, total) != 1 {
        stride += 1;
    }
    let mut p = ((c as u64) % total) * stride % total;
    for (i, n) in candidates.iter().enumerate() {
        let w = u64::from(n.weight());
        if p < w {
            return i;
        }
        p -= w;
    }
    candidates.len() - 1
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A candidate drawn with probability proportional to its weight, other
/// than `skip`.
fn weighted_draw(rng: &mut impl Rng, candidates: &[Arc<NodeState>], skip: Option<usize>) -> usize {
    let weight = |i: usize| {
        if Some(i) == skip {
            0
        } else {
            u64::from(candidates[i].weight())
        }
    };
    let total: u64 = (0..candidates.len()).map(weight).sum();
    if total == 0 {
        return (0..candidates.len())
            .find(|&i| Some(i) != skip)
            .unwrap_or(0);
    }
    let mut p = rng.gen_range(0..total);
    for i in 0..candidates.len() {
        let w = weight(i);
        if p < w {
            return i;
        }
        p -= w;
    }
    candidates.len() - 1
}

/// Power of two choices: two distinct candidates drawn (uniformly, or by
/// weight when the weights differ), the second kept when `better(first,
/// second)`, else the first (so a tie goes to a random one of the two:
/// the draw order is random).
fn two_choices(
    candidates: &[Arc<NodeState>],
    better: impl Fn(&NodeState, &NodeState) -> bool,
) -> Option<Arc<NodeState>> {
    let n = candidates.len();
    if n <= 1 {
        return candidates.first().cloned();
    }
    // thread_rng is a thread-local, reseeding CSPRNG: no locks, a few ns
    // per draw.
    let mut rng = rand::thread_rng();
    let (a, b) = if equal_weights(candidates) {
        let a = rng.gen_range(0..n);
        // Second index uniform over the others: distinct from `a`.
        (a, (a + 1 + rng.gen_range(0..n - 1)) % n)
    } else {
        let a = weighted_draw(&mut rng, candidates, None);
        (a, weighted_draw(&mut rng, candidates, Some(a)))
    };
    let (na, nb) = (&candidates[a], &candidates[b]);
    Some(Arc::clone(if better(na, nb) { nb } else { na }))
}

/// One atomic per cache line so sites do not contend with each other.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Cursor(AtomicUsize);

/// Per-site rotating cursors; an out-of-range site uses a shared spare one.
#[derive(Debug)]
pub(super) struct Cursors(Box<[Cursor]>);

impl Cursors {
    pub(super) fn new(sites: usize) -> Self {
        // One spare at the end for out-of-range site indices.
        Cursors((0..=sites).map(|_| Cursor::default()).collect())
    }

    /// Returns the next value of the site's cursor.
    pub(super) fn next(&self, site: usize) -> usize {
        let last = self.0.len() - 1;
        self.0[site.min(last)].0.fetch_add(1, Ordering::Relaxed)
    }
}

/// Round robin over the site's candidates with one atomic cursor per site.
/// When the candidate set shrinks (a node down, a retry excluding one) the
/// rotation continues over the remaining nodes.
#[derive(Debug)]
pub struct RoundRobin {
    cursors: Cursors,
}

impl RoundRobin {
    pub fn new(sites: usize) -> Self {
        RoundRobin {
            cursors: Cursors::new(sites),
        }
    }
}

impl Selector for RoundRobin {
    fn name(&self) -> &'static str {
        Balance::RoundRobin.as_str()
    }

    fn select(&self, site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        if candidates.is_empty() {
            return None;
        }
        let c = self.cursors.next(site);
        let i = if equal_weights(candidates) {
            c % candidates.len()
        } else {
            weighted_slot(c, candidates)
        };
        Some(Arc::clone(&candidates[i]))
    }
}

/// Least in-flight requests (from this proxy); ties are broken by rotating
/// the scan start per site, so equally loaded nodes share the traffic
/// instead of the first one taking it all.
#[derive(Debug)]
pub struct LeastConn {
    cursors: Cursors,
}

impl LeastConn {
    pub fn new(sites: usize) -> Self {
        LeastConn {
            cursors: Cursors::new(sites),
        }
    }
}

impl Selector for LeastConn {
    fn name(&self) -> &'static str {
        Balance::LeastConn.as_str()
    }

    fn select(&self, site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        let n = candidates.len();
        if n == 0 {
            return None;
        }
        let start = self.cursors.next(site) % n;
        if !equal_weights(candidates) {
            let mut best = start;
            for k in 1..n {
                let i = (start + k) % n;
                if lighter(&candidates[i], &candidates[best]) {
                    best = i;
                }
            }
            return Some(Arc::clone(&candidates[best]));
        }
        let mut best = start;
        let mut best_load = candidates[start].inflight();
        for k in 1..n {
            if best_load == 0 {
                break;
            }
            let i = (start + k) % n;
            let load = candidates[i].inflight();
            if load < best_load {
                best = i;
                best_load = load;
            }
        }
        Some(Arc::clone(&candidates[best]))
    }
}

/// Power of two random choices on in-flight counts: draw two distinct
/// candidates uniformly and take the one with fewer requests in flight (a
/// random one of the two on a tie, since the draw order is random). Avoids
/// the herd behaviour of a global least-connections scan across proxies.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomTwo;

impl Selector for RandomTwo {
    fn name(&self) -> &'static str {
        Balance::Random.as_str()
    }

    fn select(&self, _site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        if equal_weights(candidates) {
            two_choices(candidates, |a, b| b.inflight() < a.inflight())
        } else {
            two_choices(candidates, |a, b| lighter(b, a))
        }
    }
}

/// Peak-EWMA with power of two choices (Finagle, Linkerd): two candidates
/// drawn (by weight), the lower cost wins, cost = this proxy's
/// peak-sensitive latency estimate of the node (`balance::latency`) × its
/// requests in flight + 1, per unit of weight. Reacts to a node that turns
/// slow before its queue builds in this proxy's counts, but only through
/// latency this proxy itself observed.
#[derive(Debug, Default, Clone, Copy)]
pub struct PeakEwma;

fn ewma_cost(n: &NodeState) -> f64 {
    n.latency_ns() * (n.inflight() as f64 + 1.0) / f64::from(n.weight().max(1))
}

impl Selector for PeakEwma {
    fn name(&self) -> &'static str {
        Balance::PeakEwma.as_str()
    }

    fn select(&self, _site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        two_choices(candidates, |a, b| ewma_cost(b) < ewma_cost(a))
    }
}

/// HAProxy's `balance first`: the first candidate in config order (HAProxy
/// orders by server id, which defaults to the position in the backend).
/// Under a per-node cap (`limits.max_inflight_per_node` or a node's
/// `max_inflight`, HAProxy's `maxconn`) the candidates are the nodes with a
/// free slot ([`Backends::pick_queued`](super::Backends::pick_queued) leaves
/// out the full ones), so each node fills up before the next one takes a
/// request and the rest can idle; without a cap the first up node takes
/// every request. Weights are ignored, as HAProxy ignores them.
#[derive(Debug, Default, Clone, Copy)]
pub struct First;

impl Selector for First {
    fn name(&self) -> &'static str {
        Balance::First.as_str()
    }

    fn select(&self, _site: usize, candidates: &[Arc<NodeState>]) -> Option<Arc<NodeState>> {
        candidates.first().cloned()
    }
}

#[cfg(test)]
mod tests;
