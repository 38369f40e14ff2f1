//! Issue 27's defects, each against the real `rdmalb proxy` binary: the
//! admin listener under clients that pipeline and never read, the
//! listening sockets while draining and across restarts, and who may send
//! a PROXY protocol header.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

/// A client that pipelines `GET /stats` and never reads its answers (a
/// tiny receive window, so the proxy's writes stall at once).
async fn flooder(addr: SocketAddr) -> Option<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.set_recv_buffer_size(2048).ok()?;
    let mut s = socket.connect(addr).await.ok()?;
    let burst = "GET /stats HTTP/1.1\r\nHost: admin\r\n\r\n".repeat(3000);
    let _ = tokio::time::timeout(Duration::from_millis(200), s.write_all(burst.as_bytes())).await;
    Some(s)
}

/// The status code of `GET path` on a new connection (`None`: no answer).
async fn get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .ok()?;
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .ok()?
        .ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Defect 1: 64 connections pipelining thousands of `GET /stats` and never
/// reading took every admin slot for ever; `rdmalb ctl` hung with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_the_admin_listener_locks_out_neither_ctl_nor_readers() {
    let www = Backend::start("www").await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    std::fs::write(&token, "k".repeat(40)).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (listen, addr, admin) = listener_toml();
    let config = format!(
        "{listen}token_file = \"{{dir}}/admin.token\"\n[global]\naccess_log = \"off\"\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n{}",
        node_toml("n1", www.addr, "www")
    )
    .replacen("\n\n[global]", "\n[global]", 1);
    let proxy = Proxy::start_in(dir, &config, &[addr, admin]);
    let mut flooders = Vec::new();
    for _ in 0..64 {
        if let Some(f) = flooder(admin).await {
            flooders.push(f);
        }
    }
    assert!(
        flooders.len() >= 63,
        "only {} flooders connected",
        flooders.len()
    );

    // `rdmalb ctl` carries the token: the reserved slot serves it now.
    let cfg = proxy.config.clone();
    let ctl = tokio::task::spawn_blocking(move || {
        Command::new(RDMALB)
            .args(["ctl", "-c"])
            .arg(&cfg)
            .args(["show", "info"])
            .stdin(Stdio::null())
            .output()
            .expect("run rdmalb ctl")
    });
    let out = tokio::time::timeout(Duration::from_secs(60), ctl)
        .await
        .expect("rdmalb ctl hung: the admin listener is locked out")
        .unwrap();
    assert!(
        out.status.success(),
        "rdmalb ctl failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        proxy.stderr_text()
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Pid:"));

    // Readers without a token: served once the stalled writes hit their
    // deadline (10 s), while the flooders are still connected.
    let mut status = None;
    for _ in 0..300 {
        status = get_status(admin, "/status").await;
        if status == Some(200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, Some(200), "{}", proxy.stderr_text());
    // Flooders still waiting in the accept queue may take the open slots
    // in turn meanwhile (each for at most 100 answers or 10 s).
    let mut metrics = String::new();
    for _ in 0..300 {
        match client().get(format!("http://{admin}/metrics")).send().await {
            Ok(r) if r.status() == 200 => {
                metrics = r.text().await.unwrap_or_default();
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(
        metric(&metrics, "rdmalb_admin_reserved_connections_total") >= 1.0,
        "{metrics}"
    );
    drop(flooders);
}

/// The inode of the socket listening on `addr` (127.0.0.1), from
/// /proc/net/tcp.
fn listening_inode(addr: SocketAddr) -> Option<String> {
    let want = format!("0100007F:{:04X}", addr.port());
    std::fs::read_to_string("/proc/net/tcp")
        .ok()?
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 9 && f[1] == want && f[3] == "0A")
        .map(|f| f[9].to_string())
}

/// How many descriptors of process `pid` refer to socket `inode`.
fn descriptors_of(pid: u32, inode: &str) -> usize {
    let link = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|t| t.to_string_lossy() == link)
                .count()
        })
        .unwrap_or(0)
}

/// Waits until the proxy's log says `n` restarts served; the last new pid.
async fn restarted(proxy: &Proxy, n: usize) -> u32 {
    eventually("the restart serves", Duration::from_secs(60), || async {
        let log = proxy.stderr_text();
        (log.matches("the new process serves").count() >= n)
            .then(|| super::restart::number_after(&log, "new_pid="))
            .flatten()
            .ok_or_else(|| log.lines().rev().take(5).collect::<Vec<_>>().join("\n"))
    })
    .await
}

