//! The real sidecar end to end: started in-process (`Sidecar::start` and the
//! `run` entry point with a shutdown watch), its load block read through the
//! real shm and tcp transports while the published fields change, its admin
//! endpoint scraped over HTTP, and its start-up errors checked.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::eventually;
use rdmalb_sidecar::collect::push::{Client, PushSample};
use rdmalb_sidecar::{self as sidecar, config, Sidecar, SidecarError};
use rdmalb_window::layout::word;
use rdmalb_window::{
    read_load, site_table_hash, Expect, LoadBlock, LoadRead, Psk, ReadPolicy, RemoteWindow,
    ShmWindow, TcpWindow, WindowError,
};
use rdmalb_window::{RoleState, RoleWord, SiteSlot};

const SITES: [&str; 3] = ["shop", "blog", "news"];

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let psk = dir.path().join("cluster.psk");
        Psk::generate().write_new_file(&psk).unwrap();
        std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
        Setup { dir }
    }

    fn shm_path(&self) -> PathBuf {
        self.dir.path().join("window")
    }

    fn psk(&self) -> Psk {
        Psk::from_file(self.dir.path().join("cluster.psk")).unwrap()
    }

    /// Writes `sidecar.toml` with the common head and `body`; returns its path.
    fn config(&self, body: &str) -> PathBuf {
        let text = format!(
            "node = \"n-e2e\"\nnode_id = 5\nsites = [\"shop\", \"blog\", \"news\"]\npublish_interval = \"1ms\"\nstaleness = \"500ms\"\n{body}"
        );
        let p = self.dir.path().join("sidecar.toml");
        std::fs::write(&p, text).unwrap();
        p
    }
}

async fn get_json(url: &str) -> serde_json::Value {
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {text}"))
}

fn expect() -> Expect {
    Expect {
        node_id: Some(5),
        site_hash: Some(site_table_hash(&SITES)),
    }
}

fn policy() -> ReadPolicy {
    ReadPolicy {
        retries: 8,
        // Generous: machines running this suite are shared and noisy; the
        // test is about values, not latency.
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    }
}

async fn fresh(w: &dyn RemoteWindow) -> LoadBlock {
    match read_load(w, &policy()).await {
        LoadRead::Fresh(b) => b,
        other => panic!("{}: expected a fresh block, got {other:?}", w.peer()),
    }
}

