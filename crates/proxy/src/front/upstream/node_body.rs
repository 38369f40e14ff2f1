//! The node's response body ([`NodeBody`]), read from the node's socket by
//! the task that writes it to the client, when the client side asks for
//! the next frame: data frames share the read buffer (no copy), chunked
//! bodies are decoded (extensions dropped, trailers passed on as a
//! trailers frame), and a body read to its end puts the connection back in
//! its pool at once.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::net::TcpStream;

use super::super::decode::{Decoder, Step};
use super::h1::{NodeConn, Upload};
use super::{NodePool, UPSTREAM_MAX_BUF};

/// Smallest read while a body is streamed.
const BODY_READ: usize = 16 * 1024;

/// How the node frames its response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Until the node closes the connection.
    Close,
}

/// Why the node's response body failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeBodyError {
    #[error("reading the node's response body failed: {0}")]
    Read(#[source] io::Error),
    #[error("the node closed the connection before the end of its response body")]
    Incomplete,
    #[error("the node's chunked body is malformed: {0}")]
    Chunk(&'static str),
}

enum State {
    /// A length-delimited or chunked body.
    Decode(Decoder),
    Close,
    Done,
}

/// The node's response body; see the module doc.
pub struct NodeBody {
    conn: Option<NodeConn>,
    state: State,
    /// Where the connection goes when the body was read to its end
    /// (`None`: it closes).
    pool: Option<Arc<NodePool>>,
    /// The rest of the request, when the node answered before all of it
    /// went out: written as the response is read.
    upload: Option<Box<Upload>>,
}

impl NodeBody {
    pub(super) fn new(
        conn: NodeConn,
        framing: Framing,
        pool: Option<Arc<NodePool>>,
        upload: Option<Box<Upload>>,
    ) -> NodeBody {
        let mut body = NodeBody {
            conn: Some(conn),
            state: match framing {
                Framing::Empty | Framing::Length(0) => State::Done,
                Framing::Length(n) => State::Decode(Decoder::length(n)),
                Framing::Chunked => State::Decode(Decoder::chunked()),
                Framing::Close => State::Close,
            },
            pool,
            upload,
        };
        if matches!(body.state, State::Done) {
            body.ended();
        }
        body
    }

    /// A body that has ended, holding no connection.
    pub fn ended_empty() -> NodeBody {
        NodeBody {
            conn: None,
            state: State::Done,
            pool: None,
            upload: None,
        }
    }

    /// The node's socket after a `101 Switching Protocols`, with the bytes
    /// it sent after the head; `None` once the body was read or failed.
    pub fn into_upgraded(mut self) -> Option<(TcpStream, Bytes)> {
        let conn = self.conn.take()?;
        Some((conn.io, conn.buf.freeze()))
    }

    /// The body was read to its end: the connection goes back to its pool
    /// when the node kept it open, sent nothing more, and the whole request
    /// went out.
    fn ended(&mut self) {
        self.state = State::Done;
        if self.upload.is_some() {
            self.pool = None;
            return;
        }
        // Without a pool the connection stays: it closes with the body, or
        // becomes a tunnel after a 101.
        let Some(pool) = self.pool.take() else {
            return;
        };
        if let Some(conn) = self.conn.take() {
            if conn.buf.is_empty() {
                pool.checkin(conn, Instant::now());
            }
        }
    }

    /// Up to `limit` bytes of what was read, as one data frame.
    fn data(&mut self, limit: u64) -> Option<Bytes> {
        let buf = &mut self.conn.as_mut()?.buf;
        let n = (buf.len() as u64).min(limit) as usize;
        (n > 0).then(|| buf.split_to(n).freeze())
    }

    /// Reads more from the node; `Ok(false)` when it closed the connection.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, NodeBodyError>> {
        let Some(conn) = self.conn.as_mut() else {
            return Poll::Ready(Err(NodeBodyError::Incomplete));
        };
        let want = match &self.state {
            State::Decode(d) => d.data_left().map_or(BODY_READ, |n| {
                (n as usize).clamp(BODY_READ, UPSTREAM_MAX_BUF)
            }),
            State::Close => UPSTREAM_MAX_BUF,
            State::Done => BODY_READ,
        };
        if conn.buf.capacity() - conn.buf.len() < 1024 {
            conn.buf.reserve(want);
        }
        let n = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut conn.io),
            cx,
            &mut conn.buf
        ))
        .map_err(NodeBodyError::Read)?;
        Poll::Ready(Ok(n > 0))
    }

    /// Writes what it can of the rest of the request. One that fails only
    /// keeps the connection from being reused: the node answered already.
    fn poll_upload(&mut self, cx: &mut Context<'_>) {
        let (Some(up), Some(conn)) = (self.upload.as_mut(), self.conn.as_mut()) else {
            return;
        };
        match up.poll(&mut conn.io, cx) {
            Poll::Pending => {}
            Poll::Ready(Ok(())) => self.upload = None,
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "the rest of the request did not reach the node");
                self.upload = None;
                self.pool = None;
            }
        }
    }

    fn fail(&mut self, e: NodeBodyError) -> Poll<Option<Result<Frame<Bytes>, NodeBodyError>>> {
        self.state = State::Done;
        self.conn = None;
        self.pool = None;
        Poll::Ready(Some(Err(e)))
    }
}

impl Body for NodeBody {
    type Data = Bytes;
    type Error = NodeBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, NodeBodyError>>> {
        let this = self.get_mut();
        if this.upload.is_some() {
            this.poll_upload(cx);
        }
        loop {
            let step = match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Close => match this.data(u64::MAX) {
                    Some(d) => Step::Frame(Frame::data(d)),
                    None => Step::Read,
                },
                State::Decode(d) => {
                    let Some(conn) = this.conn.as_mut() else {
                        return this.fail(NodeBodyError::Incomplete);
                    };
                    match d.step(&mut conn.buf) {
                        Ok(s) => s,
                        Err(e) => return this.fail(NodeBodyError::Chunk(e)),
                    }
                }
            };
            if let State::Decode(d) = &this.state {
                if d.is_done() {
                    this.ended();
                }
            }
            match step {
                Step::Frame(f) => return Poll::Ready(Some(Ok(f))),
                Step::End => return Poll::Ready(None),
                Step::Read => match ready!(this.poll_fill(cx)) {
                    Ok(true) => {}
                    // The end of a body that runs until the node closes.
                    Ok(false) if matches!(this.state, State::Close) => {
                        this.state = State::Done;
                        this.conn = None;
                        return Poll::Ready(None);
                    }
                    Ok(false) => return this.fail(NodeBodyError::Incomplete),
                    Err(e) => return this.fail(e),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Done => SizeHint::with_exact(0),
            State::Decode(d) => d
                .remaining()
                .map_or_else(SizeHint::default, SizeHint::with_exact),
            State::Close => SizeHint::default(),
        }
    }
}
