//! A client's HTTP/1.x request head, parsed with `httparse` straight from
//! the connection's read buffer: the fields are slices of the head's bytes
//! (no copy), and the framing of the body follows RFC 9112 section 6.

use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, Version};

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
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    if target.len() > MAX_URI_LEN {
        return Err(HeadError::UriTooLong);
    }
    let method =
        Method::from_bytes(method.as_bytes()).map_err(|_| HeadError::Bad("invalid method"))?;
    let http11 = req.version == Some(1);
    let base = buf.as_ptr() as usize;
    let target_at = target.as_ptr() as usize - base..target.as_ptr() as usize - base + target.len();
    let mut at = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = h.name.as_ptr() as usize - base;
        let value = h.value.as_ptr() as usize - base;
        at.push((name..name + h.name.len(), value..value + h.value.len()));
    }
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target_at))
        .map_err(|_| HeadError::Bad("invalid request target"))?;
    let mut headers = HeaderMap::with_capacity(at.len());
    for (name, value) in at {
        let name = HeaderName::from_bytes(&head[name])
            .map_err(|_| HeadError::Bad("invalid header name"))?;
        // httparse checked the value's bytes (visible ASCII, obs-text, SP
        // and HTAB only); `http` checks them again.
        let value = HeaderValue::from_maybe_shared(head.slice(value))
            .map_err(|_| HeadError::Bad("invalid header value"))?;
        headers.append(name, value);
    }
    let (framing, mut keep_alive) = framing(&mut headers, http11)?;
    let expect_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let trailers = headers.get_all(header::TE).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"))
    });
    if super::super::headers::closes_after(
        if http11 {
            Version::HTTP_11
        } else {
            Version::HTTP_10
        },
        &headers,
    ) {
        keep_alive = false;
    }
    let mut parts = http::Request::new(()).into_parts().0;
    parts.method = method;
    parts.uri = uri;
    parts.version = if http11 {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    parts.headers = headers;
    Ok(Some(Parsed {
        parts,
        framing,
        keep_alive,
        expect_continue,
        trailers,
    }))
}

/// The body's framing (RFC 9112 section 6.3) and whether the connection
/// may stay open for it: `Transfer-Encoding` wins over `Content-Length`
/// (which is then removed, and the connection closes after the response:
/// section 6.1); chunked must be the last coding; HTTP/1.0 has no
/// transfer codings (a message carrying one is faulty: section 6.1);
/// several `Content-Length`s must agree.
fn framing(headers: &mut HeaderMap, http11: bool) -> Result<(Framing, bool), HeadError> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if !http11 {
            return Err(HeadError::Bad("Transfer-Encoding in an HTTP/1.0 request"));
        }
        let last = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .next_back()
            .map(|v| v.as_bytes());
        let chunked_last = last.is_some_and(|v| {
            v.rsplit(|&b| b == b',')
                .next()
                .map(|c| c.split(|&b| b == b';').next().unwrap_or(&[]))
                .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
        });
        if !chunked_last {
            return Err(HeadError::Bad(
                "Transfer-Encoding whose last coding is not chunked",
            ));
        }
        let had_length = headers.remove(header::CONTENT_LENGTH).is_some();
        return Ok((Framing::Chunked, !had_length));
    }
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        for part in v.as_bytes().split(|&b| b == b',') {
            let n = content_length(part.trim_ascii()).ok_or(HeadError::Bad("invalid Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::Bad("Content-Length values that differ"));
            }
            length = Some(n);
        }
    }
    Ok((Framing::Length(length.unwrap_or(0)), true))
}

/// A `Content-Length` value: digits only, no sign, no overflow.
fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n * 10 + u64::from(b - b'0'))
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
