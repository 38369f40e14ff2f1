//! The node side of HTTP/1 against a raw node on loopback that answers
//! with exact bytes: framing per RFC 9112 section 6.3, what is refused,
//! and when a connection goes back to the pool.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::fixtures;
use crate::front::body::RequestBody;

/// A node that reads one request head (and `body` more bytes), answers
/// `answer`, then keeps the connection open (`close`: closes it). Returns
/// its address and what it read.
async fn node(
    answer: &'static [u8],
    body: usize,
    close: bool,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut b).await.unwrap();
            assert!(n > 0, "client closed before its head");
            got.extend_from_slice(&b[..n]);
        }
        let head = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        while got.len() < head + body {
            let n = s.read(&mut b).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&b[..n]);
        }
        s.write_all(answer).await.unwrap();
        if close {
            s.shutdown().await.unwrap();
        } else {
            // Held open until the client is done with it.
            let _ = s.read(&mut b).await;
        }
        got
    });
    (addr, task)
}

fn pool(addr: SocketAddr) -> Arc<NodePool> {
    let text = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n{}{}",
        fixtures::site("web", &["web.test"]),
        fixtures::node("n1", addr, "web")
    );
    Arc::new(NodePool::new(addr, None, &fixtures::config(&text)))
}

fn head(method: Method, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut r = Request::builder().method(method).uri("/x?y=1");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(()).unwrap().into_parts().0
}

/// Sends a bodyless `method` to a node answering `answer`: the response
/// head, its body (or the body's error) and the pool's idle count after.
async fn fetch(
    method: Method,
    answer: &'static [u8],
    close: bool,
) -> Result<
    (
        http::response::Parts,
        Result<(Bytes, Option<http::HeaderMap>), String>,
        usize,
    ),
    String,
> {
    let (addr, _node) = node(answer, 0, close).await;
    let pool = pool(addr);
    let conn = NodeConn::new(TcpStream::connect(addr).await.unwrap());
    let resp = conn
        .send(
            &head(method, &[("host", "web.test")]),
            RequestBody::empty(),
            Arc::clone(&pool),
        )
        .await
        .map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| {
            let trailers = c.trailers().cloned();
            (c.to_bytes(), trailers)
        })
        .map_err(|e| e.to_string());
    Ok((parts, body, pool.idle_count()))
}

#[tokio::test]
async fn a_content_length_body_is_read_and_the_connection_pooled() {
    let (p, body, idle) = fetch(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello",
        false,
    )
    .await
    .unwrap();
    assert_eq!(p.status, 200);
    assert_eq!(p.headers["x-a"], "1");
    assert_eq!(body.unwrap().0, "hello");
    assert_eq!(
        idle, 1,
        "a complete keep-alive response returns its connection"
    );
}

#[tokio::test]
async fn a_chunked_body_is_decoded_with_extensions_and_trailers() {
    let (p, body, idle) = fetch(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n",
        false,
    )
    .await
    .unwrap();
    assert_eq!(p.status, 200);
    let (bytes, trailers) = body.unwrap();
    assert_eq!(bytes, "hello world");
    assert_eq!(trailers.unwrap()["x-sum"], "42");
    assert_eq!(idle, 1);
}

#[tokio::test]
async fn transfer_encoding_wins_over_content_length_and_the_connection_closes() {
    let (p, body, idle) = fetch(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        false,
    )
    .await
    .unwrap();
    assert!(!p.headers.contains_key("content-length"));
    assert_eq!(body.unwrap().0, "abc");
    assert_eq!(idle, 0, "a message framed both ways is not trusted twice");
}

#[tokio::test]
async fn a_body_without_length_runs_until_the_node_closes() {
    let (_, body, idle) = fetch(Method::GET, b"HTTP/1.1 200 OK\r\n\r\nuntil the end", true)
        .await
        .unwrap();
    assert_eq!(body.unwrap().0, "until the end");
    assert_eq!(idle, 0);
}

#[tokio::test]
async fn head_204_and_304_have_no_body() {
    for (method, answer) in [
        (
            Method::HEAD,
            &b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"[..],
        ),
        (Method::GET, b"HTTP/1.1 204 No Content\r\n\r\n"),
        (
            Method::GET,
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
        ),
    ] {
        let (_, body, idle) = fetch(method, answer, false).await.unwrap();
        assert_eq!(body.unwrap().0, "");
        assert_eq!(idle, 1, "{answer:?}");
    }
}

