//! HTTP/1.1 to a node on `httparse`, driven by the request's own task.
//!
//! hyper's client ran every node connection in a task of its own: the
//! request task handed the request over a channel, the connection task
//! wrote it, read the answer and handed the body back frame by frame, each
//! hand-off a waker and a context switch between two tasks (22–45 % of the
//! proxy's cycles under `NodePool::connect` in the profiles of
//! `bench/results/proxy-profile-*`). Here the task serving the client
//! writes the request, reads the response head, and the response body
//! ([`NodeBody`]) reads the socket itself when the client side asks for
//! the next frame: one task drives both connections.
//!
//! Framing follows RFC 9112 section 6.3, as the node's answer is read:
//!
//! - no body after `HEAD`, and in `1xx`, `204` and `304` responses;
//!   interim `1xx` responses (other than `101`) are read and dropped, as
//!   hyper did;
//! - `Transfer-Encoding` in an HTTP/1.0 response is faulty framing (502,
//!   section 6.1);
//! - `Transfer-Encoding` wins over `Content-Length`; the length is then
//!   removed and the connection is not reused (the message may be a
//!   smuggling attempt; HAProxy does the same). A coding list that does
//!   not end in `chunked` is read until the node closes;
//! - `Content-Length` must be one number (repeated identical values are
//!   one); anything else is a broken answer: 502, connection closed;
//! - otherwise the body runs until the node closes the connection.
//!
//! The head is limited to [`UPSTREAM_MAX_BUF`](super::UPSTREAM_MAX_BUF)
//! bytes and [`MAX_HEADERS`] fields, and `obs-fold` is refused (502), as
//! hyper's client did by default.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Version};
use hyper::body::{Body, Frame};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

use super::super::body::{BoxError, ClientBodyError, RequestBody};
use super::node_body::{Framing, NodeBody};
use super::{NodePool, UPSTREAM_MAX_BUF};

/// Most header fields in a node's response head (hyper's limit).
pub const MAX_HEADERS: usize = 100;

/// Most buffers in one vectored write of the request (a chunk takes
/// three: size line, data, CRLF).
const GATHER_SLICES: usize = 16;
/// Body bytes gathered from ready frames before they are written.
const GATHER_BYTES: usize = 64 * 1024;

/// Bytes read ahead at once while a response head is awaited.
const HEAD_READ: usize = 8 * 1024;

