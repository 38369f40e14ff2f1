//! History-aware hot-site detection (seed 001 section 3.1.3): a site is hot
//! only when, in every round for the history window T, its load stayed above
//! the high watermark or its guarantee was missed while its demand exceeded
//! what it was served (DESIGN.md "Reconfiguration" step 1; seed 003 section
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

use std::time::Duration;

use tokio::time::Instant;

/// Offered rate below this fraction of the rate at the claim: the burst the
/// claim answered has ended.
const BURST_ENDED: f64 = 0.5;

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
    /// what it was served ([`SiteQos::short`](super::qos::SiteQos::short)).
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
        let Some(slot) = self.since.get_mut(site) else {
            return false;
        };
        match load {
            _ if short => {
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= history
            }
            Some(l) if l > self.high => {
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= history
            }
            _ => {
                *slot = None;
                false
            }
        }
    }

    /// Forgets `site`'s streak: after a claim (or after adopting another
    /// proxy's claim) the site must stay hot for a whole new window before
    /// another node moves, which gives the moved node time to take load.
    pub fn reset(&mut self, site: usize) {
        if let Some(s) = self.since.get_mut(site) {
            *s = None;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_millis(200);
    const T: Duration = Duration::from_secs(1);

    /// Feeds `loads` one per S and returns in which rounds the site was hot.
    async fn run(t: &mut HotTracker, loads: &[f64]) -> Vec<bool> {
        let mut out = Vec::new();
        for &l in loads {
            out.push(t.observe(0, Some(l), Instant::now()));
            tokio::time::sleep(S).await;
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_spike_is_never_hot() {
        let mut t = HotTracker::new(1, T, 0.8);
        // 0.8 s above the watermark, then back down, twice.
        let spike = [0.95, 0.95, 0.95, 0.95, 0.95, 0.1];
        let hot = run(&mut t, &[spike, spike].concat()).await;
        assert!(hot.iter().all(|h| !h), "{hot:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_sustained_load_is_hot_after_the_history_window() {
        let mut t = HotTracker::new(1, T, 0.8);
        let hot = run(&mut t, &[0.9; 8]).await;
        // Rounds at 0, 0.2, .. 0.8 s are not yet T; the round at 1.0 s is.
        assert_eq!(hot, [false, false, false, false, false, true, true, true]);
        assert!(t.hot_since(0).is_some());
        t.reset(0);
        assert!(
            !t.observe(0, Some(0.9), Instant::now()),
            "a reset starts a new window"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_missed_guarantee_is_hot_after_the_history_window_whatever_the_load() {
        let mut t = HotTracker::new(1, T, 0.8);
        // Load under the watermark (say the app reports no capacity and CPU
        // is low) but the guarantee is missed: hot once it lasted T.
        let mut hot = Vec::new();
        for _ in 0..7 {
            hot.push(t.observe_round(0, Some(0.3), true, Instant::now()));
            tokio::time::sleep(S).await;
        }
        assert_eq!(hot, [false, false, false, false, false, true, true]);
        // One round that keeps the guarantee (and is not loaded) ends it.
        assert!(!t.observe_round(0, Some(0.3), false, Instant::now()));
        assert_eq!(t.hot_since(0), None);
        // Short and loaded rounds alternating keep one streak going.
        let mut hot = Vec::new();
        for i in 0..6 {
            let (load, short) = if i % 2 == 0 {
                (0.3, true)
            } else {
                (0.9, false)
            };
            hot.push(t.observe_round(0, Some(load), short, Instant::now()));
            tokio::time::sleep(S).await;
        }
        assert_eq!(hot, [false, false, false, false, false, true]);
        // A short burst of missed guarantee never is.
        t.reset(0);
        for _ in 0..4 {
            assert!(!t.observe_round(0, None, true, Instant::now()));
            tokio::time::sleep(S).await;
        }
        assert!(!t.observe_round(0, None, false, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unmeasurable_round_breaks_the_streak() {
        let mut t = HotTracker::new(2, T, 0.8);
        for _ in 0..4 {
            t.observe(1, Some(0.9), Instant::now());
            tokio::time::sleep(S).await;
        }
        assert!(!t.observe(1, None, Instant::now()));
        tokio::time::sleep(S).await;
        assert!(!t.observe(1, Some(0.9), Instant::now()));
        assert!(!t.observe(7, Some(5.0), Instant::now()), "unknown site");
        assert!(
            !t.observe(0, Some(0.8), Instant::now()),
            "at the watermark is not above"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_that_ends_as_the_node_arrives_doubles_t_up_to_the_maximum() {
        let mut t = HotTracker::adaptive(2, T, 4 * T, 0.8);
        for expect in [2 * T, 4 * T, 4 * T] {
            t.claimed(0, 1000.0, Instant::now());
            tokio::time::sleep(S).await;
            assert_eq!(t.judge(0, 900.0, Instant::now()), None, "demand holds");
            tokio::time::sleep(S).await;
            // The burst ended 0.4 s after the claim, well within 2 T.
            assert_eq!(t.judge(0, 100.0, Instant::now()), Some(Verdict::Wasted));
            assert_eq!(t.history_of(0), expect);
            assert_eq!(t.judge(0, 100.0, Instant::now()), None, "judged once");
        }
        assert_eq!(t.history_of(1), T, "per site");
        // With T = 4 s a 3 s burst is not hot any more.
        let hot = run(&mut t, &[0.95; 15]).await;
        assert!(hot.iter().all(|h| !h), "{hot:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_move_whose_demand_holds_halves_t_back_to_the_base() {
        let mut t = HotTracker::adaptive(1, T, 8 * T, 0.8);
        for _ in 0..3 {
            t.claimed(0, 1000.0, Instant::now());
            tokio::time::sleep(S).await;
            t.judge(0, 10.0, Instant::now());
        }
        assert_eq!(t.history_of(0), 8 * T);
        let mut seen = Vec::new();
        for _ in 0..5 {
            t.claimed(0, 1000.0, Instant::now());
            let mut verdict = None;
            while verdict.is_none() {
                tokio::time::sleep(S).await;
                verdict = t.judge(0, 800.0, Instant::now());
            }
            assert_eq!(verdict, Some(Verdict::Useful));
            seen.push(t.history_of(0));
        }
        assert_eq!(seen, [4 * T, 2 * T, T, T, T]);
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_t_and_unmeasured_demand_are_never_judged() {
        let mut fixed = HotTracker::new(1, T, 0.8);
        fixed.claimed(0, 1000.0, Instant::now());
        assert_eq!(fixed.judge(0, 0.0, Instant::now()), None);
        assert_eq!(fixed.history_of(0), T);
        let mut t = HotTracker::adaptive(1, T, 4 * T, 0.8);
        t.claimed(0, 0.0, Instant::now());
        assert_eq!(t.judge(0, 0.0, Instant::now()), None);
        assert_eq!(t.judge(7, 0.0, Instant::now()), None, "unknown site");
        t.claimed(7, 5.0, Instant::now());
    }
}
