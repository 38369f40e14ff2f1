//! Errors of the proxy: start-up errors ([`ProxyError`]) and the per-request
//! failure kinds ([`ErrorKind`]) that decide the status code the client
//! sees, the termination state in the access log, and whether a retry is
//! safe.
//!
//! Per request, as in pingora-error, every failure records where it came
//! from ([`ErrorSource`]: the client, the upstream node, or the proxy
//! itself) and whether retrying it on another node is safe ([`RetryType`]).

use std::net::SocketAddr;

use http::StatusCode;

/// Errors that stop the proxy from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A listener address could not be bound.
    #[error("cannot listen on {addr} (listener `{listener}`): {source}")]
    Bind {
        listener: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The admin (metrics/status) address could not be bound.
    #[error("cannot listen on {addr} (admin listener): {source}")]
    AdminBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A stats socket could not be bound.
    #[error("cannot listen on {socket} (stats socket): {source}")]
    StatsSocketBind {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    /// A TLS certificate or key could not be loaded.
    #[error("listener `{listener}`: TLS: {message}")]
    Tls { listener: String, message: String },
    /// The `[acme]` storage folder could not be set up.
    #[error("ACME: {message}")]
    Acme { message: String },
    /// Installing a signal handler failed.
    #[error("cannot install the {signal} handler: {source}")]
    Signal {
        signal: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A worker thread or its runtime could not be started.
    #[error("cannot start a worker thread: {source}")]
    Worker {
        #[source]
        source: std::io::Error,
    },
    /// A node's window transport cannot work on this host or with this
    /// config (no RDMA device for verbs, unusable PSK file).
    #[error("node windows: {0}")]
    Windows(#[from] rdmalb_window::WindowError),
    /// The access log file could not be opened.
    #[error("cannot open the access log {path}: {source}")]
    AccessLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where a request failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorSource {
    /// The client sent something wrong, too slowly, or went away.
    Client,
    /// The node refused, timed out, or broke the protocol.
    Upstream,
    /// The proxy itself (routing, no node available).
    Internal,
}

/// Whether a failed attempt may be replayed on another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryType {
    /// Nothing reached the node: replaying is safe for any method.
    Safe,
    /// The node's connection broke before a response head, after bytes of
    /// the request may have reached it: replay only an idempotent request
    /// without a body (RFC 9110 section 9.2.2; `global.retry_on`
    /// `empty-response`).
    Idempotent,
    /// Bytes may have reached the node, or it answered: never replay.
    Unsafe,
}

/// A request-path failure. The variants map to the status the client sees
/// (when a response can still be sent) and to HAProxy-like termination
/// states in the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request head could not be parsed.
    BadRequest,
    /// An HTTP/1.1 request without exactly one Host header (RFC 9112
    /// section 3.2 requires 400).
    BadHost,
    /// An HTTP/2 request whose `Host` header names another host than its
    /// `:authority` (malformed by RFC 9113 section 8.3.1: 400).
    HostMismatch,
    /// The request names a transfer coding other than chunked (RFC 9112
    /// section 6.1 answers 501).
    UnknownTransferCoding,
    /// The request head exceeded `limits.max_header_bytes` or `max_headers`.
    HeadTooLarge,
    /// The request head did not arrive within `timeouts.http_request`.
    RequestTimeout,
    /// The client stopped sending its body for `timeouts.client`.
    ClientTimeout,
    /// The client closed the connection before the exchange finished.
    ClientAborted,
    /// No site matches the request's host and path, and no default site.
    NoSite,
    /// The site has nodes but none is up.
    AllDown,
    /// The site has no node at all.
    NoNodes,
    /// No free slot on the node within `timeouts.queue`.
    QueueTimeout,
    /// The proxy was at `qos.max_inflight` and the site already had
    /// `qos.max_queue` requests waiting.
    QosQueueFull,
    /// The proxy was at `qos.max_inflight` and no slot was freed for the
    /// request within `timeouts.queue`.
    QosTimeout,
    /// The TCP connection to the node was refused or failed.
    ConnectFailed,
    /// The TCP connection to the node did not complete within `timeouts.connect`.
    ConnectTimeout,
    /// The node did not answer (or stalled) within `timeouts.server`.
    UpstreamTimeout,
    /// The node closed the connection or sent something that is not HTTP.
    UpstreamProtocol,
}

impl ErrorKind {
    /// Status code sent to the client when the response has not started.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest | ErrorKind::BadHost | ErrorKind::HostMismatch => {
                StatusCode::BAD_REQUEST
            }
            ErrorKind::UnknownTransferCoding => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorKind::RequestTimeout | ErrorKind::ClientTimeout => StatusCode::REQUEST_TIMEOUT,
            // Nobody reads it, but the access log wants a code (nginx uses 499).
            ErrorKind::ClientAborted => StatusCode::BAD_REQUEST,
            ErrorKind::NoSite => StatusCode::NOT_FOUND,
            ErrorKind::AllDown
            | ErrorKind::NoNodes
            | ErrorKind::QueueTimeout
            | ErrorKind::QosQueueFull
            | ErrorKind::QosTimeout => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ConnectFailed | ErrorKind::UpstreamProtocol => StatusCode::BAD_GATEWAY,
            ErrorKind::ConnectTimeout | ErrorKind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// Where the failure came from.
    pub fn source(self) -> ErrorSource {
        match self {
            ErrorKind::BadRequest
            | ErrorKind::BadHost
            | ErrorKind::HostMismatch
            | ErrorKind::UnknownTransferCoding
            | ErrorKind::HeadTooLarge
            | ErrorKind::RequestTimeout
            | ErrorKind::ClientTimeout
            | ErrorKind::ClientAborted => ErrorSource::Client,
            ErrorKind::NoSite
            | ErrorKind::AllDown
            | ErrorKind::NoNodes
            | ErrorKind::QueueTimeout
            | ErrorKind::QosQueueFull
            | ErrorKind::QosTimeout => ErrorSource::Internal,
            ErrorKind::ConnectFailed
            | ErrorKind::ConnectTimeout
            | ErrorKind::UpstreamTimeout
            | ErrorKind::UpstreamProtocol => ErrorSource::Upstream,
        }
    }

    /// Whether the attempt may be replayed on another node: any request
    /// when nothing was sent to the node, an idempotent one without a body
    /// when the node's connection broke before answering.
    pub fn retry(self) -> RetryType {
        match self {
            ErrorKind::ConnectFailed | ErrorKind::ConnectTimeout => RetryType::Safe,
            ErrorKind::UpstreamProtocol => RetryType::Idempotent,
            _ => RetryType::Unsafe,
        }
    }

    /// HAProxy-style two-character termination state: first who ended the
    /// session (C client, S server, P proxy, c/s client/server timeout),
    /// then in which phase (R request, Q queue, C connect, H headers, D data).
    pub fn termination(self) -> &'static str {
        match self {
            ErrorKind::BadRequest
            | ErrorKind::BadHost
            | ErrorKind::HostMismatch
            | ErrorKind::UnknownTransferCoding
            | ErrorKind::HeadTooLarge => "PR",
            ErrorKind::RequestTimeout => "cR",
            ErrorKind::ClientTimeout => "cD",
            ErrorKind::ClientAborted => "CD",
            ErrorKind::NoSite => "PR",
            ErrorKind::AllDown | ErrorKind::NoNodes => "SC",
            ErrorKind::QueueTimeout | ErrorKind::QosTimeout => "sQ",
            ErrorKind::QosQueueFull => "PQ",
            ErrorKind::ConnectFailed => "SC",
            ErrorKind::ConnectTimeout => "sC",
            ErrorKind::UpstreamTimeout => "sH",
            ErrorKind::UpstreamProtocol => "SH",
        }
    }

    /// Label used in metrics (`rdmalb_upstream_errors_total{kind}` and
    /// `rdmalb_client_errors_total{kind}`).
    pub fn metric_kind(self) -> &'static str {
        match self {
            ErrorKind::BadRequest | ErrorKind::BadHost | ErrorKind::HostMismatch => "400",
            ErrorKind::UnknownTransferCoding => "501",
            ErrorKind::HeadTooLarge => "431",
            ErrorKind::RequestTimeout | ErrorKind::ClientTimeout => "408",
            ErrorKind::ClientAborted => "aborted",
            ErrorKind::NoSite => "404",
            ErrorKind::AllDown
            | ErrorKind::NoNodes
            | ErrorKind::QueueTimeout
            | ErrorKind::QosQueueFull
            | ErrorKind::QosTimeout => "503",
            ErrorKind::ConnectFailed | ErrorKind::ConnectTimeout => "connect",
            ErrorKind::UpstreamTimeout => "timeout",
            ErrorKind::UpstreamProtocol => "protocol",
        }
    }

    /// Whether the client should be told to come back (`Retry-After`):
    /// the proxy shed the request because it is overloaded.
    pub fn overload(self) -> bool {
        matches!(self, ErrorKind::QosQueueFull | ErrorKind::QosTimeout)
    }

    /// Short text body for the error response.
    pub fn message(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad request\n",
            ErrorKind::UnknownTransferCoding => {
                "not implemented: a transfer coding other than chunked (RFC 9112 section 6.1)\n"
            }
            ErrorKind::BadHost => {
                "bad request: an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2)\n"
            }
            ErrorKind::HostMismatch => {
                "bad request: the Host header names another host than :authority (RFC 9113 section 8.3.1)\n"
            }
            ErrorKind::HeadTooLarge => "request header fields too large\n",
            ErrorKind::RequestTimeout | ErrorKind::ClientTimeout => "request timeout\n",
            ErrorKind::ClientAborted => "client aborted\n",
            ErrorKind::NoSite => "no site is configured for this host\n",
            ErrorKind::AllDown => "no node of this site is up\n",
            ErrorKind::NoNodes => "this site has no nodes\n",
            ErrorKind::QueueTimeout => "all nodes of this site are busy\n",
            ErrorKind::QosQueueFull => {
                "service unavailable: the proxy is at its request limit and this site's queue is full\n"
            }
            ErrorKind::QosTimeout => {
                "service unavailable: the proxy is at its request limit and no slot came free in time\n"
            }
            ErrorKind::ConnectFailed => "bad gateway: cannot connect to the backend\n",
            ErrorKind::ConnectTimeout => "gateway timeout: connecting to the backend timed out\n",
            ErrorKind::UpstreamTimeout => "gateway timeout: the backend did not answer in time\n",
            ErrorKind::UpstreamProtocol => {
                "bad gateway: the backend closed or broke the connection\n"
            }
        }
    }
}

#[cfg(test)]
mod tests;
