//! The tcp responder: an acceptor thread and one OS thread per connection,
//! outside any async runtime, so serving a read costs the node CPU time and
//! scheduling delay just like the seeds' two-sided monitor.
//!
//! Per connection: the whole handshake within one deadline
//! ([`ServeOptions::handshake_deadline`], [`HANDSHAKE_TIMEOUT`] by default:
//! a peer dribbling a byte at a time cannot stretch it), then a loop that
//! reads whatever bytes arrived, answers every complete frame in them and
//! writes all replies with one `write` (pipelining: a client may have many
//! requests outstanding). A bad tag or an undecodable frame closes the
//! connection; a READ_WORD / CAS / FAA outside words 32..192 gets an ERROR
//! reply and touches nothing.
//!
//! Connections still in the handshake and authenticated sessions have
//! separate limits. The handshake slots are few ([`MAX_HANDSHAKES`]); when
//! they are all taken, a new connection closes the *oldest* unauthenticated
//! one, so connections that never finish cannot keep a peer with the key
//! out, and no unauthenticated connection counts against the sessions
//! ([`MAX_CONNECTIONS`]). Every refusal is logged and counted
//! ([`TcpServerHandle::refusals`] and the `rdmalb_window_tcp_refused_total`
//! counter, labelled by `reason`).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::auth::{
    AuthError, Psk, ServerHandshake, SessionKeys, CLIENT_FINISH_LEN, CLIENT_HELLO_LEN,
};
use super::frame::{self, ErrorCode, Frame, Message, Reply, Request};
use super::{HANDSHAKE_TIMEOUT, MAX_CONNECTIONS, MAX_HANDSHAKES};
use crate::layout;
use crate::memory::WindowMemory;
use crate::seqlock;
use crate::WindowError;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Accepted, handshake not finished: holds a handshake slot.
    Handshake,
    /// Closed by the acceptor to make room for a newer handshake.
    Evicted,
    /// Authenticated: holds a session slot.
    Session,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    thread: Option<JoinHandle<()>>,
    stage: Stage,
}

/// Why the responder closed a connection that had not done anything wrong
/// at the protocol level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// All handshake slots were taken; this was the oldest.
    HandshakeEvicted,
    /// The handshake did not finish before the deadline.
    HandshakeDeadline,
    /// Authenticated, but all session slots were taken.
    SessionsFull,
}

impl Refusal {
    const ALL: [Refusal; 3] = [
        Refusal::HandshakeEvicted,
        Refusal::HandshakeDeadline,
        Refusal::SessionsFull,
    ];

    fn label(self) -> &'static str {
        match self {
            Refusal::HandshakeEvicted => "handshake_evicted",
            Refusal::HandshakeDeadline => "handshake_deadline",
            Refusal::SessionsFull => "sessions_full",
        }
    }
}

/// Connections the responder closed, by reason, since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Unauthenticated connections closed because every handshake slot was
    /// taken and a newer connection arrived.
    pub handshakes_evicted: u64,
    /// Connections that did not finish the handshake before the deadline.
    pub handshake_deadline: u64,
    /// Authenticated connections closed because every session slot was
    /// taken.
    pub sessions_full: u64,
}

/// Limits of a responder. [`ServeOptions::default`] is what proxies and
/// sidecars run with; tests shorten the deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// Time a client has for the whole handshake, from accept to FINISH.
    pub handshake_deadline: Duration,
    /// Connections in the handshake at once (at least 1); a new one closes
    /// the oldest when all are taken.
    pub max_handshakes: usize,
    /// Authenticated sessions at once; a client authenticating beyond this
    /// is closed.
    pub max_sessions: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_deadline: HANDSHAKE_TIMEOUT,
            max_handshakes: MAX_HANDSHAKES,
            max_sessions: MAX_CONNECTIONS,
        }
    }
}

struct Shared {
    mem: Arc<WindowMemory>,
    psk: Psk,
    opts: ServeOptions,
    stop: AtomicBool,
    conns: Mutex<HashMap<u64, Conn>>,
    next_conn: AtomicU64,
    served: AtomicU64,
    /// Indexed like [`Refusal::ALL`].
    refused: [AtomicU64; 3],
}

impl Shared {
    fn refuse(&self, why: Refusal, peer: SocketAddr) {
        let i = Refusal::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.refused[i].fetch_add(1, Ordering::Relaxed);
        metrics::counter!("rdmalb_window_tcp_refused_total", "reason" => why.label()).increment(1);
        let (handshakes, sessions) = (self.opts.max_handshakes, self.opts.max_sessions);
        tracing::warn!(%peer, reason = why.label(), handshakes, sessions, "window tcp connection refused");
    }
}

