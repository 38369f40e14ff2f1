//! [`NodeWindows`]: the proxy's connections to its nodes' windows.
//!
//! Built from the config's `[[node]]` window endpoints (`transport` +
//! `sidecar`): shm maps the sidecar's window file ([`ShmWindow`](rdmalb_window::ShmWindow)), tcp
//! authenticates to its responder with the cluster PSK ([`TcpWindow`](rdmalb_window::TcpWindow)), verbs
//! pairs an RC queue pair through its control port (`VerbsWindow`). Every
//! connection checks the peer's header with [`Expect`]: magic, version,
//! size, the hash of this proxy's site table and, when the node sets
//! `node_id`, the node id.
//!
//! One supervisor task per node (on the caller's runtime) owns the
//! connection: it connects, reconnects with exponential backoff after the
//! transport reports `Closed` or the link breaks (tcp and verbs windows do
//! not reconnect themselves; an shm file replaced by a restarted sidecar is
//! noticed by its inode), and, for nodes read in `interval:<d>` mode, reads
//! the load block every `d` into a snapshot. Everything stops on the
//! shutdown watch. A reload ([`NodeWindows::reconfigure`]) keeps the
//! connection of every node whose endpoint, expected header, key and proxy
//! id are unchanged, starts new ones and stops the rest.
//!
//! The request path only loads atomics: [`NodeWindows::get`] (the window, or
//! `None` while not connected), [`NodeWindows::snapshot`] (interval mode) and
//! [`NodeWindows::record`] (the last load read and index, for /status, with
//! a `try_lock` that never waits).
//!
//! Verbs without an RDMA device fails at start-up with
//! [`WindowError::NoDevice`] (whose message names `shm` and `tcp`), never
//! later and never with a panic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::{watch, Notify};

use super::drain::Drain;
use super::load::{NodeLoad, Unknown};
use super::unseen::Dispatches;
use crate::config::{Config, ReadMode, WindowEndpoint};
use rdmalb_window::link::{Link, Peer};
use rdmalb_window::{Expect, LoadBlock, Psk, RemoteWindow, Torn, UnknownReason, WindowError};

/// First wait after a failed connection attempt; doubled up to
/// [`BACKOFF_MAX`] while attempts keep failing.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest wait between connection attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often a per-request node's link is checked when no reader reported
/// trouble.
const LIVENESS_EVERY: Duration = Duration::from_millis(250);
/// How long [`NodeWindows::start`] waits for the first connection attempts,
/// so the first requests already see loads.
const FIRST_ATTEMPT: Duration = Duration::from_secs(2);
/// Extra reads after a torn one.
pub const READ_RETRIES: u32 = 3;
/// How long a node's last observation (/status) may go without refresh
/// while decisions keep reading the same block ([`NodeWindow::record`]).
pub const RECORD_EVERY: Duration = Duration::from_millis(1);
const RECORD_EVERY_NS: u64 = RECORD_EVERY.as_nanos() as u64;

/// Read settings of one node, replaced on reload without reconnecting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadSettings {
    pub mode: ReadMode,
    pub deadline: Duration,
    pub staleness: Duration,
}

/// [`ReadSettings`] in three words: read on every decision with plain
/// loads instead of an `ArcSwap` guard per candidate (a measurable part of
/// a decision, docs/benchmarks.md). A reload stores the three one after
/// the other; a decision racing it may pair an old and a new value, which
/// is as harmless as deciding a moment earlier or later.
#[derive(Debug)]
struct SettingsCell {
    /// `u64::MAX` for per-request reads, else the interval in nanoseconds.
    interval_ns: AtomicU64,
    deadline_ns: AtomicU64,
    staleness_ns: AtomicU64,
}

const PER_REQUEST: u64 = u64::MAX;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(PER_REQUEST - 1)
}

impl SettingsCell {
    fn new(s: ReadSettings) -> SettingsCell {
        let cell = SettingsCell {
            interval_ns: AtomicU64::new(PER_REQUEST),
            deadline_ns: AtomicU64::new(0),
            staleness_ns: AtomicU64::new(0),
        };
        cell.store(s);
        cell
    }

    fn store(&self, s: ReadSettings) {
        let interval = match s.mode {
            ReadMode::PerRequest => PER_REQUEST,
            ReadMode::Interval(d) => nanos(d),
        };
        self.interval_ns.store(interval, Ordering::Relaxed);
        self.deadline_ns.store(nanos(s.deadline), Ordering::Relaxed);
        self.staleness_ns
            .store(nanos(s.staleness), Ordering::Relaxed);
    }

