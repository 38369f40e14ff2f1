//! Metric handles of the data path, registered once per config snapshot so
//! a request only increments atomics (no label hashing or allocation per
//! request). Names as listed in `docs/metrics.md`:
//! `rdmalb_requests_total{site,node,code_class}`,
//! `rdmalb_request_duration_seconds{site}`, `rdmalb_inflight{node}`,
//! `rdmalb_upstream_errors_total{node,kind}`, `rdmalb_retries_total{site,reason}`,
//! `rdmalb_sticky_moves_total{site,reason}`.
//! Rare events (client errors, reloads) use the macros directly.
//!
//! Per site, two plain atomics ([`SiteDemand`]) count requests that arrived
//! and responses served below 500; the reconfiguration agent samples them
//! every S for the QoS accounting (`reconfig::qos`). They outlive reloads.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram};

use crate::config::Config;
use crate::qos::admission;
use crate::qos::guarantee::{Demand, SiteDemand};

/// `code_class` label values, indexed by [`class_index`].
pub const CODE_CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "err"];

/// Index into [`CODE_CLASSES`]: status class, or "err" when the exchange
/// was cut (no complete response reached the client).
pub fn class_index(status: u16, cut: bool) -> usize {
    if cut {
        5
    } else {
        match status {
            100..=199 => 0,
            200..=299 => 1,
            300..=399 => 2,
            400..=499 => 3,
            _ => 4,
        }
    }
}

/// `kind` label values of `rdmalb_upstream_errors_total`.
pub const UPSTREAM_ERROR_KINDS: [&str; 4] = ["connect", "timeout", "protocol", "5xx"];

/// Handles of one node.
#[derive(Debug)]
pub struct NodeStats {
    pub requests: [Counter; 6],
    pub inflight: Gauge,
    pub errors: [Counter; 4],
}

/// Handles of one site.
#[derive(Debug)]
pub struct SiteStats {
    pub name: String,
    /// Requests of the site in flight (routed to it and not settled yet),
    /// the access log's `beconn`; carried across reloads by site name.
    pub active: Arc<AtomicUsize>,
    pub duration: Histogram,
    /// `rdmalb_retries_total{site,reason}`, indexed by
    /// [`RetryReason::index`](super::forward::RetryReason::index).
    pub retries: [Counter; 3],
    /// Requests answered without a node (all down, connect failures...).
    pub no_node: [Counter; 6],
    /// Offered / served counts for the QoS accounting (`None`: a site a
    /// reload added, unknown to the agent until a restart).
    pub demand: Option<Arc<SiteDemand>>,
    /// `rdmalb_qos_admitted_total{site,path}`: direct, queued.
    pub admitted: [Counter; 2],
    /// `rdmalb_qos_rejected_total{site,reason}`: queue_full, queue_timeout.
    pub rejected: [Counter; 2],
    /// `rdmalb_compressed_responses_total{site,coding}`, by [`CODINGS`].
    pub compressed: [Counter; 3],
    /// `rdmalb_compression_bytes_total{site,direction}`: in (the node's
    /// bytes), out (sent to clients), of compressed responses.
    pub compression_bytes: [Counter; 2],
    /// `rdmalb_sticky_moves_total{site,reason}`, by
    /// [`Move::index`](crate::balance::sticky::Move::index).
    pub sticky_moves: [Counter; 4],
}

/// `coding` label values, indexed by [`coding_index`].
pub const CODINGS: [&str; 3] = ["gzip", "br", "zstd"];

/// Index into [`CODINGS`].
pub fn coding_index(c: crate::config::Coding) -> usize {
    match c {
        crate::config::Coding::Gzip => 0,
        crate::config::Coding::Brotli => 1,
        crate::config::Coding::Zstd => 2,
    }
}

impl SiteStats {
    /// A request for the site arrived.
    pub fn arrived(&self) {
        if let Some(d) = &self.demand {
            d.arrived();
        }
    }
}

