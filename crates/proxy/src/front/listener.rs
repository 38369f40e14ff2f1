//! Client-facing listeners: bind, accept (bounded by
//! `limits.max_connections`), TLS handshake, and one hyper connection per
//! client speaking HTTP/1.1 or HTTP/2 (prior knowledge on plain listeners;
//! on TLS ones only what ALPN chose, held to it by [`ConnIo`]). On shutdown the accept loop stops (so new connections
//! are refused) and every connection is asked to finish gracefully.
//!
//! On an `accept_proxy` listener each connection first gives its PROXY
//! protocol header (read before any TLS handshake, within
//! `timeouts.http_request`); the client address it carries is the
//! connection's from then on. A missing or malformed header closes the
//! connection without a response, and so does a peer outside
//! `accept_proxy_from`, before anything is read.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Instant, SystemTime};

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

use super::access_log::{AccessRecord, Counts, Timers};
use super::error::ProxyError;
use super::io::{ConnIo, ConnShared, IoTimeouts, Protocol};
use super::restart::Inherited;
use super::serve1::{self, Socket};
use super::state::{ConnCtx, Runtime};
use super::streams::{StreamExec, Streams};
use super::{forward, stats, tls, upstream};
use crate::config::{Config, IpNetwork, Listener};
use crate::proxy_protocol::{self, Header};

/// A listener bound at start-up.
pub struct Bound {
    pub name: Arc<str>,
    pub addr: SocketAddr,
    tcp: std::net::TcpListener,
    tls: Option<tls::Acceptor>,
    /// On an `accept_proxy` listener: the peers allowed to send the header.
    accept_proxy: Option<Arc<[IpNetwork]>>,
}

/// Binds every listener (and loads their certificates) before anything is
/// served, so a bad address or certificate stops start-up with a clear
/// error. A listener whose address matches a socket handed over by a
/// restart takes that socket instead of binding.
pub fn bind_all(
    config: &Config,
    inherited: &mut Inherited,
    acme: Option<&Arc<crate::acme::Acme>>,
) -> Result<Vec<Bound>, ProxyError> {
    config
        .listeners
        .iter()
        .map(|l| bind(l, inherited, acme))
        .collect()
}

fn bind(
    l: &Listener,
    inherited: &mut Inherited,
    acme: Option<&Arc<crate::acme::Acme>>,
) -> Result<Bound, ProxyError> {
    let err = |source| ProxyError::Bind {
        listener: l.name.clone(),
        addr: l.listen,
        source,
    };
    let tcp = match inherited.take(l.listen) {
        Some(tcp) => {
            tracing::info!(listener = %l.name, address = %l.listen, "listening socket handed over by the previous process");
            tcp
        }
        None => bind_std(l.listen).map_err(err)?,
    };
    let addr = tcp.local_addr().map_err(err)?;
    let tls = match &l.tls {
        None => None,
        Some(t) => Some(tls::Acceptor {
            config: tls::server_config(&l.name, t, acme)?,
            acme: acme.cloned(),
        }),
    };
    Ok(Bound {
        name: Arc::from(l.name.as_str()),
        addr,
        tcp,
        tls,
        accept_proxy: l
            .accept_proxy
            .then(|| Arc::from(l.accept_proxy_from.as_slice())),
    })
}

/// A non-blocking listening socket with `SO_REUSEADDR` (restarts do not
/// wait for TIME_WAIT) and a deep accept backlog.
pub fn bind_std(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Takes a listening socket out of the LISTEN state for every process and
/// descriptor that shares it (`shutdown(2)` on a listening socket: Linux
/// stops listening and resets the connections queued unaccepted). From
/// then on connection attempts are refused, so an L4 health check or a
/// load balancer in front sees the proxy go at once, not when the last
/// in-flight request of the drain ends. Only for a stop: after a restart
/// the new process accepts on the same socket.
pub fn stop_listening(socket: &std::net::TcpListener) {
    if let Err(e) = socket2::SockRef::from(socket).shutdown(std::net::Shutdown::Read) {
        tracing::warn!(address = ?socket.local_addr().ok(), error = %e, "cannot stop listening; new connections wait in the queue until the process exits");
    }
}

/// [`bind_std`] registered with the current Tokio runtime.
pub fn bind_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::from_std(bind_std(addr)?)
}

