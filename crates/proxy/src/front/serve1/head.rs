//! A client's HTTP/1.x request head, parsed with `httparse` straight from
//! the connection's read buffer: the fields are slices of the head's bytes
//! (no copy), and the framing of the body follows RFC 9112 section 6.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
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

/// Where a parsed head's parts lie in its bytes, before they are taken
/// out of the buffer.
struct Raw {
    method: Method,
    http11: bool,
    target: Range<usize>,
    /// Name and value of each field kept.
    fields: Vec<(Range<usize>, Range<usize>)>,
    /// The `Content-Length`, checked.
    length: Option<u64>,
}

impl Raw {
    /// The request line's parts and the fields of `req`, whose slices
    /// start at `base`. The lengths are checked here, and with
    /// `Transfer-Encoding` they are left out (RFC 9112 section 6.1).
    fn of(req: &httparse::Request<'_, '_>, base: usize) -> Result<Raw, HeadError> {
        let at = |s: &[u8]| s.as_ptr() as usize - base..s.as_ptr() as usize - base + s.len();
        let target = req.path.unwrap_or_default();
        if target.len() > MAX_URI_LEN {
            return Err(HeadError::UriTooLong);
        }
        let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
            .map_err(|_| HeadError::Bad("invalid method"))?;
        let mut length = None;
        let mut chunked = false;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let n = content_length(h.value).ok_or(HeadError::Bad("invalid Content-Length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(HeadError::Bad("Content-Length values that differ"));
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = true;
            }
        }
        let fields = req
            .headers
            .iter()
            .filter(|h| !(chunked && h.name.eq_ignore_ascii_case("content-length")))
            .map(|h| (at(h.name.as_bytes()), at(h.value)))
            .collect();
        Ok(Raw {
            method,
            http11: req.version == Some(1),
            target: at(target.as_bytes()),
            fields,
            length,
        })
    }

    /// The request's parts over `head`, the head's bytes (shared, not
    /// copied), and what its fields say of the body and the connection.
    fn build(self, head: Bytes) -> Result<Parsed, HeadError> {
        let uri = Uri::from_maybe_shared(head.slice(self.target))
            .map_err(|_| HeadError::Bad("invalid request target"))?;
        let mut headers = HeaderMap::with_capacity(self.fields.len());
        for (name, value) in self.fields {
            let name = HeaderName::from_bytes(&head[name])
                .map_err(|_| HeadError::Bad("invalid header name"))?;
            // httparse checked the value's bytes (visible ASCII, obs-text,
            // SP and HTAB only); `http` checks them again.
            let value = HeaderValue::from_maybe_shared(head.slice(value))
                .map_err(|_| HeadError::Bad("invalid header value"))?;
            headers.append(name, value);
        }
        let version = if self.http11 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        };
        let (framing, keep_alive) = framing(&headers, self.http11, self.length)?;
        let keep_alive = keep_alive && !super::super::headers::closes_after(version, &headers);
        let expect_continue = headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let trailers = headers.get_all(header::TE).iter().any(|v| {
            v.as_bytes()
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"))
        });
        let mut parts = http::Request::new(()).into_parts().0;
        parts.method = self.method;
        parts.uri = uri;
        parts.version = version;
        parts.headers = headers;
        Ok(Parsed {
            parts,
            framing,
            keep_alive,
            expect_continue,
            trailers,
        })
    }
}

/// The body's framing (RFC 9112 section 6.3) and whether the connection
/// may stay open for it. `length` is the requests's `Content-Length`,
/// already checked: every line one decimal number, all the same (a list
/// such as `5, 5` is refused, as hyper did: RFC 9110 section 8.6 allows
/// either). `Transfer-Encoding` wins over `Content-Length` (left out of
/// the head, and the connection closes after the response: RFC 9112
/// section 6.1); chunked must be the last coding; HTTP/1.0 has no
/// transfer codings (a message carrying one is faulty: section 6.1).
fn framing(
    headers: &HeaderMap,
    http11: bool,
    length: Option<u64>,
) -> Result<(Framing, bool), HeadError> {
    let mut codings = headers.get_all(header::TRANSFER_ENCODING).iter().peekable();
    if codings.peek().is_none() {
        return Ok((Framing::Length(length.unwrap_or(0)), true));
    }
    if !http11 {
        return Err(HeadError::Bad("Transfer-Encoding in an HTTP/1.0 request"));
    }
    let chunked_last = codings.next_back().is_some_and(|v| {
        v.as_bytes()
            .rsplit(|&b| b == b',')
            .next()
            .map(|c| c.split(|&b| b == b';').next().unwrap_or(&[]))
            .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
    });
    if !chunked_last {
        return Err(HeadError::Bad(
            "Transfer-Encoding whose last coding is not chunked",
        ));
    }
    Ok((Framing::Chunked, length.is_none()))
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
