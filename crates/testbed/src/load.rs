//! `rdmalb-testbed load`: replays a trace against a URL and reports per-site time
//! series ([`super::report`]).
//!
//! Two modes. **Closed loop**: N workers, each sending its next request as
//! soon as the previous one completed, over keep-alive connections (at
//! most N). **Open loop**: requests start at a fixed rate whatever the
//! responses do (what an overloaded site really sees); at most
//! `max_inflight` are outstanding, requests beyond are counted as
//! `backlog` errors and not sent. Both stop at the first of `duration` and
//! `requests` (the trace repeats when `requests` exceeds its length), or
//! on shutdown; requests still in flight at the deadline are abandoned and
//! not counted. Every request carries its site's Host header.
//!
//! wrk and httperf remain the load tools of choice for raw throughput
//! (see [`super::trace::export`]); this client exists because they do not
//! report per-site time series.
//!
//! [`run_with_clients`] also keeps a cookie jar per simulated client
//! ([`sticky`]), for the persistence cookie of sticky sessions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

use super::report::{Outcome, Recorder, Report};
use super::trace::{HostMap, Trace};

pub mod sticky;
pub use sticky::{StickyClients, StickySummary};

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("load: --url `{0}` is not an http://host:port URL")]
    Url(String),
    #[error("load: {0}")]
    Invalid(String),
}

/// Closed or open loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Closed { connections: u32 },
    Open { rate: f64, max_inflight: u32 },
}

/// A replay's parameters.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `http://host:port` targets (a path prefix is prepended to the trace
    /// paths); request k goes to `urls[k % urls.len()]`.
    pub urls: Vec<String>,
    pub hosts: HostMap,
    pub mode: Mode,
    pub duration: Duration,
    /// Requests to send at most (default: the trace length).
    pub requests: Option<u64>,
    pub interval: Duration,
    pub timeout: Duration,
}

struct Shared {
    trace: Trace,
    hosts: Vec<HeaderValue>,
    bases: Vec<String>,
    limit: u64,
    next: AtomicU64,
    client: Client<HttpConnector, Empty<Bytes>>,
    recorder: Recorder,
    timeout: Duration,
    clients: Option<Arc<StickyClients>>,
}

impl Shared {
    /// The index of the next request to send, or `None` when done.
    fn take(&self) -> Option<u64> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        (k < self.limit).then_some(k)
    }

    fn site_of(&self, k: u64) -> usize {
        self.trace.requests[(k % self.trace.requests.len() as u64) as usize].0
    }

    async fn send(&self, k: u64) {
        let (site, path) = &self.trace.requests[(k % self.trace.requests.len() as u64) as usize];
        let base = &self.bases[(k % self.bases.len() as u64) as usize];
        let start = Instant::now();
        self.recorder.offer(*site, start);
        let outcome =
            match tokio::time::timeout(self.timeout, self.exchange(base, *site, path, k)).await {
                Ok(o) => o,
                Err(_) => Outcome::Timeout,
            };
        self.recorder
            .record(*site, Instant::now(), start.elapsed(), outcome);
    }

    async fn exchange(&self, base: &str, site: usize, path: &str, k: u64) -> Outcome {
        let Ok(uri) = format!("{base}{path}").parse::<Uri>() else {
            return Outcome::Io;
        };
        let mut req = Request::new(Empty::new());
        *req.uri_mut() = uri;
        req.headers_mut()
            .insert(header::HOST, self.hosts[site].clone());
        req.headers_mut()
            .insert(header::USER_AGENT, HeaderValue::from_static("rdmalb-load"));
        let client = self.clients.as_ref().map(|c| (c, c.client_of(k)));
        let cookie = client.and_then(|(c, i)| c.cookie_header(i));
        let sent = cookie.is_some();
        if let Some(cookie) = cookie {
            req.headers_mut().insert(header::COOKIE, cookie);
        }
        match self.client.request(req).await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                if let Some((c, i)) = client {
                    c.observe(i, sent, resp.headers());
                }
                // Read the whole body so the connection is reused.
                match resp.into_body().collect().await {
                    Ok(_) => Outcome::Status(status),
                    Err(_) => Outcome::Io,
                }
            }
            Err(e) if e.is_connect() => Outcome::Connect,
            Err(_) => Outcome::Io,
        }
    }
}

/// Replays `trace`; returns the report when done (deadline, count or
/// shutdown).
pub async fn run(
    trace: Trace,
    opts: LoadOptions,
    shutdown: watch::Receiver<bool>,
) -> Result<Report, LoadError> {
    run_with_clients(trace, opts, None, shutdown).await
}

