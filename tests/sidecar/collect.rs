//! Collectors against real sources: /proc, cgroup files (a fake directory
//! with real-format files, and the machine's own cgroup v2 tree when there
//! is one), real HTTP status pages, and the push protocol end to end.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmalb_sidecar::collect::cgroup::CgroupCollector;
use rdmalb_sidecar::collect::push::{self, Client, PushError, PushSample};
use rdmalb_sidecar::collect::status::StatusCollector;
use rdmalb_sidecar::collect::system::SystemCollector;
use rdmalb_sidecar::collect::{Field, Slot};
use rdmalb_sidecar::config::{self, PushListen, StatusFormat};

fn system(app_port: Option<u16>, interfaces: Option<Vec<String>>) -> SystemCollector {
    SystemCollector::new(config::SystemCollector {
        interval: Duration::from_millis(100),
        proc_root: PathBuf::from("/proc"),
        app_port,
        interfaces,
    })
}

fn burn(d: Duration) {
    let end = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < end {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

#[test]
fn system_collector_reads_plausible_values_from_real_proc() {
    let mut c = system(None, Some(vec!["lo".into()]));
    let first = c.sample().unwrap();
    // Levels are there at once, rates only from the second sample on.
    let mem = first.get(Field::Mem).unwrap();
    assert!(mem > 0 && mem <= 1_000_000, "mem {mem}");
    assert!(first.get(Field::RunQueue).is_some());
    assert_eq!(first.get(Field::Cpu), None);
    assert_eq!(first.get(Field::NetRx), None);

    // Make some CPU and loopback traffic between the samples.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0;
        while n < 4 << 20 {
            let got = std::io::Read::read(&mut s, &mut buf).unwrap();
            if got == 0 {
                break;
            }
            n += got;
        }
        n
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let chunk = vec![7u8; 1 << 16];
    for _ in 0..64 {
        s.write_all(&chunk).unwrap();
    }
    drop(s);
    assert_eq!(t.join().unwrap(), 4 << 20);
    burn(Duration::from_millis(200));

    let second = c.sample().unwrap();
    let cpu = second.get(Field::Cpu).expect("cpu after two samples");
    assert!(cpu > 0 && cpu <= 1_000_000, "cpu {cpu}");
    // 4 MiB went over lo between the samples: the byte counters moved by at
    // least that much, so the rate is positive in both directions.
    assert!(second.get(Field::NetRx).unwrap() > 0);
    assert!(second.get(Field::NetTx).unwrap() > 0);
    let irq = second.get(Field::IrqRate).expect("irq rate");
    assert!(irq < 100_000_000, "irq rate {irq}");
    assert_eq!(
        second.get(Field::Connections),
        None,
        "no app_port configured"
    );
}

#[test]
fn system_collector_counts_established_connections_to_the_app_port() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut c = system(Some(port), None);
    assert_eq!(c.sample().unwrap().get(Field::Connections), Some(0));

    let clients: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let accepted: Vec<TcpStream> = (0..5).map(|_| l.accept().unwrap().0).collect();
    // Only the server ends (local port = app port) count, not the clients.
    assert_eq!(c.sample().unwrap().get(Field::Connections), Some(5));

    drop(clients);
    drop(accepted);
    // Closed sockets leave ESTABLISHED at once (FIN_WAIT / TIME_WAIT / gone).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = c.sample().unwrap().get(Field::Connections).unwrap();
        if n == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "still {n} established");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn system_collector_fails_cleanly_on_a_missing_proc() {
    let mut c = SystemCollector::new(config::SystemCollector {
        interval: Duration::from_millis(100),
        proc_root: PathBuf::from("/nonexistent-proc"),
        app_port: Some(80),
        interfaces: None,
    });
    let e = c.sample().unwrap_err().to_string();
    assert!(e.contains("/nonexistent-proc/stat"), "{e}");
}

#[test]
fn system_collector_survives_garbage_proc_files() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("stat"),
        "cpu  1 2 3 4 5 6 7 8\nprocs_running 2\n",
    )
    .unwrap();
    std::fs::write(
        d.path().join("meminfo"),
        "MemTotal: 1000 kB\nMemAvailable: 250 kB\n",
    )
    .unwrap();
    for f in ["interrupts", "softirqs", "loadavg"] {
        std::fs::write(d.path().join(f), "\u{1}\u{2} garbage ::: \n").unwrap();
    }
    std::fs::create_dir(d.path().join("net")).unwrap();
    std::fs::write(d.path().join("net/dev"), "truncated").unwrap();
    std::fs::write(d.path().join("net/tcp"), "sl local\n 0: zz:zz 1 01\n").unwrap();
    let mut c = SystemCollector::new(config::SystemCollector {
        interval: Duration::from_millis(100),
        proc_root: d.path().to_path_buf(),
        app_port: Some(80),
        interfaces: None,
    });
    let r = c.sample().unwrap();
    assert_eq!(r.get(Field::Mem), Some(750_000));
    assert_eq!(r.get(Field::RunQueue), Some(1000));
    assert_eq!(r.get(Field::Connections), Some(0));
    let r = c.sample().unwrap();
    assert_eq!(r.get(Field::NetRx), None);
    assert_eq!(r.get(Field::IrqRate), None);
    // Same counters twice: no CPU time passed in this fake /proc.
    assert_eq!(r.get(Field::Cpu), None);
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn cgroup(path: &Path, proc_root: &Path, cpus: Option<f64>) -> CgroupCollector {
    CgroupCollector::new(config::CgroupCollector {
        interval: Duration::from_millis(100),
        path: path.to_path_buf(),
        cpus,
        proc_root: proc_root.to_path_buf(),
    })
}

