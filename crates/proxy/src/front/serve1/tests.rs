//! The HTTP/1 server's pure parts: the head parser's framing decisions
//! (RFC 9112 section 6), the body decoder, and the response framing
//! (what hyper's server wrote, case by case).

use bytes::BytesMut;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Version};

use super::head::{self, Framing, HeadError};
use super::recv::Step;
use super::send::{self, Asked, BodyLen, Encoding};

/// A head's framing and whether the connection stays open, or why not.
type Outcome = Result<(Framing, bool), HeadError>;

/// An encoded head, its encoding and whether the connection ends.
type Encoded = (String, Encoding, bool);

fn parse(raw: &str) -> Result<Option<head::Parsed>, HeadError> {
    head::parse(&mut BytesMut::from(raw.as_bytes()), 100, 8192)
}

#[test]
fn framing_follows_rfc_9112_section_6() {
    let cases: &[(&str, Outcome)] = &[
        (
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            Ok((Framing::Length(0), true)),
        ),
        (
            "GET / HTTP/1.0\r\nHost: a\r\n\r\n",
            Ok((Framing::Length(0), false)),
        ),
        (
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            Ok((Framing::Length(0), true)),
        ),
        (
            "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
            Ok((Framing::Length(0), false)),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
            Ok((Framing::Length(5), true)),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            Ok((Framing::Length(5), true)),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
            Err(HeadError::Bad("invalid Content-Length")),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            Err(HeadError::Bad("Content-Length values that differ")),
        ),
        (
            "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            Err(HeadError::Bad("invalid Content-Length")),
        ),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            Ok((Framing::Chunked, true)),
        ),
        // Transfer-Encoding wins; the connection closes after (6.1).
        (
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            Ok((Framing::Chunked, false)),
        ),
        (
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            Err(HeadError::Bad(
                "Transfer-Encoding whose last coding is not chunked",
            )),
        ),
        (
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            Err(HeadError::Bad("Transfer-Encoding in an HTTP/1.0 request")),
        ),
        (
            "GET / HTTP/1.1\r\nX-Folded: a\r\n b\r\n\r\n",
            Err(HeadError::Bad("invalid header name")),
        ),
        (
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            Err(HeadError::H2Preface),
        ),
    ];
    for (raw, want) in cases {
        let got = parse(raw).map(|p| {
            let p = p.expect("a complete head");
            (p.framing, p.keep_alive)
        });
        assert_eq!(&got, want, "{raw:?}");
    }
}

