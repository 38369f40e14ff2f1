//! `[site.compression]` end to end: Debian's nginx serves the files, curl
//! (built with zlib, brotli and zstd) asks for each coding and decodes
//! what comes back, and every body must equal the file nginx served. Then
//! the responses that must go through untouched, a streamed response that
//! reaches the client while the node is still sending, and the CPU cap.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::haproxy::Haproxy;
use crate::support::*;

/// A text that compresses, about 60 KB.
fn page() -> String {
    (0..1500)
        .map(|i| format!("<p>row {i}: the quick brown fox jumps over the lazy dog</p>\n"))
        .collect()
}

struct Farm {
    _nginx: GroupNginx,
    _proxy: Proxy,
    addr: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

/// Debian's nginx serving the test's files in `dir/www` on a fresh port.
fn files(dir: &Path) -> Option<(GroupNginx, std::net::SocketAddr)> {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("page.html"), page()).unwrap();
    std::fs::write(www.join("small.html"), "<p>short</p>\n").unwrap();
    std::fs::write(www.join("data.json"), page().replace('<', "{")).unwrap();
    let png: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(www.join("image.png"), png).unwrap();
    let app = free_addr();
    let site = format!(
        "server {{\n listen {app};\n root {};\n types {{ text/html html; application/json json; image/png png; }}\n\
         location = /encoded {{ default_type text/html; add_header Content-Encoding br; return 200 \"{}\"; }}\n\
         location = /no-transform {{ default_type text/html; add_header Cache-Control no-transform; return 200 \"{}\"; }}\n}}\n",
        www.display(),
        "x".repeat(2000),
        "y".repeat(2000),
    );
    Some((GroupNginx::start_with(dir, app, &site)?, app))
}

/// nginx with the test's files behind rdmalb, `global` added to the
/// proxy's `[global]`.
fn farm(global: &str) -> Option<Farm> {
    let dir = tempfile::tempdir().unwrap();
    let (nginx, app) = files(dir.path())?;
    let (listen, addr, admin) = listener_toml();
    let config =
        www_config(&listen, global, app).replacen("[[node]]", "[site.compression]\n\n[[node]]", 1);
    let proxy = Proxy::start(&config, &[addr]);
    Some(Farm {
        _nginx: nginx,
        _proxy: proxy,
        addr,
        admin,
        dir,
    })
}

/// What curl got: the header block (lower-cased) and the body as decoded.
struct Got {
    head: String,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim())
    }
}

fn curl(dir: &Path, args: &[&str]) -> Got {
    let head = dir.join("head.txt");
    let body = dir.join("body.bin");
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .args(args)
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Got {
        head: std::fs::read_to_string(&head).unwrap().to_ascii_lowercase(),
        body: std::fs::read(&body).unwrap_or_default(),
    }
}

fn url(f: &Farm, path: &str) -> String {
    format!("http://{}{path}", f.addr)
}

