//! The HTTP data path: listeners, routing to sites, node selection,
//! pooled forwarding, reload, restart ([`restart`]) and graceful drain.
//!
//! Request path, one direction, each file importing only those after it:
//! [`listener`] accepts (bounded, TLS with SNI, HTTP/1.1 + HTTP/2; [`io`]
//! enforces head/idle/write timeouts on the client stream) →
//! [`forward`] routes by Host and path ([`route`]), picks a node
//! ([`crate::balance::Backends::pick`]), rewrites headers ([`headers`]) and
//! sends the request →
//! [`response`] streams the answer to the client and, when it ends, settles
//! the [`exchange`] (in-flight slot, passive health, metrics ([`stats`]),
//! access log ([`access_log`])) →
//! [`state`] (the snapshot every request reads) →
//! [`upstream`] (pooled node connections, one idle stack per worker) →
//! [`body`] (the request body on its way to the node).
//!
//! Everything a request reads comes from one immutable [`state::Snapshot`]
//! behind an `ArcSwap`; SIGHUP builds a new one from the config file and
//! swaps it in, so in-flight requests finish on the snapshot they started
//! with and the hot path never locks.

pub mod access_log;
pub mod admin;
pub mod body;
pub mod compress;
pub mod decode;
pub mod error;
pub mod exchange;
pub mod forward;
pub mod headers;
pub mod io;
pub mod listener;
pub mod metrics;
pub mod monitor;
pub mod response;
pub mod restart;
pub mod route;
pub mod serve1;
pub mod share;
pub mod state;
pub mod stats;
pub mod streams;
pub mod tls;
pub mod upstream;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::signal::unix::SignalKind;
use tokio::sync::{mpsc, watch};

pub use error::{ErrorKind, ErrorSource, ProxyError, RetryType};

use crate::balance::{Backends, NodeWindows};
use crate::config::{self, Config};
use access_log::AccessLogger;
use state::{Runtime, Snapshot};

