//! `monitor_uri` (HAProxy's `monitor-uri`) against the real HAProxy: the
//! same status, headers that matter and page for the monitor path, and any
//! other path still routed to the site.

use crate::support::haproxy::Haproxy;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_uri_answers_as_haproxys() {
    let test = "monitor_uri_answers_as_haproxys";
    let backend = Backend::start("app").await;
    let (web, haproxy_web) = (free_addr(), free_addr());
    let proxy = Proxy::start(
        &www_config(
            &format!(
                "[[listener]]\nname = \"fe\"\nlisten = \"{web}\"\nmonitor_uri = \"/haproxy_test\"\n\
                 monitor_fail = {{ site = \"www\", serving_below = 1 }}\n\n\
                 [[stats_socket]]\npath = \"{{dir}}/admin.sock\"\nlevel = \"admin\"\n\n"
            ),
            "",
            backend.addr,
        ),
        &[web],
    );
    let hdir = tempfile::tempdir().unwrap();
    let Some(_haproxy) = Haproxy::start(
        test,
        hdir.path(),
        &format!(
            "global\n    stats socket {}/admin.sock level admin\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind {haproxy_web}\n    monitor-uri /haproxy_test\n    \
             monitor fail if {{ nbsrv(www) lt 1 }}\n    default_backend www\n\
             backend www\n    server n1 {}\n",
            hdir.path().display(),
            backend.addr
        ),
        &[haproxy_web],
    ) else {
        return;
    };
    let c = client();
    let get = |addr: std::net::SocketAddr, path: &'static str| {
        let c = c.clone();
        async move {
            let r = c
                .get(format!("http://{addr}{path}"))
                .header("host", "www.example.com")
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let headers = ["content-type", "cache-control"]
                .map(|h| r.headers().get(h).map(|v| v.to_str().unwrap().to_string()));
            (status, headers, r.text().await.unwrap())
        }
    };
    let before = backend.requests();
    let ours = get(web, "/haproxy_test").await;
    assert_eq!(ours, get(haproxy_web, "/haproxy_test").await);
    assert_eq!(ours.0, 200);
    assert!(ours.2.contains("Service ready."), "{}", ours.2);
    // Answered by the proxy: the node saw none of them.
    assert_eq!(backend.requests(), before);
    // `monitor fail if { nbsrv(www) lt 1 }`: 503 while no node serves.
    let sockets = [
        proxy.dir.path().join("admin.sock"),
        hdir.path().join("admin.sock"),
    ];
    let ask = |command: &str| {
        for socket in &sockets {
            use std::io::{Read, Write};
            let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
            s.write_all(command.as_bytes()).unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).unwrap();
            assert_eq!(answer, "\n", "{command} on {}", socket.display());
        }
    };
    ask("set server www/n1 state maint\n");
    let failing = get(web, "/haproxy_test").await;
    assert_eq!(failing, get(haproxy_web, "/haproxy_test").await);
    assert_eq!(failing.0, 503);
    ask("set server www/n1 state ready\n");
    assert_eq!(get(web, "/haproxy_test").await, ours);
    // Another path, or the same with a query, goes to the site.
    assert_eq!(
        get(web, "/haproxy_test?x=1").await.0,
        get(haproxy_web, "/haproxy_test?x=1").await.0
    );
    assert!(backend.requests() > before);
}

/// GET `path` on `s` (keep-alive); the response as text, read until its
/// HTML page ends or the stream does.
async fn get_on(s: &mut tokio::net::TcpStream, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: www.example.com\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !text.ends_with(b"</body></html>\n") {
        match tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// While the old process drains after a restart, the connection still open
/// to it gets 503 from the monitor URI; the new process answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_uri_answers_503_while_the_process_drains() {
    let backend = Backend::start("app").await;
    let web = free_addr();
    let mut proxy = Proxy::start(
        &www_config(
            &format!("[[listener]]\nlisten = \"{web}\"\nmonitor_uri = \"/haproxy_test\"\n\n"),
            "shutdown_grace = \"20s\"",
            backend.addr,
        ),
        &[web],
    );
    let mut old = tokio::net::TcpStream::connect(web).await.unwrap();
    let ready = get_on(&mut old, "/haproxy_test").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    signal(proxy.pid(), super::restart::SIGUSR2);
    assert!(
        proxy.wait_for_text(&proxy.stderr, "the new process serves"),
        "{}",
        proxy.stderr_text()
    );
    let log = proxy.stderr_text();
    let new_pid = super::restart::number_after(&log, "new_pid=").unwrap_or_else(|| panic!("{log}"));
    let _successor = super::restart::Successor(new_pid);
    let draining = get_on(&mut old, "/haproxy_test").await;
    assert!(draining.starts_with("HTTP/1.1 503"), "{draining}");
    assert!(
        draining.contains("No server is available to handle this request."),
        "{draining}"
    );
    let mut new = tokio::net::TcpStream::connect(web).await.unwrap();
    let ready = get_on(&mut new, "/haproxy_test").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    assert!(
        proxy.wait_exit().is_some_and(|s| s.success()),
        "{}",
        proxy.stderr_text()
    );
}
