//! What an operator (or a node's agent-check) decides about a node, beside
//! its health: the administrative state (HAProxy's READY, DRAIN, MAINT), the
//! weight, the per-node in-flight cap, whether it is a backup, and an
//! agent's "down".
//!
//! Kept in the node's shared runtime state, so it survives a SIGHUP reload
//! exactly as health does (same node = same name and address). The config
//! decides the starting point (`[[node]] weight`, `disabled`, `max_inflight`,
//! `backup`); a reload applies a config value only when that value itself
//! changed, so a node drained at run time stays drained across reloads
//! that do not touch it (HAProxy keeps runtime state across reloads through
//! its server-state file; here nothing leaves the process).
//!
//! Semantics, as HAProxy's (`set server … state`, agent-check words):
//! - **ready**: takes new requests.
//! - **drain**: takes no new requests; in-flight ones finish; health checks
//!   go on, so the node's up/down state stays known.
//! - **maint**: takes no new requests; in-flight ones finish; health checks
//!   stop (the node is shown as in maintenance, not down).
//! - **weight** 0..=256: the node's share relative to the others of its
//!   site; 0 takes no new requests (like drain, but through the weight).
//!   An agent's `N%` sets the weight to N % of the configured weight.
//! - **backup**: takes requests only while no non-backup node of its site
//!   can (all backups share the load then, like HAProxy's
//!   `option allbackups`).
//! - **agent down**: an agent-check answered `down` (or `fail`, `stopped`);
//!   the node takes no new requests until the agent answers `up`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use serde::Serialize;

use crate::config::Node;

const DEFAULT_WEIGHT: u32 = Node::DEFAULT_WEIGHT;
const MAX_WEIGHT: u32 = Node::MAX_WEIGHT;

/// A node's administrative state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminState {
    Ready,
    Drain,
    Maint,
}

impl AdminState {
    pub const ACCEPTED: &'static str = "ready, drain or maint";

    pub fn parse(s: &str) -> Option<AdminState> {
        match s {
            "ready" => Some(AdminState::Ready),
            "drain" => Some(AdminState::Drain),
            "maint" => Some(AdminState::Maint),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AdminState::Ready => "ready",
            AdminState::Drain => "drain",
            AdminState::Maint => "maint",
        }
    }

    fn from_u8(v: u8) -> AdminState {
        match v {
            1 => AdminState::Drain,
            2 => AdminState::Maint,
            _ => AdminState::Ready,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            AdminState::Ready => 0,
            AdminState::Drain => 1,
            AdminState::Maint => 2,
        }
    }
}

/// Who last changed a node's administrative state or weight, for `/status`
/// and the runtime API's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Config,
    Runtime,
    Agent,
}

impl Source {
    fn from_u8(v: u8) -> Source {
        match v {
            1 => Source::Runtime,
            2 => Source::Agent,
            _ => Source::Config,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            Source::Config => 0,
            Source::Runtime => 1,
            Source::Agent => 2,
        }
    }
}

/// The config's say on a node (from `[[node]]`), applied at build and on
/// reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Configured {
    pub weight: u32,
    pub disabled: bool,
    /// `[[node]] max_inflight`; `None` = the site-wide limit.
    pub max_inflight: Option<usize>,
    pub backup: bool,
}

impl Configured {
    pub fn of(n: &Node) -> Configured {
        Configured {
            weight: n.weight,
            disabled: n.disabled,
            max_inflight: n.max_inflight,
            backup: n.backup,
        }
    }
}

impl Default for Configured {
    fn default() -> Self {
        Configured {
            weight: DEFAULT_WEIGHT,
            disabled: false,
            max_inflight: None,
            backup: false,
        }
    }
}

/// Set once any node of the process gets a weight other than the default
/// (config, runtime API or agent-check). Until then all weights are equal
/// and a pick skips comparing them: the default configuration pays nothing
/// for weights on the request path.
static WEIGHTS_SET: AtomicBool = AtomicBool::new(false);

/// Whether the nodes' weights may differ (see [`WEIGHTS_SET`]).
pub(crate) fn weights_may_differ() -> bool {
    WEIGHTS_SET.load(Ordering::Relaxed)
}

/// `max_inflight` value meaning "none set".
const NO_LIMIT: usize = usize::MAX;

/// The atomics behind one node's control state.
#[derive(Debug)]
pub(crate) struct Control {
    admin: AtomicU8,
    admin_source: AtomicU8,
    weight: AtomicU32,
    weight_source: AtomicU8,
    /// `[[node]] weight` last applied (the base of an agent's `N%`).
    initial_weight: AtomicU32,
    /// `[[node]] disabled` last applied.
    config_disabled: AtomicBool,
    /// `[[node]] max_inflight` (or [`NO_LIMIT`]).
    config_max_inflight: AtomicUsize,
    /// An agent's `maxconn:N` (or [`NO_LIMIT`]); wins over the config.
    agent_max_inflight: AtomicUsize,
    backup: AtomicBool,
    agent_down: AtomicBool,
    /// Whether [`apply_config`](Self::apply_config) ran once.
    configured: AtomicBool,
}

/// A point-in-time view for `/status` and `show stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ControlSnapshot {
    pub admin_state: AdminState,
    pub admin_source: Source,
    pub weight: u32,
    pub initial_weight: u32,
    pub weight_source: Source,
    pub backup: bool,
    pub agent_down: bool,
    /// The node's own in-flight cap (agent's `maxconn:` or `[[node]]
    /// max_inflight`), `None` when the site-wide limit applies.
    pub max_inflight: Option<usize>,
}

