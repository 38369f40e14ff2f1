//! Active health checks: one background loop per node, HTTP GET of the
//! site's `health_path` every `health.interval`, feeding the node's rise/fall
//! state machine ([`NodeState::record_check`]).
//!
//! A check opens a fresh TCP connection (as HAProxy's `option httpchk` does,
//! so a node that stops accepting connections is noticed even while pooled
//! connections still work), sends `GET <path>` with `Host` set to the site's
//! first exact host name (or the node's address) and `Connection: close`,
//! and passes on a 2xx or 3xx status received within `health.timeout`
//! (connect + response head). Nodes in the idle pool are checked with the
//! global `[health] path`, so the reconfiguration agent knows which idle
//! nodes are usable.
//!
//! Loops follow reloads: a supervisor watches the `ArcSwap<Backends>` (and a
//! [`HealthChecks::resync`] nudge), starts loops for new nodes and stops the
//! loops of removed ones; a node kept across the reload keeps its loop and
//! its state, and picks up the new path, Host, interval and thresholds on its
//! next round. A node whose role is newly applied (the reconfiguration
//! agent moved it to another site) is checked at once, not at its next
//! interval: it is routed only after passing checks of its new site.
//! A node with `check = false` keeps an idle loop that probes
//! nothing (it is assumed up, see `node`). Every loop takes the shutdown watch and stops cleanly
//! (mini-redis `shutdown.rs` style).
//!
//! The same supervisor keeps the agent-check loops ([`super::agent_check`]):
//! it runs every [`NodeLoop`] kind it is given for the nodes that want it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use rand::Rng;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::node_loop::NodeLoop;
use super::{AdminState, Backends, NodeState, Transition};
use crate::config::SendProxy;

/// Gauge `rdmalb_node_up{node,site}`: 1 up, 0 down (or removed).
pub const NODE_UP: &str = "rdmalb_node_up";

/// Counter `rdmalb_health_checks_total{node,result}` (pass, fail).
pub const HEALTH_CHECKS: &str = "rdmalb_health_checks_total";

/// How often the supervisor looks for a new `Backends` snapshot when nobody
/// calls [`HealthChecks::resync`]. A pointer comparison, so cheap.
const RESCAN: Duration = Duration::from_millis(250);

/// Why one check failed. The `Display` text is what `/status` shows as the
/// node's last check error.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("connect failed: {0}")]
    Connect(#[source] std::io::Error),
    #[error("no connection within {}", rdmalb_base::duration::format(*.0))]
    ConnectTimeout(Duration),
    #[error("no response within {}", rdmalb_base::duration::format(*.0))]
    Timeout(Duration),
    #[error("HTTP error: {0}")]
    Http(#[source] hyper::Error),
    #[error("bad check request: {0}")]
    Request(#[source] http::Error),
    #[error("status {}", .0.as_u16())]
    Status(StatusCode),
}

impl CheckError {
    /// The failure in HAProxy's words.
    pub fn status(&self) -> CheckStatus {
        match self {
            CheckError::Connect(_) => CheckStatus::L4Con,
            CheckError::ConnectTimeout(_) => CheckStatus::L4Tout,
            CheckError::Timeout(_) => CheckStatus::L7Tout,
            CheckError::Http(_) => CheckStatus::L7Rsp,
            CheckError::Request(_) => CheckStatus::Unknown,
            CheckError::Status(_) => CheckStatus::L7Sts,
        }
    }
}

/// How a node's last active check ended, as HAProxy names it: `show
/// stat`'s `check_status` and `check_desc`, `show servers state`'s
/// `srv_check_status` (HAProxy's `HCHK_STATUS_*`). The statuses of an HTTP
/// check (`option httpchk`), the only kind rdmalb runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// The check itself could not be made (a request that cannot be built).
    Unknown,
    /// The connection was refused or failed.
    L4Con,
    /// No connection within the timeout.
    L4Tout,
    /// The response's status passed.
    L7Ok,
    /// Connected, no response within the timeout.
    L7Tout,
    /// The response was not valid HTTP.
    L7Rsp,
    /// The response's status failed.
    L7Sts,
}

impl CheckStatus {
    /// `check_status`.
    pub fn as_str(self) -> &'static str {
        Self::haproxy(Some(self)).status
    }

    /// HAProxy's words for a checked node whose last check ended `last`
    /// (`None`: none has yet, `INI`); its table is `check_statuses[]` in
    /// `check.c`, the numbers `HCHK_STATUS_*` in `check-t.h`.
    pub fn haproxy(last: Option<CheckStatus>) -> HaproxyCheck {
        let (status, description, code) = match last {
            None => ("INI", "Initializing", 1),
            Some(CheckStatus::Unknown) => ("UNK", "Unknown", 0),
            Some(CheckStatus::L4Con) => ("L4CON", "Layer4 connection problem", 8),
            Some(CheckStatus::L4Tout) => ("L4TOUT", "Layer4 timeout", 7),
            Some(CheckStatus::L7Ok) => ("L7OK", "Layer7 check passed", 15),
            Some(CheckStatus::L7Tout) => ("L7TOUT", "Layer7 timeout", 12),
            Some(CheckStatus::L7Rsp) => ("L7RSP", "Layer7 invalid response", 13),
            Some(CheckStatus::L7Sts) => ("L7STS", "Layer7 wrong status", 17),
        };
        HaproxyCheck {
            status,
            description,
            code,
        }
    }
}