    /// `routing.staleness` in nanoseconds when the node is read per
    /// request, `None` in interval mode: the two words a per-request
    /// decision needs, without building a [`ReadSettings`].
    fn per_request_staleness_ns(&self) -> Option<u64> {
        (self.interval_ns.load(Ordering::Relaxed) == PER_REQUEST)
            .then(|| self.staleness_ns.load(Ordering::Relaxed))
    }

    fn load(&self) -> ReadSettings {
        ReadSettings {
            mode: match self.interval_ns.load(Ordering::Relaxed) {
                PER_REQUEST => ReadMode::PerRequest,
                ns => ReadMode::Interval(Duration::from_nanos(ns)),
            },
            deadline: Duration::from_nanos(self.deadline_ns.load(Ordering::Relaxed)),
            staleness: Duration::from_nanos(self.staleness_ns.load(Ordering::Relaxed)),
        }
    }
}

/// A load read kept for interval mode and /status.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// When the read completed.
    pub at: SystemTime,
    pub load: NodeLoad,
    /// The load index the last decision computed for the node (in-flight
    /// term included); `None` until one did.
    pub index: Option<f64>,
}

/// State of a node's window connection, for /status and logs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LinkState {
    Connecting,
    Connected { since_unix: u64 },
    Failed { error: String, since_unix: u64 },
}

/// Everything that makes a connection reusable across a reload.
#[derive(Debug, Clone)]
struct LinkKey {
    endpoint: WindowEndpoint,
    expect: Expect,
    proxy_id: u16,
    psk: Option<Psk>,
}

impl LinkKey {
    fn same(&self, o: &LinkKey) -> bool {
        let psk = match (&self.psk, &o.psk) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_as(b),
            _ => false,
        };
        self.endpoint == o.endpoint && self.expect == o.expect && self.proxy_id == o.proxy_id && psk
    }
}

/// One node's window: connection, settings, last reads, metrics.
pub struct NodeWindow {
    /// The node's name (metric label).
    pub node: String,
    key: LinkKey,
    link: ArcSwapOption<Link>,
    settings: SettingsCell,
    /// Interval mode: the latest read, refreshed by the supervisor.
    snapshot: ArcSwapOption<Observation>,
    /// The last read and index a decision saw (/status); a read of the
    /// block already kept is kept again only after [`RECORD_EVERY`]
    /// ([`NodeWindow::record`]).
    last: Mutex<Option<Observation>>,
    /// When `last` was written, unix nanoseconds (0: never).
    recorded_ns: AtomicU64,
    /// The sequence number of `last`'s block when it was fresh (0: not).
    recorded_seq: AtomicU64,
    /// The node's drain rate measured from this proxy's reads
    /// (`shortest-wait`).
    drain: Drain,
    /// This proxy's last dispatches to the node (`balance::unseen`).
    dispatches: Dispatches,
    state: Mutex<LinkState>,
    /// Readers that hit a transient error wake the supervisor.
    trouble: Notify,
    stop: watch::Sender<bool>,
    reads: metrics::Counter,
    unknown: [metrics::Counter; Unknown::ALL.len()],
}

impl std::fmt::Debug for NodeWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeWindow")
            .field("node", &self.node)
            .field("endpoint", &self.key.endpoint)
            .field("connected", &self.link.load().is_some())
            .finish()
    }
}

