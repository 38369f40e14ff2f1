//! What the client sees for each kind of bad input or failing node, checked
//! on the wire (raw sockets where the exact bytes matter), and that the
//! proxy keeps serving afterwards.

use std::net::SocketAddr;

use crate::support::*;
use tokio::io::AsyncWriteExt;

struct Setup {
    proxy: Proxy,
    addr: SocketAddr,
    good: Backend,
}

/// One proxy: site `www` on a healthy backend, site `dead` on a closed port.
async fn setup(extra: &str) -> Setup {
    let good = Backend::start("good").await;
    let closed = free_port();
    let (listen, addr, _) = listener_toml();
    let config = format!(
        r#"{listen}
[global]
access_log = "{{dir}}/access.log"

[timeouts]
server = "500ms"
http_request = "500ms"
queue = "200ms"

[health]
interval = "100ms"
fall = 1
passive_failures = 0
{extra}
[[site]]
name = "www"
hosts = ["www.example.com"]

[[site]]
name = "dead"
hosts = ["dead.example.com"]

{}[[node]]
name = "gone"
address = "127.0.0.1:{closed}"
site = "dead"
"#,
        node_toml("n1", good.addr, "www"),
    );
    let proxy = Proxy::start(&config, &[addr]);
    Setup { proxy, addr, good }
}

fn still_serves(addr: SocketAddr) {
    let resp = raw_exchange(
        addr,
        b"GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
    );
    assert!(
        status_line(&resp).contains(" 200 "),
        "proxy stopped serving: {resp}"
    );
}

fn access_log(s: &Setup) -> String {
    std::fs::read_to_string(s.proxy.dir.path().join("access.log")).unwrap_or_default()
}

fn wait_access(s: &Setup, needle: &str) {
    let path = s.proxy.dir.path().join("access.log");
    assert!(
        s.proxy.wait_for_text(&path, needle),
        "access log lacks {needle:?}:\n{}",
        access_log(s)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_request_gets_400() {
    let s = setup("").await;
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: www.example.com\r\nBad Header Line\r\n\r\n"[..],
        b"HELLO WORLD\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: abc\r\n\r\n",
    ] {
        let resp = raw_exchange(s.addr, bad);
        assert!(
            status_line(&resp).starts_with("HTTP/1.1 400"),
            "{:?} -> {resp:?}",
            String::from_utf8_lossy(bad)
        );
    }
    still_serves(s.addr);
    wait_access(&s, " 400 0 - - PR-- ");
    wait_access(&s, "\"<BADREQ>\"");
}

/// RFC 9112 section 3.2: an HTTP/1.1 request without a Host header, or with
/// two, is answered 400 (not routed, not 404); HTTP/1.0 needs none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http11_without_exactly_one_host_gets_400() {
    let s = setup("").await;
    for bad in [
        &b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: www.example.com\r\nHost: dead.example.com\r\nConnection: close\r\n\r\n",
    ] {
        let resp = raw_exchange(s.addr, bad);
        assert!(
            status_line(&resp).starts_with("HTTP/1.1 400"),
            "{:?} -> {resp:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(resp.contains("Host header"), "{resp}");
    }
    // HTTP/1.0 may omit Host: no site matches it here, so 404.
    let resp = raw_exchange(s.addr, b"GET / HTTP/1.0\r\n\r\n");
    assert!(status_line(&resp).contains(" 404"), "{resp}");
    still_serves(s.addr);
}

/// RFC 9112 section 6.1: a transfer coding the proxy does not understand is
/// answered 501, not forwarded as if the body were plain chunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_transfer_coding_gets_501() {
    let s = setup("").await;
    for bad in [
        &b"POST /upload HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: cow, chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
        b"POST /upload HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: cow\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    ] {
        let resp = raw_exchange(s.addr, bad);
        assert!(
            status_line(&resp).starts_with("HTTP/1.1 501"),
            "{:?} -> {resp:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(resp.contains("transfer coding"), "{resp}");
    }
    // Plain chunked still goes through.
    let resp = raw_exchange(
        s.addr,
        b"POST /upload HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 200"), "{resp}");
    assert!(resp.contains("received 3"), "{resp}");
    still_serves(s.addr);
}

