//! `rdmalb sidecar`: runs beside an unmodified backend app, measures its
//! node's load and publishes it into the node's window, which it serves over
//! the configured transports (shm, tcp, verbs; several at once).
//!
//! Pieces, each in its own module:
//! - [`config`]: the sidecar's TOML file (`conf/sidecar.toml`), validated
//!   into an immutable [`SidecarConfig`].
//! - [`collect`]: load collectors (`system`, `cgroup`, `status`, `push`),
//!   each a background task on its own interval handing over numbers.
//! - [`publish`]: the publisher thread; every `publish_interval` it merges
//!   the collectors' latest readings and writes the load block with the
//!   seqlock protocol (seed 002 section 3: fine-grained, one-sided reads
//!   need the owner to keep the block fresh, not to answer requests).
//! - [`serve`]: the window memory and its transports.
//! - [`role`]: role application: watches the role word proxies CAS and
//!   rewrites + reloads + verifies the app's config for the claimed site.
//! - [`admin`]: `/metrics` (Prometheus) and `/status` (JSON).
//! - [`agent_check`]: HAProxy's agent-check protocol served for the node
//!   (weight from its load, drain while its role is not applied).
//!
//! [`run`] is the process entry point (`rdmalb sidecar -c FILE`); [`check`]
//! backs `rdmalb check --sidecar -c FILE`; [`Sidecar::start`] is the
//! embeddable form used by tests and benchmarks (it reports the addresses
//! actually bound when the config asks for port 0).
//!
//! Comments cite the research papers as "seed 000" … "seed 004" (with a
//! section or figure); `docs/references.md` lists them by title, authors and
//! venue.
#![deny(unsafe_code)]

pub mod admin;
pub mod agent_check;
pub mod collect;
pub mod config;
pub mod publish;
pub mod role;
pub mod serve;
pub mod template;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

pub use config::{ConfigErrors, SidecarConfig};

use collect::push::PushBindError;
use collect::Slot;
use config::PushListen;
use rdmalb_window::{TransportKind, WindowError};

/// Why the sidecar could not start (or stopped with an error).
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    /// The config file is unreadable or invalid (every problem listed).
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    /// Creating or serving the window failed (shm path not writable, window
    /// file held by a live sidecar, no RDMA device, PSK unusable, ...).
    #[error("node {node}: {what}: {source}")]
    Window {
        node: String,
        /// Which part: "shm window", "tcp responder", "verbs server".
        what: &'static str,
        #[source]
        source: WindowError,
    },
    /// A listener could not bind (port in use, permission denied).
    #[error("node {node}: {what} cannot listen on {addr}: {source}")]
    Bind {
        node: String,
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A push collector could not listen.
    #[error("node {node}: {source}")]
    Push {
        node: String,
        #[source]
        source: PushBindError,
    },
    /// The initial site's config could not be applied and verified at
    /// start-up (the app would not match the role word).
    #[error("node {node}: initial role {site}: {code}: {reason}")]
    Role {
        node: String,
        site: String,
        code: rdmalb_window::RoleStatusCode,
        reason: String,
    },
    /// The role state file could not be read or written at start-up.
    #[error("node {node}: {source}")]
    State {
        node: String,
        #[source]
        source: role::state::StateError,
    },
    /// The publisher thread could not be spawned.
    #[error("node {node}: cannot start the publisher thread: {source}")]
    Thread {
        node: String,
        #[source]
        source: std::io::Error,
    },
}

/// Validates a sidecar config file without starting anything
/// (`rdmalb check --sidecar -c FILE`).
pub fn check(config_path: impl AsRef<Path>) -> Result<SidecarConfig, ConfigErrors> {
    let cfg = config::load(config_path.as_ref())?;
    // A state file the sidecar would refuse at start-up is reported now.
    let file = role::state::StateFile::new(cfg.state_file.clone(), cfg.node.clone());
    if let Err(e) = file.load() {
        let mut r = rdmalb_base::problems::ConfigCheck::new(config_path.as_ref());
        r.add("state_file", e.to_string());
        return Err(r.into_errors());
    }
    Ok(cfg)
}

/// Runs the sidecar described by `config_path` until `shutdown` turns true
/// (or its sender is dropped), then stops every loop and removes the shm
/// window file it created.
pub async fn run(
    config_path: PathBuf,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), SidecarError> {
    let cfg = config::load(&config_path)?;
    let sidecar = Sidecar::start(cfg).await?;
    rdmalb_base::shutdown::requested(&mut shutdown).await;
    tracing::info!(node = %sidecar.config().node, "sidecar shutting down");
    sidecar.stop().await;
    Ok(())
}

/// Addresses a running sidecar actually listens on.
#[derive(Debug, Clone, Default)]
pub struct BoundAddrs {
    pub shm: Option<PathBuf>,
    pub tcp: Option<SocketAddr>,
    pub verbs: Option<SocketAddr>,
    pub admin: Option<SocketAddr>,
    /// The agent-check responder.
    pub agent_check: Option<SocketAddr>,
    /// One per push collector, in config order.
    pub push: Vec<PushListen>,
}

/// A running sidecar. Dropping it without [`Sidecar::stop`] still stops the
/// background work (the stop channel closes), but `stop` waits for it.
pub struct Sidecar {
    cfg: Arc<SidecarConfig>,
    stop_tx: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    publisher: Option<publish::Publisher>,
    window: Option<serve::Serving>,
    addrs: BoundAddrs,
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar")
            .field("node", &self.cfg.node)
            .field("addrs", &self.addrs)
            .finish()
    }
}

