//! Proxy side of the verbs transport: [`VerbsWindow`].
//!
//! Connecting opens the RDMA device, creates an RC queue pair, authenticates
//! on the sidecar's control port (the tcp transport's PSK handshake),
//! exchanges queue-pair addresses, moves the queue pair to RTS and finally
//! reads the peer's header to check magic, layout version, size, node id and
//! site-table hash. Operations are then pure RDMA:
//!
//! - `read_raw`: RDMA READ of bytes 0..256 (region 1, read-only);
//! - `compare_swap`: ATOMIC_CMP_AND_SWP on region 2;
//! - `fetch_add`: ATOMIC_FETCH_AND_ADD on region 2;
//! - `read_word`: ATOMIC_FETCH_AND_ADD of 0 — an RDMA READ is not guaranteed
//!   to be atomic with respect to concurrent RDMA atomics on the same word,
//!   an atomic is.
//!
//! Words outside 32..192 are refused before anything is posted. Many
//! operations may be in flight; see [`super::engine`] for completion
//! handling, timeouts and failure.

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use sideway::ibverbs::queue_pair::QueuePair;

use super::device::{self, DeviceError};
use super::engine::{self, Done, Engine, OpError, Request, SLOT_BYTES};
use super::poller;
use super::wire::{self, Answer, ConnectRequest, RegionInfo};
use crate::layout::{ATOMIC_BYTES, READ_ONLY_BYTES, READ_WORDS};
use crate::transport::{check_atomic_word, Expect, RemoteWindow, WindowFuture};
use crate::{Psk, TransportKind, WindowError};

/// Tuning of a [`VerbsWindow`]; [`VerbsOptions::default`] suits the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbsOptions {
    /// Operations in flight at once on this window (local buffer slots).
    pub max_in_flight: usize,
    /// Bound on one operation; it then fails with [`WindowError::Timeout`].
    pub op_timeout: Duration,
    /// Bound on TCP connect, handshake and setup.
    pub connect_timeout: Duration,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        VerbsOptions {
            max_in_flight: 128,
            op_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A peer's window reached over RDMA verbs (one RC queue pair).
pub struct VerbsWindow {
    engine: Arc<Engine>,
    peer: String,
    read_region: RegionInfo,
    atomic_region: RegionInfo,
    device: String,
}

impl std::fmt::Debug for VerbsWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsWindow")
            .field("peer", &self.peer)
            .field("device", &self.device)
            .field("broken", &self.engine.broken())
            .finish()
    }
}

impl VerbsWindow {
    /// Connects to the sidecar's verbs control port with default options.
    /// See [`VerbsWindow::connect_with`].
    pub async fn connect(
        control_addr: SocketAddr,
        psk: &Psk,
        proxy_id: u16,
        expect: &Expect,
        device: Option<&str>,
    ) -> Result<VerbsWindow, WindowError> {
        Self::connect_with(
            control_addr,
            psk,
            proxy_id,
            expect,
            device,
            VerbsOptions::default(),
        )
        .await
    }

    /// Connects, pairs queue pairs and checks the peer's header.
    ///
    /// Errors: [`WindowError::NoDevice`] without a usable RDMA device or
    /// libibverbs; [`WindowError::Auth`] on a key mismatch; [`WindowError::Io`]
    /// / [`WindowError::Timeout`] when the control port is unreachable;
    /// [`WindowError::Protocol`] on a refusal or malformed answer; the header
    /// errors of [`Expect::check`].
    pub async fn connect_with(
        control_addr: SocketAddr,
        psk: &Psk,
        proxy_id: u16,
        expect: &Expect,
        device: Option<&str>,
        opts: VerbsOptions,
    ) -> Result<VerbsWindow, WindowError> {
        let device = device.map(str::to_string);
        let psk = psk.clone();
        // Device setup and the control exchange are blocking calls: keep them
        // off the async workers when a Tokio runtime is present.
        let setup = move || setup(control_addr, &psk, proxy_id, device.as_deref(), opts);
        let window = match tokio::runtime::Handle::try_current() {
            Ok(h) => h
                .spawn_blocking(setup)
                .await
                .map_err(|e| WindowError::Protocol {
                    peer: control_addr.to_string(),
                    detail: format!("verbs setup task failed: {e}"),
                })??,
            Err(_) => setup()?,
        };
        let raw = window.read_raw().await?;
        expect.check(&window.peer, &raw)?;
        Ok(window)
    }

