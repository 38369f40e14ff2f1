//! HTTP/1.x client connections, served by the proxy's own code on
//! `httparse` (the parser hyper uses) in one task per connection: the
//! head is waited for ([`wait`]) and parsed from the connection's read buffer ([`head`]), the
//! request runs through the phases of [`forward::handle`] polled by this
//! task, which also reads the request body for it when it asks ([`recv`])
//! and writes the response with gathered writes ([`send`]).
//!
//! Between requests a connection holds no buffer: it waits for its
//! socket to become readable and takes a buffer then, so an idle
//! keep-alive connection costs its socket, its TLS session and this
//! task's small state (HAProxy holds none either).
//!
//! Timeouts, as HAProxy's: the request head must arrive within
//! `timeouts.http_request` of its first byte (of the connection's start
//! for the first request), else `408`; an idle keep-alive connection
//! closes quietly after `timeouts.keep_alive`; a client that stops
//! reading its response for `timeouts.client` is cut. A head that does
//! not parse is answered `400` (`431` over the limits, `414` for a
//! target over 64 KiB) and the connection closes.
//!
//! One timer serves the connection's life: the head and idle deadlines
//! between requests, the node's response deadline while a request is out
//! ([`forward::handle`]). It is re-armed, not re-created, and only moved
//! to fire earlier ([`arm`]): a keep-alive request costs no timer-wheel
//! operation of its own.

mod head;
mod pool;
mod recv;
mod send;
mod upgrade;
mod wait;

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use http::{Request, Response, StatusCode, Version};
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Sleep;

use super::io::IoTimeouts;
use super::response::ResponseBody;
use super::state::ConnCtx;
use head::{Framing, Parsed};
use recv::{Decoder, Pipe, Step};
pub use recv::{RecvBody, RecvError};
use send::{Asked, BodyLen, Encoding};
pub use upgrade::{on_upgrade, OnUpgrade, Upgraded};
pub use wait::{arm, due};
use wait::{within, Next};

/// A client stream: plain TCP or TLS over it.
pub trait Socket: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The TCP socket, waited on while the connection is idle.
    fn tcp(&self) -> &TcpStream;
    /// Whether bytes already read from the socket wait inside the stream
    /// (TLS plaintext decrypted but not read yet).
    fn buffered(&self) -> bool;
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
    fn buffered(&self) -> bool {
        false
    }
}

impl Socket for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
    fn buffered(&self) -> bool {
        !self.get_ref().1.wants_read()
    }
}

/// The first read of a head, and each read after it.
const HEAD_READ: usize = 8 * 1024;
/// A request body is read in pieces of at most this.
const BODY_READ: usize = 64 * 1024;
/// Most response bytes queued before the body is polled again.
const QUEUE_MAX: usize = 64 * 1024;
/// Most bytes of a request body the proxy reads and discards after the
/// response (the node did not want them) to keep the connection open.
const DRAIN_MAX: u64 = 256 * 1024;

/// Written when a request head does not arrive in time.
const REQUEST_TIMEOUT_REPLY: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 16\r\nconnection: close\r\n\r\nrequest timeout\n";
/// Written to the HTTP/2 preface on an HTTP/1.x-only connection.
const H2_ON_HTTP1_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 65\r\nconnection: close\r\n\r\nbad request: HTTP/2 was not negotiated (ALPN) on this connection\n";
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What a connection needs of its listener.
#[derive(Clone)]
pub struct Limits {
    pub max_headers: usize,
    pub max_header_bytes: usize,
    pub timeouts: IoTimeouts,
    /// `rdmalb_connections_parked_total`: idle waits that released the
    /// connection's read buffer.
    pub parked: metrics::Counter,
}

