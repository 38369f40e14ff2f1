//! Donor choice: which node a hot site takes. One function,
//! [`choose_donor`], with everything it looks at in one [`DonorQuery`], so
//! the locking protocol around it never changes with the policy.
//!
//! The rules (seed 001 section 3.2, seed 003 sections 4.3-4.4, seed 000
//! chapter 6); why each is there, and the runs that showed it, are in
//! docs/reconfiguration.md ("One round" step 4, "QoS: priorities and
//! guarantees", "Loans: nodes go home between bursts", "Guarantees kept"):
//!
//! - Never a node that is FAILED, SWITCHING, unset, has a stale or unknown
//!   load block or is cooling down after a move; never a node of the hot
//!   site itself; nothing for a site already at `max_nodes`.
//! - A donor site never goes below its `min_nodes`, the nodes its own
//!   guarantee needs now ([`SiteQos::nodes_needed`]), nor its guarantee
//!   reserve: the most it needed within the last `guarantee_hold`
//!   ([`guarantee_needs`], kept by the agent each round).
//! - Of the legal candidates, the hot site's *claim* on a node ranks first:
//!   a node it gave away recently ([`DonorQuery::given`]), then a node whose
//!   home (its `[[node]]` site) it is, then none. A node going back towards
//!   the configured split needs its borrower to fit on one node fewer in
//!   this view only; a move away from it is judged over T.
//! - **Idle** nodes (load under the low watermark) before busy ones: the
//!   idle pool, then the lowest-priority site's, then the lowest load; a
//!   site's idle node only if the site is *spare* — its work on one node
//!   fewer stays at or under the high watermark now and in every round of
//!   the last T ([`DonorQuery::spare`]) — except for a site short of its
//!   guarantee taking from a strictly lower-priority site.
//! - **Busy** nodes only for a site short of its guarantee while its demand
//!   exceeds what it is served ([`SiteQos::short`]), only from strictly
//!   lower-priority sites, lowest priority first, then the lowest load (seed
//!   000's multi-stage pull, one move instead of a chain).
//!
//! **How many** ([`shortfall`]): a site short of its guarantee by its
//! guarantee's need beyond its nodes, else by the work queued beyond its
//! nodes' capacity (mean load above 1), else one node; the agent claims up
//! to `claim_batch` a round (`reconfig::agent::policy`).
//!
//! **Loans** ([`choose_return`]): a node serving another site than its
//! home goes home when its home has fewer nodes than configured, its
//! borrower has been cool for `loan_return`, the node is idle, live, ACTIVE
//! and not cooling down, the borrower may give it by the donor rules, and
//! the borrower's load over one node fewer stays at or under the high
//! watermark (no ping-pong). One node a return, so a chain of them ends;
//! home is the config, the same on every proxy.

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
    /// Site load above which a site is hot: an idle node of a site goes
    /// only if the site's work on one node fewer stays at or under it.
    pub high_watermark: f64,
    /// Whether node `index` is cooling down after a recent move.
    pub cooling: &'a dyn Fn(usize) -> bool,
    /// Nodes each site keeps for its guarantee's recent peak (the
    /// guarantee reserve, `reconfig.guarantee_hold`), by site index; a
    /// missing entry is 0. A donor site never goes below it.
    pub reserve: &'a [usize],
    /// Each node's home site (its `[[node]]` entry's), by node index: of
    /// equally ranked candidates a node of the hot site's own home goes
    /// first (a loan coming back). Empty: no preference.
    pub homes: &'a [Option<usize>],
    /// Per site index, whether the site's work fitted on one node fewer
    /// (its load spread over one node fewer at or under the high
    /// watermark) in every round of the last T: a site's idle node goes,
    /// or a loan leaves its borrower, only then (and only if it fits in
    /// this view too). A missing entry (an empty slice): no history, this
    /// view alone decides.
    pub spare: &'a [bool],
    /// Per node index, the site the node left within the recent past (the
    /// agent's take-back window): when that site is the hot one, the node
    /// goes before any other legal candidate. Empty: no take-back.
    pub given: &'a [Option<usize>],
}