/// Runs the proxy until SIGTERM or SIGINT, then drains: stops accepting,
/// lets in-flight requests finish for up to `global.shutdown_grace`,
/// closes keep-alive connections, and returns. SIGHUP reloads the config
/// file (`config.source`); SIGUSR2 restarts: a new process gets the
/// listening sockets ([`restart`]) and, once it serves, this one drains the
/// same way and returns. Must run inside a Tokio runtime.
pub async fn run(config: Config) -> Result<(), ProxyError> {
    // What a restart starts again: this binary's path as it is now (a new
    // build installed there is picked up) and the same arguments.
    let exe = std::env::current_exe().unwrap_or_else(|_| "rdmalb".into());
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut inherited = restart::Inherited::from_env();
    // Before any handle is registered (the snapshot caches its handles).
    let prometheus = metrics::install();
    let config = Arc::new(config);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let runtime = start_runtime(&config, &shutdown_rx).await?;
    // This proxy's window and the agent: routing follows the nodes' role
    // words from here on (in every mode; only `reconfigure` moves nodes).
    let reconfig = crate::reconfig::Reconfiguration::start(
        &config,
        Arc::clone(&runtime.config),
        Arc::clone(&runtime.windows),
        Arc::clone(&runtime.backends),
        Arc::clone(&runtime.snapshot.load().stats.demand),
        shutdown_rx.clone(),
    )
    .await?;

    // Bind everything first (or take the sockets a restart handed over): a
    // bad address or certificate stops start-up.
    let bound = listener::bind_all(&config, &mut inherited, runtime.acme.as_ref())?;
    let (admin_socket, admin_listener) = bind_admin(&config, &mut inherited)?;
    let stats_sockets = bind_stats_sockets(&config, &mut inherited)?;
    let mut signals = Signals::install()?;

    let (drain_tx, mut drain_rx) = mpsc::channel::<()>(1);
    let health =
        crate::balance::health::spawn_checks(Arc::clone(&runtime.backends), shutdown_rx.clone());
    spawn_background(&runtime, &config, &shutdown_rx);
    let listeners: Vec<Arc<listener::Shared>> = bound
        .into_iter()
        .map(|b| {
            tracing::info!(listener = %b.name, address = %b.addr, "listening");
            Arc::new(listener::Shared::new(b, &config))
        })
        .collect();
    let doors = AdminDoors {
        listener: admin_listener,
        stats_sockets,
        prometheus,
        reconfig: reconfig.as_ref().map(|r| Arc::clone(&r.agent)),
    };
    let stats_handover = serve_admin(doors, &runtime, &config, &listeners, &shutdown_rx);
    spawn_workers(&config, &listeners, &runtime, &shutdown_rx, drain_tx)?;
    announce_start(&config, &mut inherited);

    // Sockets a restart hands over: the listeners and the admin listener.
    let mut handover: Vec<(std::net::SocketAddr, &std::net::TcpListener)> =
        listeners.iter().map(|l| (l.addr, l.socket())).collect();
    if let (Some(a), Some(s)) = (&config.admin, &admin_socket) {
        handover.push((a.listen, s));
    }
    handover.extend(stats_handover.iter().map(|(a, s)| (*a, s)));
    let mut restart = Restart::new();
    let signal_name = loop {
        tokio::select! {
            _ = signals.term.recv() => break "SIGTERM",
            _ = signals.int.recv() => break "SIGINT",
            _ = signals.hup.recv() => {
                if reload(&runtime).await {
                    health.resync();
                }
            }
            _ = signals.usr2.recv() => restart.begin(&runtime, &exe, &args, &handover).await,
            Some(result) = restart.done.recv() => if restart.finished(&runtime, result) {
                break "SIGUSR2";
            },
        }
    };
    drop(handover);
    // Whether another process accepts on the listening sockets from now on.
    let successor_serves = signal_name == "SIGUSR2" || restart.abandon().await;
    runtime
        .draining
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let grace = runtime.snapshot.load().config.global.shutdown_grace;
    tracing::info!(signal = signal_name, grace = ?grace, "shutting down: no new connections, draining in-flight requests");
    let _ = shutdown_tx.send(true);
    if !successor_serves {
        // New connections are refused from now on, not queued until exit.
        for l in &listeners {
            listener::stop_listening(l.socket());
        }
        if let Some(s) = &admin_socket {
            listener::stop_listening(s);
        }
    }
    match tokio::time::timeout(grace, drain_rx.recv()).await {
        Ok(_) => tracing::info!("all client connections closed"),
        Err(_) => {
            tracing::warn!(grace = ?grace, "grace period over: closing the remaining connections")
        }
    }
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), health.join()).await;
    if let Some(r) = reconfig {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), r.join()).await;
    }
    Ok(())
}

/// The node windows, the first snapshot, the access log and ACME: the
/// runtime every request and every control task reads. A verbs node on a
/// host without an RDMA device stops start-up here, with a message naming
/// the alternatives.
async fn start_runtime(
    config: &Arc<Config>,
    shutdown: &watch::Receiver<bool>,
) -> Result<Arc<Runtime>, ProxyError> {
    let windows = NodeWindows::start(config, shutdown.clone()).await?;
    let backends = Arc::new(Backends::build_with_windows(config, None, &windows));
    let access = AccessLogger::start(&config.global.access_log)?;
    let snapshot = Snapshot::build(Arc::clone(config), Arc::clone(&backends), None);
    let acme = crate::acme::Acme::start(config).map_err(|message| ProxyError::Acme { message })?;
    Ok(Arc::new(Runtime {
        snapshot: ArcSwap::from_pointee(snapshot),
        config: Arc::new(ArcSwap::new(Arc::clone(config))),
        backends: Arc::new(ArcSwap::new(backends)),
        access,
        windows,
        connections: std::sync::atomic::AtomicUsize::new(0),
        handed_over: std::sync::atomic::AtomicBool::new(false),
        draining: std::sync::atomic::AtomicBool::new(false),
        cpu: compress::CpuUse::default(),
        acme,
    }))
}