/// A check's end in HAProxy's words ([`CheckStatus::haproxy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaproxyCheck {
    /// `show stat`'s `check_status`.
    pub status: &'static str,
    /// `show stat`'s `check_desc`.
    pub description: &'static str,
    /// `show servers state`'s `srv_check_status`.
    pub code: u8,
}

impl serde::Serialize for CheckStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One HTTP check of `addr`: `GET path` with `Host: host`, passing on 2xx/3xx
/// within `timeout` (on exactly `expect` when given, HAProxy's `http-check
/// expect status`). Returns the status on a pass. A node with `send_proxy`
/// is first sent a PROXY header for no client (v1 `UNKNOWN`, v2 `LOCAL`),
/// as HAProxy's checks do, so a node that requires the header accepts them.
pub async fn check_once(
    addr: SocketAddr,
    host: &str,
    path: &str,
    timeout: Duration,
    send_proxy: Option<SendProxy>,
    expect: Option<u16>,
) -> Result<StatusCode, CheckError> {
    // One deadline for the connect and the response head; which of the two
    // it cut is told apart (HAProxy's L4TOUT and L7TOUT).
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
        Ok(r) => r.map_err(CheckError::Connect)?,
        Err(_) => return Err(CheckError::ConnectTimeout(timeout)),
    };
    match tokio::time::timeout_at(
        deadline,
        check_inner(stream, host, path, send_proxy, expect),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(CheckError::Timeout(timeout)),
    }
}

async fn check_inner(
    mut stream: TcpStream,
    host: &str,
    path: &str,
    send_proxy: Option<SendProxy>,
    expect: Option<u16>,
) -> Result<StatusCode, CheckError> {
    if let Some(version) = send_proxy {
        stream
            .write_all(crate::proxy_protocol::encode_local(version))
            .await
            .map_err(CheckError::Connect)?;
    }
    // Best effort: a check is one small request, Nagle only delays it.
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(CheckError::Http)?;
    let req = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::HOST, host)
        .header(header::CONNECTION, "close")
        .header(header::USER_AGENT, "rdmalb-health")
        .body(Empty::<Bytes>::new())
        .map_err(CheckError::Request)?;
    let mut conn = std::pin::pin!(conn);
    let mut response = std::pin::pin!(sender.send_request(req));
    // Drive the connection here rather than spawning it, so everything the
    // check owns ends with it (timeout included). If the connection future
    // finishes first, the response (or its error) is already decided.
    let resp = tokio::select! {
        biased;
        r = &mut response => r,
        _ = &mut conn => response.await,
    }
    .map_err(CheckError::Http)?;
    let status = resp.status();
    let pass = match expect {
        Some(code) => status.as_u16() == code,
        None => status.is_success() || status.is_redirection(),
    };
    if pass {
        Ok(status)
    } else {
        Err(CheckError::Status(status))
    }
}

