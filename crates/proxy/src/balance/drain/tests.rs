//! The expected-wait index and the drain-rate estimate of `shortest-wait`.

use super::*;

const W: Duration = Duration::from_millis(50);
/// Some unix time, so `updated_at` is not near zero.
const T0: u64 = 1_700_000_000_000_000_000;

fn sample(busy: u64, queue: u64, capacity: u64, total: u64) -> LoadSample {
    LoadSample {
        app_busy: busy,
        app_queue_len: queue,
        app_capacity: capacity,
        requests_total: total,
        ..Default::default()
    }
}

fn block(at_ms: f64, s: LoadSample) -> LoadBlock {
    LoadBlock {
        node_id: 1,
        seq: 2,
        updated_at_ns: (i128::from(T0) + (at_ms * 1e6) as i128) as u64,
        sample: s,
    }
}

/// Reads every `step_ms` for `ms` of a node completing `rate`/s with
/// `busy`/`queue` of `capacity`; returns the last estimate.
fn feed(
    d: &mut DrainRate,
    from_ms: f64,
    ms: f64,
    step_ms: f64,
    rate: f64,
    (busy, queue, capacity): (u64, u64, u64),
    total0: u64,
) -> (Option<f64>, u64) {
    let mut r = None;
    let mut t = 0.0;
    let mut total = total0;
    while t <= ms {
        total = total0 + (rate * t / 1e3) as u64;
        r = d.observe(&block(from_ms + t, sample(busy, queue, capacity, total)), W);
        t += step_ms;
    }
    (r, total)
}

#[test]
fn a_saturated_node_is_measured_at_its_drain_rate() {
    let mut d = DrainRate::default();
    // 1 of 4 workers left to the app (a co-tenant holds 3): 100/s.
    let (r, _) = feed(&mut d, 0.0, 200.0, 7.0, 100.0, (4, 5, 4), 1000);
    let r = r.expect("an estimate after 200 ms of saturated reads");
    assert!((80.0..=120.0).contains(&r), "{r}");
    let mut d = DrainRate::default();
    let (r, _) = feed(&mut d, 0.0, 200.0, 7.0, 400.0, (4, 5, 4), 1000);
    let r = r.unwrap();
    assert!((360.0..=440.0).contains(&r), "{r}");
}

#[test]
fn no_estimate_from_one_read_or_a_short_stretch() {
    let mut d = DrainRate::default();
    assert_eq!(d.observe(&block(0.0, sample(4, 2, 4, 10)), W), None);
    // 5 ms folded: less than a fifth of the 50 ms window.
    assert_eq!(d.observe(&block(5.0, sample(4, 2, 4, 12)), W), None);
    assert!(d.observe(&block(12.0, sample(4, 2, 4, 14)), W).is_some());
}

#[test]
fn an_idle_node_does_not_lower_the_estimate() {
    let mut d = DrainRate::default();
    let (r, total) = feed(&mut d, 0.0, 200.0, 5.0, 400.0, (4, 3, 4), 0);
    let before = r.unwrap();
    // Asked little (10/s) with free workers: not its capacity, not folded.
    let (r, _) = feed(&mut d, 205.0, 20.0, 5.0, 10.0, (1, 0, 4), total);
    let after = r.unwrap();
    assert!((after - before).abs() < 1e-9, "{before} -> {after}");
}

#[test]
fn an_unsaturated_node_faster_than_the_estimate_raises_it() {
    let mut d = DrainRate::default();
    let (r, total) = feed(&mut d, 0.0, 200.0, 5.0, 100.0, (4, 3, 4), 0);
    let slow = r.unwrap();
    // The co-tenant left: 3 of 4 busy, completing 300/s.
    let (r, _) = feed(&mut d, 205.0, 100.0, 5.0, 300.0, (3, 0, 4), total);
    let fast = r.unwrap();
    assert!(fast > 2.0 * slow, "{slow} -> {fast}");
}