/// The admin listener's socket (kept to hand over on a restart) and the
/// listener serving on a clone of it, or neither without `[admin]`.
fn bind_admin(
    config: &Config,
    inherited: &mut restart::Inherited,
) -> Result<(Option<std::net::TcpListener>, Option<TcpListener>), ProxyError> {
    let Some(a) = &config.admin else {
        return Ok((None, None));
    };
    let err = |source| ProxyError::AdminBind {
        addr: a.listen,
        source,
    };
    let socket = match inherited.take(a.listen) {
        Some(s) => s,
        None => listener::bind_std(a.listen).map_err(err)?,
    };
    // One handle serves, the other is kept to hand over.
    let serving = socket.try_clone().map_err(err)?;
    Ok((
        Some(socket),
        Some(TcpListener::from_std(serving).map_err(err)?),
    ))
}

/// Every `[[stats_socket]]`, bound (or taken over from the process before).
fn bind_stats_sockets(
    config: &Config,
    inherited: &mut restart::Inherited,
) -> Result<Vec<admin::socket::Bound>, ProxyError> {
    config
        .stats_sockets
        .iter()
        .map(|s| {
            admin::socket::bind(s, inherited).map_err(|source| ProxyError::StatsSocketBind {
                socket: match &s.endpoint {
                    crate::config::StatsEndpoint::Unix(p) => p.display().to_string(),
                    crate::config::StatsEndpoint::Tcp(a) => a.to_string(),
                },
                source,
            })
        })
        .collect()
}

/// The signals the control plane answers.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals, ProxyError> {
        let on = |kind, signal| {
            tokio::signal::unix::signal(kind)
                .map_err(|source| ProxyError::Signal { signal, source })
        };
        Ok(Signals {
            term: on(SignalKind::terminate(), "SIGTERM")?,
            int: on(SignalKind::interrupt(), "SIGINT")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
            usr2: on(SignalKind::user_defined2(), "SIGUSR2")?,
        })
    }
}

/// The control plane's background loops, each stopping with `shutdown`:
/// ACME renewals, the CPU sample compression reads, stick-table expiry
/// and sharing.
fn spawn_background(runtime: &Arc<Runtime>, config: &Config, shutdown: &watch::Receiver<bool>) {
    if let Some(acme) = &runtime.acme {
        tokio::spawn(crate::acme::renew::run(Arc::clone(acme), shutdown.clone()));
    }
    if config.sites.iter().any(|s| s.compression.is_some()) {
        tokio::spawn(sample_cpu(Arc::clone(runtime), shutdown.clone()));
    }
    tokio::spawn(expire_tables(Arc::clone(runtime), shutdown.clone()));
    tokio::spawn(share::run(Arc::clone(runtime), shutdown.clone()));
}

/// The admin doors bound at start, and what their state needs besides the
/// runtime.
struct AdminDoors {
    listener: Option<TcpListener>,
    stats_sockets: Vec<admin::socket::Bound>,
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
    reconfig: Option<Arc<crate::reconfig::Agent>>,
}

/// Serves the admin listener and the stats sockets; returns the stats
/// sockets' handles a restart hands over.
fn serve_admin(
    doors: AdminDoors,
    runtime: &Runtime,
    config: &Config,
    listeners: &[Arc<listener::Shared>],
    shutdown: &watch::Receiver<bool>,
) -> Vec<(std::net::SocketAddr, std::net::TcpListener)> {
    let file_certs = tls::file_certificates(config);
    tls::publish_expiry(&file_certs, runtime.acme.as_ref());
    let mut stats_handover = Vec::new();
    if doors.listener.is_none() && doors.stats_sockets.is_empty() {
        return stats_handover;
    }
    let state = admin::AdminState::new(
        Arc::clone(&runtime.config),
        Arc::clone(&runtime.backends),
        doors.prometheus,
    )
    .with_windows(Arc::clone(&runtime.windows))
    .with_admission(Arc::clone(&runtime.snapshot.load().admission))
    .with_frontends(listeners.iter().map(|l| l.stats()).collect())
    .with_acme(runtime.acme.clone())
    .with_file_certs(file_certs);
    let state = match doors.reconfig {
        Some(agent) => state.with_reconfig(agent),
        None => state,
    };
    for mut socket in doors.stats_sockets {
        stats_handover.extend(socket.handover.take());
        tokio::spawn(admin::socket::serve(
            socket,
            state.clone(),
            shutdown.clone(),
        ));
    }
    if let Some(l) = doors.listener {
        tokio::spawn(admin::serve(l, state, shutdown.clone()));
    }
    stats_handover
}

