//! Runtime backend state and node selection.
//!
//! - [`NodeState`] (in `node`): one node's in-flight count and health state
//!   machine (active checks with rise/fall, passive ejection), shared by
//!   every request and carried across reloads;
//! - [`Selector`] (in `selector`): the selection policy trait and the
//!   baselines [`RoundRobin`], [`LeastConn`], [`RandomTwo`]; [`Policy`]
//!   (in `policy`): the registry from `balance` names to policies, a
//!   baseline or a [`LoadAware`] one (in `load_aware`: the window reads)
//!   with its [`LoadRule`]: [`LeastLoad`] (in `least_load`), [`HotCold`]
//!   (in `hot_cold`), [`ShortestWait`] (in `drain`);
//! - [`Backends`] (in `backends`): the immutable per-snapshot view (nodes per
//!   site + selector) the data path picks from, swapped with `ArcSwap` on
//!   reload;
//! - [`control`]: what the operator and a node's agent-check decide beside
//!   health: administrative state (ready, drain, maint), weight, backup,
//!   per-node in-flight cap;
//! - [`health`]: the active checker, one background loop per node, and the
//!   supervisor that also keeps the agent-checks running;
//! - [`agent_check`]: HAProxy's agent-check client (weight, administrative
//!   state, up/down and cap from a node's agent);
//! - [`node_windows`]: [`NodeWindows`], the connections to the nodes' windows
//!   (reconnecting, interval reads) the load-aware policy reads;
//! - [`load`]: the load index the load-aware rules score;
//! - [`hash`]: hash balancing as HAProxy's (`balance source|uri|hdr|…`,
//!   map-based and consistent, bounded loads);
//! - [`sticky`]: whether the node a persistence cookie names keeps the
//!   request, and the load bound that moves sessions.
//!
//! Depends on `config` only; the data path (`proxy`) depends on this, never
//! the other way round.

pub mod agent_check;
mod backends;
pub mod control;
pub mod drain;
pub mod hash;
pub mod health;
mod hot_cold;
mod latency;
mod least_load;
pub mod load;
mod load_aware;
mod node;
mod node_loop;
pub mod node_windows;
mod outcome;
mod policy;
mod prequal;
mod selector;
pub mod sticky;
pub mod traffic;
mod unseen;

pub use backends::{Backends, NoNode, PickError, PickKey, SiteBackends};
pub use control::{AdminState, ControlSnapshot, Source as ControlSource};
pub use drain::ShortestWait;
pub use hot_cold::HotCold;
pub use least_load::LeastLoad;
pub use load_aware::{Decision, LoadAware, LoadRule, Slot};
pub use node::{DownReason, HealthSnapshot, NodeState, Outcome, Pick, Thresholds, Transition};
pub use node_windows::NodeWindows;
pub use policy::Policy;
pub use prequal::Prequal;
pub use selector::{LeastConn, PeakEwma, RandomTwo, RoundRobin, Selector};
pub use traffic::{Rate, TrafficSnapshot};