impl DonorQuery<'_> {
    /// Whether the agent may move node `v` at all: live, ACTIVE, not
    /// cooling down after a move, and not pinned by an operator's move.
    fn may_move(&self, v: &NodeView) -> bool {
        v.is_live() && v.effective() == Effective::Active && !(self.cooling)(v.index) && !v.pinned()
    }

    fn priority(&self, site: usize) -> u32 {
        self.priorities.get(site).copied().unwrap_or(0)
    }

    fn qos(&self, site: usize) -> SiteQos {
        self.qos.get(site).copied().unwrap_or_default()
    }

    fn reserve(&self, site: usize) -> usize {
        self.reserve.get(site).copied().unwrap_or(0)
    }

    fn home_of(&self, node: usize) -> Option<usize> {
        self.homes.get(node).copied().flatten()
    }

    fn given_by(&self, node: usize) -> Option<usize> {
        self.given.get(node).copied().flatten()
    }

    /// The hot site's claim on `node`, lowest first: it gave the node away
    /// recently (0), the node's home is the hot site (1), none (2).
    fn claim_on(&self, node: usize) -> u8 {
        if self.given_by(node) == Some(self.hot_site) {
            0
        } else if self.home_of(node) == Some(self.hot_site) {
            1
        } else {
            2
        }
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
    /// Nodes the site's guarantee needs for its demand now
    /// ([`SiteQos::nodes_needed`]).
    needed: Vec<usize>,
    /// Nodes serving the site (fixed ones included) and their mean known
    /// load (`None`: none known).
    serving: Vec<(usize, Option<f64>)>,
    /// Whether the site can give one node and keep its minimum, its
    /// guarantee's need and its reserve.
    can_give: Vec<bool>,
    /// The site's load if its active nodes' work were spread over one node
    /// fewer (a single node's own load; 0 with none).
    without_one: Vec<f64>,
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
        // Nodes the site needs for its guarantee: its active nodes (fixed
        // ones serve too) and their mean load feed [`SiteQos::nodes_needed`].
        let active: Vec<(usize, Option<f64>)> = serving
            .iter()
            .enumerate()
            .map(|(s, (count, sum, known))| {
                (count + fixed(s), (*known > 0).then(|| sum / *known as f64))
            })
            .collect();
        let needed: Vec<usize> = active
            .iter()
            .enumerate()
            .map(|(s, (count, load))| q.qos(s).nodes_needed(*count, *load))
            .collect();
        // After giving one: members - 1 >= min_nodes, the need and the
        // reserve.
        let can_give = (0..n)
            .map(|s| {
                members[s] > q.sites[s].min_nodes
                    && members[s] > needed[s]
                    && members[s] > q.reserve(s)
            })
            .collect();
        let without_one = serving
            .iter()
            .map(|(_, sum, known)| sum / known.saturating_sub(1).max(1) as f64)
            .collect();
        Tally {
            members,
            needed,
            serving: active,
            can_give,
            without_one,
        }
    }

    fn without_one(&self, site: usize) -> f64 {
        self.without_one.get(site).copied().unwrap_or(0.0)
    }

    /// Whether `site` can spare a node it is not using: its work fits on
    /// one node fewer in this view and, by the history the agent keeps, in
    /// every round of the last T ([`DonorQuery::spare`]).
    fn spare(&self, q: &DonorQuery<'_>, site: usize) -> bool {
        self.without_one(site) <= q.high_watermark && q.spare.get(site).copied().unwrap_or(true)
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
        .filter(|v| q.may_move(v))
        .filter_map(|v| Some((v, v.load?)))
        .filter_map(|(v, load)| {
            let busy = load >= q.low_watermark;
            // Rank: idle before busy (taking an idle node disturbs no
            // request), then a node the hot site just gave away, the idle
            // pool before any site, the lowest priority, a loan of the hot
            // site's own coming home, the lowest load, the lowest index.
            let claim = q.claim_on(v.index);
            let not_given_back = claim > 0;
            let (pool, priority) = match v.role.site {
                SiteSlot::Idle if busy => return None,
                SiteSlot::Idle => (false, 0),
                SiteSlot::Site(_) => {
                    let s = v.role.site.index()?;
                    let p = q.priority(s);
                    // A site short of its guarantee may take any node of a
                    // strictly lower-priority site, busy or idle.
                    let pulls = may_pull && p < hot_priority;
                    if s == q.hot_site || (busy && !pulls) {
                        return None;
                    }
                    if !tally.can_give.get(s).copied().unwrap_or(false) {
                        return None;
                    }
                    // A node whose load sample is low for a moment, of a
                    // site that as a whole is loaded (now, or in any round
                    // of T), is not idle: taking it makes the site hot and
                    // pulls a node back.
                    // A node going back where it came from (the hot
                    // site's own, or one it just gave) is judged on this
                    // view alone: moves away from the split are judged
                    // over T, moves back towards it are not made sticky.
                    // A site short of its guarantee pulls from a lower
                    // priority whether or not its node is spare (it could
                    // take the node busy): the spare rule guards against
                    // thrash between peers, not against a priority pull
                    // (at start-up no site has a spare streak of T yet, and
                    // a short site must not wait T for an idle node when a
                    // busy one would go at once).
                    let spare = pulls
                        || if claim < 2 {
                            tally.without_one(s) <= q.high_watermark
                        } else {
                            tally.spare(q, s)
                        };
                    if !busy && !spare {
                        return None;
                    }
                    (true, p)
                }
            };
            Some(((busy, not_given_back, pool, priority, claim), load, v.index))
        })
        .min_by(|(ra, la, ia), (rb, lb, ib)| ra.cmp(rb).then(la.total_cmp(lb)).then(ia.cmp(ib)))
        .map(|(_, _, index)| index)
}

