//! The agent: every S it reads every node's window, makes routing follow
//! the role words, rolls FAILED nodes back, tracks which sites are hot for
//! T, and claims one donor node per hot site through the seed 001 section
//! 3.2 protocol (dual update counters → site lock → fresh view → role CAS →
//! FAA the other proxies' counters → unlock).
//!
//! Desired state is data: each round computes a [`Plan`] (the diff between
//! what the sites need and what the nodes are: rollbacks of FAILED nodes,
//! one claim per hot site) and then applies it; every step that changes a
//! window is a CAS from a value read this round, so two proxies acting on
//! the same view can never both succeed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::watch;
use tokio::time::Instant;

use super::donor::{
    choose_donor, choose_return, fits_one_fewer, guarantee_needs, shortfall, DonorQuery,
    ReturnQuery, SiteLimits,
};
use super::events::{EventKind, EventLog};
use super::history::HotTracker;
use super::peers::{LocalWindow, WindowSource};
use super::protocol::{self, Fence, HeldLock, LockAttempt, ProtocolError};
use super::status::{self, Counters, NodeRole, SiteRole};
use super::view::{read_node, site_load, Effective, NodeView, ViewError};
use crate::balance::Backends;
use crate::config::{Config, Reconfig, ReconfigMode};
use crate::qos::guarantee::{QosAccount, QosPolicy};
use rdmalb_window::layout::update_counter_word;
use rdmalb_window::layout::word;
use rdmalb_window::{ReadPolicy, RemoteWindow, RoleState, RoleWord, SiteSlot, WindowMemory};

/// What the agent knows of one site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSite {
    pub name: String,
    pub limits: SiteLimits,
}

/// What the agent knows of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentNode {
    pub name: String,
    /// Only a node with a window can be read and claimed.
    pub has_window: bool,
    /// The site the config gives it (`None`: the idle pool).
    pub configured_site: Option<usize>,
}

/// What the agent needs from the config (fixed at start; `[reconfig]` and
/// the site table apply after a restart).
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub proxy_id: u16,
    pub reconfig: Reconfig,
    /// The sites, by site index.
    pub sites: Vec<AgentSite>,
    /// The nodes, by node index (the config's `[[node]]` order).
    pub nodes: Vec<AgentNode>,
    /// How node load blocks are read.
    pub read_policy: ReadPolicy,
}

impl AgentSettings {
    /// From a validated config.
    pub fn from_config(c: &Config) -> Self {
        AgentSettings {
            proxy_id: c.global.proxy_id,
            reconfig: c.reconfig.clone(),
            sites: c
                .sites
                .iter()
                .map(|s| {
                    let limits = SiteLimits {
                        min_nodes: s.min_nodes,
                        max_nodes: s.max_nodes,
                    };
                    AgentSite {
                        name: s.name.clone(),
                        limits,
                    }
                })
                .collect(),
            nodes: c
                .nodes
                .iter()
                .map(|n| AgentNode {
                    name: n.name.clone(),
                    has_window: n.window.is_some(),
                    configured_site: n.site,
                })
                .collect(),
            read_policy: ReadPolicy::default(),
        }
    }

    fn site_name(&self, slot: SiteSlot) -> String {
        match slot.index() {
            None => "idle".to_string(),
            Some(i) => self
                .sites
                .get(i)
                .map_or_else(|| format!("site#{i}"), |s| s.name.clone()),
        }
    }
}

/// One change the agent decided on this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// CAS a FAILED node back to the site its sidecar really serves (at
    /// once after a first failure, then with a growing backoff).
    Rollback { node: usize },
    /// CAS a node SWITCHING past `switch_timeout`, whose sidecar is alive,
    /// back to the site it serves.
    Reclaim { node: usize },
    /// Claim up to `count` donor nodes for a hot site, one after another
    /// (`reconfig.claim_batch`; `reconfig::donor::shortfall`).
    Claim { site: usize, count: usize },
    /// Bring a node on loan home to `site` (`reconfig::donor`, "Loans").
    Return { site: usize },
}

/// A round's decisions, applied in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
}