    /// Name of the local RDMA device in use.
    pub fn device_name(&self) -> &str {
        &self.device
    }

    /// Why the window is unusable, if it is (then reconnect).
    pub fn broken(&self) -> Option<&str> {
        self.engine.broken()
    }

    /// Test hook: a compare-and-swap on word `word` (< 32) of the
    /// *read-only* region, skipping the client-side refusal, to show that the
    /// sidecar's NIC itself refuses it (that region has no atomic
    /// permission). Expect an error; the window is broken afterwards.
    #[doc(hidden)]
    pub async fn unchecked_compare_swap_read_only(
        &self,
        word: usize,
        expected: u64,
        new: u64,
    ) -> Result<u64, WindowError> {
        if word >= READ_WORDS {
            return Err(WindowError::Refused {
                peer: self.peer.clone(),
                word,
                reason: "not in the read-only region".into(),
            });
        }
        let addr = self.read_region.addr + (word * 8) as u64;
        self.word_op(Request::CompareSwap {
            rkey: self.read_region.rkey,
            addr,
            expected,
            new,
        })
        .await
    }

    fn remote_word(&self, word: usize) -> Result<(u32, u64), WindowError> {
        check_atomic_word(&self.peer, word)?;
        let offset = (word * 8)
            .checked_sub(ATOMIC_BYTES.start)
            .filter(|o| o + 8 <= self.atomic_region.len as usize)
            .ok_or_else(|| WindowError::Refused {
                peer: self.peer.clone(),
                word,
                reason: "outside the sidecar's atomic region".into(),
            })?;
        Ok((
            self.atomic_region.rkey,
            self.atomic_region.addr + offset as u64,
        ))
    }

    async fn run(&self, req: Request) -> Result<Done, WindowError> {
        self.engine.execute(req).await.map_err(|e| match e {
            OpError::Timeout(after) => WindowError::Timeout {
                peer: self.peer.clone(),
                after,
            },
            OpError::Broken(reason) | OpError::Completion(reason) => {
                tracing::debug!(peer = %self.peer, %reason, "verbs operation failed");
                WindowError::Closed {
                    peer: self.peer.clone(),
                }
            }
        })
    }

    async fn word_op(&self, req: Request) -> Result<u64, WindowError> {
        match self.run(req).await? {
            Done::Word(v) => Ok(v),
            Done::Block(_) => Err(self.mixup()),
        }
    }

    fn mixup(&self) -> WindowError {
        WindowError::Protocol {
            peer: self.peer.clone(),
            detail: "completion of the wrong kind".into(),
        }
    }
}

impl Drop for VerbsWindow {
    fn drop(&mut self) {
        self.engine.stop();
    }
}

impl RemoteWindow for VerbsWindow {
    fn kind(&self) -> TransportKind {
        TransportKind::Verbs
    }

    fn is_alive(&self) -> bool {
        self.broken().is_none()
    }

    fn peer(&self) -> &str {
        &self.peer
    }

    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]> {
        Box::pin(async move {
            let req = Request::Read {
                rkey: self.read_region.rkey,
                addr: self.read_region.addr,
                len: (READ_WORDS * 8) as u32,
            };
            match self.run(req).await? {
                Done::Block(b) => Ok(b),
                Done::Word(_) => Err(self.mixup()),
            }
        })
    }

    fn read_word(&self, word: usize) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            let (rkey, addr) = self.remote_word(word)?;
            self.word_op(Request::FetchAdd {
                rkey,
                addr,
                delta: 0,
            })
            .await
        })
    }

    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            let (rkey, addr) = self.remote_word(word)?;
            self.word_op(Request::CompareSwap {
                rkey,
                addr,
                expected,
                new,
            })
            .await
        })
    }

    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            let (rkey, addr) = self.remote_word(word)?;
            self.word_op(Request::FetchAdd { rkey, addr, delta }).await
        })
    }
}

