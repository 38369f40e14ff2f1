//! The windows the agent works on: where it finds node and peer-proxy
//! windows ([`WindowSource`]), this proxy's own window ([`OwnWindow`]: the
//! memory holding its shared update counters, and the site locks when it is
//! the lock home, served to peers over shm, tcp or verbs), and a reconnecting
//! set of links to peer proxies' windows ([`PeerLinks`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::watch;

use crate::balance::NodeWindows;
use crate::config::{Config, PeerProxy, ProxyWindow};
use rdmalb_window::link::{Link, Peer};
use rdmalb_window::memory::DEFAULT_MODE;
use rdmalb_window::transport::check_atomic_word;
use rdmalb_window::{
    seqlock, Expect, Psk, RemoteWindow, TransportKind, WindowError, WindowFuture, WindowMemory,
    WindowServer,
};

/// Where the agent finds the windows it reads and changes. The proxy
/// implements it over its node connections and [`PeerLinks`]; tests over
/// windows they own.
pub trait WindowSource: Send + Sync + 'static {
    /// Node `index`'s window (position in the config's `[[node]]` list), or
    /// `None` when the node has no window or it is not connected now.
    fn node(&self, index: usize) -> Option<Arc<dyn RemoteWindow>>;

    /// Peer proxy `id`'s window, or `None` when it is not connected now.
    fn proxy(&self, id: u16) -> Option<Arc<dyn RemoteWindow>>;
}

/// This proxy's own window memory seen through [`RemoteWindow`], so the agent
/// treats the lock home the same whether it is this proxy or a peer.
///
/// Reads are plain loads of the memory. Atomics are CPU atomics, except
/// when the window is served over verbs: peers then change it with the
/// NIC's atomics, which are not atomic with the CPU's, so this proxy's own
/// compare-and-swaps and fetch-and-adds go through the NIC too, over a
/// loopback queue pair ([`LocalWindow::with_atomics`]).
#[derive(Clone)]
pub struct LocalWindow {
    mem: Arc<WindowMemory>,
    atomics: Option<Arc<dyn RemoteWindow>>,
}

impl std::fmt::Debug for LocalWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalWindow")
            .field("path", &self.mem.path())
            .field("atomics", &self.atomics.as_ref().map(|a| a.peer()))
            .finish()
    }
}

impl LocalWindow {
    /// Wraps window memory this process owns.
    pub fn new(mem: Arc<WindowMemory>) -> Self {
        LocalWindow { mem, atomics: None }
    }

    /// Wraps window memory this process owns whose read-modify-writes must
    /// go through `atomics` (a link to the same window in the atomicity
    /// domain its peers use).
    pub fn with_atomics(mem: Arc<WindowMemory>, atomics: Arc<dyn RemoteWindow>) -> Self {
        LocalWindow {
            mem,
            atomics: Some(atomics),
        }
    }

    /// The memory.
    pub fn memory(&self) -> &Arc<WindowMemory> {
        &self.mem
    }
}

impl RemoteWindow for LocalWindow {
    fn kind(&self) -> TransportKind {
        match &self.atomics {
            Some(a) => a.kind(),
            // Same-process memory: one-sided like shm.
            None => TransportKind::Shm,
        }
    }

    fn peer(&self) -> &str {
        "own window"
    }

    fn is_alive(&self) -> bool {
        self.atomics.as_ref().is_none_or(|a| a.is_alive())
    }

    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]> {
        Box::pin(std::future::ready(Ok(seqlock::snapshot(&self.mem))))
    }

    fn read_word(&self, word: usize) -> WindowFuture<'_, u64> {
        let r = check_atomic_word(self.peer(), word).map(|()| self.mem.load(word).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }

    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64> {
        if let Some(a) = &self.atomics {
            return a.compare_swap(word, expected, new);
        }
        let r = check_atomic_word(self.peer(), word)
            .map(|()| self.mem.compare_swap(word, expected, new).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }

    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64> {
        if let Some(a) = &self.atomics {
            return a.fetch_add(word, delta);
        }
        let r = check_atomic_word(self.peer(), word)
            .map(|()| self.mem.fetch_add(word, delta).unwrap_or(0));
        Box::pin(std::future::ready(r))
    }
}

