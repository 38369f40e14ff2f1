//! The request service: the life of one request as named phases over one
//! per-request context, the [`Exchange`] (the shape of Pingora's
//! `ProxyHttp`). In order:
//!
//! 1. [`request_filter`]: the head as read is checked (size, `Host`,
//!    framing). Rules that answer or refuse before routing run here.
//! 2. [`choose_site`]: the host (the target's authority, else `Host`) and
//!    the path choose the site.
//! 3. [`admit`]: the proxy-wide `[qos]` admission queue.
//! 4. [`upstream_request`]: the head the node gets (hop-by-hop fields
//!    removed, forwarding headers, `Via`, origin form).
//! 5. [`attempt::forward`]: pick a node (with the request's hash key and
//!    persistence cookie, [`sticky`]), connect, send, wait for the
//!    response head; a failed connect, an empty response and a 421 are
//!    sent again there under the retry rules ([`retry`]).
//! 6. [`answer::response_filter`]: the response head the client gets; the
//!    body streams back, or the connection becomes a tunnel (upgrade).
//! 7. Logging: when the response body ends, [`Exchange::finish`] settles
//!    the request once (health report, pooled connection, metrics, access
//!    log line).
//!
//! A phase that ends the request early returns a [`Stop`]: an error the
//! proxy answers ([`ErrorKind`]) or a response of its own ([`Reply`]).

mod answer;
mod attempt;
mod retry;
mod rules;
mod sticky;
pub use answer::{error, Reply};
pub use retry::RetryReason;
pub use sticky::StickyIn;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::{Request, Response, Uri, Version};
use hyper::body::Body;
use tokio::time::Sleep;

use super::access_log::ms;
use super::body::{ClientBody, RequestBody};
use super::compress;
use super::error::ErrorKind;
use super::exchange::Exchange;
use super::headers::{self, Present};
use super::response::ResponseBody;
use super::state::{ConnCtx, Snapshot};
use crate::qos::admission::Refused;

/// Why a phase ended the request before a node answered.
pub enum Stop {
    /// The proxy answers with the error's status and text.
    Error(ErrorKind),
    /// The proxy answers with a response of its own (boxed: the cold path
    /// pays for its size, not every phase's result).
    Reply(Box<Reply>),
}

impl From<ErrorKind> for Stop {
    fn from(kind: ErrorKind) -> Stop {
        Stop::Error(kind)
    }
}

/// The proxy's own answer for a phase's [`Stop`].
fn stopped(ex: Exchange, stop: Stop) -> Response<ResponseBody> {
    match stop {
        Stop::Error(kind) => error(ex, kind),
        Stop::Reply(reply) => answer::reply(ex, *reply),
    }
}

/// The value of a phase, or the answer to its [`Stop`] from `handle`.
macro_rules! phase {
    ($ex:ident, $result:expr) => {
        match $result {
            Ok(v) => v,
            Err(stop) => return Ok(stopped($ex, stop)),
        }
    };
}

