//! The PROXY protocol against real peers: Debian's HAProxy sending it
//! (`send-proxy`, `send-proxy-v2`) to an `accept_proxy` listener, and
//! Debian's nginx (`listen ... proxy_protocol`) receiving it from nodes
//! with `send_proxy = "v1"` / `"v2"`. The client connects from 127.0.0.2 so
//! that its address differs from every hop's (127.0.0.1).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::haproxy::Haproxy;
use crate::support::*;

/// The client's own loopback address, distinct from the proxies'.
const CLIENT_IP: &str = "127.0.0.2";

/// A connection to `to` from 127.0.0.2.
async fn connect_from_client_ip(to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(format!("{CLIENT_IP}:0").parse().unwrap())
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// One `GET path` with `Host: host` from 127.0.0.2, `Connection: close`;
/// the whole response as text.
async fn get_from_client_ip(to: SocketAddr, host: &str, path: &str) -> String {
    get_from_client_ip_port(to, host, path).await.0
}

/// [`get_from_client_ip`], and the client's port.
async fn get_from_client_ip_port(to: SocketAddr, host: &str, path: &str) -> (String, u16) {
    let mut s = connect_from_client_ip(to).await;
    let port = s.local_addr().unwrap().port();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .expect("response within 20 s")
        .unwrap();
    (String::from_utf8_lossy(&out).into_owned(), port)
}

fn body(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_send_proxy_v1_and_v2_give_the_client_address_to_an_accept_proxy_listener() {
    let test = "haproxy_send_proxy_v1_and_v2_give_the_client_address_to_an_accept_proxy_listener";
    let backend = Backend::start("echo").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let (listen, admin) = (free_addr(), free_addr());
    let config = format!(
        "[[listener]]\nname = \"behind-haproxy\"\nlisten = \"{listen}\"\naccept_proxy = true\naccept_proxy_from = [\"127.0.0.0/8\"]\n\n\
         [admin]\nlisten = \"{admin}\"\n\n[global]\naccess_log = \"{}\"\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        log.display(),
        node_toml("n1", backend.addr, "www")
    );
    let proxy = Proxy::start(&config, &[admin]);
    let (v1, v2) = (free_addr(), free_addr());
    let Some(_haproxy) = Haproxy::start(
        test,
        dir.path(),
        &format!(
            "global\n    maxconn 100\n\ndefaults\n    mode http\n    timeout connect 5s\n    \
             timeout client 30s\n    timeout server 30s\n\n\
             frontend v1\n    bind {v1}\n    default_backend v1\n\n\
             frontend v2\n    bind {v2}\n    default_backend v2\n\n\
             backend v1\n    server rdmalb {listen} send-proxy\n\n\
             backend v2\n    server rdmalb {listen} send-proxy-v2\n"
        ),
        &[v1, v2],
    ) else {
        return;
    };
    for front in [v1, v2] {
        let resp = get_from_client_ip(front, "www.example.com", "/who").await;
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "{resp}\n{}",
            proxy.stderr_text()
        );
        let headers = echoed_headers(body(&resp));
        assert_eq!(echoed(&headers, "x-forwarded-for"), [CLIENT_IP], "{resp}");
        let forwarded = echoed(&headers, "forwarded").join(",");
        assert!(
            forwarded.starts_with(&format!("for={CLIENT_IP};")),
            "{resp}"
        );
    }
    assert!(
        proxy.wait_for_text(&log, &format!("{CLIENT_IP}:")),
        "the access log shows the client address:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_proxy_v1_and_v2_give_the_client_address_to_nginx() {
    let dir = tempfile::tempdir().unwrap();
    let app = free_addr();
    let site = format!(
        "server {{\n    listen {app} proxy_protocol;\n    location / {{\n        \
         default_type text/plain;\n        \
         return 200 \"pp=$proxy_protocol_addr:$proxy_protocol_port peer=$remote_addr\\n\";\n    }}\n}}\n"
    );
    let Some(_nginx) = GroupNginx::start_with(dir.path(), app, &site) else {
        return;
    };
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[health]\ninterval = \"100ms\"\n\n\
         [[site]]\nname = \"one\"\nhosts = [\"v1.test\"]\n\n\
         [[site]]\nname = \"two\"\nhosts = [\"v2.test\"]\n\n\
         [[node]]\nname = \"v1\"\naddress = \"{app}\"\nsite = \"one\"\nsend_proxy = \"v1\"\n\n\
         [[node]]\nname = \"v2\"\naddress = \"{app}\"\nsite = \"two\"\nsend_proxy = \"v2\"\n"
    );
    let proxy = Proxy::start(&config, &[addr, admin]);
    for host in ["v1.test", "v2.test"] {
        // Three clients in turn: a later one must not ride on an earlier
        // one's upstream connection, whose PROXY header named that client
        // (its port tells them apart).
        for _ in 0..3 {
            let (resp, port) = get_from_client_ip_port(addr, host, "/").await;
            assert!(
                resp.starts_with("HTTP/1.1 200"),
                "{resp}\n{}",
                proxy.stderr_text()
            );
            assert_eq!(
                body(&resp),
                format!("pp={CLIENT_IP}:{port} peer=127.0.0.1\n"),
                "{resp}"
            );
        }
    }
    // nginx accepts the checks' headers (v1 UNKNOWN, v2 LOCAL): after two
    // checks each, both nodes are up and their last check passed.
    let status = eventually(
        "two checks of each node",
        std::time::Duration::from_secs(30),
        || async {
            let s = admin_status(admin).await;
            let checked = s["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["health"]["checks_total"].as_u64().unwrap_or(0) >= 2);
            if checked {
                Ok(s)
            } else {
                Err(format!("{s:#}"))
            }
        },
    )
    .await;
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["state"], "up", "{status:#}");
        assert_eq!(n["health"]["last_check_ok"], true, "{status:#}");
    }
}