#[test]
fn the_estimate_follows_a_co_tenant_within_a_few_windows() {
    let mut d = DrainRate::default();
    let (_, total) = feed(&mut d, 0.0, 300.0, 5.0, 400.0, (4, 6, 4), 0);
    // A co-tenant takes 3 of the 4 workers: 100/s, queue still there.
    let (r, _) = feed(&mut d, 305.0, 150.0, 5.0, 100.0, (4, 6, 4), total);
    let r = r.unwrap();
    assert!(r < 150.0, "{r}");
}

#[test]
fn old_data_decays_into_no_estimate() {
    let mut d = DrainRate::default();
    let (r, total) = feed(&mut d, 0.0, 100.0, 5.0, 100.0, (4, 2, 4), 0);
    assert!(r.is_some());
    // A second without a folded interval (idle, asked little): the old
    // measurement no longer speaks for the node.
    let r = d.observe(&block(1100.0, sample(0, 0, 4, total + 3)), W);
    assert_eq!(r, None);
    assert_eq!(d.estimate(T0 + 1_100_000_000, W), None);
}

#[test]
fn a_counter_that_goes_back_starts_over() {
    let mut d = DrainRate::default();
    let (r, _) = feed(&mut d, 0.0, 100.0, 5.0, 200.0, (4, 2, 4), 1_000_000);
    assert!(r.is_some());
    // The app restarted: its counter is back near zero.
    assert_eq!(d.observe(&block(105.0, sample(4, 2, 4, 3)), W), None);
    // And is measured again from there.
    let (r, _) = feed(&mut d, 110.0, 100.0, 5.0, 200.0, (4, 2, 4), 4);
    let r = r.unwrap();
    assert!((160.0..=240.0).contains(&r), "{r}");
}

#[test]
fn a_counter_at_the_top_of_u64_that_wraps_starts_over() {
    let mut d = DrainRate::default();
    let top = u64::MAX - 5;
    d.observe(&block(0.0, sample(4, 1, 4, top)), W);
    d.observe(&block(10.0, sample(4, 1, 4, top + 2)), W);
    assert!(d
        .observe(&block(20.0, sample(4, 1, 4, u64::MAX)), W)
        .is_some());
    assert_eq!(d.observe(&block(30.0, sample(4, 1, 4, 1)), W), None);
}

#[test]
fn the_same_block_or_an_older_one_changes_nothing() {
    let mut d = DrainRate::default();
    let (_, total) = feed(&mut d, 0.0, 100.0, 5.0, 200.0, (4, 2, 4), 0);
    let before = d.clone();
    let last = block(100.0, sample(4, 2, 4, total));
    d.observe(&last, W);
    assert_eq!(d, before);
    // A slower concurrent reader's block from 3 ms earlier.
    d.observe(&block(97.0, sample(4, 2, 4, total - 1)), W);
    assert_eq!(d, before);
    // A clock that jumped back far: start over.
    assert_eq!(
        d.observe(&block(-10_000.0, sample(4, 2, 4, total)), W),
        None
    );
}

#[test]
fn a_saturated_node_that_completed_nothing_has_a_long_finite_wait() {
    let mut d = DrainRate::default();
    let (r, _) = feed(&mut d, 0.0, 100.0, 5.0, 0.0, (4, 8, 4), 50);
    let r = r.unwrap();
    assert!(r > 0.0 && r.is_finite());
    let w = expected_wait(&sample(4, 8, 4, 50), Some(r)).unwrap();
    assert!(w.is_finite() && w > 0.5, "{w}");
}

#[test]
fn a_free_worker_means_no_wait_whatever_the_rate() {
    assert_eq!(waiting(&sample(3, 0, 4, 0)), 0);
    assert_eq!(expected_wait(&sample(3, 0, 4, 0), None), Some(0.0));
    assert_eq!(expected_wait(&sample(0, 0, 4, 0), Some(0.0)), Some(0.0));
}

#[test]
fn the_wait_divides_the_requests_ahead_by_the_drain_rate() {
    // Both show 4 busy and 2 queued: the app index ties them. The one whose
    // co-tenant holds 3 workers drains at 100/s, the other at 400/s.
    let s = sample(4, 2, 4, 0);
    assert_eq!(waiting(&s), 3);
    let slow = expected_wait(&s, Some(100.0)).unwrap();
    let fast = expected_wait(&s, Some(400.0)).unwrap();
    assert!((slow - 0.03).abs() < 1e-12, "{slow}");
    assert!((fast - 0.0075).abs() < 1e-12, "{fast}");
    // Without a capacity every request ahead counts.
    assert_eq!(waiting(&sample(2, 1, 0, 0)), 4);
}