/// What an attempt to move a node ended with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ClaimOutcome {
    /// The role word now names the site: the node is SWITCHING.
    Claimed {
        node: String,
        site: String,
        epoch: u64,
    },
    /// The shared update counter moved: another proxy just acted; adopted.
    Skipped,
    /// Another proxy holds the site lock.
    LockBusy { owner: u16 },
    /// No node fits the donor rules.
    NoDonor,
    /// The role word changed since it was read: stale view, not retried.
    LostCas { node: String },
    /// Our lease ran out before the claim (a very slow round): nothing done.
    LeaseExpired,
    /// A node is already SWITCHING towards the site (another proxy's claim).
    Coming { node: String },
    /// The lock was taken over, or the lock home restarted, while we held
    /// it: nothing more was written.
    LockLost { reason: String },
    /// The role CAS got no reply and reading the word back could not tell
    /// whether it landed: the other proxies were told (as for a claim) and
    /// the outcome is settled from the role word in the next rounds.
    Unresolved { node: String, epoch: u64 },
}

/// Why an admin move was refused.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("no node named `{0}`")]
    UnknownNode(String),
    #[error("no site named `{0}` (use \"idle\" for the idle pool)")]
    UnknownSite(String),
    #[error("node `{0}` has no sidecar window, so it has no role word to change")]
    NoWindow(String),
    #[error("node `{node}` cannot move now: {reason}")]
    NotMovable { node: String, reason: String },
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// A claim whose role CAS got no reply and could not be settled by reading
/// the word back: resolved from the role word in later rounds.
#[derive(Debug, Clone, Copy)]
struct Pending {
    node: usize,
    /// The role word our CAS would have written.
    word: RoleWord,
    by: claim::By,
}

/// Mutable state of the agent, used by one round (or one admin move) at a
/// time.
struct Work {
    /// Local update counters (seed 001 section 3.2), by site.
    local: Vec<u64>,
    hot: HotTracker,
    /// Last role epoch seen per node, to notice moves by any proxy.
    last_epoch: Vec<Option<u64>>,
    /// The role word's site when `last_epoch` was seen (where a move came
    /// from, for the event log).
    last_site: Vec<Option<SiteSlot>>,
    /// When each node was last seen to move (cool-down).
    moved_at: Vec<Option<Instant>>,
    /// The site each node last left and when (the take-back window,
    /// `reconfig::donor`: a site that gave a node away gets that one back
    /// first).
    left: Vec<Option<(usize, Instant)>>,
    /// Offered and served rates per interval, against the guarantees.
    qos: QosAccount,
    /// Switching deadlines and failure streaks, by node.
    track: Vec<NodeTrack>,
    /// Claims whose outcome is not known yet.
    pending: Vec<Pending>,
    /// Per site: the nodes its guarantee needed at its recent peak and
    /// since when (the guarantee reserve, `reconfig.guarantee_hold`).
    reserve: Vec<(usize, Instant)>,
    /// Nodes claimed for the site of the batch in progress: not "a node
    /// already coming" for that batch's next claim.
    batch: Vec<usize>,
}

/// Agent node index → position in a routing snapshot's node list. Routing
/// follows every node's role word every round and every `role_poll`;
/// finding each node by name in the snapshot made that quadratic in the
/// nodes.
struct Routed {
    backends: Arc<Backends>,
    of: Vec<Option<usize>>,
}

