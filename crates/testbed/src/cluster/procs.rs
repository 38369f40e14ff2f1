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
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::gen::{self, CpuUse, NodePlan, IDLE};
use super::{write_outputs, ClusterError, Spec, TraceSource, WindowTransport};
use crate::load::{self, LoadOptions};
use crate::report::Report;
use crate::trace::{HostMap, Trace};

use rdmalb_base::cpu::cpu_seconds;

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

    /// CPU time each kind of component has used so far (all children).
    fn cpu(&self) -> CpuUse {
        let mut c = CpuUse::default();
        for (name, child, _) in &self.children {
            let Some(t) = std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
                .ok()
                .and_then(|s| cpu_seconds(&s))
            else {
                continue;
            };
            let slot = if name.starts_with("proxy") {
                &mut c.proxies_s
            } else if name.ends_with("-sidecar") {
                &mut c.sidecars_s
            } else {
                &mut c.nodes_s
            };
            *slot += t;
        }
        c
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

pub(crate) fn io(p: &Path, e: std::io::Error) -> ClusterError {
    ClusterError::Io {
        what: p.display().to_string(),
        source: e,
    }
}

pub(crate) fn write(p: &Path, text: &str) -> Result<(), ClusterError> {
    std::fs::write(p, text).map_err(|e| io(p, e))
}

/// A loopback port nobody listens on, for a process the cluster starts
/// ([`crate::ports::free_loopback_addr`]).
pub(crate) fn free_addr() -> Result<SocketAddr, ClusterError> {
    crate::ports::free_loopback_addr().map_err(|e| ClusterError::Io {
        what: "cannot find a free loopback port".into(),
        source: e,
    })
}

/// A fresh pre-shared key for this run's tcp windows, as `rdmalb psk`
/// makes one (256 random bits in text form), created with mode 0600 (the
/// sidecar and proxy refuse a key "other" can read). A key left by an
/// earlier run in the same directory is replaced.
pub(crate) fn write_psk(p: &Path) -> Result<(), ClusterError> {
    match std::fs::remove_file(p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(p, e)),
    }
    rdmalb_window::Psk::generate()
        .write_new_file(p)
        .map_err(|e| io(p, std::io::Error::other(e.to_string())))
}

pub(crate) fn toml_text(t: &toml::Table) -> String {
    toml::to_string(t).unwrap_or_default()
}

/// What every emulated cluster starts from: the binaries it runs, its
/// folders, the windows' key over tcp, and a plan per node.
pub(crate) struct Setup {
    /// This binary (`rdmalb-testbed`, run as testsrv).
    pub exe: PathBuf,
    /// The appliance binary `rdmalb` (sidecars and proxies).
    pub appliance: PathBuf,
    /// Generated configs, and the components' logs.
    pub conf: PathBuf,
    pub logs: PathBuf,
    /// The cluster's pre-shared key, over tcp.
    pub psk: Option<PathBuf>,
    /// The process id, naming this run's shm windows.
    pub tag: u32,
    pub nodes: Vec<NodePlan>,
}

impl Setup {
    /// Finds the binaries, makes `out/conf` and `out/logs`, writes a key
    /// when `tcp` and plans one node per entry of `roles` (the site it
    /// starts at, or the idle pool), named `n1`, `n2`, … (`name` names the
    /// run in the nodes' shm windows: `cluster`, `chaos`).
    pub(crate) fn new<'a>(
        out: &Path,
        name: &str,
        tcp: bool,
        roles: impl Iterator<Item = &'a str>,
    ) -> Result<Setup, ClusterError> {
        let exe = std::env::current_exe().map_err(|e| ClusterError::Io {
            what: "cannot locate the rdmalb-testbed binary".into(),
            source: e,
        })?;
        let appliance = appliance_binary(&exe)?;
        let (conf, logs) = (out.join("conf"), out.join("logs"));
        for d in [out, &conf, &logs] {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        let psk = if tcp {
            let p = conf.join("cluster.psk");
            write_psk(&p)?;
            Some(p)
        } else {
            None
        };
        let tag = std::process::id();
        let mut nodes = Vec::new();
        for site in roles {
            nodes.push(plan_node(
                &conf,
                nodes.len() + 1,
                site,
                &format!("{name}-{tag}"),
                tcp,
            )?);
        }
        Ok(Setup {
            exe,
            appliance,
            conf,
            logs,
            psk,
            tag,
            nodes,
        })
    }

    /// The shm window files the run makes: the nodes' and `proxies`
    /// proxies'.
    pub(crate) fn shm_files(&self, proxies: u32) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .map(|n| n.shm.clone())
            .chain((1..=proxies).map(|id| gen::proxy_window(self.tag, id)))
            .collect()
    }
}

