//! QoS-meeting accounting from the replay client's per-interval figures
//! (seed 003 §5.3, Fig. 17/19; issue 7).
//!
//! A site with a throughput guarantee G (requests/s) *meets* it in an
//! interval when its served rate is at least G. Only intervals in which the
//! site's demand (requests the client offered, by start time) was at least
//! G count: a site that asks for less than its guarantee cannot be held to
//! it. The QoS-meeting percentage is met / counted over those intervals.
//!
//! The last interval of a run is usually partial and its rates are noisy,
//! and requests still in flight at the deadline are not counted as served,
//! so it is left out.

use serde::Serialize;

use super::report::Report;

/// One site's QoS accounting over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QosMeeting {
    pub site: String,
    /// The guarantee, requests/s.
    pub guarantee: f64,
    /// Intervals whose demand reached the guarantee.
    pub counted: u64,
    /// Of those, intervals whose served rate reached it too.
    pub met: u64,
}

impl QosMeeting {
    /// met / counted in percent; `None` when no interval counted.
    pub fn percent(&self) -> Option<f64> {
        (self.counted > 0).then(|| 100.0 * self.met as f64 / self.counted as f64)
    }
}

/// The accounting of `site` against `guarantee` (requests/s) over
/// `report`'s intervals, the last (partial) one excluded. A site the report
/// does not have counts no interval.
pub fn meeting(report: &Report, site: &str, guarantee: f64) -> QosMeeting {
    let rows: Vec<_> = report.intervals.iter().filter(|r| r.site == site).collect();
    let full = rows.len().saturating_sub(1);
    let mut q = QosMeeting {
        site: site.to_string(),
        guarantee,
        counted: 0,
        met: 0,
    };
    for r in &rows[..full] {
        if r.offered_per_s >= guarantee {
            q.counted += 1;
            if r.served_per_s >= guarantee {
                q.met += 1;
            }
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::testbed::report::{Outcome, Recorder};

    /// A report of one site "a" over `per_interval.len()` intervals of 1 s
    /// plus a trailing partial one: (offered, served) per interval.
    fn report(per_interval: &[(u64, u64)]) -> Report {
        let t0 = Instant::now();
        let r = Recorder::new(vec!["a".into(), "b".into()], Duration::from_secs(1), t0);
        for (i, &(offered, served)) in per_interval.iter().enumerate() {
            let at = t0 + Duration::from_millis(1000 * i as u64 + 10);
            for _ in 0..offered {
                r.offer(0, at);
            }
            for k in 0..offered {
                let outcome = if k < served {
                    Outcome::Status(200)
                } else {
                    Outcome::Status(503)
                };
                r.record(0, at, Duration::from_millis(1), outcome);
            }
        }
        // A partial last interval far above the guarantee: never counted.
        let last = t0 + Duration::from_millis(1000 * per_interval.len() as u64 + 10);
        for _ in 0..1000 {
            r.offer(0, last);
        }
        r.finish(Duration::from_millis(
            1000 * per_interval.len() as u64 + 500,
        ))
    }

    #[test]
    fn counts_only_intervals_whose_demand_reaches_the_guarantee() {
        // Demand below 100 (first two) does not count, whatever was served.
        let rep = report(&[
            (50, 0),
            (99, 99),
            (100, 100),
            (150, 120),
            (200, 90),
            (300, 0),
        ]);
        let q = meeting(&rep, "a", 100.0);
        assert_eq!((q.counted, q.met), (4, 2));
        assert_eq!(q.percent(), Some(50.0));
    }

    #[test]
    fn served_exactly_the_guarantee_meets_it() {
        let q = meeting(&report(&[(100, 100)]), "a", 100.0);
        assert_eq!((q.counted, q.met), (1, 1));
        assert_eq!(q.percent(), Some(100.0));
    }

    #[test]
    fn no_demand_means_no_percentage() {
        let rep = report(&[(10, 10), (20, 20)]);
        assert_eq!(meeting(&rep, "a", 100.0).percent(), None);
        // A site without traffic, and a site the report does not know.
        assert_eq!(meeting(&rep, "b", 1.0).counted, 0);
        assert_eq!(meeting(&rep, "zzz", 1.0).counted, 0);
    }

    #[test]
    fn the_partial_last_interval_is_left_out() {
        // Only the partial interval (1000 offered, none served) has demand.
        let q = meeting(&report(&[]), "a", 100.0);
        assert_eq!(q.counted, 0);
    }
}
