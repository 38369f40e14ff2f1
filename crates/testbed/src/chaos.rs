//! `rdmalb-testbed chaos`: the seeded fault-injection campaign (issue 12).
//!
//! In the style of Jepsen and of FoundationDB's simulation tests, with real
//! processes: 3 `rdmalb proxy` (proxy 1 is the lock home), 9 testsrv nodes
//! (3:3:2 over three sites, one idle) each with a real `rdmalb sidecar`
//! applying roles (render, SIGHUP, verify), over shm or over tcp (each
//! sidecar's responder behind a fault-injecting relay, [`relay`]). Client
//! traffic through every proxy makes one site at a time hot, rotating, so
//! the agents keep claiming, while faults from a schedule drawn from the
//! seed ([`plan`]) hit the processes and the links: SIGKILL and
//! SIGSTOP/SIGCONT of proxies (the lock home included) and sidecars
//! (mid-apply when a node is switching), restarts, failing app reloads, a
//! dead app, link delay, drop, cut and half-open, and a proxy restarted with
//! its clock skewed within the allowance.
//!
//! Checked all along, from the windows ([`watch`]) and from the traffic:
//! - every node's role epoch never decreases;
//! - a claim record (node, epoch) never names two proxies;
//! - no request is answered by a node serving another site (421, or an
//!   `X-Site` other than the request's site);
//!
//! and once the faults stop and everything is restarted:
//! - no node is lost: within `settle` every node is ACTIVE with its status
//!   OK (none SWITCHING or FAILED);
//! - each proxy's claim counter agrees with the claim records naming it.
//!
//! A violation prints the seed and the fault history; the same seed replays
//! the same schedule. Outputs: `<out>/chaos.json`, `<out>/faults.txt`, the
//! components' logs in `<out>/logs`.

pub mod plan;
pub mod relay;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch as channel;

use crate::cluster::gen::{self, NodePlan, IDLE};
use crate::cluster::procs::{
    appliance_binary, free_addr, io, plan_node, write, write_node, write_proxy, write_psk,
    write_sidecar, write_templates,
};
use crate::cluster::{parse_spec, ClusterError, Spec, WindowTransport};
use plan::{Fault, Kind, Shape};
use relay::{LinkFault, Relay};

/// The sites and the initial split (3:3:2 and one idle node).
const SITES: [&str; 3] = ["a", "b", "c"];
/// How long one site stays hot before the next one.
const HOT_FOR: Duration = Duration::from_secs(6);
/// Concurrent client loops for the hot site, per proxy.
const HOT_LOOPS: usize = 6;
/// The proxies' `lock_skew` (ms); skews stay one op timeout below it.
const LOCK_SKEW_MS: i64 = 1000;
/// Largest clock offset a restarted proxy gets.
const MAX_SKEW_MS: i64 = LOCK_SKEW_MS - 500 - 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    pub transport: WindowTransport,
    /// Mean gap between fault starts.
    pub gap: Duration,
    /// Bound for the cluster to settle once the faults stop.
    pub settle: Duration,
    pub out: PathBuf,
}

/// What a run found.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub transport: &'static str,
    pub fault_seconds: f64,
    pub faults: usize,
    pub faults_by_kind: BTreeMap<&'static str, usize>,
    pub requests: u64,
    pub ok: u64,
    /// 5xx and transport errors seen by clients (allowed under faults).
    pub errors: u64,
    pub claims: usize,
    pub moves: u64,
    pub sidecar_restarts: u64,
    pub settled_after_s: Option<f64>,
    pub violations: Vec<String>,
    /// Per proxy: claims counted by its current run, claim records of that
    /// run seen in the windows, and claims without a record.
    pub proxy_claims: Vec<(u64, u64, u64)>,
    /// Every claim record seen: (node, epoch, proxy, claim time unix ms).
    pub claim_records: Vec<(usize, u64, u64, u64)>,
}

