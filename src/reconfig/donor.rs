//! Donor choice: which node a hot site takes. One function,
//! [`choose_donor`], so that the QoS issue (priorities, guarantees,
//! multi-stage pulls; DESIGN.md "Reconfiguration" step 4) can replace it
//! without touching the locking protocol around it.
//!
//! This version (seed 001 section 3.2, "selects a lightly loaded server"):
//! an idle node (load under the low watermark) of another site (or the idle
//! pool) whose site keeps at least its `min_nodes`, lowest load first; never
//! a node that is FAILED, SWITCHING, unset, has a stale or unknown load
//! block (sidecar gone), or is cooling down after a move.

use super::view::{Effective, NodeView};
use crate::window::SiteSlot;

/// A site's node-count limits (`[[site]] min_nodes`, `max_nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteLimits {
    /// The site never goes below this many nodes by a move.
    pub min_nodes: usize,
    /// The site never takes a node beyond this many.
    pub max_nodes: usize,
}

/// Everything [`choose_donor`] looks at.
pub struct DonorQuery<'a> {
    /// The site that needs a node.
    pub hot_site: usize,
    /// This round's view of every node (index = node index; `None` = no
    /// window or unreadable).
    pub views: &'a [Option<NodeView>],
    /// Limits per site index.
    pub sites: &'a [SiteLimits],
    /// Nodes without a window per site: they count for the limits but
    /// never move.
    pub fixed: &'a [usize],
    /// Node load under which a node is idle enough to give away.
    pub low_watermark: f64,
    /// Whether node `index` is cooling down after a recent move.
    pub cooling: &'a dyn Fn(usize) -> bool,
}

impl DonorQuery<'_> {
    /// Nodes assigned to `site` (any state but FAILED, so a node on its way
    /// counts) plus its fixed nodes.
    fn members(&self, site: usize) -> usize {
        let moving = self
            .views
            .iter()
            .flatten()
            .filter(|v| v.role.site.index() == Some(site) && v.effective() != Effective::Failed)
            .count();
        moving + self.fixed.get(site).copied().unwrap_or(0)
    }
}

/// Picks the node the hot site should claim, or `None`.
pub fn choose_donor(q: &DonorQuery<'_>) -> Option<usize> {
    let hot = q.sites.get(q.hot_site)?;
    if q.members(q.hot_site) >= hot.max_nodes {
        return None;
    }
    q.views
        .iter()
        .flatten()
        .filter(|v| v.is_live() && v.effective() == Effective::Active && !(q.cooling)(v.index))
        .filter_map(|v| Some((v, v.load?)))
        .filter(|(_, load)| *load < q.low_watermark)
        .filter(|(v, _)| match v.role.site {
            SiteSlot::Idle => true,
            SiteSlot::Site(_) => match v.role.site.index() {
                Some(s) if s == q.hot_site => false,
                Some(s) => q.sites.get(s).is_some_and(|l| q.members(s) > l.min_nodes),
                None => true,
            },
        })
        .min_by(|(a, la), (b, lb)| la.total_cmp(lb).then(a.index.cmp(&b.index)))
        .map(|(v, _)| v.index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconfig::view::{test_view, Freshness};
    use crate::window::{RoleStatus, RoleStatusCode};

    const LIMITS: [SiteLimits; 3] = [SiteLimits {
        min_nodes: 1,
        max_nodes: 10,
    }; 3];

    fn node(index: usize, site: SiteSlot, load: f64) -> Option<NodeView> {
        let mut v = test_view(site, 1, 1, load);
        v.index = index;
        Some(v)
    }

    fn pick(
        views: &[Option<NodeView>],
        hot: usize,
        cooling: &dyn Fn(usize) -> bool,
    ) -> Option<usize> {
        choose_donor(&DonorQuery {
            hot_site: hot,
            views,
            sites: &LIMITS,
            fixed: &[0, 0, 0],
            low_watermark: 0.2,
            cooling,
        })
    }

    #[test]
    fn lowest_idle_node_of_another_site_that_keeps_its_minimum() {
        let views = vec![
            node(0, SiteSlot::Site(0), 0.95),
            node(1, SiteSlot::Site(1), 0.10),
            node(2, SiteSlot::Site(1), 0.05),
            node(3, SiteSlot::Site(2), 0.01), // site 2's only node: min_nodes 1
            None,
        ];
        assert_eq!(pick(&views, 0, &|_| false), Some(2));
        assert_eq!(
            pick(&views, 0, &|i| i == 2),
            Some(1),
            "cooling node skipped"
        );
        assert_eq!(pick(&views, 0, &|i| i == 1 || i == 2), None);
    }

    #[test]
    fn idle_pool_nodes_have_no_minimum() {
        let views = vec![
            node(0, SiteSlot::Site(0), 0.9),
            node(1, SiteSlot::Idle, 0.15),
        ];
        assert_eq!(pick(&views, 0, &|_| false), Some(1));
    }

    #[test]
    fn busy_failed_switching_and_gone_nodes_are_never_donors() {
        let mut views = vec![
            node(0, SiteSlot::Site(0), 0.9),
            node(1, SiteSlot::Idle, 0.5), // busy
            node(2, SiteSlot::Idle, 0.0),
            node(3, SiteSlot::Idle, 0.0),
            node(4, SiteSlot::Idle, 0.0),
        ];
        if let Some(v) = views[2].as_mut() {
            v.applied = 0; // switching
        }
        if let Some(v) = views[3].as_mut() {
            v.applied = 0;
            v.status = Some(RoleStatus {
                epoch: 1,
                serving: SiteSlot::Idle,
                code: RoleStatusCode::RenderFailed,
            });
        }
        if let Some(v) = views[4].as_mut() {
            v.freshness = Freshness::Stale;
        }
        assert_eq!(pick(&views, 0, &|_| false), None);
    }

    #[test]
    fn a_site_at_max_nodes_takes_nothing() {
        let views = vec![
            node(0, SiteSlot::Site(0), 0.9),
            node(1, SiteSlot::Idle, 0.0),
        ];
        let limits = [SiteLimits {
            min_nodes: 0,
            max_nodes: 1,
        }];
        let q = DonorQuery {
            hot_site: 0,
            views: &views,
            sites: &limits,
            fixed: &[0],
            low_watermark: 0.2,
            cooling: &|_| false,
        };
        assert_eq!(choose_donor(&q), None);
    }
}
