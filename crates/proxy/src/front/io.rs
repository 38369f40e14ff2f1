//! The client connection's byte stream, wrapped to enforce the timeouts
//! hyper does not express the way a load balancer needs them:
//!
//! - **request head** (`timeouts.http_request`, slowloris guard): from the
//!   first byte of a request head until hyper hands the parsed head to the
//!   service. When it expires this wrapper writes `408 Request Timeout`
//!   itself and then reports end-of-stream, so the client gets a status
//!   rather than a silent close (hyper's own header timeout only closes);
//! - **keep-alive idle** (`timeouts.keep_alive`): no byte of a next request
//!   arrives; closed silently, like HAProxy;
//! - **client write** (`timeouts.client`): the client stops reading a
//!   response.
//!
//! The wrapper learns where a request starts and ends from [`ConnShared`],
//! which the request service updates (a request is active from the service
//! call until its response body ended or was dropped). HTTP/2 connections
//! (ALPN or the prior-knowledge preface) and upgraded connections skip the
//! head and idle timers: HTTP/2 multiplexes and has its own flow control.
//!
//! It also holds a connection to the protocol its listener allows
//! ([`Protocol`]), looking only at the first bytes, before hyper (whose
//! automatic builder would pick HTTP/2 or HTTP/1.1 by those bytes alone)
//! sees them: on TLS, ALPN decides (RFC 9113 section 3.2), so where it
//! chose `h2` a connection that does not start with the HTTP/2 preface is
//! closed (an invalid preface is a connection error, and GOAWAY may be
//! omitted: section 3.4), and where it chose `http/1.1` or nothing the
//! preface is an HTTP/1.1 request with a version this connection does not
//! speak, answered 400. Cleartext listeners keep prior-knowledge HTTP/2.
//!
//! On HTTP/2 connections it also coalesces writes: the frames of responses
//! that become ready while the worker has work to do leave in one write
//! when it runs out of work (few TLS records, one system call) instead of
//! one each (see [`hold`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use hold::{expire_held, flush_now};
pub use hold::{flush_held, hold_writes_until_park};

/// Written when a request head does not arrive in time.
const REQUEST_TIMEOUT_REPLY: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 16\r\nconnection: close\r\n\r\nrequest timeout\n";

/// Written when an HTTP/1.1-only connection starts with the HTTP/2 preface.
const H2_ON_HTTP1_REPLY: &[u8] = b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 65\r\nconnection: close\r\n\r\nbad request: HTTP/2 was not negotiated (ALPN) on this connection\n";

/// The HTTP/2 client connection preface (RFC 9113 section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocols a client connection may speak, as its listener decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A cleartext listener: HTTP/2 with prior knowledge (the connection
    /// starts with the preface), else HTTP/1.x.
    Detect,
    /// ALPN chose `h2`: HTTP/2 only.
    Http2,
    /// ALPN chose `http/1.1`, or nothing: HTTP/1.x only.
    Http1,
}

/// State of one client connection shared between its byte stream and the
/// request service.
#[derive(Debug)]
pub struct ConnShared {
    /// When the connection was accepted.
    pub accepted: Instant,
    /// Requests whose response has not finished yet.
    pub active: AtomicUsize,
    /// Requests started on this connection (also a generation number).
    pub started: AtomicU64,
    /// The connection was upgraded (WebSocket...): it is a tunnel now.
    pub upgraded: AtomicBool,
    /// When the first byte of the current request head arrived, in
    /// nanoseconds since `accepted` (for the `Tq` timer).
    pub head_at: AtomicU64,
    /// This wrapper answered 408 and closed.
    pub timed_out: AtomicBool,
    /// This wrapper refused the connection's first bytes as not the
    /// protocol ALPN chose (answered 400 on HTTP/1.1, closed on HTTP/2).
    pub bad_preface: AtomicBool,
    /// The client speaks HTTP/2 (ALPN or prior knowledge).
    pub h2: AtomicBool,
    /// The wrapper parked the connection (see [`ConnIo::parking`]); its
    /// owner clears it when it serves the connection again.
    pub parked: AtomicBool,
    /// hyper closes the connection after the current response (set by the
    /// request service, see `headers::closes_after`): the flush that ends
    /// it arms no idle timer. That timer (the 250 ms parking delay, the
    /// earliest of the worker's timers) made tokio's timer driver wake its
    /// own thread through the eventfd, one `write` per such response.
    pub closing: AtomicBool,
}

