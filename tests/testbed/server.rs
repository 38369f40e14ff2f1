//! `rdmalb testsrv` as a real process: the capacity model (slots, queue,
//! 503 beyond), 421 for other sites, the pushed load, SIGHUP reloads of
//! the site file without dropping in-flight requests, a broken site file,
//! the pid file. No timing thresholds: "full" is observed through the
//! load the node pushes to a push collector played by the test.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{eventually, free_addr, signal, ChildGuard, SIGHUP, SIGTERM};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A push collector stand-in: answers `ok` and keeps the last line.
struct PushSink {
    addr: SocketAddr,
    last: Arc<Mutex<String>>,
}

impl PushSink {
    async fn start() -> PushSink {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let last = Arc::new(Mutex::new(String::new()));
        let l2 = last.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let last = l2.clone();
                tokio::spawn(async move {
                    let (r, mut w) = s.into_split();
                    let mut lines = BufReader::new(r).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        *last.lock().unwrap() = line;
                        if w.write_all(b"ok\n").await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        PushSink { addr, last }
    }

    /// The value of `key` in the last pushed line.
    fn get(&self, key: &str) -> Option<u64> {
        let line = self.last.lock().unwrap().clone();
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok())
    }
}

struct TestSrv {
    _guard: ChildGuard,
    pid: u32,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    stderr: PathBuf,
}

impl TestSrv {
    async fn start(extra: &str) -> TestSrv {
        let dir = tempfile::tempdir().unwrap();
        let addr = free_addr();
        std::fs::write(
            dir.path().join("site.toml"),
            "site = \"shop\"\nhosts = [\"shop.localhost\"]\n",
        )
        .unwrap();
        let conf = dir.path().join("testsrv.toml");
        std::fs::write(
            &conf,
            format!("name = \"n1\"\nlisten = \"{addr}\"\nsite_file = \"site.toml\"\npid_file = \"n1.pid\"\nmax_cost = \"60s\"\n{extra}"),
        )
        .unwrap();
        let stderr = dir.path().join("stderr.log");
        let child = Command::new(crate::support::testbed_bin())
            .args(["testsrv", "-c"])
            .arg(&conf)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn rdmalb testsrv");
        let pid = child.id();
        let srv = TestSrv {
            _guard: ChildGuard { child },
            pid,
            addr,
            dir,
            stderr,
        };
        eventually("testsrv listening", Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(addr)
                .await
                .map(|_| ())
                .map_err(|e| format!("{e}; log: {}", srv.log()))
        })
        .await;
        srv
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn get(&self, host: &str, path: &str) -> (u16, String, String, String) {
        let r = crate::support::client()
            .get(self.url(path))
            .header("host", host)
            .send()
            .await
            .expect("request");
        let h = |n: &str| {
            r.headers()
                .get(n)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        let (served_by, site) = (h("x-served-by"), h("x-site"));
        let status = r.status().as_u16();
        (status, served_by, site, r.text().await.unwrap_or_default())
    }

    fn write_site(&self, text: &str) {
        std::fs::write(self.dir.path().join("site.toml"), text).unwrap();
    }
}

#[tokio::test]
async fn serves_bodies_of_the_requested_size_with_node_and_site_headers() {
    let srv = TestSrv::start("").await;
    let (status, by, site, body) = srv.get("shop.localhost", "/static/4k").await;
    assert_eq!(
        (status, by.as_str(), site.as_str(), body.len()),
        (200, "n1", "shop", 4096)
    );
    let (status, _, _, body) = srv
        .get("SHOP.localhost:8080", "/dynamic/cgi?cost=1ms&size=3000")
        .await;
    assert_eq!((status, body.len()), (200, 3000));
    let (status, ..) = srv.get("shop", "/health").await;
    assert_eq!(status, 200, "the site name itself is a host of the site");
    assert_eq!(srv.get("shop.localhost", "/nope").await.0, 404);
    assert_eq!(srv.get("shop.localhost", "/static/huge").await.0, 400);
    assert_eq!(
        srv.get("shop.localhost", "/dynamic/x?cost=2m").await.0,
        400,
        "above max_cost"
    );
}

#[tokio::test]
async fn other_sites_get_421() {
    let srv = TestSrv::start("").await;
    let (status, by, site, body) = srv.get("blog.localhost", "/static/1k").await;
    assert_eq!((status, by.as_str(), site.as_str()), (421, "n1", "shop"));
    assert!(
        body.contains("serves site shop, not host blog.localhost"),
        "{body}"
    );
    assert_eq!(
        srv.get("blog.localhost", "/health").await.0,
        421,
        "health is per site too"
    );
}

#[tokio::test]
async fn slots_then_queue_then_503_and_the_load_is_pushed() {
    let sink = PushSink::start().await;
    let srv = TestSrv::start(&format!("slots = 2\nqueue = 2\npush = \"{}\"\n", sink.addr)).await;
    eventually("first push", Duration::from_secs(20), || async {
        match sink.get("capacity") {
            Some(2) => Ok(()),
            other => Err(format!("capacity {other:?}")),
        }
    })
    .await;
    // Within capacity (2 slots + 2 queued) every request is served.
    let quick: Vec<_> = (0..4)
        .map(|_| srv.get("shop.localhost", "/dynamic/a?cost=200ms"))
        .collect();
    for (status, ..) in futures_util::future::join_all(quick).await {
        assert_eq!(status, 200);
    }
    eventually("requests_total pushed", Duration::from_secs(20), || async {
        match sink.get("requests_total") {
            Some(4) => Ok(()),
            other => Err(format!("requests_total {other:?}")),
        }
    })
    .await;
    // Fill both slots and the queue with long requests.
    let srv = Arc::new(srv);
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let s = srv.clone();
        fillers.push(tokio::spawn(async move {
            s.get("shop.localhost", "/dynamic/long?cost=50s").await
        }));
    }
    eventually(
        "2 busy + 2 queued pushed",
        Duration::from_secs(20),
        || async {
            match (sink.get("busy"), sink.get("queue")) {
                (Some(2), Some(2)) => Ok(()),
                other => Err(format!("busy/queue {other:?}")),
            }
        },
    )
    .await;
    let (status, by, site, body) = srv.get("shop.localhost", "/static/1k").await;
    assert_eq!(
        (status, by.as_str(), site.as_str()),
        (503, "n1", "shop"),
        "{body}"
    );
    assert_eq!(
        srv.get("shop.localhost", "/health").await.0,
        200,
        "health takes no slot"
    );
    for f in fillers {
        f.abort();
    }
}

#[tokio::test]
async fn sighup_switches_site_without_dropping_in_flight_requests() {
    let sink = PushSink::start().await;
    let srv = Arc::new(TestSrv::start(&format!("slots = 16\npush = \"{}\"\n", sink.addr)).await);
    let mut inflight = Vec::new();
    for _ in 0..8 {
        let s = srv.clone();
        inflight.push(tokio::spawn(async move {
            s.get("shop.localhost", "/dynamic/x?cost=2s&size=2k").await
        }));
    }
    eventually("8 requests in service", Duration::from_secs(20), || async {
        match sink.get("busy") {
            Some(8) => Ok(()),
            other => Err(format!("busy {other:?}")),
        }
    })
    .await;
    srv.write_site("site = \"blog\"\nhosts = [\"blog.localhost\"]\n");
    signal(srv.pid, SIGHUP);
    eventually(
        "blog served after reload",
        Duration::from_secs(20),
        || async {
            match srv.get("blog.localhost", "/static/1k").await {
                (200, _, site, _) if site == "blog" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    for r in inflight {
        let (status, _, site, body) = r.await.unwrap();
        assert_eq!(
            (status, site.as_str(), body.len()),
            (200, "shop", 2048),
            "in-flight request dropped"
        );
    }
    assert_eq!(srv.get("shop.localhost", "/static/1k").await.0, 421);
    assert!(srv.log().contains("site file reloaded"));
}

#[tokio::test]
async fn broken_site_file_keeps_the_old_site() {
    let srv = TestSrv::start("").await;
    for broken in [
        "site = ",
        "site = \"shop\"\nhosts = [\"bad host\"]\n",
        "sight = \"blog\"\n",
    ] {
        srv.write_site(broken);
        let before = srv.log().matches("site file rejected").count();
        signal(srv.pid, SIGHUP);
        eventually("rejection logged", Duration::from_secs(20), || async {
            let n = srv.log().matches("site file rejected").count();
            if n > before {
                Ok(())
            } else {
                Err(srv.log())
            }
        })
        .await;
        let (status, _, site, _) = srv.get("shop.localhost", "/static/1k").await;
        assert_eq!((status, site.as_str()), (200, "shop"), "after {broken:?}");
    }
    assert!(
        srv.log().contains("site.toml"),
        "the error names the file:\n{}",
        srv.log()
    );
}

#[tokio::test]
async fn pid_file_written_and_removed_on_sigterm() {
    let srv = TestSrv::start("").await;
    let pid_file = srv.dir.path().join("n1.pid");
    let text = std::fs::read_to_string(&pid_file).unwrap();
    assert_eq!(text.trim(), srv.pid.to_string());
    signal(srv.pid, SIGTERM);
    eventually("pid file removed", Duration::from_secs(20), || async {
        if pid_file.exists() {
            Err("still there".to_string())
        } else {
            Ok(())
        }
    })
    .await;
}

#[test]
fn invalid_config_exits_2_naming_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.toml");
    std::fs::write(
        &conf,
        "name = \"n1\"\nlisten = \"nowhere\"\nsite_file = \"s.toml\"\nslots = 0\n",
    )
    .unwrap();
    let out = Command::new(crate::support::testbed_bin())
        .args(["testsrv", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("listen: `nowhere`") && err.contains("slots: 0 is out of range"),
        "{err}"
    );
}
