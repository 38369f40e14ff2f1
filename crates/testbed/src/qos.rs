//! QoS-meeting accounting from the replay client's per-interval figures
//! (seed 003 §5.3, Fig. 17/19).
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
//!
//! **Burst edges**. An interval whose demand reached G while the
//! interval before it did not is where the site's burst began, somewhere
//! inside it: its offered rate averages the quiet part in, and the requests
//! that arrived in its last tens of milliseconds end after it, so its served
//! rate trails its offered one in every mode, over-provisioning included
//! (experiment 3, L = 16K: 924/s offered, 616/s served rigid, 824/s
//! over-provisioned, 368/s reconfigured, at 900/s). Such an interval is not
//! in `counted`: it is accounted apart (`edges`, `edges_met`), the same way
//! for every mode, and reported beside the percentage. A run's first
//! interval is not an edge (the load starts with it).

use serde::Serialize;

use rdmalb_proxy::qos::guarantee::verdict;

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
    /// Burst edges: intervals whose demand reached the guarantee while the
    /// one before did not (not in `counted`; see the module doc).
    pub edges: u64,
    /// Of those, edges whose served rate reached the guarantee.
    pub edges_met: u64,
}

impl QosMeeting {
    /// met / counted in percent; `None` when no interval counted.
    pub fn percent(&self) -> Option<f64> {
        (self.counted > 0).then(|| 100.0 * self.met as f64 / self.counted as f64)
    }
}

/// The accounting of `site` against `guarantee` (requests/s) over
/// `report`'s intervals, the last (partial) one excluded and burst edges
/// apart (see the module doc). A site the report does not have counts no
/// interval.
pub fn meeting(report: &Report, site: &str, guarantee: f64) -> QosMeeting {
    let rows: Vec<_> = report.intervals.iter().filter(|r| r.site == site).collect();
    let full = rows.len().saturating_sub(1);
    let mut q = QosMeeting {
        site: site.to_string(),
        guarantee,
        counted: 0,
        met: 0,
        edges: 0,
        edges_met: 0,
    };
    let mut before: Option<f64> = None;
    for r in &rows[..full] {
        // The client's rates are the truth: no tolerance.
        if let Some(kept) = verdict(guarantee, r.offered_per_s, r.served_per_s, 0.0) {
            if before.is_some_and(|b| b < guarantee) {
                q.edges += 1;
                q.edges_met += u64::from(kept);
            } else {
                q.counted += 1;
                q.met += u64::from(kept);
            }
        }
        before = Some(r.offered_per_s);
    }
    q
}

#[cfg(test)]
mod tests;
