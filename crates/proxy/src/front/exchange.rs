//! One request/response exchange as the proxy accounts for it: timers,
//! chosen site and node, status, bytes, termination state. Settled once,
//! when the response body ends or is dropped ([`Exchange::finish`]):
//! passive health report, in-flight slot released, metrics, access-log
//! line. (The node's connection goes back to its pool from the response
//! body, as soon as the node's last byte is read.)

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::access_log::{ms, AccessRecord, Counts, Timers};
use super::compress::Offer;
use super::error::ErrorKind;
use super::forward::RetryReason;
use super::state::{ConnCtx, Snapshot};
use super::stats::class_index;
use crate::balance::{Outcome, Pick};
use crate::qos::admission::Permit;

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The whole response reached the client.
    Complete,
    /// The node broke the response body.
    UpstreamAborted,
    /// The node stalled in the response body (`timeouts.server`).
    UpstreamTimeout,
    /// The client went away before the response ended.
    ClientAborted,
}

/// Per-request accounting; see the module doc.
pub struct Exchange {
    ctx: Arc<ConnCtx>,
    pub snap: Arc<Snapshot>,
    start: Instant,
    date: SystemTime,
    method: http::Method,
    target: String,
    pub version: http::Version,
    pub site: Option<usize>,
    pub node: Option<usize>,
    pub pick: Option<Pick>,
    /// The `[qos]` admission slot, released when the exchange settles.
    pub admission: Option<Permit>,
    /// Tq, Tw, Tc, Tr as they are reached; Ta is set when it settles.
    pub timers: Timers,
    pub status: u16,
    /// Bytes sent to the client: the response head (as HTTP/1.1 text,
    /// [`head_bytes`]) and the body.
    pub bytes: u64,
    /// Times the request was sent again (connect failure, empty response,
    /// 421).
    pub retries: u32,
    /// Requests waiting in the `[qos]` admission queue when it arrived.
    pub queued_ahead: usize,
    /// Set when the proxy answered with an error.
    pub error: Option<ErrorKind>,
    /// The node answered; its outcome is reported when the body ends.
    pub outcome_pending: bool,
    /// What the client accepts for a compressed response (`[site.compression]`).
    pub compress: Offer,
    /// The request's target as the rules left it, kept for response rules
    /// (only when some are configured).
    pub rule_uri: Option<http::Uri>,
    /// What the request's persistence cookie said (sites with
    /// `[site.sticky]` only).
    pub sticky: Option<super::forward::StickyIn>,
    /// The request's stick counters (`track-sc` rules); dropping them ends
    /// the tracking.
    pub track: crate::rules::stick::Tracking,
    done: bool,
}

impl Exchange {
    pub fn new<B>(
        ctx: Arc<ConnCtx>,
        snap: Arc<Snapshot>,
        start: Instant,
        req: &http::Request<B>,
    ) -> Self {
        let logging = ctx.proxy.access.enabled();
        Exchange {
            ctx,
            snap,
            start,
            date: if logging {
                SystemTime::now()
            } else {
                SystemTime::UNIX_EPOCH
            },
            method: req.method().clone(),
            target: if logging {
                req.uri()
                    .path_and_query()
                    .map_or_else(|| req.uri().to_string(), |p| p.as_str().to_string())
            } else {
                String::new()
            },
            version: req.version(),
            site: None,
            node: None,
            pick: None,
            admission: None,
            timers: Timers::NONE,
            status: 0,
            bytes: 0,
            retries: 0,
            queued_ahead: 0,
            error: None,
            outcome_pending: false,
            compress: Offer::default(),
            rule_uri: None,
            sticky: None,
            track: None,
            done: false,
        }
    }

    /// The request was routed to `site`: it counts in the site's in-flight
    /// requests until it settles.
    pub fn routed(&mut self, site: usize) {
        self.site = Some(site);
        if let Some(s) = self.snap.stats.sites.get(site) {
            s.active.fetch_add(1, Ordering::Relaxed);
            s.arrived();
        }
    }