impl Outcome {
    /// Human summary.
    pub fn text(&self) -> String {
        let kinds: Vec<String> = self
            .faults_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let mut s = format!(
            "chaos seed={} transport={} faults={} in {:.0}s ({})\n\
             requests={} ok={} errors={} claims={} moves={} sidecar restarts={} settled={}\n",
            self.seed,
            self.transport,
            self.faults,
            self.fault_seconds,
            kinds.join(", "),
            self.requests,
            self.ok,
            self.errors,
            self.claims,
            self.moves,
            self.sidecar_restarts,
            self.settled_after_s
                .map_or("no".to_string(), |s| format!("after {s:.1}s")),
        );
        if self.violations.is_empty() {
            s.push_str("invariants: 0 violations\n");
        } else {
            s.push_str(&format!(
                "invariants: {} VIOLATIONS\n",
                self.violations.len()
            ));
            for v in &self.violations {
                s.push_str(&format!("  {v}\n"));
            }
        }
        s
    }
}

/// One managed child process that faults kill, stop and restart.
struct Managed {
    name: String,
    exe: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    stopped: bool,
    /// Clock offset (ms) passed on the next start (proxies).
    skew_ms: i64,
}

impl Managed {
    fn start(&mut self) -> Result<(), ClusterError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| io(&self.log, e))?;
        let err = file.try_clone().map_err(|e| io(&self.log, e))?;
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .env("NO_COLOR", "1")
            .env("RDMALB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err);
        if self.skew_ms != 0 {
            cmd.env(
                rdmalb_base::time::CLOCK_OFFSET_ENV,
                self.skew_ms.to_string(),
            );
        }
        let child = cmd.spawn().map_err(|e| ClusterError::Io {
            what: format!("cannot start {}", self.name),
            source: e,
        })?;
        self.child = Some(child);
        self.stopped = false;
        Ok(())
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(c.id().to_string())
                .stderr(Stdio::null())
                .status();
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stopped = false;
    }

    fn stop(&mut self) {
        self.signal("STOP");
        self.stopped = true;
    }

    fn cont(&mut self) {
        self.signal("CONT");
        self.stopped = false;
    }

    /// Running (not exited); a stopped one counts as running.
    fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Continues it if stopped, starts it if dead; true when it (re)started.
    fn ensure_running(&mut self) -> Result<bool, ClusterError> {
        if self.stopped {
            self.cont();
        }
        if self.alive() {
            return Ok(false);
        }
        self.kill();
        self.start()?;
        Ok(true)
    }

    /// Kills it and starts it again with clock offset `skew_ms`.
    fn restart_with_skew(&mut self, skew_ms: i64) -> Result<(), ClusterError> {
        self.kill();
        // The watcher sees the old run's last claim record before the new
        // run starts (claims are attributed to the run that made them).
        std::thread::sleep(Duration::from_millis(50));
        self.skew_ms = skew_ms;
        self.start()
    }
}

impl Drop for Managed {
    fn drop(&mut self) {
        if self.stopped {
            self.cont();
        }
        self.kill();
    }
}

