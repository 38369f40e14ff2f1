//! The admin listener's stats page (`GET /stats`) in real headless
//! Chromium, against a real cluster: `rdmalb-testbed cluster` with three
//! sites on five testsrv nodes plus one idle node, each with its real
//! `rdmalb sidecar` (shm windows, so the load index and its parts are the
//! nodes' real ones), one `rdmalb proxy` routing by weighted least load with
//! its reconfiguration agent, and an open-loop replay as background traffic.
//!
//! The browser side is `tests/browser/stats_page.py` (Playwright for Python
//! driving Debian's `/usr/bin/chromium`); this test owns the cluster and the
//! traffic and tells the script, phase by phase, what the page must show:
//! every site and node once loaded; after a bounded burst of requests to
//! one site, slow requests held in flight on another, an admin move of the
//! idle node and a drain and a weight set through the runtime API: the
//! first site's request count up by at least the burst, a non-zero rate,
//! the held requests in flight, the move in the event list with the node
//! regrouped under its new site, the drained node and the new weight; after the cluster is
//! stopped, "unreachable". No console error, page error or failed request
//! may occur while the proxy is up.
//!
//! `RDMALB_SCREENSHOT=docs/img/stats-page.png` (relative to the workspace
//! root) saves the page as shown after the burst. Skips (fails under
//! `CI=true`) without Chromium or Playwright: `bash scripts/setup.sh`.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{client, eventually, get_host, skip, GroupChild, RDMALB};

const TEST: &str = "proxy::stats_page::the_stats_page_follows_traffic_and_moves_in_chromium";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Requests of the burst to `shop`.
const BURST: usize = 160;
/// Slow requests to `blog` held in flight while the page is watched (each
/// would take 20 s; the test drops them once the page has shown them).
const HELD: usize = 6;

/// The cluster: background load at 40 requests/s for at most 90 s (the test
/// stops it long before).
const SPEC: &str = r#"sites = ["shop", "blog", "news"]
split = "2:2:1"
idle = 1
mode = "rigid"
balance = "weighted-least-load"
duration = "90s"
requests = 100000
[trace]
kind = "zipf"
alpha = 0.5
files = 200
dynamic_share = 0.3
cost = "5ms"
[node]
slots = 4
queue = 16
max_cost = "30s"
cpu_fraction = 0.02
[load]
rate = 40.0
interval = "1s"
[guarantee]
shop = 20
blog = 10
[priority]
shop = 10
blog = 5
[proxy.admin]
token_file = "{dir}/admin.token"
[proxy.qos]
max_inflight = 64
"#;

/// The venv `scripts/setup.sh` installs Playwright into.
pub(crate) fn browser_python() -> PathBuf {
    let venv = std::env::var_os("RDMALB_BROWSER_VENV")
        .map_or_else(|| PathBuf::from("/opt/rdmalb/browser-venv"), PathBuf::from);
    venv.join("bin/python")
}

/// Whether Chromium and Playwright are here; skips `test` (printing why)
/// if not.
pub(crate) fn browser_available(test: &str) -> bool {
    if !Path::new(CHROMIUM).exists() {
        skip(
            test,
            &format!("{CHROMIUM} is not installed (apt-get install chromium)"),
        );
        return false;
    }
    let python = browser_python();
    let found = Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        skip(
            test,
            &format!(
                "Playwright for Python is not installed for {} (bash scripts/setup.sh)",
                python.display()
            ),
        );
    }
    found
}

/// Runs `tests/browser/<script>` once with `args`, in its own process
/// group (Chromium is its grandchild), and returns the JSON object it
/// prints last; bounded (120 s), its stderr in `dir/<script>.log`.
pub(crate) fn browser_report(dir: &Path, script: &str, args: &[String]) -> Value {
    use std::io::Read;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    let log_path = dir.join(format!("{script}.log"));
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut child = GroupChild::spawn_with_stdio(
        Command::new(browser_python())
            .arg(path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path).unwrap()),
    )
    .expect("start the browser script");
    let mut stdout = child.child().stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    let text = tokio::task::block_in_place(|| rx.recv_timeout(Duration::from_secs(120)))
        .unwrap_or_else(|e| panic!("{script} did not end ({e}):\n{}", log()));
    let status = child.child().wait().expect("wait for the browser script");
    assert!(status.success(), "{script}: {status}\n{}", log());
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: `{last}`\n{}", log()))
}