/// The data path runs on `global.workers` threads, each with its own
/// current-thread runtime; this (caller's) runtime keeps the control
/// plane: signals, reloads, health checks, the admin listener.
fn spawn_workers(
    config: &Config,
    listeners: &[Arc<listener::Shared>],
    runtime: &Arc<Runtime>,
    shutdown: &watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) -> Result<(), ProxyError> {
    for id in 0..config.global.workers.max(1) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // HTTP/2 clients' writes wait until the worker runs out of
            // tasks, then leave together (`io::flush_held`).
            .on_thread_park(io::flush_held)
            .build()
            .map_err(|source| ProxyError::Worker { source })?;
        let listeners = listeners.to_vec();
        let runtime = Arc::clone(runtime);
        let shutdown = shutdown.clone();
        let drain = drain.clone();
        std::thread::Builder::new()
            .name(format!("rdmalb-worker-{id}"))
            .spawn(move || listener::worker(id, rt, listeners, runtime, shutdown, drain))
            .map_err(|source| ProxyError::Worker { source })?;
    }
    Ok(())
}

/// Logs the start and tells systemd (and a process that restarted into
/// this one) that it serves.
fn announce_start(config: &Config, inherited: &mut restart::Inherited) {
    tracing::info!(
        config = %config.source.display(),
        sites = config.sites.len(),
        nodes = config.nodes.len(),
        balance = config.global.balance.as_str(),
        pid = std::process::id(),
        "proxy started"
    );
    if inherited.is_restart() {
        // systemd (NotifyAccess=all) follows the service to this process.
        restart::sd_notify(&format!("MAINPID={}\nREADY=1", std::process::id()));
    } else {
        restart::sd_notify("READY=1");
    }
    inherited.serving();
}

/// A SIGUSR2 restart: at most one under way; its outcome (the new
/// process's pid once it serves) arrives on `done`. A stop (SIGTERM,
/// SIGINT) during a restart stops the new process too.
struct Restart {
    done_tx: mpsc::Sender<Result<u32, restart::RestartError>>,
    done: mpsc::Receiver<Result<u32, restart::RestartError>>,
    under_way: bool,
    stopping_tx: watch::Sender<bool>,
    stopping: watch::Receiver<bool>,
}

impl Restart {
    fn new() -> Restart {
        let (done_tx, done) = mpsc::channel(1);
        let (stopping_tx, stopping) = watch::channel(false);
        Restart {
            done_tx,
            done,
            under_way: false,
            stopping_tx,
            stopping,
        }
    }

    /// SIGUSR2: starts the new process with `handover` (unless a restart
    /// is under way) and waits for it in a task of its own.
    async fn begin(
        &mut self,
        runtime: &Runtime,
        exe: &std::path::Path,
        args: &[std::ffi::OsString],
        handover: &[(std::net::SocketAddr, &std::net::TcpListener)],
    ) {
        if self.under_way {
            tracing::warn!("SIGUSR2: a restart is already under way; ignored");
            return;
        }
        if let Some(successor) = start_successor(runtime, exe, args, handover).await {
            self.under_way = true;
            let tx = self.done_tx.clone();
            let mut stop = self.stopping.clone();
            let stop = async move { rdmalb_base::shutdown::requested(&mut stop).await };
            tokio::spawn(async move {
                let _ = tx
                    .send(successor.serving(restart::READY_WITHIN, stop).await)
                    .await;
            });
        }
    }

    /// The restart's outcome: whether the new process serves (this one
    /// then drains), else logged and this one keeps serving.
    fn finished(&mut self, runtime: &Runtime, result: Result<u32, restart::RestartError>) -> bool {
        self.under_way = false;
        match result {
            Ok(pid) => {
                ::metrics::counter!("rdmalb_restarts_total", "result" => "ok").increment(1);
                tracing::info!(
                    new_pid = pid,
                    "restart: the new process serves; this one stops accepting and drains"
                );
                runtime
                    .handed_over
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                true
            }
            Err(e) => {
                ::metrics::counter!("rdmalb_restarts_total", "result" => "failed").increment(1);
                tracing::error!(error = %e, "restart failed; this process keeps serving");
                false
            }
        }
    }

