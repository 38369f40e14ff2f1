//! What the agent reports: counters (also exported as Prometheus metrics)
//! and the `/status` document of roles, site loads and update counters.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::view::{Effective, Freshness};
use crate::qos::guarantee::SiteQos;

/// Counter `rdmalb_reconfig_claims_total{site,by}`: role words this proxy
/// CASed to a new site (`by` = agent or admin).
pub const CLAIMS: &str = "rdmalb_reconfig_claims_total";
/// Counter `rdmalb_reconfig_lost_cas_total`: claim or rollback CASes lost
/// to another proxy (a stale view; never retried blindly).
pub const LOST_CAS: &str = "rdmalb_reconfig_lost_cas_total";
/// Counter `rdmalb_reconfig_skipped_rounds_total{site}`: hot rounds skipped
/// because the site's shared update counter moved (another proxy acted).
pub const SKIPPED: &str = "rdmalb_reconfig_skipped_rounds_total";
/// Counter `rdmalb_reconfig_lock_busy_total{site}`: site lock held by another
/// proxy.
pub const LOCK_BUSY: &str = "rdmalb_reconfig_lock_busy_total";
/// Counter `rdmalb_reconfig_lock_attempts_total{site}`: site lock
/// acquisitions tried (each try reads the lock word and, when it is free or
/// expired, CASes it once; a busy lock is never waited for).
pub const LOCK_ATTEMPTS: &str = "rdmalb_reconfig_lock_attempts_total";
/// Histogram `rdmalb_reconfig_lock_held_seconds`: how long this proxy held
/// each site lock, from the winning CAS to the release.
pub const LOCK_HELD: &str = "rdmalb_reconfig_lock_held_seconds";
/// Counter `rdmalb_reconfig_lock_steals_total{site}`: expired site locks
/// taken over (their holder died or stalled past lease + skew).
pub const LOCK_STEALS: &str = "rdmalb_reconfig_lock_steals_total";
/// Counter `rdmalb_reconfig_rollbacks_total`: FAILED nodes sent back to the
/// site they really serve.
pub const ROLLBACKS: &str = "rdmalb_reconfig_rollbacks_total";
/// Counter `rdmalb_reconfig_errors_total{step}`: window operations that
/// failed (unreachable lock home, peer or node).
pub const ERRORS: &str = "rdmalb_reconfig_errors_total";
/// Counter `rdmalb_reconfig_moves_total`: role changes this proxy saw on
/// any node (every proxy's claims, admin moves, rollbacks): the number of
/// moves of an experiment, whichever proxy made them.
pub const MOVES: &str = "rdmalb_reconfig_moves_total";
/// Counter `rdmalb_reconfig_claim_verdicts_total{site,verdict}`: this
/// proxy's claims judged `wasted` (the site's demand fell away within two
/// T, so its T doubled) or `useful` (T halved back); see `reconfig::history`.
pub const VERDICTS: &str = "rdmalb_reconfig_claim_verdicts_total";
/// Gauge `rdmalb_reconfig_history_seconds{site}`: the site's current T.
pub const HISTORY: &str = "rdmalb_reconfig_history_seconds";
/// Counter `rdmalb_reconfig_switch_timeouts_total{action}`: nodes still
/// SWITCHING past `switch_timeout`, `reclaimed` (sidecar alive: sent back to
/// the site it serves) or `parked` (sidecar gone).
pub const SWITCH_TIMEOUTS: &str = "rdmalb_reconfig_switch_timeouts_total";
/// Counter `rdmalb_reconfig_rollback_backoffs_total`: failures in a row
/// whose rollback waits for a backoff (the node's app stays down).
pub const ROLLBACK_BACKOFFS: &str = "rdmalb_reconfig_rollback_backoffs_total";
/// Gauge `rdmalb_reconfig_parked_nodes`: nodes switching past
/// `switch_timeout` whose sidecar is gone.
pub const PARKED: &str = "rdmalb_reconfig_parked_nodes";
/// Counter `rdmalb_reconfig_fenced_total{step}`: claims stopped before a
/// write because the site lock was taken over or the lock home restarted.
pub const FENCED: &str = "rdmalb_reconfig_fenced_total";
/// Counter `rdmalb_reconfig_unresolved_total{step}`: CASes whose reply was
/// lost and whose outcome reading back could not settle at once.
pub const UNRESOLVED: &str = "rdmalb_reconfig_unresolved_total";
/// Histogram `rdmalb_reconfig_round_seconds`: how long one round of the
/// agent took (reading every node, planning, and the claims it made).
pub const ROUND: &str = "rdmalb_reconfig_round_seconds";
/// Gauge `rdmalb_reconfig_nodes{state}`: nodes by effective state.
pub const NODES: &str = "rdmalb_reconfig_nodes";

