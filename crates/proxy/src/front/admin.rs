//! The admin listener: `GET /metrics` (Prometheus text exposition),
//! `GET /status` (JSON: proxy, sites, nodes with health and in-flight, and
//! the reconfiguration agent's roles and counters), `GET /stats` (an HTML
//! page that polls `/status`, [`stats_page`]) and `POST /reconfig/move`
//! ([`reconfig`]).
//! Format documented in `docs/operations.md`.
//!
//! A small HTTP/1.1 server, separate from the data path and meant for
//! loopback or a management network: bounded connections with one slot
//! kept for token-bearing callers, head, write and idle deadlines and a
//! bound on requests per connection ([`conn`]), 404 for any other path. `/metrics`, `/status` and `/stats` take
//! `GET` and `HEAD` (405 otherwise) and need no credentials; the one mutating call,
//! `POST /reconfig/move`, goes through [`guard`]: a bearer token from
//! `[admin] token_file` (refused with 403 when none is configured) and no
//! request a browser could send for another site. It reads the same
//! `ArcSwap`s the data path swaps on reload, so it always shows the config
//! in force.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::balance::{Backends, ControlSnapshot, HealthSnapshot, NodeWindows, TrafficSnapshot};
use crate::qos::admission::{Admission, AdmissionStatus};

pub use crate::balance::node_windows::LoadStatus;
use crate::config::{Config, HostPattern};
use crate::reconfig::{Agent, AgentStatus};

pub mod conn;
pub mod ctl;
pub mod guard;
pub mod reconfig;
pub mod runtime;
pub mod socket;
pub mod stats_page;

/// HAProxy's CSV export of its stats page (`<stats uri>;csv`): `show
/// stat` without a token, like `/status`.
pub const STATS_CSV: &str = "/stats;csv";

/// What the admin listener reads. Cheap to clone.
#[derive(Clone)]
pub struct AdminState {
    pub config: Arc<ArcSwap<Config>>,
    pub backends: Arc<ArcSwap<Backends>>,
    pub metrics: PrometheusHandle,
    /// Process start, for `/status` uptime.
    pub started_at: SystemTime,
    /// The reconfiguration agent, when the proxy runs one.
    pub reconfig: Option<Arc<Agent>>,
    /// The nodes' window connections (last load read and index per node).
    pub windows: Option<Arc<NodeWindows>>,
    /// The `[qos]` admission queue (one per process, carried across
    /// reloads).
    pub admission: Option<Arc<Admission>>,
    /// The listeners' connection counters: `show stat`'s FRONTEND rows.
    pub frontends: Vec<super::listener::FrontendStats>,
    /// `[acme]`: the certificates ordered (`acme` in /status, `acme
    /// status` and `acme renew` commands).
    pub acme: Option<Arc<crate::acme::Acme>>,
    /// The TLS listeners' certificate files, as read at start-up
    /// (`tls_files` in /status).
    pub file_certs: Vec<super::tls::FileCert>,
}

impl AdminState {
    pub fn new(
        config: Arc<ArcSwap<Config>>,
        backends: Arc<ArcSwap<Backends>>,
        metrics: PrometheusHandle,
    ) -> Self {
        AdminState {
            config,
            backends,
            metrics,
            started_at: SystemTime::now(),
            reconfig: None,
            windows: None,
            admission: None,
            frontends: Vec::new(),
            acme: None,
            file_certs: Vec::new(),
        }
    }

    /// Shows the TLS listeners' certificate files in /status.
    pub fn with_file_certs(mut self, certs: Vec<super::tls::FileCert>) -> Self {
        self.file_certs = certs;
        self
    }

    /// Shows the ACME certificates in /status and the `acme` commands.
    pub fn with_acme(mut self, acme: Option<Arc<crate::acme::Acme>>) -> Self {
        self.acme = acme;
        self
    }

    /// Shows the listeners as FRONTEND rows in `show stat`.
    pub fn with_frontends(mut self, frontends: Vec<super::listener::FrontendStats>) -> Self {
        self.frontends = frontends;
        self
    }

