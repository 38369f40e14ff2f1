//! The node's traffic counters and its one-second rate.

use super::*;

#[test]
fn the_rate_is_measured_between_reads_a_second_apart() {
    let r = Rate::default();
    let t0 = r.last.lock().unwrap().0;
    assert_eq!(
        r.at(50, t0 + Duration::from_millis(500)),
        0,
        "less than a period: the last figure"
    );
    assert_eq!(r.at(300, t0 + Duration::from_secs(2)), 150);
    assert_eq!(r.at(400, t0 + Duration::from_millis(2500)), 150);
    assert_eq!(r.at(400, t0 + Duration::from_secs(4)), 50);
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
