//! Starting, watching and tearing down the cluster's processes.
//!
//! Every child is owned by [`Procs`]: dropping it (normal return, error,
//! panic unwinding, Ctrl-C handled by the caller) sends SIGTERM to every
//! child, waits briefly, SIGKILLs what is left and reaps all, then removes
//! the shm window files the sidecars leave. Only a SIGKILL of the cluster
//! process itself can strand children (they are listed with their pids in
//! `<out>/pids.txt` for that case).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{merge, write_outputs, ClusterError, Spec, TraceSource};
use crate::testbed::load::{self, LoadOptions};
use crate::testbed::report::Report;
use crate::testbed::trace::{HostMap, Trace};

/// The running children, torn down on drop.
struct Procs {
    children: Vec<(String, Child, PathBuf)>,
    shm_files: Vec<PathBuf>,
}

impl Procs {
    fn spawn(
        &mut self,
        exe: &Path,
        name: &str,
        args: &[&str],
        config: &Path,
        logs: &Path,
    ) -> Result<(), ClusterError> {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).map_err(|e| io(&log, e))?;
        let err = file.try_clone().map_err(|e| io(&log, e))?;
        let child = Command::new(exe)
            .args(args)
            .arg("-c")
            .arg(config)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| ClusterError::Io {
                what: format!("cannot start {name}"),
                source: e,
            })?;
        tracing::debug!(name, pid = child.id(), "started");
        self.children.push((name.to_string(), child, log));
        Ok(())
    }

    /// Fails with the log tail of the first child that exited.
    fn check_alive(&mut self) -> Result<(), ClusterError> {
        for (name, child, log) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                return Err(ClusterError::EarlyExit {
                    name: name.clone(),
                    status: status.to_string(),
                    log: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
                });
            }
        }
        Ok(())
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, child, _) in &self.children {
            // SIGTERM first, so the components remove pid files and
            // sockets; `kill` avoids unsafe libc calls in this crate.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (name, child, _) in &mut self.children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        tracing::warn!(name = %name, pid = child.id(), "did not stop on SIGTERM; killing");
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        for f in &self.shm_files {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn io(p: &Path, e: std::io::Error) -> ClusterError {
    ClusterError::Io {
        what: p.display().to_string(),
        source: e,
    }
}

fn write(p: &Path, text: &str) -> Result<(), ClusterError> {
    std::fs::write(p, text).map_err(|e| io(p, e))
}

fn free_addr() -> Result<SocketAddr, ClusterError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| ClusterError::Io {
            what: "cannot find a free loopback port".into(),
            source: e,
        })
}

fn toml_text(t: &toml::Table) -> String {
    toml::to_string(t).unwrap_or_default()
}

/// One node's addresses and files.
struct NodePlan {
    name: String,
    site: String,
    listen: SocketAddr,
    push: SocketAddr,
    shm: PathBuf,
}