    /// This process stops: a restart under way is told to stop its new
    /// process; returns whether that process came up all the same (it then
    /// keeps serving on the sockets).
    async fn abandon(&mut self) -> bool {
        if !self.under_way {
            return false;
        }
        let _ = self.stopping_tx.send(true);
        match tokio::time::timeout(std::time::Duration::from_secs(5), self.done.recv()).await {
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, "restart abandoned");
                false
            }
            Ok(Some(Ok(pid))) => {
                tracing::warn!(
                    new_pid = pid,
                    "the new process came up as this one was told to stop; it keeps serving"
                );
                true
            }
            _ => false,
        }
    }
}

/// SIGUSR2: checks the config file (as a reload would), then starts the
/// new process with the listening sockets; `None` (logged) when the file
/// has problems or the process cannot be started.
async fn start_successor(
    runtime: &Runtime,
    exe: &std::path::Path,
    args: &[std::ffi::OsString],
    sockets: &[(std::net::SocketAddr, &std::net::TcpListener)],
) -> Option<restart::Successor> {
    let path = runtime.snapshot.load().config.source.clone();
    tracing::info!(config = %path.display(), exe = %exe.display(), "SIGUSR2: restarting with the listening sockets handed over");
    let loaded = tokio::task::spawn_blocking(move || config::load(&path)).await;
    match loaded {
        Ok(Ok(_)) => {}
        Ok(Err(errors)) => {
            for p in &errors.problems {
                tracing::error!(file = %errors.file.display(), key = %p.key, problem = %p.message, "restart rejected: config problem");
            }
            tracing::error!(file = %errors.file.display(), problems = errors.problems.len(), "restart rejected; this process keeps serving");
            ::metrics::counter!("rdmalb_restarts_total", "result" => "failed").increment(1);
            return None;
        }
        Err(e) => {
            tracing::error!(error = %e, "restart failed; this process keeps serving");
            return None;
        }
    }
    match restart::spawn(exe, args, sockets) {
        Ok(s) => {
            tracing::info!(
                new_pid = s.pid(),
                "restart: new process started, waiting until it serves"
            );
            Some(s)
        }
        Err(e) => {
            ::metrics::counter!("rdmalb_restarts_total", "result" => "failed").increment(1);
            tracing::error!(error = %e, "restart failed; this process keeps serving");
            None
        }
    }
}

/// Re-reads the config file; on success swaps the new snapshot in and
/// returns true, otherwise logs every problem and keeps the current one.
pub async fn reload(runtime: &Runtime) -> bool {
    let old = runtime.snapshot.load_full();
    let path = old.config.source.clone();
    tracing::info!(config = %path.display(), "SIGHUP: reloading the configuration");
    let loaded = tokio::task::spawn_blocking(move || config::load(&path)).await;
    let new = match loaded {
        Ok(Ok(c)) => c,
        Ok(Err(errors)) => {
            for p in &errors.problems {
                tracing::error!(
                    file = %errors.file.display(),
                    key = %p.key,
                    problem = %p.message,
                    "reload rejected: config problem"
                );
            }
            tracing::error!(
                file = %errors.file.display(),
                problems = errors.problems.len(),
                "reload rejected; still serving the previous configuration"
            );
            ::metrics::counter!("rdmalb_config_reloads_total", "result" => "failed").increment(1);
            return false;
        }
        Err(e) => {
            tracing::error!(error = %e, "reload failed; still serving the previous configuration");
            ::metrics::counter!("rdmalb_config_reloads_total", "result" => "failed").increment(1);
            return false;
        }
    };
    warn_restart_only(&old.config, &new);
    // Node windows first: a verbs node without an RDMA device or an
    // unusable PSK rejects the reload before anything changes.
    if let Err(e) = runtime.windows.reconfigure(&new).await {
        tracing::error!(error = %e, "reload rejected; still serving the previous configuration");
        ::metrics::counter!("rdmalb_config_reloads_total", "result" => "failed").increment(1);
        return false;
    }
    let backends = Arc::new(Backends::build_with_windows(
        &new,
        Some(&old.backends),
        &runtime.windows,
    ));
    let snapshot = Snapshot::build(Arc::new(new), backends, Some(&old));
    tracing::info!(
        sites = snapshot.config.sites.len(),
        nodes = snapshot.config.nodes.len(),
        balance = snapshot.config.global.balance.as_str(),
        "configuration reloaded"
    );
    runtime.store(snapshot);
    ::metrics::counter!("rdmalb_config_reloads_total", "result" => "ok").increment(1);
    true
}

