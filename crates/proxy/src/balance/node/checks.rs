//! A node's health: the thresholds in force, the active checks' results
//! and the passive reports of requests, through the state machine of the
//! parent module's doc.

use std::sync::atomic::Ordering;

use super::super::health::CheckStatus;
use super::{bump_epoch, DownReason, HealthSnapshot, NodeState, Outcome, Thresholds, Transition};

impl NodeState {
    /// Thresholds in force.
    pub fn thresholds(&self) -> Thresholds {
        self.shared.thresholds()
    }

    pub(crate) fn set_thresholds(&self, t: Thresholds) {
        self.shared.set_thresholds(t)
    }

    /// Whether active checks run for this node (`[[node]] check`).
    pub fn is_checked(&self) -> bool {
        self.shared.checked.load(Ordering::Relaxed)
    }

    /// Applies `[[node]] check` (at build and on reload). Turning checks off
    /// brings a down node up at once: without checks nothing else could,
    /// and HAProxy treats a server without `check` as up.
    pub(crate) fn set_checked(&self, checked: bool) {
        let s = &*self.shared;
        if s.checked.swap(checked, Ordering::Relaxed) == checked || checked {
            return;
        }
        let mut m = s.machine();
        m.consecutive_ok = 0;
        m.consecutive_fail = 0;
        s.passive_streak.store(0, Ordering::Relaxed);
        if s.up.load(Ordering::Relaxed) {
            return;
        }
        s.up.store(true, Ordering::Relaxed);
        bump_epoch();
        m.down_reason = None;
        m.changed(true);
        drop(m);
        self.publish_up();
        tracing::info!(
            node = %self.name,
            address = %self.address,
            site = self.site_name.as_deref().unwrap_or("idle"),
            "node up: health checks switched off (check = false), assumed up"
        );
    }

    /// Passive health: called by the data path after every upstream attempt.
    /// Returns the transition it caused, if any (the caller need not log it:
    /// this method already does).
    pub fn report(&self, outcome: Outcome) -> Option<Transition> {
        let s = &*self.shared;
        if outcome == Outcome::Busy {
            // Leaves a streak of real failures as it is.
            return None;
        }
        if !outcome.is_failure() {
            // Avoid dirtying the cache line on every success.
            if s.passive_streak.load(Ordering::Relaxed) != 0 {
                s.passive_streak.store(0, Ordering::Relaxed);
            }
            return None;
        }
        if !s.checked.load(Ordering::Relaxed) {
            // Never marked down without checks (HAProxy without `check`).
            return None;
        }
        let streak = s.passive_streak.fetch_add(1, Ordering::Relaxed) + 1;
        let limit = s.passive_failures.load(Ordering::Relaxed);
        if limit == 0 || streak < limit || !self.is_up() {
            return None;
        }
        let mut m = s.machine();
        // Re-check under the lock: another request may have ejected it already.
        if !s.up.load(Ordering::Relaxed) {
            return None;
        }
        s.up.store(false, Ordering::Relaxed);
        bump_epoch();
        s.ejections_total.fetch_add(1, Ordering::Relaxed);
        s.passive_streak.store(0, Ordering::Relaxed);
        m.down_reason = Some(DownReason::Passive);
        // Recovery needs `rise` passes counted from now.
        m.consecutive_ok = 0;
        m.changed(false);
        drop(m);
        self.publish_up();
        tracing::warn!(
            node = %self.name,
            address = %self.address,
            site = self.site_name.as_deref().unwrap_or("idle"),
            failures = streak,
            last = ?outcome,
            "node ejected by passive health: consecutive failed requests"
        );
        Some(Transition::Down(DownReason::Passive))
    }

    /// Records how long the last active check took and how it ended
    /// (`code`: the HTTP status it received, if any); the pass or failure
    /// itself goes to [`NodeState::record_check`].
    pub fn record_check_detail(
        &self,
        took: std::time::Duration,
        status: CheckStatus,
        code: Option<u16>,
    ) {
        let mut m = self.shared.machine();
        m.last_check_ms = Some(took.as_millis() as u64);
        m.last_check_status = Some(status);
        m.last_check_code = code;
    }

    /// Records the result of one active check and applies rise/fall.
    /// `Err(message)` is a failed check. Returns the transition, if any.
    pub fn record_check(&self, result: Result<(), String>) -> Option<Transition> {
        let s = &*self.shared;
        let t = s.thresholds();
        let mut m = s.machine();
        s.checks_total.fetch_add(1, Ordering::Relaxed);
        let up = s.up.load(Ordering::Relaxed);
        match result {
            Ok(()) => {
                m.last_check_ok = Some(true);
                m.consecutive_fail = 0;
                m.consecutive_ok = m.consecutive_ok.saturating_add(1);
                if !up && m.consecutive_ok >= t.rise {
                    s.up.store(true, Ordering::Relaxed);
                    bump_epoch();
                    s.passive_streak.store(0, Ordering::Relaxed);
                    m.down_reason = None;
                    m.changed(true);
                    return Some(Transition::Up);
                }
            }
            Err(e) => {
                s.checks_failed_total.fetch_add(1, Ordering::Relaxed);
                m.last_check_ok = Some(false);
                m.last_check_error = Some(e);
                m.consecutive_ok = 0;
                m.consecutive_fail = m.consecutive_fail.saturating_add(1);
                if up && m.consecutive_fail >= t.fall {
                    s.up.store(false, Ordering::Relaxed);
                    bump_epoch();
                    m.down_reason = Some(DownReason::Checks);
                    m.changed(false);
                    return Some(Transition::Down(DownReason::Checks));
                }
            }
        }
        None
    }

    /// Sets the `rdmalb_node_up{node,site}` gauge from the current state.
    pub fn publish_up(&self) {
        self.publish_up_as(self.is_up());
    }

    /// Sets this node's `rdmalb_node_up` gauge to `up` (0 for a node that
    /// left its site or the config).
    pub(crate) fn publish_up_as(&self, up: bool) {
        let site = self.site_name.clone().unwrap_or_else(|| "idle".to_string());
        metrics::gauge!(super::super::health::NODE_UP, "node" => self.name.clone(), "site" => site)
            .set(if up { 1.0 } else { 0.0 });
    }

    /// Point-in-time health view for `/status`.
    pub fn health(&self) -> HealthSnapshot {
        let s = &*self.shared;
        let m = s.machine();
        HealthSnapshot {
            up: s.up.load(Ordering::Relaxed),
            check: s.checked.load(Ordering::Relaxed),
            down_reason: m.down_reason,
            consecutive_ok: m.consecutive_ok,
            consecutive_fail: m.consecutive_fail,
            passive_streak: s.passive_streak.load(Ordering::Relaxed),
            checks_total: s.checks_total.load(Ordering::Relaxed),
            checks_failed_total: s.checks_failed_total.load(Ordering::Relaxed),
            ejections_total: s.ejections_total.load(Ordering::Relaxed),
            last_check_error: m.last_check_error.clone(),
            last_check_ok: m.last_check_ok,
            last_change_unix: m.last_change_unix,
            downtime_secs: m.downtime_secs
                + match (s.up.load(Ordering::Relaxed), m.last_change_unix) {
                    (false, Some(t)) => rdmalb_base::time::unix_now_secs().saturating_sub(t),
                    _ => 0,
                },
            last_check_ms: m.last_check_ms,
            last_check_status: m.last_check_status,
            last_check_code: m.last_check_code,
        }
    }
}
