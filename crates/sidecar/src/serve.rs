//! The window's memory and the transports that serve it.
//!
//! - shm: the window *is* the file mapping; nothing runs to serve a read
//!   (the proxy maps the file). The file is created with the configured mode
//!   and removed when the last reference to the memory goes away.
//! - tcp: `rdmalb_window::tcp::serve`, the two-sided responder on its own OS
//!   threads (deliberately outside the runtime, see `rdmalb_window::tcp`).
//! - verbs: `rdmalb_window::verbs::VerbsServer`, which registers the two memory
//!   regions; on a machine without an RDMA device it fails with a message
//!   naming the device problem and the shm/tcp alternatives.
//!
//! Without `[window.shm]` the memory is an anonymous mapping.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{SidecarConfig, SidecarError};
use rdmalb_window::tcp::{self, Psk, TcpServerHandle};
#[cfg(feature = "verbs")]
use rdmalb_window::verbs::{VerbsPeer, VerbsServer};
use rdmalb_window::WindowMemory;

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

/// Read access to who is connected, for /status and /metrics.
#[derive(Clone, Default)]
pub struct Peers {
    tcp: Arc<Mutex<Option<TcpServerHandle>>>,
    #[cfg(feature = "verbs")]
    verbs: Arc<Mutex<Option<VerbsServer>>>,
}

impl Peers {
    /// Open tcp responder connections, with requests served since start.
    /// (The responder counts connections; it does not keep peer identities.)
    pub fn tcp(&self) -> Vec<serde_json::Value> {
        let Ok(g) = self.tcp.lock() else {
            return Vec::new();
        };
        match g.as_ref() {
            Some(h) => vec![serde_json::json!({
                "connections": h.connections(),
                "requests_served": h.requests_served(),
            })]
            .into_iter()
            .filter(|_| h.connections() > 0)
            .collect(),
            None => Vec::new(),
        }
    }

    /// Proxies paired over verbs (none in a build without verbs).
    #[cfg(not(feature = "verbs"))]
    pub fn verbs(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// Proxies paired over verbs.
    #[cfg(feature = "verbs")]
    pub fn verbs(&self) -> Vec<serde_json::Value> {
        let Ok(g) = self.verbs.lock() else {
            return Vec::new();
        };
        g.as_ref()
            .map(|v| v.peers().iter().map(peer_json).collect())
            .unwrap_or_default()
    }

    /// Requests the tcp responder served since start (0 without tcp).
    pub fn tcp_requests_served(&self) -> u64 {
        self.tcp
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(TcpServerHandle::requests_served))
            .unwrap_or(0)
    }
}

#[cfg(feature = "verbs")]
fn peer_json(p: &VerbsPeer) -> serde_json::Value {
    serde_json::json!({
        "proxy_id": p.proxy_id,
        "addr": p.addr.to_string(),
        "qpn": p.qpn,
        "remote_qpn": p.remote_qpn,
        "since_unix_ms": rdmalb_base::time::unix_ms(p.since),
    })
}

/// The running transports.
pub struct Serving {
    peers: Peers,
    tcp_addr: Option<SocketAddr>,
    verbs_addr: Option<SocketAddr>,
    /// Stops the transports' own threads when `stop` runs or this drops.
    stop_tx: watch::Sender<bool>,
}

impl Serving {
    /// Starts the configured tcp and verbs servers over `memory`.
    pub async fn start(
        cfg: &SidecarConfig,
        memory: Arc<WindowMemory>,
    ) -> Result<Serving, SidecarError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut s = Serving {
            peers: Peers::default(),
            tcp_addr: None,
            verbs_addr: None,
            stop_tx,
        };
        let werr = |what: &'static str| {
            move |source| SidecarError::Window {
                node: cfg.node.clone(),
                what,
                source,
            }
        };
        if let Some(t) = &cfg.window.tcp {
            let psk = Psk::from_file(&t.psk_file).map_err(werr("tcp responder"))?;
            let h = tcp::serve(memory.clone(), t.listen, psk, stop_rx.clone())
                .map_err(werr("tcp responder"))?;
            s.tcp_addr = Some(h.local_addr());
            if let Ok(mut g) = s.peers.tcp.lock() {
                *g = Some(h);
            }
        }
        #[cfg(not(feature = "verbs"))]
        if cfg.window.verbs.is_some() {
            return Err(werr("verbs server")(
                rdmalb_window::WindowError::verbs_not_compiled(),
            ));
        }
        #[cfg(feature = "verbs")]
        if let Some(v) = &cfg.window.verbs {
            let psk = Psk::from_file(&v.psk_file).map_err(werr("verbs server"))?;
            let (mem, control, device, rx) =
                (memory.clone(), v.control, v.device.clone(), stop_rx.clone());
            // Opening a device and registering memory are blocking verbs calls.
            let server = tokio::task::spawn_blocking(move || {
                VerbsServer::start(mem, control, psk, device, rx)
            })
            .await
            .map_err(|e| SidecarError::Window {
                node: cfg.node.clone(),
                what: "verbs server",
                source: rdmalb_window::WindowError::NoDevice {
                    detail: format!("start-up task failed: {e}"),
                },
            })?
            .map_err(werr("verbs server"))?;
            s.verbs_addr = Some(server.local_addr());
            tracing::info!(node = %cfg.node, device = server.device_name(), control = %server.local_addr(), "verbs window served");
            if let Ok(mut g) = s.peers.verbs.lock() {
                *g = Some(server);
            }
        }
        Ok(s)
    }

    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    pub fn verbs_addr(&self) -> Option<SocketAddr> {
        self.verbs_addr
    }

    /// A handle for /status.
    pub fn peers(&self) -> Peers {
        self.peers.clone()
    }

    /// Stops both servers and joins their threads (blocking).
    pub fn stop(self) {
        let _ = self.stop_tx.send(true);
        let tcp = self.peers.tcp.lock().ok().and_then(|mut g| g.take());
        if let Some(h) = tcp {
            h.stop();
        }
        #[cfg(feature = "verbs")]
        if let Some(mut v) = self.peers.verbs.lock().ok().and_then(|mut g| g.take()) {
            v.shutdown();
        }
    }
}