/// The nodes each site's guarantee needs for its demand now, by site index
/// ([`SiteQos::nodes_needed`] on the site's active nodes; 0 without a
/// guarantee or demand): what the guarantee reserve remembers.
pub fn guarantee_needs(q: &DonorQuery<'_>) -> Vec<usize> {
    Tally::new(q).needed
}

/// Whether each site's work, by site index, fits on one node fewer in this
/// view (its serving nodes' known load spread over one node fewer at or
/// under the high watermark): the round sample the agent keeps a streak of
/// for [`DonorQuery::spare`].
pub fn fits_one_fewer(q: &DonorQuery<'_>) -> Vec<bool> {
    let tally = Tally::new(q);
    (0..q.sites.len())
        .map(|s| tally.without_one(s) <= q.high_watermark)
        .collect()
}

/// How many nodes hot site `q.hot_site` is short by (at least 1 while it
/// can take one; 0 at `max_nodes`): the most of
///
/// - its guarantee's need beyond its members, when `short` (its guarantee
///   missed while its demand exceeds what it is served);
/// - the work queued beyond its nodes' capacity: with a mean load `l` above
///   1 on `n` serving nodes, `ceil(n × l) − n` more nodes would run at
///   load 1 (a site at or under load 1 is short by one node);
///
/// capped at `max_nodes`. The agent claims up to `claim_batch` of them in
/// one round.
pub fn shortfall(q: &DonorQuery<'_>, short: bool) -> usize {
    let site = q.hot_site;
    let Some(limits) = q.sites.get(site) else {
        return 0;
    };
    let tally = Tally::new(q);
    let members = tally.members[site];
    let room = limits.max_nodes.saturating_sub(members);
    let guarantee = if short {
        tally.needed[site].saturating_sub(members)
    } else {
        0
    };
    let (count, load) = tally.serving[site];
    let queued = match load {
        Some(l) if l > 1.0 && count > 0 => {
            let wanted = (count as f64 * l).ceil();
            // A load far above 1 (a long queue) is capped by `room` below.
            if wanted.is_finite() && wanted < usize::MAX as f64 {
                (wanted as usize).saturating_sub(count)
            } else {
                room
            }
        }
        _ => 0,
    };
    guarantee.max(queued).max(1).min(room)
}

/// The node hot site `q.hot_site` takes **back towards its configured
/// share**, or `None`: when the site has fewer nodes than its `[[node]]`
/// entries give it (`shares`, by site index) and the donor the rules pick
/// ([`choose_donor`]) is a node of its own home or one it gave away within
/// the take-back window. Such a move restores the rigid split, which
/// serves the site's burst with that node whatever the burst estimate
/// says; the agent lets it past the estimate's gate (`claim_horizon`), or a
/// site of short bursts serves them below its configured share
/// (docs/reconfiguration.md, "Burst estimate").
pub fn choose_home_claim(q: &DonorQuery<'_>, shares: &[usize]) -> Option<usize> {
    let members = Tally::new(q).members.get(q.hot_site).copied().unwrap_or(0);
    if members >= shares.get(q.hot_site).copied().unwrap_or(0) {
        return None;
    }
    choose_donor(q).filter(|n| q.claim_on(*n) < 2)
}

/// What [`choose_return`] looks at besides the [`DonorQuery`] (whose
/// `hot_site` is the home site the node would return to).
pub struct ReturnQuery<'a> {
    /// Each node's home site (its `[[node]]` entry's; `None`: the idle
    /// pool, never returned to), by node index.
    pub homes: &'a [Option<usize>],
    /// Nodes the config gives each site (with or without a window).
    pub shares: &'a [usize],
    /// Whether `site` has been cool for `loan_return`.
    pub cool: &'a dyn Fn(usize) -> bool,
}

/// Picks a node on loan that should go home to `q.hot_site` now, or `None`
/// (see "Loans" in the module doc).
pub fn choose_return(q: &DonorQuery<'_>, r: &ReturnQuery<'_>) -> Option<usize> {
    let home = q.hot_site;
    let limits = q.sites.get(home)?;
    let tally = Tally::new(q);
    let members = tally.members.get(home).copied().unwrap_or(0);
    if members >= r.shares.get(home).copied().unwrap_or(0) || members >= limits.max_nodes {
        return None;
    }
    q.views
        .iter()
        .flatten()
        .filter(|v| r.homes.get(v.index).copied().flatten() == Some(home))
        .filter(|v| q.may_move(v))
        .filter_map(|v| Some((v, v.load?, v.role.site.index()?)))
        .filter(|(_, load, borrower)| {
            *load < q.low_watermark
                && *borrower != home
                && (r.cool)(*borrower)
                && tally.can_give.get(*borrower).copied().unwrap_or(false)
                && tally.without_one(*borrower) <= q.high_watermark
        })
        .min_by(|(a, la, _), (b, lb, _)| la.total_cmp(lb).then(a.index.cmp(&b.index)))
        .map(|(v, _, _)| v.index)
}

#[cfg(test)]
mod tests;