/// All handles of a snapshot.
#[derive(Debug)]
pub struct Stats {
    pub nodes: Vec<NodeStats>,
    pub sites: Vec<SiteStats>,
    /// Requests that matched no site.
    pub no_site: [Counter; 6],
    /// The per-site QoS counters of the start-up site table, carried from
    /// snapshot to snapshot.
    pub demand: Arc<Demand>,
}

fn classes(mut f: impl FnMut(&'static str) -> Counter) -> [Counter; 6] {
    CODE_CLASSES.map(&mut f)
}

impl Stats {
    /// Registers the handles for `config` with the installed recorder;
    /// the QoS counters are `previous`'s (the first snapshot creates them).
    pub fn build(config: &Config, previous: Option<&Stats>) -> Stats {
        let demand = previous.map_or_else(
            || Demand::new(config.sites.iter().map(|s| s.name.clone())),
            |p| Arc::clone(&p.demand),
        );
        let nodes = config
            .nodes
            .iter()
            .map(|n| {
                let site = n
                    .site
                    .and_then(|s| config.sites.get(s))
                    .map_or_else(|| "idle".to_string(), |s| s.name.clone());
                let node = n.name.clone();
                NodeStats {
                    requests: classes(|c| {
                        metrics::counter!("rdmalb_requests_total", "site" => site.clone(), "node" => node.clone(), "code_class" => c)
                    }),
                    inflight: metrics::gauge!("rdmalb_inflight", "node" => node.clone()),
                    errors: UPSTREAM_ERROR_KINDS.map(|k| {
                        metrics::counter!("rdmalb_upstream_errors_total", "node" => node.clone(), "kind" => k)
                    }),
                }
            })
            .collect();
        let sites = config
            .sites
            .iter()
            .map(|s| {
                let site = s.name.clone();
                let active = previous
                    .and_then(|p| p.sites.iter().find(|old| old.name == s.name))
                    .map_or_else(Arc::default, |old| Arc::clone(&old.active));
                SiteStats {
                    name: site.clone(),
                    active,
                    duration: metrics::histogram!("rdmalb_request_duration_seconds", "site" => site.clone()),
                    retries: super::forward::RetryReason::LABELS.map(|r| {
                        metrics::counter!(super::metrics::RETRIES, "site" => site.clone(), "reason" => r)
                    }),
                    no_node: classes(|c| {
                        metrics::counter!("rdmalb_requests_total", "site" => site.clone(), "node" => "none", "code_class" => c)
                    }),
                    demand: demand.site(&s.name),
                    admitted: ["direct", "queued"].map(|p| {
                        metrics::counter!(admission::ADMITTED, "site" => site.clone(), "path" => p)
                    }),
                    rejected: ["queue_full", "queue_timeout"].map(|r| {
                        metrics::counter!(admission::REJECTED, "site" => site.clone(), "reason" => r)
                    }),
                    compressed: CODINGS.map(|c| {
                        metrics::counter!("rdmalb_compressed_responses_total", "site" => site.clone(), "coding" => c)
                    }),
                    compression_bytes: ["in", "out"].map(|d| {
                        metrics::counter!("rdmalb_compression_bytes_total", "site" => site.clone(), "direction" => d)
                    }),
                    sticky_moves: crate::balance::sticky::Move::LABELS.map(|r| {
                        metrics::counter!(super::metrics::STICKY_MOVES, "site" => site.clone(), "reason" => r)
                    }),
                }
            })
            .collect();
        Stats {
            nodes,
            sites,
            no_site: classes(
                |c| metrics::counter!("rdmalb_requests_total", "site" => "none", "node" => "none", "code_class" => c),
            ),
            demand,
        }
    }
}

/// Counts a client-side error (`rdmalb_client_errors_total{kind}`).
pub fn client_error(kind: &'static str) {
    metrics::counter!("rdmalb_client_errors_total", "kind" => kind).increment(1);
}

#[cfg(test)]
mod tests;
