//! Large bodies stream through the proxy in both directions without being
//! buffered: the proxy's peak resident memory grows by far less than the
//! 64 MiB that crosses it (a size check from /proc, not a timing one).
//! Request bodies around the response: `Expect: 100-continue`, and a node
//! that answers before it has read the body.

use crate::support::*;

const SIZE: u64 = 64 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways_without_buffering() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\nworkers = 2\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let proxy = Proxy::start(&config, &[addr]);
    let c = client();
    // Warm up (allocator arenas, pools) before taking the baseline.
    for _ in 0..3 {
        let r = c
            .get(format!("http://{addr}/download/100000"))
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        r.bytes().await.unwrap();
    }
    let (rss_before, _) = proxy.memory_kib();
    assert!(rss_before > 0, "cannot read /proc/{}/status", proxy.pid());

    // Download: the node generates 64 MiB; count it as it arrives.
    let mut resp = c
        .get(format!("http://{addr}/download/{SIZE}"))
        .header("host", "www.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut got: u64 = 0;
    while let Some(chunk) = resp.chunk().await.unwrap() {
        got += chunk.len() as u64;
    }
    assert_eq!(got, SIZE);

    // Upload: 64 MiB generated on the fly by the client.
    let chunk = bytes::Bytes::from(vec![b'u'; 256 * 1024]);
    let n = (SIZE / chunk.len() as u64) as usize;
    let stream =
        futures_util::stream::iter((0..n).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let resp = c
        .post(format!("http://{addr}/upload"))
        .header("host", "www.example.com")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.text().await.unwrap(), format!("received {SIZE}"));

    let (_, peak) = proxy.memory_kib();
    let growth_mib = peak.saturating_sub(rss_before) / 1024;
    eprintln!("proxy RSS before {rss_before} KiB, peak after {peak} KiB");
    assert!(
        growth_mib < 24,
        "peak RSS grew by {growth_mib} MiB while moving 2 x 64 MiB: bodies are being buffered (before {rss_before} KiB, peak {peak} KiB)"
    );
}

/// A proxy for site www.example.com in front of `www` (one worker).
fn www_proxy(www: &Backend) -> (Proxy, std::net::SocketAddr) {
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let proxy = Proxy::start(&config, &[addr]);
    (proxy, addr)
}

/// Reads from `s` until `buf` holds `needle`, or the peer closes, or 20 s.
async fn read_to(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>, needle: &[u8]) {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 4096];
    while !buf.windows(needle.len()).any(|w| w == needle) {
        match tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_gets_its_interim_answer_and_the_body_reaches_the_node() {
    use tokio::io::AsyncWriteExt;
    let www = Backend::start("www").await;
    let (_proxy, addr) = www_proxy(&www);
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: www.example.com\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    read_to(&mut s, &mut got, b"\r\n\r\n").await;
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 100 Continue\r\n"),
        "no 100 Continue before the body: {text:?}"
    );
    s.write_all(b"hello").await.unwrap();
    got.clear();
    read_to(&mut s, &mut got, b"received 5").await;
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 200 ") && text.ends_with("received 5"),
        "{text:?}"
    );
    // The same client connection and the same node connection serve on.
    s.write_all(b"GET /download/10 HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
        .await
        .unwrap();
    got.clear();
    read_to(&mut s, &mut got, b"\r\n\r\n").await;
    assert!(
        got.starts_with(b"HTTP/1.1 200 "),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(www.accepted(), 1, "one node connection for both requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_answering_before_the_request_body_ends_is_forwarded_and_the_proxy_serves_on() {
    use tokio::io::AsyncWriteExt;
    let www = Backend::start("www").await;
    let (_proxy, addr) = www_proxy(&www);
    const LEN: usize = 256 * 1024;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    // /status/202 answers without reading the body.
    s.write_all(
        format!(
            "POST /status/202 HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: {LEN}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    s.write_all(&[b'x'; 1024]).await.unwrap();
    let mut got = Vec::new();
    read_to(&mut s, &mut got, b"\r\n\r\n").await;
    assert!(
        got.starts_with(b"HTTP/1.1 202 "),
        "the early answer is forwarded before the body ends: {:?}",
        String::from_utf8_lossy(&got)
    );
    // The rest of the body; whatever the proxy does with it, it serves on.
    let _ = s.write_all(&[b'x'; LEN - 1024]).await;
    drop(s);
    let c = client();
    for _ in 0..5 {
        let r = c
            .get(format!("http://{addr}/download/100"))
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(r.bytes().await.unwrap().len(), 100);
    }
}
