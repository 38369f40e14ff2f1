//! The emulated cluster end to end (`rdmalb cluster`): 3 sites on 8 nodes
//! split 3:3:2, each node a real `rdmalb testsrv` with its `rdmalb
//! sidecar` (shm window, push collector), one `rdmalb proxy` with
//! round-robin, a single-file trace replayed for a few seconds. Checks the
//! outputs exist and parse, every site got traffic, and nothing is left
//! running. Also the `trace` and `load` subcommands on their own.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn testbed(args: &[&str]) -> std::process::Output {
    Command::new(crate::support::testbed_bin())
        .args(args)
        .output()
        .expect("run rdmalb-testbed")
}

fn alive(pid: u32) -> bool {
    // A zombie would still have a /proc entry; the cluster reaps its children.
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn cluster_332_round_robin_writes_per_site_csv_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "sites = [\"shop\", \"blog\", \"news\"]\nsplit = \"3:3:2\"\nbalance = \"roundrobin\"\nduration = \"3s\"\nrequests = 200000\n\
         [trace]\nkind = \"single-file\"\n[node]\nslots = 2\nqueue = 8\n[load]\nconnections = 8\ninterval = \"500ms\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = testbed(&[
        "cluster",
        "-c",
        spec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "cluster failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("TOTAL"), "{stdout}");

    // Per-site CSV: header, then interval × site rows.
    let csv = std::fs::read_to_string(out.join("load.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(rdmalb_testbed::report::CSV_HEADER));
    let mut served = std::collections::HashMap::<String, u64>::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 11, "{line}");
        f[0].parse::<f64>().unwrap();
        *served.entry(f[1].to_string()).or_default() += f[3].parse::<u64>().unwrap();
        f[4].parse::<f64>().unwrap();
    }
    for site in ["shop", "blog", "news"] {
        assert!(
            served.get(site).copied().unwrap_or(0) > 0,
            "site {site} got no traffic: {served:?}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("load.json")).unwrap()).unwrap();
    assert_eq!(json["sites"], serde_json::json!(["shop", "blog", "news"]));
    let wide = std::fs::read_to_string(out.join("throughput.csv")).unwrap();
    assert!(wide.starts_with("time_s,shop,blog,news\n"), "{wide}");
    let png = std::fs::read(out.join("throughput.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000);
    // Every node was served by a real sidecar + testsrv pair; every
    // process is gone.
    let pids = std::fs::read_to_string(out.join("pids.txt")).unwrap();
    assert_eq!(pids.lines().count(), 8 + 8 + 1, "{pids}");
    for line in pids.lines() {
        let pid: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(!alive(pid), "{line} still running");
    }
    // The nodes' shm windows are removed.
    for n in 1..=8 {
        let conf = std::fs::read_to_string(out.join(format!("conf/n{n}.sidecar.toml"))).unwrap();
        let t: toml::Table = toml::from_str(&conf).unwrap();
        let shm = t["window"]["shm"]["path"].as_str().unwrap().to_string();
        assert!(
            shm.starts_with("/dev/shm/rdmalb-cluster-") && !Path::new(&shm).exists(),
            "{shm}"
        );
    }
}

/// `transport = "tcp"`: every sidecar also serves its window on a loopback
/// tcp responder with the run's PSK (32 bytes, mode 0600) and the proxy
/// reads the windows there, per request, while serving real traffic.
#[test]
fn cluster_over_tcp_windows_serves_with_a_private_psk() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "sites = [\"shop\"]\nsplit = \"2\"\nbalance = \"weighted-least-load\"\ntransport = \"tcp\"\n\
         duration = \"2s\"\nrequests = 100000\n[trace]\nkind = \"single-file\"\n[node]\nslots = 2\nqueue = 8\n\
         [load]\nconnections = 4\ninterval = \"500ms\"\n[proxy.routing]\nload_read = \"per-request\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = testbed(&[
        "cluster",
        "-c",
        spec.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "cluster failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let psk = out.join("conf/cluster.psk");
    let meta = std::fs::metadata(&psk).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    rdmalb_window::Psk::from_file(&psk).expect("a key the windows accept");
    let read = |f: &str| -> toml::Table {
        toml::from_str(&std::fs::read_to_string(out.join("conf").join(f)).unwrap()).unwrap()
    };
    let proxy = read("proxy1.toml");
    assert_eq!(proxy["cluster"]["psk_file"].as_str(), psk.to_str());
    for (i, node) in proxy["node"].as_array().unwrap().iter().enumerate() {
        let sidecar = read(&format!("n{}.sidecar.toml", i + 1));
        let tcp = &sidecar["window"]["tcp"];
        assert_eq!(node["transport"].as_str(), Some("tcp"));
        assert_eq!(node["sidecar"].as_str(), tcp["listen"].as_str());
        assert!(tcp["listen"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert_eq!(tcp["psk_file"].as_str(), psk.to_str());
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("load.json")).unwrap()).unwrap();
    let total = json["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == "TOTAL")
        .unwrap();
    assert!(total["served"].as_u64().unwrap() > 0, "{total}");
}

#[test]
fn cluster_spec_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, "sites = [\"a\", \"b\"]\nsplit = \"3\"\n[node]\n").unwrap();
    let o = testbed(&[
        "cluster",
        "-c",
        spec.to_str().unwrap(),
        "-o",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("split: `3` must give"));
    // A bad pass-through key is reported by the component that owns it.
    std::fs::write(&spec, "sites = [\"a\"]\n[node]\nslotz = 3\n").unwrap();
    let o = testbed(&[
        "cluster",
        "-c",
        spec.to_str().unwrap(),
        "-o",
        dir.path().join("o").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("testsrv") && err.contains("slotz"),
        "{err}"
    );
}

#[tokio::test]
async fn trace_export_and_load_against_a_backend() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.txt");
    let o = testbed(&[
        "trace",
        "bursty",
        "--sites",
        "a,b",
        "--burst",
        "3",
        "-n",
        "12",
        "--seed",
        "3",
        "-o",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&trace).unwrap();
    let sites: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(
        sites,
        ["a", "a", "a", "b", "b", "b", "a", "a", "a", "b", "b", "b"]
    );
    let lua = dir.path().join("t.lua");
    let o = testbed(&[
        "trace",
        "export",
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "wrk",
        "-o",
        lua.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(std::fs::read_to_string(&lua)
        .unwrap()
        .contains("\"b.localhost\""));
    let wlog = dir.path().join("t.wlog");
    let o = testbed(&[
        "trace",
        "export",
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "httperf",
        "--site",
        "b",
        "-o",
        wlog.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(std::fs::read(&wlog).unwrap(), b"/static/1k\0".repeat(6));

    // `rdmalb load` against an in-process backend: every request counted
    // under its site, with its site's Host header.
    let backend = crate::support::Backend::start("b1").await;
    let csv = dir.path().join("load.csv");
    let url = format!("http://{}", backend.addr);
    let args: Vec<String> = [
        "load",
        "--trace",
        trace.to_str().unwrap(),
        "--url",
        &url,
        "-c",
        "2",
        "-n",
        "24",
        "-d",
        "60s",
        "--csv",
        csv.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let o = tokio::task::spawn_blocking(move || {
        testbed(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(backend.requests(), 24);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let total = stdout.lines().find(|l| l.starts_with("TOTAL")).unwrap();
    assert_eq!(total.split_whitespace().nth(1), Some("24"), "{stdout}");
    let a = stdout.lines().find(|l| l.starts_with("a ")).unwrap();
    assert_eq!(a.split_whitespace().nth(2), Some("12"), "{stdout}");
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() >= 3);
}

#[test]
fn sigint_tears_the_cluster_down_and_keeps_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        "sites = [\"a\", \"b\"]\nsplit = \"2:1\"\nduration = \"10m\"\n[load]\nconnections = 4\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let child = Command::new(crate::support::testbed_bin())
        .args([
            "cluster",
            "-c",
            spec.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut guard = crate::support::ChildGuard { child };
    // pids.txt is written once every process is started; the replay
    // starts when every site answers through the proxy.
    let log = || std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();
    let mut up = false;
    for _ in 0..800 {
        if log().contains("replaying the trace") {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(up, "cluster did not come up:\n{}", log());
    // The modelled load reaches the node windows: testsrv → push →
    // sidecar → shm window, as a proxy reads it.
    let conf = std::fs::read_to_string(out.join("conf/n1.sidecar.toml")).unwrap();
    let t: toml::Table = toml::from_str(&conf).unwrap();
    let window = std::path::PathBuf::from(t["window"]["shm"]["path"].as_str().unwrap());
    let sample = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use rdmalb_window::{read_load, site_table_hash, Expect, LoadRead, ReadPolicy, ShmWindow};
        let expect = Expect {
            node_id: Some(1),
            site_hash: Some(site_table_hash(&["a", "b"])),
        };
        let policy = ReadPolicy {
            retries: 8,
            staleness: Duration::from_secs(5),
            deadline: Duration::from_secs(5),
        };
        crate::support::eventually(
            "pushed load in n1's window",
            Duration::from_secs(20),
            || async {
                let w = ShmWindow::open(&window, &expect).map_err(|e| e.to_string())?;
                match read_load(&w, &policy).await {
                    LoadRead::Fresh(b)
                        if b.sample.app_capacity == 4 && b.sample.requests_total > 0 =>
                    {
                        Ok(b.sample)
                    }
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
    });
    assert!(sample.app_busy <= 4, "{sample:?}");
    let pids = std::fs::read_to_string(out.join("pids.txt")).unwrap();
    crate::support::signal(guard.pid(), 2);
    let mut status = None;
    for _ in 0..800 {
        if let Ok(Some(s)) = guard.child.try_wait() {
            status = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let status = status.expect("cluster did not exit on SIGINT");
    assert!(status.success(), "{status}:\n{}", log());
    assert_eq!(pids.lines().count(), 3 + 3 + 1);
    for line in pids.lines() {
        let pid: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(!alive(pid), "{line} still running");
    }
    assert!(out.join("load.csv").exists() && out.join("throughput.png").exists());
}
