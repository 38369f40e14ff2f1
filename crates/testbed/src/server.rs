//! `rdmalb-testbed testsrv`: a backend node with a capacity model.
//!
//! A real HTTP/1.1 keep-alive server (hyper) that behaves like a node of
//! fixed capacity, so that 8+ "nodes" fit on a 2-core machine and the
//! seeds' experiments are repeatable (docs/testbed.md, "Capacity model"):
//!
//! - W worker slots ([`Capacity`](crate::capacity::Capacity)); a request holds one for its service
//!   time. Up to Q more wait in a queue; beyond W + Q a request gets 503 at
//!   once (like Apache's MaxClients + ListenBacklog, seed 003's app tier).
//! - Service time by class: `GET /static/<size>` costs `static_base +
//!   size / bandwidth`; `GET /dynamic/<any>?cost=10ms&size=2k` costs `cost`
//!   (default `dynamic_cost`), of which `cpu_fraction` is a real CPU spin on
//!   the blocking pool and the rest a sleep.
//! - One site at a time, from the site file; SIGHUP re-reads it (in-flight
//!   requests finish unaffected; a broken file is logged and the old site
//!   stays). A Host that does not belong to the site → 421.
//! - `GET /health` answers 200 without taking a slot: it says the node
//!   serves this site, not that it has capacity (the load block says that).
//! - Every response carries `X-Served-By: <node>` and `X-Site: <site>`.

use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::capacity::{Capacity, Service};
use super::config::{self, format_size, parse_size, Model, NodeConfig, Site};
use rdmalb_base::duration;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("testsrv: {0}")]
    Config(#[from] config::ConfigErrors),
    #[error("testsrv: cannot listen on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("testsrv: cannot write pid file {path}: {source}")]
    PidFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("testsrv: cannot install signal handler: {0}")]
    Signal(#[source] std::io::Error),
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    Health,
    Static { size: u64 },
    Dynamic { size: u64, cost: Duration },
}

/// Parses the path and query into a class; `Err` carries the 4xx status
/// and message.
pub fn classify(
    model: &Model,
    path: &str,
    query: Option<&str>,
) -> Result<Class, (StatusCode, String)> {
    let bad = |m: String| (StatusCode::BAD_REQUEST, m);
    if path == "/health" {
        return Ok(Class::Health);
    }
    if let Some(size) = path.strip_prefix("/static/") {
        let size = parse_size(size).map_err(bad)?;
        if size > model.max_body {
            return Err(bad(format!(
                "size {} is above max_body {}",
                format_size(size),
                format_size(model.max_body)
            )));
        }
        return Ok(Class::Static { size });
    }
    if path.starts_with("/dynamic/") || path == "/dynamic" {
        let (mut size, mut cost) = (model.dynamic_size, model.dynamic_cost);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("cost", v)) => {
                    cost = duration::parse(v).map_err(|e| bad(format!("cost: {e}")))?;
                    if cost > model.max_cost {
                        return Err(bad(format!(
                            "cost {v} is above max_cost {}",
                            duration::format(model.max_cost)
                        )));
                    }
                }
                Some(("size", v)) => {
                    size = parse_size(v).map_err(|e| bad(format!("size: {e}")))?;
                    if size > model.max_body {
                        return Err(bad(format!(
                            "size {v} is above max_body {}",
                            format_size(model.max_body)
                        )));
                    }
                }
                _ => {} // other query parameters vary the URL (Zipf file sets)
            }
        }
        return Ok(Class::Dynamic { size, cost });
    }
    Err((
        StatusCode::NOT_FOUND,
        format!(
            "no such path {path} (accepted: /static/<size>, /dynamic/...?cost=&size=, /health)"
        ),
    ))
}

impl Class {
    /// The service time split into spin and sleep.
    pub fn service(&self, model: &Model) -> Service {
        match *self {
            Class::Health => Service {
                spin: Duration::ZERO,
                sleep: Duration::ZERO,
            },
            Class::Static { size } => Service {
                spin: Duration::ZERO,
                sleep: model.static_time(size),
            },
            Class::Dynamic { cost, .. } => {
                let spin = cost.mul_f64(model.cpu_fraction);
                Service {
                    spin,
                    sleep: cost.saturating_sub(spin),
                }
            }
        }
    }

    fn size(&self) -> u64 {
        match *self {
            Class::Health => 0,
            Class::Static { size } | Class::Dynamic { size, .. } => size,
        }
    }
}

/// A response body of `remaining` filler bytes, sent in 64 KiB slices of
/// one shared buffer (no per-request allocation).
#[derive(Debug)]
pub struct Filler {
    remaining: u64,
    chunk: Bytes,
}