/// Reads until `pred` holds (bounded: 10 s).
async fn until(w: &dyn RemoteWindow, what: &str, pred: impl Fn(&LoadBlock) -> bool) -> LoadBlock {
    let pred = &pred;
    eventually(
        &format!("{what} on {}", w.peer()),
        Duration::from_secs(10),
        || async move {
            // The window file exists a moment before the first publish (the
            // sidecar records its role first): not fresh yet is "not yet".
            let b = match read_load(w, &policy()).await {
                LoadRead::Fresh(b) => b,
                other => return Err(format!("not fresh yet: {other:?}")),
            };
            if pred(&b) {
                Ok(b)
            } else {
                Err(format!("last {b:?}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_publishes_live_load_over_shm_tcp_and_admin() {
    let s = Setup::new();
    let app = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let app_port = app.local_addr().unwrap().port();
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n[window.tcp]\nlisten = \"127.0.0.1:0\"\npsk_file = \"cluster.psk\"\n\
         [[collector]]\nkind = \"system\"\ninterval = \"20ms\"\napp_port = {app_port}\n\
         [[collector]]\nkind = \"push\"\nlisten = \"127.0.0.1:0\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
        s.shm_path().display()
    ));
    let sc = Sidecar::start(sidecar::check(&path).unwrap())
        .await
        .unwrap();
    let addrs = sc.addrs().clone();
    assert_eq!(addrs.shm.as_deref(), Some(s.shm_path().as_path()));
    let mode = std::fs::metadata(s.shm_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    // shm: the proxy-side mapping sees a fresh block whose timestamp moves.
    let shm = ShmWindow::open(s.shm_path(), &expect()).unwrap();
    let b1 = fresh(&shm).await;
    let b2 = until(&shm, "a newer timestamp", |b| {
        b.updated_at_ns > b1.updated_at_ns
    })
    .await;
    assert!(b2.seq > b1.seq);
    // The system collector's numbers arrive (memory is never 0 on a live box).
    let b = until(&shm, "memory from /proc", |b| b.sample.mem_used_ppm > 0).await;
    assert!(b.sample.mem_used_ppm <= 1_000_000);

    // push → shm.
    let mut push = Client::connect(&addrs.push[0]).await.unwrap();
    push.push(&PushSample {
        busy: Some(5),
        capacity: Some(10),
        queue: Some(2),
        requests_total: Some(100),
        connections: None,
        latency_us: None,
        queue_limit: None,
    })
    .await
    .unwrap();
    let b = until(&shm, "busy=5", |b| b.sample.app_busy == 5).await;
    assert_eq!(
        (
            b.sample.app_capacity,
            b.sample.app_queue_len,
            b.sample.requests_total
        ),
        (10, 2, 100)
    );

    // tcp: the authenticated responder serves the same block.
    let tcp = TcpWindow::connect(addrs.tcp.unwrap(), &s.psk(), 1, &expect())
        .await
        .unwrap();
    assert_eq!(fresh(&tcp).await.sample.app_busy, 5);
    push.push(&PushSample {
        busy: Some(9),
        ..Default::default()
    })
    .await
    .unwrap();
    let b = until(&tcp, "busy=9", |b| b.sample.app_busy == 9).await;
    assert_eq!(b.sample.app_capacity, 10, "partial push keeps capacity");
    assert_eq!(b.node_id, 5);

    // Connections to the app port, counted from /proc/net/tcp{,6}.
    let clients: Vec<std::net::TcpStream> = (0..3)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", app_port)).unwrap())
        .collect();
    until(&shm, "3 app connections", |b| {
        b.sample.active_connections == 3
    })
    .await;
    drop(clients);

    // A proxy with another site table is refused, naming both hashes.
    let wrong = Expect {
        node_id: Some(5),
        site_hash: Some(site_table_hash(&["shop", "news", "blog"])),
    };
    match ShmWindow::open(s.shm_path(), &wrong) {
        Err(WindowError::SiteTableMismatch { .. }) => {}
        other => panic!("expected a site-table mismatch, got {other:?}"),
    }
    match TcpWindow::connect(addrs.tcp.unwrap(), &Psk::generate(), 2, &expect()).await {
        Err(WindowError::Auth { .. })
        | Err(WindowError::Closed { .. })
        | Err(WindowError::Protocol { .. })
        | Err(WindowError::Io { .. }) => {}
        other => panic!("wrong key must not connect: {other:?}"),
    }

    // Admin: /status and /metrics over real HTTP.
    let admin = addrs.admin.unwrap();
    let http = reqwest::Client::new();
    let status = get_json(&format!("http://{admin}/status")).await;
    assert_eq!(status["node"], "n-e2e");
    assert_eq!(status["node_id"], 5);
    assert_eq!(status["load"]["fields"]["busy"], 9);
    assert_eq!(status["load"]["fresh"], true);
    // Without `site` the node starts idle; the sidecar initialises the role
    // word once (ACTIVE, epoch 1) and, with no [role], publishes it applied.
    assert_eq!(status["role"]["state"], "active");
    assert_eq!(status["role"]["site"], "idle");
    assert_eq!(status["role"]["epoch"], 1);
    assert_eq!(status["role_applied"], 1);
    assert_eq!(status["role_status"]["code"], "ok");
    assert_eq!(status["role_application"]["enabled"], false);
    let kinds: Vec<&str> = status["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["shm", "tcp"]);
    assert!(
        status["peers"]["tcp"][0]["connections"].as_u64().unwrap() >= 1,
        "{status}"
    );
    assert!(
        status["collectors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{status}"
    );

    // A proxy claims the node over tcp (remote CAS on the role word); /status
    // decodes it against the site table. Without [role] the sidecar cannot
    // apply it and says so (NO_TEMPLATE, still serving idle).
    let initial = RoleWord {
        site: SiteSlot::Idle,
        state: RoleState::Active,
        epoch: 1,
    };
    let claim = initial.next(SiteSlot::Site(1), RoleState::Switching);
    assert_eq!(
        tcp.compare_swap(word::ROLE, initial.encode(), claim.encode())
            .await
            .unwrap(),
        initial.encode()
    );
    let status = eventually("the claim refused", Duration::from_secs(10), || async {
        let st = get_json(&format!("http://{admin}/status")).await;
        if st["role_status"]["epoch"] == 2 && st["role_status"]["code"] == "no_template" {
            Ok(st)
        } else {
            Err(format!("{}", st["role_status"]))
        }
    })
    .await;
    assert_eq!(status["role"]["site"], "blog");
    assert_eq!(status["role"]["state"], "switching");
    assert_eq!(status["role"]["epoch"], 2);
    assert_eq!(status["role_status"]["serving"], "idle");
    assert_eq!(status["role_applied"], 1);

    let metrics = crate::support::admin_text(admin, "/metrics").await;
    let busy_line = metrics
        .lines()
        .find(|l| {
            l.starts_with("rdmalb_sidecar_load{")
                && l.contains("field=\"busy\"")
                && l.contains("node=\"n-e2e\"")
        })
        .unwrap_or_else(|| panic!("no busy gauge in:\n{metrics}"));
    assert!(busy_line.ends_with(" 9"), "{busy_line}");
    assert!(
        metrics.contains("rdmalb_sidecar_publishes_total{node=\"n-e2e\"}"),
        "{metrics}"
    );
    assert_eq!(
        http.get(format!("http://{admin}/nope"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // Stop: the window file is removed and the ports close.
    let tcp_addr = addrs.tcp.unwrap();
    drop(tcp);
    sc.stop().await;
    assert!(!s.shm_path().exists(), "window file left behind");
    assert!(
        std::net::TcpStream::connect(tcp_addr).is_err(),
        "tcp responder still listening"
    );
    assert!(
        std::net::TcpStream::connect(admin).is_err(),
        "admin still listening"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_collector_does_not_stop_publishing() {
    let s = Setup::new();
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n\
         [[collector]]\nkind = \"push\"\nlisten = \"127.0.0.1:0\"\n\
         [[collector]]\nkind = \"status\"\nurl = \"http://127.0.0.1:{dead_port}/nginx_status\"\nformat = \"nginx\"\ninterval = \"10ms\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
        s.shm_path().display()
    ));
    let sc = Sidecar::start(config::load(&path).unwrap()).await.unwrap();
    let mut push = Client::connect(&sc.addrs().push[0]).await.unwrap();
    push.push(&PushSample {
        busy: Some(4),
        ..Default::default()
    })
    .await
    .unwrap();
    let shm = ShmWindow::open(s.shm_path(), &expect()).unwrap();
    let b = until(&shm, "busy=4", |b| b.sample.app_busy == 4).await;
    until(&shm, "later blocks", |x| x.seq > b.seq + 10).await;

    let admin = sc.addrs().admin.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = get_json(&format!("http://{admin}/status")).await;
        let c = &st["collectors"][1];
        if c["ok"] == false {
            assert!(
                c["error"]
                    .as_str()
                    .unwrap()
                    .contains(&dead_port.to_string()),
                "{c}"
            );
            assert!(c["errors_total"].as_u64().unwrap() >= 1);
            assert_eq!(st["collectors"][0]["ok"], true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "status collector never reported failing: {st}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_until_shutdown_then_removes_its_window_file() {
    let s = Setup::new();
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\ninterval = \"10ms\"\n",
        s.shm_path().display()
    ));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(sidecar::run(path, rx));
    let deadline = Instant::now() + Duration::from_secs(10);
    let shm = loop {
        match ShmWindow::open(s.shm_path(), &expect()) {
            Ok(w) => break w,
            Err(e) => {
                assert!(Instant::now() < deadline, "window never appeared: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    until(&shm, "cpu from /proc", |b| b.sample.mem_used_ppm > 0).await;
    tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("run did not stop")
        .unwrap()
        .unwrap();
    assert!(!s.shm_path().exists());
    // A mapping held past shutdown stays valid memory and simply goes stale.
    let last = match read_load(&shm, &policy()).await {
        LoadRead::Fresh(b) | LoadRead::Stale(b) => b,
        other => panic!("{other:?}"),
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = match read_load(&shm, &policy()).await {
        LoadRead::Fresh(b) | LoadRead::Stale(b) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(last.seq, again.seq, "nothing publishes after shutdown");
}

#[tokio::test]
async fn start_up_errors_are_clear_and_leave_nothing_behind() {
    let s = Setup::new();
    // Admin port already taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\n[admin]\nlisten = \"127.0.0.1:{port}\"\n",
        s.shm_path().display()
    ));
    let e = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(e, SidecarError::Bind { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{port}"))
            && text.contains("admin endpoint")
            && text.contains("n-e2e"),
        "{text}"
    );
    assert!(
        !s.shm_path().exists(),
        "window file left behind after a failed start"
    );

    // Push port taken.
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"push\"\nlisten = \"127.0.0.1:{port}\"\n",
        s.shm_path().display()
    ));
    let text = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{text}"
    );
    assert!(!s.shm_path().exists());

    // Tcp responder port taken.
    let path = s.config(&format!(
        "[window.tcp]\nlisten = \"127.0.0.1:{port}\"\npsk_file = \"cluster.psk\"\n[[collector]]\nkind = \"system\"\n"
    ));
    let text = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("tcp responder") && text.contains(&port.to_string()),
        "{text}"
    );

    // shm path in a directory that does not exist.
    let path = s.config(
        "[window.shm]\npath = \"/nonexistent-dir/rdmalb-w\"\n[[collector]]\nkind = \"system\"\n",
    );
    let text = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("/nonexistent-dir/rdmalb-w"), "{text}");

    // A live sidecar already owns the window file: refused, and its file stays.
    let path = s.config(&format!(
        "[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\n",
        s.shm_path().display()
    ));
    let first = Sidecar::start(config::load(&path).unwrap()).await.unwrap();
    let text = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("in use"), "{text}");
    assert!(s.shm_path().exists());
    first.stop().await;
    drop(taken);
}

fn host_has_rdma() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

#[tokio::test]
async fn verbs_without_an_rdma_device_fails_naming_the_device_and_alternatives() {
    if host_has_rdma() {
        eprintln!("SKIP: this host has an RDMA device");
        return;
    }
    let s = Setup::new();
    // verbs is served alone (one atomicity domain per node).
    let path = s.config(
        "[window.verbs]\ncontrol = \"127.0.0.1:0\"\npsk_file = \"cluster.psk\"\ndevice = \"rxe9\"\n[[collector]]\nkind = \"system\"\n",
    );
    let e = Sidecar::start(config::load(&path).unwrap())
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(
            e,
            SidecarError::Window {
                source: WindowError::NoDevice { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        text.contains("verbs server") && text.contains("\"shm\"") && text.contains("\"tcp\""),
        "{text}"
    );
}
