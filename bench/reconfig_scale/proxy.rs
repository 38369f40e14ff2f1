//! One proxy of the scale bench: the proxy's own reconfiguration wiring
//! (`Reconfiguration::start`: its window, peer links, node windows,
//! routing that follows the role words, the agent with its QoS policy and
//! `watch_roles`) on its own Tokio runtime and OS thread, as a separate
//! `rdmalb proxy` process would have it. The one difference: the bench runs
//! the agent's round loop itself (the loop of `Agent::run`: a round every S,
//! missed ticks delayed) so that it can time each round.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use rdmalb_proxy::balance::{Backends, NodeWindows};
use rdmalb_proxy::config::Config;
use rdmalb_proxy::qos::guarantee::{Demand, QosPolicy};
use rdmalb_proxy::reconfig::status::CountersSnapshot;
use rdmalb_proxy::reconfig::{
    Agent, AgentSettings, ClaimOutcome, OwnWindow, PeerLinks, ProxyWindows,
};
use rdmalb_window::{site_table_hash, ReadPolicy, SiteSlot};
use tokio::sync::watch;

/// The scenario every proxy shares.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub sites: usize,
    pub proxies: u16,
    pub node_paths: Vec<PathBuf>,
    pub initial: Vec<SiteSlot>,
    pub sensitivity: Duration,
    pub history: Duration,
    pub cooldown: Duration,
    /// `/dev/shm` prefix of the proxies' own windows.
    pub tag: String,
}

impl Scenario {
    pub fn site_names(&self) -> Vec<String> {
        (0..self.sites).map(|s| format!("s{s}")).collect()
    }

    pub fn proxy_window(&self, id: u16) -> PathBuf {
        PathBuf::from(format!("/dev/shm/{}-p{id}", self.tag))
    }

    /// Proxy `id`'s config, as an operator would write it.
    pub fn config_text(&self, id: u16) -> String {
        let mut t = format!(
            "[global]\nproxy_id = {id}\n\n[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:{}\"\n\n",
            18000 + id
        );
        for s in self.site_names() {
            t.push_str(&format!(
                "[[site]]\nname = \"{s}\"\nhosts = [\"{s}.test\"]\nmin_nodes = 1\nmax_nodes = {}\n\n",
                self.node_paths.len()
            ));
        }
        for (i, (path, site)) in self.node_paths.iter().zip(&self.initial).enumerate() {
            let site = match site.index() {
                Some(s) => format!("s{s}"),
                None => "idle".into(),
            };
            // Nothing listens there: the bench starts no health checks.
            t.push_str(&format!(
                "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"{site}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n",
                20000 + i,
                path.display()
            ));
        }
        let ms = |d: Duration| d.as_millis();
        t.push_str(&format!(
            "[reconfig]\nmode = \"reconfigure\"\nsensitivity = \"{}ms\"\nhistory = \"{}ms\"\nhistory_max = \"{}ms\"\ncooldown = \"{}ms\"\nwindow = {{ shm = \"{}\" }}\n\n",
            ms(self.sensitivity),
            ms(self.history),
            ms(self.history),
            ms(self.cooldown),
            self.proxy_window(id).display()
        ));
        for peer in (1..=self.proxies).filter(|p| *p != id) {
            t.push_str(&format!(
                "[[reconfig.peer]]\nid = {peer}\ntransport = \"shm\"\nwindow = \"{}\"\n\n",
                self.proxy_window(peer).display()
            ));
        }
        t
    }
}

/// A claim one agent made.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub at: Instant,
    pub proxy: u16,
    pub node: usize,
    pub site: usize,
    pub epoch: u64,
}

/// What one proxy measured.
#[derive(Debug, Default)]
pub struct ProxyReport {
    pub id: u16,
    /// Duration of every round, seconds.
    pub rounds: Vec<f64>,
    /// Duration of the rounds that made a claim, seconds.
    pub claim_rounds: Vec<f64>,
    pub claims: Vec<Claimed>,
    /// Claim attempts by outcome name.
    pub outcomes: std::collections::BTreeMap<&'static str, u64>,
    pub errors: Vec<String>,
    pub counters: CountersSnapshot,
}

