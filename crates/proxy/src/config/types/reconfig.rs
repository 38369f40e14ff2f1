//! The typed `[reconfig]` section: the agent's mode, timing, thresholds,
//! lock, this proxy's own window and its peers (validated by
//! `config::reconfig`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::WindowEndpoint;

/// Whether the proxy moves nodes between sites (docs/reconfiguration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconfigMode {
    /// The agent never moves a node: every node keeps the site its role word
    /// (or the config) gives it; only an admin move changes it. The default.
    Rigid,
    /// Run the agent: claim idle nodes of other sites for hot sites.
    Reconfigure,
}

impl ReconfigMode {
    pub const ACCEPTED: &'static str = "\"rigid\" or \"reconfigure\"";

    pub fn as_str(self) -> &'static str {
        match self {
            ReconfigMode::Rigid => "rigid",
            ReconfigMode::Reconfigure => "reconfigure",
        }
    }
}

/// `[reconfig]`: the agent's timing, thresholds, lock and peers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconfig {
    pub mode: ReconfigMode,
    /// S: how often the agent reads every node's load and role (seed 001
    /// section 3.1.4).
    pub sensitivity: Duration,
    /// How often routing re-reads every node's role word and applied epoch
    /// (cheaper than a round: two words per node), so that a node another
    /// proxy claimed stops getting the old site's requests within this time.
    pub role_poll: Duration,
    /// T: how long a site must stay above `high_watermark` to be hot (seed
    /// 001 section 3.1.3, history-aware reconfiguration).
    pub history: Duration,
    /// Longest T a site's history adapts to after claims whose burst ended
    /// as the node arrived (`reconfig::history`); equal to `history`: T is
    /// fixed. Default 4 × `history`.
    pub history_max: Duration,
    /// Site load (mean utilisation of its active nodes, 1.0 = full) above
    /// which a site is hot.
    pub high_watermark: f64,
    /// Node load under which a node is idle enough to be a donor.
    pub low_watermark: f64,
    /// How long a site lock is held at most (its lease).
    pub lock_lease: Duration,
    /// Clock-skew allowance: an expired lease is stolen only this long after
    /// its deadline.
    pub lock_skew: Duration,
    /// A node moved by any proxy is not moved again for this long.
    pub cooldown: Duration,
    /// A node an operator moved (`move node`, `POST /reconfig/move`) is
    /// pinned there this long: no proxy's agent moves it until then or
    /// until `release node` (the pin is word `PIN` of its window). Zero:
    /// no pin, the agent may move it back after `cooldown`.
    pub manual_pin: Duration,
    /// Loans (`reconfig::donor::choose_return`): a node serving another
    /// site than its `[[node]]` entry's goes home, through the claim path,
    /// once the site it serves has been cool (neither loaded nor short) for
    /// this long, the node is idle and its home site has fewer nodes than
    /// the config gives it. Off: nodes stay where they were claimed.
    /// Default: `history` ([`Reconfig::loan_return`]).
    pub loan_return: Delay,
    /// A hot site claims only when its burst is expected to last at least
    /// this much longer (`reconfig::history`, "Burst estimate"). Off:
    /// claim whenever hot. Default: `cooldown`, which a claimed node is
    /// held for anyway ([`Reconfig::claim_horizon`]).
    pub claim_horizon: Delay,
    /// The most nodes a hot site claims in one round, when it is short by
    /// several (`reconfig::donor::shortfall`: its guarantee's need, or work
    /// queued beyond its nodes' capacity). 1: one node per hot event.
    /// Default 4.
    pub claim_batch: usize,
    /// Guarantee reserve: a guaranteed site keeps, as a donor, the nodes
    /// its guarantee needed at its peak until its need has stayed lower for
    /// this long (hysteresis: nodes do not flow away the moment its demand
    /// dips). Off: it keeps only what its demand needs now. Default:
    /// `history` ([`Reconfig::guarantee_hold`]).
    pub guarantee_hold: Delay,
    /// A site short of its guarantee (served below min(offered,
    /// guarantee) beyond the tolerance) in every round for this long
    /// claims the nodes its guarantee needs at once: without waiting for T
    /// and without the burst estimate. Off: a short site waits for T like a
    /// loaded one. Default: `sensitivity` (one short round;
    /// [`Reconfig::guarantee_history`]).
    pub guarantee_history: Delay,
    /// A node SWITCHING for longer than this is overdue: reclaimed (CAS
    /// back to the site it serves) when its sidecar is alive, shown parked
    /// when its sidecar is gone.
    pub switch_timeout: Duration,
    /// Cap of the backoff between rollbacks of a node that keeps failing to
    /// apply (S, 2S, 4S, ... after the second failure in a row).
    pub rollback_backoff_max: Duration,
    /// Proxy id whose window holds the site locks.
    pub lock_home: u16,
    /// This proxy's own window (site locks if it is the lock home, and its
    /// shared update counters).
    pub window: ProxyWindow,
    /// The other proxies of the cluster.
    pub peers: Vec<PeerProxy>,
}

