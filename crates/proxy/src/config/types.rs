//! The validated, immutable proxy configuration the runtime uses.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

mod reconfig;
mod routing;
pub use reconfig::*;
pub use routing::*;

pub use super::stats_socket::{Level, StatsEndpoint, StatsSocket};

/// A validated proxy configuration snapshot.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this was read from.
    pub source: PathBuf,
    pub global: Global,
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub health: HealthCheck,
    pub admin: Option<Admin>,
    pub cluster: Cluster,
    /// `[routing]`: options of the `weighted-least-load` policy.
    pub routing: Routing,
    pub listeners: Vec<Listener>,
    /// Sites in config order: the position is the site index used in role
    /// words, site locks and update counters, so it is the cluster's site table.
    pub sites: Vec<Site>,
    /// Nodes in config order; the position is the node index.
    pub nodes: Vec<Node>,
    /// `[reconfig]`: the reconfiguration agent.
    pub reconfig: Reconfig,
    /// `[qos]`: the proxy-wide admission queue.
    pub qos: Qos,
    /// `[[stats_socket]]`: HAProxy's stats sockets.
    pub stats_sockets: Vec<StatsSocket>,
    /// `[[acl]]`, `[[map]]`, `[[request_rule]]`, `[[site_rule]]`,
    /// `[[response_rule]]`, `[[userlist]]`, `[[error_page]]`, compiled.
    pub rules: std::sync::Arc<crate::rules::Rules>,
    /// `[acme]`: certificates ordered by the proxy (docs/tls.md).
    pub acme: Option<super::acme::Acme>,
}

impl Config {
    /// Site names in config order (the shared site table).
    pub fn site_names(&self) -> Vec<&str> {
        self.sites.iter().map(|s| s.name.as_str()).collect()
    }

    pub fn site_by_name(&self, name: &str) -> Option<&Site> {
        self.sites.iter().find(|s| s.name == name)
    }

    /// Nodes that serve `site` at start-up.
    pub fn nodes_of(&self, site: usize) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.site == Some(site))
    }
}

/// `[global]`
#[derive(Debug, Clone)]
pub struct Global {
    /// This proxy's id in the cluster (non-zero, 16 bits): owner field of
    /// site locks and claim records.
    pub proxy_id: u16,
    pub balance: Balance,
    /// Index of the site that serves requests whose Host matches no site;
    /// `None` answers 404.
    pub default_site: Option<usize>,
    /// Worker threads of the async runtime (default: number of CPUs).
    pub workers: usize,
    /// How long SIGTERM/SIGINT waits for in-flight requests before closing.
    pub shutdown_grace: Duration,
    /// Access log destination.
    pub access_log: AccessLog,
    /// Value of the `Via` header the proxy adds (`1.1 <via_name>`).
    pub via_name: String,
    /// What becomes of the `X-Forwarded-For` / `Forwarded` a client sends.
    pub forwarded_for: ForwardedFor,
    /// Peers whose `X-Forwarded-For` / `Forwarded` are kept (appended to)
    /// under [`ForwardedFor::Replace`]: the proxies in front of this one.
    pub trusted_proxies: Vec<IpNetwork>,
    /// How many times one request may be sent again after a failed attempt
    /// (connect failure, or an empty response when `retry_on` allows it).
    pub retries: u8,
    /// Which failed attempts are retried.
    pub retry_on: RetryOn,
    /// Percent of the worker threads' CPU (1–100) above which new
    /// responses are sent uncompressed (HAProxy's `maxcompcpuusage`).
    pub compression_max_cpu: u32,
}

impl Global {
    /// Whether the `X-Forwarded-For` / `Forwarded` headers a request from
    /// `client` arrives with are kept (this proxy appends its element) rather
    /// than replaced by the client's own address.
    pub fn keeps_forwarded(&self, client: IpAddr) -> bool {
        match self.forwarded_for {
            ForwardedFor::Append => true,
            ForwardedFor::Replace => self.trusted_proxies.iter().any(|n| n.contains(client)),
        }
    }
}

/// Largest `global.retries`: each retry goes to a node not tried yet, and
/// a request remembers its tried nodes on the stack.
pub const MAX_RETRIES: u64 = 10;

/// `global.retry_on`: which failed attempts are sent again, HAProxy's
/// `retry-on` keywords. A 421 from a node that moved to another site is
/// replayed whatever this says (docs/reconfiguration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryOn {
    /// `conn-failure`: the connection to the node could not be made
    /// (nothing was sent, so any method).
    pub conn_failure: bool,
    /// `empty-response`: the node's connection broke (reset, closed) before
    /// a response head; only idempotent requests without a body (RFC 9110
    /// section 9.2.2), which the proxy keeps a copy of to send again.
    pub empty_response: bool,
}

