//! Runtime state shared by every connection: the current [`Snapshot`]
//! (config, routing table, backends, pools, metric handles) behind an
//! `ArcSwap`, swapped whole on reload so a request sees one consistent
//! view from start to end while readers never lock.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::HeaderValue;

use super::access_log::AccessLogger;
use super::headers::ClientId;
use super::io::ConnShared;
use super::route::RouteTable;
use super::stats::Stats;
use super::upstream::Pools;
use crate::balance::{Backends, NodeWindows};
use crate::config::Config;
use crate::qos::admission::{Admission, SiteSlots};

/// Everything a request needs from one config generation.
#[derive(Debug)]
pub struct Snapshot {
    pub config: Arc<Config>,
    pub backends: Arc<Backends>,
    pub routes: RouteTable,
    pub pools: Pools,
    pub stats: Stats,
    /// `Via` values added to requests, by received version: HTTP/1.0,
    /// HTTP/1.1, HTTP/2.
    pub via_request: [HeaderValue; 3],
    /// `Via` added to responses (the node always speaks HTTP/1.1 to us).
    pub via_response: HeaderValue,
    pub site_names: Vec<Arc<str>>,
    pub node_names: Vec<Arc<str>>,
    /// The `[qos]` admission queue, carried from snapshot to snapshot.
    pub admission: Arc<Admission>,
    /// Each site's queue in [`admission`](Self::admission), by site index.
    pub qos_slots: SiteSlots,
    /// Whether nodes can change site (some node has a sidecar window):
    /// then a request without a body may be sent again from the head it
    /// was sent from (borrowed, not copied) to another node if the first
    /// answers 421 (it moved meanwhile).
    pub roles_move: bool,
    /// Whether some node has `send_proxy` (connections on wildcard
    /// listeners then look up the address they were accepted on).
    pub sends_proxy: bool,
}

impl Snapshot {
    /// Builds the snapshot; `backends` must have been built from `config`.
    pub fn build(
        config: Arc<Config>,
        backends: Arc<Backends>,
        previous: Option<&Snapshot>,
    ) -> Snapshot {
        let via = |v: &str| {
            HeaderValue::from_str(&format!("{v} {}", config.global.via_name))
                .unwrap_or_else(|_| HeaderValue::from_static("1.1 rdmalb"))
        };
        let (admission, qos_slots) = match previous {
            Some(p) => (Arc::clone(&p.admission), p.admission.configure(&config)),
            None => Admission::new(&config),
        };
        if let Some(p) = previous {
            // A reload keeps the counters of a table defined the same.
            for t in &config.rules.tables {
                if let Some(old) = p.config.rules.table(&t.name) {
                    t.adopt(old);
                }
            }
        }
        Snapshot {
            admission,
            qos_slots,
            roles_move: config.nodes.iter().any(|n| n.window.is_some()),
            sends_proxy: config.nodes.iter().any(|n| n.send_proxy.is_some()),
            routes: RouteTable::build(&config),
            pools: Pools::build(&config, previous.map(|p| &p.pools)),
            stats: Stats::build(&config, previous.map(|p| &p.stats)),
            via_request: [via("1.0"), via("1.1"), via("2")],
            via_response: via("1.1"),
            site_names: config
                .sites
                .iter()
                .map(|s| Arc::from(s.name.as_str()))
                .collect(),
            node_names: config
                .nodes
                .iter()
                .map(|n| Arc::from(n.name.as_str()))
                .collect(),
            backends,
            config,
        }
    }
}

/// Proxy-wide runtime state.
#[derive(Debug)]
pub struct Runtime {
    pub snapshot: ArcSwap<Snapshot>,
    /// The same config and backends, shared with the admin listener and the
    /// health checker.
    pub config: Arc<ArcSwap<Config>>,
    pub backends: Arc<ArcSwap<Backends>>,
    pub access: AccessLogger,
    /// Connections to the nodes' windows, carried across reloads.
    pub windows: Arc<NodeWindows>,
    /// Client connections open on the process (HAProxy's `actconn`).
    pub connections: AtomicUsize,
    /// A new process took over (restart): HTTP/1 responses from now on
    /// carry `Connection: close` and their connections close after them.
    pub handed_over: AtomicBool,
    /// The process is stopping (SIGTERM, SIGINT, a restart): `monitor-uri`
    /// answers 503 from now on.
    pub draining: AtomicBool,
    /// The proxy's CPU use, for the compression cap
    /// (`global.compression_max_cpu`).
    pub cpu: super::compress::CpuUse,
    /// `[acme]`: the certificates the proxy orders and the challenge
    /// answers (http-01 is answered in `forward::request_filter`).
    pub acme: Option<Arc<crate::acme::Acme>>,
}

impl Runtime {
    /// Installs a new snapshot everywhere.
    pub fn store(&self, snapshot: Snapshot) {
        self.config.store(Arc::clone(&snapshot.config));
        self.backends.store(Arc::clone(&snapshot.backends));
        self.snapshot.store(Arc::new(snapshot));
    }
}

/// One client connection.
#[derive(Debug)]
pub struct ConnCtx {
    pub proxy: Arc<Runtime>,
    /// The client's address: the peer's, or the one its PROXY header
    /// carried on an `accept_proxy` listener.
    pub client: SocketAddr,
    /// The address the client connected to (likewise), for the PROXY
    /// header of `send_proxy` nodes.
    pub local: SocketAddr,
    pub listener: Arc<str>,
    /// Client connections open on the listener (HAProxy's `feconn`).
    pub listener_connections: Arc<AtomicUsize>,
    /// The listener's totals for `show stat`'s FRONTEND row.
    pub frontend: Arc<super::listener::FrontendCounters>,
    pub tls: bool,
    /// Forwarding-header text for this client, formatted once.
    pub client_id: ClientId,
    pub conn: Arc<ConnShared>,
    /// What the TLS handshake told (SNI, client certificate), set once it
    /// completed; unset on plain connections.
    pub tls_info: std::sync::OnceLock<TlsInfo>,
    /// The stick-table entries the connection's requests tracked last
    /// (`track-sc` rules; empty until one runs).
    pub stick: crate::rules::stick::track::Recent,
}

/// What a TLS handshake told about the client, for rule conditions.
#[derive(Debug, Clone, Default)]
pub struct TlsInfo {
    /// The server name the client asked for (SNI).
    pub sni: Option<Box<str>>,
    pub cert: crate::rules::ClientCert,
}
