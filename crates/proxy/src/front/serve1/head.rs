//! A client's HTTP/1.x request head, parsed with `httparse` straight from
//! the connection's read buffer: the fields are slices of the head's bytes
//! (no copy), and the framing of the body follows RFC 9112 section 6.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, Version};

use super::super::decode::Decoder;

/// Headers parsed on the stack; a limit above this takes a heap array.
const STACK_HEADERS: usize = 128;

/// The longest request target accepted (hyper's limit): 414 above it.
const MAX_URI_LEN: usize = (u16::MAX - 1) as usize;

/// The HTTP/2 connection preface's first line.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// How the request's body is framed (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length` (0: no body).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

impl Framing {
    /// The decoder of a body so framed.
    pub fn decoder(self) -> Decoder {
        match self {
            Framing::Length(n) => Decoder::length(n),
            Framing::Chunked => Decoder::chunked(),
        }
    }
}

/// A request head as read.
#[derive(Debug)]
pub struct Parsed {
    pub parts: http::request::Parts,
    pub framing: Framing,
    /// The connection may carry another request after this one.
    pub keep_alive: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// `TE: trailers`: the response's trailer fields may be sent.
    pub trailers: bool,
}

/// Why a head was refused, with the status it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed (400).
    Bad(&'static str),
    /// Over `limits.max_header_bytes` or `limits.max_headers` (431).
    TooLarge,
    /// A request target over 65 534 bytes (414).
    UriTooLong,
    /// The HTTP/2 preface where HTTP/1.x was negotiated (400).
    H2Preface,
}

impl HeadError {
    pub fn status(self) -> u16 {
        match self {
            HeadError::Bad(_) | HeadError::H2Preface => 400,
            HeadError::TooLarge => 431,
            HeadError::UriTooLong => 414,
        }
    }
}

/// Parses the head at the start of `buf`, taking its bytes out of `buf` when
/// it is complete; `Ok(None)`: more bytes are needed (and allowed).
pub fn parse(
    buf: &mut BytesMut,
    max_headers: usize,
    max_bytes: usize,
) -> Result<Option<Parsed>, HeadError> {
    if buf.starts_with(H2_PREFACE) || H2_PREFACE.starts_with(buf) && buf.len() >= 3 {
        // "PRI" and on: decided once the first line is whole.
        if buf.starts_with(H2_PREFACE) {
            return Err(HeadError::H2Preface);
        }
        return Ok(None);
    }
    let mut stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut heap;
    let fields: &mut [httparse::Header<'_>] = if max_headers <= STACK_HEADERS {
        &mut stack[..max_headers]
    } else {
        heap = vec![httparse::EMPTY_HEADER; max_headers];
        &mut heap
    };
    let mut req = httparse::Request::new(fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            if buf.len() > max_bytes {
                return Err(HeadError::TooLarge);
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(e) => return Err(HeadError::Bad(bad(e))),
    };
    if len > max_bytes {
        return Err(HeadError::TooLarge);
    }
    let raw = Raw::of(&req, buf.as_ptr() as usize)?;
    let head = buf.split_to(len).freeze();
    raw.build(head).map(Some)
}

/// A field's name and value, as offsets into the head.
type Span = [u32; 4];

/// Fields whose offsets are kept on the stack (more take a vector).
const STACK_SPANS: usize = 32;

/// Where the fields lie: on the stack for most requests.
#[allow(clippy::large_enum_variant)] // a short-lived local, never moved
enum Fields {
    Stack([Span; STACK_SPANS]),
    Heap(Vec<Span>),
}

impl Fields {
    fn for_count(n: usize) -> Fields {
        if n <= STACK_SPANS {
            Fields::Stack([[0; 4]; STACK_SPANS])
        } else {
            Fields::Heap(vec![[0; 4]; n])
        }
    }

    fn set(&mut self, i: usize, (name, value): (Range<usize>, Range<usize>)) {
        // A head is at most `max_header_bytes`, far below 4 GiB.
        let span = [name.start, name.end, value.start, value.end].map(|x| x as u32);
        match self {
            Fields::Stack(a) => a[i] = span,
            Fields::Heap(v) => v[i] = span,
        }
    }

    fn iter(&self, n: usize) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + '_ {
        let all: &[Span] = match self {
            Fields::Stack(a) => a,
            Fields::Heap(v) => v,
        };
        all[..n].iter().map(|s| {
            let [a, b, c, d] = s.map(|x| x as usize);
            (a..b, c..d)
        })
    }
}

/// Where a parsed head's parts lie in its bytes, before they are taken
/// out of the buffer.
struct Raw {
    method: Method,
    http11: bool,
    target: Range<usize>,
    /// Name and value of each field kept (`kept` of them).
    fields: Fields,
    kept: usize,
    facts: Facts,
}