/// What every worker shares about one listener.
pub struct Shared {
    pub name: Arc<str>,
    pub addr: SocketAddr,
    tcp: std::net::TcpListener,
    tls: Option<tls::Acceptor>,
    accept_proxy: Option<Arc<[IpNetwork]>>,
    builder: auto::Builder<StreamExec>,
    limit: Arc<Semaphore>,
    gauge: metrics::Gauge,
    /// `rdmalb_connections_limited_total{listener}`: times accepting had
    /// to wait for a slot at `limits.max_connections`.
    limited: metrics::Counter,
    /// Connections open on this listener (the access log's `feconn`).
    connections: Arc<AtomicUsize>,
    /// Connections accepted, and the most open at once (`show stat`'s
    /// FRONTEND `stot` and `smax`).
    counters: Arc<FrontendCounters>,
    timeouts: IoTimeouts,
    /// What its HTTP/1 connections are held to.
    h1: Arc<serve1::Limits>,
}

/// A listener's totals, read by `show stat` (its FRONTEND row):
/// connections, and the requests answered on it by class (1xx..5xx, cut)
/// with their response bytes.
#[derive(Debug, Default)]
pub struct FrontendCounters {
    pub accepted: std::sync::atomic::AtomicU64,
    pub most_open: AtomicUsize,
    pub responses: [std::sync::atomic::AtomicU64; 6],
    pub bytes_out: std::sync::atomic::AtomicU64,
    /// Requests refused before reaching a site (bad heads).
    pub request_errors: std::sync::atomic::AtomicU64,
    /// Connections accepted per second (measured by the reader), and the
    /// highest such figure.
    pub rate: crate::balance::Rate,
    pub rate_max: std::sync::atomic::AtomicU64,
}

