use super::*;

#[test]
fn wildcard_patterns_render_with_star() {
    assert_eq!(
        pattern_text(&HostPattern::Wildcard(".example.com".into())),
        "*.example.com"
    );
    assert_eq!(
        pattern_text(&HostPattern::Exact("a.example.com".into())),
        "a.example.com"
    );
}

fn state(text: &str) -> AdminState {
    let config = crate::fixtures::config(text);
    let backends = Backends::build(&config, None);
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    AdminState::new(
        Arc::new(ArcSwap::from_pointee(config)),
        Arc::new(ArcSwap::from_pointee(backends)),
        metrics,
    )
}

fn two_sites() -> String {
    let mut text = String::from("[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n");
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&crate::fixtures::site("blog", &["blog.test"]));
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:1", "shop"));
    text.push_str(&crate::fixtures::node("b", "127.0.0.1:2", "blog"));
    text
}

#[test]
fn status_says_when_it_was_made_and_where_each_node_is_assigned() {
    let s = state(&two_sites());
    let before = rdmalb_base::time::unix_now_ms();
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert!(doc["generated_at_unix_ms"].as_u64().unwrap() >= before);
    // Without role words a node is assigned to its configured site.
    let a = &doc["nodes"][0];
    assert_eq!(
        (&a["assigned_site"], &a["role_applied"]),
        (&"shop".into(), &true.into())
    );
    let shop = &doc["sites"][0];
    assert_eq!(
        (&shop["nodes_assigned"], &shop["nodes_serving"]),
        (&1.into(), &1.into())
    );
    // A drained node stays assigned but takes no new requests.
    s.backends.load().nodes()[0].set_admin_state(
        crate::balance::AdminState::Drain,
        crate::balance::ControlSource::Runtime,
    );
    let doc = serde_json::to_value(status(&s)).unwrap();
    let shop = &doc["sites"][0];
    assert_eq!(
        (&shop["nodes_assigned"], &shop["nodes_serving"]),
        (&1.into(), &0.into())
    );
}

#[test]
fn status_lists_the_listeners_certificate_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("c.key"));
    let names = vec!["a.example.com".to_string(), "b.example.com".to_string()];
    let ck = rcgen::generate_simple_self_signed(names).unwrap();
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let mut text = format!(
        "[[listener]]\nname = \"tls\"\nlisten = \"127.0.0.1:0\"\ntls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n",
        cert.display(),
        key.display()
    );
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:1", "shop"));
    let s = state(&text);
    // Without a certificate file, no `tls_files` at all.
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert!(doc.get("tls_files").is_none(), "{doc:#}");
    let certs = super::super::tls::file_certificates(&s.config.load());
    let s = s.with_file_certs(certs);
    let doc = serde_json::to_value(status(&s)).unwrap();
    let f = &doc["tls_files"][0];
    assert_eq!(f["listener"], "tls");
    assert_eq!(f["file"], cert.display().to_string());
    assert_eq!(
        f["names"],
        serde_json::json!(["a.example.com", "b.example.com"])
    );
    assert_eq!(f["issuer"], "rcgen self signed cert");
    assert!(f["error"].is_null(), "{f:#}");
    // rcgen's default validity ends in 4096.
    let not_after = f["not_after_unix"].as_u64().unwrap();
    assert_eq!(not_after, 67_090_118_400, "{f:#}"); // 4096-01-01
    assert!(f["expires_in_seconds"].as_u64().unwrap() > 60 * 365 * 86400);
}

#[test]
fn status_follows_role_words_for_assigned_and_serving_nodes() {
    let s = state(&two_sites());
    let a = Arc::clone(&s.backends.load().nodes()[0]);
    // The agent read a's role word: moved to blog, not applied yet.
    a.follow_role(Some(1), false);
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert_eq!(doc["nodes"][0]["assigned_site"], "blog");
    assert_eq!(doc["nodes"][0]["role_applied"], false);
    assert_eq!(doc["nodes"][0]["site"], "shop", "the configured site stays");
    let (shop, blog) = (&doc["sites"][0], &doc["sites"][1]);
    assert_eq!(shop["nodes_assigned"], 0);
    assert_eq!(
        (&blog["nodes_assigned"], &blog["nodes_serving"]),
        (&2.into(), &1.into())
    );
    a.follow_role(None, true);
    let doc = serde_json::to_value(status(&s)).unwrap();
    assert_eq!(doc["nodes"][0]["assigned_site"], serde_json::Value::Null);
}

#[test]
fn the_stats_page_is_read_only_like_status() {
    let s = state(&two_sites());
    let req = |method: Method, path: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
    };
    for m in [Method::GET, Method::HEAD] {
        let r = handle(&s, &req(m, "/stats?refresh=1"));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
        assert!(r.headers().contains_key(header::CONTENT_SECURITY_POLICY));
    }
    let r = handle(&s, &req(Method::POST, "/stats"));
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()[header::ALLOW], "GET, HEAD");
    assert_eq!(
        handle(&s, &req(Method::GET, "/stats/x")).status(),
        StatusCode::NOT_FOUND
    );
}

