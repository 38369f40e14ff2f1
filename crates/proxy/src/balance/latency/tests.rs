//! The peak-sensitive latency estimate.

use super::*;

const MS: u64 = 1_000_000;

#[test]
fn a_peak_is_taken_at_once_and_decays_over_tau() {
    let e = PeakEwma::default();
    let t0 = e.stamp.load(Ordering::Relaxed);
    e.observe_at(Duration::from_millis(50), t0 + MS);
    assert_eq!(e.decayed(t0 + MS), 50.0 * MS as f64);
    // Fast answers pull it down over about τ, not at once.
    e.observe_at(Duration::from_millis(2), t0 + 2 * MS);
    assert!(e.decayed(t0 + 2 * MS) > 49.0 * MS as f64);
    let later = t0 + 2 * MS + DECAY.as_nanos() as u64;
    e.observe_at(Duration::from_millis(2), later);
    let v = e.decayed(later);
    assert!(v < 20.0 * MS as f64 && v > 2.0 * MS as f64, "{v}");
}

#[test]
fn an_unmeasured_node_sits_at_the_default() {
    let e = PeakEwma::default();
    let t0 = e.stamp.load(Ordering::Relaxed);
    assert_eq!(e.decayed(t0), DEFAULT_NS);
    // A long quiet spell forgets a past peak.
    e.observe_at(Duration::from_secs(1), t0);
    let v = e.decayed(t0 + 20 * DECAY.as_nanos() as u64);
    assert!((v - DEFAULT_NS).abs() < DEFAULT_NS * 1e-3, "{v}");
}
