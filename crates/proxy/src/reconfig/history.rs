//! History-aware hot-site detection (seed 001 section 3.1.3): a site is hot
//! only when, in every round for the history window T, its load stayed above
//! the high watermark or its guarantee was missed while its demand exceeded
//! what it was served (docs/reconfiguration.md step 1; seed 003 section
//! 4.3: nodes move "based on the system load as well as the QoS
//! guarantees"). A short burst never moves a node (no thrashing).
//!
//! **Adaptive T.** Which bursts are "short" depends on how long a move
//! takes to pay off, and the seeds fixed T for bursts far shorter than any
//! T. Here each site's T adapts between `history` and `history_max`: after
//! a claim for the site, if the site's offered rate falls below half of
//! what it was at the claim within two of its T, the burst ended as the
//! node arrived (a *wasted* move) and the site's T doubles; if the demand
//! holds for two T, the move was worth it and T halves back towards
//! `history`. Bursts that keep ending just after a move stop moving nodes;
//! long bursts keep the short reaction time.
//!
//! **Burst estimate** (docs/reconfiguration.md, "Burst estimate"). Each site's *loaded periods* (rounds in a
//! row loaded or short, from the first to the first cool round; a claim
//! does not cut one) are its bursts as the agent sees them. The last
//! [`BURSTS_KEPT`] of them that lasted at least the base T (a shorter one
//! can never move a node) give the site's estimate (a site with none yet
//! uses every site's): [`burst_left`](HotTracker::burst_left) is their
//! *mean residual life* at how long the current period has lasted, the
//! mean of `b - lasted` over the kept bursts `b` longer than that. Bursts
//! of one length (experiments 1 and 3) give that length minus `lasted`;
//! bursts of varied length give the rest a burst of that age has had on
//! average, where the longest of them (the estimate before) promised the
//! longest rest to every burst. Without an estimate, or once a period
//! outlives every kept burst, the burst is expected to
//! last as long again as it has lasted so far (the median remaining life
//! of a burst of unknown, heavy-tailed length). The agent claims only when
//! the burst is expected to last at least `claim_horizon` longer
//! (`reconfig::agent::policy`): a claimed node is held for its cool-down
//! whatever the burst does, so a burst about to end does not pay for it.
//! The estimate alone ([`estimated_left`](HotTracker::estimated_left)) also
//! sizes a loaded site's claim batch: one node per `claim_horizon` of
//! expected burst.
//!
//! **Spare streaks**. The donor side of the same history: since
//! when each site's work has fitted on one node fewer in every round
//! ([`observe_spare`](HotTracker::observe_spare)). A site gives an idle
//! node only once that has held for T (`reconfig::donor`), as a hot site
//! claims only once it has been hot for T: a dip of a round or two in a
//! loaded site gives nothing away.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Offered rate below this fraction of the rate at the claim: the burst the
/// claim answered has ended.
const BURST_ENDED: f64 = 0.5;

/// Loaded periods kept per site for the burst estimate.
pub const BURSTS_KEPT: usize = 8;

/// How a claim for a site turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The site's demand fell away within two T of the claim: T doubled.
    Wasted,
    /// The demand held for two T: T halved (not below `history`).
    Useful,
}

/// A claim waiting for its verdict.
#[derive(Debug, Clone, Copy)]
struct Pending {
    at: Instant,
    offered: f64,
    judge_for: Duration,
}

/// Per-site streaks of rounds above the high watermark, and each site's
/// current history window.
#[derive(Debug, Clone)]
pub struct HotTracker {
    base: Duration,
    max: Duration,
    high: f64,
    /// Each site's current T, in [base, max].
    history: Vec<Duration>,
    /// Start of each site's current streak above the watermark.
    since: Vec<Option<Instant>>,
    /// Start of each site's current streak of rounds short of its
    /// guarantee (the guarantee trigger, `reconfig.guarantee_history`).
    short_since: Vec<Option<Instant>>,
    /// Since when each site has been cool: neither above the watermark nor
    /// short in any round (loans go home from a cool site). A claim's
    /// [`reset`](Self::reset) does not make a site cool.
    cool: Vec<Option<Instant>>,
    /// Start of each site's current loaded period (not cut by a claim).
    warm: Vec<Option<Instant>>,
    /// Each site's last loaded periods of at least `base`, newest last.
    bursts: Vec<VecDeque<Duration>>,
    /// Start of each site's current streak of rounds whose work fitted on
    /// one node fewer (the donor history).
    spare_since: Vec<Option<Instant>>,
    pending: Vec<Option<Pending>>,
}

