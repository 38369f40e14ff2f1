//! The tcp client: [`TcpWindow`], an async [`RemoteWindow`] over one
//! authenticated connection with many requests in flight.
//!
//! A writer task batches queued requests into one socket write; a reader task
//! matches replies to waiting callers by request id. When either side of the
//! connection fails, every waiting and later call gets
//! [`WindowError::Closed`]; the owner of the `TcpWindow` reconnects.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::auth::{ClientHandshake, FrameKey, Psk, SERVER_CHALLENGE_LEN};
use super::frame::{self, ErrorCode, Frame, Message, Reply, Request};
use super::HANDSHAKE_TIMEOUT;
use crate::transport::{check_atomic_word, Expect, RemoteWindow, WindowFuture};
use crate::{TransportKind, WindowError};

type Waiter = oneshot::Sender<Reply>;

struct Shared {
    peer: String,
    pending: Mutex<HashMap<u32, Waiter>>,
    closed: AtomicBool,
    next_id: AtomicU32,
}

impl Shared {
    fn close(&self, why: &str) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            tracing::debug!(peer = %self.peer, why, "window tcp connection closed");
        }
        // Dropping the senders wakes every waiter with an error.
        if let Ok(mut p) = self.pending.lock() {
            p.clear();
        }
    }
}

/// A peer's window reached over the tcp transport.
pub struct TcpWindow {
    shared: Arc<Shared>,
    requests: mpsc::UnboundedSender<(u32, Request)>,
    tasks: [AbortHandle; 2],
    proxy_id: u16,
}

impl std::fmt::Debug for TcpWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpWindow")
            .field("peer", &self.shared.peer)
            .field("proxy_id", &self.proxy_id)
            .finish()
    }
}

impl Drop for TcpWindow {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.close("dropped");
    }
}

impl TcpWindow {
    /// Connect to a responder, authenticate with `psk` as `proxy_id`, and
    /// check the window header against `expect`. Connecting and the
    /// handshake are bounded by [`HANDSHAKE_TIMEOUT`]. Must run inside a
    /// Tokio runtime.
    pub async fn connect(
        addr: SocketAddr,
        psk: &Psk,
        proxy_id: u16,
        expect: &Expect,
    ) -> Result<TcpWindow, WindowError> {
        let peer = addr.to_string();
        let (stream, keys) =
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, establish(addr, &peer, psk, proxy_id))
                .await
            {
                Ok(r) => r?,
                Err(_) => {
                    return Err(WindowError::Timeout {
                        peer,
                        after: HANDSHAKE_TIMEOUT,
                    })
                }
            };
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared {
            peer: peer.clone(),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            next_id: AtomicU32::new(1),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_loop(wr, rx, keys.send, shared.clone()));
        let reader = tokio::spawn(read_loop(rd, keys.recv, shared.clone()));
        let w = TcpWindow {
            shared,
            requests: tx,
            tasks: [writer.abort_handle(), reader.abort_handle()],
            proxy_id,
        };
        // The first READ doubles as proof that the responder accepted our
        // handshake and checks that we read the window we expect.
        let raw = match tokio::time::timeout(HANDSHAKE_TIMEOUT, w.read_raw()).await {
            Ok(Ok(raw)) => raw,
            Ok(Err(WindowError::Closed { .. })) => {
                return Err(WindowError::Auth {
                    peer,
                    reason: "the responder closed the connection after the handshake (it rejected our proof)".into(),
                })
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(WindowError::Timeout {
                    peer,
                    after: HANDSHAKE_TIMEOUT,
                })
            }
        };
        expect.check(&peer, &raw)?;
        tracing::debug!(%peer, proxy_id, "connected tcp window");
        Ok(w)
    }

    /// Whether the connection has failed; calls on a closed window return
    /// [`WindowError::Closed`] at once.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    async fn call(&self, req: Request) -> Result<Reply, WindowError> {
        let closed = || WindowError::Closed {
            peer: self.shared.peer.clone(),
        };
        if self.is_closed() {
            return Err(closed());
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.shared
            .pending
            .lock()
            .map_err(|_| closed())?
            .insert(id, tx);
        // Removes our entry if this future is dropped (a caller's timeout).
        let _guard = PendingGuard {
            shared: &self.shared,
            id,
        };
        // `close` sets the flag before clearing the map, so either our entry
        // was cleared (rx fails) or we see the flag here.
        if self.is_closed() {
            return Err(closed());
        }
        self.requests.send((id, req)).map_err(|_| closed())?;
        rx.await.map_err(|_| closed())
    }

    fn reply_to_word(&self, word: usize, reply: Reply) -> Result<u64, WindowError> {
        match reply {
            Reply::Word(v) => Ok(v),
            Reply::Error {
                code: ErrorCode::Refused,
                ..
            } => Err(WindowError::Refused {
                peer: self.shared.peer.clone(),
                word,
                reason: "the responder refused it (outside the remote-atomic area)".into(),
            }),
            other => Err(WindowError::Protocol {
                peer: self.shared.peer.clone(),
                detail: format!("unexpected reply {other:?} to a word operation"),
            }),
        }
    }
}

struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u32,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.shared.pending.lock() {
            p.remove(&self.id);
        }
    }
}

async fn establish(
    addr: SocketAddr,
    peer: &str,
    psk: &Psk,
    proxy_id: u16,
) -> Result<(TcpStream, super::auth::SessionKeys), WindowError> {
    let io = |what: &str, e: std::io::Error| WindowError::io(format!("{what} {peer}"), e);
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| io("connecting to window responder", e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| io("configuring connection to", e))?;
    let (hs, hello) = ClientHandshake::start(psk, u64::from(proxy_id));
    stream
        .write_all(&hello)
        .await
        .map_err(|e| io("sending handshake to", e))?;
    let mut challenge = [0u8; SERVER_CHALLENGE_LEN];
    stream
        .read_exact(&mut challenge)
        .await
        .map_err(|e| io("reading handshake from", e))?;
    let (fin, keys) = hs.finish(&challenge).map_err(|e| WindowError::Auth {
        peer: peer.to_string(),
        reason: e.to_string(),
    })?;
    stream
        .write_all(&fin)
        .await
        .map_err(|e| io("sending handshake to", e))?;
    Ok((stream, keys))
}

async fn write_loop(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<(u32, Request)>,
    mut key: FrameKey,
    shared: Arc<Shared>,
) {
    let mut buf = Vec::with_capacity(4096);
    while let Some((id, req)) = rx.recv().await {
        let seal = |key: &mut FrameKey, buf: &mut Vec<u8>, id, req| {
            key.seal(
                &Frame {
                    id,
                    msg: Message::Request(req),
                },
                buf,
            )
        };
        seal(&mut key, &mut buf, id, req);
        // Everything queued meanwhile goes out in the same write.
        while buf.len() < 64 * 1024 {
            match rx.try_recv() {
                Ok((id, req)) => seal(&mut key, &mut buf, id, req),
                Err(_) => break,
            }
        }
        if let Err(e) = wr.write_all(&buf).await {
            shared.close(&format!("write failed: {e}"));
            return;
        }
        buf.clear();
    }
}

async fn read_loop(mut rd: tokio::net::tcp::OwnedReadHalf, mut key: FrameKey, shared: Arc<Shared>) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match rd.read(&mut chunk).await {
            Ok(0) => {
                shared.close("responder closed the connection");
                return;
            }
            Ok(n) => n,
            Err(e) => {
                shared.close(&format!("read failed: {e}"));
                return;
            }
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut pos = 0;
        loop {
            let d = match frame::decode(&buf[pos..]) {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(peer = %shared.peer, error = %e, "bad frame from window responder");
                    shared.close("protocol error");
                    return;
                }
            };
            let f = match key.open(&d) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(peer = %shared.peer, error = %e, "window responder frame failed authentication");
                    shared.close("bad frame tag");
                    return;
                }
            };
            pos += d.consumed;
            let Message::Reply(reply) = f.msg else {
                tracing::warn!(peer = %shared.peer, "window responder sent a request frame");
                shared.close("protocol error");
                return;
            };
            let waiter = shared.pending.lock().ok().and_then(|mut p| p.remove(&f.id));
            if let Some(w) = waiter {
                // The caller may have given up meanwhile; that is fine.
                let _ = w.send(reply);
            }
        }
        buf.drain(..pos);
    }
}

impl RemoteWindow for TcpWindow {
    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn is_alive(&self) -> bool {
        !self.is_closed()
    }

    fn peer(&self) -> &str {
        &self.shared.peer
    }

    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]> {
        Box::pin(async move {
            match self.call(Request::Read).await? {
                Reply::Block(words) => Ok(words),
                other => Err(WindowError::Protocol {
                    peer: self.shared.peer.clone(),
                    detail: format!("unexpected reply {other:?} to READ"),
                }),
            }
        })
    }

    fn read_word(&self, word: usize) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            check_atomic_word(&self.shared.peer, word)?;
            let reply = self.call(Request::ReadWord { word: word as u32 }).await?;
            self.reply_to_word(word, reply)
        })
    }

    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            check_atomic_word(&self.shared.peer, word)?;
            let reply = self
                .call(Request::Cas {
                    word: word as u32,
                    expected,
                    new,
                })
                .await?;
            self.reply_to_word(word, reply)
        })
    }

    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64> {
        Box::pin(async move {
            check_atomic_word(&self.shared.peer, word)?;
            let reply = self
                .call(Request::Faa {
                    word: word as u32,
                    delta,
                })
                .await?;
            self.reply_to_word(word, reply)
        })
    }
}
