//! QoS accounting (DESIGN.md "QoS"; seed 003 sections 4-5, seed 000
//! chapter 6): per site, what this proxy was asked for (offered) and what it
//! answered (served) in each interval S, against the site's guaranteed
//! throughput.
//!
//! The data path only bumps two relaxed atomics per request
//! ([`SiteDemand::arrived`], [`SiteDemand::answered`]); the agent samples
//! the totals once per round ([`QosAccount::sample`]) and turns them into
//! rates, the kept/missed verdict of the interval and the running
//! QoS-meeting percentage (seed 003 Fig. 17: the share of intervals in
//! which the guarantee was kept, counting only intervals whose demand
//! reached the guarantee).
//!
//! With several proxies each one accounts for its own share of the
//! guarantee, `guarantee / proxies` (proxies = this one plus its
//! `[[reconfig.peer]]`s): clients are assumed to spread evenly over the
//! proxies, as the testbed's load generator and DNS round-robin do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;
use tokio::time::Instant;

use crate::config::Config;

/// Gauge `rdmalb_site_offered_rps{site}`: requests/s that arrived for the
/// site at this proxy in the last interval (503s and queued-out included).
pub const OFFERED: &str = "rdmalb_site_offered_rps";
/// Gauge `rdmalb_site_served_rps{site}`: responses/s completed with a
/// status below 500 in the last interval.
pub const SERVED: &str = "rdmalb_site_served_rps";
/// Gauge `rdmalb_site_guarantee_rps{site}`: this proxy's share of the
/// site's guarantee.
pub const GUARANTEE: &str = "rdmalb_site_guarantee_rps";
/// Counter `rdmalb_site_qos_intervals_total{site,kept}`: intervals whose
/// demand reached the guarantee, by whether it was kept (`true`/`false`).
pub const INTERVALS: &str = "rdmalb_site_qos_intervals_total";
/// Gauge `rdmalb_site_qos_meeting_percent{site}`: kept / counted intervals.
pub const MEETING: &str = "rdmalb_site_qos_meeting_percent";

/// Relative slack of the rate comparisons. Offered and served are counted
/// at different moments of a request (arrival, response end), so requests in
/// flight at an interval boundary shift a few percent of one interval's
/// responses into the next even when every request is served.
pub const TOLERANCE: f64 = 0.05;

/// One site's request counters, bumped by the data path.
#[derive(Debug, Default)]
pub struct SiteDemand {
    offered: AtomicU64,
    served: AtomicU64,
}

impl SiteDemand {
    /// A request for the site arrived (whatever its fate).
    pub fn arrived(&self) {
        self.offered.fetch_add(1, Ordering::Relaxed);
    }

    /// A response ended; `served` when it completed with a status below 500.
    pub fn answered(&self, served: bool) {
        if served {
            self.served.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn totals(&self) -> (u64, u64) {
        (
            self.offered.load(Ordering::Relaxed),
            self.served.load(Ordering::Relaxed),
        )
    }
}

/// The counters of every site of the start-up site table (the agent's
/// table; `[[site]]` changes apply after a restart), shared by the data
/// path's snapshots across reloads.
#[derive(Debug)]
pub struct Demand {
    sites: Vec<(String, Arc<SiteDemand>)>,
}

impl Demand {
    /// Counters for `names`, by site index.
    pub fn new<I: IntoIterator<Item = String>>(names: I) -> Arc<Demand> {
        Arc::new(Demand {
            sites: names.into_iter().map(|n| (n, Arc::default())).collect(),
        })
    }

    /// The counters of the site named `name` (`None` for a site a reload
    /// added: the agent does not know it until a restart).
    pub fn site(&self, name: &str) -> Option<Arc<SiteDemand>> {
        self.sites
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| Arc::clone(d))
    }

    /// (offered, served) totals by site index.
    pub fn totals(&self) -> Vec<(u64, u64)> {
        self.sites.iter().map(|(_, d)| d.totals()).collect()
    }
}

/// The agent's QoS inputs: priorities and this proxy's guarantee shares by
/// site index, and the data path's counters.
#[derive(Debug, Clone)]
pub struct QosPolicy {
    /// Site names, for the metrics.
    pub names: Vec<String>,
    /// `[[site]] priority`.
    pub priorities: Vec<u32>,
    /// `[[site]] guarantee / proxies` (requests/s at this proxy).
    pub guarantees: Vec<f64>,
    /// What the data path counts.
    pub demand: Arc<Demand>,
}

impl QosPolicy {
    /// From the start-up config: `demand` must count its sites (the data
    /// path's [`Demand`]).
    pub fn from_config(c: &Config, demand: Arc<Demand>) -> Self {
        let proxies = 1 + c.reconfig.peers.len();
        QosPolicy {
            names: c.sites.iter().map(|s| s.name.clone()).collect(),
            priorities: c.sites.iter().map(|s| s.priority).collect(),
            guarantees: c
                .sites
                .iter()
                .map(|s| s.guarantee / proxies as f64)
                .collect(),
            demand,
        }
    }

