use super::*;

fn sample(busy: u64, capacity: u64, queue: u64) -> LoadSample {
    LoadSample {
        app_busy: busy,
        app_capacity: capacity,
        app_queue_len: queue,
        ..LoadSample::default()
    }
}

#[test]
fn counts_dispatches_after_the_block_only() {
    let d = Dispatches::default();
    assert_eq!(d.since(0), 0, "nothing recorded");
    for t in [100, 200, 300, 400] {
        d.record(t);
    }
    assert_eq!(d.since(50), 4);
    assert_eq!(d.since(250), 2);
    assert_eq!(d.since(400), 0, "a dispatch at updated_at is not after it");
    assert_eq!(d.since(1000), 0);
}

#[test]
fn the_ring_bounds_the_count() {
    let d = Dispatches::default();
    for t in 1..=(RING as u64 + 10) {
        d.record(t * 10);
    }
    assert_eq!(d.since(0), RING);
    // The first 10 were overwritten: the ring holds 110..=420, of which
    // RING - 1 are after 110.
    assert_eq!(d.since(110), RING - 1);
}

#[test]
fn in_flight_caps_what_counts() {
    let d = Dispatches::default();
    for t in [10, 20, 30] {
        d.record(t);
    }
    assert_eq!(unseen(&d, 5, 2), 2, "one of the three was answered");
    assert_eq!(unseen(&d, 5, 9), 3);
    assert_eq!(unseen(&d, 25, 9), 1);
    assert_eq!(unseen(&d, 5, 0), 0);
}

#[test]
fn the_scan_stops_at_the_bound() {
    let d = Dispatches::default();
    // Nothing recorded: no count whatever the bound.
    assert_eq!(d.since_at_most(0, 5), 0);
    for t in 1..=(RING as u64 + 10) {
        d.record(t * 10);
    }
    // Equal to the unbounded count, capped, for every bound and block age.
    for after in [0, 105, 110, 300, 415, 420, 1000] {
        for most in [0, 1, 2, 7, RING - 1, RING, RING + 5, usize::MAX] {
            assert_eq!(
                d.since_at_most(after, most),
                d.since(after).min(most),
                "after {after}, at most {most}"
            );
        }
    }
    assert_eq!(d.since_at_most(0, 3), 3);
    assert_eq!(d.since_at_most(415, 3), 1);
}

#[test]
fn unseen_requests_fill_free_workers_then_the_queue() {
    assert_eq!(with_unseen(&sample(2, 4, 0), 0), sample(2, 4, 0));
    assert_eq!(with_unseen(&sample(2, 4, 0), 1), sample(3, 4, 0));
    assert_eq!(with_unseen(&sample(2, 4, 0), 3), sample(4, 4, 1));
    assert_eq!(with_unseen(&sample(4, 4, 5), 2), sample(4, 4, 7));
    // A co-tenant's held slots can make busy exceed capacity: none free.
    assert_eq!(with_unseen(&sample(5, 4, 0), 1), sample(5, 4, 1));
    // Without a capacity every request is busy.
    assert_eq!(with_unseen(&sample(3, 0, 1), 2), sample(5, 0, 1));
}
