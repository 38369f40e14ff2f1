//! Sidecar side of the verbs transport: [`VerbsServer`].
//!
//! The server registers two memory regions over the sidecar's
//! [`WindowMemory`] — bytes 0..256 (header + load block) REMOTE_READ only,
//! bytes 256..1536 (control, site locks, update counters) REMOTE_READ |
//! REMOTE_ATOMIC — and listens on a TCP control port. Each proxy that
//! connects and passes the pre-shared-key handshake (the same one as the tcp
//! transport, [`crate::tcp::auth`]) gets its own RC queue pair,
//! connected to the proxy's, and the addresses and rkeys of both regions.
//! From then on the NIC serves that proxy's READs and atomics; the sidecar
//! does nothing per operation.
//!
//! The control connection is the queue pair's lease: when the proxy closes it
//! (or dies, detected by TCP keepalive), the queue pair is destroyed. One OS
//! thread accepts; one short-lived thread per connection does the handshake
//! and then waits for the connection to end (tens of proxies, not thousands:
//! a thread each is simplest and costs nothing per operation).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::queue_pair::QueuePair;
use sideway::ibverbs::AccessFlags;

use super::device::{self, Device, DeviceError};
use super::wire::{self, Answer, ConnectReply, ConnectRequest, Refusal, RegionInfo};
use crate::layout::{ATOMIC_BYTES, READ_ONLY_BYTES};
use crate::{Psk, WindowError, WindowMemory};
use tokio::sync::watch;

/// Most proxies served at once (each holds a queue pair and a thread).
const MAX_PEERS: usize = 1024;
/// Most connections still in the handshake at once (unauthenticated).
const MAX_HANDSHAKES: usize = 64;
/// Bound on each read/write during the handshake and setup.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How often idle threads look at the shutdown flag.
const TICK: Duration = Duration::from_millis(200);

/// A proxy currently paired with this sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsPeer {
    /// The id the proxy sent.
    pub proxy_id: u16,
    /// The proxy's control connection address.
    pub addr: SocketAddr,
    /// Our queue pair number for this proxy.
    pub qpn: u32,
    /// The proxy's queue pair number.
    pub remote_qpn: u32,
    /// When the pairing was made.
    pub since: SystemTime,
}

struct Shared {
    // Regions before the memory they cover: dropped first.
    read_mr: Arc<MemoryRegion>,
    atomic_mr: Arc<MemoryRegion>,
    cq: GenericCompletionQueue,
    device: Arc<Device>,
    mem: Arc<WindowMemory>,
    psk: Psk,
    shutdown: AtomicBool,
    signal: watch::Receiver<bool>,
    handshakes: AtomicUsize,
    peers: Mutex<BTreeMap<u64, VerbsPeer>>,
    next_id: AtomicU64,
}

/// The verbs responder of one sidecar window. Dropping it (or
/// [`VerbsServer::shutdown`]) stops accepting and tears down every queue pair.
pub struct VerbsServer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for VerbsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsServer")
            .field("control", &self.local_addr)
            .field("device", &self.shared.device)
            .finish()
    }
}

