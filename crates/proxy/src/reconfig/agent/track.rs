//! What the agent remembers of each node between rounds to handle nodes that
//! do not finish: how long a node has been SWITCHING at its current epoch
//! (the switching deadline, `reconfig.switch_timeout`) and how many applies
//! in a row it failed (the rollback backoff, `reconfig.rollback_backoff_max`).
//!
//! Both are this proxy's own observations: every proxy sees the same words
//! within a round, so their deadlines agree to about S, and every step they
//! lead to is a CAS from the value read, so two proxies acting on one node
//! cannot both succeed.

use std::time::Duration;

use tokio::time::Instant;

use crate::reconfig::view::{Effective, NodeView};

/// One node's history as this proxy saw it.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeTrack {
    /// The epoch the node is SWITCHING at and when this proxy first saw it.
    switching: Option<(u64, Instant)>,
    /// The epoch whose switch timed out (acted on once per epoch).
    timed_out: Option<u64>,
    /// Failed applies in a row (reset when the node is ACTIVE again).
    failures: u32,
    /// The epoch of the last failure seen and when it was first seen.
    failed: Option<(u64, Instant)>,
    /// The failure epoch whose backoff was announced (logged once).
    announced: Option<u64>,
}

/// What a node past its switching deadline gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overdue {
    /// Its sidecar is alive but has not applied nor failed: CAS it back to
    /// the site it serves (a new epoch it will act on).
    Reclaim,
    /// Its sidecar is gone: nothing can apply a role there. Routing already
    /// skips it; it is shown parked until its sidecar comes back (a
    /// restarted sidecar resolves its own role, `docs/sidecar.md`).
    Park,
}

impl NodeTrack {
    /// Notes what this round saw of the node.
    pub(crate) fn observe(&mut self, v: &NodeView, now: Instant) {
        let epoch = v.role.epoch;
        match v.effective() {
            Effective::Switching => {
                if self.switching.is_none_or(|(e, _)| e != epoch) {
                    self.switching = Some((epoch, now));
                }
            }
            _ => self.switching = None,
        }
        match v.effective() {
            Effective::Active => {
                self.failures = 0;
                self.failed = None;
            }
            Effective::Failed if self.failed.is_none_or(|(e, _)| e != epoch) => {
                self.failures = self.failures.saturating_add(1);
                self.failed = Some((epoch, now));
            }
            _ => {}
        }
    }

    /// How long the node has been SWITCHING at its epoch.
    pub(crate) fn switching_for(&self, now: Instant) -> Option<Duration> {
        self.switching
            .map(|(_, since)| now.saturating_duration_since(since))
    }

    /// Whether the node is past `timeout` in SWITCHING, and what it gets.
    /// A node is acted on once per epoch.
    pub(crate) fn overdue(&self, v: &NodeView, timeout: Duration, now: Instant) -> Option<Overdue> {
        let (epoch, since) = self.switching?;
        if self.timed_out == Some(epoch) || now.saturating_duration_since(since) < timeout {
            return None;
        }
        Some(if v.is_live() {
            Overdue::Reclaim
        } else {
            Overdue::Park
        })
    }

    /// Records that the node's switch at its current epoch timed out.
    pub(crate) fn mark_timed_out(&mut self) {
        self.timed_out = self.switching.map(|(e, _)| e);
    }

    /// Whether the node is parked: past its deadline with its sidecar gone.
    pub(crate) fn parked(&self, v: &NodeView) -> bool {
        self.switching
            .is_some_and(|(e, _)| self.timed_out == Some(e))
            && !v.is_live()
    }

    /// Failed applies in a row.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// When a FAILED node may be rolled back: at once after a first
    /// failure; after the k-th failure in a row, `base × 2^(k-1)` after it
    /// was seen, at most `cap`. `None` when the node is not FAILED.
    pub(crate) fn rollback_at(&self, base: Duration, cap: Duration) -> Option<Instant> {
        let (_, since) = self.failed?;
        Some(since + backoff(self.failures, base, cap))
    }

    /// True the first time it is asked about the current failure while a
    /// backoff holds its rollback back (so it is logged and counted once).
    pub(crate) fn announce(&mut self) -> bool {
        let epoch = self.failed.map(|(e, _)| e);
        if epoch.is_none() || self.announced == epoch {
            return false;
        }
        self.announced = epoch;
        true
    }
}

/// The wait before rolling back the `failures`-th failure in a row.
pub(crate) fn backoff(failures: u32, base: Duration, cap: Duration) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(cap)
}
