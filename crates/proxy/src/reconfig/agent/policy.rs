//! The agent's QoS side (docs/reconfiguration.md "QoS"; seed 003 sections 4-5): the
//! per-interval accounting of offered and served rates, the order in which
//! hot sites claim, the count of moves seen, and which loaned nodes go home
//! (docs/reconfiguration.md "Loans"; the rules are
//! [`choose_return`](crate::reconfig::donor::choose_return)).

use std::time::Duration;

use tokio::time::Instant;

use super::claim::Pick;
use super::{
    fits_one_fewer, guarantee_needs, shortfall, Agent, ClaimOutcome, NodeView, ProtocolError,
    SiteSlot, ViewError, Work,
};
use crate::qos::guarantee::{QosAccount, QosPolicy, SiteQos};
use crate::reconfig::donor::choose_home_claim;
use crate::reconfig::history::Verdict;
use crate::reconfig::status::{self, Counters};

impl Agent {
    /// Uses `policy` (priorities, guarantee shares, the data path's
    /// counters) instead of the load-only default; call before the first
    /// round.
    pub fn with_qos(mut self, policy: QosPolicy) -> Agent {
        let work = self.work.get_mut();
        work.qos = QosAccount::new(policy.guarantees.clone());
        self.qos = policy;
        self
    }

    /// Closes the interval since the last round: rates, kept or not, the
    /// meeting percentage (exported as metrics). Returns, by site, whether
    /// the guarantee is missed while the demand exceeds what is served (the
    /// QoS half of the hot trigger).
    pub(super) fn sample_qos(&self, work: &mut Work, now: Instant) -> Vec<bool> {
        let sites = work.qos.sample(&self.qos.demand.totals(), now);
        let short = sites.iter().map(SiteQos::short).collect();
        work.qos.export(&self.qos.names);
        short
    }

    /// The order in which this round's hot sites claim: the most important
    /// first (priority), then the hottest, so that when donors are scarce
    /// the high-priority site gets one.
    pub(super) fn claim_order(&self, hot: &[usize], loads: &[Option<f64>]) -> Vec<usize> {
        let mut hot = hot.to_vec();
        let priority = |s: usize| self.qos.priorities.get(s).copied().unwrap_or(0);
        let load = |s: usize| loads.get(s).copied().flatten().unwrap_or(0.0);
        hot.sort_by(|a, b| {
            priority(*b)
                .cmp(&priority(*a))
                .then(load(*b).total_cmp(&load(*a)))
        });
        hot
    }

    /// A node's role changed (any proxy's claim, an admin move or a
    /// rollback), counted once by each proxy that sees it.
    pub(super) fn moved(&self) {
        Counters::bump(&self.counters.moves);
        metrics::counter!(status::MOVES).increment(1);
    }

    /// Judges this proxy's earlier claims by what each site is offered now
    /// (adaptive T, `reconfig::history`).
    pub(super) fn judge_claims(&self, work: &mut Work, now: Instant) {
        for s in 0..self.settings.sites.len() {
            let offered = Agent::site_qos(work).get(s).map_or(0.0, |q| q.offered_rps);
            let Some(verdict) = work.hot.judge(s, offered, now) else {
                continue;
            };
            let site = self.settings.sites[s].name.clone();
            let history = work.hot.history_of(s);
            let label = match verdict {
                Verdict::Wasted => "wasted",
                Verdict::Useful => "useful",
            };
            tracing::info!(site = %site, verdict = label, history_ms = history.as_millis() as u64, "claim judged; history window adapted");
            metrics::counter!(status::VERDICTS, "site" => site.clone(), "verdict" => label)
                .increment(1);
            metrics::gauge!(status::HISTORY, "site" => site).set(history.as_secs_f64());
        }
    }