#[test]
fn cgroup_collector_on_a_fake_cgroup_directory() {
    let cg = tempfile::tempdir().unwrap();
    let proc_root = tempfile::tempdir().unwrap();
    write(
        proc_root.path(),
        "meminfo",
        "MemTotal:        1048576 kB\nMemAvailable: 1 kB\n",
    );
    write(
        cg.path(),
        "cpu.stat",
        "usage_usec 1000000\nuser_usec 900000\nsystem_usec 100000\n",
    );
    write(cg.path(), "cpu.max", "50000 100000\n");
    write(cg.path(), "memory.current", "268435456\n");
    write(cg.path(), "memory.max", "1073741824\n");
    let mut c = cgroup(cg.path(), proc_root.path(), None);

    // 100 ms of CPU time over at least 200 ms of wall time at a 0.5-CPU
    // quota: at most 100_000 / (200_000 * 0.5) = 100% of the quota, and at
    // least that over the whole wall time we measure around both samples.
    let t0 = Instant::now();
    let first = c.sample().unwrap();
    assert_eq!(first.get(Field::Mem), Some(250_000));
    assert_eq!(first.get(Field::Cpu), None, "cpu needs two samples");
    std::thread::sleep(Duration::from_millis(200));
    write(cg.path(), "cpu.stat", "usage_usec 1100000\n");
    let r = c.sample().unwrap();
    let wall_us = t0.elapsed().as_micros() as f64;
    let cpu = r.get(Field::Cpu).unwrap();
    let upper = 100_000.0 / (200_000.0 * 0.5) * 1e6;
    let lower = 100_000.0 / (wall_us * 0.5) * 1e6;
    assert!(
        cpu as f64 <= upper + 1.0 && cpu as f64 >= lower - 1.0,
        "cpu {cpu} not in [{lower}, {upper}]"
    );

    // No quota: the cpuset decides; no memory limit: MemTotal does.
    write(cg.path(), "cpu.max", "max 100000\n");
    write(cg.path(), "cpuset.cpus.effective", "0-3\n");
    write(cg.path(), "memory.max", "max\n");
    write(cg.path(), "memory.current", "536870912\n");
    std::thread::sleep(Duration::from_millis(50));
    let r = c.sample().unwrap();
    assert_eq!(r.get(Field::Cpu), Some(0), "usage did not move");
    assert_eq!(r.get(Field::Mem), Some(500_000));

    // A counter that went backwards (cgroup recreated) gives no rate.
    write(cg.path(), "cpu.stat", "usage_usec 5\n");
    assert_eq!(c.sample().unwrap().get(Field::Cpu), None);

    // The cgroup disappears: an error naming the file, no panic.
    drop(cg);
    let e = c.sample().unwrap_err().to_string();
    assert!(e.contains("cpu.stat"), "{e}");
}

