//! The config file as written: serde structs mirroring the TOML, with
//! `deny_unknown_fields` everywhere so a misspelt key is an error, not a
//! silently ignored setting. Values stay as text here (durations, addresses)
//! so that validation can report each bad value with its key.

use serde::Deserialize;

/// Top-level sections. Each is deserialized on its own by the validator so
/// that problems in several sections are all reported. The rules' sections
/// are `rules::config::KEYS`.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "global",
    "timeouts",
    "limits",
    "health",
    "admin",
    "cluster",
    "weights",
    "routing",
    "listener",
    "site",
    "node",
    "reconfig",
    "qos",
    "stats_socket",
    "acme",
];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGlobal {
    pub proxy_id: Option<i64>,
    pub balance: Option<String>,
    pub default_site: Option<String>,
    pub workers: Option<i64>,
    pub shutdown_grace: Option<String>,
    /// "off", "stdout" or a file path.
    pub access_log: Option<String>,
    pub via_name: Option<String>,
    /// "replace" or "append".
    pub forwarded_for: Option<String>,
    /// Networks, e.g. "10.0.0.0/8", "::1/128", or bare addresses.
    pub trusted_proxies: Option<Vec<String>>,
    /// How many times a failed attempt may be sent again (HAProxy's `retries`).
    pub retries: Option<i64>,
    /// Which failures are retried: "conn-failure", "empty-response"
    /// (HAProxy's `retry-on` keywords).
    pub retry_on: Option<Vec<String>>,
    /// Percent of the worker threads' CPU above which new responses are
    /// not compressed.
    pub compression_max_cpu: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    pub connect: Option<String>,
    pub client: Option<String>,
    pub server: Option<String>,
    pub http_request: Option<String>,
    pub keep_alive: Option<String>,
    pub queue: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_header_bytes: Option<i64>,
    pub max_headers: Option<i64>,
    pub max_connections: Option<i64>,
    pub max_inflight_per_node: Option<i64>,
    pub pool_idle_per_node: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    pub path: Option<String>,
    pub interval: Option<String>,
    pub timeout: Option<String>,
    pub rise: Option<i64>,
    pub fall: Option<i64>,
    pub passive_failures: Option<i64>,
    /// The one status a check must get (HAProxy's `http-check expect status`).
    pub expect_status: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: Option<String>,
    pub token_file: Option<String>,
    pub allow_remote_without_token: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub psk_file: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeights {
    pub cpu: Option<f64>,
    pub run_queue: Option<f64>,
    pub memory: Option<f64>,
    pub network: Option<f64>,
    pub connections: Option<f64>,
    pub irq: Option<f64>,
    pub app: Option<f64>,
    pub inflight: Option<f64>,
}

/// `[routing]`; see [`super::types::Routing`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    /// An integer or "all".
    pub candidates: Option<toml::Value>,
    /// "per-request" or "interval:<duration>".
    pub load_read: Option<String>,
    pub read_deadline: Option<String>,
    pub staleness: Option<String>,
    pub drain_window: Option<String>,
    /// "count" or "ignore".
    pub unseen: Option<String>,
    /// "avoid" or "ignore".
    pub full_queue: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    pub name: Option<String>,
    pub listen: Option<String>,
    pub tls: Option<RawTls>,
    /// Every connection starts with a PROXY protocol header.
    pub accept_proxy: Option<bool>,
    /// The peers allowed to send one (networks).
    pub accept_proxy_from: Option<Vec<String>>,
    /// A path the proxy answers itself (HAProxy's `monitor-uri`).
    pub monitor_uri: Option<String>,
    /// When it answers 503 (HAProxy's `monitor fail if { nbsrv(..) lt N }`).
    pub monitor_fail: Option<RawMonitorFail>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMonitorFail {
    pub site: Option<String>,
    pub serving_below: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    #[serde(default)]
    pub certificates: Vec<RawCertPair>,
    pub h2: Option<bool>,
    /// Client certificates: the CA file they must chain to.
    pub client_ca: Option<String>,
    /// "required", "optional" or "none" (HAProxy's `verify`).
    pub verify: Option<String>,
    /// A PEM file of certificate revocation lists.
    pub crl: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCertPair {
    pub cert: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSite {
    pub name: Option<String>,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub path_prefixes: Vec<String>,
    pub priority: Option<i64>,
    /// Requests/s.
    pub guarantee: Option<f64>,
    pub min_nodes: Option<i64>,
    pub max_nodes: Option<i64>,
    pub weights: Option<RawWeights>,
    pub health_path: Option<String>,
    pub compression: Option<super::compression::RawCompression>,
    /// A policy or a hash key (`config::balancing`); default `global.balance`.
    pub balance: Option<String>,
    pub hash: Option<super::balancing::RawHash>,
    pub sticky: Option<super::balancing::RawSticky>,
    /// Order a certificate for the site's hosts (`[acme]`).
    pub acme: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub name: Option<String>,
    pub address: Option<String>,
    /// Site served at start-up; "idle" (or absent) puts the node in the idle pool.
    pub site: Option<String>,
    /// "shm", "tcp" or "verbs".
    pub transport: Option<String>,
    /// Shm: window file path. Tcp: responder address. Verbs: control address.
    pub sidecar: Option<String>,
    /// Verbs only: RDMA device name (default: first device).
    pub device: Option<String>,
    /// The sidecar's node_id, checked against its window header.
    pub node_id: Option<i64>,
    /// Active health checks (HAProxy's `check`); default true.
    pub check: Option<bool>,
    /// "v1" or "v2": a PROXY protocol header starts every connection.
    pub send_proxy: Option<String>,
    /// 0..=256, default 1 (HAProxy's `weight`).
    pub weight: Option<i64>,
    /// Starts in maintenance (HAProxy's `disabled`).
    pub disabled: Option<bool>,
    /// Per-node cap on requests in flight (HAProxy's server `maxconn`).
    pub max_inflight: Option<i64>,
    /// Used only when no non-backup node of the site can take requests.
    pub backup: Option<bool>,
    /// HAProxy agent-check: TCP port the node's agent answers on.
    pub agent_port: Option<i64>,
    /// Agent-check interval (HAProxy's `agent-inter`), default 2s.
    pub agent_interval: Option<String>,
    /// Agent-check address (HAProxy's `agent-addr`), default the node's IP.
    pub agent_address: Option<String>,
    /// The value of the site's sticky cookie for this node (HAProxy's
    /// server `cookie`).
    pub cookie: Option<String>,
}

/// `[reconfig]`: the reconfiguration agent (see `config::reconfig`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReconfig {
    /// "rigid" or "reconfigure".
    pub mode: Option<String>,
    pub sensitivity: Option<String>,
    pub role_poll: Option<String>,
    pub history: Option<String>,
    pub history_max: Option<String>,
    pub high_watermark: Option<f64>,
    pub low_watermark: Option<f64>,
    pub lock_lease: Option<String>,
    pub lock_skew: Option<String>,
    pub cooldown: Option<String>,
    /// A duration, or "off".
    pub manual_pin: Option<String>,
    /// A duration, or "off".
    pub loan_return: Option<String>,
    /// A duration, or "off".
    pub claim_horizon: Option<String>,
    /// Most nodes a hot site claims in one round.
    pub claim_batch: Option<i64>,
    /// A duration, or "off".
    pub guarantee_hold: Option<String>,
    /// A duration, or "off".
    pub guarantee_history: Option<String>,
    pub switch_timeout: Option<String>,
    pub rollback_backoff_max: Option<String>,
    /// Proxy id of the proxy whose window holds the site locks.
    pub lock_home: Option<i64>,
    pub window: Option<RawProxyWindow>,
    #[serde(default)]
    pub peer: Vec<RawPeerProxy>,
}

/// `[reconfig.window]`: this proxy's own window.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProxyWindow {
    /// Window file path under /dev/shm.
    pub shm: Option<String>,
    /// Tcp responder listen address.
    pub tcp: Option<String>,
    /// Verbs control port listen address (RDMA; exclusive with shm and tcp).
    pub verbs: Option<String>,
    /// Verbs only: RDMA device name (default: the first device).
    pub device: Option<String>,
}

/// `[[reconfig.peer]]`: another proxy's window.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPeerProxy {
    pub id: Option<i64>,
    /// "shm", "tcp" or "verbs".
    pub transport: Option<String>,
    /// Shm: window file path. Tcp: responder address. Verbs: the peer's
    /// verbs control address.
    pub window: Option<String>,
    /// Verbs only: the local RDMA device (default: the first device).
    pub device: Option<String>,
}

/// `[qos]`: the proxy-wide admission queue.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQos {
    pub max_inflight: Option<i64>,
    /// "virtualclock" or "fifo".
    pub dispatch: Option<String>,
    pub best_effort_floor: Option<f64>,
    pub max_queue: Option<i64>,
}
