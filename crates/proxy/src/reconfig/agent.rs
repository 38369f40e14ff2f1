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

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio::time::Instant;

use super::donor::{choose_donor, DonorQuery, SiteLimits};
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
    /// Claim a donor node for a hot site.
    Claim { site: usize },
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

/// One claim in the making: the role's site, the site whose lock is held,
/// whether an operator asked for it, and the locks held for it (the site's
/// and, when the node leaves another site, that site's), each re-validated
/// before every write ([`protocol::fence`]).
#[derive(Debug, Clone)]
struct Claim {
    to: SiteSlot,
    site: usize,
    admin: bool,
    locks: Vec<HeldLock>,
}

/// What [`Agent::choose`] found on its fresh view.
enum Choice {
    /// Move this node (view as read).
    Node(usize, NodeView),
    /// Nothing fits the donor rules (or the admin's node is gone).
    NoDonor,
    /// A live node is already SWITCHING towards the site (another proxy's
    /// claim whose counter bump has not reached us yet).
    Coming(usize),
}

/// A claim whose role CAS got no reply and could not be settled by reading
/// the word back: resolved from the role word in later rounds.
#[derive(Debug, Clone, Copy)]
struct Pending {
    node: usize,
    /// The role word our CAS would have written.
    word: RoleWord,
    admin: bool,
}

/// Mutable state of the agent, used by one round (or one admin move) at a
/// time.
struct Work {
    /// Local update counters (seed 001 section 3.2), by site.
    local: Vec<u64>,
    hot: HotTracker,
    /// Last role epoch seen per node, to notice moves by any proxy.
    last_epoch: Vec<Option<u64>>,
    /// When each node was last seen to move (cool-down).
    moved_at: Vec<Option<Instant>>,
    /// Offered and served rates per interval, against the guarantees.
    qos: QosAccount,
    /// Switching deadlines and failure streaks, by node.
    track: Vec<NodeTrack>,
    /// Claims whose outcome is not known yet.
    pending: Vec<Pending>,
}