/// One client connection.
struct Conn<S> {
    io: S,
    buf: BytesMut,
    ctx: Arc<ConnCtx>,
    limits: Arc<Limits>,
    /// The client's end of the stream was seen.
    eof: bool,
    /// Shutdown was seen (the connection's watch resolved).
    stop_seen: bool,
    /// Requests served.
    served: u64,
    // The current request's body, while it is read (boxed: most requests
    // have none, and an idle connection's task carries no room for one).
    body: Option<Box<Inbound>>,
    // Response bytes to write (`queued` of them), and the write timer.
    queue: std::collections::VecDeque<Bytes>,
    queued: usize,
    write_timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Writes `100 Continue` from byte `at` on, and flushes it.
fn poll_continue<S: Socket>(
    io: &mut S,
    at: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<Result<(), ()>> {
    while *at < CONTINUE.len() {
        match Pin::new(&mut *io).poll_write(cx, &CONTINUE[*at..]) {
            Poll::Ready(Ok(n)) if n > 0 => *at += n,
            Poll::Ready(_) => return Poll::Ready(Err(())),
            Poll::Pending => return Poll::Pending,
        }
    }
    match Pin::new(io).poll_flush(cx) {
        Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
        Poll::Ready(Err(_)) => Poll::Ready(Err(())),
        Poll::Pending => Poll::Pending,
    }
}

/// The body of the request being served.
struct Inbound {
    pipe: Pipe,
    decoder: Decoder,
    /// `100 Continue` still owed, and how much of it is written.
    expect: Option<usize>,
    /// Decoding failed or the client left: the connection cannot go on.
    broken: bool,
}

/// Serves an HTTP/1 client connection until it ends. The connection's
/// state is moved into the returned future once, not copied into an
/// `async fn`'s arguments and again into its locals (an idle connection's
/// task is this future).
pub fn serve<S: Socket>(
    io: S,
    ctx: Arc<ConnCtx>,
    limits: Arc<Limits>,
    mut shutdown: watch::Receiver<bool>,
) -> impl Future<Output = ()> {
    let mut conn = Conn {
        io,
        buf: BytesMut::new(),
        ctx,
        limits,
        eof: false,
        stop_seen: false,
        served: 0,
        body: None,
        queue: Default::default(),
        queued: 0,
        write_timer: None,
    };
    async move {
        // Polled in place across requests: its waiter stays registered
        // with the watch instead of being added and removed per request.
        let stop = rdmalb_base::shutdown::requested(&mut shutdown);
        tokio::pin!(stop);
        let deadline = conn.ctx.conn.accepted + conn.limits.timeouts.http_request;
        let timer = tokio::time::sleep_until(deadline.into());
        tokio::pin!(timer);
        loop {
            let parsed = match conn.next_head(stop.as_mut(), timer.as_mut()).await {
                Next::Head(p) => p,
                Next::Closed => return,
                Next::TimedOut => {
                    conn.ctx.conn.timed_out.store(true, Ordering::Relaxed);
                    // Boxed, as the refusal below: rare, and an idle
                    // connection's future should not carry room for them.
                    Box::pin(conn.reply(REQUEST_TIMEOUT_REPLY)).await;
                    super::listener::head_failure(&conn.ctx, 408, "cR", "408");
                    return;
                }
                Next::Refused(e) => {
                    Box::pin(conn.refuse(e)).await;
                    return;
                }
            };
            match Box::pin(conn.exchange(parsed, timer.as_mut())).await {
                Served::KeepAlive => {}
                Served::Close => {
                    let deadline = Instant::now() + conn.limits.timeouts.client;
                    within(timer.as_mut(), deadline, conn.io.shutdown()).await;
                    return;
                }
                Served::Upgraded(tx) => {
                    let Conn { io, buf, .. } = conn;
                    let _ = tx.send(Upgraded {
                        io: Box::new(io),
                        early: buf.freeze(),
                    });
                    return;
                }
            }
        }
    }
}

/// What the response must know of its request.
struct Pending {
    method: http::Method,
    version: Version,
    keep_alive: bool,
    trailers: bool,
    /// The sender of an upgrade's connection, when the request asks for one.
    upgrade: Option<tokio::sync::oneshot::Sender<Upgraded>>,
}

impl Pending {
    fn asked(&self) -> Asked<'_> {
        Asked {
            method: &self.method,
            version: self.version,
            keep_alive: self.keep_alive,
            trailers: self.trailers,
        }
    }
}

/// How a request's exchange left the connection.
enum Served {
    KeepAlive,
    Close,
    /// Handed over to the tunnel waiting on this sender.
    Upgraded(tokio::sync::oneshot::Sender<Upgraded>),
}

impl<S: Socket> Conn<S> {
    /// One request: its phases, its response, what is left of its body.
    /// Each step's state lives only while the step runs (the phases'
    /// future is gone while the response is written), so this future,
    /// moved into a box per request, stays small.
    async fn exchange(&mut self, parsed: Box<Parsed>, timer: Pin<&mut Sleep>) -> Served {
        let (req, mut asked) = self.begin(parsed);
        let resp = self.phases(req, timer).await;
        // Shutting down: this response is the connection's last (after a
        // restart the handed-over rule below says so instead).
        let proxy = &self.ctx.proxy;
        if proxy.draining.load(Ordering::Relaxed) && !proxy.handed_over.load(Ordering::Relaxed) {
            asked.keep_alive = false;
        }
        let upgrade_tx = asked.upgrade.take();
        let (status, last) = match self.respond(resp, asked.asked()).await {
            Ok(x) => x,
            Err(()) => return Served::Close,
        };
        if status == StatusCode::SWITCHING_PROTOCOLS {
            return match upgrade_tx {
                Some(tx) => Served::Upgraded(tx),
                None => Served::Close,
            };
        }
        if last || !self.finish_body().await {
            return Served::Close;
        }
        Served::KeepAlive
    }

