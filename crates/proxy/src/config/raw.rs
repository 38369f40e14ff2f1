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

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGlobal {
    /// This proxy's id in the cluster: the owner field of site locks and claim
    /// records, so every proxy of a cluster needs its own. Accepted: 1 to 65535.
    ///
    /// Default: `1`.
    pub proxy_id: Option<i64>,
    /// How a node is picked within a site: `"roundrobin"`, `"leastconn"` (fewest
    /// requests in flight from this proxy), `"random"` (power of two random
    /// choices on in-flight counts), `"peak-ewma"` (power of two choices on this
    /// proxy's latency estimate times in-flight), `"weighted-least-load"` (lowest
    /// load index read from the nodes' windows; `[routing]`, `[weights]`),
    /// `"prequal"` (Prequal's reusable probes and hot-cold rule), `"hot-cold"`
    /// (the same rule on fresh window reads every request), `"shortest-wait"`
    /// (lowest expected wait from the app's queue and drain rate) or `"first"`
    /// (HAProxy's `balance first`: the first node in config order with a free
    /// slot under `max_inflight`, so the others can idle).
    /// docs/routing.md says which to choose. A site's own `balance` wins.
    ///
    /// Default: `"roundrobin"`. Example: `"weighted-least-load"`.
    pub balance: Option<String>,
    /// The site that serves requests whose Host (and path) match no site
    /// (HAProxy's `default_backend`). Without it such requests get 404.
    ///
    /// Default: none. Example: `"www"`.
    pub default_site: Option<String>,
    /// Worker threads of the data path, each with its own event loop accepting
    /// on every listener and its own idle connections to the nodes. Start-up
    /// only.
    ///
    /// Default: the number of CPUs. Example: `4`.
    pub workers: Option<i64>,
    /// On SIGTERM or SIGINT the proxy stops accepting at once and lets requests
    /// in flight finish for at most this long, then exits 0.
    ///
    /// Default: `"10s"`.
    pub shutdown_grace: Option<String>,
    /// `"stdout"`, `"off"` or a file path: one line per request in HAProxy's
    /// `option httplog` format (halog reads it; docs/proxy.md). Start-up only.
    ///
    /// Default: `"stdout"`. Example: `"/var/log/rdmalb/access.log"`.
    pub access_log: Option<String>,
    /// Added to requests and responses as `Via: 1.1 <via_name>`.
    ///
    /// Default: `"rdmalb"`.
    pub via_name: Option<String>,
    /// What happens to the X-Forwarded-For and Forwarded headers a request
    /// arrives with: `"replace"` drops them (the node sees only the address this
    /// proxy saw) unless the client is in `trusted_proxies`; `"append"` keeps and
    /// appends to every client's (HAProxy's `option forwardfor`), safe only when
    /// every client is a trusted proxy.
    ///
    /// Default: `"replace"`. Example: `"append"`.
    pub forwarded_for: Option<String>,
    /// Networks of the proxies in front of this one whose forwarding headers are
    /// kept and appended to (nginx's `set_real_ip_from`): `"10.0.0.0/8"`,
    /// `"::1/128"`, or one address. Only with `forwarded_for = "replace"`.
    ///
    /// Default: none. Example: `["10.0.0.0/8", "127.0.0.1/32"]`.
    pub trusted_proxies: Option<Vec<String>>,
    /// How many times one request may be sent again after a failed attempt, each
    /// time to a node it has not tried (HAProxy's `retries`). Accepted: 0 to 10.
    ///
    /// Default: `3`.
    pub retries: Option<i64>,
    /// Which failures are retried (HAProxy's `retry-on`): `"conn-failure"` (the
    /// connect failed, nothing was sent) and `"empty-response"` (the node's
    /// connection broke before a response head; idempotent requests without a
    /// body only). `[]` retries nothing. docs/proxy.md, "Retries".
    ///
    /// Default: `["conn-failure"]`. Example: `["conn-failure", "empty-response"]`.
    pub retry_on: Option<Vec<String>>,
    /// Percent of the worker threads' CPU above which responses go out
    /// uncompressed until the proxy's CPU use falls again (HAProxy's
    /// `maxcompcpuusage`). Only read when a site compresses. Accepted: 1 to 100.
    ///
    /// Default: `90`.
    pub compression_max_cpu: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// TCP connect to a node. A failed or timed-out connect is retried on
    /// another node of the site.
    ///
    /// Default: `"2s"`.
    pub connect: Option<String>,
    /// Client inactivity: while it sends its request body, or while it does not
    /// read the response. Start-up only.
    ///
    /// Default: `"30s"`.
    pub client: Option<String>,
    /// Node inactivity: waiting for the response head (from the last request-body
    /// chunk sent) and between response-body chunks; 504 before the head, a cut
    /// response after it.
    ///
    /// Default: `"30s"`.
    pub server: Option<String>,
    /// Time to receive a complete request head from its first byte (slowloris
    /// guard; 408), and the time a new connection may stay silent. Start-up only.
    ///
    /// Default: `"10s"`.
    pub http_request: Option<String>,
    /// Idle time allowed between requests on a kept-alive client connection; also
    /// the age after which an idle pooled node connection is not reused.
    /// Start-up only.
    ///
    /// Default: `"60s"`.
    pub keep_alive: Option<String>,
    /// Time a request may wait for a node slot (`limits.max_inflight_per_node`,
    /// `node.max_inflight`) or an admission slot (`qos.max_inflight`); then 503.
    ///
    /// Default: `"5s"`.
    pub queue: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Largest request head (request line and headers) accepted; larger gets 431.
    /// Accepted: 1024 to 1048576. Start-up only.
    ///
    /// Default: `16384`.
    pub max_header_bytes: Option<i64>,
    /// Most header fields in one request; more gets 431. Accepted: 8 to 1000.
    /// Start-up only.
    ///
    /// Default: `100`.
    pub max_headers: Option<i64>,
    /// Most concurrent client connections per listener; beyond, connections wait
    /// in the kernel's accept queue (HAProxy's `maxconn`). Start-up only.
    ///
    /// Default: `10000`.
    pub max_connections: Option<i64>,
    /// Most requests in flight from this proxy to one node (0 = unlimited);
    /// requests beyond wait up to `timeouts.queue`. A node's own `max_inflight`
    /// wins.
    ///
    /// Default: `0`. Example: `200`.
    pub max_inflight_per_node: Option<i64>,
    /// Idle keep-alive connections kept per node and per worker for reuse (0 =
    /// no pooling). Keep it at least at the requests one worker has in flight to
    /// one node at its peak.
    ///
    /// Default: `1024`.
    pub pool_idle_per_node: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    /// Active checks GET this path on every node, with the site's first exact
    /// host name as Host; 2xx and 3xx pass (or exactly `expect_status`). A site's
    /// `health_path` wins.
    ///
    /// Default: `"/"`. Example: `"/healthz"`.
    pub path: Option<String>,
    /// Time between two checks of a node.
    ///
    /// Default: `"2s"`.
    pub interval: Option<String>,
    /// A check that takes longer fails.
    ///
    /// Default: `"1s"`.
    pub timeout: Option<String>,
    /// Consecutive passed checks that bring a down node back up. Accepted: 1 to
    /// 100.
    ///
    /// Default: `2`.
    pub rise: Option<i64>,
    /// Consecutive failed checks that take an up node down. Accepted: 1 to 100.
    ///
    /// Default: `3`.
    pub fall: Option<i64>,
    /// Passive ejection: this many consecutive failed requests (connect failure,
    /// timeout, 5xx other than 503, protocol error) take a node down until `rise`
    /// checks pass; 0 switches it off. Accepted: 0 to 1000.
    ///
    /// Default: `3`.
    pub passive_failures: Option<i64>,
    /// The one status a check must get to pass (HAProxy's `http-check expect
    /// status`). Accepted: 100 to 599.
    ///
    /// Default: none (any 2xx or 3xx passes). Example: `200`.
    pub expect_status: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// The admin listener's address: `GET /stats`, `/status`, `/metrics` and the
    /// runtime API. They are open to anyone who can reach it: keep it on loopback
    /// or a management network.
    ///
    /// Default: none (required in `[admin]`). Example: `"127.0.0.1:9100"`.
    pub listen: Option<String>,
    /// A file holding the bearer token of the mutating calls (`rdmalb ctl`'s
    /// `set`, `move`): mode 0600, at least 32 visible characters, made with
    /// `rdmalb psk --out admin.token`. Without it mutations are refused with 403.
    ///
    /// Default: none. Example: `"admin.token"`.
    pub token_file: Option<String>,
    /// An address other hosts can reach (not loopback) needs `token_file` or this
    /// explicit yes (a management network only).
    ///
    /// Default: `false`.
    pub allow_remote_without_token: Option<bool>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    /// Pre-shared key file authenticating the `tcp` and `verbs` window transports;
    /// required when a node or peer uses one. It must hold a key made by
    /// `rdmalb psk --out FILE` (256 random bits, mode 0600).
    ///
    /// Default: none. Example: `"/etc/rdmalb/cluster.psk"`.
    pub psk_file: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWeights {
    /// Weight of CPU utilisation (0..1) in the load index. Weights are numbers
    /// from 0, relative (they need not sum to 1), not all 0.
    ///
    /// Default: `0.35`.
    pub cpu: Option<f64>,
    /// Weight of runnable tasks, normalised as r/(r+4).
    ///
    /// Default: `0.15`.
    pub run_queue: Option<f64>,
    /// Weight of memory used (0..1).
    ///
    /// Default: `0.05`.
    pub memory: Option<f64>,
    /// Weight of rx+tx bytes/s, normalised as b/(b+125e6).
    ///
    /// Default: `0.1`.
    pub network: Option<f64>,
    /// Weight of connections to the app, normalised as c/(c+64).
    ///
    /// Default: `0.1`.
    pub connections: Option<f64>,
    /// Weight of interrupts/s, normalised as i/(i+50000).
    ///
    /// Default: `0.05`.
    pub irq: Option<f64>,
    /// Weight of the app's own (busy+queue)/capacity, at most 4.
    ///
    /// Default: `0.2`.
    pub app: Option<f64>,
    /// Weight of this proxy's requests in flight to the node, f/(f+8).
    ///
    /// Default: `0.2`.
    pub inflight: Option<f64>,
}

/// `[routing]`; see [`super::types::Routing`].
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    /// Nodes compared per request ("power of d choices"): 2 to 64, or `"all"`.
    /// 16 compares every node of a site of up to 16 nodes.
    ///
    /// Default: `16`. Example: `"all"`.
    #[schemars(with = "Option<rdmalb_base::reference::IntOrText>")]
    pub candidates: Option<toml::Value>,
    /// When loads are read: `"per-request"` (each decision reads its candidates'
    /// windows, concurrently) or `"interval:<duration>"` (a background reader
    /// refreshes a snapshot every duration, 1ms to 60s).
    ///
    /// Default: by transport, `"per-request"` for shm and verbs, `"interval:50ms"`
    /// for tcp. Example: `"interval:50ms"`.
    pub load_read: Option<String>,
    /// Bound on one decision's window reads (at most 1s): a node whose read misses
    /// it is scored from its in-flight count alone.
    ///
    /// Default: `"5ms"`.
    pub read_deadline: Option<String>,
    /// A load block published longer ago than this (at most 1h) is stale and the
    /// node is scored from in-flight only; hosts' clocks must agree (NTP).
    ///
    /// Default: `"250ms"`.
    pub staleness: Option<String>,
    /// `shortest-wait` only: time constant of the drain rates measured from the
    /// windows' completion counters (1ms to 10s).
    ///
    /// Default: `"50ms"`.
    pub drain_window: Option<String>,
    /// Add this proxy's requests sent to a node after its block was published to
    /// the node's busy workers and queue: `"count"` or `"ignore"`.
    ///
    /// Default: `"count"`. Example: `"ignore"`.
    pub unseen: Option<String>,
    /// `shortest-wait` only: rank a node whose queue is nearly full (as the app
    /// publishes its limit) after every node with room: `"avoid"` or `"ignore"`.
    ///
    /// Default: `"avoid"`. Example: `"ignore"`.
    pub full_queue: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    /// The listener's name in the access log, metrics and rules' `listeners`.
    ///
    /// Default: `listener<N>` (its position). Example: `"web"`.
    pub name: Option<String>,
    /// The address to listen on.
    ///
    /// Default: none (required). Example: `"0.0.0.0:8080"`.
    pub listen: Option<String>,
    /// TLS on this listener: certificate/key pairs chosen by SNI, HTTP/2 by ALPN,
    /// client certificates. With `[acme]` it may have no certificate of its own
    /// (`tls = {}`): it serves those ordered for the sites with `acme = true`.
    pub tls: Option<RawTls>,
    /// Every connection must start with a PROXY protocol v1 or v2 header (before
    /// TLS), whose source address becomes the client address (HAProxy's
    /// `accept-proxy`). Needs `accept_proxy_from`.
    ///
    /// Default: `false`.
    pub accept_proxy: Option<bool>,
    /// The peers allowed to send a PROXY header, as networks; a connection from
    /// any other peer is closed at once. `["0.0.0.0/0", "::/0"]` trusts every peer.
    ///
    /// Default: none (required with `accept_proxy`). Example: `["10.0.0.0/24"]`.
    pub accept_proxy_from: Option<Vec<String>>,
    /// A path the proxy answers itself (HAProxy's `monitor-uri`): 200 while it
    /// serves, 503 once it drains or while `monitor_fail` holds.
    ///
    /// Default: none. Example: `"/haproxy_test"`.
    pub monitor_uri: Option<String>,
    /// When `monitor_uri` answers 503, e.g. `monitor_fail = { site = "shop",
    /// serving_below = 1 }`.
    pub monitor_fail: Option<RawMonitorFail>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMonitorFail {
    /// The site whose nodes are counted.
    ///
    /// Default: none (required). Example: `"shop"`.
    pub site: Option<String>,
    /// `monitor_uri` answers 503 while the site has fewer nodes serving than this
    /// (HAProxy's `monitor fail if { nbsrv(shop) lt 1 }`).
    ///
    /// Default: `1`.
    pub serving_below: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// A certificate and its key (PEM); the first pair serves clients that send
    /// no name or an unknown one.
    #[serde(default)]
    pub certificates: Vec<RawCertPair>,
    /// Offer HTTP/2 by ALPN (`false`: HTTP/1.1 only). Cleartext listeners
    /// serve HTTP/2 with prior knowledge and HTTP/1.1 whatever this says.
    ///
    /// Default: `true`. Example: `false`.
    pub h2: Option<bool>,
    /// Client certificates (mTLS): the CA file they must chain to (HAProxy's
    /// `ca-file`).
    ///
    /// Default: none. Example: `"certs/clients-ca.pem"`.
    pub client_ca: Option<String>,
    /// Client certificates: `"required"` refuses a client without one,
    /// `"optional"` lets rules test it (`fetch = "client_cert"`), `"none"` does
    /// not ask (HAProxy's `verify`). With `client_ca`, say `"required"` or
    /// `"optional"`.
    ///
    /// Default: `"none"`. Example: `"optional"`.
    pub verify: Option<String>,
    /// A PEM file of certificate revocation lists for client certificates
    /// (HAProxy's `crl-file`).
    ///
    /// Default: none. Example: `"certs/clients.crl"`.
    pub crl: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCertPair {
    /// A PEM certificate chain. The pair is chosen by SNI among the certificates'
    /// names; the first pair serves clients that send no name or an unknown one.
    ///
    /// Default: none (required). Example: `"certs/example.com.pem"`.
    pub cert: Option<String>,
    /// Its PEM private key (PKCS#8, PKCS#1 or SEC1).
    ///
    /// Default: none (required). Example: `"certs/example.com.key"`.
    pub key: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSite {
    /// The site's name: 1 to 64 of a-z A-Z 0-9 . _ -; `idle` is reserved for the
    /// idle pool.
    ///
    /// Default: none (required). Example: `"shop"`.
    pub name: Option<String>,
    /// Host names the site answers: exact names first, then wildcards
    /// (`"*.example.com"`, the longest suffix wins), then `"*"` (any host).
    /// The Host (or `:authority`) is lower-cased and its port removed.
    ///
    /// Default: `[]`. Example: `["shop.example.com", "*.shop.example.com"]`.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Within a matching host, the longest path prefix wins; a site without
    /// prefixes takes every path.
    ///
    /// Default: `[]` (all paths). Example: `["/api/"]`.
    #[serde(default)]
    pub path_prefixes: Vec<String>,
    /// Higher is more important (0 to 1000): a site short of its guarantee may
    /// take busy nodes of strictly lower-priority sites; idle nodes go to any hot
    /// site (docs/reconfiguration.md).
    ///
    /// Default: `0`. Example: `10`.
    pub priority: Option<i64>,
    /// Guaranteed throughput in requests/s for the whole cluster (0 = best
    /// effort); each proxy accounts for its share. The agent never takes a node a
    /// site needs for its guarantee.
    ///
    /// Default: `0.0`. Example: `500.0`.
    pub guarantee: Option<f64>,
    /// The fewest nodes the reconfiguration agent leaves this site. Accepted: 0
    /// to 10000.
    ///
    /// Default: `1`.
    pub min_nodes: Option<i64>,
    /// The most nodes the reconfiguration agent gives this site. Accepted: 0 to
    /// 10000.
    ///
    /// Default: `10000`.
    pub max_nodes: Option<i64>,
    /// The site's own load-index weights (the keys of `[weights]`); each key set
    /// here wins over `[weights]`, e.g. `weights = { cpu = 0.6, app = 0.3 }`.
    pub weights: Option<RawWeights>,
    /// The path health checks GET on this site's nodes; wins over `health.path`.
    ///
    /// Default: `health.path`. Example: `"/api/health"`.
    pub health_path: Option<String>,
    /// Response compression (docs/proxy.md, "Compression"); without this table
    /// the site's responses go out as the nodes sent them.
    pub compression: Option<super::compression::RawCompression>,
    /// The site's own balancing: a policy of `global.balance`'s list, or a hash
    /// key: `"source"`, `"uri"`, `"hdr"`, `"url_param"` or `"cookie"` (the same
    /// node for the same key as HAProxy 2.6; docs/balancing.md).
    ///
    /// Default: `global.balance`. Example: `"uri"`.
    pub balance: Option<String>,
    /// HAProxy's `hash-type` and the hash key's options (only with a hash
    /// `balance`; docs/balancing.md).
    pub hash: Option<super::balancing::RawHash>,
    /// Sticky sessions (HAProxy's `cookie`); each node's value is its `cookie`.
    /// A session leaves a node whose load index stays above `max_load` for
    /// `max_load_for`, or that drains.
    pub sticky: Option<super::balancing::RawSticky>,
    /// Order a certificate for the site's exact host names (`[acme]`,
    /// docs/tls.md).
    ///
    /// Default: `false`. Example: `true`.
    pub acme: Option<bool>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    /// The node's name (metrics, logs, `rdmalb ctl`); a sidecar's `node` must
    /// equal it.
    ///
    /// Default: none (required). Example: `"web1"`.
    pub name: Option<String>,
    /// The app's address.
    ///
    /// Default: none (required). Example: `"10.0.0.11:80"`.
    pub address: Option<String>,
    /// The site the node serves at start-up, or `"idle"` for the idle pool the
    /// reconfiguration agent draws from.
    ///
    /// Default: `"idle"`. Example: `"www"`.
    pub site: Option<String>,
    /// How the node's load window is read: `"shm"` (same host: the window file),
    /// `"tcp"` (the sidecar's responder; needs `cluster.psk_file`) or `"verbs"`
    /// (RDMA). Without it the node has no window.
    ///
    /// Default: none. Example: `"shm"`.
    pub transport: Option<String>,
    /// Where the window is: shm, the window file path; tcp, the responder's
    /// address; verbs, the sidecar's control address.
    ///
    /// Default: none (required with `transport`). Example: `"/dev/shm/rdmalb-n1"`.
    pub sidecar: Option<String>,
    /// Verbs only: the RDMA device.
    ///
    /// Default: none (the first device). Example: `"mlx5_0"`.
    pub device: Option<String>,
    /// The sidecar's `node_id` (1 to 65535): a window whose header names another
    /// node is refused.
    ///
    /// Default: none (not checked). Example: `41`.
    pub node_id: Option<i64>,
    /// Active health checks (HAProxy's `check`). `false`: the node is assumed up
    /// and failed requests do not eject it.
    ///
    /// Default: `true`. Example: `false`.
    pub check: Option<bool>,
    /// `"v1"` or `"v2"`: every connection to the node, health checks included,
    /// starts with a PROXY protocol header naming the client (HAProxy's
    /// `send-proxy`, `send-proxy-v2`); such connections are not pooled.
    ///
    /// Default: none. Example: `"v2"`.
    pub send_proxy: Option<String>,
    /// The node's share of its site's requests, 0 to 256 (0: none; HAProxy's
    /// `weight`). `rdmalb ctl set node NAME weight N` changes it at run time.
    ///
    /// Default: `1`. Example: `3`.
    pub weight: Option<i64>,
    /// Starts in maintenance, with no requests and no checks, until `rdmalb ctl
    /// set node NAME state ready` (HAProxy's `disabled`).
    ///
    /// Default: `false`. Example: `true`.
    pub disabled: Option<bool>,
    /// Caps the node's requests in flight (HAProxy's server `maxconn`); wins over
    /// `limits.max_inflight_per_node`.
    ///
    /// Default: `limits.max_inflight_per_node`. Example: `200`.
    pub max_inflight: Option<i64>,
    /// Used only while no non-backup node of the site can take requests.
    ///
    /// Default: `false`. Example: `true`.
    pub backup: Option<bool>,
    /// HAProxy's agent-check: the TCP port of the node's agent (an rdmalb
    /// sidecar's `[agent_check]`). Every `agent_interval` one line such as
    /// `up ready 75%` sets the weight, the state and `maxconn`.
    ///
    /// Default: none (no agent). Example: `9999`.
    pub agent_port: Option<i64>,
    /// Agent-check interval (HAProxy's `agent-inter`).
    ///
    /// Default: `"2s"`.
    pub agent_interval: Option<String>,
    /// Agent-check address (HAProxy's `agent-addr`).
    ///
    /// Default: the node's IP. Example: `"10.0.0.11"`.
    pub agent_address: Option<String>,
    /// The node's value of its site's sticky cookie (HAProxy's server `cookie`;
    /// `site.sticky`).
    ///
    /// Default: none. Example: `"s1"`.
    pub cookie: Option<String>,
}

/// `[reconfig]`: the reconfiguration agent (see `config::reconfig`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawReconfig {
    /// `"rigid"` (the agent never moves a node; `rdmalb ctl move` still does) or
    /// `"reconfigure"`. Over-provisioning is `"rigid"` with every site given the
    /// nodes its worst case needs.
    ///
    /// Default: `"rigid"`. Example: `"reconfigure"`.
    pub mode: Option<String>,
    /// S: how often the agent reads every node's load and role word.
    ///
    /// Default: `"200ms"`.
    pub sensitivity: Option<String>,
    /// How often routing re-reads every node's role word (at most S): a node
    /// another proxy claimed stops getting its old site's requests within this
    /// time.
    ///
    /// Default: `"10ms"`, or S when S is shorter. Example: `"5ms"`.
    pub role_poll: Option<String>,
    /// T: a site is hot only after its load stayed above `high_watermark` in every
    /// round for this long (at least S).
    ///
    /// Default: `"1s"`.
    pub history: Option<String>,
    /// Each site's T adapts between `history` and this (equal: T is fixed).
    ///
    /// Default: 4 x `history`. Example: `"4s"`.
    pub history_max: Option<String>,
    /// A site whose mean node load stays above this is hot (1.0 = fully used;
    /// above 0, at most 100).
    ///
    /// Default: `0.8`.
    pub high_watermark: Option<f64>,
    /// A node under this load may be given away (below `high_watermark`).
    ///
    /// Default: `0.2`.
    pub low_watermark: Option<f64>,
    /// A site lock is held for at most this long (at least 2s).
    ///
    /// Default: `"2s"`.
    pub lock_lease: Option<String>,
    /// An expired lock is taken over only this long after its deadline (at least
    /// 500ms; add the clock skew between proxies).
    ///
    /// Default: `"500ms"`.
    pub lock_skew: Option<String>,
    /// A node that moved is not moved again for this long (may be `"0s"`).
    ///
    /// Default: `"5s"`.
    pub cooldown: Option<String>,
    /// A node an operator moved (`rdmalb ctl move node`) is pinned there this
    /// long, until `release node`: at most 30d, or `"off"`.
    ///
    /// Default: `"1h"`.
    pub manual_pin: Option<String>,
    /// A node claimed away from its home site goes home once the site it serves
    /// has been cool this long: at least `sensitivity`, or `"off"`.
    ///
    /// Default: `history`. Example: `"1s"`.
    pub loan_return: Option<String>,
    /// A hot site claims only if its burst is expected to last at least this much
    /// longer, or `"off"` (T alone decides).
    ///
    /// Default: `cooldown`. Example: `"5s"`.
    pub claim_horizon: Option<String>,
    /// The most nodes a hot site short by several claims in one round. Accepted:
    /// 1 to 64.
    ///
    /// Default: `4`.
    pub claim_batch: Option<i64>,
    /// A guaranteed site gives away none of the nodes its guarantee needed at its
    /// peak until its need has stayed lower this long: at least `sensitivity`, or
    /// `"off"`.
    ///
    /// Default: `history`. Example: `"1s"`.
    pub guarantee_hold: Option<String>,
    /// A site short of its guarantee in every round for this long claims the
    /// nodes its guarantee needs at once: at least `sensitivity`, or `"off"`.
    ///
    /// Default: `sensitivity`. Example: `"200ms"`.
    pub guarantee_history: Option<String>,
    /// A node SWITCHING for longer than this is overdue: sent back to the site it
    /// serves while its sidecar lives, shown parked in `/status` otherwise.
    ///
    /// Default: `"30s"`.
    pub switch_timeout: Option<String>,
    /// A node that keeps failing to apply a role is rolled back at once the first
    /// time, then after S, 2S, 4S, ... up to this.
    ///
    /// Default: `"1m"`.
    pub rollback_backoff_max: Option<String>,
    /// The proxy id whose window holds the site locks.
    ///
    /// Default: the lowest id among this proxy and its peers. Example: `1`.
    pub lock_home: Option<i64>,
    /// This proxy's own window (its shared update counters, and the site locks
    /// when it is the lock home), served to the peers. Required with peers in
    /// `"reconfigure"` mode; without it the window is private.
    pub window: Option<RawProxyWindow>,
    /// Another proxy of the cluster (one entry each): its id and how to reach its
    /// window.
    #[serde(default)]
    pub peer: Vec<RawPeerProxy>,
}

/// `[reconfig.window]`: this proxy's own window.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProxyWindow {
    /// A window file under /dev/shm for peers on this host.
    ///
    /// Default: none. Example: `"/dev/shm/rdmalb-proxy-1"`.
    pub shm: Option<String>,
    /// A tcp responder's listen address (needs `cluster.psk_file`).
    ///
    /// Default: none. Example: `"10.0.0.1:7100"`.
    pub tcp: Option<String>,
    /// The verbs control port's listen address (RDMA; not with `shm` or `tcp`:
    /// NIC atomics would race the CPU's).
    ///
    /// Default: none. Example: `"10.0.0.1:7102"`.
    pub verbs: Option<String>,
    /// Verbs only: the RDMA device.
    ///
    /// Default: none (the first device). Example: `"mlx5_0"`.
    pub device: Option<String>,
}

/// `[[reconfig.peer]]`: another proxy's window.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPeerProxy {
    /// The peer's `global.proxy_id`.
    ///
    /// Default: none (required). Example: `2`.
    pub id: Option<i64>,
    /// How its window is reached: `"shm"`, `"tcp"` or `"verbs"`.
    ///
    /// Default: none (required). Example: `"tcp"`.
    pub transport: Option<String>,
    /// Shm: the window file path. Tcp: the responder's address. Verbs: the peer's
    /// verbs control address.
    ///
    /// Default: none (required). Example: `"10.0.0.2:7100"`.
    pub window: Option<String>,
    /// Verbs only: the local RDMA device.
    ///
    /// Default: none (the first device). Example: `"mlx5_0"`.
    pub device: Option<String>,
}

/// `[qos]`: the proxy-wide admission queue.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQos {
    /// Most requests this proxy forwards at once, all sites together (0 = no
    /// limit, no admission queue). Beyond, each site queues and a freed slot goes
    /// by VirtualClock tag (Vtick = 1 / guarantee). Accepted: 0 to 1000000.
    ///
    /// Default: `0`. Example: `512`.
    pub max_inflight: Option<i64>,
    /// `"virtualclock"`, or `"fifo"` (arrival order across sites, for
    /// comparison).
    ///
    /// Default: `"virtualclock"`. Example: `"fifo"`.
    pub dispatch: Option<String>,
    /// Requests/s a site without a guarantee is scheduled at, so it is never
    /// starved under overload. Above 0.
    ///
    /// Default: `10.0`.
    pub best_effort_floor: Option<f64>,
    /// Requests one site may have waiting for a slot; beyond, 503 at once.
    /// Accepted: 1 to 1000000.
    ///
    /// Default: `1024`.
    pub max_queue: Option<i64>,
}