fn outcome_name(o: &ClaimOutcome) -> &'static str {
    match o {
        ClaimOutcome::Claimed { .. } => "claimed",
        ClaimOutcome::Skipped => "skipped",
        ClaimOutcome::LockBusy { .. } => "lock_busy",
        ClaimOutcome::NoDonor => "no_donor",
        ClaimOutcome::LostCas { .. } => "lost_cas",
        ClaimOutcome::LeaseExpired => "lease_expired",
        ClaimOutcome::Coming { .. } => "coming",
        ClaimOutcome::LockLost { .. } => "lock_lost",
        ClaimOutcome::Unresolved { .. } => "unresolved",
    }
}

fn index_of(name: &str, prefix: char) -> Option<usize> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// Runs proxy `id` until `stop` turns true (bounded by `max`). `ready` is
/// passed by every proxy once its own window exists, so the peer links find
/// each other's windows.
pub fn run(
    scenario: &Scenario,
    id: u16,
    ready: &Barrier,
    stop: &AtomicBool,
    max: Duration,
) -> ProxyReport {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let text = scenario.config_text(id);
        let config: Config = rdmalb_proxy::config::parse(&text, Path::new("scale.toml"))
            .unwrap_or_else(|e| panic!("proxy {id} config: {e}"));
        let (shutdown_tx, shutdown) = watch::channel(false);
        let site_hash = site_table_hash(&config.site_names());
        let own = OwnWindow::serve(&config.reconfig.window, id, site_hash, None)
            .unwrap_or_else(|e| panic!("proxy {id} window: {e}"));
        ready.wait();
        let nodes = NodeWindows::start(&config, shutdown.clone())
            .await
            .unwrap_or_else(|e| panic!("proxy {id} node windows: {e}"));
        let peers = Arc::new(PeerLinks::new(id, site_hash, None, &config.reconfig.peers));
        peers.connect_missing().await;
        let mut settings = AgentSettings::from_config(&config);
        settings.read_policy = ReadPolicy {
            staleness: config.routing.staleness,
            deadline: Duration::from_millis(50).max(config.routing.read_deadline),
            ..ReadPolicy::default()
        };
        let routing = Arc::new(ArcSwap::from_pointee(Backends::build(&config, None)));
        let source = Arc::new(ProxyWindows::new(
            nodes,
            Arc::clone(&peers),
            config.nodes.iter().map(|n| n.name.clone()).collect(),
            Arc::new(ArcSwap::from_pointee(config.clone())),
        ));
        let demand = Demand::new(config.sites.iter().map(|s| s.name.clone()));
        let agent = Arc::new(
            Agent::new(settings, Arc::clone(own.memory()), source, Some(routing))
                .with_qos(QosPolicy::from_config(&config, demand)),
        );
        let tasks = [
            tokio::spawn(Arc::clone(&peers).maintain(shutdown.clone())),
            tokio::spawn(Arc::clone(&agent).watch_roles(shutdown.clone())),
        ];
        let mut report = ProxyReport {
            id,
            ..ProxyReport::default()
        };
        let mut tick = tokio::time::interval(scenario.sensitivity);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let started = Instant::now();
        while !stop.load(Ordering::Acquire) && started.elapsed() < max {
            tick.tick().await;
            let t = Instant::now();
            let (_, outcomes) = agent.round().await;
            let took = t.elapsed().as_secs_f64();
            report.rounds.push(took);
            let at = Instant::now();
            let mut claimed = false;
            for (site, r) in outcomes {
                match r {
                    Ok(o) => {
                        *report.outcomes.entry(outcome_name(&o)).or_default() += 1;
                        if let ClaimOutcome::Claimed { node, epoch, .. } = o {
                            claimed = true;
                            report.claims.push(Claimed {
                                at,
                                proxy: id,
                                node: index_of(&node, 'n').expect("node name"),
                                site,
                                epoch,
                            });
                        }
                    }
                    Err(e) => report.errors.push(e.to_string()),
                }
            }
            if claimed {
                report.claim_rounds.push(took);
            }
        }
        let _ = shutdown_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        report.counters = agent.counters().snapshot();
        drop(own);
        report
    })
}