impl Control {
    pub(crate) fn new() -> Self {
        Control {
            admin: AtomicU8::new(AdminState::Ready.to_u8()),
            admin_source: AtomicU8::new(Source::Config.to_u8()),
            weight: AtomicU32::new(DEFAULT_WEIGHT),
            weight_source: AtomicU8::new(Source::Config.to_u8()),
            initial_weight: AtomicU32::new(DEFAULT_WEIGHT),
            config_disabled: AtomicBool::new(false),
            config_max_inflight: AtomicUsize::new(NO_LIMIT),
            agent_max_inflight: AtomicUsize::new(NO_LIMIT),
            backup: AtomicBool::new(false),
            agent_down: AtomicBool::new(false),
            configured: AtomicBool::new(false),
        }
    }

    /// Applies the config (at build and on every reload). A value the
    /// config did not change keeps whatever the runtime API or the agent
    /// made of it. Returns whether routing may have changed.
    pub(crate) fn apply_config(&self, c: Configured) -> bool {
        let first = !self.configured.swap(true, Ordering::AcqRel);
        let mut changed = false;
        let weight = c.weight.min(MAX_WEIGHT);
        let weight_changed = self.initial_weight.swap(weight, Ordering::AcqRel) != weight;
        if first || weight_changed {
            changed |= self.set_weight(weight, Source::Config);
        }
        let disabled_changed =
            self.config_disabled.swap(c.disabled, Ordering::AcqRel) != c.disabled;
        if first || disabled_changed {
            let state = if c.disabled {
                AdminState::Maint
            } else {
                AdminState::Ready
            };
            // Enabling in the config ends only a maintenance the config
            // itself started; a runtime drain stays.
            if c.disabled || first || self.admin_source() == Source::Config {
                changed |= self.set_admin(state, Source::Config);
            }
        }
        self.config_max_inflight
            .store(c.max_inflight.unwrap_or(NO_LIMIT), Ordering::Release);
        changed |= self.backup.swap(c.backup, Ordering::AcqRel) != c.backup;
        changed
    }

    pub(crate) fn admin(&self) -> AdminState {
        AdminState::from_u8(self.admin.load(Ordering::Acquire))
    }

    fn admin_source(&self) -> Source {
        Source::from_u8(self.admin_source.load(Ordering::Acquire))
    }

    /// Sets the administrative state; returns whether it changed.
    pub(crate) fn set_admin(&self, state: AdminState, by: Source) -> bool {
        self.admin_source.store(by.to_u8(), Ordering::Release);
        self.admin.swap(state.to_u8(), Ordering::AcqRel) != state.to_u8()
    }

    pub(crate) fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed)
    }

    /// Sets the current weight (clamped to [`MAX_WEIGHT`]); returns whether
    /// it changed.
    pub(crate) fn set_weight(&self, weight: u32, by: Source) -> bool {
        let weight = weight.min(MAX_WEIGHT);
        if weight != DEFAULT_WEIGHT {
            WEIGHTS_SET.store(true, Ordering::Relaxed);
        }
        self.weight_source.store(by.to_u8(), Ordering::Release);
        self.weight.swap(weight, Ordering::AcqRel) != weight
    }

    /// Sets the weight to `percent` % of the configured weight (an agent's
    /// `N%`, `set weight … N%`), rounding up so a small non-zero share
    /// never becomes 0.
    pub(crate) fn set_weight_percent(&self, percent: u32, by: Source) -> bool {
        let initial = u64::from(self.initial_weight.load(Ordering::Acquire));
        let w = (initial * u64::from(percent)).div_ceil(100);
        self.set_weight(u32::try_from(w).unwrap_or(MAX_WEIGHT), by)
    }

    pub(crate) fn is_backup(&self) -> bool {
        self.backup.load(Ordering::Relaxed)
    }

    pub(crate) fn agent_down(&self) -> bool {
        self.agent_down.load(Ordering::Relaxed)
    }

    /// Records an agent's `down` (true) or `up` (false); returns whether it
    /// changed.
    pub(crate) fn set_agent_down(&self, down: bool) -> bool {
        self.agent_down.swap(down, Ordering::AcqRel) != down
    }

    /// Records an agent's `maxconn:N` (`None` clears it).
    pub(crate) fn set_agent_max_inflight(&self, limit: Option<usize>) {
        self.agent_max_inflight
            .store(limit.unwrap_or(NO_LIMIT), Ordering::Release);
    }

    /// The node's own in-flight cap, if any.
    pub(crate) fn max_inflight(&self) -> Option<usize> {
        let agent = self.agent_max_inflight.load(Ordering::Relaxed);
        let limit = if agent != NO_LIMIT {
            agent
        } else {
            self.config_max_inflight.load(Ordering::Relaxed)
        };
        (limit != NO_LIMIT).then_some(limit)
    }

    /// Whether the node may take new requests as far as the operator and
    /// its agent are concerned (health aside).
    pub(crate) fn admits(&self) -> bool {
        self.admin() == AdminState::Ready && self.weight() > 0 && !self.agent_down()
    }

    pub(crate) fn snapshot(&self) -> ControlSnapshot {
        ControlSnapshot {
            admin_state: self.admin(),
            admin_source: self.admin_source(),
            weight: self.weight(),
            initial_weight: self.initial_weight.load(Ordering::Relaxed),
            weight_source: Source::from_u8(self.weight_source.load(Ordering::Relaxed)),
            backup: self.is_backup(),
            agent_down: self.agent_down(),
            max_inflight: self.max_inflight(),
        }
    }
}

#[cfg(test)]
mod tests;
