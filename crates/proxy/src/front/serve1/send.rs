//! The response head as an HTTP/1 client gets it, and the framing of its
//! body: what hyper's server wrote, decided here (RFC 9112 section 6.3,
//! RFC 9110 sections 6.4.1 and 9.3.6): a length the body knows becomes
//! `Content-Length`, an unknown one is chunked for HTTP/1.1 and
//! close-delimited for HTTP/1.0; HEAD, 1xx, 204, 304 and a 2xx to CONNECT
//! carry no body; an HTTP/1.0 client kept alive is told so; `Date` is
//! added when the node gave none.

use std::cell::RefCell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Version};

/// How the body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Exactly this many bytes (0: no body).
    Length(u64),
    Chunked,
    /// Until the connection closes.
    Close,
}

/// The response head's bytes, and how its body is written.
pub struct Head {
    pub encoding: Encoding,
    /// The connection ends after this response.
    pub last: bool,
    /// The trailer fields the client may be sent (chunked only).
    pub trailers: Option<Vec<HeaderName>>,
}

/// What of the request decides the response's framing.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub method: &'a Method,
    pub version: Version,
    pub keep_alive: bool,
    /// The request said `TE: trailers`.
    pub trailers: bool,
}

fn can_have_body(method: &Method, status: StatusCode) -> bool {
    !(method == Method::HEAD
        || method == Method::CONNECT && status.is_success()
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

fn can_have_length(method: &Method, status: StatusCode) -> bool {
    !(status.is_informational()
        || method == Method::CONNECT && status.is_success()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

/// What the response's body knows of its length (hyper's view of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLen {
    /// Ended before it started.
    Empty,
    Known(u64),
    Unknown,
}

/// Writes the head of `status`/`headers` (the response's `version`) into
/// `out`, for a body of `len`.
pub fn encode(
    status: StatusCode,
    version: Version,
    headers: &mut HeaderMap,
    len: BodyLen,
    asked: Asked<'_>,
    out: &mut Vec<u8>,
) -> Head {
    let last = keep_alive_fix(headers, status, version, asked);
    let http10 = asked.version == Version::HTTP_10 || version == Version::HTTP_10;
    status_line(status, http10, out);
    let chunk_ok = !http10 && can_have_body(asked.method, status);
    let written = fields(headers, len, asked.method, chunk_ok, out);
    let mut encoding = match written.encoding {
        Some(e) => e,
        None => implied(len, chunk_ok, asked.method, status, out),
    };
    if !can_have_body(asked.method, status) {
        encoding = Encoding::Length(0);
    }
    if !written.date {
        out.extend_from_slice(b"date: ");
        now_date(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Head {
        encoding,
        last: last || written.close || encoding == Encoding::Close,
        trailers: if asked.trailers && encoding == Encoding::Chunked {
            written.trailers
        } else {
            None
        },
    }
}

/// Whether the connection ends after the response, as the request and
/// the status say. An HTTP/1.1 client whose connection ends is told so
/// with `Connection: close`; an HTTP/1.0 client kept alive is told so with
/// `Connection: keep-alive` (it assumes a close otherwise), and one
/// answered in HTTP/1.0 without it is closed.
fn keep_alive_fix(
    headers: &mut HeaderMap,
    status: StatusCode,
    version: Version,
    asked: Asked<'_>,
) -> bool {
    let mut last = !asked.keep_alive || status == StatusCode::SWITCHING_PROTOCOLS;
    if asked.version == Version::HTTP_11 && !asked.keep_alive {
        // The client learns that the connection ends after this response
        // (RFC 9112 section 9.6), as hyper's server told it.
        if !headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| has_token(v, b"close"))
        {
            headers.append(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    if asked.version == Version::HTTP_10
        && !headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| has_token(v, b"keep-alive"))
    {
        if version == Version::HTTP_10 {
            last = true;
        } else if !last {
            headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        }
    }
    last
}

fn status_line(status: StatusCode, http10: bool, out: &mut Vec<u8>) {
    if !http10 && status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        return;
    }
    out.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// What writing the fields decided.
struct Written {
    /// From a `Content-Length` or `Transfer-Encoding` field.
    encoding: Option<Encoding>,
    trailers: Option<Vec<HeaderName>>,
    date: bool,
    /// `Connection: close`.
    close: bool,
}

/// Writes the fields; the framing ones once, as the body allows.
fn fields(
    headers: &HeaderMap,
    len: BodyLen,
    method: &Method,
    chunk_ok: bool,
    out: &mut Vec<u8>,
) -> Written {
    let mut w = Written {
        encoding: None,
        trailers: None,
        date: false,
        close: false,
    };
    for (name, value) in headers.iter() {
        match *name {
            header::CONTENT_LENGTH => {
                if w.encoding.is_some() {
                    continue;
                }
                w.encoding = Some(match len {
                    BodyLen::Known(n) => Encoding::Length(n),
                    BodyLen::Unknown => match parse_length(value.as_bytes()) {
                        Some(n) => Encoding::Length(n),
                        None => continue,
                    },
                    BodyLen::Empty if method == Method::HEAD => Encoding::Length(0),
                    BodyLen::Empty => continue,
                });
            }
            header::TRANSFER_ENCODING => {
                if !chunk_ok || len == BodyLen::Empty || w.encoding.is_some() {
                    continue;
                }
                w.encoding = Some(Encoding::Chunked);
                field(out, name, value);
                if !has_token(value, b"chunked") {
                    out.truncate(out.len() - 2);
                    out.extend_from_slice(b", chunked\r\n");
                }
                continue;
            }
            header::CONNECTION if has_token(value, b"close") => w.close = true,
            header::TRAILER => {
                if !chunk_ok {
                    continue;
                }
                if let Ok(s) = value.to_str() {
                    w.trailers.get_or_insert_with(Vec::new).extend(
                        s.split(',')
                            .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok()),
                    );
                }
            }
            header::DATE => w.date = true,
            _ => {}
        }
        field(out, name, value);
    }
    w
}

/// The framing when no field gave it, and its field.
fn implied(
    len: BodyLen,
    chunk_ok: bool,
    method: &Method,
    status: StatusCode,
    out: &mut Vec<u8>,
) -> Encoding {
    match len {
        BodyLen::Unknown if chunk_ok => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            Encoding::Chunked
        }
        BodyLen::Unknown => Encoding::Close,
        BodyLen::Empty | BodyLen::Known(0) => {
            if can_have_length(method, status) && method != Method::HEAD {
                out.extend_from_slice(b"content-length: 0\r\n");
            }
            Encoding::Length(0)
        }
        BodyLen::Known(n) if can_have_length(method, status) => {
            out.extend_from_slice(b"content-length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
            Encoding::Length(n)
        }
        BodyLen::Known(_) => Encoding::Length(0),
    }
}

fn field(out: &mut Vec<u8>, name: &HeaderName, value: &HeaderValue) {
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn has_token(v: &HeaderValue, token: &[u8]) -> bool {
    v.as_bytes()
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

thread_local! {
    /// The IMF-fixdate of the current second, made once a second.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Appends the current `Date` value.
pub fn now_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let s = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            if s.len() == 29 {
                d.1.copy_from_slice(s.as_bytes());
                d.0 = secs;
            } else {
                out.extend_from_slice(s.as_bytes());
                return;
            }
        }
        out.extend_from_slice(&d.1);
    });
}

/// Appends trailer fields (those `allowed` names) and the chunked end.
pub fn encode_trailers(trailers: &HeaderMap, allowed: &[HeaderName], out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers.iter() {
        if allowed.iter().any(|a| a == name) {
            field(out, name, value);
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The line that opens a chunk of `n` bytes.
pub fn chunk_line(n: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = HEX[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}