/// Why a request got no usable response head from the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("writing the request to the node failed: {0}")]
    Write(#[source] io::Error),
    #[error("reading the node's response failed: {0}")]
    Read(#[source] io::Error),
    #[error("the node closed the connection without answering")]
    Closed,
    #[error("the node closed the connection in the middle of its response head")]
    IncompleteHead,
    #[error("the node's response head is not HTTP/1.x: {0}")]
    Parse(httparse::Error),
    #[error("the node's response head is larger than {UPSTREAM_MAX_BUF} bytes")]
    HeadTooLarge,
    #[error("the node's response is malformed: {0}")]
    Framing(&'static str),
    #[error("the request body does not match its Content-Length ({0})")]
    BodyLength(&'static str),
    #[error(transparent)]
    ClientBody(ClientBodyError),
}

impl NodeError {
    /// The connection broke before anything of an answer came: closed,
    /// reset or aborted, as opposed to a node that answered something that
    /// is not HTTP (not retried; HAProxy's `empty-response` is this).
    pub fn broke_before_response(&self) -> bool {
        match self {
            NodeError::Closed | NodeError::IncompleteHead => true,
            NodeError::Write(e) | NodeError::Read(e) => {
                use std::io::ErrorKind as K;
                matches!(
                    e.kind(),
                    K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof
                )
            }
            _ => false,
        }
    }
}

/// One connection to a node, idle or carrying one exchange.
pub struct NodeConn {
    pub(super) io: TcpStream,
    /// Bytes read from the node and not consumed yet. Empty, without an
    /// allocation, while the connection is idle.
    pub(super) buf: BytesMut,
}

impl NodeConn {
    pub fn new(io: TcpStream) -> NodeConn {
        NodeConn {
            io,
            buf: BytesMut::new(),
        }
    }

    /// Whether an idle connection can carry a request: the node has not
    /// closed it and sent nothing unasked. Costs a system call only when
    /// the socket was reported readable since the last read.
    pub fn is_alive(&self) -> bool {
        let mut probe = [0u8; 1];
        self.buf.is_empty()
            && matches!(self.io.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Writes `head` and `body` to the node and reads its response head,
    /// both at once: a node may answer before it has read the whole body
    /// (a 413, a redirect, a streaming echo), and that answer goes to the
    /// client at once; what is left of the body keeps going out while the
    /// response body is read ([`NodeBody`]). `head` is only borrowed: a
    /// request without a body can be sent again from it. On a complete
    /// exchange the connection goes back to `pool`.
    pub async fn send(
        mut self,
        head: &http::request::Parts,
        body: RequestBody,
        pool: Arc<NodePool>,
    ) -> Result<Response<NodeBody>, NodeError> {
        let mut out = Vec::with_capacity(estimate(head));
        encode_head(head, &mut out);
        let mut upload = Some(Upload::new(out, head, body));
        // A write that failed: the node may still have answered.
        let mut write_failed = None;
        let read = std::future::poll_fn(|cx| {
            if let Some(up) = upload.as_mut() {
                match up.poll(&mut self.io, cx) {
                    Poll::Ready(Ok(())) => upload = None,
                    Poll::Ready(Err(e @ NodeError::ClientBody(_))) => return Poll::Ready(Err(e)),
                    Poll::Ready(Err(e)) => {
                        upload = None;
                        write_failed = Some(e);
                    }
                    Poll::Pending => {}
                }
            }
            self.poll_head(&head.method, cx)
        })
        .await;
        let (parts, framing, keep_alive) = match (read, write_failed) {
            (Ok(h), None) => h,
            // Answered, but the request did not all go out: the
            // connection is not reused.
            (Ok((parts, framing, _)), Some(_)) => (parts, framing, false),
            (Err(e @ (NodeError::Closed | NodeError::Read(_))), Some(w)) => {
                tracing::trace!(error = %e, "after the failed write");
                return Err(w);
            }
            (Err(e), _) => return Err(e),
        };
        let pool = keep_alive.then_some(pool);
        Ok(Response::from_parts(
            parts,
            NodeBody::new(self, framing, pool, upload.map(Box::new)),
        ))
    }

    /// Reads the node's final response head (interim `1xx` ones are read
    /// and dropped) and how its body is framed; the bool says whether the
    /// connection may carry another request after this one.
    fn poll_head(
        &mut self,
        method: &Method,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(http::response::Parts, Framing, bool), NodeError>> {
        loop {
            if !self.buf.is_empty() {
                if let Some(head) = parse_head(&mut self.buf)? {
                    if head.status.is_informational()
                        && head.status != StatusCode::SWITCHING_PROTOCOLS
                    {
                        continue;
                    }
                    return Poll::Ready(finish_head(head, method));
                }
                if self.buf.len() >= UPSTREAM_MAX_BUF {
                    return Poll::Ready(Err(NodeError::HeadTooLarge));
                }
            }
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(HEAD_READ);
            }
            let n = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut self.io),
                cx,
                &mut self.buf
            ))
            .map_err(NodeError::Read)?;
            if n == 0 {
                return Poll::Ready(Err(if self.buf.is_empty() {
                    NodeError::Closed
                } else {
                    NodeError::IncompleteHead
                }));
            }
        }
    }
}

/// The request on its way out: the head, then the body as it is
/// (`Content-Length`) or chunked (`Transfer-Encoding: chunked`, set by the
/// request phase for a body of unknown length), with its trailer fields,
/// all of them, as HAProxy passes them on. Written with vectored writes: a
/// chunk's size line, data and CRLF go out in one system call, and so do
/// the head and the body frames that are ready with it (up to 64 KiB).
pub(super) struct Upload {
    /// Bytes to write before the next body frame is read.
    pending: VecDeque<Bytes>,
    body: Option<RequestBody>,
    chunked: bool,
    /// What the `Content-Length` still allows.
    left: u64,
}

impl Upload {
    fn new(head: Vec<u8>, parts: &http::request::Parts, body: RequestBody) -> Upload {
        let has_body = !body.is_end_stream();
        Upload {
            pending: VecDeque::from([Bytes::from(head)]),
            body: has_body.then_some(body),
            chunked: parts.headers.contains_key(header::TRANSFER_ENCODING),
            left: declared_length(&parts.headers),
        }
    }

    /// Writes what is pending and forwards body frames until the body
    /// ends (`Ready(Ok)`), the client or the node stalls, or one fails.
    pub(super) fn poll(
        &mut self,
        io: &mut TcpStream,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), NodeError>> {
        loop {
            // Body frames ready now go out together (and the first ones
            // with the head); what is not ready does not hold back what is
            // (a client waiting for `100 Continue` gets it from this poll
            // of its body, the node the head before it).
            while self.body.is_some()
                && self.pending.len() + 3 <= GATHER_SLICES
                && self.pending.iter().map(Bytes::len).sum::<usize>() < GATHER_BYTES
            {
                match self.poll_body(cx) {
                    Poll::Ready(frame) => self.take(frame)?,
                    Poll::Pending => break,
                }
            }
            if self.pending.is_empty() {
                return if self.body.is_none() {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                };
            }
            while !self.pending.is_empty() {
                let slices: [IoSlice<'_>; GATHER_SLICES] = std::array::from_fn(|i| {
                    IoSlice::new(self.pending.get(i).map_or(&[][..], |b| &b[..]))
                });
                let n = ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices))
                    .map_err(NodeError::Write)?;
                if n == 0 {
                    return Poll::Ready(Err(NodeError::Write(io::ErrorKind::WriteZero.into())));
                }
                self.advance(n);
            }
        }
    }

    fn poll_body(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    /// Queues what the body gave, framed.
    fn take(&mut self, frame: Option<Result<Frame<Bytes>, BoxError>>) -> Result<(), NodeError> {
        let frame = match frame {
            None => {
                self.body = None;
                if self.chunked {
                    self.pending.push_back(Bytes::from_static(b"0\r\n\r\n"));
                } else if self.left > 0 {
                    return Err(NodeError::BodyLength("shorter"));
                }
                return Ok(());
            }
            Some(Err(e)) => return Err(client_body_error(e)),
            Some(Ok(frame)) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                // The trailer section ends a chunked body.
                if let (true, Ok(fields)) = (self.chunked, frame.into_trailers()) {
                    let mut last = b"0\r\n".to_vec();
                    encode_fields(&fields, &mut last);
                    last.extend_from_slice(b"\r\n");
                    self.pending.push_back(Bytes::from(last));
                    self.body = None;
                }
                return Ok(());
            }
        };
        if data.is_empty() {
            return Ok(());
        }
        if self.chunked {
            let size = format!("{:x}\r\n", data.len());
            self.pending.push_back(Bytes::from(size));
            self.pending.push_back(data);
            self.pending.push_back(Bytes::from_static(b"\r\n"));
        } else {
            self.left = self
                .left
                .checked_sub(data.len() as u64)
                .ok_or(NodeError::BodyLength("longer"))?;
            self.pending.push_back(data);
        }
        Ok(())
    }

    /// `n` bytes of the pending buffers were written.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.pending.front_mut() else {
                return;
            };
            if n < front.len() {
                bytes::Buf::advance(front, n);
                return;
            }
            n -= front.len();
            self.pending.pop_front();
        }
        while self.pending.front().is_some_and(Bytes::is_empty) {
            self.pending.pop_front();
        }
    }
}