    /// No priorities, no guarantees, nothing counted: the load-only rules
    /// (an agent built without the data path, as in tests).
    pub fn none(names: Vec<String>) -> Self {
        QosPolicy {
            priorities: vec![0; names.len()],
            guarantees: vec![0.0; names.len()],
            demand: Demand::new(names.clone()),
            names,
        }
    }
}

/// One site's QoS as of the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SiteQos {
    /// Requests/s that arrived in the interval.
    pub offered_rps: f64,
    /// Responses/s completed below 500 in the interval.
    pub served_rps: f64,
    /// This proxy's share of the guarantee (0 = best effort).
    pub guarantee_rps: f64,
    /// Whether the interval kept the guarantee; `None` when it did not
    /// count (best effort, demand under the guarantee, or no interval yet).
    pub kept: Option<bool>,
    /// Intervals that counted so far.
    pub counted: u64,
    /// Of those, the ones that kept the guarantee.
    pub kept_intervals: u64,
}

impl SiteQos {
    /// The running QoS-meeting percentage (`None` before the first counted
    /// interval).
    pub fn meeting_percent(&self) -> Option<f64> {
        (self.counted > 0).then(|| 100.0 * self.kept_intervals as f64 / self.counted as f64)
    }

    /// The guarantee is missed while the demand exceeds what is served:
    /// served under min(offered, guarantee), beyond [`TOLERANCE`]. This is
    /// the QoS half of the hot trigger and what entitles a site to take
    /// busy nodes of strictly lower-priority sites.
    pub fn short(&self) -> bool {
        self.guarantee_rps > 0.0
            && self.served_rps < self.offered_rps.min(self.guarantee_rps) * (1.0 - TOLERANCE)
    }

    /// How many nodes the site needs for the part of its guarantee its
    /// demand uses now, min(offered, guarantee), given `active` nodes
    /// serving it at mean load `load`.
    ///
    /// Per-node capacity is estimated as served / active, scaled up by the
    /// load (a node half busy could serve twice as much) but by at most 4x
    /// (load floor 0.25), so little traffic never suggests a huge capacity;
    /// a load above 1 (queueing) counts as 1. The result is rounded up with
    /// [`TOLERANCE`] headroom. When the capacity cannot be estimated
    /// (demand but nothing served, or no active node) every node is needed:
    /// a donor is never stripped on a guess.
    pub fn nodes_needed(&self, active: usize, load: Option<f64>) -> usize {
        let in_use = self.offered_rps.min(self.guarantee_rps);
        if self.guarantee_rps <= 0.0 || in_use <= 0.0 {
            return 0;
        }
        let busy = load.unwrap_or(1.0).clamp(0.25, 1.0);
        let per_node = self.served_rps / (active as f64 * busy);
        if active == 0 || !per_node.is_finite() || per_node <= 0.0 {
            return usize::MAX;
        }
        (in_use * (1.0 + TOLERANCE) / per_node).ceil() as usize
    }
}

/// Turns the [`Demand`] totals into per-interval [`SiteQos`].
#[derive(Debug, Clone)]
pub struct QosAccount {
    guarantees: Vec<f64>,
    last: Option<(Instant, Vec<(u64, u64)>)>,
    sites: Vec<SiteQos>,
}

impl QosAccount {
    /// An account for sites with these guarantees (this proxy's shares).
    pub fn new(guarantees: Vec<f64>) -> Self {
        let sites = guarantees
            .iter()
            .map(|g| SiteQos {
                guarantee_rps: *g,
                ..SiteQos::default()
            })
            .collect();
        QosAccount {
            guarantees,
            last: None,
            sites,
        }
    }

    /// Closes the interval since the last sample with the current `totals`
    /// (by site index). The first sample only starts the first interval; an
    /// empty interval (two samples at the same instant) changes nothing.
    pub fn sample(&mut self, totals: &[(u64, u64)], now: Instant) -> &[SiteQos] {
        if let Some((at, prev)) = &self.last {
            let secs = now.saturating_duration_since(*at).as_secs_f64();
            if secs <= 0.0 {
                return &self.sites;
            }
            for (s, q) in self.sites.iter_mut().enumerate() {
                let (o0, s0) = prev.get(s).copied().unwrap_or_default();
                let (o1, s1) = totals.get(s).copied().unwrap_or((o0, s0));
                q.offered_rps = o1.saturating_sub(o0) as f64 / secs;
                q.served_rps = s1.saturating_sub(s0) as f64 / secs;
                let g = self.guarantees.get(s).copied().unwrap_or(0.0);
                q.kept = (g > 0.0 && q.offered_rps >= g)
                    .then_some(q.served_rps >= g * (1.0 - TOLERANCE));
                if let Some(k) = q.kept {
                    q.counted += 1;
                    q.kept_intervals += u64::from(k);
                }
            }
        }
        self.last = Some((now, totals.to_vec()));
        &self.sites
    }

    /// The last interval's figures, by site index.
    pub fn sites(&self) -> &[SiteQos] {
        &self.sites
    }

