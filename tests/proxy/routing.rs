//! Routing by Host and path, forwarding headers, hop-by-hop removal and
//! upstream keep-alive, through the real `rdmalb` binary.

use crate::support::*;

async fn get(
    c: &reqwest::Client,
    addr: std::net::SocketAddr,
    host: &str,
    path: &str,
) -> (u16, String, String) {
    let resp = c
        .get(format!("http://{addr}{path}"))
        .header("host", host)
        .send()
        .await
        .expect("request through proxy");
    let status = resp.status().as_u16();
    let backend = resp
        .headers()
        .get("x-backend")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, backend, resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_exact_host_wildcard_prefix_and_404() {
    let www = Backend::start("www").await;
    let api = Backend::start("api").await;
    let wild = Backend::start("wild").await;
    let deep = Backend::start("deep").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        r#"{listen}
[global]
access_log = "off"

[[site]]
name = "www"
hosts = ["www.example.com", "example.com"]

[[site]]
name = "api"
hosts = ["www.example.com"]
path_prefixes = ["/api/"]

[[site]]
name = "wild"
hosts = ["*.example.com"]

[[site]]
name = "deep"
hosts = ["*.eu.example.com"]

{}{}{}{}"#,
        node_toml("n-www", www.addr, "www"),
        node_toml("n-api", api.addr, "api"),
        node_toml("n-wild", wild.addr, "wild"),
        node_toml("n-deep", deep.addr, "deep"),
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    assert_eq!(get(&c, addr, "www.example.com", "/").await.1, "www");
    assert_eq!(get(&c, addr, "WWW.EXAMPLE.COM:80", "/x").await.1, "www");
    assert_eq!(get(&c, addr, "example.com", "/").await.1, "www");
    assert_eq!(
        get(&c, addr, "www.example.com", "/api/users").await.1,
        "api"
    );
    assert_eq!(get(&c, addr, "www.example.com", "/apix").await.1, "www");
    assert_eq!(get(&c, addr, "shop.example.com", "/").await.1, "wild");
    assert_eq!(get(&c, addr, "a.eu.example.com", "/").await.1, "deep");
    let (status, backend, body) = get(&c, addr, "unknown.org", "/").await;
    assert_eq!(status, 404);
    assert_eq!(backend, "");
    assert!(body.contains("no site"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_site_serves_unknown_hosts() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\ndefault_site = \"www\"\naccess_log = \"off\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let (status, backend, _) = get(&client(), addr, "other.org", "/").await;
    assert_eq!((status, backend.as_str()), (200, "www"));
    // No Host at all (HTTP/1.0) also goes to the default site.
    let resp = raw_exchange(addr, b"GET / HTTP/1.0\r\n\r\n");
    assert!(status_line(&resp).contains("200"), "{resp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_added_and_hop_by_hop_removed() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\nvia_name = \"edge-1\"\naccess_log = \"off\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let resp = client()
        .get(format!("http://{addr}/echo"))
        .header("host", "www.example.com")
        .header("x-forwarded-for", "203.0.113.9")
        .header("connection", "x-private, keep-alive")
        .header("x-private", "secret")
        .header("keep-alive", "timeout=5")
        .header("proxy-connection", "keep-alive")
        .header("te", "gzip")
        .header("x-kept", "yes")
        .send()
        .await
        .unwrap();
    // Response side: hop-by-hop from the backend stripped, Via added.
    assert_eq!(resp.headers().get("via").unwrap(), "1.1 edge-1");
    assert!(resp.headers().get("keep-alive").is_none());
    assert!(resp.headers().get("x-backend-secret").is_none());
    let body = resp.text().await.unwrap();
    let h = echoed_headers(&body);
    // The client is not a trusted proxy: its own list is replaced.
    assert_eq!(echoed(&h, "x-forwarded-for"), vec!["127.0.0.1"], "{body}");
    assert_eq!(echoed(&h, "x-forwarded-proto"), vec!["http"]);
    assert_eq!(
        echoed(&h, "forwarded"),
        vec!["for=127.0.0.1;proto=http;host=www.example.com"]
    );
    assert_eq!(echoed(&h, "via"), vec!["1.1 edge-1"]);
    assert_eq!(echoed(&h, "host"), vec!["www.example.com"]);
    assert_eq!(echoed(&h, "x-kept"), vec!["yes"]);
    for gone in [
        "x-private",
        "keep-alive",
        "proxy-connection",
        "te",
        "upgrade",
    ] {
        assert!(
            echoed(&h, gone).is_empty(),
            "{gone} reached the backend:\n{body}"
        );
    }
    // `connection` seen by the backend is hyper's own framing, never ours.
    assert!(!body.contains("x-private"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_reused() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    for _ in 0..200 {
        let (status, _, _) = get(&c, addr, "www.example.com", "/").await;
        assert_eq!(status, 200);
    }
    // Also over fresh client connections: the upstream side stays pooled.
    for _ in 0..20 {
        let resp = raw_exchange(
            addr,
            b"GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
        );
        assert!(status_line(&resp).contains("200"), "{resp}");
    }
    assert_eq!(www.requests(), 220);
    assert!(
        www.accepted() <= 2,
        "220 sequential requests opened {} upstream connections",
        www.accepted()
    );
}

/// RFC 9112 section 3.2.2: an absolute-form request is routed on its
/// target's authority, and the node gets that authority as `Host`, not the
/// client's own `Host` line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_forwards_the_authority_it_routed_on_as_host() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let _proxy = Proxy::start(&www_config(&listen, "", www.addr), &[addr]);
    let resp = raw_exchange(
        addr,
        b"GET http://www.example.com:8080/echo HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n",
    );
    assert!(status_line(&resp).contains(" 200 "), "{resp}");
    assert!(resp.contains("x-backend: www"), "{resp}");
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
    let h = echoed_headers(body);
    assert_eq!(echoed(&h, "host"), vec!["www.example.com:8080"], "{body}");
    assert!(body.starts_with("GET /echo HTTP/1.1\n"), "{body}");
}

/// RFC 9113 section 8.3.1: an HTTP/2 request whose `Host` names another
/// entity than its `:authority` is malformed (400); one naming the same
/// entity (case, default port) is served with `Host` = `:authority`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_host_differing_from_authority_gets_400() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = www_config(&listen, "default_site = \"www\"\n", www.addr);
    let _proxy = Proxy::start(&config, &[addr]);
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, _conn) = h2_client(stream).await;
    let mut request = |host: &str| {
        let req = http::Request::get("http://www.example.com/echo")
            .header("host", host)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        send.send_request(req)
    };
    let resp = request("other.example").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.headers().get("x-backend").is_none());
    let resp = request("WWW.example.com:80").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    let h = echoed_headers(&body);
    assert_eq!(echoed(&h, "host"), vec!["www.example.com"], "{body}");
    assert_eq!(www.requests(), 1);
}

/// `global.forwarded_for = "replace"` (the default): a client outside
/// `global.trusted_proxies` cannot pass a forged `X-Forwarded-For` or
/// `Forwarded` to the node; a trusted one gets its list appended to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_forwarded_for_from_an_untrusted_client_does_not_reach_the_node() {
    let www = Backend::start("www").await;
    let forged = |trusted: &str| {
        let (listen, addr, _) = listener_toml();
        (
            Proxy::start(&www_config(&listen, trusted, www.addr), &[addr]),
            addr,
        )
    };
    let send = |addr| {
        client()
            .get(format!("http://{addr}/echo"))
            .header("host", "www.example.com")
            .header("x-forwarded-for", "203.0.113.9")
            .header("forwarded", "for=203.0.113.9")
            .send()
    };
    // The test client (127.0.0.1) is not trusted: its headers are replaced.
    let (_proxy, addr) = forged("");
    let body = send(addr).await.unwrap().text().await.unwrap();
    let h = echoed_headers(&body);
    assert_eq!(echoed(&h, "x-forwarded-for"), vec!["127.0.0.1"], "{body}");
    assert_eq!(
        echoed(&h, "forwarded"),
        vec!["for=127.0.0.1;proto=http;host=www.example.com"],
        "{body}"
    );
    assert!(!body.contains("203.0.113.9"), "{body}");
    // A trusted peer (another proxy in front of this one) keeps its list.
    let (_proxy, addr) = forged("trusted_proxies = [\"10.0.0.0/8\", \"127.0.0.0/8\"]\n");
    let body = send(addr).await.unwrap().text().await.unwrap();
    let h = echoed_headers(&body);
    assert_eq!(
        echoed(&h, "x-forwarded-for"),
        vec!["203.0.113.9, 127.0.0.1"],
        "{body}"
    );
    assert_eq!(
        echoed(&h, "forwarded"),
        vec!["for=203.0.113.9, for=127.0.0.1;proto=http;host=www.example.com"],
        "{body}"
    );
}

/// More requests in flight to one node than the old default pool of 64
/// (HTTP/2 clients reach hundreds): after one wave of 100 concurrent
/// requests, a second wave reuses the 100 pooled connections instead of
/// opening new ones (`limits.pool_idle_per_node` defaults to 1024).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_of_concurrent_requests_is_pooled_whole() {
    let www = Backend::start("www").await;
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n# One worker: its pool sees every request.\nworkers = 1\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", www.addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let c = client();
    let wave = |c: reqwest::Client| async move {
        let all: Vec<_> = (0..100)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { get(&c, addr, "www.example.com", "/slow/300").await.0 })
            })
            .collect();
        for h in all {
            assert_eq!(h.await.unwrap(), 200);
        }
    };
    wave(c.clone()).await;
    let first = www.accepted();
    assert!(
        first > 64,
        "the first wave was not concurrent enough: {first} connections"
    );
    wave(c.clone()).await;
    assert_eq!(
        www.accepted(),
        first,
        "the second wave opened new upstream connections"
    );
    assert_eq!(www.requests(), 200);
}
