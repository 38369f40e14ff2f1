//! One live connection to a peer's window, whatever the transport, and how
//! to tell it has broken: the proxy's links to node windows
//! (`rdmalb_proxy::balance::NodeWindows`) and the agent's links to peer
//! proxies' windows (`rdmalb_proxy::reconfig::PeerLinks`) both connect
//! through [`Link::connect`] and re-connect when [`Link::is_alive`] says no.

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::{Expect, Psk, RemoteWindow, ShmWindow, TcpWindow, TransportKind, WindowError};

/// Where a window is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// File under /dev/shm mapped by this process (same host).
    Shm { path: PathBuf },
    /// The owner's tcp responder (two-sided).
    Tcp { addr: SocketAddr },
    /// The owner's verbs control port; reads and atomics go over RDMA.
    Verbs {
        control: SocketAddr,
        device: Option<String>,
    },
}

impl Endpoint {
    /// The transport it uses.
    pub fn transport(&self) -> TransportKind {
        match self {
            Endpoint::Shm { .. } => TransportKind::Shm,
            Endpoint::Tcp { .. } => TransportKind::Tcp,
            Endpoint::Verbs { .. } => TransportKind::Verbs,
        }
    }

    /// The transport's name in configs and metric labels.
    pub fn transport_name(&self) -> &'static str {
        self.transport().as_str()
    }
}

/// How to reach and check a window: its endpoint, the header it must show,
/// and for tcp and verbs the key and the id this process authenticates as.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    pub endpoint: &'a Endpoint,
    pub expect: &'a Expect,
    pub psk: Option<&'a Psk>,
    /// This process's id in the handshake (a proxy's id).
    pub id: u16,
}

/// A live connection and what tells that it broke.
pub struct Link {
    window: Arc<dyn RemoteWindow>,
    alive: Liveness,
    shm: Option<Arc<ShmWindow>>,
}

enum Liveness {
    /// The mapped file's identity: a restarted owner recreates the file.
    Shm {
        path: PathBuf,
        dev: u64,
        ino: u64,
    },
    Tcp(Arc<TcpWindow>),
    #[cfg(feature = "verbs")]
    Verbs(Arc<crate::verbs::VerbsWindow>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("peer", &self.window.peer())
            .field("transport", &self.window.kind())
            .finish()
    }
}

impl Link {
    /// Connects to `peer`'s window and checks its header. Tcp and verbs need
    /// the pre-shared key; verbs needs an RDMA device and a binary built with
    /// the `verbs` feature (otherwise a [`WindowError::NoDevice`] that says
    /// so).
    pub async fn connect(peer: Peer<'_>) -> Result<Link, WindowError> {
        let psk = || {
            peer.psk.ok_or_else(|| WindowError::Psk {
                path: "cluster.psk_file".into(),
                reason: "not configured; tcp and verbs windows need it".into(),
            })
        };
        match peer.endpoint {
            Endpoint::Shm { path } => {
                let w = Arc::new(ShmWindow::open(path, peer.expect)?);
                // After the open: the identity of the file that was mapped.
                let m = std::fs::metadata(path)
                    .map_err(|e| WindowError::io(format!("inspecting {}", path.display()), e))?;
                Ok(Link {
                    shm: Some(Arc::clone(&w)),
                    window: w,
                    alive: Liveness::Shm {
                        path: path.clone(),
                        dev: m.dev(),
                        ino: m.ino(),
                    },
                })
            }
            Endpoint::Tcp { addr } => {
                let w = Arc::new(TcpWindow::connect(*addr, psk()?, peer.id, peer.expect).await?);
                Ok(Link {
                    window: w.clone(),
                    alive: Liveness::Tcp(w),
                    shm: None,
                })
            }
            #[cfg(not(feature = "verbs"))]
            Endpoint::Verbs { .. } => Err(WindowError::verbs_not_compiled()),
            #[cfg(feature = "verbs")]
            Endpoint::Verbs { control, device } => {
                let w = Arc::new(
                    crate::verbs::VerbsWindow::connect(
                        *control,
                        psk()?,
                        peer.id,
                        peer.expect,
                        device.as_deref(),
                    )
                    .await?,
                );
                Ok(Link {
                    window: w.clone(),
                    alive: Liveness::Verbs(w),
                    shm: None,
                })
            }
        }
    }

    /// The window, for reads and atomics.
    pub fn window(&self) -> &Arc<dyn RemoteWindow> {
        &self.window
    }

    /// The same window when it is shm (read inline, without a future).
    pub fn shm(&self) -> Option<&Arc<ShmWindow>> {
        self.shm.as_ref()
    }

    /// False once the link broke: the shm file was replaced or removed (its
    /// owner restarted or stopped), the tcp connection closed, the verbs
    /// queue pair failed.
    pub fn is_alive(&self) -> bool {
        match &self.alive {
            Liveness::Shm { path, dev, ino } => std::fs::metadata(path)
                .map(|m| m.dev() == *dev && m.ino() == *ino)
                .unwrap_or(false),
            Liveness::Tcp(w) => !w.is_closed(),
            #[cfg(feature = "verbs")]
            Liveness::Verbs(w) => w.broken().is_none(),
        }
    }
}

#[cfg(test)]
mod tests;
