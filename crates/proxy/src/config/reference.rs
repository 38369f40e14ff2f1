//! The whole proxy config file as one type, for the configuration reference
//! (`rdmalb config-reference`, docs/configuration.md) only: the validator
//! reads each section on its own ([`super::validate`]) so that problems in
//! several sections are all reported, and this type lists those sections
//! with the raw structs they are read into. A test keeps its keys equal to
//! the sections the validator accepts.

use schemars::JsonSchema;

use super::acme::RawAcme;
use super::raw::*;
use super::stats_socket::RawStatsSocket;
use crate::rules::config::{RawErrorPage, RawMap, RawRule, RawSiteRule, RawTest, RawUserlist};
use crate::rules::stick::config::RawTable;
use crate::rules::stick::share::config::RawShare;

/// `rdmalb.toml`, read by `rdmalb proxy -c FILE` and `rdmalb check -c FILE`.
///
/// Durations are text: `"250ms"`, `"2s"`, `"1m"`, `"1h"`. Unknown keys are
/// errors, and `rdmalb check` reports every problem with its key. Relative
/// paths are relative to the file's folder.
///
/// Which setting wins: a site's own value (`site.weights`,
/// `site.health_path`, `site.balance`) over the global section
/// (`[weights]`, `[health]`, `global.balance`) over the built-in default
/// shown here; a node's own value (`node.max_inflight`) over `[limits]`.
///
/// Reload (`kill -HUP`): sites, nodes, balance, weights, routing, health,
/// upstream timeouts (connect, server, queue), pool settings, rules and the
/// forwarding headers change live; listeners, `[admin]`, `[reconfig]`,
/// `global.workers`, `global.access_log` and the client-side limits and
/// timeouts apply only at start-up (a reload that changes them logs a
/// warning); restart (`kill -USR2`) changes everything without dropping
/// connections.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only its schema is used
pub struct ProxyFile {
    /// Process-wide settings.
    global: Option<RawGlobal>,
    /// Client- and node-side timeouts.
    timeouts: Option<RawTimeouts>,
    /// Sizes and counts that bound what one client or node may use.
    limits: Option<RawLimits>,
    /// Active health checks and passive ejection, for every site (a site
    /// may set its own `health_path`).
    health: Option<RawHealth>,
    /// The admin listener: `/stats`, `/status`, `/metrics` and the runtime
    /// API of `rdmalb ctl`. Off without this section.
    admin: Option<RawAdmin>,
    /// What the proxies and sidecars of one cluster share.
    cluster: Option<RawCluster>,
    /// The global weights of the load index (`weighted-least-load`); a
    /// site's `weights` table wins, key by key.
    weights: Option<RawWeights>,
    /// How node load is read for the load-aware policies.
    routing: Option<RawRouting>,
    /// A listening address (at least one).
    listener: Vec<RawListener>,
    /// A web site: the hosts and paths it answers, and how its nodes are
    /// chosen. The order of the sites is the cluster's site table: every
    /// proxy and sidecar must list the same sites in the same order.
    site: Vec<RawSite>,
    /// A backend node: an app server, usually with a sidecar beside it.
    node: Vec<RawNode>,
    /// The reconfiguration agent: moves idle nodes to hot sites.
    reconfig: Option<RawReconfig>,
    /// The proxy-wide admission queue and VirtualClock dispatch.
    qos: Option<RawQos>,
    /// HAProxy's stats socket (its text protocol on a UNIX or loopback TCP
    /// socket), for socat scripts, hatop and haproxy_exporter.
    stats_socket: Vec<RawStatsSocket>,
    /// Certificates ordered by ACME (RFC 8555) for sites with `acme = true`.
    acme: Option<RawAcme>,
    /// A named test for rules (HAProxy's `acl`); docs/rules.md.
    acl: Vec<RawTest>,
    /// A key → value file rules look up (HAProxy's `map`).
    map: Vec<RawMap>,
    /// Users for `auth` rules (HAProxy's `userlist`).
    userlist: Vec<RawUserlist>,
    /// A rule run on the request (HAProxy's `http-request`).
    request_rule: Vec<RawRule>,
    /// Chooses a site, first match wins (HAProxy's `use_backend`).
    site_rule: Vec<RawSiteRule>,
    /// A rule run on the response head (HAProxy's `http-response`).
    response_rule: Vec<RawRule>,
    /// The body of an answer the proxy makes itself (HAProxy's `errorfile`).
    error_page: Vec<RawErrorPage>,
    /// Counters per client key (HAProxy's `stick-table`).
    stick_table: Vec<RawTable>,
    /// Stick-table counts shared with other proxies over UDP.
    stick_share: Option<RawShare>,
}

/// The proxy config file's JSON schema, from the raw structs.
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(ProxyFile).to_value()
}

#[cfg(test)]
mod tests;