/// The reconfiguration agent of one proxy.
pub struct Agent {
    settings: AgentSettings,
    own: LocalWindow,
    source: Arc<dyn WindowSource>,
    routing: Option<Arc<ArcSwap<Backends>>>,
    qos: QosPolicy,
    work: tokio::sync::Mutex<Work>,
    shown: Mutex<(Vec<SiteRole>, Vec<NodeRole>)>,
    counters: Counters,
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
                moved_at: vec![None; nodes],
                qos: QosAccount::new(qos.guarantees.clone()),
                track: vec![NodeTrack::default(); nodes],
                pending: Vec::new(),
            }),
            qos,
            shown: Mutex::new((Vec::new(), Vec::new())),
            counters: Counters::default(),
            settings,
            own,
            source,
            routing,
        }
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
    async fn poll_roles(&self) {
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
        let hot: Vec<usize> = loads
            .iter()
            .enumerate()
            .filter(|(s, l)| work.hot.observe_round(*s, **l, short[*s], now))
            .map(|(s, _)| s)
            .collect();
        let plan = self.plan(&mut work, &views, &hot, &loads, now);
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
                Action::Claim { site } => {
                    let r = self
                        .claim(&mut work, SiteSlot::Site(site as u16), site, None)
                        .await;
                    match &r {
                        Ok(ClaimOutcome::Claimed { node, epoch, .. }) => tracing::info!(
                            site = %self.settings.sites[site].name, node = %node, epoch,
                            load = loads[site].unwrap_or(0.0),
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
                }
            }
        }
        (plan, outcomes)
    }

    /// The diff between what the sites need and what the nodes are.
    fn plan(
        &self,
        work: &mut Work,
        views: &[Result<NodeView, ViewError>],
        hot: &[usize],
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
            tracing::warn!(node = %name, role = %v.role, live = v.is_live(), action,
                timeout = %rdmalb_base::duration::format(timeout),
                "node still switching past switch_timeout");
            if overdue == Overdue::Reclaim {
                actions.push(Action::Reclaim { node: v.index });
            }
        }
        if self.settings.reconfig.mode == ReconfigMode::Reconfigure {
            actions.extend(
                self.claim_order(hot, loads)
                    .into_iter()
                    .map(|site| Action::Claim { site }),
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
            let last = &mut work.last_epoch[v.index];
            if last.is_some_and(|e| e != v.role.epoch) {
                work.moved_at[v.index] = Some(now);
                self.moved();
            }
            *last = Some(v.role.epoch);
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
        let name = &self.settings.nodes[node].name;
        let b = routing.load();
        if let Some(n) = b.nodes().iter().find(|n| &n.name == name) {
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
                self.follow(v.index, new.site, false);
                self.moved();
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

    fn lock_home(&self) -> Option<Arc<dyn RemoteWindow>> {
        let home = self.settings.reconfig.lock_home;
        if home == self.settings.proxy_id {
            Some(Arc::new(self.own.clone()))
        } else {
            self.source.proxy(home)
        }
    }

    /// Moves a node to `to` under site `lock_site`'s lock: the agent's donor
    /// choice when `node` is `None` (with the dual-counter check), else that
    /// node (admin).
    async fn claim(
        &self,
        work: &mut Work,
        to: SiteSlot,
        lock_site: usize,
        node: Option<usize>,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let agent = node.is_none();
        if agent && self.adopt_counter(work, lock_site) {
            return Ok(ClaimOutcome::Skipped);
        }
        let home = self.lock_home().ok_or_else(|| ProtocolError::Window {
            step: "reaching the lock home",
            peer: format!("proxy {}", self.settings.reconfig.lock_home),
            source: rdmalb_window::WindowError::Closed {
                peer: format!("proxy {}", self.settings.reconfig.lock_home),
            },
        })?;
        let held = match self.lock(home.as_ref(), lock_site).await? {
            Ok(h) => h,
            Err(busy) => return Ok(busy),
        };
        let claim = Claim {
            to,
            site: lock_site,
            admin: node.is_some(),
            locks: vec![held],
        };
        let outcome = self.claim_locked(work, home.as_ref(), claim, node).await;
        self.unlock(home.as_ref(), held).await;
        outcome
    }

    /// Tries site `site`'s lock once; `Err(LockBusy)` when someone holds it.
    async fn lock(
        &self,
        home: &dyn RemoteWindow,
        site: usize,
    ) -> Result<Result<HeldLock, ClaimOutcome>, ProtocolError> {
        let r = &self.settings.reconfig;
        let label = self.settings.sites[site].name.clone();
        Ok(
            match protocol::try_lock(
                home,
                site,
                self.settings.proxy_id,
                r.lock_lease,
                r.lock_skew,
            )
            .await?
            {
                LockAttempt::Acquired(h) => Ok(h),
                LockAttempt::Stolen { held, from } => {
                    Counters::bump(&self.counters.lock_steals);
                    metrics::counter!(status::LOCK_STEALS, "site" => label.clone()).increment(1);
                    tracing::warn!(site = %label, from, "took over an expired site lock");
                    Ok(held)
                }
                LockAttempt::Busy { owner } => {
                    Counters::bump(&self.counters.lock_busy);
                    metrics::counter!(status::LOCK_BUSY, "site" => label).increment(1);
                    Err(ClaimOutcome::LockBusy { owner })
                }
            },
        )
    }

    async fn unlock(&self, home: &dyn RemoteWindow, held: HeldLock) {
        match protocol::unlock(home, held).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(site = %self.settings.sites[held.site].name, "site lock lease ran out while held; another proxy took it")
            }
            Err(e) => {
                self.error("unlock");
                tracing::warn!(error = %e, "could not release the site lock; it frees itself when the lease runs out");
            }
        }
    }

    /// Dual update counters: true (and adopt) when another proxy acted for
    /// `site` since we last looked.
    fn adopt_counter(&self, work: &mut Work, site: usize) -> bool {
        let shared = shared_counter(&self.own, site);
        if shared == work.local[site] {
            return false;
        }
        work.local[site] = shared;
        work.hot.reset(site);
        Counters::bump(&self.counters.skipped_rounds);
        metrics::counter!(status::SKIPPED, "site" => self.settings.sites[site].name.clone())
            .increment(1);
        true
    }

    async fn claim_locked(
        &self,
        work: &mut Work,
        home: &dyn RemoteWindow,
        mut claim: Claim,
        node: Option<usize>,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let (to, site) = (claim.to, claim.site);
        // Re-check under the lock: a proxy that claimed before we locked
        // bumped our counter before it unlocked.
        if node.is_none() && self.adopt_counter(work, site) {
            return Ok(ClaimOutcome::Skipped);
        }
        // The view before the lock may be stale: decide on a fresh one.
        let (chosen, v) = match self.choose(work, site, to, node).await? {
            Choice::Node(i, v) => (i, v),
            Choice::NoDonor => return Ok(ClaimOutcome::NoDonor),
            Choice::Coming(i) => return Ok(self.coming(site, i)),
        };
        // Taking a node out of another site also takes that site's lock, so
        // two hot sites cannot both take the donor site's last spare node
        // (min_nodes). Decide again on a view read under both locks.
        let donor_site = v.role.site.index().filter(|d| *d != site);
        let Some(d) = donor_site else {
            return self.cas_claim(work, home, claim, chosen, v).await;
        };
        let held = match self.lock(home, d).await? {
            Ok(h) => h,
            Err(busy) => return Ok(busy),
        };
        claim.locks.push(held);
        let outcome = match self.choose(work, site, to, node).await {
            Ok(Choice::Node(i, v)) if v.role.site.index().is_none_or(|s| s == d) => {
                self.cas_claim(work, home, claim, i, v).await
            }
            Ok(Choice::Coming(i)) => Ok(self.coming(site, i)),
            Ok(_) => Ok(ClaimOutcome::NoDonor),
            Err(e) => Err(e),
        };
        self.unlock(home, held).await;
        outcome
    }

    fn coming(&self, site: usize, node: usize) -> ClaimOutcome {
        let name = self.settings.nodes[node].name.clone();
        tracing::debug!(site = %self.settings.sites[site].name, node = %name,
            "a node is already switching to the site: no second claim");
        ClaimOutcome::Coming { node: name }
    }

    /// Reads every node and picks the node to move: the donor rules for the
    /// agent, the given node (checked movable) for an admin move.
    async fn choose(
        &self,
        work: &Work,
        site: usize,
        to: SiteSlot,
        node: Option<usize>,
    ) -> Result<Choice, ProtocolError> {
        let views: Vec<Option<NodeView>> =
            self.read_all().await.into_iter().map(Result::ok).collect();
        let now = Instant::now();
        let chosen = match node {
            Some(i) => i,
            None => {
                // A live node on its way to the site is capacity already
                // claimed for this hot event (a switch past its deadline
                // does not count).
                let timeout = self.settings.reconfig.switch_timeout;
                if let Some(v) = views.iter().flatten().find(|v| {
                    v.role.site == to
                        && v.is_live()
                        && v.effective() == Effective::Switching
                        && work.track[v.index]
                            .switching_for(now)
                            .is_none_or(|d| d < timeout)
                }) {
                    return Ok(Choice::Coming(v.index));
                }
                let fixed: Vec<usize> = (0..self.settings.sites.len())
                    .map(|s| {
                        let n = &self.settings.nodes;
                        n.iter()
                            .filter(|n| !n.has_window && n.configured_site == Some(s))
                            .count()
                    })
                    .collect();
                let limits: Vec<SiteLimits> =
                    self.settings.sites.iter().map(|s| s.limits).collect();
                let cooling = |i: usize| self.cooling(work, i, now);
                let q = DonorQuery {
                    hot_site: site,
                    views: &views,
                    sites: &limits,
                    priorities: &self.qos.priorities,
                    qos: work.qos.sites(),
                    fixed: &fixed,
                    low_watermark: self.settings.reconfig.low_watermark,
                    cooling: &cooling,
                };
                match choose_donor(&q) {
                    Some(i) => i,
                    None => return Ok(Choice::NoDonor),
                }
            }
        };
        let Some(v) = views.get(chosen).cloned().flatten() else {
            return Ok(Choice::NoDonor);
        };
        if node.is_some() {
            let name = self.settings.nodes[chosen].name.clone();
            manual::movable(&v, to).map_err(|reason| ProtocolError::Window {
                step: "checking the node",
                peer: name.clone(),
                source: rdmalb_window::WindowError::Refused {
                    peer: name,
                    word: rdmalb_window::layout::word::ROLE,
                    reason,
                },
            })?;
        }
        Ok(Choice::Node(chosen, v))
    }

    /// Re-validates every lock of `claim` before a write (fencing). `None`:
    /// write; `Some(outcome)`: stop, nothing more is written.
    async fn fence(
        &self,
        home: &dyn RemoteWindow,
        claim: &Claim,
        step: &'static str,
    ) -> Result<Option<ClaimOutcome>, ProtocolError> {
        for held in &claim.locks {
            let reason = match protocol::fence(home, held).await? {
                Fence::Held => continue,
                Fence::LeaseShort => return Ok(Some(ClaimOutcome::LeaseExpired)),
                Fence::TakenOver => "the lock was taken over after its lease ran out",
                Fence::HomeRestarted => "the lock home restarted (its window generation changed)",
            };
            Counters::bump(&self.counters.fenced);
            metrics::counter!(status::FENCED, "step" => step).increment(1);
            tracing::warn!(site = %self.settings.sites[held.site].name, step, reason,
                "site lock lost while claiming: nothing more written");
            return Ok(Some(ClaimOutcome::LockLost {
                reason: reason.to_string(),
            }));
        }
        Ok(None)
    }

    /// The second-level CAS, fenced. The other proxies' counters are bumped
    /// first, under the lock: a claim that then loses its CAS costs them a
    /// skipped round, while one whose bump came after the lease could let
    /// another proxy claim twice for one hot event.
    async fn cas_claim(
        &self,
        work: &mut Work,
        home: &dyn RemoteWindow,
        claim: Claim,
        chosen: usize,
        v: NodeView,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let (to, site, admin) = (claim.to, claim.site, claim.admin);
        let name = self.settings.nodes[chosen].name.clone();
        let Some(w) = self.source.node(chosen) else {
            return Ok(ClaimOutcome::NoDonor);
        };
        if let Some(stop) = self.fence(home, &claim, "counters").await? {
            return Ok(stop);
        }
        self.bump_peers(site).await;
        if let Some(stop) = self.fence(home, &claim, "role").await? {
            return Ok(stop);
        }
        let new = v.role.next(to, RoleState::Switching);
        let now = Instant::now();
        let won = match protocol::claim(w.as_ref(), v.raw_role, new).await {
            Ok(won) => won,
            Err(e @ ProtocolError::Unresolved { .. }) => {
                // It may have landed: count on it for the hot event (the
                // peers know already), settle it from the word later.
                Counters::bump(&self.counters.unresolved);
                metrics::counter!(status::UNRESOLVED, "step" => "claim").increment(1);
                tracing::warn!(node = %name, error = %e, "claim outcome unknown; settled from the role word in the next rounds");
                self.landed(work, chosen, new, site, admin, now);
                work.pending.push(Pending {
                    node: chosen,
                    word: new,
                    admin,
                });
                work.local[site] = protocol::bump_counter(&self.own, site).await?;
                return Ok(ClaimOutcome::Unresolved {
                    node: name,
                    epoch: new.epoch,
                });
            }
            Err(e) => return Err(e),
        };
        if !won {
            Counters::bump(&self.counters.lost_cas);
            metrics::counter!(status::LOST_CAS).increment(1);
            return Ok(ClaimOutcome::LostCas { node: name });
        }
        self.landed(work, chosen, new, site, admin, now);
        self.claimed(w.as_ref(), &name, new, to, admin).await;
        work.local[site] = protocol::bump_counter(&self.own, site).await?;
        Ok(ClaimOutcome::Claimed {
            node: name,
            site: self.settings.site_name(to),
            epoch: new.epoch,
        })
    }

    /// Bumps site `site`'s update counter on every other proxy.
    async fn bump_peers(&self, site: usize) {
        let bumps = self.settings.reconfig.peers.iter().map(|peer| async move {
            let r = match self.source.proxy(peer.id) {
                Some(pw) => protocol::bump_counter(pw.as_ref(), site).await.map(|_| ()),
                None => Err(ProtocolError::Window {
                    step: "FAA of update counter",
                    peer: format!("proxy {}", peer.id),
                    source: rdmalb_window::WindowError::Closed {
                        peer: format!("proxy {}", peer.id),
                    },
                }),
            };
            (peer.id, r)
        });
        for (peer, r) in futures_util::future::join_all(bumps).await {
            if let Err(e) = r {
                self.error("counter");
                tracing::warn!(peer, error = %e, "could not bump a peer's update counter; it may claim for the same event");
            }
        }
    }

    /// What follows a role CAS that landed (or may have): routing, moves,
    /// the hot history.
    fn landed(
        &self,
        work: &mut Work,
        chosen: usize,
        new: RoleWord,
        site: usize,
        admin: bool,
        now: Instant,
    ) {
        self.follow(chosen, new.site, false);
        self.moved();
        work.moved_at[chosen] = Some(now);
        work.last_epoch[chosen] = Some(new.epoch);
        work.hot.reset(site);
        if !admin {
            // The agent's own decisions are judged (adaptive T); an
            // operator's move is not evidence about bursts.
            let offered = Agent::site_qos(work)
                .get(site)
                .map_or(0.0, |q| q.offered_rps);
            work.hot.claimed(site, offered, now);
        }
    }

    /// Records a claim known to have landed: the claim record on the node
    /// (informational) and the claim counters.
    async fn claimed(
        &self,
        w: &dyn RemoteWindow,
        name: &str,
        new: RoleWord,
        to: SiteSlot,
        admin: bool,
    ) {
        if let Err(e) = protocol::write_claim_record(w, self.settings.proxy_id, new.epoch).await {
            Counters::bump(&self.counters.claim_record_errors);
            tracing::debug!(node = %name, error = %e, "claim record not written");
        }
        Counters::bump(&self.counters.claims);
        let by = if admin { "admin" } else { "agent" };
        metrics::counter!(status::CLAIMS, "site" => self.settings.site_name(to), "by" => by)
            .increment(1);
    }

    /// Settles claims whose CAS got no reply, from this round's role words:
    /// our word there means it landed; the word at or past our epoch with
    /// another value means it did not (or was changed since: either way it
    /// is not ours to count).
    async fn settle_pending(&self, work: &mut Work, views: &[Result<NodeView, ViewError>]) {
        let mut still = Vec::new();
        for p in std::mem::take(&mut work.pending) {
            let Some(Ok(v)) = views.get(p.node) else {
                still.push(p);
                continue;
            };
            let name = self.settings.nodes[p.node].name.clone();
            if v.raw_role == p.word.encode() {
                tracing::info!(node = %name, epoch = p.word.epoch, "the claim whose reply was lost landed");
                if let Some(w) = self.source.node(p.node) {
                    self.claimed(w.as_ref(), &name, p.word, p.word.site, p.admin)
                        .await;
                }
            } else if v.role.epoch >= p.word.epoch {
                tracing::info!(node = %name, epoch = p.word.epoch, now = %v.role,
                    "the claim whose reply was lost did not land (or was changed since)");
            } else {
                still.push(p);
            }
        }
        work.pending = still;
    }
}

/// This proxy's shared update counter for `site` (its own window word).
fn shared_counter(own: &LocalWindow, site: usize) -> u64 {
    update_counter_word(site)
        .and_then(|w| own.memory().load(w))
        .unwrap_or(0)
}

mod manual;
mod policy;
mod report;
mod track;

use track::{NodeTrack, Overdue};

#[cfg(test)]
mod tests;
