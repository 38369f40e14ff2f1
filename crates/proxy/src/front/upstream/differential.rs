//! Differential test of the node side's HTTP/1 parser: generated and
//! mutated responses are read by rdmalb's client ([`NodeConn`]) and by
//! hyper's (the reference it replaced, still a dependency), each from a
//! raw node on loopback that writes the same bytes; both must accept or
//! refuse alike and, when they accept, see the same status and the same
//! body, or both find the body broken. Replay a failure with
//! `RDMALB_H1_DIFF_SEED`.

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::front::body::RequestBody;

/// What a client made of a response.
#[derive(PartialEq, Eq)]
enum Seen {
    /// No response: the head was refused or never came.
    Refused,
    /// A status and the body read, or `None` when the body broke.
    Answer(u16, Option<Vec<u8>>),
}

/// A node writing `answer` to the first connection, after its request
/// head, then closing.
impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Refused => write!(f, "refused"),
            Seen::Answer(status, None) => write!(f, "{status} with a broken body"),
            Seen::Answer(status, Some(b)) => write!(f, "{status} with {} body bytes", b.len()),
        }
    }
}

async fn raw_node(answer: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 2048];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        let _ = s.write_all(&answer).await;
        let _ = s.shutdown().await;
    });
    addr
}

async fn ours(answer: Vec<u8>, method: Method) -> Seen {
    let addr = raw_node(answer).await;
    let text = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n{}{}",
        crate::fixtures::site("web", &["web.test"]),
        crate::fixtures::node("n1", addr, "web")
    );
    let pool = std::sync::Arc::new(NodePool::new(addr, None, &crate::fixtures::config(&text)));
    let conn = NodeConn::new(TcpStream::connect(addr).await.unwrap());
    let head = Request::builder()
        .method(method)
        .uri("/")
        .header("host", "web.test")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let Ok(resp) = conn.send(&head, RequestBody::empty(), pool).await else {
        return Seen::Refused;
    };
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.ok();
    Seen::Answer(status, body.map(|b| b.to_bytes().to_vec()))
}

async fn hypers(answer: Vec<u8>, method: Method) -> Seen {
    let addr = raw_node(answer).await;
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(io).await else {
        return Seen::Refused;
    };
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri("/")
        .header("host", "web.test")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let Ok(resp) = send.send_request(req).await else {
        return Seen::Refused;
    };
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.ok();
    Seen::Answer(status, body.map(|b| b.to_bytes().to_vec()))
}

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.gen_range(0..items.len())]
}

fn token(rng: &mut StdRng, len: usize) -> String {
    (0..len)
        .map(|_| {
            *pick(
                rng,
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-",
            ) as char
        })
        .collect()
}

/// How the generated body is framed.
#[derive(Clone, Copy, Debug)]
enum Frame {
    Length,
    Chunked,
    Close,
    Both,
}