/// Plans node `n` (1-based) starting at `site`: free loopback ports, its
/// files in `conf`, its shm window `/dev/shm/rdmalb-<tag>-n<n>`, and a tcp
/// responder address when `tcp`.
fn plan_node(
    conf: &Path,
    n: usize,
    site: &str,
    tag: &str,
    tcp: bool,
) -> Result<NodePlan, ClusterError> {
    Ok(NodePlan {
        name: format!("n{n}"),
        site: site.to_string(),
        listen: free_addr()?,
        push: conf.join(format!("n{n}.push.sock")),
        shm: PathBuf::from(format!("/dev/shm/rdmalb-{tag}-n{n}")),
        tcp: if tcp { Some(free_addr()?) } else { None },
        site_file: conf.join(format!("n{n}.site.toml")),
        pid_file: conf.join(format!("n{n}.pid")),
    })
}

/// Writes the site and idle templates the sidecars render.
pub(crate) fn write_templates(conf: &Path) -> Result<(), ClusterError> {
    write(&conf.join("site.toml.tpl"), gen::SITE_TEMPLATE)?;
    write(&conf.join("idle.toml.tpl"), gen::IDLE_TEMPLATE)
}

/// Writes node `n`'s (the `index`th node's) initial site file and its
/// testsrv config (validated by testsrv's own parser); returns the
/// config's path. `node_slots` gives the node its slots (cycled over the
/// nodes); a node with an antagonist and no `antagonist_seed` gets the
/// spec's seed plus its index, so the nodes' co-tenants come and go
/// independently.
pub(crate) fn write_node(
    spec: &Spec,
    n: &NodePlan,
    index: usize,
    conf: &Path,
) -> Result<PathBuf, ClusterError> {
    let hosts = if n.site == IDLE {
        String::new()
    } else {
        format!("hosts = [\"{}.localhost\"]\n", n.site)
    };
    write(&n.site_file, &format!("site = \"{}\"\n{hosts}", n.site))?;
    let mut t = spec.node.clone();
    if !spec.node_slots.is_empty() {
        let slots = spec.node_slots[index % spec.node_slots.len()];
        t.insert("slots".into(), toml::Value::Integer(i64::from(slots)));
    }
    if t.contains_key("antagonist_slots") && !t.contains_key("antagonist_seed") {
        let seed = (spec.seed as i64).wrapping_add(index as i64 + 1) & i64::MAX;
        t.insert("antagonist_seed".into(), toml::Value::Integer(seed));
    }
    // The spec's `timeline_dir` (diagnosis) becomes each node's own file.
    if let Some(dir) = t.remove("timeline_dir") {
        // Not a folder name: an empty path, which testsrv's parser rejects.
        let file = match dir.as_str() {
            Some(d) if !d.is_empty() => format!("{d}/{}.timeline.csv", n.name),
            _ => String::new(),
        };
        t.insert("timeline_file".into(), toml::Value::String(file));
    }
    for (k, v) in [
        ("name", n.name.clone()),
        ("listen", n.listen.to_string()),
        ("site_file", n.site_file.display().to_string()),
        ("pid_file", n.pid_file.display().to_string()),
        ("push", n.push.display().to_string()),
    ] {
        t.insert(k.into(), toml::Value::String(v));
    }
    let p = conf.join(format!("{}.testsrv.toml", n.name));
    let text = toml_text(&t);
    crate::config::parse_node(&text, &p).map_err(|e| ClusterError::Generated {
        component: "testsrv".into(),
        table: "node".into(),
        errors: e,
    })?;
    write(&p, &text)?;
    Ok(p)
}

/// Writes node `n`'s sidecar config ([`gen::sidecar`], then `edit`),
/// validated by the sidecar's own parser; returns its path.
pub(crate) fn write_sidecar(
    spec: &Spec,
    n: &NodePlan,
    id: usize,
    conf: &Path,
    psk: Option<&Path>,
    edit: impl FnOnce(&mut toml::Table),
) -> Result<PathBuf, ClusterError> {
    let mut t = gen::sidecar(spec, n, id, conf, psk);
    edit(&mut t);
    let p = conf.join(format!("{}.sidecar.toml", n.name));
    let text = toml_text(&t);
    rdmalb_sidecar::config::parse(&text, &p).map_err(|e| ClusterError::Generated {
        component: "sidecar".into(),
        table: "sidecar".into(),
        errors: e,
    })?;
    write(&p, &text)?;
    Ok(p)
}

