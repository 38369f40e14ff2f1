//! What the agent sees of one node in one round: its role word, the epoch
//! its sidecar applied, the sidecar's role status and its load, read over
//! the node's window; and the load figures derived from them (node load,
//! site load).
//!
//! The effective state follows the role contract
//! (`/work/contract/role-protocol.md`, "Proxy behaviour"): ACTIVE when
//! `ROLE_APPLIED == epoch`, FAILED when the status is about this epoch and
//! reports a failure, SWITCHING otherwise.

use serde::Serialize;

use super::protocol::OP_TIMEOUT;
use rdmalb_window::layout::word;
use rdmalb_window::role::ControlWordError;
use rdmalb_window::{
    read_load, LoadRead, LoadSample, PinWord, ReadPolicy, RemoteWindow, RoleState, RoleStatus,
    RoleWord, SiteSlot, WindowError,
};

/// How current a node's load block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freshness {
    /// Published within the staleness bound: the sidecar is alive.
    Fresh,
    /// Consistent but old: the sidecar stopped publishing (gone or stalled).
    Stale,
    /// No consistent block (never published, torn, unreachable).
    Unknown,
}

/// The node's state as the role contract defines it for proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effective {
    /// The sidecar has not initialised the role word yet.
    Unset,
    /// `ROLE_APPLIED == epoch`: serving the role's site.
    Active,
    /// Claimed; the sidecar has not applied (nor failed) this epoch yet.
    Switching,
    /// The sidecar failed to apply this epoch (status code >= 2).
    Failed,
}

impl Effective {
    /// Lower-case name for logs and `/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effective::Unset => "unset",
            Effective::Active => "active",
            Effective::Switching => "switching",
            Effective::Failed => "failed",
        }
    }
}

/// One node as read in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Node index (position in the config's `[[node]]` list).
    pub index: usize,
    /// The role word exactly as read: the `expected` value of a claim CAS.
    pub raw_role: u64,
    /// The decoded role word.
    pub role: RoleWord,
    /// `ROLE_APPLIED`: the epoch the sidecar applied and verified.
    pub applied: u64,
    /// `ROLE_STATUS`, when it decodes.
    pub status: Option<RoleStatus>,
    /// How current the load block is.
    pub freshness: Freshness,
    /// [`node_load`] of the block, when fresh.
    pub load: Option<f64>,
    /// `PIN`: an operator's move holds the node until its deadline.
    pub pin: PinWord,
}

impl NodeView {
    /// Whether an operator's pin holds the node now: no agent moves it.
    pub fn pinned(&self) -> bool {
        self.pin.holds_at(rdmalb_base::time::unix_now_ms())
    }

    /// The effective state (role contract).
    pub fn effective(&self) -> Effective {
        if self.role.state == RoleState::Unset {
            return Effective::Unset;
        }
        if self.applied == self.role.epoch {
            return Effective::Active;
        }
        match self.status {
            Some(s) if s.epoch == self.role.epoch && s.code.is_failure() => Effective::Failed,
            _ => Effective::Switching,
        }
    }

    /// Whether the sidecar is alive (fresh load block). A node whose
    /// sidecar is gone is never a donor and its role word is never CASed.
    pub fn is_live(&self) -> bool {
        self.freshness == Freshness::Fresh
    }

    /// The site this node serves for routing: the role's site once applied.
    pub fn serving(&self) -> Option<SiteSlot> {
        (self.effective() == Effective::Active).then_some(self.role.site)
    }
}

/// Why a node could not be viewed this round.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A control word could not be read.
    #[error("reading word {word} of node {node}'s window: {source}")]
    Window {
        /// Node index.
        node: usize,
        /// Word index.
        word: usize,
        /// The transport error.
        #[source]
        source: WindowError,
    },
    /// The role word does not decode (not written by a proxy of this build).
    #[error("node {node}'s role word: {source}")]
    Role {
        /// Node index.
        node: usize,
        /// Why it does not decode.
        #[source]
        source: ControlWordError,
    },
}

/// A node's load as one number, 1.0 = fully used: the application's busy
/// workers plus its queue over its worker capacity when the sidecar reports a
/// capacity, else the CPU utilisation. (Queue counts too, so an overloaded
/// node reads above 1.0.)
pub fn node_load(sample: &LoadSample) -> f64 {
    if sample.app_capacity > 0 {
        (sample.app_busy.saturating_add(sample.app_queue_len)) as f64 / sample.app_capacity as f64
    } else {
        sample.cpu_util_ppm as f64 / 1_000_000.0
    }
}

/// A site's load: the mean [`node_load`] of the nodes ACTIVE for the site
/// with a fresh load block. `None` when it has no such node (nothing to
/// measure: a site cannot be hot without a live node).
pub fn site_load(views: &[NodeView], site: usize) -> Option<f64> {
    let loads: Vec<f64> = views
        .iter()
        .filter(|v| v.serving().and_then(SiteSlot::index) == Some(site))
        .filter_map(|v| v.load)
        .collect();
    (!loads.is_empty()).then(|| loads.iter().sum::<f64>() / loads.len() as f64)
}

/// Reads node `index`'s window: load block under `policy`, then the role
/// word, `ROLE_APPLIED` and `ROLE_STATUS`.
pub async fn read_node(
    index: usize,
    w: &dyn RemoteWindow,
    policy: &ReadPolicy,
) -> Result<NodeView, ViewError> {
    let (freshness, load) = match read_load(w, policy).await {
        LoadRead::Fresh(b) => (Freshness::Fresh, Some(node_load(&b.sample))),
        LoadRead::Stale(_) => (Freshness::Stale, None),
        LoadRead::Unknown(_) => (Freshness::Unknown, None),
    };
    let read = |wd: usize| async move {
        let r = match tokio::time::timeout(OP_TIMEOUT, w.read_word(wd)).await {
            Ok(r) => r,
            Err(_) => Err(WindowError::Timeout {
                peer: w.peer().to_string(),
                after: OP_TIMEOUT,
            }),
        };
        r.map_err(|source| ViewError::Window {
            node: index,
            word: wd,
            source,
        })
    };
    let raw_role = read(word::ROLE).await?;
    let applied = read(word::ROLE_APPLIED).await?;
    let status = RoleStatus::decode(read(word::ROLE_STATUS).await?).ok();
    let pin = PinWord::decode(read(word::PIN).await?);
    let role = RoleWord::decode(raw_role).map_err(|source| ViewError::Role {
        node: index,
        source,
    })?;
    Ok(NodeView {
        index,
        raw_role,
        role,
        applied,
        status,
        freshness,
        load,
        pin,
    })
}

/// A fresh node view for tests: `site` at `epoch`, `applied`, `load`.
#[cfg(test)]
pub(crate) fn test_view(site: SiteSlot, epoch: u64, applied: u64, load: f64) -> NodeView {
    let role = RoleWord {
        site,
        state: RoleState::Active,
        epoch,
    };
    NodeView {
        index: 0,
        raw_role: role.encode(),
        role,
        applied,
        status: None,
        freshness: Freshness::Fresh,
        load: Some(load),
        pin: PinWord::NONE,
    }
}

#[cfg(test)]
mod tests;
