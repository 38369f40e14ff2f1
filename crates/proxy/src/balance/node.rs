//! Runtime state of one backend node: the in-flight count and the health
//! state machine (active checks with rise/fall, backed by passive ejection).
//!
//! The hot path only reads atomics: [`NodeState::is_up`] is one load and
//! [`NodeState::report`] of a success is one load (plus a store when a failure
//! streak has to be reset). State transitions (up ↔ down) take a short
//! `std::sync::Mutex` that is never held across an `.await`; they happen at
//! most once per check interval or once per ejection.
//!
//! Semantics (documented for operators in `docs/operations.md`):
//! - a node starts **up** (HAProxy's default without `init-state`); `fall`
//!   consecutive failed active checks take it down;
//! - a down node comes back after `rise` consecutive passed active checks;
//! - `passive_failures` consecutive failed requests (connect failure, timeout,
//!   5xx, protocol error) eject an up node; it then needs `rise` consecutive
//!   passed active checks *counted from the ejection* to come back. A
//!   successful request resets the passive streak. `0` disables ejection.
//! - a node with `check = false` (HAProxy's `server` without `check`) is
//!   assumed up: no active checks, no passive ejection (nothing could bring
//!   it back), and a role move does not take it down (routing still waits
//!   for the role to be applied). Switching `check` off on reload brings a
//!   down node up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use super::control::{AdminState, Configured, Control, ControlSnapshot, Source};
use super::health::CheckStatus;
use super::latency::PeakEwma;
pub use super::outcome::Outcome;
use super::traffic::{Traffic, TrafficSnapshot};

/// Why a node is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DownReason {
    /// `fall` consecutive active checks failed.
    Checks,
    /// `passive_failures` consecutive requests failed.
    Passive,
    /// The node's role word moved it to another site; it needs `rise`
    /// passed checks of the new site (after the role is applied) first.
    Role,
}

/// The thresholds the state machine applies (from `[health]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub rise: u32,
    pub fall: u32,
    /// 0 disables passive ejection.
    pub passive_failures: u32,
}

impl Thresholds {
    pub fn from_config(h: &crate::config::HealthCheck) -> Self {
        Thresholds {
            rise: h.rise.max(1),
            fall: h.fall.max(1),
            passive_failures: h.passive_failures,
        }
    }
}

/// An up/down change made by the state machine, for logging and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Came back up after `rise` passed checks.
    Up,
    /// Went down.
    Down(DownReason),
}

/// Point-in-time view of a node's health, for `/status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthSnapshot {
    pub up: bool,
    /// Whether active checks run (`[[node]] check`); false: assumed up.
    pub check: bool,
    /// Set while down.
    pub down_reason: Option<DownReason>,
    /// Current streak of passed active checks.
    pub consecutive_ok: u32,
    /// Current streak of failed active checks.
    pub consecutive_fail: u32,
    /// Current streak of failed requests (passive health).
    pub passive_streak: u32,
    pub checks_total: u64,
    pub checks_failed_total: u64,
    /// How many times passive health ejected the node.
    pub ejections_total: u64,
    /// Error of the most recent failed check (kept after later passes).
    pub last_check_error: Option<String>,
    /// Whether the most recent check passed (None before the first check).
    pub last_check_ok: Option<bool>,
    /// Seconds since the Unix epoch of the last up/down change (None: never changed).
    pub last_change_unix: Option<u64>,
    /// Seconds spent down since the first change (the current down period
    /// included), HAProxy's `downtime`.
    pub downtime_secs: u64,
    /// How long the last active check took (ms), HAProxy's `check_duration`.
    pub last_check_ms: Option<u64>,
    /// How the last active check ended (None before the first).
    pub last_check_status: Option<CheckStatus>,
    /// The HTTP status the last active check received, if it got one
    /// (HAProxy's `check_code`).
    pub last_check_code: Option<u16>,
}

/// Mutable part of the state machine, guarded by a mutex (transitions only).
#[derive(Debug, Default)]
struct Machine {
    down_reason: Option<DownReason>,
    consecutive_ok: u32,
    consecutive_fail: u32,
    last_check_error: Option<String>,
    last_check_ok: Option<bool>,
    last_change_unix: Option<u64>,
    /// Seconds spent down before the last change to up.
    downtime_secs: u64,
    /// How long the last active check took (ms).
    last_check_ms: Option<u64>,
    last_check_status: Option<CheckStatus>,
    last_check_code: Option<u16>,
}