    /// The request the phases get, its body's reader set up, and what the
    /// response must know of the request.
    fn begin(&mut self, parsed: Box<Parsed>) -> (Request<super::body::ClientBody>, Pending) {
        let Parsed {
            parts,
            framing,
            keep_alive,
            expect_continue,
            trailers,
        } = *parsed;
        self.served += 1;
        let wants_upgrade = parts.version == Version::HTTP_11
            && (parts.headers.contains_key(http::header::UPGRADE)
                || parts.method == http::Method::CONNECT);
        let mut pending = Pending {
            method: parts.method.clone(),
            version: parts.version,
            keep_alive,
            trailers,
            upgrade: None,
        };
        let decoder = framing.decoder();
        let body = if decoder.is_done() {
            self.body = None;
            super::body::ClientBody::Empty
        } else {
            let (pipe, body) = Pipe::new(decoder.remaining());
            self.body = Some(Box::new(Inbound {
                pipe,
                decoder,
                expect: (expect_continue && framing != Framing::Length(0)).then_some(0),
                broken: false,
            }));
            super::body::ClientBody::H1(body)
        };
        let mut req = Request::from_parts(parts, body);
        if wants_upgrade {
            let (tx, rx) = tokio::sync::oneshot::channel();
            req.extensions_mut()
                .insert(OnUpgrade(Arc::new(Mutex::new(Some(rx)))));
            pending.upgrade = Some(tx);
        }
        (req, pending)
    }

    /// The request's phases ([`forward::handle`]), polled by this task,
    /// which reads the request body for them when they ask.
    async fn phases(
        &mut self,
        req: Request<super::body::ClientBody>,
        timer: Pin<&mut Sleep>,
    ) -> Response<ResponseBody> {
        let handled = super::forward::handle(Arc::clone(&self.ctx), req, Some(timer));
        let mut handled = std::pin::pin!(handled);
        let resp = std::future::poll_fn(|cx| loop {
            if let Poll::Ready(r) = handled.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            // A frame handed to the body wakes the phases: poll them again.
            if !self.poll_inbound(cx) {
                return Poll::Pending;
            }
        });
        let Ok(resp) = resp.await;
        resp
    }

    /// Reads the request body for the phases when they ask for it, and
    /// owes the client its `100 Continue` before the first read. True
    /// when it handed the body a frame (or its end) and the phases should
    /// be polled again. A body that fails is told so, and the connection
    /// closes after the response.
    fn poll_inbound(&mut self, cx: &mut Context<'_>) -> bool {
        let mut handed = false;
        loop {
            let Some(inb) = self.body.as_mut() else {
                return handed;
            };
            if inb.broken || inb.decoder.is_done() {
                return handed;
            }
            match inb.pipe.wanted(cx) {
                // Dropped: the rest is drained after the response.
                None => return handed,
                Some(false) => return handed,
                Some(true) => {}
            }
            if let Some(mut at) = inb.expect {
                if !self.buf.is_empty() {
                    inb.expect = None;
                } else {
                    match poll_continue(&mut self.io, &mut at, cx) {
                        Poll::Ready(Ok(())) => inb.expect = None,
                        Poll::Ready(Err(())) => {
                            inb.pipe.end(Err(RecvError::Io));
                            inb.broken = true;
                            return true;
                        }
                        Poll::Pending => {
                            // Written up to `at`: the rest goes first.
                            inb.expect = Some(at);
                            return handed;
                        }
                    }
                }
            }
            match inb.decoder.step(&mut self.buf) {
                Ok(Step::Frame(f)) => {
                    let left = inb.decoder.remaining();
                    inb.pipe.send(f, left);
                    if inb.decoder.is_done() {
                        inb.pipe.end(Ok(()));
                    }
                    return true;
                }
                Ok(Step::End) => {
                    inb.pipe.end(Ok(()));
                    return true;
                }
                Ok(Step::Read) => {}
                Err(e) => {
                    tracing::debug!(client = %self.ctx.client, error = e, "malformed request body");
                    inb.pipe.end(Err(RecvError::Malformed(e)));
                    inb.broken = true;
                    return true;
                }
            }
            let failed = if self.eof {
                Some(RecvError::Closed)
            } else {
                match self.poll_fill(cx, BODY_READ) {
                    Poll::Ready(Ok(_)) => None,
                    Poll::Ready(Err(_)) => Some(RecvError::Io),
                    Poll::Pending => return handed,
                }
            };
            if let Some(e) = failed {
                if let Some(inb) = self.body.as_mut() {
                    inb.pipe.end(Err(e));
                    inb.broken = true;
                }
                return true;
            }
            handed = false;
        }
    }