impl Reconfig {
    /// `reconfig.manual_pin` when unset: an operator's move holds for an
    /// hour unless released.
    pub const DEFAULT_MANUAL_PIN: Duration = Duration::from_secs(3600);
    /// Longest `reconfig.manual_pin`.
    pub const MAX_MANUAL_PIN: Duration = Duration::from_secs(30 * 24 * 3600);
}

impl Default for Reconfig {
    fn default() -> Self {
        Reconfig {
            mode: ReconfigMode::Rigid,
            sensitivity: Duration::from_millis(200),
            role_poll: Duration::from_millis(10),
            history: Duration::from_secs(1),
            history_max: Duration::from_secs(4),
            high_watermark: 0.8,
            low_watermark: 0.2,
            lock_lease: Duration::from_secs(2),
            lock_skew: Duration::from_millis(500),
            cooldown: Duration::from_secs(5),
            manual_pin: Self::DEFAULT_MANUAL_PIN,
            loan_return: Delay::Default,
            claim_horizon: Delay::Default,
            claim_batch: 4,
            guarantee_hold: Delay::Default,
            guarantee_history: Delay::Default,
            switch_timeout: Duration::from_secs(30),
            rollback_backoff_max: Duration::from_secs(60),
            lock_home: 1,
            window: ProxyWindow::default(),
            peers: Vec::new(),
        }
    }
}

/// A delay whose default is another setting's value (so a config, or a
/// `Reconfig { .. }` built in code, that changes that setting moves the
/// default with it), or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delay {
    /// The setting it follows (see the field).
    #[default]
    Default,
    /// This long.
    Set(Duration),
    /// Never.
    Off,
}

impl Delay {
    fn or(self, default: Duration) -> Option<Duration> {
        match self {
            Delay::Default => Some(default),
            Delay::Set(d) => Some(d),
            Delay::Off => None,
        }
    }
}

impl Reconfig {
    /// How long a borrower stays cool before a loaned node goes home
    /// (`None`: loans are off).
    pub fn loan_return(&self) -> Option<Duration> {
        self.loan_return.or(self.history)
    }

    /// How much longer a burst must be expected to last for a claim
    /// (`None`: claim whenever hot).
    pub fn claim_horizon(&self) -> Option<Duration> {
        self.claim_horizon.or(self.cooldown)
    }

    /// How long a guaranteed site keeps the nodes of its peak need (`None`:
    /// no reserve).
    pub fn guarantee_hold(&self) -> Option<Duration> {
        self.guarantee_hold.or(self.history)
    }

    /// How long a site must be short of its guarantee before it claims
    /// without T (`None`: it waits for T).
    pub fn guarantee_history(&self) -> Option<Duration> {
        self.guarantee_history.or(self.sensitivity)
    }
}

/// Bound on one remote window operation of the reconfiguration protocol
/// (`reconfig::protocol::op`): a peer that stopped answering must not hang
/// a round.
pub const WINDOW_OP_TIMEOUT: Duration = Duration::from_millis(500);
/// Shortest `lock_skew`: a write started under the lock may land up to one
/// op timeout after its holder's deadline check, so a lock is taken over at
/// least that long after its deadline.
pub const MIN_LOCK_SKEW: Duration = WINDOW_OP_TIMEOUT;
/// Shortest `lock_lease`: room for the fresh view under the lock and the
/// two fenced write steps, each of which needs one op timeout of lease left.
pub const MIN_LOCK_LEASE: Duration = Duration::from_millis(4 * 500);

/// `[reconfig.window]`: how peers reach this proxy's window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyWindow {
    /// Window file under /dev/shm (same-host peers map it).
    pub shm: Option<PathBuf>,
    /// Tcp responder address (authenticated with `cluster.psk_file`).
    pub tcp: Option<SocketAddr>,
    /// Verbs control port (RDMA; authenticated with `cluster.psk_file`).
    /// Never with `shm` or `tcp`: peers then change the window with the
    /// NIC's atomics, which are not atomic with the CPU's, so every
    /// read-modify-write on it must come through the NIC (this proxy's own
    /// agent included, over a loopback queue pair).
    pub verbs: Option<SocketAddr>,
    /// The RDMA device for `verbs` (default: the first device).
    pub device: Option<String>,
}

impl ProxyWindow {
    /// Whether this proxy serves a window at all.
    pub fn is_served(&self) -> bool {
        self.shm.is_some() || !self.listeners().is_empty()
    }

    /// The transports that run a server (all but shm: its memory is the
    /// file peers map), authenticated with `cluster.psk_file`.
    pub fn listeners(&self) -> Vec<rdmalb_window::Listen> {
        let tcp = self.tcp.map(|addr| rdmalb_window::Listen::Tcp { addr });
        let verbs = self.verbs.map(|control| rdmalb_window::Listen::Verbs {
            control,
            device: self.device.clone(),
        });
        tcp.into_iter().chain(verbs).collect()
    }
}

/// `[[reconfig.peer]]`: another proxy and where its window is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerProxy {
    /// The peer's `global.proxy_id`.
    pub id: u16,
    /// Its window (shm, tcp or verbs).
    pub window: WindowEndpoint,
}