impl Machine {
    /// Records an up/down change now, adding the time since the last one
    /// to the downtime when the node was down until now.
    fn changed(&mut self, was_down: bool) {
        let now = rdmalb_base::time::unix_now_secs();
        if let (true, Some(t)) = (was_down, self.last_change_unix) {
            self.downtime_secs += now.saturating_sub(t);
        }
        self.last_change_unix = Some(now);
    }
}

/// State shared by every `NodeState` that stands for the same node across
/// reloads (same name and address): in-flight count and health.
#[derive(Debug)]
pub(crate) struct Shared {
    inflight: AtomicUsize,
    up: AtomicBool,
    passive_streak: AtomicU32,
    checks_total: AtomicU64,
    checks_failed_total: AtomicU64,
    ejections_total: AtomicU64,
    /// Thresholds of the snapshot in force (updated on reload).
    rise: AtomicU32,
    fall: AtomicU32,
    passive_failures: AtomicU32,
    /// `[[node]] check` of the snapshot in force (updated on reload).
    checked: AtomicBool,
    machine: Mutex<Machine>,
    /// Site the node's role word assigns it ([`ROLE_STATIC`]: no role word
    /// seen, the configured site applies; [`ROLE_IDLE`]: idle pool). Written
    /// by the reconfiguration agent through [`NodeState::follow_role`].
    role_site: AtomicU32,
    /// Whether the sidecar has applied that role (`ROLE_APPLIED == epoch`).
    role_applied: AtomicBool,
    /// Woken when a role is newly applied, so the health check loop checks
    /// the node at once rather than at its next interval.
    role_wake: tokio::sync::Notify,
    /// Administrative state, weight, backup, per-node cap, agent's say.
    control: Control,
    /// What the node served (for `show stat`, `/status`).
    traffic: Traffic,
    /// Time to the node's response head, as this proxy sees it.
    latency: PeakEwma,
}

/// `role_site` value of a node whose role word was never seen.
const ROLE_STATIC: u32 = u32::MAX;
/// `role_site` value of a node whose role word puts it in the idle pool.
const ROLE_IDLE: u32 = u32::MAX - 1;

impl Shared {
    fn new(t: Thresholds) -> Self {
        Shared {
            inflight: AtomicUsize::new(0),
            up: AtomicBool::new(true),
            passive_streak: AtomicU32::new(0),
            checks_total: AtomicU64::new(0),
            checks_failed_total: AtomicU64::new(0),
            ejections_total: AtomicU64::new(0),
            rise: AtomicU32::new(t.rise),
            fall: AtomicU32::new(t.fall),
            passive_failures: AtomicU32::new(t.passive_failures),
            checked: AtomicBool::new(true),
            machine: Mutex::new(Machine::default()),
            role_site: AtomicU32::new(ROLE_STATIC),
            role_applied: AtomicBool::new(true),
            role_wake: tokio::sync::Notify::new(),
            control: Control::new(),
            traffic: Traffic::default(),
            latency: PeakEwma::default(),
        }
    }

    fn thresholds(&self) -> Thresholds {
        Thresholds {
            rise: self.rise.load(Ordering::Relaxed),
            fall: self.fall.load(Ordering::Relaxed),
            passive_failures: self.passive_failures.load(Ordering::Relaxed),
        }
    }

    fn set_thresholds(&self, t: Thresholds) {
        self.rise.store(t.rise, Ordering::Relaxed);
        self.fall.store(t.fall, Ordering::Relaxed);
        self.passive_failures
            .store(t.passive_failures, Ordering::Relaxed);
    }