impl Sidecar {
    /// Creates the window, starts collectors, the publisher, the transports
    /// and the admin endpoint. On any failure everything already started is
    /// stopped again (and the shm file removed) before the error returns.
    pub async fn start(cfg: SidecarConfig) -> Result<Sidecar, SidecarError> {
        let cfg = Arc::new(cfg);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut sc = Sidecar {
            cfg: cfg.clone(),
            stop_tx,
            tasks: Vec::new(),
            publisher: None,
            window: None,
            addrs: BoundAddrs::default(),
        };
        match sc.start_parts(stop_rx).await {
            Ok(()) => {
                tracing::info!(node = %cfg.node, node_id = cfg.node_id, addrs = ?sc.addrs,
                    publish_interval = %rdmalb_base::duration::format(cfg.publish_interval),
                    "sidecar started");
                Ok(sc)
            }
            Err(e) => {
                sc.stop().await;
                Err(e)
            }
        }
    }

    async fn start_parts(&mut self, stop_rx: watch::Receiver<bool>) -> Result<(), SidecarError> {
        let cfg = self.cfg.clone();
        if cfg.admin.is_some() {
            // Install the recorder before the collectors start, so their
            // error counters from the first seconds are not lost.
            admin::prometheus();
        }
        let memory = serve::create_memory(&cfg)?;
        self.addrs.shm = memory.path().map(Path::to_path_buf);
        let memory = Arc::new(memory);

        // The role word is initialised before the first load block is
        // published and before tcp/verbs serve the window: proxies never
        // claim a node whose load block is unknown (see role::Applier::init).
        let mut applier = role::Applier::init(cfg.clone(), memory.clone()).map_err(|source| {
            SidecarError::State {
                node: cfg.node.clone(),
                source,
            }
        })?;

        let mut slots = Vec::new();
        for (i, c) in cfg.collectors.iter().enumerate() {
            let slot = Slot::new(format!("{}#{i}", c.kind()), cfg.node.clone());
            if let config::CollectorConfig::Push(p) = c {
                let server =
                    collect::push::Server::bind(p, slot.clone())
                        .await
                        .map_err(|source| SidecarError::Push {
                            node: cfg.node.clone(),
                            source,
                        })?;
                self.addrs.push.push(server.local_addr());
                self.tasks.push(tokio::spawn(server.run(stop_rx.clone())));
            } else if let Some(t) = collect::spawn_polling(c, slot.clone(), stop_rx.clone()) {
                self.tasks.push(t);
            }
            slots.push(slot);
        }

        let role_changed = Arc::new(tokio::sync::Notify::new());
        let publisher =
            publish::Publisher::start(&cfg, memory.clone(), slots.clone(), role_changed.clone())?;
        let stats = publisher.stats();
        self.publisher = Some(publisher);

        // The app is made to match the role word before tcp/verbs serve the
        // window. Meanwhile ROLE_APPLIED is 0 (< epoch 1): proxies see the
        // node as switching and route nothing to it; a claim that lands now
        // is noticed by the publisher and applied next by the watcher.
        applier.start_up().await.map_err(|e| SidecarError::Role {
            node: cfg.node.clone(),
            site: cfg.site_name(cfg.site).unwrap_or("?").to_string(),
            code: e.code,
            reason: e.reason,
        })?;
        let role_report = applier.report();

        let serving = serve::Serving::start(&cfg, memory.clone()).await?;
        self.addrs.tcp = serving.local_addr(TransportKind::Tcp);
        self.addrs.verbs = serving.local_addr(TransportKind::Verbs);
        let peers = serving.peers();
        self.window = Some(serving);
        self.tasks
            .push(tokio::spawn(applier.run(role_changed, stop_rx.clone())));

        if let Some(a) = &cfg.agent_check {
            let server = agent_check::Server::bind(a.listen)
                .await
                .and_then(|s| s.local_addr().map(|addr| (s, addr)))
                .map_err(|source| SidecarError::Bind {
                    node: cfg.node.clone(),
                    what: "agent-check responder",
                    addr: a.listen,
                    source,
                })?;
            self.addrs.agent_check = Some(server.1);
            let view = agent_check::NodeView::new(&cfg, memory.clone(), &slots);
            self.tasks.push(tokio::spawn(server.0.run(
                view,
                cfg.node.clone(),
                stop_rx.clone(),
            )));
        }

        if let Some(admin) = &cfg.admin {
            let state = Arc::new(admin::AdminState {
                cfg: cfg.clone(),
                memory,
                slots,
                publish: stats,
                peers,
                addrs: std::sync::Mutex::new(self.addrs.clone()),
                role: role_report,
            });
            let (addr, task) = admin::start(admin.listen, state.clone(), stop_rx.clone())
                .await
                .map_err(|source| SidecarError::Bind {
                    node: cfg.node.clone(),
                    what: "admin endpoint",
                    addr: admin.listen,
                    source,
                })?;
            self.addrs.admin = Some(addr);
            if let Ok(mut a) = state.addrs.lock() {
                *a = self.addrs.clone();
            }
            self.tasks.push(task);
        }
        Ok(())
    }

    /// The config it runs.
    pub fn config(&self) -> &SidecarConfig {
        &self.cfg
    }

    /// Addresses actually bound.
    pub fn addrs(&self) -> &BoundAddrs {
        &self.addrs
    }

    /// Stops every loop, waits for them, stops the transports and releases
    /// the window (removing the shm file this sidecar created).
    pub async fn stop(mut self) {
        let _ = self.stop_tx.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(p) = self.publisher.take() {
            let _ = tokio::task::spawn_blocking(move || p.stop()).await;
        }
        if let Some(w) = self.window.take() {
            let _ = tokio::task::spawn_blocking(move || w.stop()).await;
        }
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.stop_tx.send(true);
    }
}