/// A running responder. Dropping it stops it (like [`TcpServerHandle::stop`]).
pub struct TcpServerHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    listener: Arc<TcpListener>,
    acceptor: Option<JoinHandle<()>>,
    watcher: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl std::fmt::Debug for TcpServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpServerHandle")
            .field("addr", &self.addr)
            .finish()
    }
}

/// Bind `listen` and serve `mem` to clients that know `psk`, until
/// `shutdown` becomes true (or its sender is dropped) or the handle is
/// stopped. Binding happens before this returns, so a bad address or a port
/// in use is reported here.
pub fn serve(
    mem: Arc<WindowMemory>,
    listen: SocketAddr,
    psk: Psk,
    shutdown: watch::Receiver<bool>,
) -> Result<TcpServerHandle, WindowError> {
    serve_with(mem, listen, psk, shutdown, ServeOptions::default())
}

/// [`serve`] with explicit limits.
pub fn serve_with(
    mem: Arc<WindowMemory>,
    listen: SocketAddr,
    psk: Psk,
    shutdown: watch::Receiver<bool>,
    mut opts: ServeOptions,
) -> Result<TcpServerHandle, WindowError> {
    opts.max_handshakes = opts.max_handshakes.max(1);
    let listener = TcpListener::bind(listen)
        .map_err(|e| WindowError::io(format!("binding window tcp responder on {listen}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| WindowError::io("reading the responder's bound address", e))?;
    let listener = Arc::new(listener);
    let shared = Arc::new(Shared {
        mem,
        psk,
        opts,
        stop: AtomicBool::new(false),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(1),
        served: AtomicU64::new(0),
        refused: Default::default(),
    });

    let acceptor = {
        let shared = shared.clone();
        let listener = listener.clone();
        std::thread::Builder::new()
            .name("window-tcp-accept".into())
            .spawn(move || accept_loop(&listener, &shared))
            .map_err(|e| WindowError::io("spawning the responder's accept thread", e))?
    };

    // Bridge the async shutdown signal to the threads with a tiny runtime of
    // its own, so `serve` works whether or not the caller runs Tokio.
    let (cancel_tx, cancel_rx) = oneshot::channel::<()>();
    let watcher = {
        let shared = shared.clone();
        let listener = listener.clone();
        let mut shutdown = shutdown;
        std::thread::Builder::new()
            .name("window-tcp-shutdown".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(error = %e, "window tcp responder cannot watch for shutdown");
                        return;
                    }
                };
                let signalled = rt.block_on(async {
                    tokio::select! {
                        _ = rdmalb_base::shutdown::requested(&mut shutdown) => true,
                        _ = cancel_rx => false,
                    }
                });
                if signalled {
                    begin_stop(&shared, &listener, addr);
                }
            })
    };
    let watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            // Do not leave the acceptor running without a way to stop it.
            begin_stop(&shared, &listener, addr);
            let _ = acceptor.join();
            return Err(WindowError::io(
                "spawning the responder's shutdown thread",
                e,
            ));
        }
    };

    tracing::info!(%addr, "window tcp responder listening");
    Ok(TcpServerHandle {
        addr,
        shared,
        listener,
        acceptor: Some(acceptor),
        watcher: Some((cancel_tx, watcher)),
    })
}

impl TcpServerHandle {
    /// The address the responder is bound to (with the real port when
    /// listening on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections currently open (authenticated or in the handshake).
    pub fn connections(&self) -> usize {
        self.shared.conns.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Requests served since start.
    pub fn requests_served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// Connections closed for a limit since start, by reason (also the
    /// `rdmalb_window_tcp_refused_total` counter).
    pub fn refusals(&self) -> Refusals {
        let n = |i: usize| self.shared.refused[i].load(Ordering::Relaxed);
        Refusals {
            handshakes_evicted: n(0),
            handshake_deadline: n(1),
            sessions_full: n(2),
        }
    }

    /// Stop accepting, close every connection and join all threads.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        begin_stop(&self.shared, &self.listener, self.addr);
        if let Some((cancel, watcher)) = self.watcher.take() {
            let _ = cancel.send(());
            let _ = watcher.join();
        }
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        // The acceptor is gone, so no connection is added after this drain.
        let conns: Vec<Conn> = match self.shared.conns.lock() {
            Ok(mut c) => c.drain().map(|(_, v)| v).collect(),
            Err(_) => Vec::new(),
        };
        for mut c in conns {
            let _ = c.stream.shutdown(Shutdown::Both);
            if let Some(t) = c.thread.take() {
                let _ = t.join();
            }
        }
        tracing::info!(addr = %self.addr, "window tcp responder stopped");
    }
}

