//! Debian's tools against the stats socket, unchanged: `socat` drains and
//! re-enables a node while `wrk` loads the farm; `prometheus-haproxy-
//! exporter` exports the same metrics from rdmalb as from HAProxy; `hatop`
//! shows the farm and its disable key (F10) puts a node in maintenance.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{ask, csv_rows, socat, Cli, Farm};
use crate::support::*;

/// n1's `stot` and `scur` in one `show stat`.
fn n1_counts(cli: &Cli) -> (u64, u64) {
    let csv = ask(cli, b"show stat www 4 -1\n");
    let rows = csv_rows(&csv, &["svname", "stot", "scur"]);
    let n1 = rows.iter().find(|r| r[0] == "n1").expect("n1 row");
    (n1[1].parse().unwrap(), n1[2].parse().unwrap())
}

fn tool(test: &str, path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    skip(
        test,
        &format!("{path} is not installed (apt-get install {package})"),
    );
    false
}

#[test]
fn socat_drains_and_reenables_a_node_during_a_wrk_run() {
    let test = "socat_drains_and_reenables_a_node_during_a_wrk_run";
    if !tool(test, "/usr/bin/wrk", "wrk") {
        return;
    }
    let Some(farm) = Farm::start(test) else {
        return;
    };
    let Cli::Unix(admin) = &farm.admin.0 else {
        unreachable!()
    };
    // A bounded run: 2 connections, 6 seconds.
    // Stopped with its process group if the test fails before it ends.
    let mut wrk = GroupChild::spawn_with_stdio(
        Command::new("/usr/bin/wrk")
            .args(["-t1", "-c2", "-d6s", "-H", "Host: www.example.com"])
            .arg(format!("http://{}/", farm.web))
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("wrk");
    std::thread::sleep(Duration::from_millis(1500));
    let Some(answer) = socat(test, admin, "set server www/n1 state drain") else {
        return;
    };
    assert_eq!(answer, "\n");
    // Requests already sent to n1 may finish; no new one goes there.
    let (at_drain, in_flight) = n1_counts(&farm.admin.0);
    std::thread::sleep(Duration::from_secs(2));
    let (drained, _) = n1_counts(&farm.admin.0);
    assert!(
        drained <= at_drain + in_flight,
        "n1 took new requests while drained: {at_drain} (+{in_flight} in flight) -> {drained}"
    );
    assert_eq!(socat(test, admin, "enable server www/n1").unwrap(), "\n");
    let mut report = String::new();
    wrk.child()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut report)
        .unwrap();
    let status = wrk.child().wait().unwrap();
    assert!(status.success(), "wrk: {report}");
    assert!(!report.contains("Non-2xx"), "failed requests: {report}");
    assert!(
        !report.contains("Socket errors"),
        "failed requests: {report}"
    );
    let (after, _) = n1_counts(&farm.admin.0);
    assert!(
        after > drained,
        "n1 took nothing once enabled again: {report}"
    );
    assert!(report.contains("requests in"), "{report}");
}

/// The exporter's `haproxy_*` series: each metric name with its label
/// names and the values of the labels naming farm objects (backend,
/// frontend, server, code).
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with("haproxy_") && !l.starts_with("haproxy_exporter_"))
        .map(|l| {
            let head = l.rsplit_once(' ').map_or(l, |(h, _)| h);
            match head.split_once('{') {
                // haproxy_version_info's label values are each product's.
                Some(("haproxy_version_info", _)) => {
                    "haproxy_version_info{release_date,version}".to_string()
                }
                _ => head.to_string(),
            }
        })
        .collect()
}

/// haproxy_exporter's metrics rdmalb's `show stat` leaves empty: request
/// bytes in, and the backend's own session limit, queue and session maxima.
const NOT_MEASURED: [&str; 7] = [
    "haproxy_backend_bytes_in_total",
    "haproxy_backend_limit_sessions",
    "haproxy_backend_max_queue",
    "haproxy_backend_max_session_rate",
    "haproxy_backend_max_sessions",
    "haproxy_frontend_bytes_in_total",
    "haproxy_server_bytes_in_total",
];

fn value(text: &str, series: &str) -> f64 {
    metric(text, &format!("{series} "))
}

struct Exporter {
    _child: GroupChild,
    addr: std::net::SocketAddr,
}