/// Settings read only at start-up: say so when a reload changes them.
fn warn_restart_only(old: &Config, new: &Config) {
    let changed = restart_only_changes(old, new);
    if !changed.is_empty() {
        tracing::warn!(
            changed = %changed.join(", "),
            "these settings changed but apply only after a restart (SIGUSR2 restarts without dropping connections); the rest of the new configuration is live"
        );
    }
}

/// What changed from `old` to `new` that only a restart applies.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let listeners = |c: &Config| {
        c.listeners
            .iter()
            .map(|l| {
                let certs = l.tls.as_ref().map(|t| {
                    (
                        t.h2,
                        t.certificates
                            .iter()
                            .map(|p| (p.cert.clone(), p.key.clone()))
                            .collect::<Vec<_>>(),
                    )
                });
                (l.name.clone(), l.listen, certs)
            })
            .collect::<Vec<_>>()
    };
    let mut changed = Vec::new();
    if listeners(old) != listeners(new) {
        changed.push("listener");
    }
    if old.admin.as_ref().map(|a| a.listen) != new.admin.as_ref().map(|a| a.listen) {
        changed.push("admin");
    }
    if old.reconfig != new.reconfig {
        changed.push("reconfig");
    }
    // The ACME runtime (its settings, the certificates it keeps: the
    // sites' `acme`) starts once, with the process. Sites without `acme`
    // do not count: adding one is a reload's business.
    let acme = |c: &Config| {
        let sites: Vec<_> = c
            .sites
            .iter()
            .filter(|s| !s.acme_names.is_empty())
            .map(|s| (s.name.clone(), s.acme_names.clone()))
            .collect();
        (c.acme.clone(), sites)
    };
    if acme(old) != acme(new) {
        changed.push("acme (the [acme] section or a site's acme)");
    }
    if old.global.workers != new.global.workers {
        changed.push("global.workers");
    }
    if old.global.access_log != new.global.access_log {
        changed.push("global.access_log");
    }
    let lim = |c: &Config| {
        (
            c.limits.max_connections,
            c.limits.max_header_bytes,
            c.limits.max_headers,
            c.timeouts.http_request,
            c.timeouts.keep_alive,
            c.timeouts.client,
        )
    };
    if lim(old) != lim(new) {
        changed.push("client-side limits/timeouts");
    }
    changed
}

/// Measures the process's CPU use every second, in percent of its worker
/// threads, for the compression cap (HAProxy's `maxcompcpuusage`). Runs
/// while some site compresses (a reload that adds compression to a proxy
/// that had none starts compressing without the cap until a restart).
async fn sample_cpu(runtime: Arc<Runtime>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(std::time::Instant, f64)> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
        }
        let Some(cpu) = rdmalb_base::cpu::own_cpu_seconds() else {
            return;
        };
        let now = std::time::Instant::now();
        if let Some((then, before)) = last {
            let workers = runtime.snapshot.load().config.global.workers.max(1) as f64;
            let wall = now.saturating_duration_since(then).as_secs_f64().max(1e-3);
            let percent = ((cpu - before) / wall / workers * 100.0).clamp(0.0, 1000.0);
            runtime.cpu.set(percent.round() as u32);
        }
        last = Some((now, cpu));
    }
}

/// Removes expired stick-table entries every second (HAProxy's expiry
/// task) and publishes each table's size.
async fn expire_tables(runtime: Arc<Runtime>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
        }
        let snap = runtime.snapshot.load_full();
        let now = crate::rules::stick::now_ms();
        for t in &snap.config.rules.tables {
            t.purge(now);
            let name = t.name.clone();
            ::metrics::gauge!(metrics::STICK_ENTRIES, "table" => name.clone()).set(t.len() as f64);
            ::metrics::gauge!(metrics::STICK_ENTRY_BYTES, "table" => name)
                .set(crate::rules::stick::entry_bytes(t.kind) as f64);
        }
    }
}