    /// The connection the request came on.
    pub fn ctx(&self) -> &ConnCtx {
        &self.ctx
    }

    /// When the request's head was complete.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The request's method.
    pub fn method(&self) -> &http::Method {
        &self.method
    }

    /// The request is being sent again, for `reason`: counted in
    /// `rdmalb_retries_total{site,reason}` and the access log's retries.
    pub fn retried(&mut self, reason: RetryReason) {
        self.retries += 1;
        if let Some(s) = self.site.and_then(|s| self.snap.stats.sites.get(s)) {
            s.retries[reason.index()].increment(1);
        }
        // `show stat`'s wretr/wredis of the node the attempt failed on.
        if let Some(n) = self.node.and_then(|n| self.snap.backends.nodes().get(n)) {
            n.record_retry();
        }
    }

    /// Reports a failed attempt on the current node (passive health and
    /// `rdmalb_upstream_errors_total`) and releases its slot.
    pub fn attempt_failed(&mut self, outcome: Outcome) {
        if let Some(pick) = self.pick.take() {
            pick.node.report(outcome);
            self.count_upstream_error(outcome);
            let node = pick.node.index;
            drop(pick);
            self.update_inflight(node);
        }
    }

    fn count_upstream_error(&self, outcome: Outcome) {
        let (Some(node), Some(kind)) = (self.node, outcome.error_kind()) else {
            return;
        };
        let i = super::stats::UPSTREAM_ERROR_KINDS
            .iter()
            .position(|k| *k == kind)
            .unwrap_or(2);
        if let Some(state) = self.snap.backends.nodes().get(node) {
            state.record_upstream_error(i);
        }
        if let Some(stats) = self.snap.stats.nodes.get(node) {
            stats.errors[i].increment(1);
        }
    }

    pub fn update_inflight(&self, node: usize) {
        if let (Some(stats), Some(state)) = (
            self.snap.stats.nodes.get(node),
            self.snap.backends.nodes().get(node),
        ) {
            stats.inflight.set(state.inflight() as f64);
        }
    }

