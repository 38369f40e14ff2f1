//! The owner side's registry of transports: [`Listen`], the config variant
//! naming a transport a window is served over and where, and
//! [`WindowServer`], the running server [`Listen::start`] makes of it (the
//! one place a config variant becomes a server of its transport). The
//! sidecar serves its node's window through it, the proxy its own window.
//!
//! Shm has no server: the window memory *is* the file peers map
//! ([`crate::WindowMemory::create_shm`]); only transports with something to
//! run (the tcp responder's threads, the verbs control port and memory
//! registrations) have a variant here.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::link::{verbs_available, Endpoint};
use crate::{Psk, TransportKind, WindowError, WindowMemory};

/// A running server of a window this process owns.
pub trait WindowServer: Send + Sync + std::fmt::Debug {
    /// The transport it serves.
    fn kind(&self) -> TransportKind;

    /// The bound address (useful with port 0).
    fn local_addr(&self) -> SocketAddr;

    /// What it serves on, for the owner's `/status`: `kind` (the
    /// transport's name) and its address.
    fn describe(&self) -> serde_json::Value;

    /// Who it serves now, one JSON object each, for the owner's `/status`
    /// and its peer gauge.
    fn peers(&self) -> Vec<serde_json::Value>;

    /// Where this process must send its own compare-and-swaps and
    /// fetch-and-adds on the window when peers' atomics over this transport
    /// are not atomic with the CPU's (verbs: the NIC's); `None` when plain
    /// CPU atomics on the memory are coherent with what peers do.
    fn atomics_endpoint(&self) -> Option<Endpoint>;

    /// Stops serving and joins the server's threads (blocking). Idempotent.
    fn shutdown(&mut self);
}

/// How a window is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// The two-sided tcp responder on `addr`.
    Tcp { addr: SocketAddr },
    /// The verbs control port (pairing over tcp; reads and atomics then go
    /// over RDMA) on `device`, the first RDMA device when `None`.
    Verbs {
        control: SocketAddr,
        device: Option<String>,
    },
}

impl Listen {
    /// The transports that have a server, in the order `/status` lists them.
    pub const KINDS: [TransportKind; 2] = [TransportKind::Tcp, TransportKind::Verbs];

    /// The transport it serves.
    pub fn transport(&self) -> TransportKind {
        match self {
            Listen::Tcp { .. } => TransportKind::Tcp,
            Listen::Verbs { .. } => TransportKind::Verbs,
        }
    }

    /// What the server is called in errors and logs.
    pub fn what(&self) -> &'static str {
        match self {
            Listen::Tcp { .. } => "tcp responder",
            Listen::Verbs { .. } => "verbs server",
        }
    }

    /// Fails now, with the error that names the alternatives, when this
    /// process cannot serve over the transport (verbs without an RDMA device
    /// or built without verbs).
    pub fn check_available(&self) -> Result<(), WindowError> {
        match self {
            Listen::Tcp { .. } => Ok(()),
            Listen::Verbs { device, .. } => verbs_available(device.as_deref()),
        }
    }

    /// Starts serving `mem` to peers that know `psk` until `stop` turns true
    /// (or its sender drops) or the server is shut down. Blocking (binding,
    /// opening a device, registering memory): call it from
    /// `spawn_blocking` on a runtime thread that must not stall.
    pub fn start(
        &self,
        mem: Arc<WindowMemory>,
        psk: Psk,
        stop: watch::Receiver<bool>,
    ) -> Result<Box<dyn WindowServer>, WindowError> {
        match self {
            Listen::Tcp { addr } => Ok(Box::new(crate::tcp::serve(mem, *addr, psk, stop)?)),
            #[cfg(feature = "verbs")]
            Listen::Verbs { control, device } => Ok(Box::new(crate::verbs::VerbsServer::start(
                mem,
                *control,
                psk,
                device.clone(),
                stop,
            )?)),
            #[cfg(not(feature = "verbs"))]
            Listen::Verbs { .. } => {
                let _ = (mem, psk, stop);
                Err(WindowError::verbs_not_compiled())
            }
        }
    }
}

#[cfg(test)]
mod tests;