/// This proxy's window: memory (a `/dev/shm` file when `shm` is set, else
/// anonymous) and a server for each other transport it is served over
/// ([`ProxyWindow::listeners`]). The header's node id is the proxy id.
/// Dropping it stops the servers and removes the file.
pub struct OwnWindow {
    mem: Arc<WindowMemory>,
    servers: Vec<Box<dyn WindowServer>>,
    _stop: watch::Sender<bool>,
}

impl std::fmt::Debug for OwnWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnWindow")
            .field("path", &self.mem.path())
            .field("servers", &self.servers)
            .finish()
    }
}

impl OwnWindow {
    /// Creates and serves the window as configured. `psk` is required when
    /// a transport other than shm is (validation guarantees it).
    pub fn serve(
        cfg: &ProxyWindow,
        proxy_id: u16,
        site_hash: u64,
        psk: Option<&Psk>,
    ) -> Result<OwnWindow, WindowError> {
        let id = u64::from(proxy_id);
        let mem = Arc::new(match &cfg.shm {
            Some(path) => WindowMemory::create_shm(path, DEFAULT_MODE, id, site_hash)?,
            None => WindowMemory::anonymous(id, site_hash)?,
        });
        let (stop, stop_rx) = watch::channel(false);
        let mut servers = Vec::new();
        for listen in cfg.listeners() {
            let psk = psk.ok_or_else(|| WindowError::Psk {
                path: "cluster.psk_file".into(),
                reason: format!(
                    "not configured; a {} proxy window needs it",
                    listen.transport()
                ),
            })?;
            servers.push(listen.start(mem.clone(), psk.clone(), stop_rx.clone())?);
        }
        Ok(OwnWindow {
            mem,
            servers,
            _stop: stop,
        })
    }

    /// The bound address of the server of `kind`, when the window is
    /// served over it.
    pub fn local_addr(&self, kind: TransportKind) -> Option<std::net::SocketAddr> {
        self.servers
            .iter()
            .find(|s| s.kind() == kind)
            .map(|s| s.local_addr())
    }

    /// The window as the agent uses it: plain memory, or, when a transport
    /// it is served over has atomics the CPU's would race (verbs: peers
    /// change it with the NIC's), memory whose atomics go through that
    /// transport to its own server ([`WindowServer::atomics_endpoint`]).
    pub async fn local(
        &self,
        proxy_id: u16,
        site_hash: u64,
        psk: Option<&Psk>,
    ) -> Result<LocalWindow, WindowError> {
        let endpoint = self.servers.iter().find_map(|s| s.atomics_endpoint());
        let (Some(endpoint), Some(psk)) = (endpoint, psk) else {
            return Ok(LocalWindow::new(Arc::clone(&self.mem)));
        };
        let expect = Expect {
            node_id: Some(u64::from(proxy_id)),
            site_hash: Some(site_hash),
        };
        let link = Link::connect(Peer {
            endpoint: &endpoint,
            expect: &expect,
            psk: Some(psk),
            id: proxy_id,
        })
        .await?;
        Ok(LocalWindow::with_atomics(
            Arc::clone(&self.mem),
            Arc::clone(link.window()),
        ))
    }

    /// The memory.
    pub fn memory(&self) -> &Arc<WindowMemory> {
        &self.mem
    }
}

/// How often [`PeerLinks::maintain`] retries a missing or broken link.
pub const RECONNECT: Duration = Duration::from_millis(500);

/// Links to peer proxies' windows (shm or tcp), re-established in the
/// background when they break.
pub struct PeerLinks {
    me: u16,
    site_hash: u64,
    psk: Option<Psk>,
    peers: Vec<(PeerProxy, ArcSwapOption<Link>)>,
}

impl PeerLinks {
    /// Links for `peers`, none connected yet (see [`maintain`](Self::maintain)).
    pub fn new(me: u16, site_hash: u64, psk: Option<Psk>, peers: &[PeerProxy]) -> Self {
        PeerLinks {
            me,
            site_hash,
            psk,
            peers: peers
                .iter()
                .map(|p| (p.clone(), ArcSwapOption::empty()))
                .collect(),
        }
    }

