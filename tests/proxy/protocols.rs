//! HTTP/2 from clients (prior knowledge and ALPN over TLS), TLS with SNI
//! choosing between two certificates generated at test time, and a
//! WebSocket upgrade round trip.

use crate::support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A proxy in front of one backend for `www.example.com` with `global`
/// settings, and a client speaking HTTP/2 with prior knowledge to it.
fn h2c_proxy(www: &Backend, global: &str) -> (Proxy, reqwest::Client, std::net::SocketAddr) {
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\n{global}\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let proxy = Proxy::start(&config, &[addr]);
    let c = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .resolve("www.example.com", addr)
        .build()
        .unwrap();
    (proxy, c, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_prior_knowledge() {
    let www = Backend::start("www").await;
    let (proxy, c, addr) = h2c_proxy(&www, "access_log = \"{dir}/access.log\"");
    for _ in 0..5 {
        let resp = c
            .get(format!("http://www.example.com:{}/echo?x=1", addr.port()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.version(), reqwest::Version::HTTP_2);
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers()["x-backend"], "www");
        let body = resp.text().await.unwrap();
        // The node gets HTTP/1.1 in origin form with a Host header.
        assert!(body.starts_with("GET /echo?x=1 HTTP/1.1\n"), "{body}");
        let h = echoed_headers(&body);
        assert_eq!(
            echoed(&h, "host"),
            vec![format!("www.example.com:{}", addr.port())]
        );
        assert_eq!(echoed(&h, "via"), vec!["2 rdmalb"]);
    }
    // A streamed upload over HTTP/2.
    let resp = c
        .post(format!("http://www.example.com:{}/upload", addr.port()))
        .body(vec![b'q'; 300_000])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "received 300000");
    let log = proxy.dir.path().join("access.log");
    assert!(
        proxy.wait_for_text(&log, "\"GET /echo?x=1 HTTP/2.0\""),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Many concurrent streams on one HTTP/2 connection through one worker:
/// large downloads (far beyond the 64 KiB flow-control windows) mixed with
/// small answers. The proxy holds a connection's writes until its worker
/// runs out of tasks; every stream still arrives whole and as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_concurrent_streams_large_and_small_arrive_whole() {
    let www = Backend::start("www").await;
    let (_proxy, c, addr) = h2c_proxy(&www, "access_log = \"off\"\nworkers = 1");
    let base = format!("http://www.example.com:{}", addr.port());
    let mut streams = tokio::task::JoinSet::new();
    for i in 0..40u64 {
        let c = c.clone();
        let base = base.clone();
        streams.spawn(async move {
            if i % 4 == 0 {
                let size = 3_000_000 + i;
                let mut resp = c
                    .get(format!("{base}/download/{size}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.version(), reqwest::Version::HTTP_2);
                let mut got = 0u64;
                while let Some(chunk) = resp.chunk().await.unwrap() {
                    assert!(
                        chunk.iter().all(|&b| b == b'x'),
                        "stream {i}: foreign bytes"
                    );
                    got += chunk.len() as u64;
                }
                assert_eq!(got, size, "stream {i}");
            } else {
                let resp = c
                    .get(format!("{base}/echo?stream={i}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.version(), reqwest::Version::HTTP_2);
                let body = resp.text().await.unwrap();
                assert!(
                    body.starts_with(&format!("GET /echo?stream={i} HTTP/1.1\n")),
                    "stream {i}: {body}"
                );
            }
        });
    }
    let all = async {
        while let Some(r) = streams.join_next().await {
            r.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), all)
        .await
        .expect("the streams did not all finish within 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sni_picks_the_certificate_and_alpn_offers_h2() {
    let a = Backend::start("a").await;
    let b = Backend::start("b").await;
    let dir = tempfile::tempdir().unwrap();
    let (a_cert, a_key, a_der) = certificate(dir.path(), "a", &["a.test"]);
    let (b_cert, b_key, b_der) = certificate(dir.path(), "b", &["b.test", "*.b.test"]);
    let port = free_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let config = format!(
        r#"[global]
access_log = "off"

[[listener]]
name = "tls"
listen = "{addr}"
tls = {{ certificates = [
  {{ cert = "{}", key = "{}" }},
  {{ cert = "{}", key = "{}" }},
] }}

[[site]]
name = "a"
hosts = ["a.test"]

[[site]]
name = "b"
hosts = ["b.test", "*.b.test"]

{}{}"#,
        a_cert.display(),
        a_key.display(),
        b_cert.display(),
        b_key.display(),
        node_toml("na", a.addr, "a"),
        node_toml("nb", b.addr, "b"),
    );
    let _proxy = Proxy::start_in(dir, &config, &[addr]);
    let roots = |http1: bool| {
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .tls_info(true)
            .add_root_certificate(reqwest::Certificate::from_der(&a_der).unwrap())
            .add_root_certificate(reqwest::Certificate::from_der(&b_der).unwrap())
            .resolve("a.test", addr)
            .resolve("b.test", addr)
            .resolve("www.b.test", addr);
        if http1 {
            builder = builder.http1_only();
        }
        builder.build().unwrap()
    };
    let peer = |resp: &reqwest::Response| {
        resp.extensions()
            .get::<reqwest::tls::TlsInfo>()
            .and_then(|i| i.peer_certificate())
            .map(|c| c.to_vec())
            .expect("peer certificate")
    };
    let c = roots(false);
    for (host, der, backend) in [
        ("a.test", &a_der, "a"),
        ("b.test", &b_der, "b"),
        ("www.b.test", &b_der, "b"),
    ] {
        let resp = c
            .get(format!("https://{host}:{port}/"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{host}: {e:?}"));
        assert_eq!(&peer(&resp), der, "{host} got the wrong certificate");
        assert_eq!(
            resp.version(),
            reqwest::Version::HTTP_2,
            "ALPN h2 for {host}"
        );
        assert_eq!(resp.headers()["x-backend"], backend);
        let body = resp.text().await.unwrap();
        let h = echoed_headers(&body);
        assert_eq!(echoed(&h, "x-forwarded-proto"), vec!["https"]);
    }
    // HTTP/1.1 over TLS when the client offers only http/1.1.
    let resp = roots(true)
        .get(format!("https://b.test:{port}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    assert_eq!(resp.headers()["x-backend"], "b");
    // No SNI (an IP address): the first certificate is the default.
    let insecure = reqwest::Client::builder()
        .no_proxy()
        .tls_info(true)
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let resp = insecure
        .get(format!("https://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(peer(&resp), a_der);
    // Routed by Host, which is the IP: no site → 404.
    assert_eq!(resp.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrade_round_trip() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n[timeouts]\nkeep_alive = \"1s\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let proxy = Proxy::start(&config, &[addr]);
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(
        b"GET /ws HTTP/1.1\r\nHost: www.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = sock.read(&mut byte).await.unwrap();
        assert_eq!(
            n,
            1,
            "closed during the 101 head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101"),
        "{head}\nproxy log:\n{}",
        proxy.stderr_text()
    );
    assert!(head.contains("upgrade: websocket"), "{head}");
    assert!(head.contains("connection: upgrade"), "{head}");
    // Several round trips, one after the keep-alive timeout: a tunnel is
    // not an idle keep-alive connection.
    for (i, msg) in [&b"hello"[..], b"through", b"the tunnel"]
        .iter()
        .enumerate()
    {
        if i == 2 {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        }
        sock.write_all(msg).await.unwrap();
        let mut got = vec![0u8; msg.len()];
        sock.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, msg);
    }
}

/// Over `io`, an HTTP/2 client gets `uri` (200), then stays idle: the
/// proxy ends the connection (GOAWAY, then close; bounded wait).
async fn closed_when_idle<T>(io: T, uri: &str)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) = h2_client(io).await;
    let req = http::Request::get(uri)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    drop(resp);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(20), conn).await;
    assert!(
        ended.is_ok(),
        "idle HTTP/2 connection to {uri} was never closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_h2_connection_gets_goaway() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = www_config(&listen, "[timeouts]\nkeep_alive = \"300ms\"\n", www.addr);
    let _proxy = Proxy::start(&config, &[addr]);
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    closed_when_idle(stream, "http://www.example.com/").await;
}

/// A proxy with one TLS listener (certificate for `a.test`, ALPN h2 and
/// http/1.1) in front of `backend`, `extra` config sections added; returns
/// it, its address and the certificate's DER.
fn tls_proxy(backend: &Backend, extra: &str) -> (Proxy, std::net::SocketAddr, Vec<u8>) {
    tls_proxy_with(backend, extra, "")
}

/// [`tls_proxy`] with `listener` lines added to the listener.
fn tls_proxy_with(
    backend: &Backend,
    extra: &str,
    listener: &str,
) -> (Proxy, std::net::SocketAddr, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, der) = certificate(dir.path(), "a", &["a.test"]);
    let addr = free_addr();
    let config = format!(
        "[global]\naccess_log = \"off\"\n\n{extra}[[listener]]\nname = \"tls\"\nlisten = \"{addr}\"\n{listener}tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\n[[site]]\nname = \"a\"\nhosts = [\"a.test\"]\n\n{}",
        cert.display(),
        key.display(),
        node_toml("na", backend.addr, "a"),
    );
    (Proxy::start_in(dir, &config, &[addr]), addr, der)
}

/// A TLS connection to `addr` trusting `der`, offering only `alpn`.
async fn tls_connect(
    addr: std::net::SocketAddr,
    der: &[u8],
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tls_connect_over(tcp, der, alpn).await
}

/// [`tls_connect`] over a connection already made (and written to).
async fn tls_connect_over(
    tcp: tokio::net::TcpStream,
    der: &[u8],
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let name = rustls::pki_types::ServerName::try_from("a.test").unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn), "ALPN");
    tls
}

/// Everything the peer sends until it closes (bounded: a peer that keeps
/// the connection open for 20 s fails the test).
async fn read_to_close<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Vec<u8> {
    let mut out = Vec::new();
    let read =
        tokio::time::timeout(std::time::Duration::from_secs(20), s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the proxy kept the connection open: {out:?}");
    out
}

/// ALPN decides the protocol on TLS listeners (RFC 9113 section 3.2): on a
/// connection where it chose `h2`, an HTTP/1.1 request is an invalid
/// connection preface and the connection is closed without an HTTP/1.1
/// response; where it chose `http/1.1`, the HTTP/2 preface is an HTTP/1.1
/// request with a bad version (400), never an HTTP/2 connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_only_the_protocol_alpn_chose() {
    let a = Backend::start("a").await;
    let (_proxy, addr, der) = tls_proxy(&a, "");

    let mut tls = tls_connect(addr, &der, b"h2").await;
    tls.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let got = read_to_close(&mut tls).await;
    let text = String::from_utf8_lossy(&got);
    assert!(
        !text.contains("HTTP/1.1"),
        "HTTP/1.1 served over h2: {text}"
    );
    assert_eq!(a.requests(), 0, "the request reached the node");

    let mut tls = tls_connect(addr, &der, b"http/1.1").await;
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let got = read_to_close(&mut tls).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text:?}");
    assert_eq!(a.requests(), 0, "the request reached the node");
}

/// An HTTP/2 connection over TLS (ALPN) that started no request for
/// `timeouts.keep_alive` gets GOAWAY, as a cleartext one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tls_h2_connection_gets_goaway() {
    let a = Backend::start("a").await;
    let (_proxy, addr, der) = tls_proxy(&a, "[timeouts]\nkeep_alive = \"300ms\"\n\n");
    let tls = tls_connect(addr, &der, b"h2").await;
    closed_when_idle(tls, "https://a.test/").await;
}

/// One HTTP/2 frame: type, flags, stream 0, `payload`.
fn h2_frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// PING ACKs the proxy never asked for (RFC 9113 section 6.7 says to
/// ignore them) are counted in `rdmalb_h2_unsolicited_ping_acks_total`,
/// not logged as one WARN line each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsolicited_ping_acks_are_counted_not_logged_each() {
    const PING: u8 = 6;
    const ACK: u8 = 1;
    let www = Backend::start("www").await;
    let (listen, addr, admin) = listener_toml();
    let proxy = Proxy::start(&www_config(&listen, "", www.addr), &[addr, admin]);
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, &[]));
    for _ in 0..20 {
        out.extend(h2_frame(PING, ACK, b"spoofed!"));
    }
    // A real PING last: its ACK proves the proxy read every frame before.
    out.extend(h2_frame(PING, 0, b"sync-pt!"));
    sock.write_all(&out).await.unwrap();
    let mut header = [0u8; 9];
    loop {
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            sock.read_exact(&mut header),
        )
        .await;
        assert!(matches!(read, Ok(Ok(_))), "no PING ACK: {read:?}");
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; len];
        sock.read_exact(&mut payload).await.unwrap();
        if header[3] == PING && header[4] & ACK != 0 && payload == b"sync-pt!" {
            break;
        }
    }
    let warns: Vec<String> = proxy
        .stderr_text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("PING"))
        .map(str::to_string)
        .collect();
    assert!(warns.is_empty(), "one WARN per frame: {warns:#?}");
    let metrics = admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(&metrics, "rdmalb_h2_unsolicited_ping_acks_total "),
        20.0,
        "{metrics}"
    );
}