#[test]
fn cgroup_collector_rejects_a_non_cgroup_directory() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "cpu.stat", "this is not a cgroup\n");
    let e = cgroup(d.path(), Path::new("/proc"), None)
        .sample()
        .unwrap_err()
        .to_string();
    assert!(e.contains("usage_usec"), "{e}");
}

/// The machine's cgroup v2 root (pure v2, or the hybrid `unified` mount).
fn cgroup2_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.controllers").exists() && p.join("cpu.stat").exists())
}

#[test]
fn cgroup_collector_on_the_real_cgroup2_tree() {
    let Some(root) = cgroup2_root() else {
        eprintln!("SKIP: no cgroup v2 hierarchy with cpu.stat on this machine");
        return;
    };
    // Our own cgroup (`0::/path` in /proc/self/cgroup) when it has cpu.stat,
    // else the root.
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("0::")
                    .map(|p| p.trim_start_matches('/').to_string())
            })
        })
        .map(|rel| root.join(rel))
        .filter(|p| p.join("cpu.stat").exists())
        .unwrap_or(root);
    let mut c = cgroup(&own, Path::new("/proc"), None);
    c.sample().unwrap();
    burn(Duration::from_millis(200));
    let r = c.sample().unwrap();
    // We burnt CPU inside this cgroup (or below the root): usage moved.
    let cpu = r.get(Field::Cpu).expect("cpu from real cpu.stat");
    let ncpu = std::thread::available_parallelism().unwrap().get() as u64;
    assert!(
        cpu > 0 && cpu <= 1_000_000 * ncpu,
        "cpu {cpu} ({})",
        own.display()
    );
}

// ---- status pages ----