/// The reconfiguration agent of one proxy.
pub struct Agent {
    settings: AgentSettings,
    own: LocalWindow,
    source: Arc<dyn WindowSource>,
    routing: Option<Arc<ArcSwap<Backends>>>,
    /// Each agent node's position in the routing snapshot it was computed
    /// for (rebuilt when a reload swaps the snapshot).
    routed: ArcSwapOption<Routed>,
    qos: QosPolicy,
    work: tokio::sync::Mutex<Work>,
    shown: Mutex<(Vec<SiteRole>, Vec<NodeRole>)>,
    counters: Counters,
    events: EventLog,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("proxy_id", &self.settings.proxy_id)
            .field("mode", &self.settings.reconfig.mode)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent working on `own` (this proxy's window memory) and the
    /// windows of `source`; when `routing` is given, its nodes follow the
    /// role words read.
    pub fn new(
        settings: AgentSettings,
        own: Arc<WindowMemory>,
        source: Arc<dyn WindowSource>,
        routing: Option<Arc<ArcSwap<Backends>>>,
    ) -> Agent {
        let sites = settings.sites.len();
        let nodes = settings.nodes.len();
        let own = LocalWindow::new(own);
        // Start in step with our shared counters: what happened before we
        // started is not news.
        let local = (0..sites).map(|s| shared_counter(&own, s)).collect();
        let r = &settings.reconfig;
        let hot = HotTracker::adaptive(sites, r.history, r.history_max, r.high_watermark);
        let qos = QosPolicy::none(settings.sites.iter().map(|s| s.name.clone()).collect());
        Agent {
            work: tokio::sync::Mutex::new(Work {
                local,
                hot,
                last_epoch: vec![None; nodes],
                last_site: vec![None; nodes],
                moved_at: vec![None; nodes],
                left: vec![None; nodes],
                qos: QosAccount::new(qos.guarantees.clone()),
                track: vec![NodeTrack::default(); nodes],
                pending: Vec::new(),
                reserve: vec![(0, Instant::now()); sites],
                batch: Vec::new(),
            }),
            qos,
            shown: Mutex::new((Vec::new(), Vec::new())),
            counters: Counters::default(),
            events: EventLog::default(),
            settings,
            own,
            source,
            routing,
            routed: ArcSwapOption::empty(),
        }
    }

    /// Uses `own` for this proxy's window (the same memory as given to
    /// [`Agent::new`], with its atomics routed as the window is served: see
    /// [`LocalWindow`]); call before the first round.
    pub fn with_local_window(mut self, own: LocalWindow) -> Agent {
        debug_assert!(Arc::ptr_eq(own.memory(), self.own.memory()));
        self.own = own;
        self
    }

    /// Runs a round every `sensitivity` until `shutdown` turns true.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.settings.reconfig.sensitivity);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!(
            proxy_id = self.settings.proxy_id,
            mode = self.settings.reconfig.mode.as_str(),
            lock_home = self.settings.reconfig.lock_home,
            "reconfiguration agent started"
        );
        loop {
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
                _ = tick.tick() => { self.round().await; }
            }
        }
        tracing::info!("reconfiguration agent stopped");
    }

    /// Re-reads every node's role word and applied epoch every `role_poll`
    /// and makes routing follow them, until `shutdown` turns true: a node
    /// another proxy claimed stops getting its old site's requests within
    /// `role_poll`, not only at this proxy's next round.
    pub async fn watch_roles(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        if self.routing.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(self.settings.reconfig.role_poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => break,
                _ = tick.tick() => self.poll_roles().await,
            }
        }
    }

    /// One pass of [`watch_roles`](Self::watch_roles): two words per node.
    /// Start-up runs one before the listeners open, so that the first
    /// requests find the nodes whose role word says they serve (a node
    /// whose word cannot be read yet stays out until a later pass).
    pub async fn poll_roles(&self) {
        let reads = self
            .settings
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.has_window)
            .map(|(i, _)| async move {
                let w = self.source.node(i)?;
                let w = w.as_ref();
                let raw = protocol::op("reading role word", w, w.read_word(word::ROLE))
                    .await
                    .ok()?;
                let applied = protocol::op("reading applied", w, w.read_word(word::ROLE_APPLIED))
                    .await
                    .ok()?;
                Some((i, RoleWord::decode(raw).ok()?, applied))
            });
        for (i, role, applied) in futures_util::future::join_all(reads)
            .await
            .into_iter()
            .flatten()
        {
            if role.state != RoleState::Unset {
                self.follow(i, role.site, applied == role.epoch);
            }
        }
    }

    /// The running totals.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// One round: observe, plan, apply. Returns the plan and what each claim
    /// ended with.
    pub async fn round(&self) -> (Plan, Vec<(usize, Result<ClaimOutcome, ProtocolError>)>) {
        let mut work = self.work.lock().await;
        let started = std::time::Instant::now();
        Counters::bump(&self.counters.rounds);
        let views = self.read_all().await;
        let now = Instant::now();
        self.settle_pending(&mut work, &views).await;
        self.note_moves(&mut work, &views, now);
        for v in views.iter().flatten() {
            work.track[v.index].observe(v, now);
        }
        self.follow_roles(&views);
        let flat: Vec<NodeView> = views
            .iter()
            .filter_map(|v| v.as_ref().ok().cloned())
            .collect();
        let loads: Vec<Option<f64>> = (0..self.settings.sites.len())
            .map(|s| site_load(&flat, s))
            .collect();
        // A site with a node on its way (SWITCHING towards it, sidecar
        // alive) is getting capacity already: its history restarts, so it
        // must stay hot for a whole T after the node lands before another one
        // moves. A node whose sidecar died mid-switch does not hold it back.
        for v in &flat {
            if v.effective() == Effective::Switching && v.is_live() {
                if let Some(s) = v.role.site.index() {
                    work.hot.reset(s);
                }
            }
        }
        let short = self.sample_qos(&mut work, now);
        self.judge_claims(&mut work, now);
        self.hold_reserve(&mut work, &views, now);
        self.track_spare(&mut work, &views, now);
        let hot: Vec<usize> = loads
            .iter()
            .enumerate()
            .filter(|(s, l)| work.hot.observe_round(*s, **l, short[*s], now))
            .map(|(s, _)| s)
            .collect();
        let urgent = self.urgent(&work, &short, now);
        let plan = self.plan(&mut work, &views, (&hot, &urgent), &short, &loads, now);
        self.show(&work, &views, &loads, now);
        let mut outcomes = Vec::new();
        for action in &plan.actions {
            match *action {
                Action::Rollback { node } | Action::Reclaim { node } => {
                    if let Some(Ok(v)) = views.get(node) {
                        let reclaim = matches!(action, Action::Reclaim { .. });
                        self.rollback(&mut work, v, now, reclaim).await;
                    }
                }
                Action::Return { site } => {
                    let r = self.bring_home(&mut work, site).await;
                    outcomes.push((site, r));
                }
                Action::Claim { site, count } => {
                    self.claim_batch(&mut work, site, count, &loads, &mut outcomes)
                        .await;
                }
            }
        }
        metrics::histogram!(status::ROUND).record(started.elapsed().as_secs_f64());
        (plan, outcomes)
    }

    /// Claims up to `count` donors for hot site `site`, one after another,
    /// until one claim does not land; each claim's outcome is pushed to
    /// `outcomes`.
    async fn claim_batch(
        &self,
        work: &mut Work,
        site: usize,
        count: usize,
        loads: &[Option<f64>],
        outcomes: &mut Vec<(usize, Result<ClaimOutcome, ProtocolError>)>,
    ) {
        work.batch.clear();
        for _ in 0..count.max(1) {
            let r = self
                .claim(work, SiteSlot::Site(site as u16), site, Pick::Donor)
                .await;
            let landed = match &r {
                Ok(ClaimOutcome::Claimed { node, .. }) => {
                    self.settings.nodes.iter().position(|n| &n.name == node)
                }
                _ => None,
            };
            match &r {
                Ok(ClaimOutcome::Claimed { node, epoch, .. }) => tracing::info!(
                    site = %self.settings.sites[site].name, node = %node, epoch,
                    load = loads[site].unwrap_or(0.0), batch = count,
                    "claimed a node for a hot site"
                ),
                Ok(other) => {
                    tracing::debug!(site = %self.settings.sites[site].name, outcome = ?other, "hot site: no claim this round")
                }
                Err(e) => {
                    self.error("claim");
                    tracing::warn!(site = %self.settings.sites[site].name, error = %e, "claim failed");
                }
            }
            outcomes.push((site, r));
            match landed {
                Some(node) => work.batch.push(node),
                None => break,
            }
        }
        work.batch.clear();
    }

    /// The diff between what the sites need and what the nodes are.
    fn plan(
        &self,
        work: &mut Work,
        views: &[Result<NodeView, ViewError>],
        (hot, urgent): (&[usize], &[usize]),
        short: &[bool],
        loads: &[Option<f64>],
        now: Instant,
    ) -> Plan {
        let mut actions: Vec<Action> = Vec::new();
        for v in views.iter().flatten().filter(|v| v.is_live()) {
            if v.effective() == Effective::Failed && self.rollback_due(work, v, now) {
                actions.push(Action::Rollback { node: v.index });
            }
        }
        let timeout = self.settings.reconfig.switch_timeout;
        for v in views.iter().flatten() {
            let track = &mut work.track[v.index];
            let Some(overdue) = track.overdue(v, timeout, now) else {
                continue;
            };
            track.mark_timed_out();
            let name = &self.settings.nodes[v.index].name;
            let action = match overdue {
                Overdue::Reclaim => "reclaimed",
                Overdue::Park => "parked",
            };
            Counters::bump(&self.counters.switch_timeouts);
            metrics::counter!(status::SWITCH_TIMEOUTS, "action" => action).increment(1);
            self.event(
                EventKind::SwitchTimeout,
                v.index,
                None,
                Some(v.role.site),
                Some(v.role.epoch),
                Some(action.to_string()),
            );
            tracing::warn!(node = %name, role = %v.role, live = v.is_live(), action,
                timeout = %rdmalb_base::duration::format(timeout),
                "node still switching past switch_timeout");
            if overdue == Overdue::Reclaim {
                actions.push(Action::Reclaim { node: v.index });
            }
        }
        if self.settings.reconfig.mode == ReconfigMode::Reconfigure {
            // A site both hot and urgent claims once.
            let mut claiming: Vec<usize> = hot.to_vec();
            claiming.extend(urgent.iter().filter(|s| !hot.contains(s)));
            let opts: Vec<Option<NodeView>> =
                views.iter().map(|v| v.as_ref().ok().cloned()).collect();
            actions.extend(
                self.claim_order(&claiming, loads)
                    .into_iter()
                    .filter(|site| {
                        urgent.contains(site) || self.worth_claiming(work, *site, &opts, now)
                    })
                    .map(|site| Action::Claim {
                        site,
                        count: self.claim_count(work, site, &opts, short, now),
                    }),
            );
            actions.extend(
                self.returns_due(work, views, &claiming, now)
                    .into_iter()
                    .map(|site| Action::Return { site }),
            );
        }
        Plan { actions }
    }

    /// Reads every node with a window (all at once).
    async fn read_all(&self) -> Vec<Result<NodeView, ViewError>> {
        let policy = self.settings.read_policy;
        let reads = self.settings.nodes.iter().enumerate().map(|(i, n)| {
            let w = if n.has_window {
                self.source.node(i)
            } else {
                None
            };
            async move {
                match w {
                    Some(w) => read_node(i, w.as_ref(), &policy).await,
                    None => Err(ViewError::Window {
                        node: i,
                        word: rdmalb_window::layout::word::ROLE,
                        source: rdmalb_window::WindowError::Closed {
                            peer: if n.has_window {
                                "not connected".into()
                            } else {
                                "no window".into()
                            },
                        },
                    }),
                }
            }
        });
        futures_util::future::join_all(reads).await
    }

    fn note_moves(&self, work: &mut Work, views: &[Result<NodeView, ViewError>], now: Instant) {
        for v in views.iter().flatten() {
            let AgentNode {
                name,
                configured_site: configured,
                ..
            } = &self.settings.nodes[v.index];
            if work.last_epoch[v.index].is_none()
                && v.role.state != RoleState::Unset
                && v.role.site.index() != *configured
            {
                // The role word wins (it is the cluster's state); say so,
                // since a sidecar without `site` makes its node idle.
                tracing::warn!(
                    node = %name,
                    role = %self.settings.site_name(v.role.site),
                    configured = %self.settings.site_name(configured.map_or(SiteSlot::Idle, |s| SiteSlot::Site(s as u16))),
                    "node's role word names another site than its [[node]] entry; routing follows the role word (the sidecar's `site` sets the initial role)"
                );
            }
            if work.last_epoch[v.index].is_some_and(|e| e != v.role.epoch) {
                work.moved_at[v.index] = Some(now);
                let from = work.last_site[v.index];
                note_left(work, v.index, from, v.role.site, now);
                self.moved();
                self.event(
                    EventKind::Move,
                    v.index,
                    work.last_site[v.index],
                    Some(v.role.site),
                    Some(v.role.epoch),
                    None,
                );
            }
            work.last_epoch[v.index] = Some(v.role.epoch);
            work.last_site[v.index] = Some(v.role.site);
        }
    }

    /// Makes routing follow the role words read (role contract: a node
    /// serves S iff role.site == S and ROLE_APPLIED == epoch).
    fn follow_roles(&self, views: &[Result<NodeView, ViewError>]) {
        for v in views.iter().flatten() {
            if v.role.state != RoleState::Unset {
                self.follow(v.index, v.role.site, v.applied == v.role.epoch);
            }
        }
    }

    fn follow(&self, node: usize, site: SiteSlot, applied: bool) {
        let Some(routing) = &self.routing else { return };
        let b = routing.load();
        let routed = match self.routed.load_full() {
            Some(r) if Arc::ptr_eq(&r.backends, &*b) => r,
            _ => {
                let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(b.nodes().len());
                for (i, n) in b.nodes().iter().enumerate() {
                    by_name.entry(n.name.as_str()).or_insert(i);
                }
                let of = self
                    .settings
                    .nodes
                    .iter()
                    .map(|n| by_name.get(n.name.as_str()).copied())
                    .collect();
                let r = Arc::new(Routed {
                    backends: Arc::clone(&b),
                    of,
                });
                self.routed.store(Some(Arc::clone(&r)));
                r
            }
        };
        if let Some(n) = routed
            .of
            .get(node)
            .copied()
            .flatten()
            .and_then(|i| b.nodes().get(i))
        {
            n.follow_role(site.index(), applied);
        }
    }

    fn cooling(&self, work: &Work, node: usize, now: Instant) -> bool {
        work.moved_at[node]
            .is_some_and(|t| now.saturating_duration_since(t) < self.settings.reconfig.cooldown)
    }

    fn error(&self, step: &'static str) {
        Counters::bump(&self.counters.errors);
        metrics::counter!(status::ERRORS, "step" => step).increment(1);
    }

    /// Whether a FAILED node may be rolled back now (backoff after repeated
    /// failures); logs and counts a backoff once per failure.
    fn rollback_due(&self, work: &mut Work, v: &NodeView, now: Instant) -> bool {
        let r = &self.settings.reconfig;
        let track = &mut work.track[v.index];
        let Some(at) = track.rollback_at(r.sensitivity, r.rollback_backoff_max) else {
            return true;
        };
        if now >= at {
            return true;
        }
        if track.announce() {
            Counters::bump(&self.counters.rollback_backoffs);
            metrics::counter!(status::ROLLBACK_BACKOFFS).increment(1);
            tracing::warn!(
                node = %self.settings.nodes[v.index].name,
                failures = track.failures(),
                wait = %rdmalb_base::duration::format(at.saturating_duration_since(now)),
                "node keeps failing to apply its role (is its app down?): next rollback after a backoff"
            );
        }
        false
    }

    /// Sends a FAILED node (or a live one overdue in SWITCHING, `reclaim`)
    /// back to the site its sidecar really serves (role contract). No lock:
    /// the CAS from the value read decides.
    async fn rollback(&self, work: &mut Work, v: &NodeView, now: Instant, reclaim: bool) {
        let Some(st) = v.status else { return };
        let Some(w) = self.source.node(v.index) else {
            return;
        };
        let new = v.role.next(st.serving, RoleState::Switching);
        let name = &self.settings.nodes[v.index].name;
        match protocol::claim(w.as_ref(), v.raw_role, new).await {
            Ok(true) => {
                Counters::bump(&self.counters.rollbacks);
                metrics::counter!(status::ROLLBACKS).increment(1);
                work.moved_at[v.index] = Some(now);
                work.last_epoch[v.index] = Some(new.epoch);
                work.last_site[v.index] = Some(new.site);
                self.follow(v.index, new.site, false);
                self.moved();
                self.event(
                    EventKind::Rollback,
                    v.index,
                    Some(v.role.site),
                    Some(new.site),
                    Some(new.epoch),
                    Some(if reclaim {
                        "switch_timeout".to_string()
                    } else {
                        st.code.as_str().to_string()
                    }),
                );
                tracing::warn!(
                    node = %name, failed = %v.role, code = %st.code,
                    back_to = %self.settings.site_name(st.serving), epoch = new.epoch,
                    "{}", if reclaim {
                        "node switching past switch_timeout: sent back to the site it serves"
                    } else {
                        "node failed to apply its role: rolled back"
                    }
                );
            }
            Ok(false) => {
                Counters::bump(&self.counters.lost_cas);
                metrics::counter!(status::LOST_CAS).increment(1);
            }
            Err(e) => {
                self.error("rollback");
                tracing::warn!(node = %name, error = %e, "rollback failed");
            }
        }
    }
}

/// Node `node` moved from `from` to `to` at `now`: remember the site it
/// left (when it left one), for the take-back window.
fn note_left(work: &mut Work, node: usize, from: Option<SiteSlot>, to: SiteSlot, now: Instant) {
    if let Some(s) = from
        .and_then(SiteSlot::index)
        .filter(|s| Some(*s) != to.index())
    {
        if let Some(l) = work.left.get_mut(node) {
            *l = Some((s, now));
        }
    }
}

/// This proxy's shared update counter for `site` (its own window word).
fn shared_counter(own: &LocalWindow, site: usize) -> u64 {
    update_counter_word(site)
        .and_then(|w| own.memory().load(w))
        .unwrap_or(0)
}

mod claim;
mod manual;
mod policy;
mod report;
mod track;

use claim::Pick;
use track::{NodeTrack, Overdue};

#[cfg(test)]
mod tests;
