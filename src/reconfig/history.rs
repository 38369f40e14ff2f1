//! History-aware hot-site detection (seed 001 section 3.1.3): a site is hot
//! only when, in every round for the history window T, its load stayed above
//! the high watermark or its guarantee was missed while its demand exceeded
//! what it was served (DESIGN.md "Reconfiguration" step 1; seed 003 section
//! 4.3: nodes move "based on the system load as well as the QoS
//! guarantees"). A short burst never moves a node (no thrashing).

use std::time::Duration;

use tokio::time::Instant;

/// Per-site streaks of rounds above the high watermark.
#[derive(Debug, Clone)]
pub struct HotTracker {
    history: Duration,
    high: f64,
    /// Start of each site's current streak above the watermark.
    since: Vec<Option<Instant>>,
}

impl HotTracker {
    /// A tracker for `sites` sites.
    pub fn new(sites: usize, history: Duration, high_watermark: f64) -> Self {
        HotTracker {
            history,
            high: high_watermark,
            since: vec![None; sites],
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
        let Some(slot) = self.since.get_mut(site) else {
            return false;
        };
        match load {
            _ if short => {
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= self.history
            }
            Some(l) if l > self.high => {
                let start = *slot.get_or_insert(now);
                now.saturating_duration_since(start) >= self.history
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
}