/// The running cluster.
struct Cluster {
    nodes: Vec<NodePlan>,
    apps: Vec<Managed>,
    sidecars: Vec<Managed>,
    proxies: Vec<Managed>,
    relays: Vec<Relay>,
    /// Per proxy: its listener and admin addresses.
    proxy_addrs: Vec<(SocketAddr, SocketAddr)>,
    /// Files that make a node's reload command fail while they exist.
    fail_flags: Vec<PathBuf>,
    shm_files: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Proxies first (they read the windows), then sidecars, then apps.
        self.proxies.clear();
        self.sidecars.clear();
        self.apps.clear();
        for f in &self.shm_files {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn spec(opts: &Options, out: &Path) -> Result<Spec, ClusterError> {
    let text = format!(
        r#"sites = ["a", "b", "c"]
split = "3:3:2"
idle = 1
mode = "reconfigure"
proxies = 3
transport = "{transport}"
seed = {seed}
[trace]
kind = "single-file"
[node]
slots = 4
queue = 32
cpu_fraction = 0.0
[proxy.reconfig]
sensitivity = "100ms"
history = "600ms"
history_max = "600ms"
cooldown = "2s"
switch_timeout = "6s"
rollback_backoff_max = "4s"
lock_lease = "2s"
lock_skew = "{LOCK_SKEW_MS}ms"
[proxy.health]
interval = "100ms"
fall = 2
"#,
        transport = opts.transport.as_str(),
        seed = opts.seed
    );
    parse_spec(&text, &out.join("chaos-spec.toml")).map_err(|e| ClusterError::Generated {
        component: "chaos spec".into(),
        table: "chaos".into(),
        errors: e,
    })
}

/// Starts everything and waits until every site answers through every proxy.
async fn start(opts: &Options, out: &Path) -> Result<Cluster, ClusterError> {
    let exe = std::env::current_exe().map_err(|e| ClusterError::Io {
        what: "cannot locate the rdmalb-testbed binary".into(),
        source: e,
    })?;
    let appliance = appliance_binary(&exe)?;
    let (conf, logs) = (out.join("conf"), out.join("logs"));
    for d in [out, &conf, &logs] {
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    let spec = spec(opts, out)?;
    let tcp = opts.transport == WindowTransport::Tcp;
    let psk = if tcp {
        let p = conf.join("cluster.psk");
        write_psk(&p)?;
        Some(p)
    } else {
        None
    };
    let tag = std::process::id();
    let roles = SITES
        .iter()
        .zip([3usize, 3, 2])
        .flat_map(|(s, n)| std::iter::repeat_n(*s, n))
        .chain(std::iter::once(IDLE));
    let mut nodes = Vec::new();
    for site in roles {
        nodes.push(plan_node(
            &conf,
            nodes.len() + 1,
            site,
            &format!("chaos-{tag}"),
            tcp,
        )?);
    }
    let mut c = Cluster {
        fail_flags: nodes
            .iter()
            .map(|n| conf.join(format!("{}.reload-fails", n.name)))
            .collect(),
        shm_files: nodes
            .iter()
            .map(|n| n.shm.clone())
            .chain((1..=3).map(|id| gen::proxy_window(tag, id)))
            .collect(),
        nodes,
        apps: Vec::new(),
        sidecars: Vec::new(),
        proxies: Vec::new(),
        relays: Vec::new(),
        proxy_addrs: Vec::new(),
    };
    write_templates(&conf)?;
    for n in &c.nodes {
        let p = write_node(&spec, n, &conf)?;
        let mut m = managed(&exe, &n.name, "testsrv", &p, &logs);
        m.start()?;
        c.apps.push(m);
    }
    wait(&mut c, "nodes up", |c| {
        c.nodes
            .iter()
            .all(|n| n.pid_file.exists() && std::net::TcpStream::connect(n.listen).is_ok())
    })
    .await?;
    for (i, n) in c.nodes.iter().enumerate() {
        // The reload fails while the node's flag file exists (the
        // campaign's "app reload fails" fault).
        let reload = format!(
            "test ! -e {} && kill -HUP $(cat {})",
            c.fail_flags[i].display(),
            n.pid_file.display()
        );
        let p = write_sidecar(&spec, n, i + 1, &conf, psk.as_deref(), |t| {
            if let Some(toml::Value::Table(role)) = t.get_mut("role") {
                let argv = ["sh".to_string(), "-c".to_string(), reload];
                role.insert(
                    "reload".into(),
                    toml::Value::Array(argv.map(toml::Value::String).to_vec()),
                );
            }
        })?;
        let mut m = managed(
            &appliance,
            &format!("{}-sidecar", n.name),
            "sidecar",
            &p,
            &logs,
        );
        m.start()?;
        c.sidecars.push(m);
    }
    wait(&mut c, "sidecar windows", |c| {
        c.nodes.iter().all(|n| {
            n.shm.exists()
                && n.tcp
                    .is_none_or(|a| std::net::TcpStream::connect(a).is_ok())
        })
    })
    .await?;
    // Over tcp, every proxy reaches every sidecar through that node's relay.
    for n in &c.nodes {
        if let Some(a) = n.tcp {
            c.relays
                .push(Relay::start(a).await.map_err(|e| ClusterError::Io {
                    what: "cannot start a relay".into(),
                    source: e,
                })?);
        }
    }
    for id in 1..=3u32 {
        let addrs = (free_addr()?, free_addr()?);
        let mut t = gen::proxy(&spec, id, &c.nodes, addrs, tag, psk.as_deref());
        if let Some(toml::Value::Array(nodes)) = t.get_mut("node") {
            for (i, node) in nodes.iter_mut().enumerate() {
                if let (Some(r), toml::Value::Table(nt)) = (c.relays.get(i), node) {
                    nt.insert("sidecar".into(), toml::Value::String(r.addr().to_string()));
                }
            }
        }
        let p = write_proxy(&t, &conf.join(format!("proxy{id}.toml")))?;
        let mut m = managed(&appliance, &format!("proxy{id}"), "proxy", &p, &logs);
        m.start()?;
        c.proxies.push(m);
        c.proxy_addrs.push(addrs);
    }
    let client = client();
    wait_async(&mut c, "every site served through every proxy", |c| {
        let client = client.clone();
        let addrs = c.proxy_addrs.clone();
        async move {
            for (listen, _) in addrs {
                for s in SITES {
                    if request(&client, listen, s, "/health").await.0 != 200 {
                        return false;
                    }
                }
            }
            true
        }
    })
    .await?;
    Ok(c)
}

fn managed(exe: &Path, name: &str, sub: &str, config: &Path, logs: &Path) -> Managed {
    Managed {
        name: name.to_string(),
        exe: exe.to_path_buf(),
        args: vec![sub.to_string(), "-c".into(), config.display().to_string()],
        log: logs.join(format!("{name}.log")),
        child: None,
        stopped: false,
        skew_ms: 0,
    }
}

const START_BOUND: Duration = Duration::from_secs(60);

async fn wait(
    c: &mut Cluster,
    what: &str,
    ready: impl Fn(&Cluster) -> bool,
) -> Result<(), ClusterError> {
    let end = Instant::now() + START_BOUND;
    while !ready(c) {
        if Instant::now() > end {
            return Err(ClusterError::NotReady(format!("chaos: start-up: {what}")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_async<F, Fut>(c: &mut Cluster, what: &str, ready: F) -> Result<(), ClusterError>
where
    F: Fn(&Cluster) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + START_BOUND;
    while !ready(c).await {
        if Instant::now() > end {
            return Err(ClusterError::NotReady(format!("chaos: start-up: {what}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Empty<bytes::Bytes>,
>;

fn client() -> Client {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(5))
        .build_http()
}

/// GET `path` for `site` through `proxy`: status (0 = no response) and the
/// node's `X-Site`.
async fn request(client: &Client, proxy: SocketAddr, site: &str, path: &str) -> (u16, String) {
    let req = http::Request::get(format!("http://{proxy}{path}"))
        .header(http::header::HOST, format!("{site}.localhost"))
        .body(http_body_util::Empty::new());
    let Ok(req) = req else {
        return (0, String::new());
    };
    match tokio::time::timeout(Duration::from_secs(5), client.request(req)).await {
        Ok(Ok(r)) => {
            let site = r
                .headers()
                .get("x-site")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let status = r.status().as_u16();
            let _ = http_body_util::BodyExt::collect(r.into_body()).await;
            (status, site)
        }
        _ => (0, String::new()),
    }
}

/// Client-side tallies.
#[derive(Default)]
struct Traffic {
    requests: AtomicU64,
    ok: AtomicU64,
    errors: AtomicU64,
}

/// Client loops through every proxy: the hot site rotates every
/// [`HOT_FOR`]; every other site gets one slow loop per proxy. Each answer
/// is checked: 421 or a foreign `X-Site` is a misrouted request.
fn traffic(
    c: &Cluster,
    start: Instant,
    tally: Arc<Traffic>,
    violations: Arc<Mutex<Vec<String>>>,
    stop: channel::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let client = client();
    let mut tasks = Vec::new();
    for &(listen, _) in &c.proxy_addrs {
        for lane in 0..HOT_LOOPS + SITES.len() {
            let (client, tally, violations, mut stop) = (
                client.clone(),
                tally.clone(),
                violations.clone(),
                stop.clone(),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    if *stop.borrow() {
                        return;
                    }
                    let phase = (start.elapsed().as_secs() / HOT_FOR.as_secs()) as usize;
                    let hot = SITES[phase % SITES.len()];
                    let site = if lane < HOT_LOOPS {
                        hot
                    } else {
                        SITES[lane - HOT_LOOPS]
                    };
                    let (status, served) =
                        request(&client, listen, site, "/dynamic/x?cost=40ms").await;
                    tally.requests.fetch_add(1, Ordering::Relaxed);
                    match status {
                        200 if served == site => {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        200 | 421 => {
                            if let Ok(mut v) = violations.lock() {
                                v.push(format!(
                                    "t={:.2}s a request for site {site} through {listen} was answered {status} by a node serving `{served}`",
                                    start.elapsed().as_secs_f64()
                                ));
                            }
                        }
                        _ => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                                _ = stop.changed() => return,
                            }
                        }
                    }
                    if lane >= HOT_LOOPS {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                            _ = stop.changed() => return,
                        }
                    }
                }
            }));
        }
    }
    tasks
}

/// A fault in force, undone at `until`.
struct Active {
    fault: Fault,
    until: Instant,
}

impl Cluster {
    /// Applies `f`; returns a line for the history.
    fn inject(&mut self, f: &Fault, findings: &watch::Findings) -> Result<String, ClusterError> {
        let mut line = f.to_string();
        match f.kind {
            Kind::KillProxy => self.proxies[f.target].kill(),
            Kind::StopProxy => self.proxies[f.target].stop(),
            Kind::SkewProxy => self.proxies[f.target].restart_with_skew(f.amount)?,
            Kind::KillSidecar => {
                // Mid-apply when we can: a node that is switching now.
                let switching = findings
                    .nodes
                    .iter()
                    .position(|s| s.role.is_some_and(|r| s.applied != r.epoch));
                let t = switching.unwrap_or(f.target);
                if switching.is_some() {
                    line.push_str(&format!(" -> n{} (mid-apply)", t + 1));
                }
                self.sidecars[t].kill();
            }
            Kind::StopSidecar => self.sidecars[f.target].stop(),
            Kind::ReloadFails => write(&self.fail_flags[f.target], "")?,
            Kind::KillApp => self.apps[f.target].kill(),
            Kind::LinkDelay => self.relays[f.target].set(LinkFault::Delay(Duration::from_millis(
                f.amount.unsigned_abs(),
            ))),
            Kind::LinkDrop => self.relays[f.target].set(LinkFault::Drop),
            Kind::LinkCut => self.relays[f.target].set(LinkFault::Cut),
            Kind::LinkHalfOpen => self.relays[f.target].set(LinkFault::HalfOpen),
        }
        Ok(line)
    }

    /// Undoes `f` (restarts what it killed, with its clock back); returns
    /// whether a proxy started a new run.
    fn heal(&mut self, f: &Fault) -> Result<bool, ClusterError> {
        match f.kind {
            Kind::KillProxy | Kind::StopProxy => return self.proxies[f.target].ensure_running(),
            Kind::SkewProxy => {
                self.proxies[f.target].restart_with_skew(0)?;
                return Ok(true);
            }
            Kind::KillSidecar => {
                for s in &mut self.sidecars {
                    s.ensure_running()?;
                }
            }
            Kind::StopSidecar => {
                self.sidecars[f.target].ensure_running()?;
            }
            Kind::ReloadFails => {
                let _ = std::fs::remove_file(&self.fail_flags[f.target]);
            }
            Kind::KillApp => {
                self.apps[f.target].ensure_running()?;
            }
            Kind::LinkDelay | Kind::LinkDrop | Kind::LinkCut | Kind::LinkHalfOpen => {
                self.relays[f.target].set(LinkFault::Healthy)
            }
        }
        Ok(false)
    }

    /// Everything back: flags removed, links healed, every process running
    /// with its own clock. Returns the proxies that started a new run.
    fn heal_all(&mut self) -> Result<Vec<usize>, ClusterError> {
        for f in &self.fail_flags {
            let _ = std::fs::remove_file(f);
        }
        for r in &self.relays {
            r.set(LinkFault::Healthy);
        }
        for a in &mut self.apps {
            a.ensure_running()?;
        }
        for s in &mut self.sidecars {
            s.ensure_running()?;
        }
        let mut restarted = Vec::new();
        for (i, p) in self.proxies.iter_mut().enumerate() {
            if p.skew_ms != 0 {
                p.restart_with_skew(0)?;
                restarted.push(i);
            } else if p.ensure_running()? {
                restarted.push(i);
            }
        }
        Ok(restarted)
    }
}

/// The agent counters of one proxy's `/status`: (claims, claim records not
/// written).
async fn proxy_claims(admin: SocketAddr) -> Option<(u64, u64)> {
    let client = client();
    let req = http::Request::get(format!("http://{admin}/status"))
        .body(http_body_util::Empty::new())
        .ok()?;
    let r = tokio::time::timeout(Duration::from_secs(5), client.request(req))
        .await
        .ok()?
        .ok()?;
    let body = http_body_util::BodyExt::collect(r.into_body())
        .await
        .ok()?
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    let c = &v["reconfig"]["counters"];
    Some((c["claims"].as_u64()?, c["claim_record_errors"].as_u64()?))
}

/// Runs one campaign; `stop` ends it early (Ctrl-C).
pub async fn run(
    opts: &Options,
    mut stop: channel::Receiver<bool>,
) -> Result<Outcome, ClusterError> {
    let out = &std::path::absolute(&opts.out).map_err(|e| io(&opts.out, e))?;
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let tcp = opts.transport == WindowTransport::Tcp;
    let shape = Shape {
        proxies: 3,
        nodes: 9,
        tcp,
        span: opts.duration,
        gap: opts.gap,
        max_skew_ms: MAX_SKEW_MS,
    };
    let schedule = plan::schedule(opts.seed, &shape);
    let mut c = start(opts, out).await?;
    tracing::info!(
        seed = opts.seed,
        faults = schedule.len(),
        "chaos: cluster up; faults start"
    );

    let t0 = Instant::now();
    let findings = Arc::new(Mutex::new(watch::Findings::default()));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let tally = Arc::new(Traffic::default());
    let (stop_tx, stop_rx) = channel::channel(false);
    let (watch_tx, watch_rx) = channel::channel(false);
    let watcher = tokio::spawn(watch::run(
        c.nodes.iter().map(|n| n.shm.clone()).collect(),
        Duration::from_millis(10),
        t0,
        findings.clone(),
        watch_rx,
    ));
    let clients = traffic(&c, t0, tally.clone(), violations.clone(), stop_rx.clone());
    // Claims each proxy's current run had already seen (claim records are
    // attributed to the proxy's run that made them).
    let mut baseline: BTreeMap<u64, BTreeSet<(usize, u64)>> = BTreeMap::new();
    let mut history = Vec::new();
    let mut active: Vec<Active> = Vec::new();
    let mut next = 0;
    let mut interrupted = false;
    while t0.elapsed() < opts.duration || !active.is_empty() {
        if *stop.borrow() {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < active.len() {
            if active[i].until <= now {
                let a = active.remove(i);
                if c.heal(&a.fault)? {
                    note_start(&mut baseline, a.fault.target, &findings);
                }
            } else {
                i += 1;
            }
        }
        while next < schedule.len() && t0 + schedule[next].at <= now {
            let f = schedule[next].clone();
            next += 1;
            let line = {
                let snapshot = findings.lock().map(|g| watch::Findings {
                    nodes: g.nodes.clone(),
                    ..Default::default()
                });
                let snapshot = snapshot.unwrap_or_default();
                c.inject(&f, &snapshot)?
            };
            if f.kind == Kind::SkewProxy {
                note_start(&mut baseline, f.target, &findings);
            }
            tracing::info!(fault = %line, "chaos: inject");
            history.push(line);
            active.push(Active {
                until: now + f.lasts,
                fault: f,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.changed() => {}
        }
    }
    let fault_seconds = t0.elapsed().as_secs_f64();
    for p in c.heal_all()? {
        note_start(&mut baseline, p, &findings);
    }

    // Settle: every node ACTIVE and OK, read after the healing and so for
    // a whole second, within the bound.
    let settle_from = Instant::now();
    let mut settled = None;
    let mut steady_since: Option<Instant> = None;
    while !interrupted && settle_from.elapsed() < opts.settle {
        let left = findings
            .lock()
            .map(|f| watch::unsettled(&f, settle_from))
            .unwrap_or_default();
        let alive = c.proxies.iter_mut().all(Managed::alive)
            && c.sidecars.iter_mut().all(Managed::alive)
            && c.apps.iter_mut().all(Managed::alive);
        if left.is_empty() && alive {
            let since = *steady_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(1) {
                settled = Some(since.duration_since(settle_from).as_secs_f64());
                break;
            }
        } else {
            steady_since = None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let traffic run on the settled cluster a little, then stop it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop_tx.send(true);
    for t in clients {
        let _ = t.await;
    }
    // Without traffic no site stays hot, so the claims stop: read the
    // proxies' counters, then give the checker time to see the last
    // records.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut counted = Vec::new();
    for &(_, admin) in &c.proxy_addrs {
        counted.push(proxy_claims(admin).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = watch_tx.send(true);
    let _ = watcher.await;

    let mut all = violations.lock().map(|v| v.clone()).unwrap_or_default();
    let f = findings
        .lock()
        .map(|g| g.clone())
        .map_err(|_| ClusterError::NotReady("checker poisoned".into()))?;
    all.extend(f.violations.iter().cloned());
    if settled.is_none() && !interrupted {
        let left: Vec<String> = watch::unsettled(&f, settle_from)
            .into_iter()
            .map(|i| {
                let s = &f.nodes[i];
                format!(
                    "n{} (role {}, applied {}, status {})",
                    i + 1,
                    s.role.map_or("?".into(), |r| r.to_string()),
                    s.applied,
                    s.status.map_or("?".into(), |st| st.to_string())
                )
            })
            .collect();
        all.push(format!(
            "node lost: not ACTIVE and OK {:.0}s after the faults stopped: {}",
            opts.settle.as_secs_f64(),
            left.join(", ")
        ));
    }
    // Counters and claim records agree, per proxy run.
    let mut proxy_counts = Vec::new();
    if !interrupted {
        for i in 0..c.proxy_addrs.len() {
            let id = i as u64 + 1;
            let seen = f
                .claims
                .iter()
                .filter(|((n, e), (p, _))| {
                    *p == id && !baseline.get(&id).is_some_and(|b| b.contains(&(*n, *e)))
                })
                .count() as u64;
            let got = counted.get(i).copied().flatten();
            if let Some((claims, unrecorded)) = got {
                proxy_counts.push((claims, seen, unrecorded));
            }
            match got {
                Some((claims, unrecorded)) if claims == seen + unrecorded => {}
                Some((claims, unrecorded)) => all.push(format!(
                    "proxy{id}: counted {claims} claims ({unrecorded} without a claim record), the windows hold {seen} claim records of its run"
                )),
                None => all.push(format!("proxy{id}: /status did not answer after the faults")),
            }
        }
    }
    let mut by_kind = BTreeMap::new();
    for line in &history {
        if let Some(k) = Kind::ALL.iter().find(|k| line.contains(k.name())) {
            *by_kind.entry(k.name()).or_insert(0) += 1;
        }
    }
    let outcome = Outcome {
        seed: opts.seed,
        transport: opts.transport.as_str(),
        fault_seconds,
        faults: history.len(),
        faults_by_kind: by_kind,
        requests: tally.requests.load(Ordering::Relaxed),
        ok: tally.ok.load(Ordering::Relaxed),
        errors: tally.errors.load(Ordering::Relaxed),
        claims: f.claims.len(),
        moves: f.moves.iter().sum(),
        sidecar_restarts: f.reopened.iter().sum(),
        settled_after_s: settled,
        violations: all,
        proxy_claims: proxy_counts,
        claim_records: f
            .claims
            .iter()
            .map(|((n, e), (p, t))| (*n + 1, *e, *p, *t))
            .collect(),
    };
    let mut faults_text = format!(
        "# rdmalb-testbed chaos --seed {} --transport {} --duration {}s\n",
        opts.seed,
        opts.transport.as_str(),
        opts.duration.as_secs()
    );
    for l in &history {
        faults_text.push_str(l);
        faults_text.push('\n');
    }
    write(&out.join("faults.txt"), &faults_text)?;
    write(
        &out.join("chaos.json"),
        &serde_json::to_string_pretty(&outcome).unwrap_or_default(),
    )?;
    if !outcome.violations.is_empty() {
        eprintln!(
            "chaos: {} invariant violation(s) with seed {} ({}); replay with the same seed; fault history:\n{faults_text}",
            outcome.violations.len(),
            opts.seed,
            opts.transport.as_str()
        );
    }
    drop(c);
    Ok(outcome)
}

/// Marks proxy `p`'s run as starting now: the claim records it sees already
/// belong to earlier runs.
fn note_start(
    baseline: &mut BTreeMap<u64, BTreeSet<(usize, u64)>>,
    p: usize,
    findings: &Mutex<watch::Findings>,
) {
    if let Ok(f) = findings.lock() {
        baseline.insert(p as u64 + 1, f.claims.keys().copied().collect());
    }
}