    /// A poisoned lock only means another thread panicked mid-update of plain
    /// counters; the data is still usable, so recover instead of cascading.
    fn machine(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Bumped after every up/down change of any node, so per-site lists of up
/// nodes cached by `Backends` know when to rebuild (transitions are rare, a
/// pick only compares this word).
pub(crate) static HEALTH_EPOCH: AtomicU64 = AtomicU64::new(0);

fn bump_epoch() {
    HEALTH_EPOCH.fetch_add(1, Ordering::Release);
}

/// Runtime state of one node, shared by every request. Lives across config
/// reloads for nodes whose name and address stay the same (the health and
/// in-flight state is carried over even when the node's position or site
/// changes).
#[derive(Debug)]
pub struct NodeState {
    /// Position in `config.nodes` of the snapshot this belongs to; unique
    /// within one [`Backends`](super::Backends), used to exclude nodes
    /// already tried.
    pub index: usize,
    pub name: String,
    /// The backend application's HTTP address.
    pub address: SocketAddr,
    /// Site this node serves in this snapshot (`None` = idle pool).
    pub site: Option<usize>,
    /// Name of `site`, for logs and metric labels.
    pub site_name: Option<String>,
    pub(crate) shared: Arc<Shared>,
    /// Queue of the site's requests waiting for a slot, woken on release.
    pub(crate) slots: Option<Arc<Slots>>,
}

impl NodeState {
    /// A fresh node: up, nothing in flight.
    pub fn new(
        index: usize,
        name: impl Into<String>,
        address: SocketAddr,
        site: Option<(usize, String)>,
        thresholds: Thresholds,
    ) -> Self {
        let (site, site_name) = site.unzip();
        NodeState {
            index,
            name: name.into(),
            address,
            site,
            site_name,
            shared: Arc::new(Shared::new(thresholds)),
            slots: None,
        }
    }

    /// Attaches the site's waiting queue (set by `Backends::build`).
    pub(crate) fn with_slots(mut self, slots: Option<Arc<Slots>>) -> Self {
        self.slots = slots;
        self
    }

    /// Same node (health and in-flight shared with `self`) at a new position
    /// or site; used by `Backends::build` on reload.
    pub(crate) fn relocated(
        &self,
        index: usize,
        site: Option<(usize, String)>,
        slots: Option<Arc<Slots>>,
    ) -> Self {
        let (site, site_name) = site.unzip();
        NodeState {
            index,
            name: self.name.clone(),
            address: self.address,
            site,
            site_name,
            shared: Arc::clone(&self.shared),
            slots,
        }
    }

    /// Whether `self` and `other` share runtime state (same node across reloads).
    pub fn same_node(&self, other: &NodeState) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Requests currently in flight to this node from this proxy.
    pub fn inflight(&self) -> usize {
        self.shared.inflight.load(Ordering::Relaxed)
    }

    pub(crate) fn inflight_inc(&self) {
        let before = self.shared.inflight.fetch_add(1, Ordering::Relaxed);
        self.shared.traffic.started(before + 1);
    }

    /// Takes a slot only while fewer than `limit` requests are in flight
    /// (`limit` 0 = unlimited). Returns whether it did.
    pub(crate) fn try_inflight_inc(&self, limit: usize) -> bool {
        if limit == 0 {
            self.inflight_inc();
            return true;
        }
        match self
            .shared
            .inflight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v < limit).then_some(v + 1)
            }) {
            Ok(before) => {
                self.shared.traffic.started(before + 1);
                true
            }
            Err(_) => false,
        }
    }

    /// A request on this node ended with a response of status class
    /// `class` (index into `front::stats::CODE_CLASSES`, 5 = cut), having
    /// sent `bytes_out` response bytes to the client.
    pub fn record_response(&self, class: usize, bytes_out: u64) {
        self.shared.traffic.finished(class, bytes_out);
    }

    /// A request that failed on this node is sent again (to another).
    pub fn record_retry(&self) {
        self.shared.traffic.retried();
    }

    /// An exchange on this node was cut by the client (`by_client`) or by
    /// the node.
    pub fn record_abort(&self, by_client: bool) {
        self.shared.traffic.aborted(by_client);
    }

    /// A request's queue, connect, response and total times (ms, -1 when
    /// not reached) for `show stat`'s averages.
    pub fn record_times(&self, times: [i64; 4]) {
        self.shared.traffic.timed(times);
    }

    /// An attempt on this node failed; `kind` indexes
    /// `front::stats::UPSTREAM_ERROR_KINDS` (connect, timeout, protocol,
    /// 5xx).
    pub fn record_upstream_error(&self, kind: usize) {
        self.shared.traffic.upstream_error(kind);
    }

    /// Records the time from sending a request to the node's response head.
    pub fn observe_latency(&self, rtt: std::time::Duration) {
        self.shared.latency.observe(rtt);
    }

    /// [`observe_latency`](Self::observe_latency) of a time that ended at
    /// `at` (the caller's clock read, not a second one).
    pub fn observe_latency_at(&self, rtt: std::time::Duration, at: std::time::Instant) {
        self.shared.latency.observe_taken_at(rtt, at);
    }

    /// The node's peak-EWMA response latency in nanoseconds (1 ms before
    /// any answer; see `balance::latency`).
    pub fn latency_ns(&self) -> f64 {
        self.shared.latency.estimate_ns()
    }

    /// What the node served, for `/status` and `show stat`.
    pub fn traffic(&self) -> TrafficSnapshot {
        self.shared.traffic.snapshot()
    }

    pub(crate) fn inflight_dec(&self) {
        // SeqCst pairs with the queue's waiter registration (see `Slots`):
        // either the releaser sees the waiter or the waiter sees the slot.
        self.shared.inflight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the node is up (health: checks and passive ejection).
    pub fn is_up(&self) -> bool {
        self.shared.up.load(Ordering::Relaxed)
    }

    /// Whether the node may take new requests: up, and ready with a
    /// non-zero weight as far as the operator and its agent are concerned.
    pub fn admits(&self) -> bool {
        self.is_up() && self.shared.control.admits()
    }

    /// The administrative state (ready, drain, maint).
    pub fn admin_state(&self) -> AdminState {
        self.shared.control.admin()
    }

    /// The current weight (0..=256).
    pub fn weight(&self) -> u32 {
        self.shared.control.weight()
    }

    /// Whether the node is a backup of its site (`[[node]] backup`).
    pub fn is_backup(&self) -> bool {
        self.shared.control.is_backup()
    }

    /// The node's own in-flight cap (an agent's `maxconn:`, else `[[node]]
    /// max_inflight`), `None` when the site-wide limit applies.
    pub fn own_max_inflight(&self) -> Option<usize> {
        self.shared.control.max_inflight()
    }

    /// Administrative state, weight and the rest, for `/status`.
    pub fn control(&self) -> ControlSnapshot {
        self.shared.control.snapshot()
    }

    /// Sets the administrative state (runtime API or agent-check). Returns
    /// whether it changed; routing follows at once, in-flight requests
    /// finish.
    pub fn set_admin_state(&self, state: AdminState, by: Source) -> bool {
        let changed = self.shared.control.set_admin(state, by);
        if changed {
            bump_epoch();
            tracing::info!(node = %self.name, state = state.as_str(), by = ?by, "node administrative state changed");
        }
        changed
    }

    /// Sets the current weight (runtime API); 0 takes no new requests.
    pub fn set_weight(&self, weight: u32, by: Source) -> bool {
        self.weight_changed(self.shared.control.set_weight(weight, by), by)
    }

    /// Sets the weight to `percent` % of the configured weight (an
    /// agent-check's `N%`, the runtime API's `weight N%`).
    pub fn set_weight_percent(&self, percent: u32, by: Source) -> bool {
        self.weight_changed(self.shared.control.set_weight_percent(percent, by), by)
    }

    fn weight_changed(&self, changed: bool, by: Source) -> bool {
        if changed {
            bump_epoch();
            tracing::info!(node = %self.name, weight = self.weight(), by = ?by, "node weight changed");
        }
        changed
    }

    /// Records an agent-check's `down` (true) or `up` (false).
    pub fn set_agent_down(&self, down: bool) -> bool {
        let changed = self.shared.control.set_agent_down(down);
        if changed {
            bump_epoch();
            tracing::info!(node = %self.name, down, "agent-check changed the node's state");
        }
        changed
    }

    /// Records an agent-check's `maxconn:N` (`None` clears it).
    pub fn set_agent_max_inflight(&self, limit: Option<usize>) {
        self.shared.control.set_agent_max_inflight(limit);
    }

    /// Applies `[[node]] weight`, `disabled`, `max_inflight` and `backup`
    /// (at build and on reload; see [`super::control`]).
    pub(crate) fn apply_configured(&self, c: Configured) {
        if self.shared.control.apply_config(c) {
            bump_epoch();
        }
    }

    /// The site this node is assigned to now: the site of its role word once
    /// the reconfiguration agent has read one, else its configured site.
    /// Health checks use this site's path and Host.
    pub fn assigned_site(&self) -> Option<usize> {
        match self.shared.role_site.load(Ordering::Acquire) {
            ROLE_STATIC => self.site,
            ROLE_IDLE => None,
            s => Some(s as usize),
        }
    }

    /// Takes the node out of routing until its role word is read (the
    /// agent's first [`follow_role`](Self::follow_role)): its configured
    /// site is only a guess.
    pub(crate) fn await_role(&self) {
        self.shared.role_applied.store(false, Ordering::Release);
    }

    /// Whether the sidecar has applied the node's role (always true for a
    /// node without a role word).
    pub fn role_applied(&self) -> bool {
        self.shared.role_applied.load(Ordering::Acquire)
    }

    /// Whether the node may take new requests of `site` (health aside): it
    /// is assigned to `site` and its role is applied (role contract: role.site
    /// == S and ROLE_APPLIED == epoch).
    pub fn serves(&self, site: usize) -> bool {
        self.assigned_site() == Some(site) && self.role_applied()
    }

    /// Follows the node's role word, as read by the reconfiguration agent:
    /// assigned to `site` (`None` = idle pool), `applied` when
    /// `ROLE_APPLIED == epoch`. A change of site takes the node down at once
    /// (the old site gets no new requests; in-flight ones finish) and it
    /// comes back only after `rise` passed checks of the new site made once
    /// the role is applied. Returns whether routing changed.
    pub fn follow_role(&self, site: Option<usize>, applied: bool) -> bool {
        let s = &*self.shared;
        let before = (self.assigned_site(), self.role_applied());
        let raw = site.map_or(ROLE_IDLE, |i| u32::try_from(i).unwrap_or(ROLE_IDLE));
        let mut m = s.machine();
        s.role_site.store(raw, Ordering::Release);
        s.role_applied.store(applied, Ordering::Release);
        let after = (self.assigned_site(), applied);
        if before == after {
            return false;
        }
        if before.0 != after.0 && s.checked.load(Ordering::Relaxed) {
            let was_down = !s.up.swap(false, Ordering::Relaxed);
            m.down_reason = Some(DownReason::Role);
            m.consecutive_ok = 0;
            m.changed(was_down);
        }
        bump_epoch();
        drop(m);
        self.publish_up();
        if applied {
            // A newly applied role: the node's first check of it does not
            // wait for the next `health.interval`, or a landed node serves
            // nothing for up to one interval (docs/reconfiguration.md,
            // "Routing follows roles").
            s.role_wake.notify_one();
        }
        tracing::info!(
            node = %self.name,
            site = ?after.0,
            applied,
            "node follows its role word"
        );
        true
    }

    /// Resolves when a role has been newly applied to the node since the
    /// last call returned (or right away if one was applied in between):
    /// the health check loop's cue to check the node now.
    pub(crate) async fn role_applied_now(&self) {
        self.shared.role_wake.notified().await;
    }
}