/// One response (possibly preceded by a `100`), framed one of the ways,
/// with at most one mutation of the kinds that smuggling and desync
/// attacks use.
fn generate(rng: &mut StdRng) -> (Vec<u8>, &'static str) {
    let version = if rng.gen_bool(0.85) {
        "HTTP/1.1"
    } else {
        "HTTP/1.0"
    };
    let status = *pick(rng, &[200u16, 200, 200, 201, 204, 301, 304, 404, 500, 503]);
    let body: Vec<u8> = (0..rng.gen_range(0..300))
        .map(|_| rng.gen_range(b' '..=b'~'))
        .collect();
    let framing = *pick(
        rng,
        &[
            Frame::Length,
            Frame::Length,
            Frame::Chunked,
            Frame::Chunked,
            Frame::Close,
            Frame::Both,
        ],
    );
    let mut fields: Vec<String> = (0..rng.gen_range(0..5))
        .map(|_| format!("X-{}: {}", token(rng, 6), token(rng, 10)))
        .collect();
    let mut payload = Vec::new();
    match framing {
        Frame::Length => {
            fields.push(format!(
                "{}: {}",
                pick(rng, &["Content-Length", "content-length", "CONTENT-LENGTH"]),
                body.len()
            ));
            payload.extend_from_slice(&body);
        }
        Frame::Chunked | Frame::Both => {
            fields.push(format!(
                "{}: {}",
                pick(rng, &["Transfer-Encoding", "transfer-encoding"]),
                pick(rng, &["chunked", "Chunked", "CHUNKED"])
            ));
            if matches!(framing, Frame::Both) {
                fields.push(format!("Content-Length: {}", rng.gen_range(0..50)));
            }
            for piece in body.chunks(rng.gen_range(1..100)) {
                let size = if rng.gen_bool(0.5) {
                    format!("{:x}", piece.len())
                } else {
                    format!("{:X}", piece.len())
                };
                let ext = if rng.gen_bool(0.2) { ";name=value" } else { "" };
                payload.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
                payload.extend_from_slice(piece);
                payload.extend_from_slice(b"\r\n");
            }
            payload.extend_from_slice(b"0\r\n");
            if rng.gen_bool(0.3) {
                payload.extend_from_slice(b"X-Trailer: t\r\n");
            }
            payload.extend_from_slice(b"\r\n");
        }
        Frame::Close => payload.extend_from_slice(&body),
    }
    let mutation = if rng.gen_bool(0.4) {
        *pick(
            rng,
            &[
                "dup-cl-same",
                "dup-cl-diff",
                "cl-junk",
                "cl-sign",
                "obs-fold",
                "bare-lf",
                "space-before-colon",
                "te-gzip-last",
                "bad-chunk",
                "truncate",
                "lf-only-head",
                "bad-status",
                "nul-in-value",
                "no-reason",
            ],
        )
    } else {
        "none"
    };
    let mut status_line = format!(
        "{version} {status} {}",
        if status == 200 { "OK" } else { "Status" }
    );
    match mutation {
        "dup-cl-same" => fields.push(format!("Content-Length: {}", body.len())),
        "dup-cl-diff" => fields.push(format!("Content-Length: {}", body.len() + 1)),
        "cl-junk" => fields.push("Content-Length: 12abc".into()),
        "cl-sign" => fields.push("Content-Length: +5".into()),
        "obs-fold" => fields.push("X-Folded: a\r\n b".into()),
        "space-before-colon" => fields.push("X-Space : b".into()),
        "te-gzip-last" => fields.push("Transfer-Encoding: gzip".into()),
        "nul-in-value" => fields.push("X-Nul: a\u{0}b".into()),
        "bad-status" => status_line = format!("{version} 2x0 OK"),
        "no-reason" => status_line = format!("{version} {status}"),
        _ => {}
    }
    let eol = if mutation == "lf-only-head" {
        "\n"
    } else {
        "\r\n"
    };
    let mut out = Vec::new();
    if rng.gen_bool(0.1) {
        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    out.extend_from_slice(status_line.as_bytes());
    out.extend_from_slice(eol.as_bytes());
    for f in &fields {
        out.extend_from_slice(f.as_bytes());
        out.extend_from_slice(eol.as_bytes());
    }
    if mutation == "bare-lf" {
        out.extend_from_slice(b"X-Bare: lf\n");
    }
    out.extend_from_slice(eol.as_bytes());
    match mutation {
        "bad-chunk" if matches!(framing, Frame::Chunked) => out.extend_from_slice(b"zz\r\n"),
        "truncate" if payload.len() > 2 => out.extend_from_slice(&payload[..payload.len() / 2]),
        _ => out.extend_from_slice(&payload),
    }
    (out, mutation)
}

/// Where rdmalb decides differently from hyper's client on purpose.
fn expected_difference(answer: &[u8], mutation: &str, ours: &Seen, hypers: &Seen) -> bool {
    let text = String::from_utf8_lossy(answer).to_ascii_lowercase();
    let both_framings = text.contains("transfer-encoding") && text.contains("content-length");
    match (ours, hypers) {
        // RFC 9112 section 6.3 (3): Transfer-Encoding overrides
        // Content-Length. hyper's client refuses the message; rdmalb
        // reads it as chunked and closes the connection after it (as
        // HAProxy does).
        (Seen::Answer(..), Seen::Refused) if both_framings => true,
        // `Content-Length: 2, 2` is one length (RFC 9110 section 8.6);
        // hyper refuses a list.
        (Seen::Answer(..), Seen::Refused) if mutation == "dup-cl-same" => true,
        _ => false,
    }
}

#[tokio::test]
async fn generated_responses_are_read_as_hypers_client_reads_them() {
    let seed = std::env::var("RDMALB_H1_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut problems = Vec::new();
    let (mut refused, mut answered) = (0, 0);
    for i in 0..400 {
        let (answer, mutation) = generate(&mut rng);
        let method = if rng.gen_bool(0.15) {
            Method::HEAD
        } else {
            Method::GET
        };
        let (a, b) = tokio::join!(
            ours(answer.clone(), method.clone()),
            hypers(answer.clone(), method.clone())
        );
        match &a {
            Seen::Refused => refused += 1,
            Seen::Answer(..) => answered += 1,
        }
        if a != b && !expected_difference(&answer, mutation, &a, &b) {
            problems.push(format!(
                "#{i} {method} ({mutation}): rdmalb {a:?}, hyper {b:?}\n    {:?}",
                String::from_utf8_lossy(&answer)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "seed {seed} (replay with RDMALB_H1_DIFF_SEED={seed}): {} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The generator reaches both sides of the line.
    assert!(
        refused > 10 && answered > 100,
        "{refused} refused, {answered} answered"
    );
}