    /// Shows the admission queue (slots in use, requests waiting per site)
    /// in /status.
    pub fn with_admission(mut self, admission: Arc<Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Adds the reconfiguration agent (roles in `/status`, admin moves).
    pub fn with_reconfig(mut self, agent: Arc<Agent>) -> Self {
        self.reconfig = Some(agent);
        self
    }

    /// Shows each node's window connection and last load read in /status.
    pub fn with_windows(mut self, windows: Arc<NodeWindows>) -> Self {
        self.windows = Some(windows);
        self
    }
}

impl AdminState {
    /// Whole seconds since the process started (`/status`, `show info`).
    pub fn uptime_secs(&self) -> u64 {
        SystemTime::now()
            .duration_since(self.started_at)
            .map_or(0, |d| d.as_secs())
    }
}

impl std::fmt::Debug for AdminState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminState")
            .field("started_at", &self.started_at)
            .finish_non_exhaustive()
    }
}

/// `/status` document.
#[derive(Debug, Serialize)]
pub struct Status {
    pub proxy_id: u16,
    pub config_file: String,
    /// Seconds since the Unix epoch when the config in force was loaded.
    pub loaded_at_unix: u64,
    /// The same instant as an HTTP date.
    pub loaded_at: String,
    pub uptime_seconds: u64,
    /// When this document was made (Unix milliseconds): rates are
    /// differences of totals between two documents over the difference of
    /// this field.
    pub generated_at_unix_ms: u64,
    pub balance: &'static str,
    pub sites: Vec<SiteStatus>,
    pub nodes: Vec<NodeStatus>,
    /// Roles, site loads, update counters and agent counters (absent when
    /// the proxy runs no agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconfig: Option<AgentStatus>,
    /// The `[qos]` admission queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<AdmissionStatus>,
    /// `[acme]`: each certificate ordered, its expiry, schedule and last
    /// error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acme: Option<Vec<crate::acme::CertStatus>>,
    /// The certificate files of the TLS listeners: names, issuer, expiry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_files: Vec<super::tls::FileCertStatus>,
}

#[derive(Debug, Serialize)]
pub struct SiteStatus {
    pub index: usize,
    pub name: String,
    pub hosts: Vec<String>,
    pub path_prefixes: Vec<String>,
    pub priority: u32,
    /// Guaranteed requests/s (0 = best effort).
    pub guarantee: f64,
    pub min_nodes: usize,
    pub max_nodes: usize,
    pub health_path: String,
    /// Names of the nodes serving the site, in config order.
    pub nodes: Vec<String>,
    pub nodes_up: usize,
    /// Nodes assigned to the site now (their role word's site, else their
    /// configured one), applied or not.
    pub nodes_assigned: usize,
    /// Of those, the ones taking its new requests: role applied, up, ready
    /// with a non-zero weight.
    pub nodes_serving: usize,
    /// The site's balancing: its policy (its own `balance`, else the
    /// global one) or its hash key (`source`, `uri`, `hdr`, …).
    pub balance: &'static str,
    /// The name of the site's sticky cookie (`[site.sticky]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_cookie: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub index: usize,
    pub name: String,
    pub address: String,
    /// Site served, `null` for the idle pool.
    pub site: Option<String>,
    /// `"up"` or `"down"` (health; see `admin_state` for drain and maint).
    pub state: &'static str,
    pub inflight: usize,
    /// Administrative state, weight, backup, own cap and the agent's say
    /// (`admin_state`, `admin_source`, `weight`, `initial_weight`,
    /// `weight_source`, `backup`, `agent_down`, `max_inflight`).
    #[serde(flatten)]
    pub control: ControlSnapshot,
    /// What the node served: requests by class, errors, bytes, peak
    /// in-flight, requests per second.
    pub traffic: TrafficSnapshot,
    /// Site the node is assigned to now: its role word's once the agent
    /// read one, else `site` (`null` = idle pool).
    pub assigned_site: Option<String>,
    /// Whether its sidecar has applied that role (always true without a
    /// role word).
    pub role_applied: bool,
    pub health: HealthSnapshot,
    /// The node's window and its last load read (`null` without a window).
    pub load: Option<LoadStatus>,
}

