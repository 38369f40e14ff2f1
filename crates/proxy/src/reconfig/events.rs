//! The latest role changes this proxy made or saw, newest first, for
//! `/status` (`reconfig.events`) and the admin listener's stats page: a
//! bounded log (the oldest entry goes when a new one comes), so an operator
//! sees what moved, when and why without scraping the log lines. The
//! counters in [`super::status`] stay the totals; this is only the tail.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;

/// Entries kept.
pub const CAPACITY: usize = 32;

/// What happened to a node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// This proxy's agent claimed the node for a hot site.
    Claim,
    /// This proxy's agent brought a node on loan home (its borrower
    /// cooled, its home site was below its configured share).
    Return,
    /// An operator moved the node through this proxy (`POST /reconfig/move`).
    AdminMove,
    /// The node's role changed by another proxy's hand (seen in a round).
    Move,
    /// The node failed to apply its role and was sent back to the site it
    /// serves.
    Rollback,
    /// The node stayed SWITCHING past `switch_timeout`: `detail` says
    /// `reclaimed` (sent back) or `parked` (its sidecar is gone).
    SwitchTimeout,
}

/// One role change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// When this proxy made or saw it (Unix milliseconds).
    pub at_unix_ms: u64,
    pub kind: EventKind,
    pub node: String,
    /// Site the node left (`"idle"` for the idle pool; `null` when this
    /// proxy did not know it).
    pub from: Option<String>,
    /// Site the node goes to (`"idle"` for the idle pool).
    pub to: Option<String>,
    /// The role word's epoch after the change.
    pub epoch: Option<u64>,
    /// More about it: the failure code of a rollback, the timeout's action,
    /// an unresolved claim.
    pub detail: Option<String>,
}

/// The bounded log.
#[derive(Debug, Default)]
pub struct EventLog {
    entries: Mutex<VecDeque<Event>>,
}

impl EventLog {
    /// Adds `event`, dropping the oldest beyond [`CAPACITY`].
    pub fn record(&self, event: Event) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() == CAPACITY {
            e.pop_back();
        }
        e.push_front(event);
    }

    /// The entries, newest first.
    pub fn latest(&self) -> Vec<Event> {
        let e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