impl FrontendCounters {
    /// One answered request of `class` (see `stats::class_index`).
    pub fn answered(&self, class: usize, bytes: u64) {
        if let Some(c) = self.responses.get(class) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// What `show stat` reads of a listener.
#[derive(Debug, Clone)]
pub struct FrontendStats {
    pub name: Arc<str>,
    pub open: Arc<AtomicUsize>,
    pub counters: Arc<FrontendCounters>,
}

impl Shared {
    /// The listener's counters for `show stat`.
    pub fn stats(&self) -> FrontendStats {
        FrontendStats {
            name: Arc::clone(&self.name),
            open: Arc::clone(&self.connections),
            counters: Arc::clone(&self.counters),
        }
    }

    /// The listening socket (handed over on a restart).
    pub fn socket(&self) -> &std::net::TcpListener {
        &self.tcp
    }

    pub fn new(bound: Bound, config: &Config) -> Shared {
        Shared {
            gauge: metrics::gauge!("rdmalb_connections", "listener" => bound.name.to_string()),
            limited: metrics::counter!("rdmalb_connections_limited_total", "listener" => bound.name.to_string()),
            name: bound.name,
            addr: bound.addr,
            tcp: bound.tcp,
            tls: bound.tls,
            accept_proxy: bound.accept_proxy,
            builder: builder(config),
            limit: Arc::new(Semaphore::new(config.limits.max_connections)),
            connections: Arc::default(),
            counters: Arc::default(),
            timeouts: IoTimeouts {
                http_request: config.timeouts.http_request,
                keep_alive: config.timeouts.keep_alive,
                client: config.timeouts.client,
            },
            h1: Arc::new(serve1::Limits {
                max_headers: config.limits.max_headers,
                max_header_bytes: config.limits.max_header_bytes,
                timeouts: IoTimeouts {
                    http_request: config.timeouts.http_request,
                    keep_alive: config.timeouts.keep_alive,
                    client: config.timeouts.client,
                },
                parked: metrics::counter!("rdmalb_connections_parked_total"),
            }),
        }
    }
}

/// Runs one worker: a current-thread runtime (no work stealing, no
/// cross-thread wakeups between a client connection and its node
/// connections) accepting on every listener — each worker registers its
/// own handle of the shared listening socket — until shutdown, then until
/// its own connections have ended.
pub fn worker(
    id: usize,
    rt: tokio::runtime::Runtime,
    listeners: Vec<Arc<Shared>>,
    runtime: Arc<Runtime>,
    shutdown: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    upstream::set_worker(id + 1);
    super::io::hold_writes_until_park();
    rt.block_on(async move {
        let (local, mut done) = mpsc::channel::<()>(1);
        for l in listeners {
            let tcp = l.tcp.try_clone().and_then(TcpListener::from_std);
            match tcp {
                Ok(tcp) => {
                    tokio::spawn(serve(
                        l,
                        tcp,
                        Arc::clone(&runtime),
                        shutdown.clone(),
                        drain.clone(),
                        local.clone(),
                    ));
                }
                Err(e) => tracing::error!(listener = %l.name, worker = id, error = %e, "worker cannot accept on this listener"),
            }
        }
        drop(local);
        drop(drain);
        // Every accept loop and connection of this worker holds `local`.
        let _ = done.recv().await;
    });
}

fn builder(config: &Config) -> auto::Builder<StreamExec> {
    let limits = &config.limits;
    // HTTP/1 is served by `serve1`; hyper serves HTTP/2 only, its streams
    // in their connection's task (`streams`).
    let mut b = auto::Builder::new(StreamExec).http2_only();
    b.http2()
        .timer(TokioTimer::new())
        .max_header_list_size(limits.max_header_bytes.min(u32::MAX as usize) as u32)
        .max_concurrent_streams(256)
        .keep_alive_interval(Some(config.timeouts.keep_alive))
        .keep_alive_timeout(config.timeouts.client);
    b
}

/// Accepts connections until `shutdown` turns true. Each connection task
/// holds clones of `drain` (the process waits for it) and `local` (the
/// worker thread waits for it).
async fn serve(
    l: Arc<Shared>,
    tcp: TcpListener,
    runtime: Arc<Runtime>,
    mut shutdown: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
    local: mpsc::Sender<()>,
) {
    loop {
        // A free slot is taken at once; only at `limits.max_connections`
        // does the loop wait for one (or for shutdown).
        let permit = match Arc::clone(&l.limit).try_acquire_owned() {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => break,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                // The listener is full: accepting waits (a connection
                // flood shows here, once per wait).
                l.limited.increment(1);
                tokio::select! {
                p = Arc::clone(&l.limit).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
                }
            }
        };
        let (mut stream, client) = tokio::select! {
            r = tcp.accept() => match r {
                Ok(x) => x,
                // The socket stopped listening for a drain ([`stop_listening`]).
                Err(_) if *shutdown.borrow() => break,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listener = %l.name, error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
        };
        let _ = stream.set_nodelay(true);
        let l = Arc::clone(&l);
        let runtime = Arc::clone(&runtime);
        let shutdown = shutdown.clone();
        let drain = drain.clone();
        let local = local.clone();
        l.gauge.increment(1.0);
        let open = l.connections.fetch_add(1, Ordering::Relaxed) + 1;
        l.counters.accepted.fetch_add(1, Ordering::Relaxed);
        l.counters.most_open.fetch_max(open, Ordering::Relaxed);
        runtime.connections.fetch_add(1, Ordering::Relaxed);
        // The connection's task. Its steps are written here, not in an
        // `async fn` of their own: each layer of futures keeps its
        // arguments, and this future is all an idle connection costs.
        tokio::spawn(async move {
            let ctx = Box::pin(accepted(&l, &mut stream, client, Arc::clone(&runtime))).await;
            match (ctx, &l.tls) {
                (None, _) => {}
                (Some(ctx), None) => {
                    let deadline = ctx.conn.accepted + l.timeouts.http_request;
                    match sniff(&stream, deadline).await {
                        Some(Protocol::Http2) => {
                            serve_h2(stream, Protocol::Detect, ctx, &l, shutdown).await
                        }
                        Some(_) => serve1::serve(stream, ctx, Arc::clone(&l.h1), shutdown).await,
                        None => {}
                    }
                }
                // Boxed: the handshake and the TLS session are large, and a
                // plain connection's task (all of it, while the connection
                // is parked) should not carry room for them.
                (Some(ctx), Some(acceptor)) => {
                    Box::pin(serve_tls(stream, acceptor, &l, ctx, shutdown)).await
                }
            }
            runtime.connections.fetch_sub(1, Ordering::Relaxed);
            l.connections.fetch_sub(1, Ordering::Relaxed);
            l.gauge.decrement(1.0);
            drop(permit);
            drop(drain);
            drop(local);
        });
    }
    tracing::debug!(listener = %l.name, address = %l.addr, "accept loop stopped");
}

/// The connection's context: its client address (from the PROXY header on
/// an `accept_proxy` listener) and the address it reached. `None`: the
/// header was missing or malformed, the connection is to be closed.
async fn accepted(
    l: &Shared,
    stream: &mut TcpStream,
    peer: SocketAddr,
    runtime: Arc<Runtime>,
) -> Option<Arc<ConnCtx>> {
    let mut client = peer;
    let mut local = None;
    if let Some(from) = &l.accept_proxy {
        // Only the peers named may say who the client is: anyone else
        // could claim any address, and with it `trusted_proxies`.
        if !from.iter().any(|n| n.contains(peer.ip())) {
            stats::client_error("proxy_untrusted");
            tracing::debug!(peer = %peer, listener = %l.name, "peer not in accept_proxy_from: connection closed");
            return None;
        }
        match proxy_protocol::read_header(stream, l.timeouts.http_request).await {
            Ok(Header::Proxied {
                source,
                destination,
            }) => {
                client = source;
                local = Some(destination);
            }
            Ok(Header::Local) => {}
            Err(e) => {
                stats::client_error("proxy_header");
                tracing::debug!(peer = %peer, listener = %l.name, error = %e, "no valid PROXY header: connection closed");
                return None;
            }
        }
    }
    let local = match local {
        Some(a) => a,
        // A wildcard listener knows the address a connection reached only
        // by asking the socket; only a PROXY header to a node needs it.
        None if l.addr.ip().is_unspecified() && runtime.snapshot.load().sends_proxy => {
            stream.local_addr().unwrap_or(l.addr)
        }
        None => l.addr,
    };
    let tls = l.tls.is_some();
    Some(Arc::new(ConnCtx {
        proxy: runtime,
        client,
        local,
        listener: Arc::clone(&l.name),
        listener_connections: Arc::clone(&l.connections),
        frontend: Arc::clone(&l.counters),
        tls,
        client_id: super::headers::ClientId::cached(
            client.ip(),
            if tls { "https" } else { "http" },
        ),
        conn: Arc::new(ConnShared::new(Instant::now())),
        tls_info: std::sync::OnceLock::new(),
        stick: Default::default(),
    }))
}

/// The TLS handshake, then the stream as [`serve_stream`] serves it.
async fn serve_tls(
    stream: TcpStream,
    acceptor: &tls::Acceptor,
    l: &Shared,
    ctx: Arc<ConnCtx>,
    shutdown: watch::Receiver<bool>,
) {
    let accepted = tokio::time::timeout(l.timeouts.http_request, acceptor.accept(stream)).await;
    let stream = match accepted {
        Ok(Ok(Some(s))) => s,
        // A tls-alpn-01 validation: the handshake was all it wanted.
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            tracing::debug!(client = %ctx.client, listener = %ctx.listener, error = %e, "TLS handshake failed");
            stats::client_error("tls");
            return;
        }
        Err(_) => {
            tracing::debug!(client = %ctx.client, listener = %ctx.listener, "TLS handshake timed out");
            stats::client_error("tls");
            return;
        }
    };
    let session = stream.get_ref().1;
    let _ = ctx.tls_info.set(super::state::TlsInfo {
        sni: session.server_name().map(Into::into),
        // A certificate the client sent has verified: the handshake
        // would have failed otherwise (HAProxy's `ssl_c_verify` 0).
        cert: crate::rules::ClientCert {
            present: session.peer_certificates().is_some_and(|c| !c.is_empty()),
            verify: 0,
        },
    });
    // ALPN decides (RFC 9113 section 3.2); no ALPN is HTTP/1.1.
    match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => serve_h2(stream, Protocol::Http2, ctx, l, shutdown).await,
        _ => serve1::serve(stream, ctx, Arc::clone(&l.h1), shutdown).await,
    }
}