/// A real HTTP/1.1 server (hyper) answering every request with `status` and `body`.
struct Page {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn serve_page(status: u16, body: &'static str) -> Page {
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        loop {
            let (s, _) = tokio::select! {
                _ = &mut stopped => return,
                r = listener.accept() => r.unwrap(),
            };
            tokio::spawn(async move {
                let svc = service_fn(move |_req| async move {
                    let mut r = hyper::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from_static(body.as_bytes()),
                    ));
                    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                    Ok::<_, std::convert::Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    Page { addr, stop }
}

fn status_collector(url: String, format: StatusFormat, capacity: Option<u64>) -> StatusCollector {
    StatusCollector::new(config::StatusCollector {
        interval: Duration::from_millis(100),
        url: url.parse().unwrap(),
        format,
        timeout: Duration::from_secs(2),
        capacity,
    })
}

const NGINX: &str = "Active connections: 3 \nserver accepts handled requests\n 10 10 42 \nReading: 0 Writing: 2 Waiting: 1 \n";
const APACHE: &str = "localhost\nServerVersion: Apache/2.4\nTotal Accesses: 77\nBusyWorkers: 4\nIdleWorkers: 12\nConnsTotal: 6\n";

#[tokio::test]
async fn status_collector_scrapes_nginx_stub_status_over_http() {
    let page = serve_page(200, NGINX).await;
    let c = status_collector(
        format!("http://{}/nginx_status", page.addr),
        StatusFormat::Nginx,
        Some(64),
    );
    let r = c.sample().await.unwrap();
    assert_eq!(r.get(Field::Connections), Some(2));
    assert_eq!(r.get(Field::AppBusy), Some(1));
    assert_eq!(r.get(Field::RequestsTotal), Some(42));
    assert_eq!(r.get(Field::AppCapacity), Some(64));
    let _ = page.stop.send(());
}

#[tokio::test]
async fn status_collector_scrapes_apache_auto_over_http() {
    let page = serve_page(200, APACHE).await;
    let c = status_collector(
        format!("http://{}/server-status?auto", page.addr),
        StatusFormat::Apache,
        None,
    );
    let r = c.sample().await.unwrap();
    assert_eq!(r.get(Field::AppBusy), Some(3));
    assert_eq!(r.get(Field::AppCapacity), Some(16));
    assert_eq!(r.get(Field::RequestsTotal), Some(77));
    assert_eq!(r.get(Field::Connections), Some(5));
    let _ = page.stop.send(());
}

#[tokio::test]
async fn status_collector_reports_http_errors_wrong_bodies_and_dead_servers() {
    let page = serve_page(500, "oops").await;
    let c = status_collector(format!("http://{}/", page.addr), StatusFormat::Nginx, None);
    assert!(c
        .sample()
        .await
        .unwrap_err()
        .to_string()
        .contains("HTTP status 500"));
    let _ = page.stop.send(());

    let page = serve_page(200, "<html>welcome</html>").await;
    let c = status_collector(format!("http://{}/", page.addr), StatusFormat::Apache, None);
    assert!(c
        .sample()
        .await
        .unwrap_err()
        .to_string()
        .contains("BusyWorkers"));
    let _ = page.stop.send(());

    // Nothing listens on a port we just released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = status_collector(
        format!("http://127.0.0.1:{port}/"),
        StatusFormat::Nginx,
        None,
    );
    let e = c.sample().await.unwrap_err().to_string();
    assert!(e.contains("request failed"), "{e}");
}

#[tokio::test]
async fn status_collector_times_out_on_a_silent_server() {
    // Accepts connections and never answers.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let c = StatusCollector::new(config::StatusCollector {
        interval: Duration::from_millis(100),
        url: format!("http://{addr}/").parse().unwrap(),
        format: StatusFormat::Nginx,
        timeout: Duration::from_millis(200),
        capacity: None,
    });
    let e = c.sample().await.unwrap_err().to_string();
    assert!(e.contains("no answer within 200ms"), "{e}");
    hold.abort();
}

/// Real nginx with stub_status, started in a temp prefix; killed on drop.
/// It runs as one process (`master_process off`) so that killing it on drop
/// leaves no orphaned worker behind.
struct Nginx {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_nginx() -> Option<Nginx> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let dir = tempfile::tempdir().unwrap();
    // Ask the kernel for a free port, then hand it to nginx.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\nhttp {{\n access_log off;\n client_body_temp_path {d};\n proxy_temp_path {d};\n fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n scgi_temp_path {d};\n server {{\n  listen 127.0.0.1:{port};\n  location = /nginx_status {{ stub_status; }}\n  location / {{ return 200 \"hi\\n\"; }}\n }}\n}}\n",
        d = dir.path().display()
    );
    let conf_path = dir.path().join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let child = std::process::Command::new(bin)
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&conf_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let n = Nginx {
        child,
        _dir: dir,
        port,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(n)
}

#[tokio::test]
async fn status_collector_against_real_nginx() {
    let Some(nginx) = start_nginx() else {
        eprintln!("SKIP: nginx not installed or did not start");
        return;
    };
    let c = status_collector(
        format!("http://127.0.0.1:{}/nginx_status", nginx.port),
        StatusFormat::Nginx,
        None,
    );
    let before = c.sample().await.unwrap();
    // Idle nginx: the scrape itself is excluded.
    assert_eq!(before.get(Field::AppBusy), Some(0));
    // Hold three idle keep-alive connections open: Active connections grows.
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", nginx.port)).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = c.sample().await.unwrap();
        if r.get(Field::Connections) == Some(before.value(Field::Connections) + 3) {
            assert!(r.value(Field::RequestsTotal) > before.value(Field::RequestsTotal));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "nginx never showed the 3 connections: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(held);
}

// ---- push ----

async fn push_server(
    listen: PushListen,
    expire: Option<Duration>,
) -> (
    Arc<Slot>,
    PushListen,
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let slot = Slot::new("push#0".into(), "n1".into());
    let server = push::Server::bind(&config::PushCollector { listen, expire }, slot.clone())
        .await
        .unwrap();
    let addr = server.local_addr();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(server.run(rx));
    (slot, addr, tx, task)
}

#[tokio::test]
async fn push_protocol_end_to_end_over_tcp() {
    let (slot, addr, stop, task) =
        push_server(PushListen::Tcp("127.0.0.1:0".parse().unwrap()), None).await;
    let mut c = Client::connect(&addr).await.unwrap();
    c.push(&PushSample {
        busy: Some(3),
        capacity: Some(8),
        queue: Some(1),
        requests_total: Some(1234),
        connections: None,
        latency_us: Some(2500),
        queue_limit: Some(64),
    })
    .await
    .unwrap();
    let r = slot.latest();
    assert_eq!(
        (
            r.get(Field::AppBusy),
            r.get(Field::AppCapacity),
            r.get(Field::AppQueue),
            r.get(Field::RequestsTotal)
        ),
        (Some(3), Some(8), Some(1), Some(1234))
    );
    assert_eq!(r.get(Field::Connections), None);
    assert_eq!(r.get(Field::AppLatency), Some(2500));
    assert_eq!(r.get(Field::AppQueueLimit), Some(64));

    // A partial update keeps the other pushed fields.
    c.push(&PushSample {
        busy: Some(5),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(slot.latest().get(Field::AppBusy), Some(5));
    assert_eq!(slot.latest().get(Field::AppCapacity), Some(8));

    // A second client pushes too; last line wins.
    let mut c2 = Client::connect(&addr).await.unwrap();
    c2.send_line("busy=6 connections=2").await.unwrap();
    assert_eq!(slot.latest().get(Field::AppBusy), Some(6));
    assert_eq!(slot.latest().get(Field::Connections), Some(2));

    // Refusals are answered and leave the numbers alone; the connection stays usable.
    match c.send_line("busy=lots").await {
        Err(PushError::Refused(m)) => assert!(m.contains("not an unsigned integer"), "{m}"),
        other => panic!("{other:?}"),
    }
    match c.send_line("cpu=1").await {
        Err(PushError::Refused(m)) => assert!(m.contains("unknown key"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(slot.latest().get(Field::AppBusy), Some(6));
    c.send_line("").await.unwrap();

    // An over-long line is refused and the connection closed.
    let long = format!("busy={}", "1".repeat(push::MAX_LINE));
    assert!(c.send_line(&long).await.is_err());
    assert_eq!(slot.health().errors_total, 0);

    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test]
async fn push_protocol_over_a_unix_socket_and_expiry() {
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("push.sock");
    let (slot, addr, stop, task) = push_server(
        PushListen::Unix(sock.clone()),
        Some(Duration::from_millis(100)),
    )
    .await;
    let mut c = Client::connect(&addr).await.unwrap();
    c.push(&PushSample {
        busy: Some(2),
        capacity: Some(4),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(slot.latest().get(Field::AppBusy), Some(2));
    // Silence past `expire` drops the pushed fields.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !slot.latest().is_empty() {
        assert!(Instant::now() < deadline, "pushed fields never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    task.await.unwrap();
    assert!(!sock.exists(), "socket file removed on shutdown");
}

#[tokio::test]
async fn push_refuses_to_replace_a_regular_file() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("not-a-socket");
    std::fs::write(&f, "keep me").unwrap();
    let slot = Slot::new("push#0".into(), "n1".into());
    let e = push::Server::bind(
        &config::PushCollector {
            listen: PushListen::Unix(f.clone()),
            expire: None,
        },
        slot,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read_to_string(f).unwrap(), "keep me");
}

#[tokio::test]
async fn push_bounds_concurrent_connections() {
    let (slot, addr, stop, task) =
        push_server(PushListen::Tcp("127.0.0.1:0".parse().unwrap()), None).await;
    let mut held = Vec::new();
    for i in 0..push::MAX_CONNECTIONS {
        let mut c = Client::connect(&addr).await.unwrap();
        // A served round trip proves the connection holds a slot.
        c.push(&PushSample {
            busy: Some(i as u64),
            ..Default::default()
        })
        .await
        .unwrap();
        held.push(c);
    }
    let mut extra = Client::connect(&addr).await.unwrap();
    match extra
        .push(&PushSample {
            busy: Some(999),
            ..Default::default()
        })
        .await
    {
        Err(PushError::Refused(m)) => assert!(m.contains("too many"), "{m}"),
        Err(PushError::Io(_)) | Err(PushError::Closed) => {}
        Ok(()) => panic!("connection past the limit was served"),
    }
    assert_eq!(
        slot.latest().get(Field::AppBusy),
        Some(push::MAX_CONNECTIONS as u64 - 1)
    );
    // Closing one frees a slot for a newcomer.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Client::connect(&addr).await.unwrap();
        if c.push(&PushSample {
            busy: Some(7),
            ..Default::default()
        })
        .await
        .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "freed slot never became usable");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(slot.latest().get(Field::AppBusy), Some(7));
    stop.send(true).unwrap();
    task.await.unwrap();
}
