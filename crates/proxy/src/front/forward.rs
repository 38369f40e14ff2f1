//! The request service: route to a site, pick a node, forward with pooled
//! connections, retry a failed connect or a broken connection of an
//! idempotent request on another node ([`retry`]), stream the response
//! back, and pass protocol upgrades through.

mod retry;
pub use retry::RetryReason;

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;

use super::access_log::ms;
use super::body::{ClientBodyError, RequestBody};
use super::error::{ErrorKind, ErrorSource, RetryType};
use super::exchange::{head_bytes, Exchange};
use super::headers::{self, Present};
use super::response::ResponseBody;
use super::state::ConnCtx;
use super::stats;
use super::upstream::ConnectError;
use crate::balance::{NoNode, Outcome, PickError};
use crate::qos::admission::Refused;
use retry::{broke_before_response, Attempts};

/// Serves one request.
pub async fn handle(
    ctx: Arc<ConnCtx>,
    mut req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Infallible> {
    let start = Instant::now();
    ctx.conn.request_started();
    let snap = ctx.proxy.snapshot.load_full();
    let mut ex = Exchange::new(Arc::clone(&ctx), Arc::clone(&snap), start, &req);
    ex.timers.tq = if req.version() == Version::HTTP_2 {
        0
    } else {
        ms(ctx.conn.head_elapsed(start))
    };
    let limits = &snap.config.limits;
    if req.headers().len() > limits.max_headers || head_size(&req) > limits.max_header_bytes {
        return Ok(error(ex, ErrorKind::HeadTooLarge));
    }

    // RFC 9112 section 3.2: exactly one Host in every HTTP/1.1 request
    // (absolute-form included); HTTP/1.0 may omit it.
    if req.version() == Version::HTTP_11 {
        let mut hosts = req.headers().get_all(header::HOST).iter();
        if hosts.next().is_none() || hosts.next().is_some() {
            return Ok(error(ex, ErrorKind::BadHost));
        }
    }

    // The rewriting below looks up only the headers this one pass found.
    let present = Present::scan(req.headers());
    // RFC 9112 section 6.1: chunked at most once, else the length is not
    // reliable (section 6.3): 400 and close, as HAProxy does.
    if present.has(Present::TRANSFER_ENCODING) {
        if headers::chunked_twice(req.headers()) {
            return Ok(error(ex, ErrorKind::BadRequest));
        }
        if !headers::only_chunked(req.headers()) {
            return Ok(error(ex, ErrorKind::UnknownTransferCoding));
        }
    }

    // The host the request is routed on, which is also the Host the node
    // gets: the target's authority when there is one (HTTP/2 `:authority`;
    // an HTTP/1 absolute-form target, whose authority replaces Host: RFC
    // 9112 section 3.2.2), else the Host header. A refcount bump for
    // HTTP/1, one small copy for a target's authority.
    let host: Option<HeaderValue> = match req.uri().authority() {
        Some(a) => {
            if req.version() == Version::HTTP_2 && !host_names_authority(&req, a.as_str()) {
                return Ok(error(ex, ErrorKind::HostMismatch));
            }
            let hostport = a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h);
            HeaderValue::from_str(hostport).ok()
        }
        None => req.headers().get(header::HOST).cloned(),
    };
    let host_str = host.as_ref().and_then(|h| h.to_str().ok());
    let Some(site) = snap.routes.route(host_str, req.uri().path()) else {
        return Ok(error(ex, ErrorKind::NoSite));
    };
    ex.routed(site);

    // The proxy-wide admission queue (`[qos]`): waits only when the proxy
    // is at qos.max_inflight.
    // No clock read when there is no queue to wait in.
    let t_admit = (snap.config.qos.max_inflight > 0).then(Instant::now);
    if t_admit.is_some() {
        ex.queued_ahead = snap.admission.queued();
    }
    let slot = snap.qos_slots.get(site).copied().unwrap_or(usize::MAX);
    match snap.admission.admit(slot).await {
        Ok(permit) => {
            if permit.holds_slot() {
                if let Some(s) = snap.stats.sites.get(site) {
                    s.admitted[usize::from(permit.was_queued())].increment(1);
                }
            }
            ex.admission = Some(permit);
        }
        Err(refused) => {
            let (kind, reason) = match refused {
                Refused::QueueFull(_) => (ErrorKind::QosQueueFull, 0),
                Refused::Timeout(_) => (ErrorKind::QosTimeout, 1),
            };
            if let Some(s) = snap.stats.sites.get(site) {
                s.rejected[reason].increment(1);
            }
            tracing::debug!(site = %name_of(&snap.site_names, site), error = %refused, "request shed by the admission queue");
            return Ok(error(ex, kind));
        }
    }
    let admit_wait = t_admit.map_or(Duration::ZERO, |t| t.elapsed());

    let upgrade = headers::is_upgrade_request(req.version(), req.headers(), present);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let version = req.version();
    let (mut parts, body) = req.into_parts();
    headers::strip_hop_by_hop(&mut parts.headers, present, upgrade);
    headers::chunk_unknown_length(&mut parts.headers, !body.is_end_stream());
    // hyper already answered `100 Continue` to the client when the body
    // was first read; the node must not be asked again.
    if present.has(Present::EXPECT) {
        parts.headers.remove(header::EXPECT);
    }
    if let Some(v) = &host {
        parts.headers.insert(header::HOST, v.clone());
    }
    let keep = snap.config.global.keeps_forwarded(ctx.client.ip());
    headers::add_forwarding(&mut parts.headers, present, &ctx.client_id, host_str, keep);
    let via = match version {
        Version::HTTP_10 | Version::HTTP_09 => &snap.via_request[0],
        Version::HTTP_2 => &snap.via_request[2],
        _ => &snap.via_request[1],
    };
    headers::add_via(&mut parts.headers, present, via);
    parts.version = Version::HTTP_11;
    if parts.uri.scheme().is_some() || parts.uri.authority().is_some() {
        // HTTP/2 and absolute-form requests: the node gets origin form (the
        // path and query shared, not copied and parsed again).
        parts.uri = origin_form(&parts.uri);
    }
    let timeouts = snap.config.timeouts.clone();
    let has_body = !body.is_end_stream();
    let progress = has_body.then(|| Arc::new(AtomicU64::new(0)));
    let mut body = Some(RequestBody::new(
        body,
        timeouts.client,
        progress.clone(),
        start,
    ));
    let mut parts = Some(parts);

    // Nodes tried and retry budgets, on the stack (`retry`).
    let mut attempts = Attempts::new(snap.config.global.retries, snap.config.global.retry_on);
    let idempotent = method_idempotent(&ex);
    loop {
        let t_pick = Instant::now();
        let pick = match snap.backends.pick_queued(site, attempts.tried()).await {
            Ok(p) => p,
            Err(PickError::QueueTimeout(_)) => {
                tracing::warn!(site = %name_of(&snap.site_names, site), "every node of the site stayed busy for timeouts.queue");
                return Ok(error(ex, ErrorKind::QueueTimeout));
            }
            Err(PickError::NoNode(NoNode::Exhausted)) if attempts.retry_tried_nodes() => continue,
            Err(PickError::NoNode(no)) => {
                let kind = attempts.last_error.unwrap_or(match no {
                    NoNode::Empty => ErrorKind::NoNodes,
                    NoNode::AllDown | NoNode::Exhausted => ErrorKind::AllDown,
                });
                return Ok(error(ex, kind));
            }
        };
        // One clock read ends the wait and starts the connect.
        let t_conn = Instant::now();
        ex.timers.tw = ms(t_conn.saturating_duration_since(t_pick) + admit_wait);
        let node = pick.node.index;
        attempts.picking(node);
        ex.node = Some(node);
        ex.pick = Some(pick);
        ex.update_inflight(node);
        let Some(pool) = snap.pools.get(node).cloned() else {
            tracing::error!(node, "no connection pool for node (snapshot mismatch)");
            return Ok(error(ex, ErrorKind::ConnectFailed));
        };
        let fresh = std::mem::take(&mut attempts.fresh);
        let checkout = match pool.checkout(ctx.client, ctx.local, t_conn, fresh).await {
            Ok(c) => c,
            Err(e) => {
                let kind = match e {
                    ConnectError::Timeout { .. } => ErrorKind::ConnectTimeout,
                    _ => ErrorKind::ConnectFailed,
                };
                let again = attempts.connect_failed(kind);
                tracing::warn!(
                    site = %name_of(&snap.site_names, site),
                    node = %snap.node_names.get(node).map_or("?", |n| n),
                    error = %e,
                    retry = again,
                    "cannot connect to node"
                );
                ex.attempt_failed(Outcome::ConnectFailed);
                if again {
                    // Nothing was sent: safe to replay on another node.
                    ex.retried(RetryReason::ConnFailure);
                    continue;
                }
                return Ok(error(ex, kind));
            }
        };
        ex.timers.tc = if checkout.reused {
            0
        } else {
            ms(t_conn.elapsed())
        };
        let mut sender = checkout.sender;
        let (Some(p), Some(b)) = (parts.take(), body.take()) else {
            return Ok(error(ex, ErrorKind::UpstreamProtocol));
        };
        // A copy of the head to send again when the node answers 421 (it
        // moved to another site after this proxy last read its role word)
        // or its connection breaks before answering an idempotent request:
        // only without a body, only while a budget is left.
        let replay = attempts
            .keep_copy(has_body, idempotent, snap.roles_move)
            .then(|| head_copy(&p));
        let t_send = Instant::now();
        let sent = sender.try_send_request(Request::from_parts(p, b));
        let result = wait_response(sent, t_send, timeouts.server, progress.as_deref(), start).await;
        let mut resp = match result {
            Ok(r) => r,
            Err(Waited::Timeout) => {
                tracing::warn!(site = %name_of(&snap.site_names, site), node = %name_of(&snap.node_names, node), "node response timeout");
                ex.attempt_failed(Outcome::Timeout);
                return Ok(error(ex, ErrorKind::UpstreamTimeout));
            }
            Err(Waited::Failed(mut e)) => {
                if let Some(req) = e.take_message() {
                    // The pooled connection closed before anything was
                    // written: the request is intact, try another connection.
                    if attempts.stale(node) {
                        let (p, b) = req.into_parts();
                        parts = Some(p);
                        body = Some(b);
                        // Not a failure of the node: it may be picked again.
                        ex.pick = None;
                        continue;
                    }
                }
                let err = e.into_error();
                let kind = classify(&err);
                if kind.source() != ErrorSource::Upstream {
                    tracing::debug!(error = %err, "client failed while its request was forwarded");
                    return Ok(error(ex, kind));
                }
                ex.attempt_failed(Outcome::ProtocolError);
                let broke = kind.retry() == RetryType::Idempotent && broke_before_response(&err);
                let again = broke && attempts.empty_response(kind, replay.is_some());
                tracing::warn!(site = %name_of(&snap.site_names, site), node = %name_of(&snap.node_names, node), error = %err, retry = again, "node failed before its response headers");
                match replay {
                    Some(head) if again => {
                        ex.retried(RetryReason::EmptyResponse);
                        parts = Some(head);
                        body = Some(RequestBody::empty());
                        continue;
                    }
                    _ => return Ok(error(ex, kind)),
                }
            }
        };
        let head_at = Instant::now();
        let head_time = head_at.saturating_duration_since(t_send);
        ex.timers.tr = ms(head_time);
        if let Some(pick) = &ex.pick {
            pick.node.observe_latency_at(head_time, head_at);
        }
        if resp.status() == StatusCode::MISDIRECTED_REQUEST && snap.roles_move {
            if let Some(head) = replay.filter(|_| attempts.misdirected()) {
                // RFC 9110 15.5.20: a 421 may be retried on another
                // connection, whatever the method. The node serves another
                // site now: routing skips it until its role word is read
                // again, and the request goes to another node.
                if let Some(pick) = ex.pick.take() {
                    pick.node.follow_role(pick.node.assigned_site(), false);
                }
                tracing::warn!(site = %name_of(&snap.site_names, site), node = %name_of(&snap.node_names, node),
                    "node answered 421 (it no longer serves the site): request replayed on another node");
                ex.retried(RetryReason::Misdirected);
                parts = Some(head);
                body = Some(RequestBody::empty());
                continue;
            }
        }
        ex.status = resp.status().as_u16();
        ex.outcome_pending = true;
        let upgraded = resp.status() == StatusCode::SWITCHING_PROTOCOLS && client_upgrade.is_some();
        if upgraded {
            let upstream_upgrade = hyper::upgrade::on(&mut resp);
            ctx.conn.upgraded.store(true, Ordering::Relaxed);
            if let Some(client_upgrade) = client_upgrade {
                tokio::spawn(tunnel(client_upgrade, upstream_upgrade, sender));
            }
        } else {
            ex.conn = Some((pool, sender));
        }
        let (mut rparts, rbody) = resp.into_parts();
        let present = Present::scan(&rparts.headers);
        headers::strip_hop_by_hop(&mut rparts.headers, present, upgraded);
        headers::add_via(&mut rparts.headers, present, &snap.via_response);
        ex.bytes = head_bytes(rparts.status, &rparts.headers);
        let body = ResponseBody::upstream(rbody, timeouts.server, ex);
        return Ok(Response::from_parts(rparts, body));
    }
}