impl RetryOn {
    pub const ACCEPTED: &'static str = "\"conn-failure\" or \"empty-response\"";
    /// The default, HAProxy's: `conn-failure` only. `empty-response`
    /// costs a copy of every idempotent request head without a body
    /// (docs/proxy.md, "Retries").
    pub const DEFAULT: RetryOn = RetryOn {
        conn_failure: true,
        empty_response: false,
    };
    /// Both conditions.
    pub const BOTH: RetryOn = RetryOn {
        conn_failure: true,
        empty_response: true,
    };

    /// Sets the keyword `k`; false when it is not one.
    pub fn set(&mut self, k: &str) -> bool {
        match k {
            "conn-failure" => self.conn_failure = true,
            "empty-response" => self.empty_response = true,
            _ => return false,
        }
        true
    }
}

/// `global.forwarded_for`: what becomes of the `X-Forwarded-For` and
/// `Forwarded` headers a request arrives with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardedFor {
    /// Kept from clients in `global.trusted_proxies` (the client's address
    /// is appended), replaced by the client's address for every other
    /// client, so a client cannot make the node believe it is someone else.
    Replace,
    /// Kept from every client, the client's address appended (HAProxy's
    /// `option forwardfor`, nginx's `$proxy_add_x_forwarded_for`): only
    /// when every client is a trusted proxy.
    Append,
}

impl ForwardedFor {
    pub const ACCEPTED: &'static str = "\"replace\" or \"append\"";

    pub fn parse(s: &str) -> Option<ForwardedFor> {
        match s {
            "replace" => Some(ForwardedFor::Replace),
            "append" => Some(ForwardedFor::Append),
            _ => None,
        }
    }
}

/// An IP network (`10.0.0.0/8`, `::1/128`) of `global.trusted_proxies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNetwork {
    addr: IpAddr,
    prefix: u8,
}

impl IpNetwork {
    /// Parses `address/prefix` or a bare address (one host). Refuses a
    /// prefix longer than the address and an address with bits set after
    /// the prefix (`10.0.0.1/8` is most likely a typo for a host or for
    /// `10.0.0.0/8`); the error says what is wrong.
    pub fn parse(text: &str) -> Result<IpNetwork, String> {
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| format!("`{addr_text}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix_text {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("`/{p}` is not a prefix length from 0 to {max}")),
            },
        };
        let net = IpNetwork { addr, prefix };
        if net.first() != addr {
            return Err(format!(
                "`{addr}` has bits set after the /{prefix} prefix (the network is `{}/{prefix}`)",
                net.first()
            ));
        }
        Ok(net)
    }

    /// The network's first address (its address with the host bits cleared).
    fn first(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask32(self.prefix)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask128(self.prefix)).into()),
        }
    }

    /// Whether `ip` is in the network; an IPv4-mapped IPv6 address counts
    /// as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => u32::from(a) & mask32(self.prefix) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(a)) => u128::from(a) & mask128(self.prefix) == u128::from(n),
            _ => false,
        }
    }
}

impl std::fmt::Display for IpNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

/// Balancing algorithm for picking a node within a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    RoundRobin,
    LeastConn,
    /// Power of two random choices on in-flight counts.
    Random,
    /// Lowest load index over `routing.candidates` nodes, from their
    /// windows' load blocks plus this proxy's in-flight counts.
    WeightedLeastLoad,
    /// Power of two choices on this proxy's peak-EWMA latency × in-flight
    /// (Finagle, Linkerd).
    PeakEwma,
    /// Prequal (NSDI 2024): asynchronous reusable probes of the nodes'
    /// windows in a pool, hot-cold lexicographic choice.
    Prequal,
    /// Prequal's hot-cold rule on fresh window reads of `routing.candidates`
    /// nodes on every request.
    HotCold,
    /// The lowest expected wait over `routing.candidates` nodes: the
    /// requests ahead of a new one over the node's drain rate, measured
    /// from its window (`balance::drain`).
    ShortestWait,
    /// HAProxy's `balance first`: the first node in config order with a
    /// free in-flight slot (`max_inflight`, HAProxy's `maxconn`).
    First,
}

impl Balance {
    pub const ACCEPTED: &'static str =
        "\"roundrobin\", \"leastconn\", \"random\", \"peak-ewma\", \"weighted-least-load\", \"prequal\", \"hot-cold\", \"shortest-wait\" or \"first\"";