    /// The window of peer `id`, if linked.
    pub fn get(&self, id: u16) -> Option<Arc<dyn RemoteWindow>> {
        self.peers
            .iter()
            .find(|(p, _)| p.id == id)
            .and_then(|(_, l)| l.load().as_ref().map(|l| Arc::clone(l.window())))
    }

    /// Ids of every configured peer.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.peers.iter().map(|(p, _)| p.id)
    }

    /// Connects every missing or broken link once.
    pub async fn connect_missing(&self) {
        for (peer, slot) in &self.peers {
            if slot.load().as_ref().is_some_and(|l| l.is_alive()) {
                continue;
            }
            match self.connect(peer).await {
                Ok(link) => {
                    tracing::info!(peer = peer.id, window = %link.window().peer(), "linked to peer proxy window");
                    slot.store(Some(Arc::new(link)));
                }
                Err(e) => {
                    if slot.swap(None).is_some() {
                        tracing::warn!(peer = peer.id, error = %e, "peer proxy window lost");
                    } else {
                        tracing::debug!(peer = peer.id, error = %e, "peer proxy window not reachable yet");
                    }
                }
            }
        }
    }

    /// Keeps the links up until `shutdown` turns true.
    pub async fn maintain(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            self.connect_missing().await;
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = tokio::time::sleep(RECONNECT) => {}
            }
        }
    }

    async fn connect(&self, peer: &PeerProxy) -> Result<Link, WindowError> {
        let expect = Expect {
            node_id: Some(u64::from(peer.id)),
            site_hash: Some(self.site_hash),
        };
        Link::connect(Peer {
            endpoint: &peer.window,
            expect: &expect,
            psk: self.psk.as_ref(),
            id: self.me,
        })
        .await
    }
}

/// The proxy's windows: its node connections (the balancer's
/// [`NodeWindows`], shared with load-aware routing) and its peer links.
///
/// The agent numbers nodes as in the config it started with; `NodeWindows`
/// follows reloads, so nodes are matched by name in the config in force.
pub struct ProxyWindows {
    pub nodes: Arc<NodeWindows>,
    pub peers: Arc<PeerLinks>,
    /// The agent's node names, by its node index.
    pub names: Vec<String>,
    /// The config in force (swapped on reload).
    pub config: Arc<ArcSwap<Config>>,
    /// Each agent node's position in the config it was computed for. The
    /// agent asks for every node several times a round (and `watch_roles`
    /// every `role_poll`); finding each by name in the node list made that
    /// quadratic in the nodes.
    positions: ArcSwapOption<Positions>,
}

/// Agent node index → position in `config.nodes`.
struct Positions {
    config: Arc<Config>,
    of: Vec<Option<usize>>,
}

impl ProxyWindows {
    /// The windows of `nodes` and `peers`; `names` are the agent's node
    /// names by its node index, `config` the config in force.
    pub fn new(
        nodes: Arc<NodeWindows>,
        peers: Arc<PeerLinks>,
        names: Vec<String>,
        config: Arc<ArcSwap<Config>>,
    ) -> Self {
        ProxyWindows {
            nodes,
            peers,
            names,
            config,
            positions: ArcSwapOption::empty(),
        }
    }

    /// Where agent node `index` is in the config in force (rebuilt once per
    /// reload).
    fn position(&self, index: usize) -> Option<usize> {
        let config = self.config.load();
        if let Some(p) = self.positions.load().as_ref() {
            if Arc::ptr_eq(&p.config, &*config) {
                return p.of.get(index).copied().flatten();
            }
        }
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(config.nodes.len());
        for (i, n) in config.nodes.iter().enumerate() {
            by_name.entry(n.name.as_str()).or_insert(i);
        }
        let of = self
            .names
            .iter()
            .map(|n| by_name.get(n.as_str()).copied())
            .collect();
        let p = Arc::new(Positions {
            config: Arc::clone(&config),
            of,
        });
        self.positions.store(Some(Arc::clone(&p)));
        p.of.get(index).copied().flatten()
    }
}

impl WindowSource for ProxyWindows {
    fn node(&self, index: usize) -> Option<Arc<dyn RemoteWindow>> {
        self.nodes.get(self.position(index)?)
    }

    fn proxy(&self, id: u16) -> Option<Arc<dyn RemoteWindow>> {
        self.peers.get(id)
    }
}