#[test]
fn partial_heads_wait_and_oversized_ones_are_refused() {
    assert!(parse("GET / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
    assert!(parse("PR").unwrap().is_none());
    let big = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n", "a".repeat(9000));
    assert_eq!(parse(&big).unwrap_err(), HeadError::TooLarge);
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let raw = format!("GET / HTTP/1.1\r\n{many}\r\n");
    assert_eq!(parse(&raw).unwrap_err(), HeadError::TooLarge);
}

#[test]
fn a_parsed_head_leaves_the_next_request_in_the_buffer() {
    let mut buf = BytesMut::from(&b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n"[..]);
    let first = head::parse(&mut buf, 100, 8192).unwrap().unwrap();
    assert_eq!(first.parts.uri, "/a");
    assert_eq!(first.parts.headers["host"], "x");
    assert_eq!(&buf[..], b"GET /b HTTP/1.1\r\n");
}

fn decode(
    framing: Framing,
    wire: &[u8],
) -> Result<(Vec<u8>, Option<HeaderMap>, bool), &'static str> {
    let mut d = framing.decoder();
    let mut buf = BytesMut::from(wire);
    let (mut body, mut trailers) = (Vec::new(), None);
    loop {
        match d.step(&mut buf)? {
            Step::Frame(f) => match f.into_data() {
                Ok(b) => body.extend_from_slice(&b),
                Err(f) => trailers = f.into_trailers().ok(),
            },
            Step::End => return Ok((body, trailers, true)),
            Step::Read => return Ok((body, trailers, false)),
        }
    }
}

#[test]
fn chunked_bodies_decode_with_extensions_and_trailers() {
    let (body, trailers, done) = decode(
        Framing::Chunked,
        b"3;name=value\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n",
    )
    .unwrap();
    assert_eq!((body.as_slice(), done), (&b"abcde"[..], true));
    assert_eq!(trailers.unwrap()["x-sum"], "5");
    assert_eq!(
        decode(Framing::Chunked, b"3\r\nabcd\r\n0\r\n\r\n").unwrap_err(),
        "chunk data longer than its size"
    );
    assert_eq!(
        decode(Framing::Chunked, b"3\nabc\r\n").unwrap_err(),
        "chunk-size line without CRLF"
    );
    assert_eq!(
        decode(Framing::Chunked, b"zz\r\n").unwrap_err(),
        "bad chunk size"
    );
    let (body, _, done) = decode(Framing::Length(4), b"abcdef").unwrap();
    assert_eq!((body.as_slice(), done), (&b"abcd"[..], true));
    let (body, _, done) = decode(Framing::Length(4), b"ab").unwrap();
    assert_eq!((body.as_slice(), done), (&b"ab"[..], false));
}

fn encode(
    status: u16,
    headers: &[(&'static str, &'static str)],
    len: BodyLen,
    method: Method,
    version: Version,
) -> Encoded {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(*k, HeaderValue::from_static(v));
    }
    h.insert("date", HeaderValue::from_static("D"));
    let keep_alive = version == Version::HTTP_11;
    let mut out = Vec::new();
    let head = send::encode(
        StatusCode::from_u16(status).unwrap(),
        Version::HTTP_11,
        &mut h,
        len,
        Asked {
            method: &method,
            version,
            keep_alive,
            trailers: false,
        },
        &mut out,
    );
    (String::from_utf8(out).unwrap(), head.encoding, head.last)
}

/// A response to an HTTP/1.1 request that asked for the connection to
/// close.
fn encode_closing(status: u16, len: BodyLen) -> Encoded {
    let mut h = HeaderMap::new();
    h.insert("date", HeaderValue::from_static("D"));
    let mut out = Vec::new();
    let head = send::encode(
        StatusCode::from_u16(status).unwrap(),
        Version::HTTP_11,
        &mut h,
        len,
        Asked {
            method: &Method::GET,
            version: Version::HTTP_11,
            keep_alive: false,
            trailers: false,
        },
        &mut out,
    );
    (String::from_utf8(out).unwrap(), head.encoding, head.last)
}

#[test]
fn response_framing_is_what_hypers_server_wrote() {
    use BodyLen::*;
    let get = || Method::GET;
    let v11 = Version::HTTP_11;
    let cases: Vec<(Encoded, &str, Encoding, bool)> = vec![
        (
            encode(200, &[], Known(5), get(), v11),
            "HTTP/1.1 200 OK\r\ndate: D\r\ncontent-length: 5\r\n\r\n",
            Encoding::Length(5),
            false,
        ),
        (
            encode(200, &[], Unknown, get(), v11),
            "HTTP/1.1 200 OK\r\ndate: D\r\ntransfer-encoding: chunked\r\n\r\n",
            Encoding::Chunked,
            false,
        ),
        (
            encode(200, &[], Unknown, get(), Version::HTTP_10),
            "HTTP/1.0 200 OK\r\ndate: D\r\n\r\n",
            Encoding::Close,
            true,
        ),
        (
            encode(200, &[("content-length", "9")], Empty, Method::HEAD, v11),
            "HTTP/1.1 200 OK\r\ncontent-length: 9\r\ndate: D\r\n\r\n",
            Encoding::Length(0),
            false,
        ),
        (
            encode(204, &[], Empty, get(), v11),
            "HTTP/1.1 204 No Content\r\ndate: D\r\n\r\n",
            Encoding::Length(0),
            false,
        ),
        (
            encode(404, &[], Empty, get(), v11),
            "HTTP/1.1 404 Not Found\r\ndate: D\r\ncontent-length: 0\r\n\r\n",
            Encoding::Length(0),
            false,
        ),
        (
            encode(200, &[("connection", "close")], Known(0), get(), v11),
            "HTTP/1.1 200 OK\r\nconnection: close\r\ndate: D\r\ncontent-length: 0\r\n\r\n",
            Encoding::Length(0),
            true,
        ),
        (
            encode_closing(200, Known(2)),
            "HTTP/1.1 200 OK\r\ndate: D\r\nconnection: close\r\ncontent-length: 2\r\n\r\n",
            Encoding::Length(2),
            true,
        ),
        (
            encode(101, &[("upgrade", "websocket")], Empty, get(), v11),
            "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\ndate: D\r\n\r\n",
            Encoding::Length(0),
            true,
        ),
    ];
    for (got, head, encoding, last) in cases {
        assert_eq!(got, (head.to_string(), encoding, last));
    }
}

#[test]
fn an_http10_client_kept_alive_is_told_so() {
    let mut h = HeaderMap::new();
    let mut out = Vec::new();
    let head = send::encode(
        StatusCode::OK,
        Version::HTTP_11,
        &mut h,
        BodyLen::Known(2),
        Asked {
            method: &Method::GET,
            version: Version::HTTP_10,
            keep_alive: true,
            trailers: false,
        },
        &mut out,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n"),
        "{text}"
    );
    assert!(!head.last);
}

#[test]
fn chunk_lines_and_numbers() {
    let mut out = Vec::new();
    send::chunk_line(0x1a2b, &mut out);
    send::push_u64(&mut out, 1234567890);
    assert_eq!(out, b"1a2b\r\n1234567890");
}

/// The connection's timer moves only to fire earlier; a wait whose
/// deadline is later sees the early fire as not due and arms it again, so
/// no wait ends before its deadline.
#[tokio::test]
async fn the_connection_timer_fires_no_later_and_no_wait_ends_early() {
    use std::time::{Duration, Instant};
    let ms = Duration::from_millis;
    let start = Instant::now();
    let timer = tokio::time::sleep_until((start + ms(100)).into());
    tokio::pin!(timer);
    let at = |d: Duration| tokio::time::Instant::from_std(start + d);
    // Later: left where it is (it fires first, the wait re-arms it).
    super::arm(timer.as_mut(), start + ms(600));
    assert_eq!(timer.deadline(), at(ms(100)));
    // Earlier: moved.
    super::arm(timer.as_mut(), start + ms(50));
    assert_eq!(timer.deadline(), at(ms(50)));
    // A wait until 300 ms on it ends then, not at the 50 ms it fires first.
    let deadline = start + ms(300);
    let mut fires = 0;
    loop {
        super::arm(timer.as_mut(), deadline);
        timer.as_mut().await;
        fires += 1;
        if super::due(deadline) {
            break;
        }
    }
    // Early once, then at the deadline (once only, on a machine so slow
    // that 300 ms passed before the wait); more would be a timer left
    // elapsed, spinning.
    assert!((1..=2).contains(&fires), "{fires} fires");
    assert!(Instant::now() >= deadline);
    // Once fired, a later deadline re-arms it.
    super::arm(timer.as_mut(), deadline + ms(100));
    assert!(!timer.is_elapsed());
    assert_eq!(timer.deadline(), at(ms(400)));
}