impl crate::serve::WindowServer for TcpServerHandle {
    fn kind(&self) -> crate::TransportKind {
        crate::TransportKind::Tcp
    }

    fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    fn describe(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "tcp", "listen": self.addr.to_string() })
    }

    /// One entry while any connection is open: the responder counts
    /// connections and requests, it does not keep peer identities.
    fn peers(&self) -> Vec<serde_json::Value> {
        let connections = self.connections();
        if connections == 0 {
            return Vec::new();
        }
        vec![serde_json::json!({
            "connections": connections,
            "requests_served": self.requests_served(),
        })]
    }

    /// The responder runs peers' atomics as CPU atomics on the memory.
    fn atomics_endpoint(&self) -> Option<crate::Endpoint> {
        None
    }

    fn shutdown(&mut self) {
        if self.acceptor.is_some() {
            self.stop_inner();
        }
    }
}

impl Drop for TcpServerHandle {
    fn drop(&mut self) {
        if self.acceptor.is_some() {
            self.stop_inner();
        }
    }
}

/// Flag the stop, wake the acceptor and close live connections. Safe to call
/// more than once and from any thread.
fn begin_stop(shared: &Shared, listener: &TcpListener, addr: SocketAddr) {
    if shared.stop.swap(true, Ordering::SeqCst) {
        return;
    }
    // shutdown(2) on a listening socket wakes a blocked accept on Linux; if
    // that is refused, connecting to ourselves wakes it anywhere.
    if socket2::SockRef::from(listener)
        .shutdown(Shutdown::Both)
        .is_err()
    {
        let mut wake = addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(200));
    }
    if let Ok(conns) = shared.conns.lock() {
        for c in conns.values() {
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "window tcp accept failed");
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let Ok(mut conns) = shared.conns.lock() else {
            return;
        };
        evict_for_new_handshake(&mut conns, shared);
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("window-tcp-{id}"))
                .spawn(move || {
                    let result = serve_connection(stream, &shared, id, peer);
                    let stage = shared
                        .conns
                        .lock()
                        .ok()
                        .and_then(|mut c| c.remove(&id))
                        .map(|c| c.stage);
                    match result {
                        Ok(()) => tracing::debug!(%peer, "window tcp connection closed"),
                        // Counted and logged when it was evicted or refused.
                        Err(_) if stage == Some(Stage::Evicted) => {}
                        Err(ConnError::Refused(_)) => {}
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "window tcp connection dropped")
                        }
                    }
                })
        };
        match worker {
            Ok(t) => {
                conns.insert(
                    id,
                    Conn {
                        stream: registered,
                        peer,
                        thread: Some(t),
                        stage: Stage::Handshake,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot spawn window tcp connection thread")
            }
        }
    }
}

/// When every handshake slot is taken, close the oldest connection still in
/// the handshake, so that a new one (perhaps a peer with the key) gets a
/// slot. Called with the connection table locked, before a new connection
/// is added.
fn evict_for_new_handshake(conns: &mut HashMap<u64, Conn>, shared: &Shared) {
    let in_handshake = conns.values().filter(|c| c.stage == Stage::Handshake);
    if in_handshake.count() < shared.opts.max_handshakes {
        return;
    }
    // Ids grow with every accept: the smallest is the oldest.
    let oldest = conns
        .iter_mut()
        .filter(|(_, c)| c.stage == Stage::Handshake)
        .min_by_key(|(id, _)| **id)
        .map(|(_, c)| c);
    if let Some(c) = oldest {
        c.stage = Stage::Evicted;
        let _ = c.stream.shutdown(Shutdown::Both);
        shared.refuse(Refusal::HandshakeEvicted, c.peer);
    }
}

