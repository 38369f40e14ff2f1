use std::time::{Duration, Instant};

use super::*;
use crate::report::{Outcome, Recorder};

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
    // The third (100 after 99) is a burst edge, accounted apart.
    assert_eq!((q.counted, q.met), (3, 1));
    assert_eq!((q.edges, q.edges_met), (1, 1));
    assert_eq!(q.percent(), Some(100.0 / 3.0));
}

#[test]
fn a_burst_edge_is_accounted_apart_in_every_interval_it_begins() {
    // Demand from the first interval (not an edge: the load starts with
    // it), a gap, then two bursts that begin with a missed interval.
    let rep = report(&[
        (200, 200),
        (0, 0),
        (150, 40),
        (200, 200),
        (50, 50),
        (120, 0),
        (200, 90),
    ]);
    let q = meeting(&rep, "a", 100.0);
    assert_eq!((q.counted, q.met), (3, 2));
    assert_eq!((q.edges, q.edges_met), (2, 0));
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