/// Runs the cluster: start, wait until every site answers through every
/// proxy, replay the trace, write the outputs into `out`, tear down.
pub async fn run(
    spec: &Spec,
    out: &Path,
    mut shutdown: watch::Receiver<bool>,
) -> Result<Report, ClusterError> {
    let exe = std::env::current_exe().map_err(|e| ClusterError::Io {
        what: "cannot locate the rdmalb binary".into(),
        source: e,
    })?;
    let (conf, logs) = (out.join("conf"), out.join("logs"));
    for d in [out, &conf, &logs] {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    let trace = match &spec.trace {
        TraceSource::File(f) => Trace::load(f)?,
        TraceSource::Generate(g) => {
            let t = g.generate(&spec.sites, spec.requests.unwrap_or(1_000_000), spec.seed)?;
            let p = out.join("trace.txt");
            t.write(
                &p,
                &format!("rdmalb cluster: {} seed={}", g.describe(), spec.seed),
            )?;
            t
        }
    };
    if let Some(s) = trace.sites.iter().find(|s| !spec.sites.contains(s)) {
        return Err(ClusterError::NotReady(format!(
            "the trace has requests for site {s}, which the spec does not list"
        )));
    }
    let tag = std::process::id();
    let mut nodes = Vec::new();
    for (site, &count) in spec.sites.iter().zip(&spec.split) {
        for _ in 0..count {
            let n = nodes.len() + 1;
            nodes.push(NodePlan {
                name: format!("n{n}"),
                site: site.clone(),
                listen: free_addr()?,
                push: free_addr()?,
                shm: PathBuf::from(format!("/dev/shm/rdmalb-cluster-{tag}-n{n}")),
            });
        }
    }
    let mut procs = Procs {
        children: Vec::new(),
        shm_files: nodes.iter().map(|n| n.shm.clone()).collect(),
    };
    let sites_toml = toml::Value::Array(
        spec.sites
            .iter()
            .map(|s| toml::Value::String(s.clone()))
            .collect(),
    );

    // Sidecars first, so each node's first push finds its collector.
    for (i, n) in nodes.iter().enumerate() {
        let mut t: toml::Table = toml::from_str(&format!(
            "node = \"{}\"\nnode_id = {}\n[window.shm]\npath = \"{}\"\n[[collector]]\nkind = \"system\"\n[[collector]]\nkind = \"push\"\nlisten = \"{}\"\nexpire = \"2s\"\n",
            n.name, i + 1, n.shm.display(), n.push
        ))
        .unwrap_or_default();
        t.insert("sites".into(), sites_toml.clone());
        merge(&mut t, &spec.sidecar);
        let p = conf.join(format!("{}.sidecar.toml", n.name));
        let text = toml_text(&t);
        crate::sidecar::config::parse(&text, &p).map_err(|e| ClusterError::Generated {
            component: "sidecar".into(),
            table: "sidecar".into(),
            errors: e,
        })?;
        write(&p, &text)?;
        procs.spawn(
            &exe,
            &format!("{}-sidecar", n.name),
            &["sidecar"],
            &p,
            &logs,
        )?;
    }
    for n in &nodes {
        let site_file = conf.join(format!("{}.site.toml", n.name));
        write(
            &site_file,
            &format!(
                "site = \"{}\"\nhosts = [\"{}.localhost\"]\n",
                n.site, n.site
            ),
        )?;
        let mut t = spec.node.clone();
        for (k, v) in [
            ("name", n.name.clone()),
            ("listen", n.listen.to_string()),
            ("site_file", site_file.display().to_string()),
            (
                "pid_file",
                conf.join(format!("{}.pid", n.name)).display().to_string(),
            ),
            ("push", n.push.to_string()),
        ] {
            t.insert(k.into(), toml::Value::String(v));
        }
        let p = conf.join(format!("{}.testsrv.toml", n.name));
        let text = toml_text(&t);
        crate::testbed::config::parse_node(&text, &p).map_err(|e| ClusterError::Generated {
            component: "testsrv".into(),
            table: "node".into(),
            errors: e,
        })?;
        write(&p, &text)?;
        procs.spawn(&exe, &n.name, &["testsrv"], &p, &logs)?;
    }
    wait_for_windows(&mut procs, &nodes, &mut shutdown).await?;
    let mut urls = Vec::new();
    for id in 1..=spec.proxies {
        let (listen, admin) = (free_addr()?, free_addr()?);
        let mut t: toml::Table = toml::from_str(&format!(
            "[global]\nproxy_id = {id}\nbalance = \"{}\"\naccess_log = \"off\"\n\
             [health]\npath = \"/health\"\ninterval = \"200ms\"\ntimeout = \"1s\"\nrise = 1\nfall = 3\n\
             [admin]\nlisten = \"{admin}\"\n[[listener]]\nname = \"web\"\nlisten = \"{listen}\"\n",
            spec.balance.replace('"', "")
        ))
        .unwrap_or_default();
        let site_tables = spec.sites.iter().map(|s| {
            let mut st = toml::Table::new();
            st.insert("name".into(), toml::Value::String(s.clone()));
            st.insert(
                "hosts".into(),
                toml::Value::Array(vec![toml::Value::String(format!("{s}.localhost"))]),
            );
            toml::Value::Table(st)
        });
        t.insert("site".into(), toml::Value::Array(site_tables.collect()));
        let node_tables = nodes.iter().map(|n| {
            let mut nt = toml::Table::new();
            for (k, v) in [
                ("name", n.name.clone()),
                ("address", n.listen.to_string()),
                ("site", n.site.clone()),
                ("transport", "shm".into()),
                ("sidecar", n.shm.display().to_string()),
            ] {
                nt.insert(k.into(), toml::Value::String(v));
            }
            toml::Value::Table(nt)
        });
        t.insert("node".into(), toml::Value::Array(node_tables.collect()));
        merge(&mut t, &spec.proxy);
        let p = conf.join(format!("proxy{id}.toml"));
        let text = toml_text(&t);
        crate::config::parse(&text, &p).map_err(|e| ClusterError::Generated {
            component: "proxy".into(),
            table: "proxy".into(),
            errors: e,
        })?;
        write(&p, &text)?;
        procs.spawn(&exe, &format!("proxy{id}"), &["proxy"], &p, &logs)?;
        urls.push(format!("http://{listen}"));
    }
    let pids: String = procs
        .children
        .iter()
        .map(|(n, c, _)| format!("{n} {}\n", c.id()))
        .collect();
    write(&out.join("pids.txt"), &pids)?;
    wait_until_serving(&mut procs, &urls, &spec.sites, &mut shutdown).await?;
    tracing::info!(
        nodes = nodes.len(),
        proxies = spec.proxies,
        "cluster up; replaying the trace"
    );

    let opts = LoadOptions {
        urls,
        hosts: HostMap::default(),
        mode: spec.mode,
        duration: spec.duration,
        requests: spec.requests,
        interval: spec.interval,
        timeout: spec.timeout,
    };
    let report = load::run(trace, opts, shutdown.clone()).await?;
    // A component that died during the run invalidates the figures. After
    // Ctrl-C the children may have had the terminal's SIGINT too: write
    // what was measured.
    if !*shutdown.borrow() {
        procs.check_alive()?;
    }
    drop(procs);
    let title = format!(
        "{} — sites {} split {} — {} proxy(ies), balance {}",
        spec.file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        spec.sites.join("/"),
        spec.split
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(":"),
        spec.proxies,
        spec.balance
    );
    write(&out.join("summary.txt"), &report.table())?;
    write_outputs(
        &report,
        Some(&out.join("load.csv")),
        Some(&out.join("load.json")),
        Some(&out.join("throughput.png")),
        &title,
    )?;
    Ok(report)
}

/// Start-up waits are bounded: a component that is not up by then is broken.
const START_BOUND: Duration = Duration::from_secs(20);

async fn pause(shutdown: &mut watch::Receiver<bool>) -> Result<(), ClusterError> {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(25)) => Ok(()),
        _ = shutdown.changed() => Err(ClusterError::Interrupted),
    }
}

