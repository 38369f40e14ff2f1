//! The kinds of per-node background loop the health checks' supervisor
//! ([`super::health::spawn_checks`]) keeps running, one per node that wants
//! each kind.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{Backends, NodeState};

/// Starts one node's loop: the node, the snapshots it follows, the
/// shutdown watch.
pub(crate) type SpawnLoop =
    fn(Arc<NodeState>, Arc<ArcSwap<Backends>>, watch::Receiver<bool>) -> JoinHandle<()>;

/// One kind of per-node background loop the supervisor keeps running: the
/// active health check ([`super::health::HEALTH_LOOP`]) and the agent-check
/// ([`super::agent_check::AGENT_LOOP`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeLoop {
    /// For log lines: "health check", "agent-check".
    pub what: &'static str,
    /// Whether `node` of `backends` gets this loop.
    pub wanted: fn(&Backends, &NodeState) -> bool,
    /// Spawns the loop for `node`; it runs until `shutdown` (the supervisor
    /// aborts it when the node leaves or no longer wants it).
    pub spawn: SpawnLoop,
    /// Called after the loop of `node` was stopped because the node left the
    /// config (`removed`) or stays but no longer wants the loop.
    pub stopped: fn(&NodeState, bool),
}