/// On a TLS listener with `accept_proxy` the PROXY header comes before the
/// TLS handshake (HAProxy's `bind ... accept-proxy ssl`), and the client
/// address it carries reaches the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_reads_the_proxy_header_before_the_handshake() {
    let a = Backend::start("a").await;
    let (proxy, addr, der) = tls_proxy_with(
        &a,
        "",
        "accept_proxy = true\naccept_proxy_from = [\"127.0.0.1\"]\n",
    );
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut header = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    header.extend_from_slice(&[192, 0, 2, 9, 127, 0, 0, 1, 0x13, 0x88, 0x01, 0xbb]);
    tcp.write_all(&header).await.unwrap();
    let mut tls = tls_connect_over(tcp, &der, b"http/1.1").await;
    tls.write_all(b"GET /who HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let resp = String::from_utf8_lossy(&read_to_close(&mut tls).await).into_owned();
    assert!(
        resp.starts_with("HTTP/1.1 200"),
        "{resp}\n{}",
        proxy.stderr_text()
    );
    let body = resp.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert_eq!(
        echoed(&echoed_headers(body), "x-forwarded-for"),
        ["192.0.2.9"],
        "{resp}"
    );
    assert_eq!(
        echoed(&echoed_headers(body), "x-forwarded-proto"),
        ["https"],
        "{resp}"
    );
}

/// One HTTP/1.1 GET of `path` on `s`; the response text (the backend's
/// answers carry `content-length`).
async fn get_on<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    path: &str,
) -> String {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("no response within 10 s")
            .unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

/// An idle HTTP/1.1 connection over TLS parks (its read buffer released,
/// the TLS session and socket kept) and serves its next requests on the
/// same TLS session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tls_http1_connection_parks_and_keeps_its_session() {
    let backend = Backend::start("a").await;
    let admin = free_addr();
    let (proxy, addr, der) = tls_proxy(&backend, &format!("[admin]\nlisten = \"{admin}\"\n\n"));
    let mut tls = tls_connect(addr, &der, b"http/1.1").await;
    let first = get_on(&mut tls, "/one").await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let mut parked = 0.0;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let metrics = admin_text(admin, "/metrics").await;
        parked = metric(&metrics, "rdmalb_connections_parked_total");
        if parked >= 1.0 {
            break;
        }
    }
    assert_eq!(parked, 1.0, "{}", proxy.stderr_text());
    for i in 0..3 {
        let resp = get_on(&mut tls, &format!("/after/{i}")).await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    }
    assert_eq!(backend.requests(), 4);
}