const HOST: &str = "Host: www.example.com";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_coding_decodes_to_what_the_node_sent() {
    let Some(f) = farm("") else { return };
    let text = page().into_bytes();
    for (accept, coding) in [
        ("zstd", "zstd"),
        ("br", "br"),
        ("gzip", "gzip"),
        // curl's own list (deflate, gzip, br, zstd): the site's first choice.
        ("", "zstd"),
        ("gzip;q=1, br;q=0.5", "gzip"),
    ] {
        let mut args = vec!["--compressed", "-H", HOST];
        let ae = format!("Accept-Encoding: {accept}");
        if !accept.is_empty() {
            args.extend(["-H", &ae]);
        }
        let u = url(&f, "/page.html");
        args.push(&u);
        let got = curl(f.dir.path(), &args);
        assert_eq!(
            got.header("content-encoding"),
            Some(coding),
            "{accept}: {}",
            got.head
        );
        assert_eq!(got.body, text, "{accept}: decoded body differs");
        assert_eq!(got.header("vary"), Some("accept-encoding"), "{}", got.head);
        assert!(got.header("content-length").is_none(), "{}", got.head);
        assert!(got.header("accept-ranges").is_none(), "{}", got.head);
        assert!(
            got.header("etag").unwrap().starts_with("w/\""),
            "{}",
            got.head
        );
    }
    // JSON too, and over HTTP/2 (h2c).
    let u = url(&f, "/data.json");
    let got = curl(
        f.dir.path(),
        &["--compressed", "--http2-prior-knowledge", "-H", HOST, &u],
    );
    assert!(got.head.starts_with("http/2 200"), "{}", got.head);
    assert_eq!(got.header("content-encoding"), Some("zstd"), "{}", got.head);
    assert_eq!(got.body, page().replace('<', "{").into_bytes());

    let metrics = admin_text(f.admin, "/metrics").await;
    for coding in ["zstd", "br", "gzip"] {
        let key = format!("rdmalb_compressed_responses_total{{site=\"www\",coding=\"{coding}\"}}");
        assert!(metric(&metrics, &key) >= 1.0, "{key}:\n{metrics}");
    }
    let bytes_in = metric(
        &metrics,
        "rdmalb_compression_bytes_total{site=\"www\",direction=\"in\"}",
    );
    let bytes_out = metric(
        &metrics,
        "rdmalb_compression_bytes_total{site=\"www\",direction=\"out\"}",
    );
    assert!(bytes_in >= 6.0 * text.len() as f64, "{metrics}");
    assert!(
        bytes_out > 0.0 && bytes_out < bytes_in / 4.0,
        "in {bytes_in} out {bytes_out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_must_go_through_untouched_does() {
    let Some(f) = farm("") else { return };
    let d = f.dir.path();
    let plain = |path: &str, extra: &[&str]| {
        let u = url(&f, path);
        let mut args = vec!["-H", HOST, "-H", "Accept-Encoding: gzip, br, zstd"];
        args.extend_from_slice(extra);
        args.push(&u);
        curl(d, &args)
    };
    let www = d.join("www");
    // Too short, not a listed type, already encoded, no-transform, a range.
    let small = plain("/small.html", &[]);
    assert!(small.header("content-encoding").is_none(), "{}", small.head);
    assert_eq!(small.body, std::fs::read(www.join("small.html")).unwrap());
    let png = plain("/image.png", &[]);
    assert!(png.header("content-encoding").is_none(), "{}", png.head);
    assert_eq!(png.body, std::fs::read(www.join("image.png")).unwrap());
    let encoded = plain("/encoded", &[]);
    assert_eq!(
        encoded.header("content-encoding"),
        Some("br"),
        "{}",
        encoded.head
    );
    assert_eq!(encoded.body, "x".repeat(2000).into_bytes());
    let nt = plain("/no-transform", &[]);
    assert!(nt.header("content-encoding").is_none(), "{}", nt.head);
    assert_eq!(nt.body, "y".repeat(2000).into_bytes());
    let range = plain("/page.html", &["-H", "Range: bytes=10-99"]);
    assert!(range.head.starts_with("http/1.1 206"), "{}", range.head);
    assert!(range.header("content-encoding").is_none(), "{}", range.head);
    assert_eq!(range.body, page().as_bytes()[10..100]);
    // HEAD: the node's head as it is.
    let head = plain("/page.html", &["-I"]);
    assert!(head.header("content-encoding").is_none(), "{}", head.head);
    assert_eq!(
        head.header("content-length"),
        Some(page().len().to_string().as_str())
    );
    // HTTP/1.0: no chunked framing to send a compressed body of unknown
    // length.
    let old = plain("/page.html", &["--http1.0"]);
    assert!(old.header("content-encoding").is_none(), "{}", old.head);
    // A client that accepts no coding gets the file as it is, with Vary.
    let u = url(&f, "/page.html");
    let identity = curl(d, &["-H", HOST, &u]);
    assert!(identity.header("content-encoding").is_none());
    assert_eq!(identity.header("vary"), Some("accept-encoding"));
    assert_eq!(identity.body, page().into_bytes());
}

/// A node that sends a first part, then waits for the test before the
/// rest: the client must see the first part decoded while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_is_flushed_while_the_node_pauses() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let node = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_addr = node.local_addr().unwrap();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (mut s, _) = node.accept().await.unwrap();
        let mut buf = vec![0u8; 8192];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "client closed before its head");
            head.extend_from_slice(&buf[..n]);
        }
        let first = "event: one\n".repeat(40);
        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
        s.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n{}",
                chunk(&first)
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(30), go_rx).await;
        s.write_all(format!("{}0\r\n\r\n", chunk("event: two\n")).as_bytes())
            .await
            .unwrap();
        let _ = s.shutdown().await;
    });
    let (listen, addr, _) = listener_toml();
    let config = format!(
        "{listen}[global]\naccess_log = \"off\"\n\n[[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n[site.compression]\ncodings = [\"gzip\"]\n\n{}",
        node_toml("n1", node_addr, "www")
    );
    let _proxy = Proxy::start(&config, &[addr]);
    let mut curl = tokio::process::Command::new("curl")
        .args(["-sSN", "--compressed", "--max-time", "40", "-H", HOST])
        .arg(format!("http://{addr}/events"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run curl");
    let mut out = curl.stdout.take().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    while !seen.ends_with("event: one\n".repeat(40).as_bytes()) && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), out.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => {}
        }
    }
    assert_eq!(
        String::from_utf8_lossy(&seen),
        "event: one\n".repeat(40),
        "the first part did not reach the client while the node paused"
    );
    let _ = go_tx.send(());
    out.read_to_end(&mut seen).await.unwrap();
    assert!(curl.wait().await.unwrap().success());
    assert_eq!(
        String::from_utf8_lossy(&seen),
        format!("{}event: two\n", "event: one\n".repeat(40))
    );
    server.await.unwrap();
}