/// Serves one request: the phases of the module doc, in order. They are
/// called from here, not from a nested `async fn`: every layer of futures
/// costs copies of the request's state (measured with callgrind).
/// `timer`: the client connection's timer, idle while its request is out
/// (HTTP/1, [`super::serve1`]), used for the node's response deadline.
// Not an `async fn` (the request would be moved into a second slot of the
// future): see the body's first comment.
#[allow(clippy::manual_async_fn)]
pub fn handle<'a>(
    ctx: Arc<ConnCtx>,
    mut req: Request<ClientBody>,
    timer: Option<Pin<&'a mut Sleep>>,
) -> impl Future<Output = Result<Response<ResponseBody>, Infallible>> + Send + 'a {
    // An `async` block, not an `async fn`: the request is used where it
    // was moved in, not copied again into a local of the future.
    async move {
        let start = Instant::now();
        ctx.conn.request_started();
        let snap = ctx.proxy.snapshot.load_full();
        let mut ex = Exchange::new(Arc::clone(&ctx), Arc::clone(&snap), start, &req);
        ex.timers.tq = if req.version() == Version::HTTP_2 {
            0
        } else {
            ms(ctx.conn.head_elapsed(start))
        };
        let present = phase!(ex, request_filter(&ctx, &snap, &req));
        phase!(
            ex,
            rules::request(
                &ctx,
                &snap,
                &snap.config.rules.request,
                &mut req,
                start,
                &mut ex.track
            )
        );
        let (site, mut host) = phase!(ex, choose_site(&mut ex, &ctx, &snap, &req));
        phase!(
            ex,
            site_request(&ctx, &snap, site, &mut req, start, &mut host, &mut ex.track)
        );
        if snap.config.rules.wants_response_uri(site) {
            ex.rule_uri = Some(req.uri().clone());
        }
        let admit_wait = phase!(ex, admit(&mut ex, &snap, site).await);
        let key = sticky::pick_key(&mut ex, &snap, site, &req, ctx.client.ip());
        let upgrade = headers::is_upgrade_request(req.version(), req.headers(), present);
        let client_upgrade = upgrade.then(|| attempt::ClientUpgrade::of(&mut req));
        let mut out = upstream_request(&mut ex, &ctx, &snap, req, present, host, upgrade);
        let admitted = attempt::Admitted {
            wait: admit_wait,
            key,
        };
        let forwarded = attempt::forward(&mut ex, &ctx, &snap, site, &mut out, admitted, timer);
        let mut answered = phase!(ex, forwarded.await);
        answered.client_upgrade = client_upgrade;
        Ok(answer::response_filter(ex, answered))
    }
}