/// What a run sends to: each URL's base, each site's `Host`, and how
/// many connections the pool keeps per host (all checked).
fn targets(
    trace: &Trace,
    opts: &LoadOptions,
) -> Result<(Vec<String>, Vec<HeaderValue>, usize), LoadError> {
    let mut bases = Vec::new();
    for url in &opts.urls {
        let base = url.trim_end_matches('/').to_string();
        match base.parse::<Uri>() {
            Ok(u) if u.scheme_str() == Some("http") && u.authority().is_some() => bases.push(base),
            _ => return Err(LoadError::Url(url.clone())),
        }
    }
    if trace.requests.is_empty() {
        return Err(LoadError::Invalid("the trace holds no requests".into()));
    }
    let hosts = trace
        .sites
        .iter()
        .map(|s| {
            HeaderValue::from_str(&opts.hosts.host(s))
                .map_err(|_| LoadError::Invalid(format!("host of site {s} is not a header value")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pool = match opts.mode {
        Mode::Closed { connections: 0 } => {
            return Err(LoadError::Invalid(
                "--connections must be at least 1".into(),
            ))
        }
        Mode::Closed { connections } => connections as usize,
        Mode::Open { rate, .. } if !(rate > 0.0 && rate <= 1e6) => {
            return Err(LoadError::Invalid(format!(
                "--rate {rate} is out of range (accepted: above 0, at most 1000000)"
            )))
        }
        Mode::Open { max_inflight, .. } => max_inflight.max(1) as usize,
    };
    Ok((bases, hosts, pool))
}

/// [`run`], each request sent by one of `clients` with its cookie jar
/// ([`sticky`]); the caller reads what the clients saw from `clients`
/// afterwards.
pub async fn run_with_clients(
    trace: Trace,
    opts: LoadOptions,
    clients: Option<Arc<StickyClients>>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<Report, LoadError> {
    if opts.urls.is_empty() {
        return Err(LoadError::Invalid("no target URL".into()));
    }
    let (bases, hosts, pool) = targets(&trace, &opts)?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(opts.timeout));
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(pool)
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let start = Instant::now();
    let shared = Arc::new(Shared {
        limit: opts.requests.unwrap_or(trace.requests.len() as u64),
        recorder: Recorder::new(trace.sites.clone(), opts.interval, start),
        trace,
        hosts,
        bases,
        next: AtomicU64::new(0),
        client,
        timeout: opts.timeout,
        clients,
    });
    let deadline = tokio::time::sleep(opts.duration);
    tokio::pin!(deadline);
    let mut tasks = tokio::task::JoinSet::new();
    match opts.mode {
        Mode::Closed { connections } => {
            for _ in 0..connections {
                let s = shared.clone();
                tasks.spawn(async move {
                    while let Some(i) = s.take() {
                        s.send(i).await;
                    }
                });
            }
            loop {
                tokio::select! {
                    _ = &mut deadline => break,
                    _ = shutdown.changed() => break,
                    r = tasks.join_next() => if r.is_none() { break },
                }
            }
        }
        Mode::Open { rate, max_inflight } => {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let inflight = Arc::new(AtomicU64::new(0));
            'ticks: loop {
                tokio::select! {
                    _ = &mut deadline => break 'ticks,
                    _ = shutdown.changed() => break 'ticks,
                    _ = tick.tick() => {
                        let Some(i) = shared.take() else { break 'ticks };
                        if inflight.load(Ordering::Relaxed) >= u64::from(max_inflight) {
                            let site = shared.site_of(i);
                            shared.recorder.offer(site, Instant::now());
                            shared.recorder.record(site, Instant::now(), Duration::ZERO, Outcome::Backlog);
                            continue;
                        }
                        inflight.fetch_add(1, Ordering::Relaxed);
                        let (s, n) = (shared.clone(), inflight.clone());
                        tasks.spawn(async move {
                            s.send(i).await;
                            n.fetch_sub(1, Ordering::Relaxed);
                        });
                    }
                    Some(_) = tasks.join_next() => {}
                }
            }
            // Let the requests already sent complete, within the deadline.
            loop {
                tokio::select! {
                    _ = &mut deadline => break,
                    _ = shutdown.changed() => break,
                    r = tasks.join_next() => if r.is_none() { break },
                }
            }
        }
    }
    tasks.abort_all();
    let elapsed = start.elapsed().min(opts.duration);
    Ok(shared.recorder.finish(elapsed))
}