fn pattern_text(p: &HostPattern) -> String {
    match p {
        HostPattern::Exact(h) => h.clone(),
        HostPattern::Wildcard(suffix) => format!("*{suffix}"),
    }
}

/// Builds the `/status` document from the snapshots in force.
pub fn status(state: &AdminState) -> Status {
    let config = state.config.load();
    let backends = state.backends.load();
    let loaded = backends.built_at();
    let sites = backends
        .sites()
        .iter()
        .map(|sb| {
            // Config and backends are swapped one after the other on reload;
            // match by name so a scrape in between never mislabels a site.
            let site = config.site_by_name(&sb.name);
            SiteStatus {
                index: sb.index,
                name: sb.name.clone(),
                hosts: site.map_or_else(Vec::new, |s| s.hosts.iter().map(pattern_text).collect()),
                path_prefixes: site.map_or_else(Vec::new, |s| s.path_prefixes.clone()),
                priority: site.map_or(0, |s| s.priority),
                guarantee: site.map_or(0.0, |s| s.guarantee),
                min_nodes: site.map_or(0, |s| s.min_nodes),
                max_nodes: site.map_or(0, |s| s.max_nodes),
                health_path: sb.health_path.clone(),
                nodes: sb.nodes().iter().map(|n| n.name.clone()).collect(),
                nodes_up: sb.nodes().iter().filter(|n| n.is_up()).count(),
                nodes_assigned: backends
                    .nodes()
                    .iter()
                    .filter(|n| n.assigned_site() == Some(sb.index))
                    .count(),
                nodes_serving: backends
                    .nodes()
                    .iter()
                    .filter(|n| n.admits() && n.serves(sb.index))
                    .count(),
                balance: backends.site_balance(sb.index),
                sticky_cookie: backends.sticky(sb.index).map(|s| s.cookie.clone()),
            }
        })
        .collect();
    let nodes = backends
        .nodes()
        .iter()
        .map(|n| {
            let health = n.health();
            NodeStatus {
                index: n.index,
                name: n.name.clone(),
                address: n.address.to_string(),
                site: n.site_name.clone(),
                state: if health.up { "up" } else { "down" },
                inflight: n.inflight(),
                control: n.control(),
                traffic: n.traffic(),
                assigned_site: n
                    .assigned_site()
                    .and_then(|s| backends.sites().get(s))
                    .map(|s| s.name.clone()),
                role_applied: n.role_applied(),
                health,
                load: state
                    .windows
                    .as_ref()
                    .and_then(|w| w.node(n.index))
                    .filter(|w| w.node == n.name)
                    .map(|w| w.status()),
            }
        })
        .collect();
    Status {
        proxy_id: config.global.proxy_id,
        config_file: config.source.display().to_string(),
        loaded_at_unix: rdmalb_base::time::unix_secs(loaded),
        loaded_at: httpdate::fmt_http_date(loaded),
        uptime_seconds: state.uptime_secs(),
        generated_at_unix_ms: rdmalb_base::time::unix_now_ms(),
        balance: backends.balance(),
        sites,
        nodes,
        reconfig: state.reconfig.as_ref().map(|a| a.status()),
        qos: state.admission.as_ref().map(|a| a.status()),
        acme: state.acme.as_ref().map(|a| a.status()),
        tls_files: {
            let now = SystemTime::now();
            state.file_certs.iter().map(|c| c.status(now)).collect()
        },
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Answers one admin request.
pub fn handle<B>(state: &AdminState, req: &Request<B>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path != "/metrics" && path != "/status" && path != STATS_CSV && path != stats_page::PATH {
        return text(
            StatusCode::NOT_FOUND,
            "not found (try /stats, /metrics, /status, /stats;csv, POST /runtime or POST /reconfig/move)\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed (GET or HEAD)\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == stats_page::PATH {
        return stats_page::page();
    }
    let (body, content_type) = if path == STATS_CSV {
        let rows = runtime::stat::rows(state);
        (
            Bytes::from(runtime::stat::csv(&rows)),
            "text/csv; charset=utf-8",
        )
    } else if path == "/metrics" {
        // node_up is kept by the checker on every change; refreshing it here
        // makes it right even for a node no check has run on yet.
        for node in state.backends.load().nodes() {
            node.publish_up();
        }
        (
            Bytes::from(state.metrics.render()),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    } else {
        match serde_json::to_vec_pretty(&status(state)) {
            Ok(mut v) => {
                v.push(b'\n');
                (Bytes::from(v), "application/json")
            }
            Err(e) => {
                // Only non-finite floats can fail; never expected from a
                // validated config, but never panic on it either.
                tracing::error!(error = %e, "cannot serialize /status");
                return text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot serialize status\n",
                );
            }
        }
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Serves the admin endpoints on `listener` until `shutdown` turns true (or
/// its sender is dropped); open connections finish their current request.
pub async fn serve(listener: TcpListener, state: AdminState, shutdown: watch::Receiver<bool>) {
    serve_with(listener, state, shutdown, conn::Limits::default()).await
}

/// [`serve`] with other bounds (tests shorten the deadlines).
pub async fn serve_with(
    listener: TcpListener,
    state: AdminState,
    mut shutdown: watch::Receiver<bool>,
    limits: conn::Limits,
) {
    let slots = conn::Slots::new(&limits);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(address = %addr, "admin listener: /stats, /metrics, /status");
    }
    loop {
        let (permit, slot) = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            p = slots.acquire() => match p {
                Some(p) => p,
                None => break, // semaphore closed: never happens, but stop cleanly
            },
        };
        let accepted = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            // The socket stopped listening for a drain.
            Err(_) if *shutdown.borrow() => break,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "admin listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // The address this connection came in on: the admin listener's own
        // origin for the cross-origin check of mutating calls.
        let local = match stream.local_addr() {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(peer = %peer, error = %e, "admin connection lost before serving");
                continue;
            }
        };
        if slot == conn::Slot::Reserved {
            tracing::warn!(peer = %peer, "admin listener: every open slot is busy; this connection is served only with the admin token");
            ::metrics::counter!("rdmalb_admin_reserved_connections_total").increment(1);
        }
        let connection = connection(stream, state.clone(), local, slot, limits, shutdown.clone());
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = connection.await {
                tracing::debug!(peer = %peer, error = %e, "admin connection ended with an error");
            }
        });
    }
}

/// Serves one admin connection within `limits` ([`conn`]).
async fn connection(
    stream: tokio::net::TcpStream,
    state: AdminState,
    local: std::net::SocketAddr,
    slot: conn::Slot,
    limits: conn::Limits,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
    let in_flight = Arc::new(conn::InFlight::default());
    let served = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let svc_in_flight = Arc::clone(&in_flight);
    let svc = service_fn(move |req: Request<Incoming>| {
        let state = state.clone();
        let mark = svc_in_flight.start();
        let n = served.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        async move {
            let _mark = mark;
            let mut resp = if slot == conn::Slot::Reserved
                && guard::refusal(&state, &req, local).is_some()
            {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "admin listener busy: every connection slot is in use; only a request with the admin token (Authorization: Bearer) is served now\n",
                )
            } else {
                match req.uri().path() {
                    reconfig::MOVE_PATH => reconfig::move_node(&state, &req, local).await,
                    runtime::PATH => runtime::serve(&state, req, local).await,
                    _ => handle(&state, &req),
                }
            };
            if slot == conn::Slot::Reserved || n >= limits.requests {
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let head = match slot {
        conn::Slot::Open => limits.head,
        conn::Slot::Reserved => limits.reserved_head,
    };
    let io = conn::Deadlined::new(stream, limits, in_flight);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head)
        .serve_connection(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        _ = rdmalb_base::shutdown::requested(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}

#[cfg(test)]
mod tests;