/// The HTTP/2 connection preface (RFC 9113 section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// On a cleartext listener: whether the client starts with the HTTP/2
/// preface (prior knowledge), looking at its first bytes without taking
/// them. `None`: it closed first. A client that sends nothing by
/// `deadline` is left to the HTTP/1 server's own timers.
async fn sniff(stream: &TcpStream, deadline: Instant) -> Option<Protocol> {
    let mut first = [0u8; 24];
    loop {
        let peeked = tokio::time::timeout_at(deadline.into(), stream.peek(&mut first)).await;
        let n = match peeked {
            Err(_) => return Some(Protocol::Http1),
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => n,
        };
        if first[..n] != H2_PREFACE[..n] {
            return Some(Protocol::Http1);
        }
        if n == H2_PREFACE.len() {
            return Some(Protocol::Http2);
        }
        // A preface in pieces (or a slow "P..."): look again shortly.
        if Instant::now() >= deadline {
            return Some(Protocol::Http1);
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// Serves an HTTP/2 connection (hyper's server, held to the protocol by
/// [`ConnIo`]).
async fn serve_h2<S: Socket>(
    stream: S,
    protocol: Protocol,
    ctx: Arc<ConnCtx>,
    l: &Shared,
    shutdown: watch::Receiver<bool>,
) {
    let io = ConnIo::new(stream, Arc::clone(&ctx.conn), l.timeouts, protocol);
    // Boxed, like the handshake.
    Box::pin(drive(io, ctx, &l.builder, l.timeouts.keep_alive, shutdown)).await;
}

/// Serves one HTTP/2 connection; on shutdown asks it to finish
/// gracefully (GOAWAY, then the streams in flight end).
async fn drive<I>(
    io: I,
    ctx: Arc<ConnCtx>,
    builder: &auto::Builder<StreamExec>,
    idle_limit: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_ctx = Arc::clone(&ctx);
    let svc = service_fn(move |req| {
        let ctx = Arc::clone(&svc_ctx);
        forward::handle(ctx, req.map(super::body::ClientBody::H2), None)
    });
    // Boxed: the connection state is large and lives as long as it does.
    let mut conn = Box::pin(builder.serve_connection_with_upgrades(TokioIo::new(io), svc));
    // HTTP/2 has no per-request read to time out on: a connection that
    // started no request for `keep_alive` is sent GOAWAY instead.
    let mut idle = std::pin::pin!(None::<tokio::time::Sleep>);
    let mut streams = Streams::default();
    let mut seen = u64::MAX;
    let result = loop {
        let mut stop = std::pin::pin!(rdmalb_base::shutdown::requested(&mut shutdown));
        let woke = std::future::poll_fn(|cx| {
            // Polled first: the connection (and its HTTP/2 streams) is
            // what wakes this task.
            if let Poll::Ready(r) = streams.poll_conn(conn.as_mut(), cx) {
                return Poll::Ready(Woke::Served(r));
            }
            if stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Shutdown);
            }
            if idle.is_none() {
                idle.set(Some(tokio::time::sleep(idle_limit)));
            }
            if let Some(t) = idle.as_mut().as_pin_mut() {
                if t.poll(cx).is_ready() {
                    return Poll::Ready(Woke::Idle);
                }
            }
            Poll::Pending
        })
        .await;
        match woke {
            Woke::Served(r) => break r,
            Woke::Shutdown => {
                conn.as_mut().graceful_shutdown();
                break streams.finish(conn.as_mut()).await;
            }
            Woke::Idle => {
                let started = ctx.conn.started.load(Ordering::Relaxed);
                if started == seen && ctx.conn.active.load(Ordering::Relaxed) == 0 {
                    tracing::debug!(client = %ctx.client, listener = %ctx.listener, "idle HTTP/2 connection: GOAWAY");
                    conn.as_mut().graceful_shutdown();
                    break streams.finish(conn.as_mut()).await;
                }
                seen = started;
                if let Some(t) = idle.as_mut().as_pin_mut() {
                    t.reset(tokio::time::Instant::now() + idle_limit);
                }
            }
        }
    };
    if ctx.conn.bad_preface.load(Ordering::Relaxed) {
        // ALPN chose h2 but the client did not start HTTP/2.
        stats::client_error("h2_preface");
        tracing::debug!(client = %ctx.client, listener = %ctx.listener, "no HTTP/2 connection preface where ALPN chose h2: closed");
        return;
    }
    let Err(e) = result else { return };
    if let Some(kind) = h2_goaway_kind(&*e) {
        stats::client_error(kind);
        tracing::debug!(client = %ctx.client, listener = %ctx.listener, error = %e, "HTTP/2 connection error: GOAWAY sent");
        return;
    }
    tracing::debug!(client = %ctx.client, listener = %ctx.listener, error = %e, "client connection ended with an error")
}

/// The `rdmalb_client_errors_total` kind of an HTTP/2 connection this
/// proxy ended with GOAWAY because of what the client sent (the h2 crate's
/// guards: too many streams reset before they were accepted — the rapid
/// reset of CVE-2023-44487 —, an endless CONTINUATION sequence, a header
/// block that does not decode, a frame too large...), by the GOAWAY's
/// error code; `None` for any other end (the client's own GOAWAY, I/O).
/// Without it those connections ended with a debug log line only, so the
/// attacks were invisible in the metrics.
pub(crate) fn h2_goaway_kind(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<h2::Error>() {
            if !h.is_go_away() || h.is_remote() {
                return None;
            }
            return Some(match h.reason()? {
                h2::Reason::NO_ERROR => return None,
                h2::Reason::PROTOCOL_ERROR => "h2_protocol_error",
                h2::Reason::FLOW_CONTROL_ERROR => "h2_flow_control_error",
                h2::Reason::SETTINGS_TIMEOUT => "h2_settings_timeout",
                h2::Reason::FRAME_SIZE_ERROR => "h2_frame_size_error",
                h2::Reason::COMPRESSION_ERROR => "h2_compression_error",
                h2::Reason::ENHANCE_YOUR_CALM => "h2_enhance_your_calm",
                _ => "h2_other",
            });
        }
        cur = err.source();
    }
    None
}