    pub fn parse(s: &str) -> Option<Balance> {
        match s {
            "roundrobin" => Some(Balance::RoundRobin),
            "leastconn" => Some(Balance::LeastConn),
            "random" => Some(Balance::Random),
            "weighted-least-load" => Some(Balance::WeightedLeastLoad),
            "peak-ewma" => Some(Balance::PeakEwma),
            "prequal" => Some(Balance::Prequal),
            "hot-cold" => Some(Balance::HotCold),
            "shortest-wait" => Some(Balance::ShortestWait),
            "first" => Some(Balance::First),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Balance::RoundRobin => "roundrobin",
            Balance::LeastConn => "leastconn",
            Balance::Random => "random",
            Balance::WeightedLeastLoad => "weighted-least-load",
            Balance::PeakEwma => "peak-ewma",
            Balance::Prequal => "prequal",
            Balance::HotCold => "hot-cold",
            Balance::ShortestWait => "shortest-wait",
            Balance::First => "first",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLog {
    Off,
    Stdout,
    File(PathBuf),
}

/// `[timeouts]` (HAProxy names in brackets).
#[derive(Debug, Clone)]
pub struct Timeouts {
    /// TCP connect to a node (`timeout connect`).
    pub connect: Duration,
    /// Client inactivity while sending the body or reading the response
    /// (`timeout client`).
    pub client: Duration,
    /// Wait for the node's response headers and between body chunks
    /// (`timeout server`).
    pub server: Duration,
    /// Time to receive complete request headers; slowloris guard
    /// (`timeout http-request`); answered with 408.
    pub http_request: Duration,
    /// Idle time allowed between requests on a kept-alive client connection
    /// (`timeout http-keep-alive`).
    pub keep_alive: Duration,
    /// Time a request may wait for a free upstream slot (`timeout queue`).
    pub queue: Duration,
}

/// `[limits]`
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line + headers) accepted; larger → 431.
    pub max_header_bytes: usize,
    /// Most header fields in one request; more → 431.
    pub max_headers: usize,
    /// Most concurrent client connections per listener.
    pub max_connections: usize,
    /// Most requests in flight to one node (0 = unlimited); requests beyond
    /// wait up to `timeouts.queue`.
    pub max_inflight_per_node: usize,
    /// Idle pooled connections kept per node.
    pub pool_idle_per_node: usize,
}

/// `[health]`: active checks and passive ejection.
#[derive(Debug, Clone)]
pub struct HealthCheck {
    /// Default HTTP path probed (sites may override with `health_path`).
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    /// Consecutive successful checks to bring a node up.
    pub rise: u32,
    /// Consecutive failed checks to take a node down.
    pub fall: u32,
    /// Consecutive failed requests (connect failure or 5xx) that eject a node
    /// passively (0 disables passive ejection).
    pub passive_failures: u32,
    /// The status a check must get to pass (HAProxy's `http-check expect
    /// status`); `None`: any 2xx or 3xx.
    pub expect_status: Option<u16>,
}

/// `[admin]`: metrics and status listener.
#[derive(Debug, Clone)]
pub struct Admin {
    pub listen: SocketAddr,
    /// File holding the bearer token that mutating calls
    /// (`POST /reconfig/move`) must present; without it they are refused.
    pub token_file: Option<PathBuf>,
}

/// `[[listener]]`
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub listen: SocketAddr,
    pub tls: Option<Tls>,
    /// Every connection must start with a PROXY protocol header (v1 or v2,
    /// HAProxy's `bind ... accept-proxy`); the address it carries is the
    /// client's. A connection without a valid one is closed.
    pub accept_proxy: bool,
    /// With `accept_proxy`: the peers (networks) allowed to send that
    /// header; a connection from any other peer is closed before a byte is
    /// read, so no client can claim another's address.
    pub accept_proxy_from: Vec<IpNetwork>,
    /// HAProxy's `monitor-uri`: a request for exactly this path and query
    /// is answered by the proxy itself, 200 while it serves, 503 once it
    /// drains (`front::monitor`).
    pub monitor_uri: Option<String>,
    /// HAProxy's `monitor fail if { nbsrv(<site>) lt <n> }`: the monitor
    /// URI also answers 503 while fewer than `serving_below` nodes serve
    /// `site` (up, ready, weight above 0, role applied).
    pub monitor_fail: Option<MonitorFail>,
}

/// See [`Listener::monitor_fail`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorFail {
    pub site: String,
    pub serving_below: usize,
}