impl Exporter {
    fn start(socket: &Path) -> Exporter {
        let addr = free_addr();
        let child = GroupChild::spawn(
            Command::new("/usr/bin/prometheus-haproxy-exporter")
                .arg(format!("--web.listen-address={addr}"))
                .arg(format!("--haproxy.scrape-uri=unix:{}", socket.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .expect("start the exporter");
        Exporter {
            _child: child,
            addr,
        }
    }

    async fn scrape(&self) -> String {
        eventually("the exporter answers", Duration::from_secs(10), || async {
            match client()
                .get(format!("http://{}/metrics", self.addr))
                .send()
                .await
            {
                Ok(r) => Ok(r.text().await.unwrap()),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_exporter_exports_the_same_metrics_from_rdmalb_and_haproxy() {
    let test = "haproxy_exporter_exports_the_same_metrics_from_rdmalb_and_haproxy";
    if !tool(
        test,
        "/usr/bin/prometheus-haproxy-exporter",
        "prometheus-haproxy-exporter",
    ) {
        return;
    }
    let Some(farm) = Farm::start(test) else {
        return;
    };
    let (Cli::Unix(ours), Cli::Unix(theirs)) = &farm.admin else {
        unreachable!()
    };
    let (ours, theirs) = (Exporter::start(ours), Exporter::start(theirs));
    let (o, t) = (ours.scrape().await, theirs.scrape().await);
    assert_eq!(value(&o, "haproxy_up"), 1.0, "{o}");
    let (so, st) = (series(&o), series(&t));
    let extra: Vec<_> = so.difference(&st).collect();
    assert!(
        extra.is_empty(),
        "series only rdmalb's export has: {extra:#?}"
    );
    // What rdmalb does not measure yet: HAProxy's series it lacks, by
    // metric name. Checked both ways, so a column filled later must leave
    // this list (docs/operations.md names the same gaps).
    let missing: BTreeSet<&str> = st
        .difference(&so)
        .map(|s| s.split('{').next().unwrap())
        .collect();
    assert_eq!(missing, NOT_MEASURED.iter().copied().collect());
    // Values follow traffic: 8 requests, 6 of them to n1.
    let n1 = "haproxy_server_http_responses_total{backend=\"www\",code=\"2xx\",server=\"n1\"}";
    let before = value(&o, n1);
    let c = client();
    for _ in 0..8 {
        let r = c
            .get(format!("http://{}/", farm.web))
            .header("host", "www.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    let after = ours.scrape().await;
    assert_eq!(value(&after, n1) - before, 6.0, "{after}");
    assert_eq!(
        value(
            &after,
            "haproxy_frontend_http_requests_total{frontend=\"fe\"}"
        ) - value(&o, "haproxy_frontend_http_requests_total{frontend=\"fe\"}"),
        8.0
    );
}

/// The pane's text, with the reverse-video (selected) line marked `>`.
fn pane(session: &str) -> String {
    let out = Command::new("tmux")
        .args(["capture-pane", "-p", "-e", "-t", session])
        .output()
        .expect("tmux capture-pane");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let selected = l.contains("\x1b[7m");
            let plain: String = strip_escapes(l);
            if selected {
                format!(">{plain}")
            } else {
                format!(" {plain}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn strip_escapes(l: &str) -> String {
    let mut out = String::new();
    let mut chars = l.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A tmux session, killed on drop.
struct Tmux(String);

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

#[test]
fn hatop_shows_the_farm_and_its_disable_key_works() {
    let test = "hatop_shows_the_farm_and_its_disable_key_works";
    if !tool(test, "/usr/bin/hatop", "hatop") || !tool(test, "/usr/bin/tmux", "tmux") {
        return;
    }
    let Some(farm) = Farm::start(test) else {
        return;
    };
    let Cli::Unix(admin) = &farm.admin.0 else {
        unreachable!()
    };
    let session = Tmux(format!("rdmalb-hatop-{}", std::process::id()));
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session.0,
            "-x",
            "160",
            "-y",
            "50",
        ])
        .arg(format!("hatop -s {}", admin.display()))
        .status()
        .unwrap();
    assert!(started.success());
    let wait_for = |what: &str, ok: &dyn Fn(&str) -> bool| -> String {
        let mut text = String::new();
        for _ in 0..100 {
            text = pane(&session.0);
            if ok(&text) {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("hatop never showed {what}:\n{text}");
    };
    let row = |text: &str, name: &str| -> Option<String> {
        text.lines()
            .find(|l| l[1..].starts_with(&format!("{name} ")))
            .map(String::from)
    };
    let farm_shown = wait_for("the farm", &|t| {
        t.contains(">>> www")
            && t.contains(">>> fe")
            && ["n1", "n2", "BACKEND", "FRONTEND"]
                .iter()
                .all(|n| row(t, n).is_some())
    });
    assert!(
        row(&farm_shown, "n1").unwrap().contains(" 3 UP"),
        "{farm_shown}"
    );
    assert!(
        row(&farm_shown, "n2").unwrap().contains(" 1 UP"),
        "{farm_shown}"
    );
    assert!(farm_shown.contains("rdmalb Version"), "{farm_shown}");
    // Move the selection to n1 (bounded), then F10: disable on one backend.
    for _ in 0..10 {
        if row(&pane(&session.0), "n1").is_some_and(|l| l.starts_with('>')) {
            break;
        }
        Command::new("tmux")
            .args(["send-keys", "-t", &session.0, "Down"])
            .status()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        row(&pane(&session.0), "n1").unwrap().starts_with('>'),
        "{}",
        pane(&session.0)
    );
    Command::new("tmux")
        .args(["send-keys", "-t", &session.0, "F10"])
        .status()
        .unwrap();
    let shown = wait_for("n1 in maintenance", &|t| {
        row(t, "n1").is_some_and(|l| l.contains(" MAINT"))
    });
    assert!(row(&shown, "n2").unwrap().contains(" UP"), "{shown}");
    let csv = ask(&farm.admin.0, b"show stat www 4 -1\n");
    let states = csv_rows(&csv, &["svname", "status"]);
    assert_eq!(states, [["n1", "MAINT"], ["n2", "UP"]]);
}
