//! Donor choice: which node a hot site takes. One function,
//! [`choose_donor`], with everything it looks at in one [`DonorQuery`], so
//! the locking protocol around it never changes with the policy.
//!
//! The rules (docs/reconfiguration.md step 4 and "QoS"; seed 001
//! section 3.2, seed 003 sections 4.3-4.4, seed 000 chapter 6):
//!
//! - Never a node that is FAILED, SWITCHING, unset, has a stale or unknown
//!   load block (sidecar gone) or is cooling down after a move; never a node
//!   of the hot site itself; nothing for a site already at `max_nodes`.
//! - A donor site never goes below its `min_nodes`, nor below the nodes it
//!   needs for the part of its own guarantee its demand uses now
//!   ([`SiteQos::nodes_needed`]: per-node capacity estimated from its served
//!   rate over its active nodes).
//! - **Idle** nodes (load under the low watermark) first: the idle pool, then
//!   the lowest-priority site's, then the lowest load. Idle nodes of any
//!   priority may go, so when high-priority demand falls its idle nodes flow
//!   back to a lower-priority site that is hot (seed 000 chapter 6: "when
//!   the number of high-priority requests is low, the idle nodes can be
//!   re-allocated to serve lower priority requests").
//! - **Busy** nodes only for a site that is short of its guarantee while its
//!   demand exceeds what it is served ([`SiteQos::short`]), and only from
//!   strictly lower-priority sites, lowest priority first, then the lowest
//!   load. A site of middle priority that lost a node this way and is then
//!   short itself pulls from the level below: the multi-stage scheme of seed
//!   000 chapter 6 ("nodes at priority i + 1 can pull nodes from priority
//!   i"). Unlike the seed, whose shared state spans only two consecutive
//!   levels, the agent sees every node each round, so a top site takes
//!   straight from the lowest level that can give (one move instead of a
//!   chain of them); the chain remains for when the lowest level cannot.

use super::view::{Effective, NodeView};
use crate::qos::guarantee::SiteQos;
use rdmalb_window::SiteSlot;

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
    /// `[[site]] priority` per site index (higher is more important; a
    /// missing entry is 0).
    pub priorities: &'a [u32],
    /// The last interval's QoS per site index (a missing entry: no
    /// guarantee, nothing measured).
    pub qos: &'a [SiteQos],
    /// Nodes without a window per site: they count for the limits but
    /// never move.
    pub fixed: &'a [usize],
    /// Node load under which a node is idle enough to give away.
    pub low_watermark: f64,
    /// Whether node `index` is cooling down after a recent move.
    pub cooling: &'a dyn Fn(usize) -> bool,
}

impl DonorQuery<'_> {
    fn priority(&self, site: usize) -> u32 {
        self.priorities.get(site).copied().unwrap_or(0)
    }

    fn qos(&self, site: usize) -> SiteQos {
        self.qos.get(site).copied().unwrap_or_default()
    }

    /// The rules' member count of `site`, counted directly (the property
    /// test's oracle for [`Tally`]).
    #[cfg(test)]
    pub(crate) fn members(&self, site: usize) -> usize {
        let moving = self
            .views
            .iter()
            .flatten()
            .filter(|v| v.role.site.index() == Some(site) && v.effective() != Effective::Failed)
            .count();
        moving + self.fixed.get(site).copied().unwrap_or(0)
    }

    /// The nodes `site` needs for its guarantee, counted directly (the
    /// property test's oracle for [`Tally`]).
    #[cfg(test)]
    pub(crate) fn needed(&self, site: usize) -> usize {
        let loads: Vec<Option<f64>> = self
            .views
            .iter()
            .flatten()
            .filter(|v| v.serving().and_then(SiteSlot::index) == Some(site))
            .map(|v| v.load)
            .collect();
        let known: Vec<f64> = loads.iter().flatten().copied().collect();
        let load = (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64);
        let active = loads.len() + self.fixed.get(site).copied().unwrap_or(0);
        self.qos(site).nodes_needed(active, load)
    }
}

/// What the rules need per site, counted in one pass over the views (the
/// rules look at a site once per candidate node: counting per candidate was
/// quadratic in the nodes, and a claim makes its choice under the site
/// lock; see docs/benchmarks.md, "Reconfiguration at scale").
struct Tally {
    /// Nodes assigned to the site (any state but FAILED, so a node on its
    /// way counts) plus its fixed nodes.
    members: Vec<usize>,
    /// Whether the site can give one node and keep its minimum and its
    /// guarantee.
    can_give: Vec<bool>,
}

impl Tally {
    fn new(q: &DonorQuery<'_>) -> Tally {
        let n = q.sites.len();
        let fixed = |s: usize| q.fixed.get(s).copied().unwrap_or(0);
        let mut members: Vec<usize> = (0..n).map(fixed).collect();
        // Per site: nodes serving it, and the sum and count of their known loads.
        let mut serving = vec![(0usize, 0.0f64, 0usize); n];
        for v in q.views.iter().flatten() {
            if let Some(s) = v.role.site.index().filter(|s| *s < n) {
                if v.effective() != Effective::Failed {
                    members[s] += 1;
                }
            }
            if let Some(s) = v.serving().and_then(SiteSlot::index).filter(|s| *s < n) {
                let e = &mut serving[s];
                e.0 += 1;
                if let Some(l) = v.load {
                    e.1 += l;
                    e.2 += 1;
                }
            }
        }
        let can_give = (0..n)
            .map(|s| {
                let (count, sum, known) = serving[s];
                // Nodes the site needs for its guarantee: its active nodes
                // (fixed ones serve too) and their mean load feed
                // [`SiteQos::nodes_needed`].
                let load = (known > 0).then(|| sum / known as f64);
                let needed = q.qos(s).nodes_needed(count + fixed(s), load);
                // After giving one: members - 1 >= min_nodes and >= needed.
                members[s] > q.sites[s].min_nodes && members[s] > needed
            })
            .collect();
        Tally { members, can_give }
    }
}

/// Picks the node the hot site should claim, or `None` (see the module doc
/// for the rules).
pub fn choose_donor(q: &DonorQuery<'_>) -> Option<usize> {
    let hot = q.sites.get(q.hot_site)?;
    let tally = Tally::new(q);
    if tally.members[q.hot_site] >= hot.max_nodes {
        return None;
    }
    let hot_priority = q.priority(q.hot_site);
    let may_pull = q.qos(q.hot_site).short();
    q.views
        .iter()
        .flatten()
        .filter(|v| v.is_live() && v.effective() == Effective::Active && !(q.cooling)(v.index))
        .filter_map(|v| Some((v, v.load?)))
        .filter_map(|(v, load)| {
            let busy = load >= q.low_watermark;
            // Rank: idle before busy, the idle pool before any site, then
            // the lowest priority, the lowest load, the lowest index.
            let (pool, priority) = match v.role.site {
                SiteSlot::Idle if busy => return None,
                SiteSlot::Idle => (false, 0),
                SiteSlot::Site(_) => {
                    let s = v.role.site.index()?;
                    let p = q.priority(s);
                    if s == q.hot_site || (busy && !(may_pull && p < hot_priority)) {
                        return None;
                    }
                    if !tally.can_give.get(s).copied().unwrap_or(false) {
                        return None;
                    }
                    (true, p)
                }
            };
            Some(((busy, pool, priority), load, v.index))
        })
        .min_by(|(ra, la, ia), (rb, lb, ib)| ra.cmp(rb).then(la.total_cmp(lb)).then(ia.cmp(ib)))
        .map(|(_, _, index)| index)
}

#[cfg(test)]
mod tests;