impl HotTracker {
    /// A tracker for `sites` sites with T fixed at `history`.
    pub fn new(sites: usize, history: Duration, high_watermark: f64) -> Self {
        Self::adaptive(sites, history, history, high_watermark)
    }

    /// A tracker whose per-site T adapts between `history` and `max`
    /// (see the module doc); `max == history` fixes it.
    pub fn adaptive(sites: usize, history: Duration, max: Duration, high_watermark: f64) -> Self {
        HotTracker {
            base: history,
            max: max.max(history),
            high: high_watermark,
            history: vec![history; sites],
            since: vec![None; sites],
            short_since: vec![None; sites],
            cool: vec![None; sites],
            warm: vec![None; sites],
            bursts: vec![VecDeque::new(); sites],
            spare_since: vec![None; sites],
            pending: vec![None; sites],
        }
    }

    /// Records this round's load of `site` (`None`: not measurable, which
    /// ends a streak) and returns whether the site is hot: above the
    /// watermark in every round since at least `history` ago.
    pub fn observe(&mut self, site: usize, load: Option<f64>, now: Instant) -> bool {
        self.observe_round(site, load, false, now)
    }

    /// [`observe`](Self::observe) with the QoS condition: `short` when the
    /// site's guarantee was missed this round while its demand exceeded
    /// what it was served ([`SiteQos::short`](crate::qos::guarantee::SiteQos::short)).
    /// Either condition keeps the streak going; a round with neither ends
    /// it.
    pub fn observe_round(
        &mut self,
        site: usize,
        load: Option<f64>,
        short: bool,
        now: Instant,
    ) -> bool {
        let history = self.history_of(site);
        let loaded = short || load.is_some_and(|l| l > self.high);
        self.track_period(site, loaded, short || load.is_some(), now);
        if let Some(s) = self.short_since.get_mut(site) {
            *s = if short { Some(s.unwrap_or(now)) } else { None };
        }
        let (Some(slot), Some(cool)) = (self.since.get_mut(site), self.cool.get_mut(site)) else {
            return false;
        };
        match load {
            _ if short => {
                *cool = None;
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= history
            }
            Some(l) if l > self.high => {
                *cool = None;
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= history
            }
            Some(_) => {
                cool.get_or_insert(now);
                *slot = None;
                false
            }
            // Not measurable: no evidence either way.
            None => {
                *cool = None;
                *slot = None;
                false
            }
        }
    }

    /// Starts or ends `site`'s loaded period; an ended one of at least the
    /// base T joins the site's burst history, unless it ended in a round
    /// that could not be measured (not evidence of the burst's end).
    fn track_period(&mut self, site: usize, loaded: bool, measured: bool, now: Instant) {
        let (Some(warm), Some(kept)) = (self.warm.get_mut(site), self.bursts.get_mut(site)) else {
            return;
        };
        match (*warm, loaded) {
            (None, true) => *warm = Some(now),
            (Some(start), false) => {
                *warm = None;
                let lasted = now.saturating_duration_since(start);
                if measured && lasted >= self.base {
                    if kept.len() == BURSTS_KEPT {
                        kept.pop_front();
                    }
                    kept.push_back(lasted);
                }
            }
            _ => {}
        }
    }

    /// How much longer `site`'s current burst is expected to last: its
    /// burst estimate (see the module doc) minus how long its loaded period
    /// has lasted, or, with no estimate or once the period outlived it, as
    /// long as it has lasted. `None` when the site is not loaded.
    pub fn burst_left(&self, site: usize, now: Instant) -> Option<Duration> {
        let start = self.warm.get(site).copied().flatten()?;
        Some(
            self.estimated_left(site, now)
                .unwrap_or_else(|| now.saturating_duration_since(start)),
        )
    }

    /// How much longer `site`'s current burst is expected to last by its
    /// burst estimate alone (the kept bursts' mean residual life at how
    /// long the loaded period has lasted): `None` when the site is not
    /// loaded, when no site has an estimate yet, or once the period
    /// outlived every kept burst (then nothing bounds
    /// the burst: [`burst_left`](Self::burst_left)'s "as long again").
    /// The agent sizes a claim batch by it ("Batches by the estimate").
    pub fn estimated_left(&self, site: usize, now: Instant) -> Option<Duration> {
        let start = self.warm.get(site).copied().flatten()?;
        let lasted = now.saturating_duration_since(start);
        let own = self.bursts.get(site).filter(|b| !b.is_empty());
        let known: Vec<Duration> = match own {
            Some(b) => b.iter().copied().collect(),
            None => self.bursts.iter().flatten().copied().collect(),
        };
        mean_residual(&known, lasted)
    }