/// TLS on a listener: one or more certificates, chosen by SNI.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The first pair is the default for clients that send no (or an
    /// unknown) server name.
    pub certificates: Vec<CertPair>,
    /// Offer HTTP/2 by ALPN (default true).
    pub h2: bool,
    /// Client certificates (mTLS), HAProxy's `ca-file`, `verify`,
    /// `crl-file`.
    pub client_auth: Option<ClientAuth>,
}

/// `tls.client_ca`, `tls.verify`, `tls.crl` of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAuth {
    pub ca: PathBuf,
    /// `verify = "required"`: a client without a certificate is refused
    /// in the handshake; `"optional"`: it may connect without one (a
    /// certificate it sends must still verify, as HAProxy's).
    pub required: bool,
    pub crl: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A host-name pattern of a site: exact, or `*.example.com` which matches
/// any name ending in `.example.com` (not `example.com` itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    Exact(String),
    /// Holds the suffix including the leading dot: `.example.com`.
    Wildcard(String),
}

impl HostPattern {
    /// `host` must already be lower-case and without a port.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Wildcard(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
        }
    }
}

/// The seven indices a node's window yields for the load index
/// (docs/routing.md, "The load index"), by name: what one load sample
/// normalises to (`balance::load::Normalised` is this type) and the weight
/// each of them gets ([`LoadWeights::window`]), so the two cannot drift
/// apart.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct LoadIndices {
    pub cpu: f64,
    pub run_queue: f64,
    pub memory: f64,
    pub network: f64,
    pub connections: f64,
    pub irq: f64,
    pub app: f64,
}

impl LoadIndices {
    /// `Σ self_k · other_k`: the weighted sum of `other`'s indices when
    /// `self` holds weights (or the other way round).
    pub fn dot(&self, other: &LoadIndices) -> f64 {
        self.cpu * other.cpu
            + self.run_queue * other.run_queue
            + self.memory * other.memory
            + self.network * other.network
            + self.connections * other.connections
            + self.irq * other.irq
            + self.app * other.app
    }

    /// The indices with their config names, in the order of `[weights]`.
    pub fn named(&self) -> [(&'static str, f64); 7] {
        [
            ("cpu", self.cpu),
            ("run_queue", self.run_queue),
            ("memory", self.memory),
            ("network", self.network),
            ("connections", self.connections),
            ("irq", self.irq),
            ("app", self.app),
        ]
    }
}

/// Per-site load-index weights (docs/routing.md, "The load index"); each multiplies one
/// normalised index (see `balance::load` and docs/routing.md). Relative:
/// they need not sum to 1, only their ratios matter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadWeights {
    /// The weights of the window's indices.
    pub window: LoadIndices,
    /// This proxy's own requests in flight to the node.
    pub inflight: f64,
}

impl Default for LoadWeights {
    fn default() -> Self {
        LoadWeights {
            window: LoadIndices {
                cpu: 0.35,
                run_queue: 0.15,
                memory: 0.05,
                network: 0.1,
                connections: 0.1,
                irq: 0.05,
                app: 0.2,
            },
            inflight: 0.2,
        }
    }
}

/// `[[site]]`
#[derive(Debug, Clone)]
pub struct Site {
    pub index: usize,
    pub name: String,
    pub hosts: Vec<HostPattern>,
    /// Path prefixes this site serves on its hosts (empty = all paths).
    pub path_prefixes: Vec<String>,
    /// Higher is more important.
    pub priority: u32,
    /// Guaranteed throughput in requests/s (0 = best effort).
    pub guarantee: f64,
    pub min_nodes: usize,
    pub max_nodes: usize,
    pub weights: LoadWeights,
    pub health_path: String,
    /// `[site.compression]`; `None`: nothing is compressed.
    pub compression: Option<super::compression::Compression>,
    /// `[[site]] balance` and `[site.hash]` (`config::balancing`).
    pub balance: super::balancing::SiteBalance,
    /// `[site.sticky]`; `None`: no sticky cookie.
    pub sticky: Option<super::balancing::Sticky>,
    /// `acme = true`: the names (its exact hosts) the proxy orders one
    /// certificate for; empty without it.
    pub acme_names: Vec<String>,
}

/// Where a node's (or a peer proxy's) window is read from: the window
/// crate's [`rdmalb_window::Endpoint`].
pub use rdmalb_window::Endpoint as WindowEndpoint;