/// The blocking part of connecting: device, queue pair, control exchange.
fn setup(
    control_addr: SocketAddr,
    psk: &Psk,
    proxy_id: u16,
    device_name: Option<&str>,
    opts: VerbsOptions,
) -> Result<VerbsWindow, WindowError> {
    let peer = control_addr.to_string();
    let protocol = |detail: String| WindowError::Protocol {
        peer: peer.clone(),
        detail,
    };
    let dev = device::shared(device_name).map_err(|e| match e {
        DeviceError::Missing(detail) | DeviceError::Failed(detail) => {
            WindowError::NoDevice { detail }
        }
    })?;
    let slots = opts.max_in_flight.clamp(1, 4096);
    let no_device = |detail: engine::EngineError| WindowError::NoDevice {
        detail: format!("{}: {detail}", dev.name),
    };
    let poller = poller::shared(&dev).map_err(|e| no_device(e.into()))?;
    let mut parts = engine::create_parts(poller, slots).map_err(no_device)?;
    let psn = device::random_psn();

    let mut stream = TcpStream::connect_timeout(&control_addr, opts.connect_timeout)
        .map_err(|e| WindowError::io(format!("connecting to the verbs control port {peer}"), e))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(opts.connect_timeout))
        .and_then(|_| stream.set_write_timeout(Some(opts.connect_timeout)))
        .map_err(|e| WindowError::io(format!("verbs control connection {peer}"), e))?;
    wire::client_handshake(&mut stream, psk, u64::from(proxy_id)).map_err(|e| match e {
        wire::HandshakeError::Auth(a) => WindowError::Auth {
            peer: peer.clone(),
            reason: a.to_string(),
        },
        wire::HandshakeError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            WindowError::Auth {
                peer: peer.clone(),
                reason: "the sidecar closed the connection during the handshake (wrong key?)"
                    .into(),
            }
        }
        wire::HandshakeError::Io(e) => WindowError::io(format!("verbs handshake with {peer}"), e),
    })?;

    let initiator = dev.max_rd_atomic;
    let req = ConnectRequest {
        proxy_id,
        qp: dev.endpoint(parts.qp.qp_number(), psn, initiator),
    };
    wire::write_frame(&mut stream, &req.encode())
        .map_err(|e| WindowError::io(format!("sending the verbs connect request to {peer}"), e))?;
    let payload = wire::read_frame(&mut stream).map_err(|e| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            WindowError::Timeout {
                peer: peer.clone(),
                after: opts.connect_timeout,
            }
        } else {
            WindowError::io(format!("reading the verbs connect reply from {peer}"), e)
        }
    })?;
    let reply = match Answer::decode(&payload).map_err(|e| protocol(e.to_string()))? {
        Answer::Reply(r) => r,
        Answer::Refused(r) => {
            return Err(protocol(format!(
                "sidecar refused the queue pair: {}",
                r.reason
            )))
        }
    };
    if reply.read_region.len as usize != READ_ONLY_BYTES.len()
        || (reply.atomic_region.len as usize) < ATOMIC_BYTES.len()
        || reply.read_region.addr == 0
        || reply.atomic_region.addr == 0
    {
        return Err(protocol(format!(
            "unexpected memory regions: read {:?}, atomic {:?}",
            reply.read_region, reply.atomic_region
        )));
    }
    // Never ask for more READ/atomic depth than the sidecar's QP serves.
    let depth = initiator.min(reply.qp.rd_atomic).max(1);
    dev.connect_qp(&mut parts.qp, psn, &reply.qp, 1, depth)
        .map_err(|e| protocol(format!("connecting the queue pair: {e}")))?;
    tracing::info!(
        peer = %peer,
        device = %dev.name,
        gid_index = dev.gid_index,
        qpn = parts.qp.qp_number(),
        remote_qpn = reply.qp.qpn,
        remote_gid_index = reply.qp.gid_index,
        depth,
        "verbs window connected"
    );
    debug_assert!(SLOT_BYTES >= READ_ONLY_BYTES.len());
    let engine = Engine::new(parts, stream, opts.op_timeout, peer.clone()).map_err(|detail| {
        WindowError::NoDevice {
            detail: format!("{}: {detail}", dev.name),
        }
    })?;
    engine.start().map_err(|e| match e {
        engine::EngineError::Poller(poller::PollerError::Thread(source)) => {
            WindowError::io("cannot start the completion thread", source)
        }
        other => WindowError::io(other.to_string(), std::io::Error::other("thread spawn")),
    })?;
    Ok(VerbsWindow {
        engine,
        peer,
        read_region: reply.read_region,
        atomic_region: reply.atomic_region,
        device: dev.name.clone(),
    })
}