/// An http-01 validation (`GET /.well-known/acme-challenge/<token>`),
/// answered before any rule: the key authorization, else 404.
fn acme_challenge<B>(acme: &crate::acme::Acme, req: &Request<B>) -> Option<Reply> {
    let token = req
        .uri()
        .path()
        .strip_prefix(crate::acme::challenge::HTTP_PREFIX)?;
    let (status, body) = match acme.challenges.http(token) {
        Some(answer) => (http::StatusCode::OK, bytes::Bytes::from(answer)),
        None => (http::StatusCode::NOT_FOUND, bytes::Bytes::new()),
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// Phase 1: the head as read. Returns which headers it has (one pass; the
/// rewriting looks up only those).
fn request_filter<B>(ctx: &ConnCtx, snap: &Snapshot, req: &Request<B>) -> Result<Present, Stop> {
    if let Some(reply) = super::monitor::reply(ctx, snap, req) {
        return Err(Stop::Reply(Box::new(reply)));
    }
    if let Some(acme) = &ctx.proxy.acme {
        if let Some(reply) = acme_challenge(acme, req) {
            return Err(Stop::Reply(Box::new(reply)));
        }
    }
    let limits = &snap.config.limits;
    if req.headers().len() > limits.max_headers || head_size(req) > limits.max_header_bytes {
        return Err(ErrorKind::HeadTooLarge.into());
    }
    // RFC 9112 section 3.2: exactly one Host in every HTTP/1.1 request
    // (absolute-form included); HTTP/1.0 may omit it.
    if req.version() == Version::HTTP_11 {
        let mut hosts = req.headers().get_all(header::HOST).iter();
        if hosts.next().is_none() || hosts.next().is_some() {
            return Err(ErrorKind::BadHost.into());
        }
    }
    let present = Present::scan(req.headers());
    // RFC 9112 section 6.1: chunked at most once, else the length is not
    // reliable (section 6.3): 400 and close, as HAProxy does.
    if present.has(Present::TRANSFER_ENCODING) {
        if headers::chunked_twice(req.headers()) {
            return Err(ErrorKind::BadRequest.into());
        }
        if !headers::only_chunked(req.headers()) {
            return Err(ErrorKind::UnknownTransferCoding.into());
        }
    }
    Ok(present)
}

/// Phase 2: the site, and the host the request is routed on, which is also
/// the Host the node gets: the target's authority when there is one
/// (HTTP/2 `:authority`; an HTTP/1 absolute-form target, whose authority
/// replaces Host: RFC 9112 section 3.2.2), else the Host header. A refcount
/// bump for HTTP/1, one small copy for a target's authority.
fn choose_site<B>(
    ex: &mut Exchange,
    ctx: &ConnCtx,
    snap: &Snapshot,
    req: &Request<B>,
) -> Result<(usize, Option<HeaderValue>), Stop> {
    let host: Option<HeaderValue> = match req.uri().authority() {
        Some(a) => {
            if req.version() == Version::HTTP_2 && !host_names_authority(req, a.as_str()) {
                return Err(ErrorKind::HostMismatch.into());
            }
            let hostport = a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h);
            HeaderValue::from_str(hostport).ok()
        }
        None => req.headers().get(header::HOST).cloned(),
    };
    let host_str = host.as_ref().and_then(|h| h.to_str().ok());
    // `[[site_rule]]`s first (HAProxy's use_backend), then the sites'
    // hosts and path prefixes.
    let chosen = match rules::site(ctx, snap, req, ex.start(), &ex.track)? {
        Some(by_rule) => Some(by_rule),
        None => snap.routes.route(host_str, req.uri().path()),
    };
    let Some(site) = chosen else {
        return Err(ErrorKind::NoSite.into());
    };
    ex.routed(site);
    Ok((site, host))
}

/// Phase 2, continued: the chosen site's own request rules (HAProxy's
/// backend `http-request`). A Host they set is the one the node gets.
fn site_request<B>(
    ctx: &ConnCtx,
    snap: &Snapshot,
    site: usize,
    req: &mut Request<B>,
    start: Instant,
    host: &mut Option<HeaderValue>,
    track: &mut crate::rules::stick::Tracking,
) -> Result<(), Stop> {
    let list = snap.config.rules.of_site(site);
    if list.is_empty() {
        return Ok(());
    }
    rules::request(ctx, snap, list, req, start, track)?;
    if req.uri().authority().is_none() {
        *host = req.headers().get(header::HOST).cloned();
    }
    Ok(())
}

/// Phase 3: the proxy-wide admission queue (`[qos]`); waits only when the
/// proxy is at `qos.max_inflight`. Returns the time waited.
async fn admit(ex: &mut Exchange, snap: &Snapshot, site: usize) -> Result<Duration, Stop> {
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
            return Err(kind.into());
        }
    }
    Ok(t_admit.map_or(Duration::ZERO, |t| t.elapsed()))
}

/// Phase 4: the request as the node gets it.
fn upstream_request(
    ex: &mut Exchange,
    ctx: &ConnCtx,
    snap: &Snapshot,
    req: Request<ClientBody>,
    present: Present,
    host: Option<HeaderValue>,
    upgrade: bool,
) -> attempt::Outgoing {
    let version = req.version();
    let (mut parts, body) = req.into_parts();
    let site = ex.site.and_then(|s| snap.config.sites.get(s));
    if let Some(conf) = site.and_then(|s| s.compression.as_ref()) {
        // What the client accepts, read before the head moves on.
        ex.compress = compress::offer(conf, &parts.method, version, &parts.headers);
        if conf.offload {
            parts.headers.remove(header::ACCEPT_ENCODING);
        }
    }
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
    if ex.sticky.is_some() {
        if let Some(st) = ex.site.and_then(|s| snap.backends.sticky(s)) {
            sticky::strip(st, &mut parts.headers);
        }
    }
    let host_str = host.as_ref().and_then(|h| h.to_str().ok());
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
    let has_body = !body.is_end_stream();
    let progress = has_body.then(|| Arc::new(AtomicU64::new(0)));
    let body = RequestBody::new(
        body,
        snap.config.timeouts.client,
        progress.clone(),
        ex.start(),
    );
    attempt::Outgoing::new(parts, body, progress)
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

#[cfg(test)]
mod tests;