/// The origin form of `uri` (its path and query; `/` when it has none).
fn origin_form(uri: &Uri) -> Uri {
    let mut p = http::uri::Parts::default();
    p.path_and_query = Some(
        uri.path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
    );
    Uri::from_parts(p).unwrap_or_else(|_| Uri::from_static("/"))
}

/// A copy of a request head without a body (method, target, version,
/// headers), for a replay.
fn head_copy(p: &http::request::Parts) -> http::request::Parts {
    let mut r = Request::new(());
    *r.method_mut() = p.method.clone();
    *r.uri_mut() = p.uri.clone();
    *r.version_mut() = p.version;
    *r.headers_mut() = p.headers.clone();
    r.into_parts().0
}

// Large, but it lives for one poll on the cold path; boxing would cost an
// allocation for nothing.
#[allow(clippy::large_enum_variant)]
enum Waited {
    Timeout,
    Failed(hyper::client::conn::TrySendError<Request<RequestBody>>),
}

/// Waits for the node's response head. `timeouts.server` counts from the
/// last progress: while a request body is still being uploaded the clock
/// restarts with each chunk sent (an upload longer than the timeout is not
/// a slow node).
async fn wait_response<F>(
    sent: F,
    sent_at: Instant,
    limit: Duration,
    progress: Option<&AtomicU64>,
    start: Instant,
) -> Result<Response<Incoming>, Waited>
where
    F: std::future::Future<
        Output = Result<
            Response<Incoming>,
            hyper::client::conn::TrySendError<Request<RequestBody>>,
        >,
    >,
{
    tokio::pin!(sent);
    let mut seen = progress.map(|p| p.load(Ordering::Relaxed));
    let mut deadline = tokio::time::Instant::from_std(sent_at) + limit;
    loop {
        tokio::select! {
            biased;
            r = &mut sent => return r.map_err(Waited::Failed),
            _ = tokio::time::sleep_until(deadline) => {
                let now = progress.map(|p| p.load(Ordering::Relaxed));
                if now == seen {
                    return Err(Waited::Timeout);
                }
                seen = now;
                // Restart from the last chunk's time.
                let last = Duration::from_millis(now.unwrap_or(0));
                deadline = tokio::time::Instant::from_std(start + last) + limit;
                if deadline <= tokio::time::Instant::now() {
                    deadline = tokio::time::Instant::now() + limit;
                }
            }
        }
    }
}