impl Body for Filler {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = this.remaining.min(this.chunk.len() as u64);
        this.remaining -= n;
        Poll::Ready(Some(Ok(Frame::data(this.chunk.slice(..n as usize)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

type RespBody = Either<Full<Bytes>, Filler>;

/// The node's shared state.
#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub site: ArcSwap<Site>,
    pub capacity: Arc<Capacity>,
    name_header: HeaderValue,
    chunk: Bytes,
}

impl Node {
    pub fn new(name: &str, site: Site, model: Model) -> Node {
        Node {
            name: name.to_string(),
            site: ArcSwap::from_pointee(site),
            capacity: Arc::new(Capacity::new(model)),
            name_header: HeaderValue::from_str(name).unwrap_or(HeaderValue::from_static("invalid")),
            chunk: Bytes::from(vec![b'x'; 64 * 1024]),
        }
    }

    /// Answers one request (never fails: every problem is a status code).
    pub async fn handle(&self, req: Request<Incoming>) -> Response<RespBody> {
        let site = self.site.load_full();
        let mut resp = self.answer(&site, &req).await;
        let h = resp.headers_mut();
        h.insert("x-served-by", self.name_header.clone());
        if let Ok(v) = HeaderValue::from_str(&site.name) {
            h.insert("x-site", v);
        }
        resp
    }

    async fn answer<B>(&self, site: &Site, req: &Request<B>) -> Response<RespBody> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| req.uri().host());
        let Some(host) = host else {
            return text(StatusCode::BAD_REQUEST, "missing Host header\n".into());
        };
        if !site.matches(host) {
            return text(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "node {} serves site {}, not host {}\n",
                    self.name,
                    site.name,
                    config::strip_port(host)
                ),
            );
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let model = self.capacity.model();
        let class = match classify(model, req.uri().path(), req.uri().query()) {
            Ok(c) => c,
            Err((status, msg)) => return text(status, msg + "\n"),
        };
        if class == Class::Health {
            return text(StatusCode::OK, "ok\n".into());
        }
        if !self.capacity.serve(class.service(model)).await {
            let mut r = text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("node {} is full\n", self.name),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
        let size = if req.method() == Method::HEAD {
            0
        } else {
            class.size()
        };
        let mut r = Response::new(Either::Right(Filler {
            remaining: size,
            chunk: self.chunk.clone(),
        }));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        if req.method() == Method::HEAD {
            r.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(class.size()));
        }
        r
    }

    /// Re-reads the site file; on error logs it and keeps the old site.
    pub fn reload(&self, site_file: &std::path::Path) {
        match config::load_site(site_file) {
            Ok(site) => {
                let old = self.site.load();
                tracing::info!(node = %self.name, from = %old.name, to = %site.name, hosts = ?site.hosts, "site file reloaded");
                self.site.store(Arc::new(site));
            }
            Err(e) => {
                tracing::error!(node = %self.name, site = %self.site.load().name, "site file rejected, still serving the old site: {e}");
            }
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<RespBody> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

/// Removes the pid file on drop.
struct PidFile(PathBuf);

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs the node until `shutdown` turns true: binds, writes the pid file,
/// serves, reloads the site file on SIGHUP, pushes load to the sidecar.
/// In-flight requests get `shutdown_grace` to finish.
pub async fn run(cfg: NodeConfig, mut shutdown: watch::Receiver<bool>) -> Result<(), ServerError> {
    use tokio::signal::unix::{signal, SignalKind};
    let site = config::load_site(&cfg.site_file)?;
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| ServerError::Bind {
            addr: cfg.listen,
            source: e,
        })?;
    let mut hup = signal(SignalKind::hangup()).map_err(ServerError::Signal)?;
    let _pid = match &cfg.pid_file {
        Some(p) => {
            std::fs::write(p, format!("{}\n", std::process::id())).map_err(|e| {
                ServerError::PidFile {
                    path: p.clone(),
                    source: e,
                }
            })?;
            Some(PidFile(p.clone()))
        }
        None => None,
    };
    let node = Arc::new(Node::new(&cfg.name, site, cfg.model));
    tracing::info!(node = %cfg.name, listen = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        site = %node.site.load().name, slots = cfg.model.slots, queue = cfg.model.queue, "testsrv listening");
    if let Some(push) = cfg.push.clone() {
        let (name, capacity) = (node.name.clone(), Arc::clone(&node.capacity));
        let (sd, every) = (shutdown.clone(), cfg.publish_interval);
        tokio::spawn(async move { super::publish::run(push, name, capacity, every, sd).await });
    }
    if let Some(a) = cfg.antagonist {
        tokio::spawn(Arc::clone(&node.capacity).run_antagonist(a, shutdown.clone()));
    }
    if let Some(path) = cfg.timeline_file.clone() {
        let (cap, sd, every) = (
            Arc::clone(&node.capacity),
            shutdown.clone(),
            cfg.timeline_every,
        );
        tokio::spawn(async move {
            if let Err(e) = timeline(&path, &cap, every, sd).await {
                tracing::warn!(file = %path.display(), error = %e, "timeline not written");
            }
        });
    }
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => if *shutdown.borrow() { break },
            _ = hup.recv() => node.reload(&cfg.site_file),
            conn = listener.accept() => {
                let (stream, _) = match conn {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(node = %cfg.name, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let n = node.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let n = n.clone();
                    async move { Ok::<_, Infallible>(n.handle(req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        }
    }
    drop(listener);
    tracing::info!(node = %cfg.name, "testsrv stopping; in-flight requests get {}", duration::format(cfg.shutdown_grace));
    let _ = tokio::time::timeout(cfg.shutdown_grace, graceful.shutdown()).await;
    Ok(())
}

/// Writes the node's state every `every` until `shutdown` (CSV: ms since
/// start, busy slots including the co-tenant's, queue, co-tenant slots,
/// completions, 503s, microseconds served requests held a slot), for
/// diagnosis (`timeline_file`). At most one line
/// per `every`; the file is flushed when the node stops.
async fn timeline(
    path: &std::path::Path,
    cap: &Capacity,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "ms,busy,queue,held,requests_total,rejected_total,service_us_total"
    )?;
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
            _ = tick.tick() => {}
        }
        let u = cap.usage();
        writeln!(
            out,
            "{:.1},{},{},{},{},{},{}",
            start.elapsed().as_secs_f64() * 1e3,
            u.busy,
            u.queue,
            cap.held(),
            u.requests_total,
            cap.rejected_total(),
            cap.service_us_total()
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests;
