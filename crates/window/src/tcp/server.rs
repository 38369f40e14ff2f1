//! The tcp responder: an acceptor thread and one OS thread per connection,
//! outside any async runtime, so serving a read costs the node CPU time and
//! scheduling delay just like the seeds' two-sided monitor.
//!
//! Per connection: handshake under [`HANDSHAKE_TIMEOUT`], then a loop that
//! reads whatever bytes arrived, answers every complete frame in them and
//! writes all replies with one `write` (pipelining: a client may have many
//! requests outstanding). A bad tag or an undecodable frame closes the
//! connection; a READ_WORD / CAS / FAA outside words 32..192 gets an ERROR
//! reply and touches nothing.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{oneshot, watch};

use super::auth::{
    AuthError, Psk, ServerHandshake, SessionKeys, CLIENT_FINISH_LEN, CLIENT_HELLO_LEN,
};
use super::frame::{self, ErrorCode, Frame, Message, Reply, Request};
use super::{HANDSHAKE_TIMEOUT, MAX_CONNECTIONS};
use crate::layout;
use crate::memory::WindowMemory;
use crate::seqlock;
use crate::WindowError;

struct Conn {
    stream: TcpStream,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    mem: Arc<WindowMemory>,
    psk: Psk,
    stop: AtomicBool,
    conns: Mutex<HashMap<u64, Conn>>,
    next_conn: AtomicU64,
    served: AtomicU64,
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
    let listener = TcpListener::bind(listen)
        .map_err(|e| WindowError::io(format!("binding window tcp responder on {listen}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| WindowError::io("reading the responder's bound address", e))?;
    let listener = Arc::new(listener);
    let shared = Arc::new(Shared {
        mem,
        psk,
        stop: AtomicBool::new(false),
        conns: Mutex::new(HashMap::new()),
        next_conn: AtomicU64::new(1),
        served: AtomicU64::new(0),
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
                        _ = shutdown.wait_for(|stop| *stop) => true,
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
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!(%peer, limit = MAX_CONNECTIONS, "window tcp connection refused: too many connections");
            continue;
        }
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("window-tcp-{id}"))
                .spawn(move || {
                    match serve_connection(stream, &shared) {
                        Ok(()) => tracing::debug!(%peer, "window tcp connection closed"),
                        Err(e) => {
                            tracing::warn!(%peer, error = %e, "window tcp connection dropped")
                        }
                    }
                    if let Ok(mut c) = shared.conns.lock() {
                        c.remove(&id);
                    }
                })
        };
        match worker {
            Ok(t) => {
                conns.insert(
                    id,
                    Conn {
                        stream: registered,
                        thread: Some(t),
                    },
                );
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot spawn window tcp connection thread")
            }
        }
    }
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("handshake: {0}")]
    Auth(#[from] AuthError),
    #[error("protocol: {0}")]
    Frame(#[from] frame::FrameError),
    #[error("client sent a reply frame")]
    UnexpectedReply,
    #[error("{0}")]
    Io(#[from] io::Error),
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) -> Result<(), ConnError> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut keys = handshake(&mut stream, &shared.psk)?;
    // Authenticated: wait for requests as long as the client likes; a stop
    // shuts the socket down, which ends the blocking read.
    stream.set_read_timeout(None)?;

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

fn handshake(stream: &mut TcpStream, psk: &Psk) -> Result<SessionKeys, ConnError> {
    let mut hello = [0u8; CLIENT_HELLO_LEN];
    stream.read_exact(&mut hello)?;
    let (pending, challenge) = ServerHandshake::respond(psk, &hello)?;
    stream.write_all(&challenge)?;
    let mut fin = [0u8; CLIENT_FINISH_LEN];
    stream.read_exact(&mut fin)?;
    let (proxy_id, keys) = pending.finish(&fin)?;
    tracing::debug!(proxy_id, "window tcp client authenticated");
    Ok(keys)
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