impl ConnShared {
    pub fn new(accepted: Instant) -> Self {
        ConnShared {
            accepted,
            active: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            upgraded: AtomicBool::new(false),
            head_at: AtomicU64::new(0),
            timed_out: AtomicBool::new(false),
            bad_preface: AtomicBool::new(false),
            h2: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        }
    }

    /// Marks the start of a request (the service was called).
    pub fn request_started(&self) {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.active.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the end of a request (its response body ended or was dropped).
    pub fn request_finished(&self) {
        self.active.fetch_sub(1, Ordering::AcqRel);
    }

    /// Time since the current head's first byte.
    pub fn head_elapsed(&self, now: Instant) -> Duration {
        let at = Duration::from_nanos(self.head_at.load(Ordering::Relaxed));
        now.saturating_duration_since(self.accepted + at)
    }
}

/// Timeouts the wrapper enforces.
#[derive(Debug, Clone, Copy)]
pub struct IoTimeouts {
    pub http_request: Duration,
    pub keep_alive: Duration,
    pub client: Duration,
}

pin_project! {
    /// A client stream with head, idle and write timeouts.
    pub struct ConnIo<S> {
        // `None` once parked: the stream went to `park`'s slot.
        #[pin]
        inner: Option<S>,
        shared: std::sync::Arc<ConnShared>,
        timeouts: IoTimeouts,
        protocol: Protocol,
        // HTTP/2 (no head/idle timers).
        h2: bool,
        sniffed: bool,
        // Bytes of the HTTP/2 preface seen so far.
        matched: usize,
        // Generation (`shared.started`) the head state below belongs to.
        generation: u64,
        head_bytes: bool,
        read_armed: bool,
        read_timer: Option<Pin<Box<Sleep>>>,
        write_armed: bool,
        write_timer: Option<Pin<Box<Sleep>>>,
        write_blocked: bool,
        // The wrapper's own reply (408, or 400 to the HTTP/2 preface) and
        // how much of it was written.
        reply: Option<(&'static [u8], usize)>,
        // HTTP/2 only: bytes written but not yet passed on (from `out_at`),
        // and the worker's hold epoch they wait for the end of (see
        // `flush_held`).
        out: Vec<u8>,
        out_at: usize,
        held: Option<u64>,
        // HTTP/1 keep-alive parking (see `parking`).
        park: Option<(Duration, Parked<S>)>,
        // The first read's bytes beyond what its caller asked for (see
        // `READ_AHEAD`), from `ahead_at` on, served before the stream.
        ahead: Vec<u8>,
        ahead_at: usize,
        first_read: bool,
    }
}

/// How much the wrapper's first read takes from the stream when its caller
/// asks for less. The first read of a connection is hyper-util's protocol
/// detection, which asks for the 24 bytes of the HTTP/2 preface; read from
/// the socket as asked, every new connection (and every parked one coming
/// back) cost two `recvfrom` for its first request head where one does.
/// The bytes beyond the caller's are kept and given to the next reads.
const READ_AHEAD: usize = 4096;

impl<S> ConnIo<S> {
    /// Wraps `inner`, which may speak `protocol`.
    pub fn new(
        inner: S,
        shared: std::sync::Arc<ConnShared>,
        timeouts: IoTimeouts,
        protocol: Protocol,
    ) -> Self {
        let h2 = protocol == Protocol::Http2;
        shared.h2.store(h2, Ordering::Relaxed);
        ConnIo {
            inner: Some(inner),
            shared,
            timeouts,
            protocol,
            h2,
            sniffed: false,
            matched: 0,
            generation: 0,
            head_bytes: false,
            read_armed: false,
            read_timer: None,
            write_armed: false,
            write_timer: None,
            write_blocked: false,
            reply: None,
            out: Vec::new(),
            out_at: 0,
            held: None,
            park: None,
            ahead: Vec::new(),
            ahead_at: 0,
            first_read: true,
        }
    }

    /// Parks the connection after `after` without a byte of a next request
    /// (HTTP/1.x, between requests, when `after` is shorter than
    /// `timeouts.keep_alive`): the stream is put into `slot` and hyper is
    /// told the client closed, so hyper ends the connection and frees its
    /// buffers while the socket stays open. The caller waits for the
    /// client's next bytes on the stream alone and then serves it again.
    pub fn parking(mut self, after: Duration, slot: Parked<S>) -> Self {
        self.park = Some((after, slot));
        self
    }
}

/// Where a parked connection's stream waits for its owner (see
/// [`ConnIo::parking`]).
pub type Parked<S> = std::sync::Arc<std::sync::Mutex<Option<S>>>;

/// The parking delay, when a connection between requests (`between`) parks
/// before `timeouts.keep_alive` ends it.
fn park_after<S>(
    park: &Option<(Duration, Parked<S>)>,
    timeouts: &IoTimeouts,
    between: bool,
) -> Option<Duration> {
    match park {
        Some((after, _)) if between && *after < timeouts.keep_alive => Some(*after),
        _ => None,
    }
}

/// The stream, unless the connection was parked.
fn live<S>(inner: Pin<&mut Option<S>>) -> Option<Pin<&mut S>> {
    inner.as_pin_mut()
}

/// A write after parking: hyper has been told the client is gone.
fn parked() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the connection is parked")
}

fn arm(timer: &mut Option<Pin<Box<Sleep>>>, deadline: tokio::time::Instant) {
    match timer {
        Some(t) => t.as_mut().reset(deadline),
        None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
}

fn fired(timer: &mut Option<Pin<Box<Sleep>>>, cx: &mut Context<'_>) -> bool {
    timer
        .as_mut()
        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

impl<S: AsyncRead + AsyncWrite + Unpin> ConnIo<S> {
    /// Writes the wrapper's own reply, then reports end-of-stream.
    fn poll_reply(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        let Some((reply, off)) = this.reply.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while *off < reply.len() {
            let Some(inner) = live(this.inner.as_mut()) else {
                return Poll::Ready(Ok(()));
            };
            match inner.poll_write(cx, &reply[*off..]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    *off = reply.len() + 1;
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Ok(n)) => *off += n,
                Poll::Pending => return Poll::Pending,
            }
        }
        if *off == reply.len() {
            let Some(inner) = live(this.inner.as_mut()) else {
                return Poll::Ready(Ok(()));
            };
            match inner.poll_flush(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(_) => *off += 1,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for ConnIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A worker that stays busy still ends its hold epoch in time.
        expire_held();
        if self.reply.is_some() {
            return self.poll_reply(cx);
        }
        let mut this = self.as_mut().project();
        let before = buf.filled().len();
        let Some(inner) = live(this.inner.as_mut()) else {
            // Parked: hyper sees the end of the stream.
            return Poll::Ready(Ok(()));
        };
        let res = if *this.ahead_at < this.ahead.len() {
            // Bytes the first read took beyond its caller's.
            let n = buf.remaining().min(this.ahead.len() - *this.ahead_at);
            buf.put_slice(&this.ahead[*this.ahead_at..*this.ahead_at + n]);
            *this.ahead_at += n;
            if *this.ahead_at == this.ahead.len() {
                *this.ahead = Vec::new();
                *this.ahead_at = 0;
            }
            Poll::Ready(Ok(()))
        } else if *this.first_read && buf.remaining() < READ_AHEAD {
            let mut tmp = [std::mem::MaybeUninit::<u8>::uninit(); READ_AHEAD];
            let mut ahead = ReadBuf::uninit(&mut tmp);
            let res = inner.poll_read(cx, &mut ahead);
            if let Poll::Ready(Ok(())) = res {
                *this.first_read = false;
                let got = ahead.filled();
                let n = buf.remaining().min(got.len());
                buf.put_slice(&got[..n]);
                if n < got.len() {
                    *this.ahead = got[n..].to_vec();
                    *this.ahead_at = 0;
                }
            }
            res
        } else {
            if buf.remaining() > 0 {
                *this.first_read = false;
            }
            inner.poll_read(cx, buf)
        };
        if !*this.sniffed {
            // Decide on the whole preface, which may arrive in pieces: a
            // slow HTTP/1 client sending "P" must keep its timers.
            let got = &buf.filled()[before..];
            let want = &H2_PREFACE[*this.matched..];
            let n = got.len().min(want.len());
            if got[..n] != want[..n] {
                *this.sniffed = true;
                if *this.protocol == Protocol::Http2 {
                    // Not HTTP/2 where ALPN chose it: hyper never sees
                    // these bytes, the connection is closed.
                    buf.set_filled(before);
                    this.shared.bad_preface.store(true, Ordering::Relaxed);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "not the HTTP/2 connection preface on a connection where ALPN chose h2",
                    )));
                }
            } else {
                *this.matched += n;
                if *this.matched == H2_PREFACE.len() {
                    *this.sniffed = true;
                    match *this.protocol {
                        Protocol::Http2 => {}
                        Protocol::Detect => {
                            *this.h2 = true;
                            this.shared.h2.store(true, Ordering::Relaxed);
                        }
                        Protocol::Http1 => {
                            // The rest of the preface never reaches hyper,
                            // whose automatic builder would take it for
                            // HTTP/2: answer 400 and end the stream.
                            buf.set_filled(before);
                            this.shared.bad_preface.store(true, Ordering::Relaxed);
                            *this.reply = Some((H2_ON_HTTP1_REPLY, 0));
                            return self.poll_reply(cx);
                        }
                    }
                }
            }
        }
        if *this.h2 || this.shared.upgraded.load(Ordering::Relaxed) {
            return res;
        }
        let generation = this.shared.started.load(Ordering::Acquire);
        if generation != *this.generation {
            *this.generation = generation;
            *this.head_bytes = false;
            *this.read_armed = false;
        }
        let idle = this.shared.active.load(Ordering::Acquire) == 0;
        match res {
            Poll::Ready(Ok(())) => {
                if idle && !*this.head_bytes && buf.filled().len() > before {
                    // First byte of a request head: the head timer starts.
                    let now = Instant::now();
                    *this.head_bytes = true;
                    let since = now.saturating_duration_since(this.shared.accepted);
                    this.shared
                        .head_at
                        .store(since.as_nanos() as u64, Ordering::Relaxed);
                    arm(this.read_timer, (now + this.timeouts.http_request).into());
                    *this.read_armed = true;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if !idle {
                    // A request is in progress: hyper reads its body (the
                    // body wrapper enforces `timeouts.client`) or watches for
                    // a close while the response is produced.
                    *this.read_armed = false;
                    *this.head_bytes = false;
                    return Poll::Pending;
                }
                // Between requests an HTTP/1 connection may park first.
                let park = park_after(
                    this.park,
                    this.timeouts,
                    generation > 0
                        && !*this.head_bytes
                        && !*this.write_blocked
                        && this.out.is_empty(),
                );
                if !*this.read_armed {
                    let wait = if generation == 0 {
                        this.timeouts.http_request
                    } else {
                        park.unwrap_or(this.timeouts.keep_alive)
                    };
                    arm(this.read_timer, (Instant::now() + wait).into());
                    *this.read_armed = true;
                }
                if !fired(this.read_timer, cx) {
                    return Poll::Pending;
                }
                if park.is_some() {
                    if let Some((_, slot)) = this.park.as_ref() {
                        let stream = Pin::get_mut(this.inner).take();
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = stream;
                        this.shared.parked.store(true, Ordering::Relaxed);
                        // End of stream for hyper, which closes its side
                        // (a no-op here: see `poll_shutdown`).
                        return Poll::Ready(Ok(()));
                    }
                }
                if *this.head_bytes && !*this.write_blocked {
                    tracing::debug!("request head timeout: answering 408");
                    this.shared.timed_out.store(true, Ordering::Relaxed);
                    *this.reply = Some((REQUEST_TIMEOUT_REPLY, 0));
                    return self.poll_reply(cx);
                }
                // Idle keep-alive connection: end it quietly.
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ConnIo<S> {
    fn guard_write<T>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let this = self.project();
        match res {
            Poll::Pending => {
                *this.write_blocked = true;
                if !*this.write_armed {
                    arm(
                        this.write_timer,
                        (Instant::now() + this.timeouts.client).into(),
                    );
                    *this.write_armed = true;
                }
                if fired(this.write_timer, cx) {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "client stopped reading (timeouts.client)",
                    )));
                }
                Poll::Pending
            }
            ready => {
                *this.write_blocked = false;
                *this.write_armed = false;
                ready
            }
        }
    }
}

/// Most bytes an HTTP/2 connection holds back before passing them on.
const COALESCE_MAX: usize = 64 * 1024;
/// The held bytes' first allocation: about a dozen small responses.
const OUT_FIRST: usize = 16 * 1024;

impl<S: AsyncRead + AsyncWrite + Unpin> ConnIo<S> {
    /// Starts the keep-alive (or parking) timer when a flush ends an HTTP/1
    /// response and no request is active. hyper last read while the
    /// response was being produced and will not read again until the
    /// client sends something, so the timer must start here, in the flush
    /// that ends the response (same task), for the idle limit to hold.
    fn arm_idle(self: Pin<&mut Self>, cx: &mut Context<'_>) {
        let this = self.project();
        if *this.h2
            || *this.read_armed
            || this.reply.is_some()
            || this.shared.upgraded.load(Ordering::Relaxed)
            || this.shared.closing.load(Ordering::Relaxed)
            || this.shared.active.load(Ordering::Acquire) != 0
        {
            return;
        }
        let started = this.shared.started.load(Ordering::Acquire);
        if started == 0 {
            return;
        }
        *this.generation = started;
        *this.head_bytes = false;
        let wait = park_after(this.park, this.timeouts, !*this.write_blocked)
            .unwrap_or(this.timeouts.keep_alive);
        arm(this.read_timer, (Instant::now() + wait).into());
        *this.read_armed = true;
        // Registers this task with the timer; when it fires hyper's next
        // read finds it expired.
        if fired(this.read_timer, cx) {
            cx.waker().wake_by_ref();
        }
    }

    /// Passes the held bytes on to the stream.
    fn poll_drain(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        while *this.out_at < this.out.len() {
            let Some(inner) = live(this.inner.as_mut()) else {
                return Poll::Ready(Err(parked()));
            };
            match inner.poll_write(cx, &this.out[*this.out_at..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *this.out_at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        this.out.clear();
        if this.shared.active.load(Ordering::Acquire) == 0 {
            // No request in progress: an idle connection keeps no buffer.
            // A busy one keeps it for the next epoch (growing it afresh
            // each time cost a malloc and several reallocs per write).
            *this.out = Vec::new();
        }
        *this.out_at = 0;
        *this.held = None;
        Poll::Ready(Ok(()))
    }

    /// Holds `bufs` (HTTP/2), passing held bytes on first when full.
    fn poll_hold(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.out.len() >= COALESCE_MAX {
            let res = self.as_mut().poll_drain(cx);
            match self.as_mut().guard_write(cx, res) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let this = self.project();
        if this.out.capacity() == 0 {
            this.out.reserve(OUT_FIRST);
        }
        let mut n = 0;
        for b in bufs {
            let room = COALESCE_MAX.saturating_sub(this.out.len()).max(1);
            let take = b.len().min(room);
            this.out.extend_from_slice(&b[..take]);
            n += take;
            if take < b.len() {
                break;
            }
        }
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ConnIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.reply.is_some() {
            return Poll::Ready(Err(answered()));
        }
        if self.h2 {
            return self.poll_hold(cx, &[io::IoSlice::new(buf)]);
        }
        let res = match live(self.as_mut().project().inner) {
            Some(inner) => inner.poll_write(cx, buf),
            None => Poll::Ready(Err(parked())),
        };
        self.guard_write(cx, res)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.reply.is_some() {
            return Poll::Ready(Err(answered()));
        }
        if self.h2 {
            return self.poll_hold(cx, bufs);
        }
        let res = match live(self.as_mut().project().inner) {
            Some(inner) => inner.poll_write_vectored(cx, bufs),
            None => Poll::Ready(Err(parked())),
        };
        self.guard_write(cx, res)
    }

    fn is_write_vectored(&self) -> bool {
        self.h2 || self.inner.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out_at < self.out.len() {
            if !flush_now(self.as_mut().project().held, cx) {
                // Written when the worker's hold epoch ends (see
                // `flush_held`), which wakes this task.
                return Poll::Ready(Ok(()));
            }
            let res = self.as_mut().poll_drain(cx);
            match self.as_mut().guard_write(cx, res) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        let res = match live(self.as_mut().project().inner) {
            Some(inner) => inner.poll_flush(cx),
            None => Poll::Ready(Ok(())),
        };
        let res = self.as_mut().guard_write(cx, res);
        if matches!(res, Poll::Ready(Ok(()))) {
            self.arm_idle(cx);
        }
        res
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out_at < self.out.len() {
            let res = self.as_mut().poll_drain(cx);
            match self.as_mut().guard_write(cx, res) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        match live(self.project().inner) {
            Some(inner) => inner.poll_shutdown(cx),
            // Parked: the socket stays open for the next request.
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Nothing more is written on a connection the wrapper answered itself
/// (hyper may still try to answer the partial head it saw).
fn answered() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the connection was already answered and closed",
    )
}

mod hold;
#[cfg(test)]
mod tests;