/// Defect 3: the sockets a restarted process inherited kept close-on-exec
/// cleared, so the next restart's process got them a second time: one
/// more descriptor per listener per generation, and a listener removed
/// from the config kept listening on a copy no one accepted on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_generations_of_restarts_keep_one_descriptor_per_listener_and_close_removed_ones() {
    use super::restart::{Successor, SIGUSR2};
    let www = Backend::start("www").await;
    let (listen, web, admin) = listener_toml();
    let extra = free_addr();
    let config = |with_extra: bool| {
        let second = if with_extra {
            format!("[[listener]]\nname = \"extra\"\nlisten = \"{extra}\"\n\n")
        } else {
            String::new()
        };
        format!(
            "{second}{listen}[global]\naccess_log = \"off\"\nworkers = 2\nshutdown_grace = \"5s\"\n\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n{}",
            node_toml("n1", www.addr, "www")
        )
    };
    let mut proxy = Proxy::start(&config(true), &[web, extra, admin]);
    let first = proxy.pid();
    let inode = listening_inode(web).expect("the web listener's socket");
    let held = descriptors_of(first, &inode);
    assert!(held >= 1);

    // Generation 2: the same config.
    signal(first, SIGUSR2);
    let second = Successor(restarted(&proxy, 1).await);
    assert!(
        proxy.wait_exit().is_some_and(|s| s.success()),
        "{}",
        proxy.stderr_text()
    );
    assert_eq!(descriptors_of(second.0, &inode), held, "generation 2");

    // Generation 3: the extra listener removed.
    std::fs::write(&proxy.config, config(false)).unwrap();
    signal(second.0, SIGUSR2);
    let third = Successor(restarted(&proxy, 2).await);
    eventually("generation 2 exits", Duration::from_secs(30), || async {
        (!second.alive())
            .then_some(())
            .ok_or("still running".to_string())
    })
    .await;
    assert_eq!(
        descriptors_of(third.0, &inode),
        held,
        "generation 3 holds the web socket as often as the first did"
    );
    let e = tokio::net::TcpStream::connect(extra)
        .await
        .expect_err("the removed listener still accepts connections");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    let resp = get_host(&client(), web, "www.example.com", "/").await;
    assert_eq!(resp.status(), 200);
    signal(third.0, SIGTERM);
    eventually("generation 3 exits", Duration::from_secs(30), || async {
        (!third.alive())
            .then_some(())
            .ok_or("still running".to_string())
    })
    .await;
}

/// Connects to `to` from source address `from` (loopback has all of
/// 127.0.0.0/8), sends `bytes` and reads until the connection closes.
async fn exchange_from(from: &str, to: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = socket.connect(to).await.unwrap();
    let _ = s.write_all(bytes).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    got
}

/// Defect 4: any client that could reach an `accept_proxy` listener could
/// send its own PROXY header and claim any address (and with it
/// `trusted_proxies`, undoing the X-Forwarded-For protection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_peers_named_may_send_a_proxy_header() {
    let backend = Backend::start("echo").await;
    let (listen, admin) = (free_addr(), free_addr());
    let config = format!(
        "[[listener]]\nname = \"pp\"\nlisten = \"{listen}\"\naccept_proxy = true\n\
         accept_proxy_from = [\"127.0.0.2/32\"]\n\n\
         [admin]\nlisten = \"{admin}\"\n\n\
         [global]\naccess_log = \"off\"\ntrusted_proxies = [\"192.0.2.0/24\"]\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n{}",
        node_toml("n1", backend.addr, "www")
    );
    let proxy = Proxy::start(&config, &[admin]);
    let forged = format!(
        "PROXY TCP4 192.0.2.7 127.0.0.1 4000 {}\r\nGET / HTTP/1.1\r\nHost: www.example.com\r\n\
         X-Forwarded-For: 203.0.113.5\r\nConnection: close\r\n\r\n",
        listen.port()
    );
    // A peer outside the list: closed with no answer, its claim unheard.
    let got = exchange_from("127.0.0.1", listen, forged.as_bytes()).await;
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert_eq!(backend.requests(), 0);
    // The balancer named: served, with the address its header carries.
    let got = exchange_from("127.0.0.2", listen, forged.as_bytes()).await;
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{text}\n{}",
        proxy.stderr_text()
    );
    assert!(text.contains("203.0.113.5, 192.0.2.7"), "{text}");
    let metrics = admin_text(admin, "/metrics").await;
    assert_eq!(
        metric(
            &metrics,
            "rdmalb_client_errors_total{kind=\"proxy_untrusted\"}"
        ),
        1.0,
        "{metrics}"
    );
}
