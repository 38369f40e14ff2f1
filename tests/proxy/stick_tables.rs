//! Stick tables against the real HAProxy (docs/rate-limits.md): the same
//! per-client rate limit in front of the same backend, the same request
//! sequence, the same 429s; then `show table` (the list, the entries, the
//! `data.` and `key` filters, the error texts) and `clear table` on both
//! stats sockets, compared with only the entry's address and its
//! remaining milliseconds (`exp=`) masked.

use std::net::SocketAddr;

use super::stats_socket::{ask, Cli};
use crate::support::haproxy::Haproxy;
use crate::support::*;

/// `0x55cd81a5b358:` → `PTR:`, `exp=59930` → `exp=N`.
fn masked(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.split(' ')
                .map(|w| {
                    if w.starts_with("0x") && w.ends_with(':') {
                        "PTR:".to_string()
                    } else if w.starts_with("exp=") {
                        "exp=N".to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn statuses(addr: SocketAddr, n: usize) -> Vec<u16> {
    let c = client();
    let mut out = Vec::new();
    for _ in 0..n {
        let r = c
            .get(format!("http://{addr}/"))
            .header("host", "www.example.com")
            .send()
            .await
            .expect("request");
        out.push(r.status().as_u16());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_and_clear_table_answer_as_haproxys() {
    let test = "show_and_clear_table_answer_as_haproxys";
    let backend = Backend::start("www/n1").await;
    let (web, haproxy_web) = (free_addr(), free_addr());
    let b = backend.addr;
    let proxy = Proxy::start(
        &format!(
            "[[listener]]\nname = \"web\"\nlisten = \"{web}\"\n\n\
             [[stats_socket]]\npath = \"{{dir}}/admin.sock\"\nlevel = \"admin\"\n\n\
             [global]\naccess_log = \"off\"\n\n\
             [[site]]\nname = \"www\"\nhosts = [\"www.example.com\"]\n\n\
             [[node]]\nname = \"n1\"\naddress = \"{b}\"\nsite = \"www\"\ncheck = false\n\n\
             [[stick_table]]\nname = \"web\"\nkey = \"ip\"\nsize = 102400\nexpire = \"60s\"\n\
             store = [\"gpc0\", \"conn_cur\", \"http_req_cnt\", \"http_req_rate(10s)\"]\n\n\
             [[stick_table]]\nname = \"other\"\nkey = \"string\"\nlen = 16\nsize = 10\nexpire = \"30s\"\nstore = [\"http_err_cnt\"]\n\n\
             [[request_rule]]\naction = \"track-sc0\"\nkey = \"src\"\ntable = \"web\"\n\n\
             [[request_rule]]\naction = \"deny\"\nstatus = 429\n\
             if = {{ fetch = \"sc0_http_req_rate\", values = [\"gt\", \"3\"] }}\n"
        ),
        &[web],
    );
    let hdir = tempfile::tempdir().unwrap();
    let h = hdir.path().display();
    let Some(_haproxy) = Haproxy::start(
        test,
        hdir.path(),
        &format!(
            "global\n    stats socket {h}/admin.sock level admin\n\
             defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend web\n    bind {haproxy_web}\n    \
             stick-table type ip size 100k expire 60s store gpc0,conn_cur,http_req_cnt,http_req_rate(10s)\n    \
             http-request track-sc0 src\n    \
             http-request deny deny_status 429 if {{ sc0_http_req_rate gt 3 }}\n    default_backend www\n\
             backend www\n    server n1 {b}\n\
             backend other\n    stick-table type string len 16 size 10 expire 30s store http_err_cnt\n"
        ),
        &[haproxy_web],
    ) else {
        return;
    };
    let ours = statuses(web, 6).await;
    assert_eq!(ours, statuses(haproxy_web, 6).await);
    assert_eq!(ours, [200, 200, 200, 429, 429, 429]);
    let (o, t) = (
        Cli::Unix(proxy.dir.path().join("admin.sock")),
        Cli::Unix(hdir.path().join("admin.sock")),
    );
    for command in [
        "show table",
        "show table web",
        "show table web data.http_req_cnt gt 5",
        "show table web data.http_req_cnt le 5",
        "show table web data.conn_cur eq 0 data.http_req_rate ge 6",
        "show table web key 127.0.0.1",
        "show table web key 127.0.0.9",
        "show table web data.http_err_cnt gt 1",
        "show table web data.gpc0 is 1",
        "show table web data.gpc0 gt x",
        "show table web bogus",
        "show table web key",
        "show table nope",
        "show table other",
        "clear table nope",
        "clear table web key 127.0.0.1",
        "show table web",
    ] {
        let input = format!("{command}\n");
        let (ours, theirs) = (ask(&o, input.as_bytes()), ask(&t, input.as_bytes()));
        assert_eq!(
            masked(&ours),
            masked(&theirs),
            "answers to `{command}` differ"
        );
    }
    // After the clear, the client starts over on both.
    assert_eq!(statuses(web, 1).await, statuses(haproxy_web, 1).await);
}