/// `rdmalb-testbed cluster` in its own process group; dropping it stops
/// the cluster (which stops its nodes, sidecars and proxy) and removes the
/// shm windows it may leave when cut short.
struct Cluster {
    child: Option<GroupChild>,
    out: PathBuf,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let spec = dir.join("spec.toml");
        std::fs::write(&spec, SPEC.replace("{dir}", &dir.display().to_string())).unwrap();
        let out = dir.join("out");
        let log = std::fs::File::create(dir.join("cluster.log")).unwrap();
        let child = GroupChild::spawn_with_stdio(
            Command::new(crate::support::testbed_bin())
                .args(["cluster", "-c"])
                .arg(&spec)
                .arg("-o")
                .arg(&out)
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log),
        )
        .expect("start rdmalb-testbed cluster");
        Cluster {
            child: Some(child),
            out,
        }
    }

    fn log(&self) -> String {
        let dir = self.out.parent().unwrap();
        std::fs::read_to_string(dir.join("cluster.log")).unwrap_or_default()
    }

    /// The proxy's listener and admin addresses, from the config the
    /// cluster generated (once it has).
    async fn proxy_addresses(&mut self) -> (SocketAddr, SocketAddr) {
        let conf = self.out.join("conf/proxy1.toml");
        let child = self.child.as_mut().unwrap();
        let text = eventually(
            "the cluster's proxy config",
            Duration::from_secs(60),
            || {
                let alive = !matches!(child.child().try_wait(), Ok(Some(_)));
                let text = std::fs::read_to_string(&conf);
                let missing = format!("{} not written yet", conf.display());
                async move {
                    match text {
                        Ok(t) if t.contains("[admin]") => Ok(t),
                        _ if !alive => Err("the cluster exited".into()),
                        _ => Err(missing),
                    }
                }
            },
        )
        .await;
        let t: toml::Table = toml::from_str(&text).unwrap();
        let listen = t["listener"][0]["listen"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let admin = t["admin"]["listen"].as_str().unwrap().parse().unwrap();
        (listen, admin)
    }

    /// Stops the cluster and everything it started.
    fn stop(&mut self) {
        let Some(child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        drop(child);
        // Windows the cluster names after its pid (cluster::procs).
        if let Ok(entries) = std::fs::read_dir("/dev/shm") {
            let prefix = format!("rdmalb-cluster-{pid}-");
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `tests/browser/stats_page.py` in its own process group (Chromium is its
/// grandchild); its stdout lines come through a channel so that every read
/// is bounded.
struct Browser {
    child: GroupChild,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Browser {
    fn start(dir: &Path, url: &str, screenshot: Option<&Path>) -> Browser {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/stats_page.py");
        let stderr = dir.join("browser.log");
        let mut cmd = Command::new(browser_python());
        cmd.arg(script)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some(p) = screenshot {
            cmd.arg("--screenshot").arg(p);
        }
        let mut child = GroupChild::spawn_with_stdio(&mut cmd).expect("start the browser script");
        let stdin = child.child().stdin.take().unwrap();
        let stdout = child.child().stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Browser {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to the browser script");
        self.stdin.flush().unwrap();
    }

    /// The script's report on `phase` (bounded: its own waits are 30 s at
    /// most, plus Chromium's start).
    fn phase(&self, phase: &str) -> Value {
        let line =
            tokio::task::block_in_place(|| self.lines.recv_timeout(Duration::from_secs(120)))
                .unwrap_or_else(|e| {
                    panic!(
                        "no `{phase}` report from the browser script ({e}):\n{}",
                        self.log()
                    )
                });
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["phase"], phase, "{v:#}");
        v
    }

    /// Waits (bounded) for the script to end by itself; asserts it did.
    fn finish(mut self) {
        for _ in 0..800 {
            match self.child.child().try_wait() {
                Ok(Some(status)) => {
                    assert!(status.success(), "browser script: {status}\n{}", self.log());
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(25)),
                Err(e) => panic!("browser script: {e}"),
            }
        }
        panic!("the browser script did not end:\n{}", self.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

fn problems(report: &Value) -> &Vec<Value> {
    report["problems"].as_array().unwrap()
}

/// The number a page cell shows (`"12"`, `"3.5"`).
fn figure(report: &Value, table: &str, row: &str, field: &str) -> f64 {
    let text = report["page"][table][row][field].as_str().unwrap_or("");
    text.parse()
        .unwrap_or_else(|_| panic!("{table}/{row}/{field} shows `{text}`: {:#}", report["page"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_page_follows_traffic_and_moves_in_chromium() {
    if !browser_available(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    let made = Command::new(RDMALB)
        .args(["psk", "--out"])
        .arg(&token)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let mut cluster = Cluster::start(dir.path());
    let (listen, admin) = cluster.proxy_addresses().await;
    // Every node up, and read by the agent (its load shows).
    let c = client();
    let status = eventually("every node up and read", Duration::from_secs(60), || {
        let c = c.clone();
        async move {
            let r = c.get(format!("http://{admin}/status")).send().await;
            let text = match r {
                Ok(r) => r.text().await.map_err(|e| e.to_string())?,
                Err(e) => return Err(e.to_string()),
            };
            let s: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
            let up = s["nodes"]
                .as_array()
                .is_some_and(|n| n.len() == 6 && n.iter().all(|n| n["state"] == "up"));
            let read = s["reconfig"]["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().all(|n| n["load"].is_number()));
            if up && read {
                Ok(s)
            } else {
                Err(format!("{s:#}"))
            }
        }
    })
    .await;
    let names = |key: &str| -> Vec<String> {
        status[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        status["nodes"][5]["assigned_site"],
        Value::Null,
        "n6 starts idle"
    );

    let screenshot = std::env::var_os("RDMALB_SCREENSHOT")
        .map(|p| Path::new(env!("CARGO_MANIFEST_DIR")).join(p));
    let mut browser = Browser::start(
        dir.path(),
        &format!("http://{admin}/stats"),
        screenshot.as_deref(),
    );
    browser.send(json!({ "sites": names("sites"), "nodes": names("nodes") }));
    let loaded = browser.phase("loaded");
    assert_eq!(loaded["ok"], true, "{loaded:#}\n{}", cluster.log());
    assert_eq!(loaded["status"], 200);
    let csp = loaded["headers"]["content-security-policy"]
        .as_str()
        .unwrap();
    assert!(
        csp.starts_with("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert!(problems(&loaded).is_empty(), "{:#}", loaded["problems"]);
    for n in names("nodes") {
        // The load index of every node is a figure (its window is read).
        let text = loaded["page"]["nodes"][&n]["index"].as_str().unwrap();
        assert!(text.parse::<f64>().is_ok(), "{n}: load index `{text}`");
    }
    let shop_before: f64 = ["n1", "n2"]
        .iter()
        .map(|n| figure(&loaded, "nodes", n, "requests"))
        .sum();

    // Slow requests held in flight on blog, a bounded burst to shop (8
    // clients, BURST requests in all), and the idle node moved to news by
    // hand.
    let held: Vec<_> = (0..HELD)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let path = format!("/dynamic/held?cost=20s&size=1k&n={i}");
                let _ = get_host(&c, listen, "blog.localhost", &path).await;
            })
        })
        .collect();
    let burst = (0..8).map(|w| {
        let c = c.clone();
        async move {
            let mut ok = 0;
            for i in (w..BURST).step_by(8) {
                let r = get_host(&c, listen, "shop.localhost", &format!("/static/1k?{i}")).await;
                ok += usize::from(r.status() == 200);
                let _ = r.bytes().await;
            }
            ok
        }
    });
    let ok: usize = futures_util::future::join_all(burst)
        .await
        .into_iter()
        .sum();
    assert_eq!(ok, BURST, "every request of the burst answered 200");
    let token = std::fs::read_to_string(&token).unwrap();
    // 409 while the node is not ACTIVE yet (its sidecar still applying
    // its start-up role): asked again.
    eventually("n6 moved to news", Duration::from_secs(30), || {
        let (c, token) = (c.clone(), token.trim().to_string());
        async move {
            let r = c
                .post(format!("http://{admin}/reconfig/move?node=n6&site=news"))
                .bearer_auth(token)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            match status.as_u16() {
                200 => Ok(()),
                409 => Err(text),
                _ => panic!("move: {status} {text}"),
            }
        }
    })
    .await;
    // An operator drains n2 and gives n1 three times the weight (runtime API).
    let set = c
        .post(format!("http://{admin}/runtime"))
        .bearer_auth(token.trim())
        .header("content-type", "application/x-rdmalb-commands")
        .body("set node n2 state drain\nset node n1 weight 3")
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200, "{}", set.text().await.unwrap());

    let at_least = shop_before + BURST as f64;
    browser.send(json!({ "expect": {
        "site": "shop", "requests_at_least": at_least, "moved_node": "n6", "moved_to": "news",
        "held_site": "blog", "inflight_at_least": HELD,
        "cells": [
            { "node": "n2", "field": "state", "text": "drain" },
            { "node": "n1", "field": "weight", "text": "3" },
        ],
    }}));
    let updated = browser.phase("updated");
    for h in held {
        h.abort();
    }
    assert_eq!(updated["ok"], true, "{updated:#}");
    assert!(updated["site_requests"].as_f64().unwrap() >= at_least);
    assert!(
        updated["max_site_rps"].as_f64().unwrap() > 0.0,
        "{updated:#}"
    );
    let inflight: f64 = ["n3", "n4"]
        .iter()
        .map(|n| figure(&updated, "nodes", n, "inflight"))
        .sum();
    assert!(inflight >= HELD as f64, "{:#}", updated["page"]["nodes"]);
    let nodes = &updated["page"]["nodes"];
    assert_eq!(nodes["n2"]["state"], "drain", "{nodes:#}");
    assert_eq!(nodes["n1"]["weight"], "3", "{nodes:#}");
    assert_eq!(nodes["n6"]["group"], "news", "{nodes:#}");
    let event = updated["page"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "admin_move" && e["node"] == "n6")
        .cloned()
        .unwrap_or_default();
    assert_eq!(event["path"], "idle → news", "{event}");
    assert_eq!(event["epoch"], "2", "{event}");
    assert!(problems(&updated).is_empty(), "{:#}", updated["problems"]);

    // The proxy goes away: the page says so.
    cluster.stop();
    browser.send(json!({ "stopped": true }));
    let gone = browser.phase("unreachable");
    assert_eq!(gone["ok"], true, "{gone:#}");
    assert!(
        gone["page"]["banner"]
            .as_str()
            .unwrap()
            .contains("does not answer"),
        "{gone:#}"
    );
    browser.finish();
}
