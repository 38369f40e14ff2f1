//! How the admin listener holds its connections, so that no client that
//! can connect locks the operators out: connections that pipeline requests
//! and never read their answers must not hold every slot, nor keep `rdmalb
//! ctl` out (docs/operations.md, "Admin listener"; docs/reliability.md,
//! "Service under attack").
//!
//! - **Slots.** [`Limits::connections`] connections at once; all but one
//!   are open to anyone. The last one ([`Slot::Reserved`]) is taken only
//!   when the others are all busy, and serves only requests that carry the
//!   admin token ([`super::guard::refusal`] lets them through); anything
//!   else on it gets `503` and the connection is closed. Its head must
//!   arrive within [`Limits::reserved_head`].
//! - **Deadlines** ([`Deadlined`]): a write that makes no progress for
//!   [`Limits::write`] (a client that does not read its answers) and an
//!   idle connection (no request in flight, nothing read) for
//!   [`Limits::idle`] end the connection; hyper's head timeout
//!   ([`Limits::head`]) bounds a request head sent slowly.
//! - **Requests per connection**: after [`Limits::requests`] requests the
//!   answer says `Connection: close`, so pipelining cannot keep a slot.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// The admin listener's bounds; [`Limits::default`] is what it runs with.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once (the last one reserved, see the module
    /// doc); more wait in the accept queue.
    pub connections: usize,
    /// Time to send a request head.
    pub head: Duration,
    /// Time to send the head on the reserved slot.
    pub reserved_head: Duration,
    /// Longest wait for a write to make progress.
    pub write: Duration,
    /// Longest idleness between requests.
    pub idle: Duration,
    /// Requests served on one connection.
    pub requests: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            head: Duration::from_secs(10),
            reserved_head: Duration::from_secs(2),
            write: Duration::from_secs(10),
            idle: Duration::from_secs(30),
            requests: 100,
        }
    }
}

/// Which slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Open,
    /// Token-bearing requests only.
    Reserved,
}

/// The listener's slots.
pub struct Slots {
    open: Arc<Semaphore>,
    reserved: Arc<Semaphore>,
}

impl Slots {
    pub fn new(limits: &Limits) -> Slots {
        Slots {
            open: Arc::new(Semaphore::new(limits.connections.saturating_sub(1).max(1))),
            reserved: Arc::new(Semaphore::new(1)),
        }
    }

    /// Waits for a slot: an open one when there is one, else the reserved
    /// one (or whichever frees first).
    pub async fn acquire(&self) -> Option<(OwnedSemaphorePermit, Slot)> {
        if let Ok(p) = Arc::clone(&self.open).try_acquire_owned() {
            return Some((p, Slot::Open));
        }
        tokio::select! {
            biased;
            p = Arc::clone(&self.open).acquire_owned() => p.ok().map(|p| (p, Slot::Open)),
            p = Arc::clone(&self.reserved).acquire_owned() => p.ok().map(|p| (p, Slot::Reserved)),
        }
    }
}

/// Requests in flight on one connection: while there is one, the
/// connection is not idle (a `move` may wait on the agent for seconds).
#[derive(Debug, Default)]
pub struct InFlight(AtomicUsize);

impl InFlight {
    pub fn start(self: &Arc<Self>) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(Arc::clone(self))
    }

    fn idle(&self) -> bool {
        self.0.load(Ordering::Relaxed) == 0
    }
}

/// Ends one request's in-flight mark when dropped.
pub struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A stream whose writes fail with `TimedOut` when they make no progress
/// for `write`, and whose reads fail so when nothing arrives for `idle`
/// while no request is in flight.
pub struct Deadlined<S> {
    inner: S,
    limits: Limits,
    in_flight: Arc<InFlight>,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl<S> Deadlined<S> {
    pub fn new(inner: S, limits: Limits, in_flight: Arc<InFlight>) -> Self {
        Deadlined {
            inner,
            limits,
            in_flight,
            read_timer: None,
            write_timer: None,
        }
    }
}

/// Polls the stall timer of a pending operation (armed on its first
/// `Pending`); `Ready(Err)` once it fired.
fn stalled(
    timer: &mut Option<Pin<Box<Sleep>>>,
    limit: Duration,
    cx: &mut Context<'_>,
    what: &str,
) -> Poll<std::io::Result<()>> {
    let t = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
    ready!(t.as_mut().poll(cx));
    Poll::Ready(Err(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("admin connection: {what} for {limit:?}"),
    )))
}

impl<S: AsyncRead + Unpin> AsyncRead for Deadlined<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.read_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending if this.in_flight.idle() => {
                stalled(&mut this.read_timer, this.limits.idle, cx, "idle")
            }
            Poll::Pending => {
                this.read_timer = None;
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> Deadlined<S> {
    fn progress<T>(
        &mut self,
        r: Poll<std::io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.write_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                ready!(stalled(
                    &mut self.write_timer,
                    self.limits.write,
                    cx,
                    "the client read none of the answer"
                ))?;
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Deadlined<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(r, cx)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