    /// Exports the last interval as Prometheus metrics, `names` by site
    /// index.
    pub fn export(&self, names: &[String]) {
        for (q, name) in self.sites.iter().zip(names) {
            let l = || ("site", name.clone());
            metrics::gauge!(OFFERED, &[l()]).set(q.offered_rps);
            metrics::gauge!(SERVED, &[l()]).set(q.served_rps);
            metrics::gauge!(GUARANTEE, &[l()]).set(q.guarantee_rps);
            if let Some(k) = q.kept {
                let kept = if k { "true" } else { "false" };
                metrics::counter!(INTERVALS, "site" => name.clone(), "kept" => kept).increment(1);
            }
            if let Some(p) = q.meeting_percent() {
                metrics::gauge!(MEETING, &[l()]).set(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: Duration = Duration::from_millis(200);

    /// Feeds one interval of `offered` arrivals and `served` good answers
    /// (plus `failed` 5xx) for site 0, S long, and samples.
    async fn interval(d: &Demand, a: &mut QosAccount, offered: u64, served: u64) -> SiteQos {
        let site = d.site("gold").expect("site");
        for i in 0..offered {
            site.arrived();
            site.answered(i < served);
        }
        tokio::time::sleep(S).await;
        a.sample(&d.totals(), Instant::now())[0]
    }

    #[tokio::test(start_paused = true)]
    async fn rates_verdicts_and_the_meeting_percentage() {
        let d = Demand::new(["gold".to_string(), "bronze".to_string()]);
        // Guarantee 99 rps: about 20 requests per 200 ms interval.
        let mut a = QosAccount::new(vec![99.0, 0.0]);
        assert_eq!(a.sample(&d.totals(), Instant::now())[0].kept, None);

        let q = interval(&d, &mut a, 30, 30).await;
        assert_eq!((q.offered_rps, q.served_rps), (150.0, 150.0));
        assert_eq!(q.kept, Some(true));
        // Demand over the guarantee, served under it: missed, and short.
        let q = interval(&d, &mut a, 40, 10).await;
        assert_eq!((q.offered_rps, q.served_rps), (200.0, 50.0));
        assert_eq!(q.kept, Some(false));
        assert!(q.short());
        // Demand under the guarantee: the interval does not count, even if
        // little of it is served (it is still short of what it asked for).
        let q = interval(&d, &mut a, 10, 2).await;
        assert_eq!(q.kept, None);
        assert!(q.short());
        // Within the tolerance of the guarantee (95 >= 0.95 * 99): kept.
        let q = interval(&d, &mut a, 25, 19).await;
        assert_eq!((q.served_rps, q.kept), (95.0, Some(true)));
        assert!(!q.short());
        assert_eq!((q.counted, q.kept_intervals), (3, 2));
        let p = q.meeting_percent().expect("counted");
        assert!((p - 200.0 / 3.0).abs() < 1e-9, "{p}");
        // A best-effort site never counts and is never short.
        let b = a.sites()[1];
        assert_eq!((b.kept, b.counted, b.short()), (None, 0, false));
        assert_eq!(b.meeting_percent(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn rates_are_per_second_of_the_real_interval() {
        let d = Demand::new(["gold".to_string()]);
        let mut a = QosAccount::new(vec![10.0]);
        a.sample(&d.totals(), Instant::now());
        let site = d.site("gold").expect("site");
        for _ in 0..50 {
            site.arrived();
            site.answered(true);
        }
        // A late round (2 s instead of S): 25 rps, not 250.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let q = a.sample(&d.totals(), Instant::now())[0];
        assert_eq!((q.offered_rps, q.served_rps), (25.0, 25.0));
        // A second sample at the same instant changes nothing.
        let again = a.sample(&d.totals(), Instant::now())[0];
        assert_eq!(again, q);
        assert!(d.site("unknown").is_none());
    }

    #[test]
    fn nodes_needed_from_served_per_active_node() {
        let q = |offered: f64, served: f64| SiteQos {
            offered_rps: offered,
            served_rps: served,
            guarantee_rps: 400.0,
            ..SiteQos::default()
        };
        // 4 fully busy nodes serve 400 rps: 100 per node, 400 need 5 with
        // headroom (420 / 100).
        assert_eq!(q(900.0, 400.0).nodes_needed(4, Some(1.2)), 5);
        // Half busy: each could serve 200, so the 300 rps in use need 2.
        assert_eq!(q(300.0, 300.0).nodes_needed(3, Some(0.5)), 2);
        // Nearly idle: capacity is extrapolated 4x at most.
        assert_eq!(q(40.0, 40.0).nodes_needed(4, Some(0.01)), 2);
        // No demand, or best effort: nothing needed for the guarantee.
        assert_eq!(q(0.0, 0.0).nodes_needed(4, Some(0.0)), 0);
        let be = SiteQos {
            offered_rps: 500.0,
            served_rps: 500.0,
            ..SiteQos::default()
        };
        assert_eq!(be.nodes_needed(4, Some(1.0)), 0);
        // Demand but nothing served, or no active node: cannot estimate.
        assert_eq!(q(100.0, 0.0).nodes_needed(2, Some(1.0)), usize::MAX);
        assert_eq!(q(100.0, 50.0).nodes_needed(0, None), usize::MAX);
    }
}