/// `[[node]]`
#[derive(Debug, Clone)]
pub struct Node {
    pub index: usize,
    pub name: String,
    /// The backend application's HTTP address.
    pub address: SocketAddr,
    /// Site served at start-up; `None` = idle pool.
    pub site: Option<usize>,
    /// The node sidecar's window, if it runs one.
    pub window: Option<WindowEndpoint>,
    /// The sidecar's `node_id`: when set, a window whose header names
    /// another node is refused.
    pub node_id: Option<u16>,
    /// Whether active health checks run (HAProxy's `server ... check`).
    /// Without them the node is assumed up: neither checks nor failed
    /// requests take it down, as HAProxy never marks down a server without
    /// `check`. Default `true`, unlike HAProxy: rdmalb has always checked
    /// every node, and configs written for that keep their meaning.
    pub check: bool,
    /// PROXY protocol header sent first on every connection to the node,
    /// health checks included (HAProxy's `send-proxy`, `send-proxy-v2`).
    pub send_proxy: Option<SendProxy>,
    /// Share of the site's requests relative to the other nodes, 0..=256
    /// (HAProxy's `weight`; 0 takes no new requests). Default 1.
    pub weight: u32,
    /// Starts in maintenance (HAProxy's `disabled`): no requests, no checks
    /// until `rdmalb ctl set node NAME state ready`.
    pub disabled: bool,
    /// This node's cap on requests in flight (HAProxy's server `maxconn`),
    /// replacing `limits.max_inflight_per_node` for it.
    pub max_inflight: Option<usize>,
    /// Takes requests only while no non-backup node of its site can
    /// (HAProxy's `backup`; every backup shares the load then).
    pub backup: bool,
    /// HAProxy's agent-check: where and how often the node's agent is asked.
    pub agent: Option<AgentCheck>,
    /// The site's sticky cookie value for this node (HAProxy's server
    /// `cookie`); without one the node never pins a client.
    pub cookie: Option<String>,
}

impl Node {
    /// The weight a node has without `weight` (HAProxy's default).
    pub const DEFAULT_WEIGHT: u32 = 1;
    /// The largest weight (HAProxy's limit).
    pub const MAX_WEIGHT: u32 = 256;
}

/// `[[node]] agent_port`, `agent_interval`, `agent_address`: HAProxy's
/// `agent-check agent-port P agent-inter T agent-addr A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentCheck {
    pub address: SocketAddr,
    pub interval: Duration,
}

/// `[[node]] send_proxy`: the PROXY protocol version a node is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendProxy {
    /// The text header (`send-proxy`).
    V1,
    /// The binary header (`send-proxy-v2`).
    V2,
}

impl SendProxy {
    pub const ACCEPTED: &'static str = "\"v1\" or \"v2\"";

    pub fn parse(s: &str) -> Option<SendProxy> {
        match s {
            "v1" => Some(SendProxy::V1),
            "v2" => Some(SendProxy::V2),
            _ => None,
        }
    }
}

/// Cluster-wide settings shared by proxies and sidecars.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Pre-shared key file for the tcp and verbs control transports.
    pub psk_file: Option<PathBuf>,
}

/// `[qos]`: a proxy-wide limit on requests forwarded at once, with a queue
/// per site dispatched in VirtualClock order when the limit is reached
/// (`qos::admission`, docs/operations.md "The admission queue", seed 004 section 3).
#[derive(Debug, Clone, PartialEq)]
pub struct Qos {
    /// Requests in flight to nodes, all sites together (0 = no limit and
    /// no queue). Requests beyond wait up to `timeouts.queue`.
    pub max_inflight: usize,
    pub dispatch: Dispatch,
    /// Rate (requests/s) a site without a guarantee is scheduled at, so
    /// best-effort sites keep a share under overload.
    pub best_effort_floor: f64,
    /// Requests one site may have waiting; beyond, 503 at once.
    pub max_queue: usize,
}

impl Default for Qos {
    fn default() -> Self {
        Qos {
            max_inflight: 0,
            dispatch: Dispatch::VirtualClock,
            best_effort_floor: 10.0,
            max_queue: 1024,
        }
    }
}

impl Qos {
    /// A site's scheduled rate in requests/s: its guarantee, or the floor.
    pub fn rate_of(&self, site: &Site) -> f64 {
        if site.guarantee > 0.0 {
            site.guarantee
        } else {
            self.best_effort_floor
        }
    }
}

/// Order in which queued requests get a freed slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// Smallest virtual finish tag first: each site gets slots in
    /// proportion to its rate (guarantee or best-effort floor).
    VirtualClock,
    /// Arrival order across all sites (what a single shared queue does).
    Fifo,
}

impl Dispatch {
    pub const ACCEPTED: &'static str = "\"virtualclock\" or \"fifo\"";

    pub fn as_str(self) -> &'static str {
        match self {
            Dispatch::VirtualClock => "virtualclock",
            Dispatch::Fifo => "fifo",
        }
    }
}
