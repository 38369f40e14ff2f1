//! `[routing]`: how the window policies read node windows (candidates per
//! decision, read mode by transport, deadline, staleness) and what they do
//! with what they read.

use std::time::Duration;

use super::WindowEndpoint;

/// `[routing]`: how the `weighted-least-load` policy reads node windows.
/// Ignored by the other policies.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    /// Nodes compared per decision ("power of d choices").
    pub candidates: Candidates,
    /// Read mode for every node; `None` = by transport (shm and verbs
    /// per request, tcp every [`Routing::DEFAULT_TCP_INTERVAL`]).
    pub load_read: Option<ReadMode>,
    /// Bound on one load read (all torn-read retries included). A node
    /// whose read misses it is scored from local information only.
    pub read_deadline: Duration,
    /// A block published longer ago than this when it was read is stale
    /// (its owner stopped publishing, or clocks disagree).
    pub staleness: Duration,
    /// Time constant of the drain rates `shortest-wait` measures from the
    /// windows' completion counters.
    pub drain_window: Duration,
    /// Whether the window policies add this proxy's requests sent to a
    /// node after its block was published (`balance::unseen`).
    pub unseen: Unseen,
    /// Whether `shortest-wait` ranks a node whose published queue is (nearly)
    /// full after every node with room (`balance::drain::nearly_full`).
    pub full_queue: FullQueue,
}

impl Routing {
    /// Read interval of tcp nodes when `load_read` is not set.
    pub const DEFAULT_TCP_INTERVAL: Duration = Duration::from_millis(50);

    /// Nodes compared per decision by default: every node of a site of up
    /// to 16, 16 drawn at random beyond. Comparing every node of a
    /// handful beat d = 2 by 8x at the p99 with co-tenants on the nodes
    /// (docs/benchmarks.md, "The defaults"), where d = 2 lost to
    /// `random`; sites larger than 16 nodes were not measured.
    pub const DEFAULT_CANDIDATES: usize = 16;

    /// The read mode used for a node reached over `endpoint`.
    pub fn mode_for(&self, endpoint: &WindowEndpoint) -> ReadMode {
        match (self.load_read, endpoint) {
            (Some(mode), _) => mode,
            // A two-sided read costs the node's CPU (seed 002 section 3).
            (None, e) if !e.transport().is_one_sided() => {
                ReadMode::Interval(Self::DEFAULT_TCP_INTERVAL)
            }
            (None, _) => ReadMode::PerRequest,
        }
    }
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            candidates: Candidates::Count(Routing::DEFAULT_CANDIDATES),
            load_read: None,
            read_deadline: Duration::from_millis(5),
            staleness: Duration::from_millis(250),
            drain_window: Duration::from_millis(50),
            unseen: Unseen::Count,
            full_queue: FullQueue::Avoid,
        }
    }
}

/// `routing.unseen`: what the window policies do with this proxy's requests
/// dispatched to a node after its window block was published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unseen {
    /// Add them to the block's busy workers and queue (default).
    Count,
    /// Score the block as published (the in-flight term aside).
    Ignore,
}

/// `routing.full_queue`: what `shortest-wait` does with a node whose queue,
/// as its window publishes it (word 22, the queue limit), has no room for
/// this request and the ones other proxies may have sent since the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullQueue {
    /// Rank it after every node with room (default); a node that publishes
    /// no queue limit is never full.
    Avoid,
    /// Rank it by its expected wait like any other.
    Ignore,
}

/// `routing.candidates`: `2` .. `64` (default [`Routing::DEFAULT_CANDIDATES`]),
/// or `"all"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidates {
    Count(usize),
    All,
}

/// `routing.load_read`: when node load blocks are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Read the candidates' windows for every decision (seed 002's
    /// RDMA-Sync granularity).
    PerRequest,
    /// A background reader refreshes a snapshot this often; decisions use
    /// the snapshot (seed 002's coarse-grained monitoring).
    Interval(Duration),
}

impl std::fmt::Display for ReadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadMode::PerRequest => f.write_str("per-request"),
            ReadMode::Interval(d) => write!(f, "interval:{}", rdmalb_base::duration::format(*d)),
        }
    }
}
