//! The access log read by HAProxy's own log analyser, `halog` (Debian's
//! haproxy package): real nginx nodes, a dead node, bounded traffic with
//! errors and a client abort, then halog's status, server, termination and
//! URL reports checked against what the test sent.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

const HALOG: &str = "/usr/sbin/halog";

/// Runs `halog <args>` over `log`; returns (stdout, stderr).
fn halog(args: &[&str], log: &Path) -> (String, String) {
    let out = Command::new(HALOG)
        .args(args)
        .stdin(std::fs::File::open(log).expect("open access log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run halog");
    assert!(out.status.success(), "halog {args:?}: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// halog's report as `first column → the other columns`, comments skipped.
fn table(report: &str) -> BTreeMap<String, Vec<String>> {
    report
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace().map(str::to_string);
            (f.next().unwrap_or_default(), f.collect())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halog_reads_the_access_log_and_counts_what_was_sent() {
    const TEST: &str = "halog_reads_the_access_log_and_counts_what_was_sent";
    if !Path::new(HALOG).exists() {
        skip(
            TEST,
            &format!("{HALOG} is not installed (apt-get install haproxy)"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    // One nginx listening on two ports: two nodes. /big is a sparse 64 MiB
    // file, more than every socket buffer between nginx and the client, so
    // a client that stops reading and closes aborts a response in progress.
    let (a1, a2) = (free_addr(), free_addr());
    std::fs::create_dir_all(dir.path().join("www")).unwrap();
    std::fs::File::create(dir.path().join("www/big"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let site = format!(
        "server {{ listen {a1}; listen {a2}; root {d}/www;\n\
         location = /ok {{ return 200 \"ok\\n\"; }}\n\
         location = /health {{ return 200; }} }}\n"
    );
    let Some(_nginx) = GroupNginx::start_with(dir.path(), a1, &site) else {
        return;
    };
    let dead = free_addr();
    let (cert, key, der) = certificate(dir.path(), "www", &["www.example.com"]);
    let (listen, addr, admin) = listener_toml();
    let tls_addr = free_addr();
    let config = format!(
        "{listen}[[listener]]\nname = \"secure\"\nlisten = \"{tls_addr}\"\n\
         tls = {{ certificates = [{{ cert = \"{}\", key = \"{}\" }}] }}\n\n\
         [global]\naccess_log = \"{{dir}}/access.log\"\nbalance = \"roundrobin\"\n\n\
         [health]\npath = \"/health\"\npassive_failures = 0\n\n\
         [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n\
         [[site]]\nname = \"dead\"\nhosts = [\"dead.example.com\"]\n\n\
         {}{}{}check = false\n",
        cert.display(),
        key.display(),
        node_toml("n1", a1, "www"),
        node_toml("n2", a2, "www"),
        node_toml("n3", dead, "dead"),
    );
    let proxy = Proxy::start(&config, &[addr, tls_addr]);
    let log = proxy.dir.path().join("access.log");

    // What the test sends, bounded in count.
    const OK: usize = 40; // www /ok → 200
    const MISSING: usize = 6; // www /missing → nginx 404
    const NO_SITE: usize = 3; // unknown host → the proxy's 404
    const DEAD: usize = 5; // dead.example.com → 502 after one retry
    const TLS: usize = 4; // www /ok over TLS → 200
    let c = client();
    let get = |host: &str, path: &str| {
        c.get(format!("http://{addr}{path}"))
            .header("host", host)
            .send()
    };
    // Both nginx nodes up (per /status, which is not logged) before
    // counting per node.
    eventually(
        "n1 and n2 up",
        std::time::Duration::from_secs(20),
        || async move {
            let s = admin_status(admin).await;
            let up: Vec<_> = s["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["state"] == "up")
                .filter_map(|n| n["name"].as_str())
                .map(str::to_string)
                .collect();
            (up.contains(&"n1".to_string()) && up.contains(&"n2".to_string()))
                .then_some(())
                .ok_or(format!("up: {up:?}"))
        },
    )
    .await;
    for _ in 0..OK {
        assert_eq!(get("www.example.com", "/ok").await.unwrap().status(), 200);
    }
    for _ in 0..MISSING {
        assert_eq!(
            get("www.example.com", "/missing").await.unwrap().status(),
            404
        );
    }
    for _ in 0..NO_SITE {
        assert_eq!(
            get("nowhere.example.com", "/ok").await.unwrap().status(),
            404
        );
    }
    for _ in 0..DEAD {
        assert_eq!(get("dead.example.com", "/ok").await.unwrap().status(), 502);
    }
    let tls = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(reqwest::Certificate::from_der(&der).unwrap())
        .resolve("www.example.com", tls_addr)
        .build()
        .unwrap();
    for _ in 0..TLS {
        let url = format!("https://www.example.com:{}/ok", tls_addr.port());
        assert_eq!(tls.get(url).send().await.unwrap().status(), 200);
    }
    // A client that reads the head of /big and goes away.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: www.example.com\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &buf[..n.min(64)]
    );
    drop(s);

    let lines = OK + MISSING + NO_SITE + DEAD + TLS + 1;
    eventually(
        "every request logged",
        std::time::Duration::from_secs(20),
        || async {
            let n = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .count();
            (n >= lines)
                .then_some(())
                .ok_or(format!("{n} of {lines} lines"))
        },
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), lines, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!(" rdmalb[{}]: ", proxy.pid()))),
        "syslog prefix with our pid:\n{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains(" secure~ www/")).count(),
        TLS,
        "TLS frontends carry HAProxy's `~`:\n{text}"
    );

    // Status codes: no parsing error, every request counted once.
    let (st, err) = halog(&["-st"], &log);
    assert!(err.contains(&format!("{lines} lines in")), "{err}");
    assert!(
        err.contains(" 0 parsing errors"),
        "halog -st: {err}\n{text}"
    );
    let st = table(&st);
    let count = |t: &BTreeMap<String, Vec<String>>, k: &str| -> usize {
        t.get(k)
            .and_then(|v| v.first())
            .map_or(0, |v| v.parse().unwrap())
    };
    // The aborted download is logged with the status it had started.
    assert_eq!(count(&st, "200"), OK + TLS + 1, "{st:?}");
    assert_eq!(count(&st, "404"), MISSING + NO_SITE, "{st:?}");
    assert_eq!(count(&st, "502"), DEAD, "{st:?}");

    // Per server: `-srv` prints 1xx..5xx, other, total per backend/server.
    let (srv, err) = halog(&["-srv"], &log);
    assert!(err.contains(" 0 parsing errors"), "halog -srv: {err}");
    let srv = table(&srv);
    let col = |k: &str, i: usize| -> usize {
        srv.get(k)
            .and_then(|v| v.get(i))
            .map_or(0, |v| v.parse().unwrap())
    };
    // Columns after the name: 1xx 2xx 3xx 4xx 5xx other tot_req ...
    let www = |i| col("www/n1", i) + col("www/n2", i);
    assert!(col("www/n1", 6) > 0 && col("www/n2", 6) > 0, "{srv:?}");
    assert_eq!(www(1), OK + TLS + 1, "2xx on www: {srv:?}");
    assert_eq!(www(3), MISSING, "4xx on www: {srv:?}");
    assert_eq!(col("dead/n3", 4), DEAD, "{srv:?}");
    assert_eq!(col("dead/n3", 6), DEAD, "{srv:?}");
    assert_eq!(col("<NOSITE>/<NOSRV>", 3), NO_SITE, "{srv:?}");

    // Termination states: the abort, the failed connects, the rest normal.
    let (tc, err) = halog(&["-tc"], &log);
    assert!(err.contains(" 0 parsing errors"), "halog -tc: {err}");
    let tc = table(&tc);
    assert_eq!(count(&tc, "CD"), 1, "{tc:?}\n{text}");
    assert_eq!(count(&tc, "SC"), DEAD, "{tc:?}");
    assert_eq!(count(&tc, "PR"), NO_SITE, "{tc:?}");
    assert_eq!(count(&tc, "--"), lines - 1 - DEAD - NO_SITE, "{tc:?}");

    // URLs: request counts and errors (5xx or a -1 timer) per path.
    let (urls, err) = halog(&["-u"], &log);
    assert!(err.contains(" 0 parsing errors"), "halog -u: {err}");
    let by_url: BTreeMap<String, (usize, usize)> = urls
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.last()?.to_string(),
                (f[0].parse().ok()?, f[1].parse().ok()?),
            ))
        })
        .collect();
    assert_eq!(by_url["/ok"].0, OK + NO_SITE + DEAD + TLS, "{urls}");
    assert_eq!(by_url["/ok"].1, NO_SITE + DEAD, "{urls}");
    assert_eq!(by_url["/missing"], (MISSING, 0), "{urls}");
    assert_eq!(by_url["/big"].0, 1, "{urls}");

    // Connection counts: this request's connection is open on the process
    // and the listener, and a request routed to a site counts in its
    // in-flight requests, on the node that answered too.
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let n: Vec<usize> = f[15]
            .split('/')
            .map(|v| v.trim_start_matches('+').parse().unwrap())
            .collect();
        let (actconn, feconn, beconn, srv_conn) = (n[0], n[1], n[2], n[3]);
        assert!(actconn >= feconn && feconn >= 1, "{l}");
        if !f[8].starts_with("<NOSITE>") {
            assert!(beconn >= 1, "{l}");
        }
        if f[8].starts_with("www/") {
            assert!(beconn >= srv_conn && srv_conn >= 1, "{l}");
        }
        assert_eq!(f[16], "0/0", "no queue: {l}");
    }

    // Every failed connect was retried once on another node (HAProxy's
    // redispatch `+1`), and counted the node it failed on.
    let dead_lines: Vec<&str> = text.lines().filter(|l| l.contains(" dead/n3 ")).collect();
    assert_eq!(dead_lines.len(), DEAD);
    for l in dead_lines {
        let conns = l.split_whitespace().nth(15).unwrap();
        assert!(conns.ends_with("/+1"), "{l}");
    }
}