/// Writes a proxy config `t` to `p`, validated by the proxy's own parser.
pub(crate) fn write_proxy(t: &toml::Table, p: &Path) -> Result<PathBuf, ClusterError> {
    let text = toml_text(t);
    rdmalb_proxy::config::parse(&text, p).map_err(|e| ClusterError::Generated {
        component: "proxy".into(),
        table: "proxy".into(),
        errors: e,
    })?;
    write(p, &text)?;
    Ok(p.to_path_buf())
}

/// The appliance binary the cluster runs its sidecars and proxies with:
/// `RDMALB_BIN` when set, else `rdmalb` beside this binary (as cargo and
/// an install lay them out), else `rdmalb` on the `PATH`.
pub(crate) fn appliance_binary(testbed: &Path) -> Result<std::path::PathBuf, ClusterError> {
    if let Some(p) = std::env::var_os("RDMALB_BIN") {
        return Ok(p.into());
    }
    let beside = testbed.with_file_name("rdmalb");
    if beside.is_file() {
        return Ok(beside);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("rdmalb"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            ClusterError::NotReady(format!(
                "cannot find the rdmalb binary (not beside {} nor on PATH); build it with `cargo build --bin rdmalb` or set RDMALB_BIN",
                testbed.display()
            ))
        })
}

