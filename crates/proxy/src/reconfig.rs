//! The reconfiguration agent inside the proxy (docs/reconfiguration.md;
//! seed 001 section 3, seed 003 section 3): it moves idle
//! nodes of other sites to a site that stays hot, with remote atomics on the
//! node and proxy windows, so that one high-load event yields exactly one
//! move however many proxies see it.
//!
//! - [`view`]: one node as read in a round (role word, applied epoch, role
//!   status, load) and the site load derived from it;
//! - [`history`]: hot-site detection over the history window T;
//! - [`donor`]: the one donor-choice function (priorities, guarantees,
//!   multi-stage pulls);
//! - the QoS policy it follows comes from [`crate::qos::guarantee`];
//! - [`protocol`]: the remote-atomic steps (site lock, role CAS, claim
//!   record, update counters);
//! - [`agent`]: the loop that observes, plans and applies, plus the admin
//!   move through the same lock and CAS;
//! - [`peers`]: where windows come from, this proxy's own window and the
//!   links to peer proxies;
//! - [`status`]: counters, metrics names and the `/status` document;
//! - [`events`]: the latest role changes, with their time.
//!
//! The role-word protocol shared with the sidecar is
//! `docs/reconfiguration.md` (and the contract it cites). Depends on
//! `config`, `window` and `balance`; nothing depends on it but the proxy
//! wiring.

pub mod agent;
pub mod donor;
pub mod events;
pub mod history;
pub mod peers;
pub mod protocol;
pub mod status;
pub mod view;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use agent::{Agent, AgentNode, AgentSettings, AgentSite, ClaimOutcome, MoveError};
pub use peers::{LocalWindow, OwnWindow, PeerLinks, ProxyWindows, WindowSource};
pub use status::AgentStatus;

use crate::balance::{Backends, NodeWindows};
use crate::config::Config;
use rdmalb_window::{site_table_hash, Psk, ReadPolicy, WindowError};

/// The agent's bound on reading one node (load block retries included); it
/// is off the request path, so it can wait longer than routing does.
const AGENT_READ_DEADLINE: Duration = Duration::from_millis(50);

/// A proxy's running reconfiguration: its own window, the links to its
/// peers and the agent.
pub struct Reconfiguration {
    /// The agent (for `/status` and admin moves).
    pub agent: Arc<Agent>,
    own: OwnWindow,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Reconfiguration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconfiguration")
            .field("agent", &self.agent)
            .field("own", &self.own)
            .finish()
    }
}

/// Fails at start-up, with the error that names the alternatives, when the
/// proxy window's transport or a peer's cannot be used here (verbs without
/// a usable RDMA device, or a binary built without verbs), instead of
/// retrying a link that can never come up.
fn check_available(config: &Config) -> Result<(), WindowError> {
    for l in config.reconfig.window.listeners() {
        l.check_available()?;
    }
    for p in &config.reconfig.peers {
        p.window.check_available()?;
    }
    Ok(())
}

impl Reconfiguration {
    /// Creates and serves this proxy's window, links to the peers and starts
    /// the agent (routing in `routing` follows the role words it reads;
    /// `demand` is what the data path counts per site, for the QoS rules).
    /// `config` is the start-up config (the agent's settings and node
    /// numbering; `[reconfig]` is restart-only), `current` the one in force.
    /// `None` when no node has a window: there are no role words to follow.
    /// Errors before anything starts: the window file or tcp port cannot be
    /// taken, or the PSK file is unusable.
    pub async fn start(
        config: &Config,
        current: Arc<ArcSwap<Config>>,
        nodes: Arc<NodeWindows>,
        routing: Arc<ArcSwap<Backends>>,
        demand: Arc<crate::qos::guarantee::Demand>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Option<Reconfiguration>, WindowError> {
        if !config.nodes.iter().any(|n| n.window.is_some()) {
            return Ok(None);
        }
        let psk = config
            .cluster
            .psk_file
            .as_ref()
            .map(Psk::from_file)
            .transpose()?;
        let id = config.global.proxy_id;
        let site_hash = site_table_hash(&config.site_names());
        check_available(config)?;
        let own = OwnWindow::serve(&config.reconfig.window, id, site_hash, psk.as_ref())?;
        let local = own.local(id, site_hash, psk.as_ref()).await?;
        let peers = Arc::new(PeerLinks::new(id, site_hash, psk, &config.reconfig.peers));
        peers.connect_missing().await;
        let mut settings = AgentSettings::from_config(config);
        settings.read_policy = ReadPolicy {
            staleness: config.routing.staleness,
            deadline: AGENT_READ_DEADLINE.max(config.routing.read_deadline),
            ..ReadPolicy::default()
        };
        // A node with a window gets traffic only once its role word has
        // been read: the site its [[node]] entry gives may be stale (other
        // proxies may have moved it while this one was down).
        for n in routing.load().nodes() {
            if config
                .nodes
                .iter()
                .any(|c| c.name == n.name && c.window.is_some())
            {
                n.await_role();
            }
        }
        let source = Arc::new(ProxyWindows::new(
            nodes,
            Arc::clone(&peers),
            config.nodes.iter().map(|n| n.name.clone()).collect(),
            current,
        ));
        let agent = Arc::new(
            Agent::new(settings, Arc::clone(own.memory()), source, Some(routing))
                .with_local_window(local)
                .with_qos(crate::qos::guarantee::QosPolicy::from_config(
                    config, demand,
                )),
        );
        // Read the role words once now: the caller opens the listeners (or
        // takes over a restarting proxy's) only after this returns, and a
        // node held out of routing until the watcher's first tick would
        // answer those first requests with 503 "no node is up".
        agent.poll_roles().await;
        tracing::info!(
            proxy_id = id,
            window = ?own,
            peers = config.reconfig.peers.len(),
            "proxy window served"
        );
        let tasks = vec![
            tokio::spawn(peers.maintain(shutdown.clone())),
            tokio::spawn(Arc::clone(&agent).watch_roles(shutdown.clone())),
            tokio::spawn(Arc::clone(&agent).run(shutdown)),
        ];
        Ok(Some(Reconfiguration { agent, own, tasks }))
    }

    /// Waits for the agent and the link keeper to stop (after shutdown).
    pub async fn join(self) {
        for t in self.tasks {
            let _ = t.await;
        }
        drop(self.own);
    }
}
