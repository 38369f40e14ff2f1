//! An HTTP/2 client connection's byte stream, wrapped for what hyper's
//! HTTP/2 server does not do the way a load balancer needs (HTTP/1
//! connections are the proxy's own, see [`super::serve1`]):
//!
//! - **client write** (`timeouts.client`): the client stops reading;
//! - **the protocol ALPN chose** (RFC 9113 section 3.2): where it chose
//!   `h2`, a connection that does not start with the HTTP/2 preface is
//!   closed (an invalid preface is a connection error, and GOAWAY may be
//!   omitted: section 3.4) before hyper reads a byte of it;
//! - **coalesced writes**: the frames of responses that become ready while
//!   the worker has work to do leave in one write when it runs out of work
//!   (few TLS records, one system call) instead of one each (see [`hold`]).
//!
//! It also holds the state of the connection that the request phases and
//! the listener share ([`ConnShared`]).

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
    /// The request head did not arrive in time (answered 408).
    pub timed_out: AtomicBool,
    /// The connection's first bytes were not the protocol ALPN chose
    /// (answered 400 on HTTP/1.1, closed on HTTP/2).
    pub bad_preface: AtomicBool,
    /// The client speaks HTTP/2 (ALPN or prior knowledge).
    pub h2: AtomicBool,
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
    /// An HTTP/2 client stream with the write timeout and coalescing.
    pub struct ConnIo<S> {
        #[pin]
        inner: S,
        shared: std::sync::Arc<ConnShared>,
        timeouts: IoTimeouts,
        // ALPN chose h2: the first bytes must be the preface.
        sniffing: bool,
        // Bytes of the HTTP/2 preface seen so far.
        matched: usize,
        write_armed: bool,
        write_timer: Option<Pin<Box<Sleep>>>,
        // Bytes written but not yet passed on (from `out_at`), and the
        // worker's hold epoch they wait for the end of (see `flush_held`).
        out: Vec<u8>,
        out_at: usize,
        held: Option<u64>,
    }
}

impl<S> ConnIo<S> {
    /// Wraps `inner`, an HTTP/2 connection: its preface already seen
    /// (`Protocol::Detect`, prior knowledge), or to be checked (ALPN
    /// chose h2: `Protocol::Http2`).
    pub fn new(
        inner: S,
        shared: std::sync::Arc<ConnShared>,
        timeouts: IoTimeouts,
        protocol: Protocol,
    ) -> Self {
        shared.h2.store(true, Ordering::Relaxed);
        ConnIo {
            inner,
            shared,
            timeouts,
            sniffing: protocol == Protocol::Http2,
            matched: 0,
            write_armed: false,
            write_timer: None,
            out: Vec::new(),
            out_at: 0,
            held: None,
        }
    }
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

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for ConnIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A worker that stays busy still ends its hold epoch in time.
        expire_held();
        let this = self.project();
        let before = buf.filled().len();
        let res = this.inner.poll_read(cx, buf);
        if *this.sniffing {
            // Decide on the whole preface, which may arrive in pieces.
            let got = &buf.filled()[before..];
            let want = &H2_PREFACE[*this.matched..];
            let n = got.len().min(want.len());
            if got[..n] != want[..n] {
                // Not HTTP/2 where ALPN chose it: hyper never sees these
                // bytes, the connection is closed.
                buf.set_filled(before);
                this.shared.bad_preface.store(true, Ordering::Relaxed);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not the HTTP/2 connection preface on a connection where ALPN chose h2",
                )));
            }
            *this.matched += n;
            if *this.matched == H2_PREFACE.len() {
                *this.sniffing = false;
            }
        }
        res
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
    /// Passes the held bytes on to the stream.
    fn poll_drain(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        while *this.out_at < this.out.len() {
            match this
                .inner
                .as_mut()
                .poll_write(cx, &this.out[*this.out_at..])
            {
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
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_hold(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_hold(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
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
        let res = self.as_mut().project().inner.poll_flush(cx);
        self.guard_write(cx, res)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out_at < self.out.len() {
            let res = self.as_mut().poll_drain(cx);
            match self.as_mut().guard_write(cx, res) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        self.project().inner.poll_shutdown(cx)
    }
}

mod hold;
#[cfg(test)]
mod tests;