impl NodeWindow {
    /// The transport's name (`shm`, `tcp`, `verbs`).
    pub fn transport(&self) -> &'static str {
        self.key.endpoint.transport_name()
    }

    /// The read settings in force.
    pub fn settings(&self) -> ReadSettings {
        self.settings.load()
    }

    /// `routing.staleness` in nanoseconds when the node is read per
    /// request, `None` in interval mode (the request path's check).
    pub fn per_request_staleness_ns(&self) -> Option<u64> {
        self.settings.per_request_staleness_ns()
    }

    /// The window while connected.
    pub fn window(&self) -> Option<Arc<dyn RemoteWindow>> {
        self.link.load().as_ref().map(|l| Arc::clone(l.window()))
    }

    /// Connection state.
    pub fn state(&self) -> LinkState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The last read and index (/status).
    pub fn last(&self) -> Option<Observation> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Interval mode: the latest background read. A snapshot the reader has
    /// not refreshed for three intervals (it is stuck or gone) is
    /// [`Unknown::Stale`].
    pub fn snapshot(&self, now: SystemTime) -> NodeLoad {
        let s = self.settings();
        let bound = match s.mode {
            ReadMode::Interval(d) => d * 3 + s.deadline,
            ReadMode::PerRequest => s.staleness,
        };
        match self.snapshot.load().as_deref() {
            None => NodeLoad::Unknown(Unknown::Disconnected),
            Some(o) if now.duration_since(o.at).unwrap_or_default() > bound => {
                NodeLoad::Unknown(Unknown::Stale)
            }
            Some(o) => o.load,
        }
    }

    /// Reads the block of a connected shm window right here (plain loads
    /// from the mapping: no future, no allocation), retrying a torn read
    /// [`READ_RETRIES`] times; `None` when the node is not an shm window or
    /// not connected (then use [`read_now`] on [`NodeWindow::window`]).
    #[inline]
    pub fn read_inline(&self) -> Option<Result<LoadBlock, Unknown>> {
        let link = self.link.load();
        let shm = link.as_ref()?.shm()?;
        let mut retries = 0;
        loop {
            match shm.read_block() {
                Ok(b) => return Some(Ok(b)),
                Err(Torn::NeverPublished) => return Some(Err(Unknown::Unpublished)),
                Err(Torn::BadHeader { .. }) => return Some(Err(Unknown::Unreadable)),
                Err(_) if retries < READ_RETRIES => {
                    retries += 1;
                    // The owner is mid-write for well under a microsecond.
                    std::hint::spin_loop();
                }
                Err(_) => return Some(Err(Unknown::Torn)),
            }
        }
    }

    /// The node's drain-rate estimate (`shortest-wait`).
    pub fn drain(&self) -> &Drain {
        &self.drain
    }

    /// This proxy's recent dispatches to the node (window policies).
    pub fn dispatches(&self) -> &Dispatches {
        &self.dispatches
    }

    /// Counts a read and, when it is not fresh, its reason.
    pub fn count(&self, load: &NodeLoad) {
        self.reads.increment(1);
        if let Some(u) = load.unknown() {
            self.unknown[u.slot()].increment(1);
        }
    }

    /// Keeps `o` as the last observation, unless another thread is writing
    /// one right now (then its write stands: never wait on the hot path).
    ///
    /// A fresh read of the very block already kept (same sequence number)
    /// within [`RECORD_EVERY`] of keeping it is not kept again: between two
    /// publications (a sidecar publishes every millisecond) every decision
    /// reads the same block, and taking the lock and copying the
    /// observation for each would be a large part of a decision's cost. So
    /// /status always shows the newest block a decision read, any read that
    /// is not fresh (stale, torn, timed out, …) at once, and an index at
    /// most [`RECORD_EVERY`] older than the last decision's.
    pub fn record(&self, o: Observation) {
        let at = rdmalb_base::time::unix_ns(o.at);
        if self.keeps(at, &o.load) {
            self.keep(at, o);
        }
    }

    /// [`NodeWindow::record`] for a decision at `at` (`at_ns` its unix
    /// nanoseconds, computed once per decision): the check first, the
    /// observation built only when it is kept.
    pub fn record_decision(&self, at: SystemTime, at_ns: u64, load: &NodeLoad, index: f64) {
        if self.keeps(at_ns, load) {
            self.keep(
                at_ns,
                Observation {
                    at,
                    load: *load,
                    index: Some(index),
                },
            );
        }
    }

    /// Whether a read of `load` at `at_ns` is kept ([`NodeWindow::record`]).
    fn keeps(&self, at_ns: u64, load: &NodeLoad) -> bool {
        let seq = load.fresh().map_or(0, |b| b.seq);
        seq == 0
            || seq != self.recorded_seq.load(Ordering::Relaxed)
            || at_ns.wrapping_sub(self.recorded_ns.load(Ordering::Relaxed)) >= RECORD_EVERY_NS
    }

    fn keep(&self, at_ns: u64, o: Observation) {
        if let Ok(mut last) = self.last.try_lock() {
            let seq = o.load.fresh().map_or(0, |b| b.seq);
            *last = Some(o);
            self.recorded_seq.store(seq, Ordering::Relaxed);
            self.recorded_ns.store(at_ns, Ordering::Relaxed);
        }
    }

    /// Called by a reader whose read failed with `e`: a transient error makes
    /// the supervisor check the link now rather than at its next round.
    pub fn report(&self, e: &WindowError) {
        if e.is_transient() {
            self.trouble.notify_one();
        }
    }

    fn set_state(&self, s: LinkState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }
}

