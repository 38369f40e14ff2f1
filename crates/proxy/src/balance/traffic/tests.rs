//! The node's traffic counters and its one-second rate.

use super::*;

#[test]
fn the_rate_is_the_count_of_the_last_complete_second() {
    let r = Rate::default();
    r.roll(100);
    for _ in 0..7 {
        r.current.fetch_add(1, Ordering::Relaxed);
    }
    r.roll(101);
    assert_eq!(r.previous.load(Ordering::Relaxed), 7);
    r.current.fetch_add(1, Ordering::Relaxed);
    // A gap of more than a second: nothing happened in the last one.
    r.roll(103);
    assert_eq!(r.previous.load(Ordering::Relaxed), 0);
}

#[test]
fn snapshots_sum_the_classes_and_keep_the_peak() {
    let t = Traffic::default();
    t.started(3);
    t.started(1);
    t.finished(1, 100);
    t.finished(4, 10);
    t.finished(5, 0);
    t.upstream_error(0);
    t.upstream_error(2);
    let s = t.snapshot();
    assert_eq!(s.requests_total, 3);
    assert_eq!(s.responses, [0, 1, 0, 0, 1, 1]);
    assert_eq!(s.bytes_out_total, 110);
    assert_eq!(s.inflight_max, 3);
    assert_eq!(s.upstream_errors, [1, 0, 1, 0]);
}