/// The request body failed on the client's side.
fn client_body_error(e: BoxError) -> NodeError {
    match e.downcast::<ClientBodyError>() {
        Ok(c) => NodeError::ClientBody(*c),
        Err(e) => NodeError::Write(io::Error::other(e)),
    }
}

/// The request's `Content-Length` (0 when absent or unreadable: the
/// request phase already refused a bad one).
fn declared_length(headers: &HeaderMap) -> u64 {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes the request head takes as text, for one allocation.
fn estimate(head: &http::request::Parts) -> usize {
    let target = head.uri.path_and_query().map_or(1, |p| p.as_str().len());
    head.headers
        .iter()
        .fold(32 + target, |n, (k, v)| n + k.as_str().len() + v.len() + 4)
}

/// The request head as HTTP/1.1 text, written from the parts in place
/// (names as the map holds them, lower case, as hyper's client wrote
/// them). The node always gets HTTP/1.1 and origin form.
pub(super) fn encode_head(head: &http::request::Parts, out: &mut Vec<u8>) {
    out.extend_from_slice(head.method.as_str().as_bytes());
    out.push(b' ');
    let target = head.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() { "/" } else { target }.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    encode_fields(&head.headers, out);
    out.extend_from_slice(b"\r\n");
}

fn encode_fields(headers: &HeaderMap, out: &mut Vec<u8>) {
    for (name, value) in headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
}

/// A response head as parsed, before its framing is decided.
pub(super) struct Head {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub reason: Option<Bytes>,
}

/// Parses one response head off the front of `buf` (`None`: not complete
/// yet). Field values share the head's bytes; nothing is copied but the
/// names hyper does not know.
pub(super) fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, NodeError> {
    // Offsets into `buf` of each name and value: the parser borrows the
    // buffer, which is split and frozen once it has answered.
    let mut spans = [(0u32, 0u32, 0u32, 0u32); MAX_HEADERS];
    let (len, code, minor, reason, count) = {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut fields);
        let len = match resp.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(NodeError::Parse(e)),
        };
        let base = buf.as_ptr() as usize;
        // An empty value or reason may point anywhere (httparse hands out
        // a static empty slice): its offset is 0.
        let off = |s: &[u8]| {
            if s.is_empty() {
                0
            } else {
                (s.as_ptr() as usize - base) as u32
            }
        };
        let count = resp.headers.len();
        for (span, h) in spans.iter_mut().zip(resp.headers.iter()) {
            let (n, v) = (h.name.as_bytes(), h.value);
            *span = (off(n), n.len() as u32, off(v), v.len() as u32);
        }
        let reason = resp.reason.map(|r| (off(r.as_bytes()), r.len()));
        (
            len,
            resp.code.unwrap_or(0),
            resp.version.unwrap_or(1),
            reason,
            count,
        )
    };
    let bytes = buf.split_to(len).freeze();
    let status = StatusCode::from_u16(code).map_err(|_| NodeError::Framing("bad status code"))?;
    let mut headers = HeaderMap::with_capacity(count);
    for &(n, nl, v, vl) in &spans[..count] {
        let name = &bytes[n as usize..(n + nl) as usize];
        let name =
            HeaderName::from_bytes(name).map_err(|_| NodeError::Framing("bad field name"))?;
        let value = bytes.slice(v as usize..(v + vl) as usize);
        let value = HeaderValue::from_maybe_shared(value)
            .map_err(|_| NodeError::Framing("bad field value"))?;
        headers.append(name, value);
    }
    // A reason phrase other than the standard one is passed on, as hyper
    // did (its `ReasonPhrase` extension).
    let reason = reason
        .filter(|&(_, l)| l > 0)
        .map(|(r, l)| bytes.slice(r as usize..r as usize + l))
        .filter(|r| status.canonical_reason().map(str::as_bytes) != Some(&r[..]));
    Ok(Some(Head {
        status,
        version: if minor == 0 {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        },
        headers,
        reason,
    }))
}