impl VerbsServer {
    /// Opens `device` (or the first RDMA device), registers the window's two
    /// regions and starts serving the control port `control_listen` until
    /// `shutdown` becomes true (or its sender is dropped), or
    /// [`VerbsServer::shutdown`] / drop. Works with or without a Tokio runtime.
    ///
    /// Fails with [`WindowError::NoDevice`] when there is no usable RDMA
    /// device or libibverbs is missing, with [`WindowError::Io`] when the port
    /// cannot be bound.
    pub fn start(
        mem: Arc<WindowMemory>,
        control_listen: SocketAddr,
        psk: Psk,
        device: Option<String>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<VerbsServer, WindowError> {
        let dev = Arc::new(device::open(device.as_deref()).map_err(device_error)?);
        let len = mem.len();
        if len < ATOMIC_BYTES.end {
            return Err(WindowError::NoDevice {
                detail: format!("window memory is {len} bytes, too small to register"),
            });
        }
        let base = mem.as_ptr() as usize;
        // SAFETY: both ranges lie inside the window mapping (checked above),
        // which `Shared` keeps alive (`mem`) longer than the regions (field
        // order). The NIC accesses it only as the access flags allow: region
        // 1 remote read; region 2 remote read and 8-byte atomics, which is
        // how every other party touches those words too (AtomicU64).
        let read_mr = unsafe {
            dev.pd.reg_mr(
                base + READ_ONLY_BYTES.start,
                READ_ONLY_BYTES.len(),
                AccessFlags::RemoteRead,
            )
        }
        .map_err(|e| registration_error(&dev, "read-only", &e))?;
        // SAFETY: as above.
        let atomic_mr = unsafe {
            dev.pd.reg_mr(
                base + ATOMIC_BYTES.start,
                ATOMIC_BYTES.len(),
                AccessFlags::LocalWrite | AccessFlags::RemoteRead | AccessFlags::RemoteAtomic,
            )
        }
        .map_err(|e| registration_error(&dev, "atomic", &e))?;
        let mut b = dev.ctx.create_cq_builder();
        b.setup_cqe(16);
        let cq: GenericCompletionQueue = b
            .build()
            .map_err(|e| WindowError::NoDevice {
                detail: format!(
                    "{}: cannot create a completion queue: {}",
                    dev.name,
                    rdmalb_base::error::chain(&e)
                ),
            })?
            .into();

        let listener = TcpListener::bind(control_listen).map_err(|e| {
            WindowError::io(
                format!("binding the verbs control port {control_listen}"),
                e,
            )
        })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| WindowError::io("verbs control port address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| WindowError::io("verbs control port", e))?;
        tracing::info!(
            control = %local_addr,
            device = %dev.name,
            port = dev.port,
            gid_index = dev.gid_index,
            gid = %dev.gid,
            "verbs window server listening"
        );
        let shared = Arc::new(Shared {
            read_mr,
            atomic_mr,
            cq,
            device: dev,
            mem,
            psk,
            shutdown: AtomicBool::new(false),
            signal: shutdown,
            handshakes: AtomicUsize::new(0),
            peers: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        });
        let s2 = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("rdmalb-verbs-accept".into())
            .spawn(move || accept_loop(s2, listener))
            .map_err(|e| WindowError::io("starting the verbs accept thread", e))?;
        Ok(VerbsServer {
            shared,
            local_addr,
            accept: Some(accept),
        })
    }

    /// The bound control address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Name of the RDMA device in use.
    pub fn device_name(&self) -> &str {
        &self.shared.device.name
    }

    /// Proxies currently paired (for `/status`).
    pub fn peers(&self) -> Vec<VerbsPeer> {
        lock(&self.shared.peers).values().cloned().collect()
    }

    /// Stops accepting and closes every pairing (their queue pairs are
    /// destroyed within a fraction of a second). Idempotent.
    pub fn shutdown(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl crate::serve::WindowServer for VerbsServer {
    fn kind(&self) -> crate::TransportKind {
        crate::TransportKind::Verbs
    }

    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "verbs",
            "control": self.local_addr.to_string(),
            "device": self.device_name(),
        })
    }

    fn peers(&self) -> Vec<serde_json::Value> {
        VerbsServer::peers(self)
            .iter()
            .map(|p| {
                serde_json::json!({
                    "proxy_id": p.proxy_id,
                    "addr": p.addr.to_string(),
                    "qpn": p.qpn,
                    "remote_qpn": p.remote_qpn,
                    "since_unix_ms": rdmalb_base::time::unix_ms(p.since),
                })
            })
            .collect()
    }

    /// Peers change the window with the NIC's atomics, which the CPU's would
    /// race: this process's own go through the NIC too, over a loopback
    /// queue pair to this server on the same device.
    fn atomics_endpoint(&self) -> Option<crate::Endpoint> {
        Some(crate::Endpoint::Verbs {
            control: self.local_addr,
            device: Some(self.device_name().to_string()),
        })
    }

    fn shutdown(&mut self) {
        VerbsServer::shutdown(self);
    }
}

impl Drop for VerbsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn device_error(e: DeviceError) -> WindowError {
    match e {
        DeviceError::Missing(detail) | DeviceError::Failed(detail) => {
            WindowError::NoDevice { detail }
        }
    }
}

fn registration_error(
    dev: &Device,
    which: &str,
    e: &(dyn std::error::Error + 'static),
) -> WindowError {
    WindowError::NoDevice {
        detail: format!(
            "{}: cannot register the {which} memory region: {} (locked-memory limit? try `ulimit -l unlimited`)",
            dev.name,
            rdmalb_base::error::chain(e)
        ),
    }
}

impl Shared {
    /// Whether to stop: our own flag, or the caller's shutdown signal (set to
    /// true, or its sender gone).
    fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
            || *self.signal.borrow()
            || self.signal.has_changed().is_err()
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    while !shared.stopping() {
        match listener.accept() {
            Ok((stream, addr)) => {
                if shared.handshakes.load(Ordering::Acquire) >= MAX_HANDSHAKES
                    || lock(&shared.peers).len() >= MAX_PEERS
                {
                    tracing::warn!(%addr, "verbs control connection rejected: too many connections");
                    continue;
                }
                shared.handshakes.fetch_add(1, Ordering::AcqRel);
                let s2 = Arc::clone(&shared);
                let spawned = std::thread::Builder::new()
                    .name("rdmalb-verbs-ctl".into())
                    .spawn(move || serve_peer(s2, stream, addr));
                if let Err(e) = spawned {
                    shared.handshakes.fetch_sub(1, Ordering::AcqRel);
                    tracing::warn!(%addr, error = %e, "cannot start a verbs control thread");
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "verbs control accept failed");
                std::thread::sleep(TICK);
            }
        }
    }
}

fn serve_peer(shared: Arc<Shared>, mut stream: TcpStream, addr: SocketAddr) {
    let setup = pair(&shared, &mut stream, addr);
    shared.handshakes.fetch_sub(1, Ordering::AcqRel);
    let (id, qp) = match setup {
        Ok(v) => v,
        Err(reason) => {
            tracing::warn!(%addr, %reason, "verbs pairing refused");
            return;
        }
    };
    // Hold the queue pair until the proxy goes away or we shut down.
    let _ = stream.set_read_timeout(Some(TICK));
    let mut buf = [0u8; 64];
    let why = loop {
        if shared.stopping() {
            break "sidecar shutting down".to_string();
        }
        match stream.read(&mut buf) {
            Ok(0) => break "proxy closed the connection".to_string(),
            Ok(_) => {} // nothing is expected after setup; ignore
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => break format!("control connection failed: {e}"),
        }
    };
    let peer = lock(&shared.peers).remove(&id);
    drop(qp);
    tracing::info!(%addr, proxy_id = peer.map(|p| p.proxy_id), reason = %why, "verbs peer released");
}

/// Handshake, request, queue pair, reply. Returns the peer key and the
/// connected queue pair.
fn pair(
    shared: &Shared,
    stream: &mut TcpStream,
    addr: SocketAddr,
) -> Result<(u64, sideway::ibverbs::queue_pair::BasicQueuePair), String> {
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(SETUP_TIMEOUT))
        .and_then(|_| stream.set_write_timeout(Some(SETUP_TIMEOUT)))
        .map_err(|e| format!("socket options: {e}"))?;
    let sock = socket2::SockRef::from(&*stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let _ = sock.set_tcp_keepalive(&keepalive);

    let announced = wire::server_handshake(stream, &shared.psk).map_err(|e| match e {
        wire::HandshakeError::Io(e) if e.kind() == ErrorKind::UnexpectedEof => {
            "authentication: the peer closed the connection during the handshake (wrong key?)"
                .to_string()
        }
        e => format!("authentication: {e}"),
    })?;
    let payload = wire::read_frame(stream).map_err(|e| format!("reading the request: {e}"))?;
    let req = ConnectRequest::decode(&payload).map_err(|e| e.to_string())?;
    if u64::from(req.proxy_id) != announced {
        return Err(format!(
            "proxy id {} in the request differs from {announced} in the handshake",
            req.proxy_id
        ));
    }
    let refuse = |stream: &mut TcpStream, reason: String| {
        let _ = wire::write_frame(
            stream,
            &Refusal {
                reason: reason.clone(),
            }
            .encode(),
        );
        reason
    };
    let dev = &shared.device;
    let mut qp = dev
        .create_qp(
            &shared.cq,
            1,
            AccessFlags::RemoteRead | AccessFlags::RemoteAtomic,
        )
        .map_err(|e| refuse(stream, e.to_string()))?;
    let psn = device::random_psn();
    // Serve as many concurrent READ/atomics as the device allows.
    let depth = dev.max_rd_atomic;
    dev.connect_qp(&mut qp, psn, &req.qp, depth, 1)
        .map_err(|e| refuse(stream, e.to_string()))?;
    let qpn = qp.qp_number();
    let reply = ConnectReply {
        qp: dev.endpoint(qpn, psn, depth),
        read_region: region(&shared.read_mr),
        atomic_region: region(&shared.atomic_mr),
    };
    debug_assert!(matches!(
        Answer::decode(&reply.encode()),
        Ok(Answer::Reply(_))
    ));
    wire::write_frame(stream, &reply.encode()).map_err(|e| format!("sending the reply: {e}"))?;
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    lock(&shared.peers).insert(
        id,
        VerbsPeer {
            proxy_id: req.proxy_id,
            addr,
            qpn,
            remote_qpn: req.qp.qpn,
            since: SystemTime::now(),
        },
    );
    tracing::info!(
        %addr,
        proxy_id = req.proxy_id,
        qpn,
        remote_qpn = req.qp.qpn,
        window = ?shared.mem.path(),
        "verbs peer paired"
    );
    Ok((id, qp))
}

fn region(mr: &MemoryRegion) -> RegionInfo {
    RegionInfo {
        addr: mr.get_ptr() as u64,
        rkey: mr.rkey(),
        len: mr.region_len() as u32,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
