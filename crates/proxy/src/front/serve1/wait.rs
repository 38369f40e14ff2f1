//! Between requests: the wait for a head with its timeouts (the
//! connection's one timer, [`arm`] and [`due`]), the reads into the
//! connection's buffer, and the replies the connection makes itself
//! (408, 400, 414, 431).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use tokio::io::AsyncWriteExt;
use tokio::time::Sleep;

use super::head::{self, HeadError, Parsed};
use super::{pool, Conn, Socket, H2_ON_HTTP1_REPLY, HEAD_READ};

/// How the wait for a head ended.
pub(super) enum Next {
    Head(Box<Parsed>),
    /// Closed quietly: the client left, idle too long, or shutdown.
    Closed,
    /// Refused with a status.
    Refused(HeadError),
    /// Bytes of a head came, not all of it, in `timeouts.http_request`.
    TimedOut,
}

/// `fut`, cut at `deadline` on the connection's timer: `None` when cut.
pub(super) async fn within<T>(
    mut timer: Pin<&mut Sleep>,
    deadline: Instant,
    fut: impl Future<Output = T>,
) -> Option<T> {
    tokio::pin!(fut);
    loop {
        arm(timer.as_mut(), deadline);
        tokio::select! {
            biased;
            v = &mut fut => return Some(v),
            _ = timer.as_mut() => if due(deadline) {
                return None;
            },
        }
    }
}

/// Makes the connection's timer fire no later than `deadline`. It is
/// moved only when it would fire later (or has fired): a timer due
/// earlier than the wait needs wakes the wait, which sees its deadline is
/// not reached ([`due`]) and arms it again. A keep-alive request thus
/// costs no timer-wheel operation at all; the connection's timer wakes it
/// at most once per timeout for nothing.
pub fn arm(timer: Pin<&mut Sleep>, deadline: Instant) {
    let deadline = tokio::time::Instant::from_std(deadline);
    if timer.deadline() > deadline || timer.is_elapsed() {
        timer.reset(deadline);
    }
}

/// Whether a wait's `deadline` is reached, once its timer fired.
pub fn due(deadline: Instant) -> bool {
    Instant::now() >= deadline
}

/// What ended one wait for bytes of a head.
enum Woke {
    Read(io::Result<usize>),
    Timer,
    Stop,
}

impl<S: Socket> Conn<S> {
    /// Waits for the next request head: at once from bytes already
    /// buffered (pipelining), else from the socket, with the head and
    /// idle timeouts of the module doc.
    pub(super) async fn next_head<F: Future<Output = ()>>(
        &mut self,
        mut stop: Pin<&mut F>,
        mut timer: Pin<&mut Sleep>,
    ) -> Next {
        let now = Instant::now();
        let mut got_bytes = !self.buf.is_empty();
        // No byte yet: the first request may take `http_request` from the
        // connection's start, a next one `keep_alive` of idleness. From
        // the first byte on, the head has `http_request`.
        let mut deadline = if got_bytes {
            self.head_began(now);
            now + self.limits.timeouts.http_request
        } else if self.served == 0 {
            self.ctx.conn.accepted + self.limits.timeouts.http_request
        } else {
            now + self.limits.timeouts.keep_alive
        };
        let mut stay = false;
        loop {
            if !self.buf.is_empty() {
                match head::parse(
                    &mut self.buf,
                    self.limits.max_headers,
                    self.limits.max_header_bytes,
                ) {
                    Ok(Some(p)) => return Next::Head(Box::new(p)),
                    Ok(None) => {}
                    Err(e) => return Next::Refused(e),
                }
            }
            if self.eof {
                return Next::Closed;
            }
            if self.buf.is_empty() && self.buf.capacity() > 0 && !got_bytes {
                // Idle: the buffer goes back to the worker's pool until
                // the next bytes come.
                pool::put(std::mem::take(&mut self.buf));
                self.limits.parked.increment(1);
            }
            arm(timer.as_mut(), deadline);
            let watch = !got_bytes && !stay;
            let woke =
                std::future::poll_fn(|cx| self.poll_wait(cx, timer.as_mut(), stop.as_mut(), watch));
            match woke.await {
                Woke::Read(Ok(0)) => {}
                Woke::Read(Ok(_)) => {
                    if !got_bytes {
                        got_bytes = true;
                        let now = Instant::now();
                        self.head_began(now);
                        deadline = now + self.limits.timeouts.http_request;
                    }
                }
                Woke::Read(Err(_)) => return Next::Closed,
                Woke::Timer => {
                    if !due(deadline) {
                        continue;
                    }
                    return if got_bytes {
                        Next::TimedOut
                    } else {
                        Next::Closed
                    };
                }
                Woke::Stop => {
                    // After a restart an idle connection is not closed
                    // under a client that may be sending: its next
                    // response says `Connection: close`.
                    if self.ctx.proxy.handed_over.load(Ordering::Relaxed) {
                        stay = true;
                        continue;
                    }
                    return Next::Closed;
                }
            }
        }
    }