/// Failure kind of a request that got no response head.
fn classify(err: &hyper::Error) -> ErrorKind {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(c) = e.downcast_ref::<ClientBodyError>() {
            return match c {
                ClientBodyError::Timeout => ErrorKind::ClientTimeout,
                ClientBodyError::Aborted(_) => ErrorKind::ClientAborted,
            };
        }
        source = e.source();
    }
    ErrorKind::UpstreamProtocol
}

/// Whether the request's method is idempotent (RFC 9110 section 9.2.2:
/// GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
fn method_idempotent(ex: &Exchange) -> bool {
    ex.method().is_idempotent()
}

/// A site or node name for logs; never panics on an index from another
/// snapshot.
fn name_of(names: &[Arc<str>], index: usize) -> &str {
    names.get(index).map_or("?", |n| n)
}

/// Whether every Host header of an HTTP/2 request names the same origin
/// as its `:authority` (RFC 9113 section 8.3.1 makes a request whose Host
/// identifies another entity malformed); true when there is none.
fn host_names_authority<B>(req: &Request<B>, authority: &str) -> bool {
    let default_port = if req.uri().scheme_str() == Some("https") {
        443
    } else {
        80
    };
    req.headers().get_all(header::HOST).iter().all(|h| {
        h.to_str()
            .is_ok_and(|h| super::route::same_authority(h, authority, default_port))
    })
}

