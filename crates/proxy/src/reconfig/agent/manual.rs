//! Moving a node by hand (`POST /reconfig/move`): the same site lock, fresh
//! view and role CAS as the agent's own claims, so it is safe against every
//! proxy's agent. The node is then pinned (`reconfig.manual_pin`, word
//! `PIN` of its window): no proxy's agent moves it until the pin ends or
//! `release node` lifts it.

use std::sync::Arc;

use super::{Agent, ClaimOutcome, MoveError};
use crate::reconfig::protocol;
use crate::reconfig::view::{read_node, Effective, NodeView};
use rdmalb_window::{PinWord, RemoteWindow, SiteSlot};

impl Agent {
    /// Moves node `node` to site `site` ("idle" for the idle pool) by hand,
    /// through the same lock and CAS as the agent's own claims, and pins it
    /// there for `reconfig.manual_pin`.
    pub async fn move_node(&self, node: &str, site: &str) -> Result<ClaimOutcome, MoveError> {
        let (index, w) = self.manual_window(node)?;
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
        let outcome = self
            .claim(&mut work, to, lock_site, super::Pick::Node(index))
            .await?;
        drop(work);
        let pin = self.settings.reconfig.manual_pin;
        if matches!(outcome, ClaimOutcome::Claimed { .. }) && !pin.is_zero() {
            let until = rdmalb_base::time::unix_now_ms().saturating_add(pin.as_millis() as u64);
            let pin = PinWord::new(self.settings.proxy_id, until);
            if let Err(e) = protocol::write_pin(w.as_ref(), pin).await {
                // The move stands; only the pin is missing.
                tracing::warn!(node, error = %e, "moved by hand, but the pin was not written");
            }
        }
        Ok(outcome)
    }

    /// How long a manual move pins its node (`reconfig.manual_pin`; zero:
    /// not pinned).
    pub fn manual_pin(&self) -> std::time::Duration {
        self.settings.reconfig.manual_pin
    }

    /// Lifts the pin of node `node` (`release node`): the agents may move it
    /// again. Returns the pin it had.
    pub async fn release_node(&self, node: &str) -> Result<PinWord, MoveError> {
        let (_, w) = self.manual_window(node)?;
        let not_released = |e: protocol::ProtocolError| MoveError::NotMovable {
            node: node.to_string(),
            reason: e.to_string(),
        };
        let old = protocol::op(
            "reading the pin",
            w.as_ref(),
            w.read_word(rdmalb_window::layout::word::PIN),
        )
        .await
        .map_err(not_released)?;
        protocol::write_pin(w.as_ref(), PinWord::NONE)
            .await
            .map_err(not_released)?;
        Ok(PinWord::decode(old))
    }

    /// Node `node`'s index and connected window, for a manual action.
    fn manual_window(&self, node: &str) -> Result<(usize, Arc<dyn RemoteWindow>), MoveError> {
        let index = self
            .settings
            .nodes
            .iter()
            .position(|n| n.name == node)
            .ok_or_else(|| MoveError::UnknownNode(node.to_string()))?;
        if !self.settings.nodes[index].has_window {
            return Err(MoveError::NoWindow(node.to_string()));
        }
        let w = self
            .source
            .node(index)
            .ok_or_else(|| MoveError::NotMovable {
                node: node.to_string(),
                reason: "its window is not connected".into(),
            })?;
        Ok((index, w))
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
