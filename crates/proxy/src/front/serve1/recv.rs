//! A client's HTTP/1 request body: decoded by the connection's task from
//! its read buffer ([`Decoder`]) and handed to
//! the request's [`Body`] through a one-frame [`Pipe`]. The task reads the
//! socket for the body only when the body asks for a frame (hyper's
//! "want"), so an upload moves at the pace the node takes it, and the
//! first ask of a request with `Expect: 100-continue` is when the client
//! is told to go on.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

pub use super::super::decode::{Decoder, Step};

/// Why the request body ended before its end.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum RecvError {
    #[error("the client closed the connection in the middle of the request body")]
    Closed,
    #[error("malformed request body: {0}")]
    Malformed(&'static str),
    #[error("the client connection failed while reading the request body")]
    Io,
}

/// What the connection's task and the request's body share.
#[derive(Debug, Default)]
struct Shared {
    /// The next frame, or how the body ended.
    frame: Option<Frame<Bytes>>,
    ended: Option<Result<(), RecvError>>,
    /// The body asked for a frame, and who to wake when it is there.
    want: bool,
    body: Option<Waker>,
    /// The connection's task, to wake when the body asks.
    conn: Option<Waker>,
    /// The body was dropped: the rest is the connection's to discard.
    dropped: bool,
    /// Bytes the framing says are left (exact lengths only).
    remaining: Option<u64>,
}

/// The connection's end of a body's pipe.
#[derive(Debug, Clone)]
pub struct Pipe(Arc<Mutex<Shared>>);

impl Pipe {
    /// A pipe and the body at its other end.
    pub fn new(remaining: Option<u64>) -> (Pipe, RecvBody) {
        let shared = Arc::new(Mutex::new(Shared {
            remaining,
            ..Shared::default()
        }));
        (Pipe(Arc::clone(&shared)), RecvBody(shared))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the body waits for a frame (registering `cx` to hear when
    /// it asks); `None` when it was dropped.
    pub fn wanted(&self, cx: &Context<'_>) -> Option<bool> {
        let mut s = self.lock();
        if s.dropped {
            return None;
        }
        if !s.want {
            match &s.conn {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => s.conn = Some(cx.waker().clone()),
            }
        }
        Some(s.want && s.frame.is_none())
    }

    /// Hands the body its next frame.
    pub fn send(&self, frame: Frame<Bytes>, remaining: Option<u64>) {
        let mut s = self.lock();
        s.want = false;
        s.frame = Some(frame);
        s.remaining = remaining;
        if let Some(w) = s.body.take() {
            w.wake();
        }
    }

    /// Ends the body: complete, or failed.
    pub fn end(&self, how: Result<(), RecvError>) {
        let mut s = self.lock();
        s.want = false;
        s.ended = Some(how);
        s.remaining = Some(0);
        if let Some(w) = s.body.take() {
            w.wake();
        }
    }
}

/// The request's body as the proxy forwards it.
#[derive(Debug)]
pub struct RecvBody(Arc<Mutex<Shared>>);

impl RecvBody {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for RecvBody {
    fn drop(&mut self) {
        let mut s = self.lock();
        s.dropped = true;
        if let Some(w) = s.conn.take() {
            w.wake();
        }
    }
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = RecvError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RecvError>>> {
        let mut s = self.lock();
        if let Some(f) = s.frame.take() {
            return Poll::Ready(Some(Ok(f)));
        }
        match s.ended {
            Some(Ok(())) => return Poll::Ready(None),
            Some(Err(e)) => {
                s.ended = Some(Ok(()));
                return Poll::Ready(Some(Err(e)));
            }
            None => {}
        }
        match &s.body {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.body = Some(cx.waker().clone()),
        }
        if !s.want {
            s.want = true;
            if let Some(w) = s.conn.take() {
                w.wake();
            }
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        let s = self.lock();
        s.frame.is_none() && (s.ended.is_some() || s.remaining == Some(0))
    }

    fn size_hint(&self) -> SizeHint {
        let s = self.lock();
        match (s.remaining, &s.frame) {
            (Some(n), None) => SizeHint::with_exact(n),
            (Some(n), Some(f)) => {
                SizeHint::with_exact(n + f.data_ref().map_or(0, |d| d.len() as u64))
            }
            _ => SizeHint::default(),
        }
    }
}