/// The agent's running totals, for `/status` (Prometheus has the same).
#[derive(Debug, Default)]
pub struct Counters {
    pub rounds: AtomicU64,
    pub claims: AtomicU64,
    pub lost_cas: AtomicU64,
    pub skipped_rounds: AtomicU64,
    pub lock_attempts: AtomicU64,
    pub lock_busy: AtomicU64,
    pub lock_steals: AtomicU64,
    /// Nanoseconds site locks were held (see [`LOCK_HELD`]).
    pub lock_held_ns: AtomicU64,
    pub rollbacks: AtomicU64,
    pub errors: AtomicU64,
    pub moves: AtomicU64,
    pub switch_timeouts: AtomicU64,
    pub rollback_backoffs: AtomicU64,
    pub fenced: AtomicU64,
    pub unresolved: AtomicU64,
    pub claim_record_errors: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Point-in-time copy.
    pub fn snapshot(&self) -> CountersSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            rounds: g(&self.rounds),
            claims: g(&self.claims),
            lost_cas: g(&self.lost_cas),
            skipped_rounds: g(&self.skipped_rounds),
            lock_attempts: g(&self.lock_attempts),
            lock_busy: g(&self.lock_busy),
            lock_steals: g(&self.lock_steals),
            lock_held_us: g(&self.lock_held_ns) / 1000,
            rollbacks: g(&self.rollbacks),
            errors: g(&self.errors),
            moves: g(&self.moves),
            switch_timeouts: g(&self.switch_timeouts),
            rollback_backoffs: g(&self.rollback_backoffs),
            fenced: g(&self.fenced),
            unresolved: g(&self.unresolved),
            claim_record_errors: g(&self.claim_record_errors),
        }
    }
}

/// [`Counters`] as plain numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CountersSnapshot {
    pub rounds: u64,
    pub claims: u64,
    pub lost_cas: u64,
    pub skipped_rounds: u64,
    /// Site lock acquisitions tried (see [`LOCK_ATTEMPTS`]).
    pub lock_attempts: u64,
    pub lock_busy: u64,
    pub lock_steals: u64,
    /// Microseconds site locks were held (see [`LOCK_HELD`]).
    pub lock_held_us: u64,
    pub rollbacks: u64,
    pub errors: u64,
    /// Role changes seen on any node (see [`MOVES`]).
    pub moves: u64,
    /// Nodes found switching past `switch_timeout` (see [`SWITCH_TIMEOUTS`]).
    pub switch_timeouts: u64,
    /// Rollbacks held back by a backoff (see [`ROLLBACK_BACKOFFS`]).
    pub rollback_backoffs: u64,
    /// Claims stopped by the fence (see [`FENCED`]).
    pub fenced: u64,
    /// CASes whose outcome was not known at once (see [`UNRESOLVED`]).
    pub unresolved: u64,
    /// Claims whose (informational) claim record could not be written.
    pub claim_record_errors: u64,
}

/// The agent's part of `/status`.
#[derive(Debug, Clone, Serialize)]
pub struct AgentStatus {
    pub mode: &'static str,
    pub proxy_id: u16,
    pub lock_home: u16,
    pub sensitivity_ms: u64,
    pub history_ms: u64,
    pub counters: CountersSnapshot,
    pub sites: Vec<SiteRole>,
    pub nodes: Vec<NodeRole>,
    /// The latest role changes, newest first (at most
    /// [`events::CAPACITY`](super::events::CAPACITY)).
    pub events: Vec<super::events::Event>,
}

/// One site as the agent last saw it.
#[derive(Debug, Clone, Serialize)]
pub struct SiteRole {
    pub name: String,
    /// Mean load of its ACTIVE live nodes (None: no such node).
    pub load: Option<f64>,
    /// Milliseconds the site has been above the high watermark (None: not).
    pub above_high_ms: Option<u64>,
    /// The site's current history window T (adapts between
    /// `reconfig.history` and `history_max`).
    pub history_ms: u64,
    /// This proxy's local copy of the site's update counter.
    pub local_counter: u64,
    /// This proxy's shared counter word for the site.
    pub shared_counter: u64,
    /// `[[site]] priority`.
    pub priority: u32,
    /// The last interval's offered and served rates, this proxy's share of
    /// the guarantee, whether it was kept, and the counted/kept intervals.
    pub qos: SiteQos,
    /// Kept / counted intervals, percent (None: none counted yet).
    pub qos_meeting_percent: Option<f64>,
}

/// One node's role as the agent last saw it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRole {
    pub name: String,
    /// Whether the node has a window (else it keeps its configured site).
    pub window: bool,
    /// Why the node could not be read this round.
    pub error: Option<String>,
    /// Site of the role word (name, or "idle").
    pub site: Option<String>,
    /// Role word state (unset, active, switching, failed, draining).
    pub state: Option<&'static str>,
    pub epoch: Option<u64>,
    /// `ROLE_APPLIED`.
    pub applied: Option<u64>,
    /// Effective state per the role contract.
    pub effective: Option<Effective>,
    /// `ROLE_STATUS`: code, epoch, serving site.
    pub status: Option<RoleStatusView>,
    pub freshness: Option<Freshness>,
    pub load: Option<f64>,
    /// Whether the node is cooling down after a move.
    pub cooling: bool,
    /// An operator's move pins the node until this unix time (ms): no
    /// agent moves it before (`release node` lifts it).
    pub pinned_until_unix_ms: Option<u64>,
    /// The proxy whose operator pinned it.
    pub pinned_by: Option<u16>,
    /// How long the node has been SWITCHING at its epoch (as this proxy
    /// saw it).
    pub switching_ms: Option<u64>,
    /// SWITCHING past `switch_timeout` with its sidecar gone: nothing can
    /// apply a role there until the sidecar is back.
    pub parked: bool,
    /// Failed applies in a row.
    pub consecutive_failures: u32,
    /// When FAILED and held back by the rollback backoff: milliseconds until
    /// the next rollback.
    pub rollback_in_ms: Option<u64>,
}

/// A decoded `ROLE_STATUS` for `/status`.
#[derive(Debug, Clone, Serialize)]
pub struct RoleStatusView {
    pub code: &'static str,
    pub epoch: u64,
    pub serving: String,
}