/// Handle on the running checkers (health checks and agent-checks).
#[derive(Debug)]
pub struct HealthChecks {
    supervisor: JoinHandle<()>,
    resync: Arc<Notify>,
}

impl HealthChecks {
    /// Makes the supervisor look at the current `Backends` now (call after
    /// storing a new snapshot; otherwise it notices within a quarter second).
    pub fn resync(&self) {
        self.resync.notify_one();
    }

    /// Waits until the supervisor and every node loop have stopped (after the
    /// shutdown watch turned true or its sender was dropped).
    pub async fn join(self) {
        let _ = self.supervisor.await;
    }
}

/// The active health check: every node, whatever its `check` (a node with
/// `check = false` keeps an idle loop, so switching checks on finds it).
pub(crate) const HEALTH_LOOP: NodeLoop = NodeLoop {
    what: "health check",
    wanted: |_, _| true,
    spawn: |node, backends, shutdown| tokio::spawn(node_loop(node, backends, shutdown)),
    // Zero the gauge so a removed node does not keep reporting "up".
    stopped: |node, _| set_up_gauge(node, false),
};

/// Starts the active checker and the agent-checks: one loop per node of the
/// current snapshot and of every later one stored in `backends` (an
/// agent-check loop only for nodes with `agent_port`). Stops when `shutdown`
/// becomes `true` (or its sender is dropped). Must be called inside a Tokio
/// runtime.
pub fn spawn_checks(
    backends: Arc<ArcSwap<Backends>>,
    shutdown: watch::Receiver<bool>,
) -> HealthChecks {
    let resync = Arc::new(Notify::new());
    let supervisor = tokio::spawn(supervise(
        backends,
        shutdown,
        Arc::clone(&resync),
        &[HEALTH_LOOP, super::agent_check::AGENT_LOOP],
    ));
    HealthChecks { supervisor, resync }
}

/// Keeps one loop of each kind in `kinds` running for every node that wants
/// it: starts loops for new nodes, stops those of removed nodes (and of
/// nodes that no longer want the kind), restarts a loop that ended before
/// shutdown (only a panic ends one), and on shutdown waits for all.
pub(crate) async fn supervise(
    backends: Arc<ArcSwap<Backends>>,
    mut shutdown: watch::Receiver<bool>,
    resync: Arc<Notify>,
    kinds: &'static [NodeLoop],
) {
    let mut loops: Vec<(&'static NodeLoop, Arc<NodeState>, JoinHandle<()>)> = Vec::new();
    let mut seen: Option<Arc<Backends>> = None;
    loop {
        let finished = loops.iter().any(|(_, _, h)| h.is_finished());
        let current = backends.load_full();
        let moved = !seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, &current));
        if moved || finished {
            loops.retain(|(kind, node, handle)| {
                let kept = current.find_same(node);
                if !kept.is_some_and(|n| (kind.wanted)(&current, n)) {
                    handle.abort();
                    (kind.stopped)(node, kept.is_none());
                    tracing::info!(
                        node = %node.name,
                        address = %node.address,
                        "{}s of the node stop ({})",
                        kind.what,
                        if kept.is_none() { "node removed" } else { "no longer configured" }
                    );
                    return false;
                }
                if handle.is_finished() {
                    tracing::error!(node = %node.name, "{} loop ended unexpectedly; restarting it", kind.what);
                    return false;
                }
                true
            });
            for kind in kinds {
                for node in current.nodes() {
                    let running = loops
                        .iter()
                        .any(|(k, n, _)| std::ptr::eq(*k, kind) && n.same_node(node));
                    if !running && (kind.wanted)(&current, node) {
                        let handle =
                            (kind.spawn)(Arc::clone(node), Arc::clone(&backends), shutdown.clone());
                        loops.push((kind, Arc::clone(node), handle));
                    }
                }
            }
            seen = Some(current);
        }
        tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            _ = resync.notified() => {}
            _ = tokio::time::sleep(RESCAN) => {}
        }
    }
    for (_, _, handle) in loops {
        let _ = handle.await;
    }
}

fn site_label(node: &NodeState) -> String {
    node.site_name.clone().unwrap_or_else(|| "idle".to_string())
}