/// How the body of `head` (answering `method`) is framed, per RFC 9112
/// section 6.3, and whether the connection may be reused after it.
pub(super) fn finish_head(
    mut head: Head,
    method: &Method,
) -> Result<(http::response::Parts, Framing, bool), NodeError> {
    let mut keep_alive = keeps_alive(head.version, &head.headers);
    let status = head.status.as_u16();
    let framing = if *method == Method::HEAD || status < 200 || status == 204 || status == 304 {
        Framing::Empty
    } else if head.headers.contains_key(header::TRANSFER_ENCODING) {
        // RFC 9112 section 6.1: an HTTP/1.0 message with Transfer-Encoding
        // has faulty framing (what part of it the sender kept is unknown).
        if head.version == Version::HTTP_10 {
            return Err(NodeError::Framing(
                "Transfer-Encoding in an HTTP/1.0 response",
            ));
        }
        if head.headers.remove(header::CONTENT_LENGTH).is_some() {
            keep_alive = false;
        }
        if ends_chunked(&head.headers) {
            Framing::Chunked
        } else {
            Framing::Close
        }
    } else if head.headers.contains_key(header::CONTENT_LENGTH) {
        Framing::Length(content_length(&head.headers)?)
    } else {
        Framing::Close
    };
    if matches!(framing, Framing::Close) || status == 101 {
        keep_alive = false;
    }
    let mut resp = Response::new(());
    *resp.status_mut() = head.status;
    *resp.version_mut() = head.version;
    *resp.headers_mut() = head.headers;
    if let Some(r) = head.reason.take() {
        if let Ok(r) = hyper::ext::ReasonPhrase::try_from(r) {
            resp.extensions_mut().insert(r);
        }
    }
    Ok((resp.into_parts().0, framing, keep_alive))
}

/// HTTP/1.1 keeps the connection unless the node says `close`; HTTP/1.0
/// only when it says `keep-alive`.
fn keeps_alive(version: Version, headers: &HeaderMap) -> bool {
    let says = |token: &str| {
        headers.get_all(header::CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    match version {
        Version::HTTP_11 => !says("close"),
        _ => says("keep-alive"),
    }
}

/// Whether the last transfer coding is `chunked`.
fn ends_chunked(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.rsplit(',').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"))
}

/// The one length every `Content-Length` value states (RFC 9110 section
/// 8.6: a list of identical values is that value).
fn content_length(headers: &HeaderMap) -> Result<u64, NodeError> {
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        for part in v.as_bytes().split(|&b| b == b',') {
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                return Err(NodeError::Framing("bad Content-Length"));
            }
            let n: u64 = std::str::from_utf8(part)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(NodeError::Framing("bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(NodeError::Framing("conflicting Content-Length values"));
            }
            length = Some(n);
        }
    }
    length.ok_or(NodeError::Framing("bad Content-Length"))
}
