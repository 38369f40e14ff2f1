//! The campaign's cluster: starting it (generated configs, relays) and
//! injecting and healing faults in it.

use super::traffic::{client, request};
use super::*;

/// The running cluster.
pub(super) struct Cluster {
    pub(super) nodes: Vec<NodePlan>,
    pub(super) apps: Vec<Managed>,
    pub(super) sidecars: Vec<Managed>,
    pub(super) proxies: Vec<Managed>,
    pub(super) relays: Vec<Relay>,
    /// Per proxy: its listener and admin addresses.
    pub(super) proxy_addrs: Vec<(SocketAddr, SocketAddr)>,
    /// Files that make a node's reload command fail while they exist.
    pub(super) fail_flags: Vec<PathBuf>,
    pub(super) shm_files: Vec<PathBuf>,
    /// The proxies' states and the apps that are down, for the clients.
    pub(super) conditions: Arc<Conditions>,
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

pub(super) fn spec(opts: &Options, out: &Path) -> Result<Spec, ClusterError> {
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
    // Both retry conditions unless told otherwise: the campaign measures
    // what a live proxy answers with retries of broken connections on.
    let on = opts
        .retry_on
        .clone()
        .unwrap_or_else(|| vec!["conn-failure".to_string(), "empty-response".to_string()]);
    let text = format!(
        "{text}[proxy.global]\nretry_on = [{}]\n",
        on.iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    parse_spec(&text, &out.join("chaos-spec.toml")).map_err(|e| ClusterError::Generated {
        component: "chaos spec".into(),
        table: "chaos".into(),
        errors: e,
    })
}

/// Starts everything and waits until every site answers through every proxy.
pub(super) async fn start(opts: &Options, out: &Path) -> Result<Cluster, ClusterError> {
    let roles = SITES
        .iter()
        .zip([3usize, 3, 2])
        .flat_map(|(s, n)| std::iter::repeat_n(*s, n))
        .chain(std::iter::once(IDLE));
    let tcp = opts.transport == WindowTransport::Tcp;
    let mut setup = Setup::new(out, "chaos", tcp, roles)?;
    let spec = spec(opts, out)?;
    let mut c = Cluster {
        fail_flags: setup
            .nodes
            .iter()
            .map(|n| setup.conf.join(format!("{}.reload-fails", n.name)))
            .collect(),
        shm_files: setup.shm_files(3),
        conditions: Arc::new(Conditions::new(3, setup.nodes.len())),
        nodes: std::mem::take(&mut setup.nodes),
        apps: Vec::new(),
        sidecars: Vec::new(),
        proxies: Vec::new(),
        relays: Vec::new(),
        proxy_addrs: Vec::new(),
    };
    start_nodes(&mut c, &spec, &setup).await?;
    start_sidecars(&mut c, &spec, &setup).await?;
    start_proxies(&mut c, &spec, &setup).await?;
    Ok(c)
}

/// The testsrv nodes, until each listens and wrote its pid file.
async fn start_nodes(c: &mut Cluster, spec: &Spec, setup: &Setup) -> Result<(), ClusterError> {
    let (conf, logs) = (&setup.conf, &setup.logs);
    write_templates(conf)?;
    for (i, n) in c.nodes.iter().enumerate() {
        let p = write_node(spec, n, i, conf)?;
        let mut m = managed(&setup.exe, &n.name, "testsrv", &p, logs);
        m.start()?;
        c.apps.push(m);
    }
    wait(c, "nodes up", |c| {
        c.nodes
            .iter()
            .all(|n| n.pid_file.exists() && std::net::TcpStream::connect(n.listen).is_ok())
    })
    .await
}

/// A sidecar per node, its reload failing while the node's flag file
/// exists, until every window is there; over tcp, a relay per node.
async fn start_sidecars(c: &mut Cluster, spec: &Spec, setup: &Setup) -> Result<(), ClusterError> {
    let (conf, logs) = (&setup.conf, &setup.logs);
    for (i, n) in c.nodes.iter().enumerate() {
        // The reload fails while the node's flag file exists (the
        // campaign's "app reload fails" fault).
        let reload = format!(
            "test ! -e {} && kill -HUP $(cat {})",
            c.fail_flags[i].display(),
            n.pid_file.display()
        );
        let p = write_sidecar(spec, n, i + 1, conf, setup.psk.as_deref(), |t| {
            if let Some(toml::Value::Table(role)) = t.get_mut("role") {
                let argv = ["sh".to_string(), "-c".to_string(), reload];
                role.insert(
                    "reload".into(),
                    toml::Value::Array(argv.map(toml::Value::String).to_vec()),
                );
            }
        })?;
        let mut m = managed(
            &setup.appliance,
            &format!("{}-sidecar", n.name),
            "sidecar",
            &p,
            logs,
        );
        m.start()?;
        c.sidecars.push(m);
    }
    wait(c, "sidecar windows", |c| {
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
    Ok(())
}

/// The three proxies (over tcp reaching the sidecars through the relays),
/// until every site is served through every proxy.
async fn start_proxies(c: &mut Cluster, spec: &Spec, setup: &Setup) -> Result<(), ClusterError> {
    for id in 1..=3u32 {
        let addrs = (free_addr()?, free_addr()?);
        let mut t = gen::proxy(spec, id, &c.nodes, addrs, setup.tag, setup.psk.as_deref());
        if let Some(toml::Value::Array(nodes)) = t.get_mut("node") {
            for (i, node) in nodes.iter_mut().enumerate() {
                if let (Some(r), toml::Value::Table(nt)) = (c.relays.get(i), node) {
                    nt.insert("sidecar".into(), toml::Value::String(r.addr().to_string()));
                }
            }
        }
        let p = write_proxy(&t, &setup.conf.join(format!("proxy{id}.toml")))?;
        let mut m = managed(
            &setup.appliance,
            &format!("proxy{id}"),
            "proxy",
            &p,
            &setup.logs,
        );
        m.start()?;
        c.proxies.push(m);
        c.proxy_addrs.push(addrs);
    }
    let client = client();
    wait_async(c, "every site served through every proxy", |c| {
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
    .await
}

pub(super) fn managed(exe: &Path, name: &str, sub: &str, config: &Path, logs: &Path) -> Managed {
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

pub(super) const START_BOUND: Duration = Duration::from_secs(60);

pub(super) async fn wait(
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

pub(super) async fn wait_async<F, Fut>(
    c: &mut Cluster,
    what: &str,
    ready: F,
) -> Result<(), ClusterError>
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

impl Cluster {
    /// Applies `f`; returns a line for the history.
    pub(super) fn inject(
        &mut self,
        f: &Fault,
        findings: &watch::Findings,
    ) -> Result<String, ClusterError> {
        let mut line = f.to_string();
        // Each state is set before the signal: a client that sees the
        // connection close must already read the new state.
        let states = &self.conditions.proxies;
        match f.kind {
            Kind::KillProxy => {
                states.set(f.target, ProxyState::Killed);
                self.proxies[f.target].kill();
            }
            Kind::StopProxy => {
                states.set(f.target, ProxyState::Stopped);
                self.proxies[f.target].stop();
            }
            Kind::SkewProxy => self.restart_proxy(f.target, f.amount)?,
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
            Kind::KillApp => {
                self.conditions.apps.set(f.target, true);
                self.apps[f.target].kill();
            }
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
    pub(super) fn heal(&mut self, f: &Fault) -> Result<bool, ClusterError> {
        match f.kind {
            Kind::KillProxy | Kind::StopProxy => return self.resume_proxy(f.target),
            Kind::SkewProxy => {
                self.restart_proxy(f.target, 0)?;
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
                self.conditions.apps.set(f.target, false);
            }
            Kind::LinkDelay | Kind::LinkDrop | Kind::LinkCut | Kind::LinkHalfOpen => {
                self.relays[f.target].set(LinkFault::Healthy)
            }
        }
        Ok(false)
    }

    /// Everything back: flags removed, links healed, every process running
    /// with its own clock. Returns the proxies that started a new run.
    pub(super) fn heal_all(&mut self) -> Result<Vec<usize>, ClusterError> {
        for f in &self.fail_flags {
            let _ = std::fs::remove_file(f);
        }
        for r in &self.relays {
            r.set(LinkFault::Healthy);
        }
        for (i, a) in self.apps.iter_mut().enumerate() {
            a.ensure_running()?;
            self.conditions.apps.set(i, false);
        }
        for s in &mut self.sidecars {
            s.ensure_running()?;
        }
        let mut restarted = Vec::new();
        for i in 0..self.proxies.len() {
            if self.proxies[i].skew_ms != 0 {
                self.restart_proxy(i, 0)?;
                restarted.push(i);
            } else if self.resume_proxy(i)? {
                restarted.push(i);
            }
        }
        Ok(restarted)
    }

    /// Kills proxy `p` and starts it again with clock offset `skew_ms`.
    fn restart_proxy(&mut self, p: usize, skew_ms: i64) -> Result<(), ClusterError> {
        let states = &self.conditions.proxies;
        states.set(p, ProxyState::Killed);
        self.proxies[p].restart_with_skew(skew_ms)?;
        states.set(p, ProxyState::Restarting);
        Ok(())
    }

    /// Continues proxy `p` if stopped, starts it if dead; true when it
    /// started (it is restarting until it answers).
    fn resume_proxy(&mut self, p: usize) -> Result<bool, ClusterError> {
        let was = self.conditions.proxies.read(p).state();
        let started = self.proxies[p].ensure_running()?;
        if started {
            self.conditions.proxies.set(p, ProxyState::Restarting);
        } else if was == ProxyState::Stopped {
            self.conditions.proxies.set(p, ProxyState::Live);
        }
        Ok(started)
    }
}

#[cfg(test)]
mod tests;
