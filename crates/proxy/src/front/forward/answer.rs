//! What the client gets: phase 6, the node's response head filtered
//! ([`response_filter`]), or the proxy's own answer ([`error`], [`reply`]).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::super::error::{ErrorKind, ErrorSource};
use super::super::exchange::{head_bytes, Exchange};
use super::super::headers::{self, Present};
use super::super::response::ResponseBody;
use super::super::upstream::NodeBody;
use super::super::{compress, stats};
use super::attempt::{Answered, ClientUpgrade};

/// A response the proxy makes itself (an error, or what a rule answers):
/// `Content-Length` and `Via` are added when it is sent.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Phase 6: the node's response head as the client gets it; its body
/// streams back (the exchange settles when it ends), or, after a `101`
/// to an upgrade the client asked for, both connections become a tunnel.
pub fn response_filter(mut ex: Exchange, answered: Answered) -> Response<ResponseBody> {
    let Answered {
        resp,
        client_upgrade,
    } = answered;
    ex.status = resp.status().as_u16();
    ex.outcome_pending = true;
    let (mut parts, mut body) = resp.into_parts();
    let upgraded = parts.status == StatusCode::SWITCHING_PROTOCOLS;
    if upgraded {
        // The node's socket becomes one end of a tunnel; the client's
        // connection becomes the other once hyper has sent it this head.
        let node = std::mem::replace(&mut body, NodeBody::ended_empty()).into_upgraded();
        match (client_upgrade, node) {
            (Some(client), Some(node)) => {
                ex.ctx().conn.upgraded.store(true, Ordering::Relaxed);
                tokio::spawn(tunnel(client, node));
            }
            _ => {
                // RFC 9110 section 15.2.2: a 101 answers an Upgrade the
                // client asked for, never anything else.
                tracing::warn!("node switched protocols without an upgrade request");
                ex.outcome_pending = false;
                return error(ex, ErrorKind::UpstreamProtocol);
            }
        }
    }
    let present = Present::scan(&parts.headers);
    headers::strip_hop_by_hop(&mut parts.headers, present, upgraded);
    if let Some(a) = super::rules::response(&ex, parts.status, &mut parts.headers) {
        // The node's answer is replaced: its connection closes with the
        // unread body.
        drop(body);
        ex.outcome_pending = false;
        return reply(
            ex,
            Reply {
                status: a.status,
                headers: a.headers,
                body: a.body,
            },
        );
    }
    if ex.sticky.is_some() {
        super::sticky::response(&ex, parts.status, &mut parts.headers);
    }
    headers::add_via(&mut parts.headers, present, &ex.snap.via_response);
    let encoder = compression(&ex, parts.status, &mut parts.headers);
    ex.bytes = head_bytes(parts.status, &parts.headers);
    let idle = ex.snap.config.timeouts.server;
    let body = match encoder {
        Some(e) => ResponseBody::compressed(body, idle, ex, e),
        None => ResponseBody::upstream(body, idle, ex),
    };
    Response::from_parts(parts, body)
}

/// The site's `[site.compression]` applied to a response head; the
/// encoder when the body is to be compressed.
fn compression(
    ex: &Exchange,
    status: StatusCode,
    headers: &mut HeaderMap,
) -> Option<Box<compress::Encoder>> {
    let site = ex.site?;
    let conf = ex.snap.config.sites.get(site)?.compression.as_ref()?;
    let over_cpu = ex.ctx().proxy.cpu.get() > ex.snap.config.global.compression_max_cpu;
    let compress::Decision::Encode(coding) =
        compress::choose(conf, ex.compress, over_cpu, status, headers)
    else {
        return None;
    };
    match compress::Encoder::new(coding, conf.level) {
        Ok(e) => {
            if let Some(s) = ex.snap.stats.sites.get(site) {
                s.compressed[stats::coding_index(coding)].increment(1);
            }
            Some(Box::new(e))
        }
        Err(e) => {
            // The head says compressed: an encoder that cannot start is a
            // broken response, as a node that broke its body.
            tracing::error!(error = %e, coding = coding.token(), "cannot start the compressor");
            headers.remove(header::CONTENT_ENCODING);
            None
        }
    }
}

/// Copies bytes both ways between an upgraded client and node connection;
/// `early` is what the node sent right after its 101, already read.
async fn tunnel(client: ClientUpgrade, node: (TcpStream, Bytes)) {
    match client {
        ClientUpgrade::H1(c) => match c.get().await {
            Ok(c) => splice(c, node).await,
            Err(e) => tracing::warn!(error = %e, "protocol upgrade failed"),
        },
        ClientUpgrade::Hyper(c) => match c.await {
            Ok(c) => splice(TokioIo::new(c), node).await,
            Err(e) => tracing::warn!(error = %e, "protocol upgrade failed"),
        },
    }
}

async fn splice<C>(mut client: C, (mut node, early): (TcpStream, Bytes))
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    if !early.is_empty() {
        if let Err(e) = client.write_all(&early).await {
            tracing::debug!(error = %e, "upgraded connection ended with an error");
            return;
        }
    }
    match tokio::io::copy_bidirectional(&mut client, &mut node).await {
        Ok((up, down)) => tracing::debug!(up, down, "upgraded connection closed"),
        Err(e) => tracing::debug!(error = %e, "upgraded connection ended with an error"),
    }
}

/// The proxy's own response: `reply` with its length and `Via`.
pub fn reply(mut ex: Exchange, reply: Reply) -> Response<ResponseBody> {
    let Reply {
        status,
        mut headers,
        body,
    } = reply;
    ex.status = status.as_u16();
    ex.outcome_pending = false;
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    headers.insert(header::VIA, ex.snap.via_response.clone());
    ex.bytes = head_bytes(status, &headers);
    let mut resp = Response::new(ResponseBody::full(body, ex));
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

/// The proxy's own response for a failure, with a short text body.
pub fn error(mut ex: Exchange, kind: ErrorKind) -> Response<ResponseBody> {
    ex.error = Some(kind);
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
        ) => Bytes::from(unavailable(&ex, kind, site)),
        _ => Bytes::from_static(kind.message().as_bytes()),
    };
    let close = kind.source() == ErrorSource::Client && ex.version != Version::HTTP_2;
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if kind.overload() {
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if close {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let status = kind.status();
    // A configured error page (HAProxy's errorfile) replaces the text.
    if let Some(mut page) = super::rules::page(&ex.snap, status) {
        if close {
            page.headers
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        return reply(
            ex,
            Reply {
                status: page.status,
                headers: page.headers,
                body: page.body,
            },
        );
    }
    reply(
        ex,
        Reply {
            status,
            headers: h,
            body: text,
        },
    )
}

/// The text of a 503 that names the site and why none of its nodes serves.
fn unavailable(ex: &Exchange, kind: ErrorKind, site: usize) -> String {
    let name = ex.snap.site_names.get(site).map_or("?", |n| n);
    let qos = &ex.snap.config.qos;
    match kind {
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
    }
}
