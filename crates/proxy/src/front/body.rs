//! The client's request body on its way to the node ([`RequestBody`]),
//! streamed frame by frame, never buffered whole, with the client
//! inactivity timeout (`timeouts.client`); and the inactivity timer both
//! directions share ([`idle_expired`]). The response body, which settles
//! the exchange, sits above the exchange in [`super::response`].

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

/// Boxed error type of both bodies.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why the client's request body failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientBodyError {
    #[error("client request body failed: {0}")]
    Aborted(#[source] BoxError),
    #[error("client stopped sending its request body (timeouts.client)")]
    Timeout,
}

/// Arms (or re-arms) an inactivity timer on the first `Pending` after
/// progress; returns true when it has expired.
pub(super) fn idle_expired(
    timer: &mut Option<Pin<Box<Sleep>>>,
    armed: &mut bool,
    idle: Duration,
    cx: &mut Context<'_>,
) -> bool {
    if !*armed {
        let deadline = tokio::time::Instant::now() + idle;
        match timer {
            Some(t) => t.as_mut().reset(deadline),
            None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        *armed = true;
    }
    timer
        .as_mut()
        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
}

/// The client's request body as the connection delivers it: HTTP/2's
/// stream (hyper's), HTTP/1's ([`super::serve1`]), or none.
pub enum ClientBody {
    Empty,
    H1(super::serve1::RecvBody),
    H2(Incoming),
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ClientBody::Empty => Poll::Ready(None),
            ClientBody::H1(b) => Pin::new(b).poll_frame(cx).map_err(|e| e.into()),
            ClientBody::H2(b) => Pin::new(b).poll_frame(cx).map_err(|e| e.into()),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::H1(b) => b.is_end_stream(),
            ClientBody::H2(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Empty => SizeHint::with_exact(0),
            ClientBody::H1(b) => b.size_hint(),
            ClientBody::H2(b) => b.size_hint(),
        }
    }
}

/// The client's request body, forwarded to the node.
pub struct RequestBody {
    /// `None`: a request without a body, replayed to another node.
    inner: Option<ClientBody>,
    idle: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
    /// Milliseconds since `start` of the last chunk forwarded, read by the
    /// response-head wait so a long upload is not taken for a slow node.
    progress: Option<Arc<AtomicU64>>,
    start: Instant,
}

impl RequestBody {
    /// `inner` with the `idle` inactivity limit; with `progress`, records
    /// there the time of each chunk forwarded, in milliseconds since
    /// `start` (see the field doc).
    pub fn new(
        inner: ClientBody,
        idle: Duration,
        progress: Option<Arc<AtomicU64>>,
        start: Instant,
    ) -> Self {
        RequestBody {
            inner: Some(inner),
            idle,
            timer: None,
            armed: false,
            progress,
            start,
        }
    }

    /// The body of a request that has none, for a replay.
    pub fn empty() -> Self {
        RequestBody {
            inner: None,
            idle: Duration::ZERO,
            timer: None,
            armed: false,
            progress: None,
            start: Instant::now(),
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.armed = false;
                if let Some(p) = &this.progress {
                    p.store(this.start.elapsed().as_millis() as u64, Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(Box::new(ClientBodyError::Aborted(e)))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if idle_expired(&mut this.timer, &mut this.armed, this.idle, cx) {
                    Poll::Ready(Some(Err(Box::new(ClientBodyError::Timeout))))
                } else {
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