mod lockout {
    //! Issue 27, defect 1: clients that pipeline requests and never read
    //! their answers held every admin slot for ever.

    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const TOKEN: &str = "0123456789abcdef0123456789abcdef-admin";

    /// An admin listener with `limits` and a token file, and its address.
    async fn admin(
        dir: &std::path::Path,
        limits: conn::Limits,
    ) -> (std::net::SocketAddr, watch::Sender<bool>) {
        let token = dir.join("admin.token");
        std::fs::write(&token, TOKEN).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = format!(
            "{}\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n",
            two_sites(),
            token.display()
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve_with(listener, state(&text), rx, limits));
        (addr, tx)
    }

    /// A client that pipelines `GET /stats` and never reads: a tiny
    /// receive window, so the listener's writes stall at once.
    async fn flooder(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(2048).unwrap();
        let mut s = socket.connect(addr).await.unwrap();
        let burst = "GET /stats HTTP/1.1\r\nHost: admin\r\n\r\n".repeat(2000);
        // Only as much as the kernel takes now; the rest is never needed.
        let _ =
            tokio::time::timeout(Duration::from_millis(300), s.write_all(burst.as_bytes())).await;
        s
    }

    /// Sends `request` on a new connection; the status code of the answer.
    async fn status_of(addr: std::net::SocketAddr, request: &str) -> Option<u16> {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(request.as_bytes()).await.ok()?;
        let mut buf = vec![0u8; 256];
        let mut got = 0;
        while got < 12 {
            let n = s.read(&mut buf[got..]).await.ok()?;
            if n == 0 {
                return None;
            }
            got += n;
        }
        std::str::from_utf8(&buf[9..12]).ok()?.parse().ok()
    }

    fn runtime_request(token: &str) -> String {
        format!(
            "POST /runtime HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/x-rdmalb-commands\r\nContent-Length: 9\r\n\
             Connection: close\r\n\r\nshow info"
        )
    }

    #[tokio::test]
    async fn the_token_holder_gets_the_reserved_slot_while_flooders_hold_the_others() {
        let dir = tempfile::tempdir().unwrap();
        // Deadlines far away: only the reserved slot can serve the caller.
        let limits = conn::Limits {
            connections: 4,
            write: Duration::from_secs(600),
            idle: Duration::from_secs(600),
            head: Duration::from_secs(600),
            ..conn::Limits::default()
        };
        let (addr, _stop) = admin(dir.path(), limits).await;
        let mut flooders = Vec::new();
        for _ in 0..3 {
            flooders.push(flooder(addr).await);
        }
        // Without the token, the reserved slot answers 503 and closes.
        let refused = tokio::time::timeout(
            Duration::from_secs(30),
            status_of(addr, "GET /status HTTP/1.1\r\nHost: admin\r\n\r\n"),
        )
        .await
        .expect("the admin listener answered nothing: every slot is held");
        assert_eq!(refused, Some(503));
        let answered = tokio::time::timeout(
            Duration::from_secs(30),
            status_of(addr, &runtime_request(TOKEN)),
        )
        .await
        .expect("the token holder was locked out");
        assert_eq!(answered, Some(200));
        drop(flooders);
    }

    #[tokio::test]
    async fn clients_that_never_read_lose_their_slots_to_the_write_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let limits = conn::Limits {
            connections: 4,
            write: Duration::from_millis(500),
            ..conn::Limits::default()
        };
        let (addr, _stop) = admin(dir.path(), limits).await;
        let mut flooders = Vec::new();
        for _ in 0..4 {
            flooders.push(flooder(addr).await);
        }
        // Every slot was held, the reserved one included; a reader without
        // the token is served once the stalled writes hit their deadline.
        let mut status = None;
        for _ in 0..200 {
            status = tokio::time::timeout(
                Duration::from_secs(5),
                status_of(
                    addr,
                    "GET /status HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
                ),
            )
            .await
            .ok()
            .flatten();
            if status == Some(200) {
                break;
            }
            // The reserved slot answers 503 at once meanwhile.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(status, Some(200), "the flooders kept the admin listener");
        drop(flooders);
    }

    #[tokio::test]
    async fn a_connection_ends_after_its_request_bound() {
        let dir = tempfile::tempdir().unwrap();
        let limits = conn::Limits {
            requests: 3,
            ..conn::Limits::default()
        };
        let (addr, _stop) = admin(dir.path(), limits).await;
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n"
                .repeat(10)
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut all = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut all))
            .await
            .expect("the connection stayed open past its request bound")
            .unwrap();
        let text = String::from_utf8_lossy(&all);
        assert_eq!(text.matches("HTTP/1.1 200").count(), 3, "{text}");
        assert_eq!(text.matches("connection: close").count(), 1, "{text}");
    }
}