/// Reads one node's block now: consistent read with retries, classified
/// against `staleness`. No deadline (the caller applies one to all the
/// candidates of a decision at once). Transient errors are reported to the
/// node's supervisor.
pub async fn read_now(
    node: &NodeWindow,
    window: &dyn RemoteWindow,
    staleness: Duration,
) -> NodeLoad {
    let r = rdmalb_window::read_consistent(window, READ_RETRIES).await;
    let now = SystemTime::now();
    match r {
        Ok(block) => NodeLoad::classify(block, now, staleness),
        Err(UnknownReason::Torn { .. }) => NodeLoad::Unknown(Unknown::Torn),
        Err(UnknownReason::NeverPublished) => NodeLoad::Unknown(Unknown::Unpublished),
        Err(UnknownReason::Deadline(_)) => NodeLoad::Unknown(Unknown::Timeout),
        Err(UnknownReason::Error(e)) => {
            node.report(&e);
            NodeLoad::Unknown(match e {
                WindowError::Closed { .. } => Unknown::Disconnected,
                WindowError::Timeout { .. } => Unknown::Timeout,
                _ => Unknown::Unreadable,
            })
        }
    }
}

/// The node windows as of one moment ([`NodeWindows::table`]): a guard of
/// the table, not a clone of its `Arc` (no reference count touched per
/// decision).
pub struct Table(arc_swap::Guard<Arc<Vec<Option<Arc<NodeWindow>>>>>);

impl Table {
    /// The state of node `node` (config node index), if it has a window.
    pub fn node(&self, node: usize) -> Option<&Arc<NodeWindow>> {
        self.0.get(node)?.as_ref()
    }
}

/// Shared by the supervisors.
struct Shared {
    shutdown: watch::Receiver<bool>,
}

/// The windows of every configured node, indexed like `config.nodes`.
pub struct NodeWindows {
    table: ArcSwap<Vec<Option<Arc<NodeWindow>>>>,
    shared: Arc<Shared>,
    /// Serialises reconfigurations.
    update: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for NodeWindows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.table.load().iter()).finish()
    }
}

