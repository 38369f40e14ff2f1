//! Priorities and throughput guarantees at run time (docs/reconfiguration.md "QoS"):
//!
//! - [`admission`]: the proxy-wide admission queue of `[qos]`, with
//!   VirtualClock dispatch per site (seed 004), on the request path;
//! - [`guarantee`]: per-site demand accounting (offered vs served per
//!   interval S against the guarantee), the kept/missed verdict and the
//!   QoS-meeting percentage (seed 003), which the reconfiguration agent's
//!   policy reads to move nodes toward a site that misses its guarantee.
//!
//! The settings (`[qos]`, and each site's `priority` and `guarantee`) are
//! validated with the rest of the config (`config::qos`); this room depends
//! on `config`, and the request path (`front`) and the agent (`reconfig`)
//! depend on it.

pub mod admission;
pub mod guarantee;
