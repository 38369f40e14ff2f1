//! The role a node holds, kept on disk so that a sidecar restart neither
//! undoes a move nor reuses an epoch (docs/sidecar.md, "Restarts").
//!
//! The window lives in the sidecar's memory (or in an shm file it creates
//! afresh), so without this file a restart would put the role word back to
//! {configured site, ACTIVE, epoch 1}: a node moved to another site would
//! silently go back, and a CAS a proxy prepared before the restart could
//! succeed again once the epochs climbed back to its value (ABA).
//!
//! The file records the site the app really serves (verified), the site
//! being applied when the sidecar stopped (if it died mid-apply) and the
//! highest role epoch the sidecar saw. It is rewritten (temp file, fsync,
//! rename, fsync of the directory) before the sidecar acts on each new
//! epoch and after each switch ends. On restart the role word starts at
//! `epoch + RESTART_GAP`: a CAS prepared from any earlier word can then never
//! match, unless more than `RESTART_GAP` role changes landed between the
//! sidecar's last look at the word (every publish tick, and at most every
//! second) and its death.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use rdmalb_window::role::MAX_EPOCH;
use rdmalb_window::SiteSlot;

/// How far a restart moves the epoch past the last one recorded.
pub const RESTART_GAP: u64 = 1 << 16;

/// Why the state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("role state file `{path}`: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("role state file `{path}` is not one this sidecar wrote ({reason}); it holds the epoch floor that keeps old claims from succeeding again, so it is not replaced silently: fix or remove it (removing it makes this node start at its configured site and epoch 1)")]
    Corrupt { path: PathBuf, reason: String },
    #[error("role state file `{path}` belongs to node `{found}`, not `{node}` (two sidecars share a state_file?)")]
    OtherNode {
        path: PathBuf,
        node: String,
        found: String,
    },
    #[error("role state file `{path}`: epoch {epoch} leaves no room below the 40-bit epoch limit; reset every proxy's view before starting this node again")]
    EpochExhausted { path: PathBuf, epoch: u64 },
}

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Persisted {
    /// The node the file belongs to.
    pub node: String,
    /// Highest role epoch the sidecar saw (or started with).
    pub epoch: u64,
    /// The site the app serves, verified (`"idle"` for the idle pool).
    pub serving: String,
    /// The site being applied when the file was written; absent once the
    /// switch ended (applied or rolled back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applying: Option<String>,
}

/// How a sidecar starts: from the file, or fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The role word's epoch at start-up.
    pub epoch: u64,
    /// The site to apply at start-up.
    pub target: SiteSlot,
    /// The site the app served when the sidecar stopped (`None`: unknown,
    /// a first start).
    pub serving: Option<SiteSlot>,
    /// Whether the start resumes a recorded role (a restart).
    pub restarted: bool,
}

/// The state file of one sidecar.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
    node: String,
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>, node: impl Into<String>) -> Self {
        StateFile {
            path: path.into(),
            node: node.into(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file; `Ok(None)` when there is none yet.
    pub fn load(&self) -> Result<Option<Persisted>, StateError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(StateError::Io {
                    path: self.path.clone(),
                    reason: format!("cannot read: {e}"),
                })
            }
        };
        let p: Persisted = toml::from_str(&text).map_err(|e| StateError::Corrupt {
            path: self.path.clone(),
            reason: e.message().to_string(),
        })?;
        if p.node != self.node {
            return Err(StateError::OtherNode {
                path: self.path.clone(),
                node: self.node.clone(),
                found: p.node,
            });
        }
        Ok(Some(p))
    }

    /// Decides the start: the recorded role with the epoch moved past
    /// [`RESTART_GAP`], or `initial` at epoch 1 on a first start. `slot`
    /// turns a recorded site name into a slot (`None`: not in the site
    /// table any more).
    pub fn start(
        &self,
        initial: SiteSlot,
        slot: impl Fn(&str) -> Option<SiteSlot>,
    ) -> Result<Start, StateError> {
        let Some(p) = self.load()? else {
            return Ok(Start {
                epoch: 1,
                target: initial,
                serving: None,
                restarted: false,
            });
        };
        let epoch = p.epoch.saturating_add(RESTART_GAP);
        if epoch > MAX_EPOCH - RESTART_GAP {
            return Err(StateError::EpochExhausted {
                path: self.path.clone(),
                epoch: p.epoch,
            });
        }
        let lookup = |name: &str| {
            let s = slot(name);
            if s.is_none() {
                tracing::warn!(node = %self.node, site = name, file = %self.path.display(),
                    "the role state names a site that is no longer in `sites`; using the configured site");
            }
            s
        };
        let serving = lookup(&p.serving);
        let applying = p.applying.as_deref().and_then(lookup);
        Ok(Start {
            epoch,
            target: applying.or(serving).unwrap_or(initial),
            serving,
            restarted: true,
        })
    }

    /// Replaces the file with `p` ([`super::apply::replace`]: temp file,
    /// fsync, rename, fsync of the directory), so a crash leaves either the
    /// old or the new state.
    pub fn store(&self, p: &Persisted) -> Result<(), StateError> {
        let body = toml::to_string(p).map_err(|e| StateError::Io {
            path: self.path.clone(),
            reason: format!("encoding: {e}"),
        })?;
        let text = format!(
            "# rdmalb sidecar role state: written by the sidecar before it acts on\n\
             # each role epoch (temp file, fsync, rename). Do not edit.\n{body}"
        );
        super::apply::replace(&self.path, text.as_bytes(), 0o600).map_err(|e| StateError::Io {
            path: self.path.clone(),
            reason: format!("cannot write: {e}"),
        })
    }
}

/// A site slot's name in the state file.
pub fn site_name(sites: &[String], slot: SiteSlot) -> String {
    match slot.index() {
        None => rdmalb_window::role::IDLE_POOL.to_string(),
        Some(i) => sites.get(i).cloned().unwrap_or_else(|| format!("site#{i}")),
    }
}

/// A state file's site name as a slot of `sites`.
pub fn site_slot(sites: &[String], name: &str) -> Option<SiteSlot> {
    if name == rdmalb_window::role::IDLE_POOL {
        return Some(SiteSlot::Idle);
    }
    sites
        .iter()
        .position(|s| s == name)
        .and_then(|i| u16::try_from(i).ok())
        .map(SiteSlot::Site)
}

#[cfg(test)]
mod tests;
