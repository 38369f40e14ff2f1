//! Moving a node by hand (`POST /reconfig/move`): the same site lock, fresh
//! view and role CAS as the agent's own claims, so it is safe against every
//! proxy's agent.

use super::{Agent, ClaimOutcome, MoveError};
use crate::reconfig::view::{read_node, Effective, NodeView};
use rdmalb_window::SiteSlot;

impl Agent {
    /// Moves node `node` to site `site` ("idle" for the idle pool) by hand,
    /// through the same lock and CAS as the agent's own claims.
    pub async fn move_node(&self, node: &str, site: &str) -> Result<ClaimOutcome, MoveError> {
        let index = self
            .settings
            .nodes
            .iter()
            .position(|n| n.name == node)
            .ok_or_else(|| MoveError::UnknownNode(node.to_string()))?;
        if !self.settings.nodes[index].has_window {
            return Err(MoveError::NoWindow(node.to_string()));
        }
        let to = if site == rdmalb_window::role::IDLE_POOL {
            SiteSlot::Idle
        } else {
            let i = self
                .settings
                .sites
                .iter()
                .position(|s| s.name == site)
                .ok_or_else(|| MoveError::UnknownSite(site.to_string()))?;
            SiteSlot::Site(i as u16)
        };
        let w = self
            .source
            .node(index)
            .ok_or_else(|| MoveError::NotMovable {
                node: node.to_string(),
                reason: "its window is not connected".into(),
            })?;
        let v = read_node(index, w.as_ref(), &self.settings.read_policy)
            .await
            .map_err(|e| MoveError::NotMovable {
                node: node.to_string(),
                reason: e.to_string(),
            })?;
        movable(&v, to).map_err(|reason| MoveError::NotMovable {
            node: node.to_string(),
            reason,
        })?;
        // Lock the site that gains the node (or, to idle, the one losing it).
        let Some(lock_site) = to.index().or_else(|| v.role.site.index()) else {
            return Err(MoveError::NotMovable {
                node: node.to_string(),
                reason: "it is already idle".into(),
            });
        };
        let mut work = self.work.lock().await;
        Ok(self
            .claim(&mut work, to, lock_site, super::Pick::Node(index))
            .await?)
    }
}

/// Whether node view `v` may be moved to `to` now: live, ACTIVE, and not
/// already there.
pub(super) fn movable(v: &NodeView, to: SiteSlot) -> Result<(), String> {
    if !v.is_live() {
        return Err(format!(
            "its load block is {:?}: the sidecar is gone or stalled",
            v.freshness
        )
        .to_lowercase());
    }
    match v.effective() {
        Effective::Active => {}
        e => return Err(format!("it is {} (only an active node moves)", e.as_str())),
    }
    if v.role.site == to {
        return Err("it already serves that site".into());
    }
    Ok(())
}