/// RFC 9112 section 6: a GET with a chunked body reaches the node with its
/// body (hyper would send it as `Content-Length: 0`), and the next request
/// on the connection is served. Found by `differential.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_with_a_chunked_body_reaches_the_node_whole() {
    let s = setup("").await;
    let resp = raw_exchange(
        s.addr,
        b"GET /upload HTTP/1.1\r\nHost: www.example.com\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n\
          GET /upload HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
    );
    assert!(resp.contains("received 5"), "{resp}");
    assert!(resp.contains("received 0"), "second request: {resp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_head_gets_431() {
    let s = setup("[limits]\nmax_header_bytes = 2048\nmax_headers = 20\n").await;
    // Above hyper's own buffer floor (8 KiB).
    let big = format!(
        "GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let resp = raw_exchange(s.addr, big.as_bytes());
    assert!(status_line(&resp).starts_with("HTTP/1.1 431"), "{resp}");
    // Between the configured limit (2 KiB) and hyper's floor.
    let medium = format!(
        "GET / HTTP/1.1\r\nHost: www.example.com\r\nX-Big: {}\r\n\r\n",
        "a".repeat(4000)
    );
    let resp = raw_exchange(s.addr, medium.as_bytes());
    assert!(status_line(&resp).starts_with("HTTP/1.1 431"), "{resp}");
    assert!(resp.contains("too large"), "{resp}");
    // Too many header fields.
    let mut many = String::from("GET / HTTP/1.1\r\nHost: www.example.com\r\n");
    for i in 0..40 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let resp = raw_exchange(s.addr, many.as_bytes());
    assert!(status_line(&resp).starts_with("HTTP/1.1 431"), "{resp}");
    assert_eq!(s.good.requests(), 0);
    still_serves(s.addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_head_gets_408_and_close() {
    let s = setup("").await;
    let mut sock = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    // Half a head, then silence (slowloris).
    sock.write_all(b"GET / HTTP/1.1\r\nHost: www.exa")
        .await
        .unwrap();
    let got = read_some(&mut sock, usize::MAX).await; // until the proxy closes
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text:?}");
    assert!(text.contains("connection: close"), "{text}");
    // An idle connection that never sent a byte is closed quietly.
    let mut idle = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let got = read_some(&mut idle, usize::MAX).await;
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    still_serves(s.addr);
    wait_access(&s, " 408 0 - - cR-- ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_refused_gets_502_then_503_once_down() {
    let s = setup("").await;
    let c = client();
    let resp = crate::support::get_host(&c, s.addr, "dead.example.com", "/").await;
    let first = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    // 502 while the node is still believed up; 503 once the health check
    // (fall = 1, every 100 ms) took it down — whichever came first.
    assert!(first == 502 || first == 503, "{first} {body}");
    let mut saw_503 = first == 503;
    for _ in 0..200 {
        if saw_503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let resp = crate::support::get_host(&c, s.addr, "dead.example.com", "/").await;
        if resp.status().as_u16() == 503 {
            let body = resp.text().await.unwrap();
            assert!(body.contains("site `dead`"), "{body}");
            saw_503 = true;
        }
    }
    assert!(saw_503, "the dead node never went down");
    still_serves(s.addr);
    wait_access(&s, "dead/<NOSRV>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_node_gets_504() {
    let s = setup("").await;
    let resp = crate::support::get_host(&client(), s.addr, "www.example.com", "/slow/3000").await;
    assert_eq!(resp.status().as_u16(), 504);
    still_serves(s.addr);
    wait_access(&s, "504 ");
    assert!(access_log(&s).contains(" sH-- "), "{}", access_log(&s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_dying_mid_response_truncates_and_proxy_keeps_serving() {
    let s = setup("").await;
    let c = client();
    let resp = crate::support::get_host(&c, s.addr, "www.example.com", "/die").await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.content_length(), Some(1_000_000));
    let body = resp.bytes().await;
    assert!(body.is_err(), "a truncated body must not read as complete");
    still_serves(s.addr);
    let resp = crate::support::get_host(&c, s.addr, "www.example.com", "/").await;
    assert_eq!(resp.status().as_u16(), 200);
    wait_access(&s, " SD-- ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_failure_is_retried_on_another_node() {
    let good = Backend::start("good").await;
    let closed = free_port();
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n[health]\npassive_failures = 0\ninterval = \"60s\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}{}",
        node_toml("closed", format!("127.0.0.1:{closed}").parse().unwrap(), "www"),
        node_toml("good", good.addr, "www"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    for i in 0..10 {
        // POST too: nothing reached the closed node, so a replay is safe.
        let resp = c
            .post(format!("http://{addr}/upload"))
            .header("host", "www.example.com")
            .body(vec![b'z'; 1000])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "request {i}");
        assert_eq!(resp.text().await.unwrap(), "received 1000");
    }
    assert_eq!(good.requests(), 10);
    let metrics = crate::support::admin_text(admin, "/metrics").await;
    let n = metric(
        &metrics,
        "rdmalb_retries_total{site=\"www\",reason=\"conn-failure\"}",
    );
    assert!(n >= 5.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_is_not_retried_after_the_node_received_bytes() {
    let good = Backend::start("good").await;
    // A node that reads the request and then drops the connection.
    let killer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let killer_addr = killer.local_addr().unwrap();
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let k = std::sync::Arc::clone(&killed);
    let killer_task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = killer.accept().await else {
                continue;
            };
            // Counted when it is a POST: the first health check comes at a
            // random time within the 60 s interval, and may come now.
            if read_some(&mut sock, 4).await.starts_with(b"POST") {
                k.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            drop(sock);
        }
    });
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n[health]\npassive_failures = 0\ninterval = \"60s\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}{}",
        node_toml("killer", killer_addr, "www"),
        node_toml("good", good.addr, "www"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    let mut bad_gateway = 0;
    let mut ok = 0;
    for _ in 0..4 {
        let resp = c
            .post(format!("http://{addr}/upload"))
            .header("host", "www.example.com")
            .body(vec![b'z'; 100])
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            502 => bad_gateway += 1,
            200 => ok += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    killer_task.abort();
    let killed = killed.load(std::sync::atomic::Ordering::SeqCst);
    // Round robin over two nodes: the killer got some POSTs, and each of
    // them failed instead of being replayed on the good node.
    assert!(bad_gateway >= 1, "no request reached the killer node");
    assert_eq!(bad_gateway, killed);
    assert_eq!(ok, good.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_node_queue_timeout_gets_503() {
    let s = setup("[limits]\nmax_inflight_per_node = 1\n").await;
    // Holds the node's only slot: a large download the client never reads
    // (the exchange stays open until the client goes away).
    let mut hog = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    hog.write_all(b"GET /download/100000000 HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
        .await
        .unwrap();
    let head = read_some(&mut hog, 12).await;
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&head)
    );
    let resp = crate::support::get_host(&client(), s.addr, "www.example.com", "/").await;
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.text().await.unwrap().contains("busy"));
    drop(hog);
    wait_access(&s, " sQ-- ");
    // The slot comes back when the hog's exchange ends.
    let mut served = false;
    for _ in 0..400 {
        let r = raw_exchange(
            s.addr,
            b"GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
        );
        if status_line(&r).contains(" 200 ") {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(served, "the slot was never released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_shedding_load_with_503_stays_up_while_500s_eject_it() {
    let node = Backend::start("shedding").await;
    let (listen, addr, admin) = listener_toml();
    // Active checks pass (the health path answers 200) and come rarely.
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[health]\ninterval = \"60s\"\npassive_failures = 3\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", node.addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr, admin]);
    let c = client();
    let get = |path: &'static str| {
        let c = c.clone();
        async move {
            let resp = c
                .get(format!("http://{addr}{path}"))
                .header("host", "www.example.com")
                .send()
                .await
                .unwrap();
            let from_node = resp.headers().contains_key("x-backend");
            (resp.status().as_u16(), from_node)
        }
    };
    // Ten 503s from the node itself: passed through, node still up.
    for _ in 0..10 {
        assert_eq!(get("/status/503").await, (503, true));
    }
    assert_eq!(get("/").await, (200, true), "the node was ejected for 503s");
    // Three 500s in a row eject it: the proxy answers for it then.
    for _ in 0..3 {
        assert_eq!(get("/status/500").await, (500, true));
    }
    let (status, from_node) = get("/").await;
    assert_eq!(
        (status, from_node),
        (503, false),
        "500s must eject the node"
    );
}