#[tokio::test]
async fn interim_responses_are_dropped_and_a_custom_reason_kept() {
    let (p, body, _) = fetch(
        Method::GET,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 Fine Thanks\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await
    .unwrap();
    assert_eq!(p.status, 200);
    assert!(!p.headers.contains_key("link"));
    let reason = p.extensions.get::<hyper::ext::ReasonPhrase>().unwrap();
    assert_eq!(reason.as_bytes(), b"Fine Thanks");
    assert_eq!(body.unwrap().0, "ok");
}

#[tokio::test]
async fn http_1_0_and_connection_close_are_not_reused() {
    for answer in [
        &b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
    ] {
        let (_, body, idle) = fetch(Method::GET, answer, false).await.unwrap();
        assert_eq!(body.unwrap().0, "ok");
        assert_eq!(idle, 0, "{answer:?}");
    }
    let (_, _, idle) = fetch(
        Method::GET,
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await
    .unwrap();
    assert_eq!(idle, 1);
}

#[tokio::test]
async fn broken_heads_are_refused_with_a_reason() {
    let cases: [(&'static [u8], &str); 6] = [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
            "conflicting Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "bad Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
            "conflicting Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n",
            "not HTTP/1.x",
        ),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not HTTP/1.x"),
        (
            b"HTTP/1.1 200 OK\r\nX-A: 1\r\n",
            "in the middle of its response head",
        ),
    ];
    for (answer, want) in cases {
        let err = fetch(Method::GET, answer, true)
            .await
            .err()
            .unwrap_or_default();
        assert!(err.contains(want), "{answer:?}: {err}");
    }
    // Repeated identical lengths are one length (RFC 9110 section 8.6).
    let (_, body, _) = fetch(
        Method::GET,
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await
    .unwrap();
    assert_eq!(body.unwrap().0, "ok");
}

#[tokio::test]
async fn a_node_that_closes_without_answering_broke_before_its_response() {
    let err = match fetch(Method::GET, b"", true).await {
        Err(e) => e,
        Ok(_) => panic!("no answer is not a response"),
    };
    assert!(err.contains("without answering"), "{err}");
    assert!(NodeError::Closed.broke_before_response());
    assert!(!NodeError::Parse(httparse::Error::Status).broke_before_response());
}

#[tokio::test]
async fn broken_bodies_fail_and_close() {
    for (answer, want) in [
        (
            &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
            "before the end",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "bad chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
            "longer than its size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n0\r\n\r\n",
            "without CRLF",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n",
            "bad chunk size",
        ),
    ] {
        let (_, body, idle) = fetch(Method::GET, answer, true).await.unwrap();
        let err = body.err().unwrap_or_default();
        assert!(err.contains(want), "{answer:?}: {err}");
        assert_eq!(idle, 0);
    }
}

#[tokio::test]
async fn a_head_larger_than_the_limit_is_refused() {
    static BIG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let big = BIG.get_or_init(|| {
        let mut v = b"HTTP/1.1 200 OK\r\n".to_vec();
        while v.len() <= UPSTREAM_MAX_BUF {
            v.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        v
    });
    let err = fetch(Method::GET, big, true)
        .await
        .err()
        .unwrap_or_default();
    assert!(
        err.contains("larger than") || err.contains("not HTTP/1.x"),
        "{err}"
    );
}

#[tokio::test]
async fn the_request_goes_out_in_origin_form_with_its_body_framed() {
    let (addr, node) = node(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, false).await;
    let conn = NodeConn::new(TcpStream::connect(addr).await.unwrap());
    let h = head(Method::GET, &[("host", "web.test"), ("x-b", "2")]);
    let resp = conn
        .send(&h, RequestBody::empty(), pool(addr))
        .await
        .unwrap();
    drop(resp);
    let got = node.await.unwrap();
    assert_eq!(
        String::from_utf8(got).unwrap(),
        "GET /x?y=1 HTTP/1.1\r\nhost: web.test\r\nx-b: 2\r\n\r\n"
    );
    let mut out = Vec::new();
    h1::encode_head(&head(Method::OPTIONS, &[]), &mut out);
    assert!(out.starts_with(b"OPTIONS /x?y=1 HTTP/1.1\r\n"));
}

#[tokio::test]
async fn a_stale_pooled_connection_is_seen_before_use() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let client = TcpStream::connect(addr).await.unwrap();
    let (server, _) = l.accept().await.unwrap();
    let conn = NodeConn::new(client);
    assert!(conn.is_alive());
    drop(server);
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while conn.is_alive() {
        assert!(Instant::now() < deadline, "a closed connection stays alive");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