    /// Whether hot site `site` should claim now: its burst is expected to
    /// last at least `claim_horizon` longer (`reconfig::history`, "Burst
    /// estimate"), or the claim takes it back towards its configured share
    /// ([`choose_home_claim`]: the rigid split would serve the burst with
    /// that node, so a short burst is no reason to leave it with the
    /// borrower).
    pub(super) fn worth_claiming(
        &self,
        work: &Work,
        site: usize,
        views: &[Option<NodeView>],
        now: Instant,
    ) -> bool {
        let Some((left, horizon)) = self.ends_within_horizon(work, site, now) else {
            return true;
        };
        let name = &self.settings.sites[site].name;
        let shares = self.shares();
        let back = self.with_donor_query(work, site, views, now, |q| choose_home_claim(q, &shares));
        if back.is_some() {
            tracing::debug!(site = %name, left_ms = left.as_millis() as u64,
                "hot, the burst is expected to end soon, but below its share: claims its node back");
            return true;
        }
        tracing::debug!(site = %name,
            left_ms = left.as_millis() as u64, horizon_ms = horizon.as_millis() as u64,
            "hot, but the burst is expected to end before a claim pays: no claim");
        false
    }

    /// `Some((burst left, claim_horizon))` when hot site `site`'s burst is
    /// expected to end within `claim_horizon`; `None` with the horizon off
    /// or no estimate.
    fn ends_within_horizon(
        &self,
        work: &Work,
        site: usize,
        now: Instant,
    ) -> Option<(Duration, Duration)> {
        let horizon = self.settings.reconfig.claim_horizon()?;
        let left = work.hot.burst_left(site, now)?;
        (left < horizon).then_some((left, horizon))
    }

    /// Updates each site's guarantee reserve from this round's view: the
    /// nodes its guarantee needs now, or the peak it needed within the last
    /// `guarantee_hold` if that was more (`reconfig.guarantee_hold`; a
    /// need that cannot be estimated counts as the site's `max_nodes`).
    pub(super) fn hold_reserve(
        &self,
        work: &mut Work,
        views: &[Result<NodeView, ViewError>],
        now: Instant,
    ) {
        let Some(hold) = self.settings.reconfig.guarantee_hold() else {
            return;
        };
        let views: Vec<Option<NodeView>> = views.iter().map(|v| v.as_ref().ok().cloned()).collect();
        let needs = self.with_donor_query(work, 0, &views, now, guarantee_needs);
        for (s, need) in needs.into_iter().enumerate() {
            let cap = self.settings.sites.get(s).map_or(0, |x| x.limits.max_nodes);
            let need = need.min(cap);
            let Some(r) = work.reserve.get_mut(s) else {
                continue;
            };
            if need >= r.0 || now.saturating_duration_since(r.1) >= hold {
                *r = (need, now);
            }
        }
    }

    /// Records, per site, whether its work fits on one node fewer in this
    /// round's view: the donor history (`reconfig::history`, "Spare
    /// streaks"; a site gives an idle node only after a streak of T).
    pub(super) fn track_spare(
        &self,
        work: &mut Work,
        views: &[Result<NodeView, ViewError>],
        now: Instant,
    ) {
        let views: Vec<Option<NodeView>> = views.iter().map(|v| v.as_ref().ok().cloned()).collect();
        let fits = self.with_donor_query(work, 0, &views, now, fits_one_fewer);
        for (s, fits) in fits.into_iter().enumerate() {
            work.hot.observe_spare(s, fits, now);
        }
    }

    /// The sites short of their guarantee in every round for
    /// `guarantee_history` (the first short round's interval counts, so at
    /// the default, `sensitivity`, a site claims in its first short round):
    /// they claim this round without waiting for T and without the burst
    /// estimate (`reconfig.guarantee_history`), hot or not. A site both
    /// loaded and short is urgent too: the burst estimate, which would hold
    /// a loaded site's claim for `claim_horizon` in its first burst, never
    /// holds back a missed guarantee (docs/reconfiguration.md, "Guarantees
    /// kept").
    pub(super) fn urgent(&self, work: &Work, short: &[bool], now: Instant) -> Vec<usize> {
        let Some(after) = self.settings.reconfig.guarantee_history() else {
            return Vec::new();
        };
        let s_ = self.settings.reconfig.sensitivity;
        (0..self.settings.sites.len())
            .filter(|s| short.get(*s).copied().unwrap_or(false))
            .filter(|s| work.hot.short_for(*s, now).is_some_and(|d| d + s_ >= after))
            .collect()
    }