/// Move connection `id` from a handshake slot to a session slot, if it was
/// not evicted meanwhile and a session slot is free.
fn admit(shared: &Shared, id: u64) -> Result<(), ConnError> {
    let mut conns = shared
        .conns
        .lock()
        .map_err(|_| io::Error::other("connection table poisoned"))?;
    let sessions = conns.values().filter(|c| c.stage == Stage::Session).count();
    match conns.get_mut(&id) {
        Some(c) if c.stage == Stage::Handshake => {
            if sessions >= shared.opts.max_sessions {
                return Err(ConnError::Refused(Refusal::SessionsFull));
            }
            c.stage = Stage::Session;
            Ok(())
        }
        _ => Err(ConnError::Evicted),
    }
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("refused: {}", .0.label())]
    Refused(Refusal),
    #[error("closed to make room for a newer handshake")]
    Evicted,
    #[error("handshake: {0}")]
    Auth(#[from] AuthError),
    #[error("protocol: {0}")]
    Frame(#[from] frame::FrameError),
    #[error("client sent a reply frame")]
    UnexpectedReply,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Serve one connection; a refusal is counted before the socket closes, so
/// the count is in when the peer sees the close.
fn serve_connection(
    mut stream: TcpStream,
    shared: &Shared,
    id: u64,
    peer: SocketAddr,
) -> Result<(), ConnError> {
    let result = run_connection(&mut stream, shared, id);
    if let Err(ConnError::Refused(why)) = &result {
        shared.refuse(*why, peer);
    }
    result
}

fn run_connection(stream: &mut TcpStream, shared: &Shared, id: u64) -> Result<(), ConnError> {
    let deadline = Instant::now() + shared.opts.handshake_deadline;
    stream.set_nodelay(true)?;
    let mut keys = handshake(stream, &shared.psk, deadline)?;
    admit(shared, id)?;
    // Authenticated: wait for requests as long as the client likes; a stop
    // shuts the socket down, which ends the blocking read. Replies are
    // small; a client that stops reading them is cut after a while.
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;

    let mut inbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut outbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        inbuf.extend_from_slice(&chunk[..n]);
        let mut pos = 0;
        while let Some(d) = frame::decode(&inbuf[pos..])? {
            let f = keys.recv.open(&d)?;
            pos += d.consumed;
            let Message::Request(req) = f.msg else {
                return Err(ConnError::UnexpectedReply);
            };
            let reply = execute(&shared.mem, req);
            shared.served.fetch_add(1, Ordering::Relaxed);
            keys.send.seal(
                &Frame {
                    id: f.id,
                    msg: Message::Reply(reply),
                },
                &mut outbuf,
            );
        }
        inbuf.drain(..pos);
        if !outbuf.is_empty() {
            stream.write_all(&outbuf)?;
            outbuf.clear();
        }
    }
}

fn handshake(
    stream: &mut TcpStream,
    psk: &Psk,
    deadline: Instant,
) -> Result<SessionKeys, ConnError> {
    let mut hello = [0u8; CLIENT_HELLO_LEN];
    read_exact_by(stream, &mut hello, deadline)?;
    let (pending, challenge) = ServerHandshake::respond(psk, &hello)?;
    stream.set_write_timeout(Some(time_left(deadline)?))?;
    stream
        .write_all(&challenge)
        .map_err(|e| past_deadline(e, deadline))?;
    let mut fin = [0u8; CLIENT_FINISH_LEN];
    read_exact_by(stream, &mut fin, deadline)?;
    let (proxy_id, keys) = pending.finish(&fin)?;
    tracing::debug!(proxy_id, "window tcp client authenticated");
    Ok(keys)
}

/// Time until `deadline`, or the deadline refusal when it has passed.
fn time_left(deadline: Instant) -> Result<Duration, ConnError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ConnError::Refused(Refusal::HandshakeDeadline));
    }
    Ok(left)
}

/// A socket timeout during the handshake is the deadline passing.
fn past_deadline(e: io::Error, deadline: Instant) -> ConnError {
    let timeout = matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    );
    if timeout || Instant::now() >= deadline {
        ConnError::Refused(Refusal::HandshakeDeadline)
    } else {
        e.into()
    }
}

/// `read_exact` where the whole read, not each `read`, must finish by
/// `deadline`.
fn read_exact_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<(), ConnError> {
    let mut filled = 0;
    while filled < buf.len() {
        stream.set_read_timeout(Some(time_left(deadline)?))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(past_deadline(e, deadline)),
        }
    }
    Ok(())
}

/// Serve one request against the window. Atomics and word reads are
/// confined to the remote-atomic area whatever the client claims.
pub fn execute(mem: &WindowMemory, req: Request) -> Reply {
    let refused = |word: u32| Reply::Error {
        code: ErrorCode::Refused,
        word,
    };
    let atomic_word = |word: u32| {
        usize::try_from(word)
            .ok()
            .filter(|&w| layout::is_remote_atomic(w))
    };
    match req {
        Request::Read => Reply::Block(seqlock::snapshot(mem)),
        Request::ReadWord { word } => match atomic_word(word).and_then(|w| mem.load(w)) {
            Some(v) => Reply::Word(v),
            None => refused(word),
        },
        Request::Cas {
            word,
            expected,
            new,
        } => match atomic_word(word).and_then(|w| mem.compare_swap(w, expected, new)) {
            Some(old) => Reply::Word(old),
            None => refused(word),
        },
        Request::Faa { word, delta } => {
            match atomic_word(word).and_then(|w| mem.fetch_add(w, delta)) {
                Some(old) => Reply::Word(old),
                None => refused(word),
            }
        }
    }
}

#[cfg(test)]
mod tests;