#[test]
fn without_a_measured_rate_capacity_over_latency_is_assumed() {
    let mut s = sample(8, 2, 8, 0);
    s.app_latency_us = 10_000; // 8 workers of 10 ms: 800/s
    assert_eq!(nominal_rate(&s), Some(800.0));
    let w = expected_wait(&s, None).unwrap();
    assert!((w - 3.0 / 800.0).abs() < 1e-12, "{w}");
    // A rate that is zero, negative or not finite is no rate.
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(expected_wait(&s, Some(bad)), Some(w));
    }
    // Neither a rate nor latency and capacity: unknown, not infinite.
    assert_eq!(nominal_rate(&sample(8, 2, 0, 0)), None);
    assert_eq!(expected_wait(&sample(8, 2, 8, 0), None), None);
    assert_eq!(score(&sample(8, 2, 8, 0), None), None);
}

#[test]
fn with_no_wait_the_node_with_more_free_workers_scores_lower() {
    let small = score(&sample(1, 0, 2, 0), None).unwrap();
    let large = score(&sample(2, 0, 8, 0), None).unwrap();
    assert!(large < small, "{large} vs {small}");
    // The tie-break never outweighs a real wait, even a short one: one
    // request ahead on a node draining 100,000/s (10 µs) against the
    // fullest node with a free worker.
    let waits = score(&sample(8, 0, 8, 0), Some(1e5)).unwrap();
    let free = score(&sample(7, 0, 8, 0), None).unwrap();
    assert!(waits > free, "{waits} vs {free}");
}

#[test]
fn drain_keeps_the_last_estimate_for_concurrent_readers() {
    let d = Drain::new();
    assert_eq!(d.last(), None);
    let mut total = 0;
    let mut r = None;
    for k in 0..40u64 {
        total += 1;
        r = d.observe(&block(k as f64 * 5.0, sample(4, 1, 4, total)), W);
    }
    let r = r.unwrap();
    assert_eq!(d.last(), Some(r));
    let _held = d.state.lock().unwrap();
    // Locked by another decision: the last estimate, no wait.
    assert_eq!(
        d.observe(&block(500.0, sample(4, 1, 4, total + 9)), W),
        Some(r)
    );
}

#[test]
fn a_node_is_nearly_full_when_its_queue_has_no_room_for_this_request_and_the_unseen_ones() {
    let limited = |busy, queue| LoadSample {
        app_queue_limit: 64,
        ..sample(busy, queue, 4, 0)
    };
    // No queue limit published: never full, however long the queue.
    assert!(!nearly_full(&sample(4, 500, 4, 0), Some(400.0), 0.002));
    // A free worker: the request does not queue, whatever the room.
    let free = LoadSample {
        app_queue_limit: 1,
        ..sample(3, 0, 4, 0)
    };
    assert!(!nearly_full(&free, Some(400.0), 0.01));
    // The queue is full.
    assert!(nearly_full(&limited(4, 64), Some(400.0), 0.0));
    assert!(nearly_full(&limited(4, 70), None, 0.0));
    // One place left: enough when the block is this instant's...
    assert!(!nearly_full(&limited(4, 63), Some(400.0), 0.0));
    assert!(!nearly_full(&limited(4, 63), None, 0.005));
    // ... not when the node may have taken 400/s × 1 ms = 0.4 since.
    assert!(nearly_full(&limited(4, 63), Some(400.0), 0.001));
    // 4 places left, 400/s × 5 ms = 2 taken since: room.
    assert!(!nearly_full(&limited(4, 60), Some(400.0), 0.005));
    assert!(nearly_full(&limited(4, 60), Some(400.0), 0.008));
    // A nonsensical rate or age counts no unseen requests.
    assert!(!nearly_full(&limited(4, 63), Some(f64::NAN), 0.005));
    assert!(!nearly_full(&limited(4, 63), Some(400.0), -1.0));
}