impl NodeWindows {
    /// Connects to every node's window and starts their supervisors on the
    /// current Tokio runtime. Waits (at most 2 s) for the first attempts so
    /// the first requests see loads; nodes that are not reachable yet are
    /// retried in the background.
    ///
    /// Errors, all before anything starts: the PSK file is unusable while a
    /// node uses tcp or verbs ([`WindowError::Psk`]); a node uses verbs and
    /// this host has no RDMA device ([`WindowError::NoDevice`]).
    pub async fn start(
        config: &Config,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<NodeWindows>, WindowError> {
        let w = Arc::new(NodeWindows {
            table: ArcSwap::from_pointee(Vec::new()),
            shared: Arc::new(Shared { shutdown }),
            update: tokio::sync::Mutex::new(()),
        });
        w.reconfigure(config).await?;
        Ok(w)
    }

    /// A `NodeWindows` with no windows (every load unknown): for policies
    /// built without a running proxy (benchmarks, tests).
    pub fn none() -> Arc<NodeWindows> {
        let (_tx, rx) = watch::channel(true);
        Arc::new(NodeWindows {
            table: ArcSwap::from_pointee(Vec::new()),
            shared: Arc::new(Shared { shutdown: rx }),
            update: tokio::sync::Mutex::new(()),
        })
    }

    /// The window of node `node` (config node index); `None` while it is not
    /// connected or the node has no window.
    pub fn get(&self, node: usize) -> Option<Arc<dyn RemoteWindow>> {
        self.node(node)?.window()
    }

    /// The per-node state of node `node` (config node index).
    pub fn node(&self, node: usize) -> Option<Arc<NodeWindow>> {
        self.table.load().get(node)?.clone()
    }

    /// Every node's state now, indexed by config node index (`None`: no
    /// window): one load for a whole decision (see [`Table::node`]).
    pub fn table(&self) -> Table {
        Table(self.table.load())
    }

    /// Runs `f` on node `node`'s state without cloning it (hot path).
    pub fn with_node<R>(&self, node: usize, f: impl FnOnce(&Arc<NodeWindow>) -> R) -> Option<R> {
        self.table.load().get(node)?.as_ref().map(f)
    }

    /// Number of node slots (config nodes).
    pub fn len(&self) -> usize {
        self.table.load().len()
    }

    /// Whether no node is configured.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks what a config needs before anything changes: the PSK when a
    /// node uses tcp or verbs, an RDMA device for verbs nodes.
    pub fn check(config: &Config) -> Result<Option<Psk>, WindowError> {
        let mut psk = None;
        for (n, endpoint) in config
            .nodes
            .iter()
            .filter_map(|n| Some((n, n.window.as_ref()?)))
        {
            endpoint.check_available()?;
            if endpoint.needs_key() && psk.is_none() {
                let path = config
                    .cluster
                    .psk_file
                    .as_ref()
                    .ok_or_else(|| WindowError::Psk {
                        path: "cluster.psk_file".into(),
                        reason: format!(
                            "not set, but node `{}` uses the {} transport",
                            n.name,
                            endpoint.transport_name()
                        ),
                    })?;
                psk = Some(Psk::from_file(path)?);
            }
        }
        Ok(psk)
    }

    /// Applies a (reloaded) config: nodes whose connection key is unchanged
    /// keep their connection, snapshot and counters (their read settings are
    /// updated in place); new ones connect; removed ones stop. On error
    /// nothing changes.
    pub async fn reconfigure(&self, config: &Config) -> Result<(), WindowError> {
        let psk = Self::check(config)?;
        let _serial = self.update.lock().await;
        let old = self.table.load_full();
        let mut reusable: HashMap<&str, &Arc<NodeWindow>> =
            old.iter().flatten().map(|w| (w.node.as_str(), w)).collect();
        let site_hash = rdmalb_window::site_table_hash(&config.site_names());
        let mut fresh = Vec::new();
        let table: Vec<Option<Arc<NodeWindow>>> = config
            .nodes
            .iter()
            .map(|n| {
                let endpoint = n.window.clone()?;
                let settings = ReadSettings {
                    mode: config.routing.mode_for(&endpoint),
                    deadline: config.routing.read_deadline,
                    staleness: config.routing.staleness,
                };
                let key = LinkKey {
                    psk: psk.clone().filter(|_| endpoint.needs_key()),
                    endpoint,
                    expect: Expect {
                        node_id: n.node_id.map(u64::from),
                        site_hash: Some(site_hash),
                    },
                    proxy_id: config.global.proxy_id,
                };
                let same = reusable
                    .get(n.name.as_str())
                    .is_some_and(|prev| prev.key.same(&key));
                if same {
                    let prev = reusable.remove(n.name.as_str())?;
                    if prev.settings() != settings {
                        prev.settings.store(settings);
                        // Re-time the supervisor's interval reads now.
                        prev.trouble.notify_one();
                    }
                    return Some(Arc::clone(prev));
                }
                let w = Arc::new(new_node_window(&n.name, key, settings));
                fresh.push(Arc::clone(&w));
                Some(w)
            })
            .collect();
        for gone in reusable.values() {
            let _ = gone.stop.send(true);
        }
        self.table.store(Arc::new(table));
        let first: Vec<_> = fresh
            .into_iter()
            .map(|w| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                tokio::spawn(supervise(w, Arc::clone(&self.shared), tx));
                rx
            })
            .collect();
        let _ = tokio::time::timeout(FIRST_ATTEMPT, futures_util::future::join_all(first)).await;
        Ok(())
    }
}

fn new_node_window(name: &str, key: LinkKey, settings: ReadSettings) -> NodeWindow {
    let unknown = Unknown::ALL.map(
        |u| metrics::counter!(LOAD_UNKNOWN, "node" => name.to_string(), "reason" => u.label()),
    );
    NodeWindow {
        node: name.to_string(),
        reads: metrics::counter!(LOAD_READS, "node" => name.to_string(), "transport" => key.endpoint.transport_name()),
        key,
        link: ArcSwapOption::empty(),
        settings: SettingsCell::new(settings),
        snapshot: ArcSwapOption::empty(),
        last: Mutex::new(None),
        recorded_ns: AtomicU64::new(0),
        recorded_seq: AtomicU64::new(0),
        drain: Drain::new(),
        dispatches: Dispatches::default(),
        state: Mutex::new(LinkState::Connecting),
        trouble: Notify::new(),
        stop: watch::channel(false).0,
        unknown,
    }
}