async fn wait_for_windows(
    procs: &mut Procs,
    nodes: &[NodePlan],
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), ClusterError> {
    let end = Instant::now() + START_BOUND;
    while let Some(n) = nodes
        .iter()
        .find(|n| !n.shm.exists() || std::net::TcpStream::connect(n.listen).is_err())
    {
        procs.check_alive()?;
        if Instant::now() > end {
            return Err(ClusterError::NotReady(format!(
                "node {} (window {}, listen {}) is not up",
                n.name,
                n.shm.display(),
                n.listen
            )));
        }
        pause(shutdown).await?;
    }
    Ok(())
}

/// Until `GET /health` with each site's Host answers 200 through every proxy.
async fn wait_until_serving(
    procs: &mut Procs,
    urls: &[String],
    sites: &[String],
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), ClusterError> {
    let end = Instant::now() + START_BOUND;
    for url in urls {
        let addr: SocketAddr = url
            .trim_start_matches("http://")
            .parse()
            .map_err(|_| ClusterError::NotReady(format!("bad url {url}")))?;
        for site in sites {
            loop {
                procs.check_alive()?;
                let probe = format!(
                    "GET /health HTTP/1.1\r\nHost: {site}.localhost\r\nConnection: close\r\n\r\n"
                );
                if health_ok(addr, probe.as_bytes()).await {
                    break;
                }
                if Instant::now() > end {
                    return Err(ClusterError::NotReady(format!(
                        "{url} does not serve site {site} (GET /health with Host {site}.localhost)"
                    )));
                }
                pause(shutdown).await?;
            }
        }
    }
    Ok(())
}

async fn health_ok(addr: SocketAddr, request: &[u8]) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(request).await.ok()?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).await.ok()?;
        Some(buf[..n].starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(true))
    )
}