fn set_up_gauge(node: &NodeState, up: bool) {
    node.publish_up_as(up);
}

async fn node_loop(
    mut node: Arc<NodeState>,
    backends: Arc<ArcSwap<Backends>>,
    mut shutdown: watch::Receiver<bool>,
) {
    set_up_gauge(&node, node.is_up());
    // Stagger the first check over one interval so a proxy starting with many
    // nodes does not probe them all at the same instant.
    let interval = backends.load().health().interval;
    let first = Duration::from_secs_f64(interval.as_secs_f64() * rand::thread_rng().gen::<f64>());
    tokio::select! {
        _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
        _ = tokio::time::sleep(first) => {}
        _ = node.role_applied_now() => {}
    }
    loop {
        let snap = backends.load();
        let Some(current) = snap.find_same(&node) else {
            // Removed by a reload: no more checks. The supervisor stops this
            // loop (and zeroes the gauge) once it sees the new snapshot;
            // until then idle rather than exit, so a loop that ended on its
            // own always means a panic.
            let interval = snap.health().interval;
            drop(snap);
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = tokio::time::sleep(interval) => continue,
            }
        };
        if current.site != node.site {
            // Moved to another site: retire the old label.
            set_up_gauge(&node, false);
            set_up_gauge(current, current.is_up());
        }
        node = Arc::clone(current);
        // Not probed now, the loop staying so that a change finds it
        // running: `check = false` (assumed up); maintenance (HAProxy stops
        // checks of a server in MAINT); a moved node whose sidecar has not
        // applied the role yet (a pass before that proves nothing).
        if !node.is_checked() || node.admin_state() == AdminState::Maint || !node.role_applied() {
            let interval = snap.health().interval;
            drop(snap);
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = tokio::time::sleep(interval) => continue,
                _ = node.role_applied_now() => continue,
            }
        }
        let site = snap.site_of(&node);
        let path = site.map_or_else(|| snap.health().path.clone(), |s| s.health_path.clone());
        let host = site
            .and_then(|s| s.check_host.clone())
            .unwrap_or_else(|| node.address.to_string());
        let timeout = snap.health().timeout;
        let interval = snap.health().interval;
        let send_proxy = snap.send_proxy_of(&node);
        let expect = snap.health().expect_status;
        drop(snap);

        let started = std::time::Instant::now();
        let result = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            r = check_once(node.address, &host, &path, timeout, send_proxy, expect) => r,
        };
        let (status, code) = match &result {
            Ok(code) => (CheckStatus::L7Ok, Some(code.as_u16())),
            Err(CheckError::Status(code)) => (CheckStatus::L7Sts, Some(code.as_u16())),
            Err(e) => (e.status(), None),
        };
        node.record_check_detail(started.elapsed(), status, code);
        if let Err(e) = &result {
            tracing::debug!(node = %node.name, site = %site_label(&node), error = %e, "health check failed");
        }
        let error = result.as_ref().err().map(|e| e.to_string());
        metrics::counter!(
            HEALTH_CHECKS,
            "node" => node.name.clone(),
            "result" => if result.is_ok() { "pass" } else { "fail" }
        )
        .increment(1);
        match node.record_check(result.map(|_| ()).map_err(|e| e.to_string())) {
            Some(Transition::Up) => {
                tracing::info!(
                    node = %node.name, address = %node.address, site = %site_label(&node),
                    rise = node.thresholds().rise,
                    "node up: health checks passed"
                );
                set_up_gauge(&node, true);
            }
            Some(Transition::Down(_)) => {
                tracing::warn!(
                    node = %node.name, address = %node.address, site = %site_label(&node),
                    fall = node.thresholds().fall,
                    error = error.as_deref().unwrap_or(""),
                    "node down: health checks failed"
                );
                set_up_gauge(&node, false);
            }
            None => {}
        }
        // A role newly applied (the node moved to another site) is checked
        // at once: routing waits for `rise` passes made after the apply,
        // and a node that lands should take its share within milliseconds,
        // not an interval later.
        tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            _ = tokio::time::sleep(interval) => {}
            _ = node.role_applied_now() => {}
        }
    }
}

#[cfg(test)]
mod tests;