    /// After the response: the rest of a request body the node did not
    /// read is read and discarded (up to [`DRAIN_MAX`], within
    /// `timeouts.http_request`). False: the connection closes.
    async fn finish_body(&mut self) -> bool {
        let Some(mut inb) = self.body.take() else {
            return true;
        };
        if inb.broken {
            return false;
        }
        if inb.decoder.is_done() {
            return true;
        }
        if inb.decoder.remaining().is_some_and(|n| n > DRAIN_MAX) {
            return false;
        }
        let deadline = Instant::now() + self.limits.timeouts.http_request;
        let mut drained = 0u64;
        loop {
            match inb.decoder.step(&mut self.buf) {
                Ok(Step::Frame(f)) => {
                    drained += f.data_ref().map_or(0, |d| d.len() as u64);
                    if drained > DRAIN_MAX {
                        return false;
                    }
                    continue;
                }
                Ok(Step::End) => return true,
                Ok(Step::Read) => {}
                Err(_) => return false,
            }
            if self.eof {
                return false;
            }
            let read = std::future::poll_fn(|cx| self.poll_fill(cx, BODY_READ));
            match tokio::time::timeout_at(deadline.into(), read).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return false,
            }
        }
    }

    /// Writes the response: its head, then its body as its framing says,
    /// reading the request body meanwhile for a node that still takes it.
    /// Returns the status and whether the connection ends after it.
    async fn respond(
        &mut self,
        resp: Response<ResponseBody>,
        asked: Asked<'_>,
    ) -> Result<(StatusCode, bool), ()> {
        let (mut parts, body) = resp.into_parts();
        if self.ctx.proxy.handed_over.load(Ordering::Relaxed)
            && parts.status != StatusCode::SWITCHING_PROTOCOLS
        {
            // Handed over to a new process: the client learns from this
            // response that the connection ends after it.
            parts.headers.insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        let len = if body.is_end_stream() {
            BodyLen::Empty
        } else {
            match body.size_hint().exact() {
                Some(n) => BodyLen::Known(n),
                None => BodyLen::Unknown,
            }
        };
        let mut head = Vec::with_capacity(256 + parts.headers.len() * 48);
        let enc = send::encode(
            parts.status,
            parts.version,
            &mut parts.headers,
            len,
            asked,
            &mut head,
        );
        self.push(Bytes::from(head));
        let mut writer = Writer {
            body,
            encoding: enc.encoding,
            trailers: enc.trailers,
            left: match enc.encoding {
                Encoding::Length(n) => n,
                _ => 0,
            },
            ended: false,
            closed: false,
        };
        let ok = std::future::poll_fn(|cx| self.poll_respond(&mut writer, cx)).await;
        // The response body is settled (complete or aborted) when dropped.
        drop(writer);
        if !ok {
            return Err(());
        }
        Ok((parts.status, enc.last))
    }

    fn poll_respond(&mut self, w: &mut Writer, cx: &mut Context<'_>) -> Poll<bool> {
        loop {
            // The node may still be taking the request body.
            self.poll_inbound(cx);
            // Whether the body said Pending this round (its waker is set).
            let mut waiting = false;
            while !w.ended && self.queued < QUEUE_MAX {
                match Pin::new(&mut w.body).poll_frame(cx) {
                    Poll::Pending => {
                        waiting = true;
                        break;
                    }
                    Poll::Ready(None) => {
                        if !self.end_body(w) {
                            return Poll::Ready(false);
                        }
                    }
                    Poll::Ready(Some(Err(_))) => return Poll::Ready(false),
                    Poll::Ready(Some(Ok(frame))) => self.take_frame(w, frame),
                }
            }
            // Everything queued is out: the end, or the body's turn (and
            // when it waits, so does this). A write that waits wakes this
            // task; so does the body if it was left waiting too.
            match self.poll_queue(cx) {
                Poll::Ready(Ok(())) if w.ended => return Poll::Ready(true),
                Poll::Ready(Ok(())) if waiting => return Poll::Pending,
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(false),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Queues a frame of the response body as its encoding writes it.
    fn take_frame(&mut self, w: &mut Writer, frame: hyper::body::Frame<Bytes>) {
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                // Trailer fields end a chunked body (sent when the client
                // said `TE: trailers`, as declared by `Trailer`).
                if let (Ok(t), Encoding::Chunked) = (frame.into_trailers(), w.encoding) {
                    let mut end = Vec::new();
                    send::encode_trailers(&t, w.trailers.as_deref().unwrap_or(&[]), &mut end);
                    w.closed = true;
                    self.push(Bytes::from(end));
                }
                return;
            }
        };
        if data.is_empty() {
            return;
        }
        match w.encoding {
            Encoding::Length(_) => {
                let n = (data.len() as u64).min(w.left) as usize;
                if n > 0 {
                    w.left -= n as u64;
                    self.push(data.slice(..n));
                }
            }
            Encoding::Chunked if !w.closed => {
                let mut line = Vec::with_capacity(10);
                send::chunk_line(data.len(), &mut line);
                self.push(Bytes::from(line));
                self.push(data);
                self.push(Bytes::from_static(b"\r\n"));
            }
            Encoding::Chunked => {}
            Encoding::Close => self.push(data),
        }
    }

    /// The response body ended: the chunked end is queued. False: it
    /// ended short of its length, and the client must see it cut.
    fn end_body(&mut self, w: &mut Writer) -> bool {
        w.ended = true;
        match w.encoding {
            Encoding::Chunked if !w.closed => {
                self.push(Bytes::from_static(b"0\r\n\r\n"));
                true
            }
            Encoding::Length(n) => w.left == 0 || n == 0,
            _ => true,
        }
    }

    /// Queues `b` for writing.
    fn push(&mut self, b: Bytes) {
        self.queued += b.len();
        self.queue.push_back(b);
    }

    /// Writes the queued bytes, gathered; `Ready` once all are written
    /// and flushed. A client that reads nothing for `timeouts.client`
    /// fails the write.
    fn poll_queue(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.queue.is_empty() {
            let mut slices = [IoSlice::new(&[]); 16];
            let mut n = 0;
            for b in self.queue.iter().take(slices.len()) {
                slices[n] = IoSlice::new(b);
                n += 1;
            }
            let res = if self.io.is_write_vectored() {
                Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..n])
            } else {
                let first = self.queue.front().map_or(&[][..], |b| &b[..]);
                Pin::new(&mut self.io).poll_write(cx, first)
            };
            match res {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(mut n)) => {
                    self.write_timer = None;
                    self.queued -= n;
                    while n > 0 {
                        let Some(front) = self.queue.front_mut() else {
                            break;
                        };
                        if n >= front.len() {
                            n -= front.len();
                            self.queue.pop_front();
                        } else {
                            front.advance(n);
                            n = 0;
                        }
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return self.write_blocked(cx),
            }
        }
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => self.write_blocked(cx),
        }
    }

    /// A write that waits: fails once the client read nothing for
    /// `timeouts.client`.
    fn write_blocked(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let limit = self.limits.timeouts.client;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client stopped reading (timeouts.client)",
            )));
        }
        Poll::Pending
    }
}

/// The response being written.
struct Writer {
    body: ResponseBody,
    encoding: Encoding,
    trailers: Option<Vec<http::HeaderName>>,
    /// Body bytes the length still allows.
    left: u64,
    /// The body ended.
    ended: bool,
    /// The chunked end (with trailers) is written already.
    closed: bool,
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
