//! The whole sidecar config file as one type, for the configuration
//! reference (`rdmalb config-reference`, docs/configuration.md) only: the
//! validator reads each top-level key on its own ([`super::validate`]) so
//! that every problem is reported, and this type lists those keys with the
//! raw types they are read into. A test keeps its keys equal to the keys
//! the validator accepts.

use schemars::JsonSchema;

use super::raw::*;

/// The sidecar config file, read by `rdmalb sidecar -c FILE` and
/// `rdmalb check --sidecar -c FILE`; one per backend node.
///
/// Durations are text (`"1ms"`, `"100ms"`, `"2s"`). Unknown keys are errors.
/// Relative paths are relative to the file's folder. Per field, a later
/// `[[collector]]` wins over an earlier one.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only its schema is used
pub struct SidecarFile {
    /// This node's name, exactly as in the proxy config's `[[node]]` name.
    ///
    /// Example: `"n1"`.
    node: String,
    /// This node's id, unique in the cluster and written into the window
    /// header; the proxy's `node.node_id` must match it. Accepted: 1 to
    /// 65535.
    ///
    /// Example: `1`.
    node_id: i64,
    /// The cluster's site table in the proxy config's order. Its hash goes
    /// into the window header; a proxy with a different table is refused.
    ///
    /// Example: `["shop", "blog", "news"]`.
    sites: Vec<String>,
    /// The site this node serves at start-up: a name from `sites`, or
    /// `"idle"`. The sidecar sets the node's role word to it (ACTIVE,
    /// epoch 1) on its first start; a restart resumes the role recorded in
    /// `state_file` instead. Use the proxy config's `[[node]] site`.
    ///
    /// Default: `"idle"`. Example: `"shop"`.
    site: Option<String>,
    /// Where the node's role (site served, site being applied, highest
    /// epoch) survives restarts: a persistent folder the sidecar may write.
    ///
    /// Default: `<node>.state` beside the config file. Example: `"/var/lib/rdmalb/n1.state"`.
    state_file: Option<String>,
    /// How often the load block is republished. Accepted: 100us to 10s.
    ///
    /// Default: `"1ms"`.
    publish_interval: Option<String>,
    /// The staleness bound advertised in `/status`: at least two publish
    /// intervals.
    ///
    /// Default: `"50ms"`.
    staleness: Option<String>,
    /// How proxies reach the node's window: at least one of `shm`, `tcp`
    /// (both may be set), or `verbs` alone.
    window: Option<RawWindow>,
    /// A source of load figures (at least one). `kind` says which keys apply.
    collector: Vec<RawCollector>,
    /// The sidecar's own `GET /metrics` (Prometheus) and `GET /status`
    /// (JSON). Off without this section.
    admin: Option<RawAdmin>,
    /// HAProxy's agent-check for this node: each connection gets one line
    /// (`up ready 73%`) and is closed. Off without this section.
    agent_check: Option<RawAgentCheck>,
    /// Role application: when a proxy claims the node for a site, render
    /// the site's template into `file`, run `reload`, probe the app and
    /// publish the result. Off without this section: claims for another
    /// site are answered NO_TEMPLATE.
    role: Option<RawRole>,
}

/// `[window]`: the transports the window is served over.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only its schema is used
struct RawWindow {
    /// A file under /dev/shm mapped by proxies on the same host
    /// (one-sided: the sidecar does nothing to serve a read).
    shm: Option<RawShm>,
    /// The two-sided responder for proxies on other hosts without RDMA.
    tcp: Option<RawTcp>,
    /// RDMA (InfiniBand, RoCE). Refused beside `shm` and `tcp`: NIC atomics
    /// are not atomic with the CPU atomics the others use.
    verbs: Option<RawVerbs>,
}

/// The sidecar config file's JSON schema, from the raw structs.
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(SidecarFile).to_value()
}

#[cfg(test)]
mod tests;