/// `global.compression_max_cpu = 1`: once the proxy is busy, new
/// responses go out as they are (with Vary), and they are still whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_its_cpu_cap_the_proxy_stops_compressing() {
    let Some(f) = farm("compression_max_cpu = 1\n") else {
        return;
    };
    let c = client();
    let page = page();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut plain = None;
    let mut compressed = 0;
    while plain.is_none() && Instant::now() < deadline {
        // Bounded bursts of 16 concurrent requests keep the proxy busy.
        let burst: Vec<_> = (0..16)
            .map(|_| {
                c.get(url(&f, "/page.html"))
                    .header("host", "www.example.com")
                    .header("accept-encoding", "gzip")
                    .send()
            })
            .collect();
        for r in futures_util::future::join_all(burst).await {
            let r = r.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            if r.headers().contains_key("content-encoding") {
                compressed += 1;
            } else if plain.is_none() {
                assert_eq!(r.headers()["vary"], "Accept-Encoding");
                plain = Some(r.text().await.unwrap());
            }
        }
    }
    let plain = plain.unwrap_or_else(|| {
        panic!("the proxy kept compressing above its CPU cap for 60 s ({compressed} compressed)")
    });
    assert_eq!(plain, page);
}

/// A hosting haproxy.cfg with `compression algo gzip` and a type list, run
/// by the real HAProxy and, through `rdmalb import`, by rdmalb, in front of
/// the same nginx: every request of paths × Accept-Encoding values gets the
/// same status, the same `Content-Encoding` and, decoded, the same body
/// from both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_compression_answers_as_haproxy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let Some((_nginx, app)) = files(d) else {
        return;
    };
    let cfg = |port: u16, types: &str| {
        format!(
            "global\n    maxcompcpuusage 100\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\n\
             frontend web\n    bind 127.0.0.1:{port}\n    compression algo gzip\n{types}    default_backend app\n\n\
             backend app\n    server s1 {app}\n"
        )
    };
    for types in ["    compression type text/html application/json\n", ""] {
        let (hp, rp) = (free_addr(), free_addr());
        let Some(_haproxy) = Haproxy::start(
            "imported_compression_answers_as_haproxy",
            d,
            &cfg(hp.port(), types),
            &[hp],
        ) else {
            return;
        };
        std::fs::write(d.join("site.cfg"), cfg(rp.port(), types)).unwrap();
        let out = std::process::Command::new(RDMALB)
            .current_dir(d)
            .args(["import", "site.cfg", "-o", "site.toml"])
            .output()
            .expect("run rdmalb import");
        let toml = std::fs::read_to_string(d.join("site.toml")).unwrap_or_default();
        let notes = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{notes}\n{toml}");
        assert!(toml.contains("[site.compression]"), "{toml}");
        let _proxy = Proxy::start(&toml, &[rp]);
        let mut compared = 0;
        for path in [
            "/page.html",
            "/small.html",
            "/data.json",
            "/image.png",
            "/encoded",
            "/no-transform",
        ] {
            for accept in [
                "gzip",
                "br",
                "gzip;q=0",
                "",
                "br, gzip",
                "deflate, gzip;q=0.5",
                "*",
            ] {
                let ae = format!("Accept-Encoding: {accept}");
                let ask = |addr: std::net::SocketAddr| {
                    let u = format!("http://{addr}{path}");
                    // `/encoded` says `br` over plain text: not decoded.
                    let decode = if path == "/encoded" {
                        "-g"
                    } else {
                        "--compressed"
                    };
                    let mut args = vec![decode, "-H", HOST, "-H", &ae];
                    if accept.is_empty() {
                        args.truncate(3);
                    }
                    args.push(&u);
                    curl(d, &args)
                };
                let (h, r) = (ask(hp), ask(rp));
                let what = format!(
                    "{path} with `{accept}`:\nhaproxy {}\nrdmalb {}",
                    h.head, r.head
                );
                assert_eq!(h.head.lines().next(), r.head.lines().next(), "{what}");
                assert_eq!(
                    h.header("content-encoding"),
                    r.header("content-encoding"),
                    "{what}"
                );
                assert_eq!(h.body, r.body, "{what}");
                compared += 1;
            }
        }
        assert_eq!(compared, 42);
    }
}