#[tokio::test]
async fn accept_proxy_closes_connections_without_a_valid_header_and_keeps_serving() {
    let backend = Backend::start("echo").await;
    let (listen, admin) = (free_addr(), free_addr());
    let config = format!(
        "[[listener]]\nname = \"pp\"\nlisten = \"{listen}\"\naccept_proxy = true\naccept_proxy_from = [\"127.0.0.0/8\"]\n\n\
         [admin]\nlisten = \"{admin}\"\n\n\
         [global]\naccess_log = \"off\"\ntrusted_proxies = [\"192.0.2.0/24\"]\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", backend.addr, "www")
    );
    let proxy = Proxy::start(&config, &[admin]);
    let request = "GET / HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n";
    let refused: [&[u8]; 5] = [
        request.as_bytes(),
        b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 80\r\nGET / HTTP/1.1\r\n\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\nGET / HTTP/1.1\r\n\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x04\x01\x02\x03\x04GET / HTTP/1.1\r\n\r\n",
        b"PROXY TCP4 \xff\r\n",
    ];
    for bytes in refused {
        let mut s = TcpStream::connect(listen).await.unwrap();
        s.write_all(bytes).await.unwrap();
        let got = read_some(&mut s, 1).await;
        assert!(
            got.is_empty(),
            "{:?} got a response: {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&got)
        );
    }
    // A valid header: served, with the header's client address; UNKNOWN
    // keeps the real peer's. trusted_proxies judges the header's address:
    // 192.0.2.7 is trusted (its X-Forwarded-For is kept), 198.51.100.1
    // is not (replaced).
    let port = listen.port();
    let with_xff = request.replace("Connection", "X-Forwarded-For: 203.0.113.5\r\nConnection");
    let cases = [
        (
            format!("PROXY TCP4 192.0.2.7 127.0.0.1 4000 {port}\r\n{request}"),
            "192.0.2.7",
        ),
        (format!("PROXY UNKNOWN\r\n{request}"), "127.0.0.1"),
        (
            format!("PROXY TCP4 192.0.2.7 127.0.0.1 4000 {port}\r\n{with_xff}"),
            "203.0.113.5, 192.0.2.7",
        ),
        (
            format!("PROXY TCP4 198.51.100.1 127.0.0.1 4000 {port}\r\n{with_xff}"),
            "198.51.100.1",
        ),
    ];
    for (bytes, client) in cases {
        // Off the runtime: the backend answers on it.
        let resp = tokio::task::spawn_blocking(move || raw_exchange(listen, bytes.as_bytes()))
            .await
            .unwrap();
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "{resp}\n{}",
            proxy.stderr_text()
        );
        assert_eq!(
            echoed(&echoed_headers(body(&resp)), "x-forwarded-for"),
            [client],
            "{resp}"
        );
    }
    let metrics = admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            r#"rdmalb_client_errors_total{kind="proxy_header"} "#
        ),
        5.0,
        "{metrics}"
    );
}
