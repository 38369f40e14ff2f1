//! The reader side's registry of transports: [`Endpoint`], the config
//! variant naming where a window is reached and over which transport, and
//! [`Link`], one live connection made from it ([`Link::connect`], the one
//! place an endpoint becomes a [`RemoteWindow`] of its transport).
//!
//! The proxy's links to node windows (`rdmalb_proxy::balance::NodeWindows`)
//! and the agent's links to peer proxies' windows
//! (`rdmalb_proxy::reconfig::PeerLinks`) both connect through
//! [`Link::connect`] and re-connect when [`Link::is_alive`] says no; they
//! ask the endpoint what it needs ([`Endpoint::needs_key`],
//! [`Endpoint::check_available`]) instead of matching its variants. A new
//! transport is a module with its [`RemoteWindow`], its word in
//! [`TransportKind`] and a variant of [`Endpoint`] with their arms here, and
//! its server ([`crate::serve`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use std::fmt;

use crate::{Expect, Psk, RemoteWindow, ShmWindow, TcpWindow, WindowError};

/// Which transport carries a [`RemoteWindow`]'s operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Shared memory on the same host (`/dev/shm` file mapping), one-sided.
    Shm,
    /// Two-sided TCP responder in the window's owner.
    Tcp,
    /// RDMA verbs (InfiniBand / RoCE), one-sided.
    Verbs,
}

impl TransportKind {
    /// Every transport, in the order messages list them.
    pub const ALL: [TransportKind; 3] =
        [TransportKind::Shm, TransportKind::Tcp, TransportKind::Verbs];

    /// The transport words a config accepts, for messages.
    pub const ACCEPTED: &'static str = "\"shm\", \"tcp\" or \"verbs\"";

    /// The name used in configuration files and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Tcp => "tcp",
            TransportKind::Verbs => "verbs",
        }
    }

    /// Whether the window's owner takes part in serving an operation.
    pub fn is_one_sided(self) -> bool {
        !matches!(self, TransportKind::Tcp)
    }

    /// Whether reaching or serving a window over it needs the cluster's
    /// pre-shared key: every transport that leaves the host (shm's access
    /// control is the file's permission bits).
    pub fn needs_key(self) -> bool {
        !matches!(self, TransportKind::Shm)
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TransportKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TransportKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown window transport {s:?}; expected {}",
                    TransportKind::ACCEPTED
                )
            })
    }
}

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

    /// Whether connecting needs the cluster's pre-shared key.
    pub fn needs_key(&self) -> bool {
        self.transport().needs_key()
    }

    /// Fails now, with the error that names the alternatives, when this
    /// process can never connect over the endpoint's transport (verbs without
    /// an RDMA device, or a binary built without verbs), so start-up stops
    /// instead of retrying a link that cannot come up.
    pub fn check_available(&self) -> Result<(), WindowError> {
        match self {
            Endpoint::Shm { .. } | Endpoint::Tcp { .. } => Ok(()),
            Endpoint::Verbs { device, .. } => verbs_available(device.as_deref()),
        }
    }
}

/// Whether this process can use RDMA verbs on `device` (the first device
/// when `None`): both sides of the verbs transport check it at start-up.
pub(crate) fn verbs_available(device: Option<&str>) -> Result<(), WindowError> {
    #[cfg(feature = "verbs")]
    return crate::verbs::probe(device).map(|_| ());
    #[cfg(not(feature = "verbs"))]
    {
        let _ = device;
        Err(WindowError::verbs_not_compiled())
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

/// A live connection to a peer's window.
pub struct Link {
    window: Arc<dyn RemoteWindow>,
    /// The same window when it is shm, read inline on the request path.
    shm: Option<Arc<ShmWindow>>,
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
        let window: Arc<dyn RemoteWindow> = match peer.endpoint {
            Endpoint::Shm { path } => {
                let w = Arc::new(ShmWindow::open(path, peer.expect)?);
                return Ok(Link {
                    shm: Some(Arc::clone(&w)),
                    window: w,
                });
            }
            Endpoint::Tcp { addr } => {
                Arc::new(TcpWindow::connect(*addr, psk()?, peer.id, peer.expect).await?)
            }
            #[cfg(not(feature = "verbs"))]
            Endpoint::Verbs { .. } => return Err(WindowError::verbs_not_compiled()),
            #[cfg(feature = "verbs")]
            Endpoint::Verbs { control, device } => Arc::new(
                crate::verbs::VerbsWindow::connect(
                    *control,
                    psk()?,
                    peer.id,
                    peer.expect,
                    device.as_deref(),
                )
                .await?,
            ),
        };
        Ok(Link { window, shm: None })
    }

    /// The window, for reads and atomics.
    pub fn window(&self) -> &Arc<dyn RemoteWindow> {
        &self.window
    }

    /// The same window when it is shm (read inline, without a future).
    pub fn shm(&self) -> Option<&Arc<ShmWindow>> {
        self.shm.as_ref()
    }

    /// False once the link broke ([`RemoteWindow::is_alive`]).
    pub fn is_alive(&self) -> bool {
        self.window.is_alive()
    }
}

#[cfg(test)]
mod tests;
