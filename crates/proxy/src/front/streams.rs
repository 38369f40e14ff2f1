//! HTTP/2 streams served inside their connection's task.
//!
//! hyper's HTTP/2 server hands every stream (the request's service future
//! and the sending of its response) to an executor. With tokio's, each
//! stream is a task of its own: spawned, scheduled, and woken across tasks
//! every time the connection has a frame for it or it has one for the
//! connection. [`StreamExec`] instead leaves each new stream in this
//! worker thread's inbox; the connection's task ([`Streams`]) adopts it
//! right after the poll of the connection that created it, and polls its
//! streams itself, so a frame, the service and the response all move in
//! one task's poll.
//!
//! The workers are current-thread runtimes, and hyper calls the executor
//! only from inside the connection's own poll: what the inbox holds after
//! that poll was made by that connection. Called anywhere else (no
//! connection task is polling on this thread), a stream falls back to a
//! task of its own.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};

type Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

thread_local! {
    /// Streams created by the connection being polled on this thread.
    static INBOX: RefCell<Vec<Stream>> = const { RefCell::new(Vec::new()) };
    /// Whether a connection task is inside its connection's poll.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

/// The executor of the listeners' HTTP/2 connections; see the module doc.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamExec;

impl<F> hyper::rt::Executor<F> for StreamExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        if POLLING.with(Cell::get) {
            INBOX.with(|i| i.borrow_mut().push(Box::pin(fut)));
        } else {
            tokio::spawn(fut);
        }
    }
}

/// The streams of one connection, polled by its task.
#[derive(Default)]
pub struct Streams {
    set: FuturesUnordered<Stream>,
}

impl Streams {
    /// Polls `conn` (the connection's future), adopting the streams it
    /// creates, then every stream that is ready.
    pub fn poll_conn<T>(
        &mut self,
        conn: Pin<&mut impl Future<Output = T>>,
        cx: &mut Context<'_>,
    ) -> Poll<T> {
        POLLING.with(|p| p.set(true));
        let served = conn.poll(cx);
        POLLING.with(|p| p.set(false));
        INBOX.with(|i| self.set.extend(i.borrow_mut().drain(..)));
        if served.is_pending() {
            self.poll_streams(cx);
        }
        served
    }

    /// Polls the streams until none is ready.
    fn poll_streams(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Some(())) = self.set.poll_next_unpin(cx) {}
    }

    /// Polls `conn` and its streams until `conn` ends (a graceful shutdown
    /// waits for the streams it still serves).
    pub async fn finish<T>(&mut self, mut conn: Pin<&mut impl Future<Output = T>>) -> T {
        std::future::poll_fn(|cx| self.poll_conn(conn.as_mut(), cx)).await
    }
}