    /// One wait of [`next_head`](Self::next_head), in this order: bytes
    /// from the client, the timer, shutdown (`watch`: only while no byte
    /// of a head came). Polled in place: no future of its own.
    fn poll_wait<F: Future<Output = ()>>(
        &mut self,
        cx: &mut Context<'_>,
        timer: Pin<&mut Sleep>,
        stop: Pin<&mut F>,
        watch: bool,
    ) -> Poll<Woke> {
        if let Poll::Ready(r) = self.poll_read_some(cx, HEAD_READ) {
            return Poll::Ready(Woke::Read(r));
        }
        if timer.poll(cx).is_ready() {
            return Poll::Ready(Woke::Timer);
        }
        if watch && (self.stop_seen || stop.poll(cx).is_ready()) {
            self.stop_seen = true;
            return Poll::Ready(Woke::Stop);
        }
        Poll::Pending
    }

    /// Records when the current head's first byte came (the `Tq` timer).
    fn head_began(&self, now: Instant) {
        let since = now.saturating_duration_since(self.ctx.conn.accepted);
        self.ctx
            .conn
            .head_at
            .store(since.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Reads into the buffer (taking one when there is none, and only
    /// once the socket is readable: an idle connection holds no buffer).
    fn poll_read_some(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        if self.buf.capacity() == 0 && !self.io.buffered() {
            ready!(self.io.tcp().poll_read_ready(cx))?;
        }
        self.poll_fill(cx, want)
    }

    pub(super) fn poll_fill(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
    ) -> Poll<io::Result<usize>> {
        if self.buf.capacity() == 0 {
            self.buf = pool::take(want);
        } else if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(want);
        }
        let n = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.io),
            cx,
            &mut self.buf
        ))?;
        if n == 0 {
            self.eof = true;
        }
        Poll::Ready(Ok(n))
    }

    /// Writes one of the connection's own replies, then the connection
    /// ends.
    pub(super) async fn reply(&mut self, bytes: &'static [u8]) {
        let write = async {
            self.io.write_all(bytes).await?;
            self.io.flush().await?;
            self.io.shutdown().await
        };
        let _ = tokio::time::timeout(self.limits.timeouts.client, write).await;
    }

    /// Answers a head that does not parse, and accounts for it.
    pub(super) async fn refuse(&mut self, e: HeadError) {
        if e == HeadError::H2Preface {
            self.ctx.conn.bad_preface.store(true, Ordering::Relaxed);
            self.reply(H2_ON_HTTP1_REPLY).await;
            super::super::listener::head_failure(&self.ctx, 400, "PR", "400");
            return;
        }
        tracing::debug!(client = %self.ctx.client, listener = %self.ctx.listener, error = ?e, "bad request head");
        let reply: &'static [u8] = match e {
            HeadError::TooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\ncontent-length: 32\r\nconnection: close\r\n\r\nrequest header fields too large\n",
            HeadError::UriTooLong => b"HTTP/1.1 414 URI Too Long\r\ncontent-type: text/plain\r\ncontent-length: 13\r\nconnection: close\r\n\r\nuri too long\n",
            _ => b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 12\r\nconnection: close\r\n\r\nbad request\n",
        };
        self.reply(reply).await;
        let status = e.status();
        let kind = match status {
            431 => "431",
            414 => "414",
            _ => "400",
        };
        super::super::listener::head_failure(&self.ctx, status, "PR", kind);
    }
}