impl Raw {
    /// The request line's parts and the fields of `req`, whose slices
    /// start at `base`, and in the same pass what the fields say of the
    /// framing and the connection. The lengths are checked here, and with
    /// `Transfer-Encoding` they are left out (RFC 9112 section 6.1).
    fn of(req: &httparse::Request<'_, '_>, base: usize) -> Result<Raw, HeadError> {
        let at = |s: &[u8]| s.as_ptr() as usize - base..s.as_ptr() as usize - base + s.len();
        let target = req.path.unwrap_or_default();
        if target.len() > MAX_URI_LEN {
            return Err(HeadError::UriTooLong);
        }
        let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
            .map_err(|_| HeadError::Bad("invalid method"))?;
        let mut facts = Facts::default();
        for h in req.headers.iter() {
            facts.read(h.name, h.value)?;
        }
        let chunked = facts.chunked_last.is_some();
        let mut fields = Fields::for_count(req.headers.len());
        let mut kept = 0;
        for h in req.headers.iter() {
            if chunked && h.name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            fields.set(kept, (at(h.name.as_bytes()), at(h.value)));
            kept += 1;
        }
        Ok(Raw {
            method,
            http11: req.version == Some(1),
            target: at(target.as_bytes()),
            fields,
            kept,
            facts,
        })
    }

    /// The request's parts over `head`, the head's bytes (shared, not
    /// copied), and what its fields say of the body and the connection.
    fn build(self, head: Bytes) -> Result<Parsed, HeadError> {
        let uri = Uri::from_maybe_shared(head.slice(self.target))
            .map_err(|_| HeadError::Bad("invalid request target"))?;
        let (framing, keep_alive) = self.facts.framing(self.http11)?;
        // Room for the fields the phases add (forwarding, `Via`) too.
        let mut headers = HeaderMap::with_capacity(self.kept + 6);
        for (name, value) in self.fields.iter(self.kept) {
            let name = HeaderName::from_bytes(&head[name])
                .map_err(|_| HeadError::Bad("invalid header name"))?;
            // httparse checked the value's bytes (visible ASCII, obs-text,
            // SP and HTAB only); `http` checks them again.
            let value = HeaderValue::from_maybe_shared(head.slice(value))
                .map_err(|_| HeadError::Bad("invalid header value"))?;
            headers.append(name, value);
        }
        let mut parts = http::Request::new(()).into_parts().0;
        parts.method = self.method;
        parts.uri = uri;
        parts.version = if self.http11 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        };
        parts.headers = headers;
        Ok(Parsed {
            parts,
            framing,
            keep_alive,
            expect_continue: self.facts.expect_continue,
            trailers: self.facts.te_trailers,
        })
    }
}

/// What the fields say of the body and the connection, read in one pass
/// over them (no map lookups).
#[derive(Debug, Default)]
struct Facts {
    /// `Content-Length`, checked: every line one decimal number, all the
    /// same (a list such as `5, 5` is refused, as hyper did: RFC 9110
    /// section 8.6 allows either).
    length: Option<u64>,
    /// With `Transfer-Encoding`: whether its last coding is `chunked`.
    chunked_last: Option<bool>,
    expect_continue: bool,
    /// `TE: trailers`.
    te_trailers: bool,
    /// `Connection: close`, `Connection: keep-alive`.
    close: bool,
    keep_alive: bool,
}

impl Facts {
    fn read(&mut self, name: &str, value: &[u8]) -> Result<(), HeadError> {
        let tokens = || value.split(|&b| b == b',').map(<[u8]>::trim_ascii);
        if name.eq_ignore_ascii_case("content-length") {
            let n = content_length(value).ok_or(HeadError::Bad("invalid Content-Length"))?;
            if self.length.is_some_and(|l| l != n) {
                return Err(HeadError::Bad("Content-Length values that differ"));
            }
            self.length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = tokens().next_back().unwrap_or_default();
            let coding = last.split(|&b| b == b';').next().unwrap_or_default();
            self.chunked_last = Some(coding.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for t in tokens() {
                self.close |= t.eq_ignore_ascii_case(b"close");
                self.keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") && !self.expect_continue {
            self.expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        } else if name.eq_ignore_ascii_case("te") {
            self.te_trailers |= tokens().any(|t| t.eq_ignore_ascii_case(b"trailers"));
        }
        Ok(())
    }

    /// The body's framing (RFC 9112 section 6.3) and whether the
    /// connection may stay open after it. `Transfer-Encoding` wins over
    /// `Content-Length` (left out of the head, and the connection closes
    /// after the response: section 6.1); chunked must be the last coding;
    /// HTTP/1.0 has no transfer codings (a message carrying one is
    /// faulty: section 6.1); HTTP/1.1 stays open unless `close`, HTTP/1.0
    /// only with `keep-alive`.
    fn framing(&self, http11: bool) -> Result<(Framing, bool), HeadError> {
        let open = if http11 {
            !self.close
        } else {
            self.keep_alive && !self.close
        };
        match self.chunked_last {
            None => Ok((Framing::Length(self.length.unwrap_or(0)), open)),
            Some(_) if !http11 => Err(HeadError::Bad("Transfer-Encoding in an HTTP/1.0 request")),
            Some(false) => Err(HeadError::Bad(
                "Transfer-Encoding whose last coding is not chunked",
            )),
            Some(true) => Ok((Framing::Chunked, open && self.length.is_none())),
        }
    }
}

/// A `Content-Length` value: digits only, no sign, no overflow.
fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

fn bad(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token in the request line",
        httparse::Error::TooManyHeaders => "too many header fields",
        httparse::Error::Version => "invalid HTTP version",
    }
}