/// `rdmalb_load_reads_total{node,transport}`: load reads used by decisions
/// (per-request reads and interval snapshots).
pub const LOAD_READS: &str = "rdmalb_load_reads_total";
/// `rdmalb_load_unknown_total{node,reason}`: decisions that scored the node
/// from local information only, by reason (stale, torn, timeout, unreadable,
/// disconnected, unpublished).
pub const LOAD_UNKNOWN: &str = "rdmalb_load_unknown_total";

async fn connect(key: &LinkKey) -> Result<Link, WindowError> {
    Link::connect(Peer {
        endpoint: &key.endpoint,
        expect: &key.expect,
        psk: key.psk.as_ref(),
        id: key.proxy_id,
    })
    .await
}

/// Waits up to `d`; true when the node was removed or the proxy stops.
async fn pause(
    d: Duration,
    stop: &mut watch::Receiver<bool>,
    shutdown: &mut watch::Receiver<bool>,
    trouble: Option<&Notify>,
) -> bool {
    let woken = async {
        match trouble {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = woken => {}
        _ = rdmalb_base::shutdown::requested(stop) => return true,
        _ = rdmalb_base::shutdown::requested(shutdown) => return true,
    }
    *stop.borrow() || *shutdown.borrow()
}

/// One node's connection loop (module docs). Signals `first` after the
/// first connection attempt.
async fn supervise(
    node: Arc<NodeWindow>,
    shared: Arc<Shared>,
    first: tokio::sync::oneshot::Sender<()>,
) {
    let mut first = Some(first);
    let mut stop = node.stop.subscribe();
    let mut shutdown = shared.shutdown.clone();
    let mut backoff = BACKOFF_MIN;
    let mut failing = false;
    loop {
        if *stop.borrow() || *shutdown.borrow() {
            break;
        }
        let attempt = connect(&node.key).await;
        if let Some(f) = first.take() {
            let _ = f.send(());
        }
        match attempt {
            Ok(link) => {
                tracing::info!(node = %node.node, transport = node.transport(), peer = link.window().peer(), "window connected");
                let link = Arc::new(link);
                node.link.store(Some(Arc::clone(&link)));
                node.set_state(LinkState::Connected {
                    since_unix: rdmalb_base::time::unix_now_secs(),
                });
                backoff = BACKOFF_MIN;
                failing = false;
                let done = serve(&node, &link, &mut stop, &mut shutdown).await;
                node.link.store(None);
                node.snapshot.store(None);
                if done {
                    break;
                }
                tracing::warn!(node = %node.node, transport = node.transport(), "window connection lost; reconnecting");
                node.set_state(LinkState::Connecting);
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(node = %node.node, transport = node.transport(), error = %e, "cannot connect to the node's window; its load is unknown until it can (retrying with backoff)");
                }
                failing = true;
                node.set_state(LinkState::Failed {
                    error: e.to_string(),
                    since_unix: rdmalb_base::time::unix_now_secs(),
                });
                if pause(backoff, &mut stop, &mut shutdown, None).await {
                    break;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    node.link.store(None);
    tracing::debug!(node = %node.node, "window supervisor stopped");
}

/// While connected: interval reads (interval mode) and liveness checks.
/// Returns true when the node was removed or the proxy stops, false when the
/// link broke.
async fn serve(
    node: &NodeWindow,
    link: &Link,
    stop: &mut watch::Receiver<bool>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let mut next_read = tokio::time::Instant::now();
    loop {
        let s = node.settings();
        if let ReadMode::Interval(every) = s.mode {
            let now = tokio::time::Instant::now();
            if now >= next_read {
                let load = match tokio::time::timeout(
                    s.deadline,
                    read_now(node, link.window().as_ref(), s.staleness),
                )
                .await
                {
                    Ok(load) => load,
                    Err(_) => NodeLoad::Unknown(Unknown::Timeout),
                };
                let o = Observation {
                    at: SystemTime::now(),
                    load,
                    index: node.last().and_then(|l| l.index),
                };
                node.snapshot.store(Some(Arc::new(o)));
                node.record(o);
                next_read = now + every;
            }
        }
        let wait = match s.mode {
            ReadMode::Interval(_) => {
                next_read.saturating_duration_since(tokio::time::Instant::now())
            }
            ReadMode::PerRequest => LIVENESS_EVERY,
        };
        if pause(
            wait.min(LIVENESS_EVERY),
            stop,
            shutdown,
            Some(&node.trouble),
        )
        .await
        {
            return true;
        }
        if !link.is_alive() {
            return false;
        }
    }
}

mod status;
pub use status::{LastRead, LoadStatus};

#[cfg(test)]
mod tests;