    /// Settles the exchange (idempotent).
    pub fn finish(&mut self, end: End) {
        if self.done {
            return;
        }
        self.done = true;
        let now = Instant::now();
        if self.track.is_some() {
            use crate::rules::stick::{ms_at, track};
            track::stop(&mut self.track, ms_at(now));
            track::recycle(&mut self.track, &self.ctx.stick);
        }
        let elapsed = now.saturating_duration_since(self.start);
        self.ctx.conn.request_finished();
        let (termination, cut) = match end {
            End::Complete => (self.error.map_or("--", ErrorKind::termination), false),
            End::UpstreamAborted => ("SD", true),
            End::UpstreamTimeout => ("sD", true),
            End::ClientAborted => ("CD", true),
        };
        if self.outcome_pending {
            self.report_outcome(end);
        }
        let class = class_index(self.status, cut);
        self.count(class, end, elapsed);
        let node_name = self.node.and_then(|n| self.snap.node_names.get(n).cloned());
        let counts = self.counts();
        if let Some(s) = self.site.and_then(|s| self.snap.stats.sites.get(s)) {
            s.active.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(pick) = self.pick.take() {
            let node = pick.node.index;
            drop(pick);
            self.update_inflight(node);
        }
        // Released here, not when the struct is dropped: the slot is free
        // as soon as the response has ended.
        self.admission = None;
        if self.ctx.proxy.access.enabled() {
            self.log(termination, counts, node_name, elapsed);
        }
    }

    /// The node's health and the error counters learn how it answered.
    fn report_outcome(&self, end: End) {
        let outcome = match end {
            End::Complete | End::ClientAborted if self.status == 503 => Outcome::Busy,
            End::Complete | End::ClientAborted if self.status >= 500 => Outcome::ServerError,
            End::Complete | End::ClientAborted => Outcome::Success,
            End::UpstreamAborted => Outcome::ProtocolError,
            End::UpstreamTimeout => Outcome::Timeout,
        };
        if let Some(pick) = &self.pick {
            pick.node.report(outcome);
        }
        self.count_upstream_error(outcome);
    }

    /// The request in the listener's, the node's (or the site's) and the
    /// site's counters, by status `class`.
    fn count(&self, class: usize, end: End, elapsed: Duration) {
        self.ctx.frontend.answered(class, self.bytes);
        let stats = &self.snap.stats;
        match (self.site, self.node) {
            (_, Some(node)) => {
                if let Some(s) = stats.nodes.get(node) {
                    s.requests[class].increment(1);
                }
                if let Some(state) = self.snap.backends.nodes().get(node) {
                    state.record_response(class, self.bytes);
                    let t = &self.timers;
                    // Total time as the access log's `Ta`.
                    state.record_times([t.tw, t.tc, t.tr, t.tq.max(0) + ms(elapsed)]);
                    match end {
                        End::ClientAborted => state.record_abort(true),
                        End::UpstreamAborted | End::UpstreamTimeout => state.record_abort(false),
                        End::Complete => {}
                    }
                }
            }
            (Some(site), _) => {
                if let Some(s) = stats.sites.get(site) {
                    s.no_node[class].increment(1);
                }
            }
            (None, _) => stats.no_site[class].increment(1),
        }
        if let Some(s) = self.site.and_then(|s| stats.sites.get(s)) {
            s.duration.record(elapsed.as_secs_f64());
            // Served for QoS: a complete response below 500.
            if let Some(d) = &s.demand {
                d.answered(class < 4);
            }
        }
    }

    /// The connection counts of the access log, taken before this
    /// request's own slots are released, as HAProxy counts the logged
    /// session among its connections.
    fn counts(&self) -> Counts {
        Counts {
            actconn: self.ctx.proxy.connections.load(Ordering::Relaxed),
            feconn: self.ctx.listener_connections.load(Ordering::Relaxed),
            beconn: self
                .site
                .and_then(|s| self.snap.stats.sites.get(s))
                .map_or(0, |s| s.active.load(Ordering::Relaxed)),
            srv_conn: self.pick.as_ref().map_or(0, |p| p.node.inflight()),
            retries: self.retries,
        }
    }

    /// The access log line.
    fn log(
        &mut self,
        termination: &'static str,
        counts: Counts,
        node: Option<Arc<str>>,
        elapsed: Duration,
    ) {
        self.ctx.proxy.access.log(AccessRecord {
            client: self.ctx.client,
            // The request's first byte, as HAProxy's `%tr`: `date` was
            // taken once the head was complete.
            date: self
                .date
                .checked_sub(Duration::from_millis(self.timers.tq.max(0) as u64))
                .unwrap_or(self.date),
            listener: Arc::clone(&self.ctx.listener),
            tls: self.ctx.tls,
            site: self.site.and_then(|s| self.snap.site_names.get(s).cloned()),
            node,
            timers: Timers {
                // HAProxy's Ta counts from the request's first byte.
                ta: self.timers.tq.max(0) + ms(elapsed),
                ..self.timers
            },
            status: self.status,
            bytes: self.bytes,
            termination,
            counts,
            queues: (0, self.queued_ahead),
            method: Some(std::mem::replace(&mut self.method, http::Method::GET)),
            target: std::mem::take(&mut self.target),
            version: self.version,
        });
    }
}

/// Size of a response head written as HTTP/1.1: status line, header
/// lines (plus the `date` hyper adds when there is none), blank line.
pub fn head_bytes(status: http::StatusCode, headers: &http::HeaderMap) -> u64 {
    let reason = status.canonical_reason().map_or(0, str::len);
    let line = "HTTP/1.1 200 ".len() + reason + 2;
    let date = if headers.contains_key(http::header::DATE) {
        0
    } else {
        "date: Thu, 01 Jan 1970 00:00:00 GMT\r\n".len()
    };
    let fields = headers
        .iter()
        .fold(0, |n, (k, v)| n + k.as_str().len() + v.len() + 4);
    (line + date + fields + 2) as u64
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.finish(End::ClientAborted);
    }
}
