//! The window's memory and the transports that serve it.
//!
//! - shm: the window *is* the file mapping; nothing runs to serve a read
//!   (the proxy maps the file). The file is created with the configured mode
//!   and removed when the last reference to the memory goes away.
//! - every other transport: a [`WindowServer`] started from its
//!   [`Listen`](rdmalb_window::Listen) (`rdmalb_window::serve`, the one
//!   place a transport's server is made): the tcp responder on its own OS threads (deliberately
//!   outside the runtime, see `rdmalb_window::tcp`), the verbs server that
//!   registers the two memory regions and, on a machine without an RDMA
//!   device, fails with a message naming the device problem and the
//!   shm/tcp alternatives.
//!
//! Without `[window.shm]` the memory is an anonymous mapping.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{SidecarConfig, SidecarError};
use rdmalb_window::{Psk, TransportKind, WindowError, WindowMemory, WindowServer};

/// Creates the window memory with the header initialised: the shm file when
/// configured, else anonymous memory.
pub fn create_memory(cfg: &SidecarConfig) -> Result<WindowMemory, SidecarError> {
    let node_id = u64::from(cfg.node_id);
    match &cfg.window.shm {
        Some(shm) => WindowMemory::create_shm(&shm.path, shm.mode, node_id, cfg.site_hash),
        None => WindowMemory::anonymous(node_id, cfg.site_hash),
    }
    .map_err(|source| SidecarError::Window {
        node: cfg.node.clone(),
        what: "shm window",
        source,
    })
}

/// Read access to the running servers, for /status and /metrics.
#[derive(Clone, Default)]
pub struct Peers {
    servers: Arc<Mutex<Vec<Box<dyn WindowServer>>>>,
}

impl Peers {
    /// Who the server of `kind` serves now (nothing when it is not served).
    pub fn of(&self, kind: TransportKind) -> Vec<serde_json::Value> {
        self.each(|s| (s.kind() == kind).then(|| s.peers()))
            .into_iter()
            .flatten()
            .collect()
    }

    /// What each server serves on, in start order.
    pub fn describe(&self) -> Vec<serde_json::Value> {
        self.each(|s| Some(s.describe()))
    }

    fn each<T>(&self, f: impl Fn(&dyn WindowServer) -> Option<T>) -> Vec<T> {
        let Ok(g) = self.servers.lock() else {
            return Vec::new();
        };
        g.iter().filter_map(|s| f(s.as_ref())).collect()
    }
}

/// The running transports.
pub struct Serving {
    peers: Peers,
    /// Stops the transports' own threads when `stop` runs or this drops.
    stop_tx: watch::Sender<bool>,
}

impl Serving {
    /// Starts a server for each configured transport that has one, over
    /// `memory`.
    pub async fn start(
        cfg: &SidecarConfig,
        memory: Arc<WindowMemory>,
    ) -> Result<Serving, SidecarError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let s = Serving {
            peers: Peers::default(),
            stop_tx,
        };
        for (listen, psk_file) in cfg.window.listeners() {
            let what = listen.what();
            let werr = |source| SidecarError::Window {
                node: cfg.node.clone(),
                what,
                source,
            };
            let psk = Psk::from_file(psk_file).map_err(werr)?;
            let (mem, rx) = (memory.clone(), stop_rx.clone());
            // Binding, opening a device and registering memory block.
            let server = tokio::task::spawn_blocking(move || listen.start(mem, psk, rx))
                .await
                .map_err(|e| {
                    werr(WindowError::io(
                        "the start-up task",
                        std::io::Error::other(e.to_string()),
                    ))
                })?
                .map_err(werr)?;
            tracing::info!(node = %cfg.node, transport = %server.kind(), addr = %server.local_addr(), "window served");
            if let Ok(mut g) = s.peers.servers.lock() {
                g.push(server);
            }
        }
        Ok(s)
    }

    /// The bound address of the server of `kind`, when it is served.
    pub fn local_addr(&self, kind: TransportKind) -> Option<SocketAddr> {
        self.peers
            .each(|s| (s.kind() == kind).then(|| s.local_addr()))
            .pop()
    }

    /// A handle for /status.
    pub fn peers(&self) -> Peers {
        self.peers.clone()
    }

    /// Stops every server and joins their threads (blocking).
    pub fn stop(self) {
        let _ = self.stop_tx.send(true);
        let servers = self
            .peers
            .servers
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default();
        for mut s in servers {
            s.shutdown();
        }
    }
}