/// Runs the cluster: start, wait until every site answers through every
/// proxy, replay the trace, write the outputs into `out`, tear down.
pub async fn run(
    spec: &Spec,
    out: &Path,
    mut shutdown: watch::Receiver<bool>,
) -> Result<Report, ClusterError> {
    // Generated configs name files by absolute path (testsrv and the
    // sidecar anchor relative paths at their own config's directory).
    let out = &std::path::absolute(out).map_err(|e| io(out, e))?;
    let roles = spec
        .sites
        .iter()
        .zip(&spec.split)
        .flat_map(|(site, &count)| std::iter::repeat_n(site.as_str(), count as usize))
        .chain(std::iter::repeat_n(IDLE, spec.idle as usize));
    let tcp = spec.transport == WindowTransport::Tcp;
    let setup = Setup::new(out, "cluster", tcp, roles)?;
    let trace = trace(spec, out)?;
    let mut procs = Procs {
        children: Vec::new(),
        shm_files: setup.shm_files(spec.proxies),
    };
    let (urls, admins) = start(spec, &setup, &mut procs, out, &mut shutdown).await?;
    tracing::info!(
        nodes = setup.nodes.len(),
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
    let clients = match &spec.sticky {
        Some(s) => Some(Arc::new(load::StickyClients::new(&s.cookie, s.clients)?)),
        None => None,
    };
    let cpu_before = procs.cpu();
    let report = load::run_with_clients(trace, opts, clients.clone(), shutdown.clone()).await?;
    let cpu = procs.cpu().since(cpu_before);
    if let Some(c) = clients {
        let (proxy_moves, proxies_unread) = super::sticky::proxy_moves(&admins).await;
        let s = super::sticky::StickyOut {
            clients: c.summary(),
            proxy_moves,
            proxies_unread,
        };
        write(
            &out.join("sticky.json"),
            &serde_json::to_string_pretty(&s).unwrap_or_default(),
        )?;
    }
    // A component that died during the run invalidates the figures. After
    // Ctrl-C the children may have had the terminal's SIGINT too: write
    // what was measured.
    if !*shutdown.borrow() {
        procs.check_alive()?;
    }
    // Role words are read while the sidecars still hold their windows.
    let mut outcome = gen::outcome(spec, &setup.nodes, &report).await;
    outcome.cpu = cpu;
    drop(procs);
    write_results(spec, out, &report, &outcome)?;
    Ok(report)
}

/// The trace to replay: the spec's file, or one generated (and written to
/// `out/trace.txt`); every site it names must be one of the spec's.
fn trace(spec: &Spec, out: &Path) -> Result<Trace, ClusterError> {
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
    Ok(trace)
}

/// Starts the nodes, their sidecars and the proxies, each kind once the
/// kind before is up, and waits until every site answers through every
/// proxy; returns the proxies' URLs and admin addresses.
async fn start(
    spec: &Spec,
    setup: &Setup,
    procs: &mut Procs,
    out: &Path,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(Vec<String>, Vec<SocketAddr>), ClusterError> {
    let (conf, logs, nodes) = (&setup.conf, &setup.logs, &setup.nodes);
    write_templates(conf)?;
    // Nodes first: a sidecar with [role] applies its initial site at
    // start-up (render, SIGHUP through the pid file, verify), so its node
    // must be up; the nodes' pushes retry until their sidecar listens.
    for (i, n) in nodes.iter().enumerate() {
        let p = write_node(spec, n, i, conf)?;
        procs.spawn(&setup.exe, &n.name, &["testsrv"], &p, logs)?;
    }
    wait_for(
        procs,
        nodes,
        shutdown,
        "is not up (listen, pid file)",
        |n| n.pid_file.exists() && std::net::TcpStream::connect(n.listen).is_ok(),
    )
    .await?;
    for (i, n) in nodes.iter().enumerate() {
        let p = write_sidecar(spec, n, i + 1, conf, setup.psk.as_deref(), |_| {})?;
        procs.spawn(
            &setup.appliance,
            &format!("{}-sidecar", n.name),
            &["sidecar"],
            &p,
            logs,
        )?;
    }
    // With tcp, also until its responder accepts (a bare connect: the
    // sidecar drops it at the handshake).
    wait_for(procs, nodes, shutdown, "has no window", |n| {
        n.shm.exists()
            && n.tcp
                .is_none_or(|a| std::net::TcpStream::connect(a).is_ok())
    })
    .await?;
    let mut urls = Vec::new();
    let mut admins = Vec::new();
    for id in 1..=spec.proxies {
        let (listen, admin) = (free_addr()?, free_addr()?);
        admins.push(admin);
        let t = gen::proxy(
            spec,
            id,
            nodes,
            (listen, admin),
            setup.tag,
            setup.psk.as_deref(),
        );
        let p = write_proxy(&t, &conf.join(format!("proxy{id}.toml")))?;
        procs.spawn(
            &setup.appliance,
            &format!("proxy{id}"),
            &["proxy"],
            &p,
            logs,
        )?;
        urls.push(format!("http://{listen}"));
    }
    let pids: String = procs
        .children
        .iter()
        .map(|(n, c, _)| format!("{n} {}\n", c.id()))
        .collect();
    write(&out.join("pids.txt"), &pids)?;
    wait_until_serving(procs, &urls, &spec.sites, shutdown).await?;
    Ok((urls, admins))
}

/// `summary.txt`, `cluster.json`, the load's CSV, JSON and plot, and the
/// outcome on stdout.
fn write_results(
    spec: &Spec,
    out: &Path,
    report: &Report,
    outcome: &gen::Outcome,
) -> Result<(), ClusterError> {
    let title = format!(
        "{} — sites {} split {} — {} proxy(ies), balance {}, {}",
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
        spec.balance,
        outcome.mode
    );
    let mut summary = report.table();
    summary.push_str(&outcome.text());
    write(&out.join("summary.txt"), &summary)?;
    write(
        &out.join("cluster.json"),
        &serde_json::to_string_pretty(&outcome).unwrap_or_default(),
    )?;
    print!("{}", outcome.text());
    write_outputs(
        report,
        Some(&out.join("load.csv")),
        Some(&out.join("load.json")),
        Some(&out.join("throughput.png")),
        &title,
    )
}

/// Start-up waits are bounded: a component that is not up by then is broken.
const START_BOUND: Duration = Duration::from_secs(20);

async fn pause(shutdown: &mut watch::Receiver<bool>) -> Result<(), ClusterError> {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(25)) => Ok(()),
        _ = shutdown.changed() => Err(ClusterError::Interrupted),
    }
}

async fn wait_for(
    procs: &mut Procs,
    nodes: &[NodePlan],
    shutdown: &mut watch::Receiver<bool>,
    what: &str,
    ready: impl Fn(&NodePlan) -> bool,
) -> Result<(), ClusterError> {
    let end = Instant::now() + START_BOUND;
    while let Some(n) = nodes.iter().find(|n| !ready(n)) {
        procs.check_alive()?;
        if Instant::now() > end {
            return Err(ClusterError::NotReady(format!(
                "node {} (window {}, listen {}) {what}",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_of_this_process_is_read_and_differences_never_go_negative() {
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(cpu_seconds(&own).is_some_and(|s| s >= 0.0), "{own}");
        let a = CpuUse {
            proxies_s: 2.0,
            nodes_s: 1.0,
            sidecars_s: 0.5,
        };
        let b = CpuUse {
            proxies_s: 1.5,
            nodes_s: 1.5,
            sidecars_s: 0.0,
        };
        assert_eq!(
            a.since(b),
            CpuUse {
                proxies_s: 0.5,
                nodes_s: 0.0,
                sidecars_s: 0.5
            }
        );
    }
}
