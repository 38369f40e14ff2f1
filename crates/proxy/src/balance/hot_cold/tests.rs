//! The hot-cold lexicographic rule and its RIF quantile.

use super::*;

fn p(rif: f64, latency_ms: f64) -> Probe {
    Probe {
        rif,
        latency_ns: latency_ms * 1e6,
    }
}

#[test]
fn the_coldest_fast_one_wins() {
    // Threshold 5: the first two are cold; the faster of them wins even
    // though the hot one is faster still.
    let probes = [p(4.0, 9.0), p(1.0, 3.0), p(8.0, 1.0)];
    assert_eq!(choose(&probes, 5.0), Some(1));
}

#[test]
fn when_all_are_hot_the_lowest_rif_wins() {
    let probes = [p(9.0, 1.0), p(7.0, 50.0), p(12.0, 2.0)];
    assert_eq!(choose(&probes, 5.0), Some(1));
    assert_eq!(choose(&[], 5.0), None);
}

#[test]
fn the_threshold_is_the_84th_percentile_of_recent_rifs() {
    let h = RifHistory::default();
    assert_eq!(h.threshold(), f64::INFINITY, "no data: nothing is hot");
    for v in 1..=64 {
        h.record(f64::from(v));
    }
    // ceil(64 × 0.84) = 54th smallest.
    assert_eq!(h.threshold(), 54.0);
    // The ring forgets: 64 observations of 2 later, 2 is the threshold.
    for _ in 0..64 {
        h.record(2.0);
    }
    assert_eq!(h.threshold(), 2.0);
}