/// Requests of one site waiting for a free in-flight slot
/// (`limits.max_inflight_per_node`); see `Backends::pick_queued`.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    /// Number of registered waiters; read by every release (one load).
    pub(crate) waiting: AtomicUsize,
    pub(crate) freed: tokio::sync::Notify,
}

/// RAII in-flight slot: counts one request against `node` from creation until
/// drop (the data path drops it when the response body ends or is dropped).
///
/// Non-exhaustive so code outside this crate can only get one through
/// [`Pick::acquire`] or `Backends::pick*`, which pair the increment with the
/// decrement in `Drop`.
#[derive(Debug)]
#[non_exhaustive]
pub struct Pick {
    pub node: Arc<NodeState>,
}

impl Pick {
    /// Takes an in-flight slot on `node` (no limit).
    pub fn acquire(node: Arc<NodeState>) -> Pick {
        node.inflight_inc();
        Pick { node }
    }

    /// Wraps a slot already taken on `node`.
    pub(crate) fn taken(node: Arc<NodeState>) -> Pick {
        Pick { node }
    }
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.node.inflight_dec();
        if let Some(slots) = &self.node.slots {
            if slots.waiting.load(Ordering::SeqCst) > 0 {
                slots.freed.notify_one();
            }
        }
    }
}

mod checks;
#[cfg(test)]
mod tests;