/// What woke [`drive`]'s wait.
enum Woke<T> {
    /// The connection ended.
    Served(T),
    /// Shutdown was requested.
    Shutdown,
    /// An HTTP/2 connection's idle check is due.
    Idle,
}

/// Accounts for a request whose head never reached the service.
pub(super) fn head_failure(
    ctx: &ConnCtx,
    status: u16,
    termination: &'static str,
    kind: &'static str,
) {
    stats::client_error(kind);
    ctx.frontend.request_errors.fetch_add(1, Ordering::Relaxed);
    ctx.frontend.answered(stats::class_index(status, false), 0);
    tracing::debug!(client = %ctx.client, listener = %ctx.listener, status, "bad request head");
    if ctx.proxy.access.enabled() {
        let tq = super::access_log::ms(ctx.conn.head_elapsed(Instant::now()));
        ctx.proxy.access.log(AccessRecord {
            client: ctx.client,
            date: SystemTime::now()
                .checked_sub(std::time::Duration::from_millis(tq.max(0) as u64))
                .unwrap_or_else(SystemTime::now),
            listener: Arc::clone(&ctx.listener),
            tls: ctx.tls,
            site: None,
            node: None,
            timers: Timers {
                tq,
                ta: tq,
                ..Timers::NONE
            },
            status,
            bytes: 0,
            termination,
            counts: Counts {
                actconn: ctx.proxy.connections.load(Ordering::Relaxed),
                feconn: ctx.listener_connections.load(Ordering::Relaxed),
                ..Counts::default()
            },
            queues: (0, 0),
            method: None,
            target: String::new(),
            version: http::Version::HTTP_11,
        });
    }
}