    /// How long `site` has been cool (every round since then neither above
    /// the watermark nor short); `None` when it was not cool in the last
    /// round observed.
    pub fn cool_for(&self, site: usize, now: Instant) -> Option<Duration> {
        let since = self.cool.get(site).copied().flatten()?;
        Some(now.saturating_duration_since(since))
    }

    /// Records whether `site`'s work fitted on one node fewer this round
    /// (`reconfig::donor::fits_one_fewer`); a round where it did not ends
    /// the streak.
    pub fn observe_spare(&mut self, site: usize, fits: bool, now: Instant) {
        if let Some(s) = self.spare_since.get_mut(site) {
            *s = if fits { Some(s.unwrap_or(now)) } else { None };
        }
    }

    /// How long `site`'s work has fitted on one node fewer in every round;
    /// `None` when it did not in the last round observed.
    pub fn spare_for(&self, site: usize, now: Instant) -> Option<Duration> {
        let since = self.spare_since.get(site).copied().flatten()?;
        Some(now.saturating_duration_since(since))
    }

    /// Forgets `site`'s streak: after a claim (or after adopting another
    /// proxy's claim) the site must stay hot for a whole new window before
    /// another node moves, which gives the moved node time to take load.
    pub fn reset(&mut self, site: usize) {
        if let Some(s) = self.since.get_mut(site) {
            *s = None;
        }
        if let Some(s) = self.short_since.get_mut(site) {
            *s = None;
        }
    }

    /// How long `site` has been short of its guarantee in every round
    /// (since the last [`reset`](Self::reset)); `None` when it was not
    /// short in the last round observed.
    pub fn short_for(&self, site: usize, now: Instant) -> Option<Duration> {
        let since = self.short_since.get(site).copied().flatten()?;
        Some(now.saturating_duration_since(since))
    }

    /// Start of `site`'s current streak above the watermark.
    pub fn hot_since(&self, site: usize) -> Option<Instant> {
        self.since.get(site).copied().flatten()
    }

    /// `site`'s current history window T.
    pub fn history_of(&self, site: usize) -> Duration {
        self.history.get(site).copied().unwrap_or(self.base)
    }

    /// This proxy claimed a node for `site` while the site was offered
    /// `offered` requests/s: the claim is judged by
    /// [`judge`](Self::judge) in the rounds that follow. Without a measured
    /// demand there is nothing to judge by.
    pub fn claimed(&mut self, site: usize, offered: f64, now: Instant) {
        let judge_for = self.history_of(site) * 2;
        if let Some(p) = self.pending.get_mut(site) {
            *p = (offered > 0.0 && self.max > self.base).then_some(Pending {
                at: now,
                offered,
                judge_for,
            });
        }
    }

    /// Judges the pending claim of `site` (if any) against this round's
    /// offered rate, adapting the site's T; returns the verdict once there
    /// is one.
    pub fn judge(&mut self, site: usize, offered: f64, now: Instant) -> Option<Verdict> {
        let p = self.pending.get(site).copied().flatten()?;
        let verdict = if offered < p.offered * BURST_ENDED {
            Verdict::Wasted
        } else if now.saturating_duration_since(p.at) >= p.judge_for {
            Verdict::Useful
        } else {
            return None;
        };
        self.pending[site] = None;
        let t = self.history[site];
        self.history[site] = match verdict {
            Verdict::Wasted => (t * 2).min(self.max),
            Verdict::Useful => (t / 2).max(self.base),
        };
        Some(verdict)
    }
}

/// The mean residual life of a burst that has lasted `lasted`, by the
/// bursts `known`: the mean of `b - lasted` over the known bursts `b`
/// longer than `lasted` (`None` when none is). Bursts of one length give
/// that length minus `lasted`; bursts of varied, memoryless lengths give
/// about their mean whatever `lasted` is, where the longest of them (the
/// estimate before) promised the longest one's rest to every burst, so
/// one long run among short ones made every short one claim.
fn mean_residual(known: &[Duration], lasted: Duration) -> Option<Duration> {
    let rest: Vec<Duration> = known
        .iter()
        .filter(|b| **b > lasted)
        .map(|b| *b - lasted)
        .collect();
    let n = u32::try_from(rest.len()).ok().filter(|n| *n > 0)?;
    Some(rest.iter().sum::<Duration>() / n)
}

#[cfg(test)]
mod tests;