    /// How many nodes hot site `site` claims this round: what it is short
    /// by on `views` ([`shortfall`]), at most `claim_batch`, and, unless it
    /// is short of its guarantee, at most [`batch_by_estimate`](Self::batch_by_estimate).
    pub(super) fn claim_count(
        &self,
        work: &Work,
        site: usize,
        views: &[Option<NodeView>],
        short: &[bool],
        now: Instant,
    ) -> usize {
        let short = short.get(site).copied().unwrap_or(false);
        let wanted = self.with_donor_query(work, site, views, now, |q| shortfall(q, short));
        let batch = self.settings.reconfig.claim_batch.max(1);
        let batch = if short {
            batch
        } else if self.ends_within_horizon(work, site, now).is_some() {
            // Let past the estimate's gate only to take a node back
            // towards its share (`worth_claiming`): one node.
            1
        } else {
            batch.min(self.batch_by_estimate(work, site, now))
        };
        wanted.clamp(1, batch)
    }

    /// The most nodes a loaded (not short) site may take in one round by
    /// its burst estimate: one per `claim_horizon` its burst is expected to
    /// last ([`HotTracker::estimated_left`](crate::reconfig::history::HotTracker::estimated_left)),
    /// at least one. Each node a batch takes is one its donor claims back
    /// (another move) when its own burst comes, so every node beyond the
    /// first needs another horizon of expected burst. No bound without an
    /// estimate, once the burst outlived it, or with `claim_horizon` off:
    /// a burst longer than any seen is the long one batches are for.
    pub(super) fn batch_by_estimate(&self, work: &Work, site: usize, now: Instant) -> usize {
        let Some(horizon) = self
            .settings
            .reconfig
            .claim_horizon()
            .filter(|h| !h.is_zero())
        else {
            return usize::MAX;
        };
        match work.hot.estimated_left(site, now) {
            Some(left) => usize::try_from(left.as_nanos() / horizon.as_nanos())
                .unwrap_or(usize::MAX)
                .max(1),
            None => usize::MAX,
        }
    }

    /// The sites a loaned node should go home to this round, judged on the
    /// round's view (the claim decides again on a fresh view under the
    /// locks). A hot site gets its node through its own claim instead.
    pub(super) fn returns_due(
        &self,
        work: &Work,
        views: &[Result<NodeView, ViewError>],
        hot: &[usize],
        now: Instant,
    ) -> Vec<usize> {
        if self.settings.reconfig.loan_return().is_none() {
            return Vec::new();
        }
        let views: Vec<Option<NodeView>> = views.iter().map(|v| v.as_ref().ok().cloned()).collect();
        (0..self.settings.sites.len())
            .filter(|s| !hot.contains(s))
            .filter(|s| self.loan_to_return(work, *s, &views, now).is_some())
            .collect()
    }

    /// Brings a loaned node home to `site` through the claim path (site
    /// lock, the borrower's lock, fresh view, fence, counters, role CAS).
    pub(super) async fn bring_home(
        &self,
        work: &mut Work,
        site: usize,
    ) -> Result<ClaimOutcome, ProtocolError> {
        let r = self
            .claim(work, SiteSlot::Site(site as u16), site, Pick::Return)
            .await;
        let name = &self.settings.sites[site].name;
        match &r {
            Ok(ClaimOutcome::Claimed { node, epoch, .. }) => {
                tracing::info!(site = %name, node = %node, epoch, "loaned node returned home: its borrower cooled and the site was below its configured share")
            }
            Ok(other) => {
                tracing::debug!(site = %name, outcome = ?other, "loan return: no move this round")
            }
            Err(e) => {
                self.error("return");
                tracing::warn!(site = %name, error = %e, "loan return failed");
            }
        }
        r
    }

    /// The last interval's QoS by site index.
    pub(super) fn site_qos(work: &Work) -> &[SiteQos] {
        work.qos.sites()
    }
}