/// Size of the request head as it arrived (request line and header
/// lines), close enough for the `max_header_bytes` limit.
fn head_size<B>(req: &Request<B>) -> usize {
    let uri = req.uri();
    let target = uri.path_and_query().map_or(1, |p| p.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len() + 8);
    let line = req.method().as_str().len() + target + 12;
    req.headers()
        .iter()
        .fold(line + 2, |n, (k, v)| n + k.as_str().len() + v.len() + 4)
}

/// Copies bytes both ways between an upgraded client and node connection.
async fn tunnel(
    client: hyper::upgrade::OnUpgrade,
    node: hyper::upgrade::OnUpgrade,
    _sender: hyper::client::conn::http1::SendRequest<RequestBody>,
) {
    match tokio::try_join!(client, node) {
        Ok((c, n)) => {
            let mut c = TokioIo::new(c);
            let mut n = TokioIo::new(n);
            match tokio::io::copy_bidirectional(&mut c, &mut n).await {
                Ok((up, down)) => tracing::debug!(up, down, "upgraded connection closed"),
                Err(e) => tracing::debug!(error = %e, "upgraded connection ended with an error"),
            }
        }
        Err(e) => tracing::warn!(error = %e, "protocol upgrade failed"),
    }
}

/// The proxy's own response for a failure, with a short text body.
pub fn error(mut ex: Exchange, kind: ErrorKind) -> Response<ResponseBody> {
    let status = kind.status();
    ex.status = status.as_u16();
    ex.error = Some(kind);
    ex.outcome_pending = false;
    if kind.source() == ErrorSource::Client {
        stats::client_error(kind.metric_kind());
    }
    let text = match (kind, ex.site) {
        (
            ErrorKind::AllDown
            | ErrorKind::NoNodes
            | ErrorKind::QueueTimeout
            | ErrorKind::QosQueueFull
            | ErrorKind::QosTimeout,
            Some(site),
        ) => {
            let name = ex.snap.site_names.get(site).map_or("?", |n| n);
            let qos = &ex.snap.config.qos;
            Bytes::from(match kind {
                ErrorKind::NoNodes => format!("service unavailable: site `{name}` has no nodes\n"),
                ErrorKind::QueueTimeout => {
                    format!("service unavailable: every node of site `{name}` is busy\n")
                }
                ErrorKind::QosQueueFull => format!(
                    "service unavailable: the proxy is at its request limit (qos.max_inflight = {}) and site `{name}` already has {} requests waiting (qos.max_queue)\n",
                    qos.max_inflight, qos.max_queue
                ),
                ErrorKind::QosTimeout => format!(
                    "service unavailable: the proxy is at its request limit (qos.max_inflight = {}) and no slot came free for site `{name}` within timeouts.queue\n",
                    qos.max_inflight
                ),
                _ => format!("service unavailable: no node of site `{name}` is up\n"),
            })
        }
        _ => Bytes::from_static(kind.message().as_bytes()),
    };
    let via = ex.snap.via_response.clone();
    let close = kind.source() == ErrorSource::Client && ex.version != Version::HTTP_2;
    let len = text.len();
    let mut h = http::HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::VIA, via);
    if kind.overload() {
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if close {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    ex.bytes = head_bytes(status, &h);
    let mut resp = Response::new(ResponseBody::full(text, ex));
    *resp.status_mut() = status;
    *resp.headers_mut() = h;
    resp
}

#[cfg(test)]
mod tests;
