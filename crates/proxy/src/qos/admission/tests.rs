//! Admission queue: limit, VirtualClock and FIFO order, shares under
//! backlog, the best-effort floor, queue bounds, timeouts, cancellation and
//! reloads. Time is paused: timeouts elapse instantly and exactly.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Config;

fn config(qos: &str, sites: &[(&str, f64)]) -> Config {
    let mut text = format!(
        "[timeouts]\nqueue = \"2s\"\n\n[qos]\n{qos}\n\n[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n\n"
    );
    for (name, guarantee) in sites {
        text.push_str(&format!(
            "[[site]]\nname = \"{name}\"\nhosts = [\"{name}.test\"]\nguarantee = {guarantee}\n\n"
        ));
    }
    crate::fixtures::config(&text)
}

/// Lets spawned tasks run until they block.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

type Granted = tokio::sync::mpsc::UnboundedReceiver<(usize, Permit)>;

/// Queues one request per entry of `slots`, in that order (each queued
/// before the next arrives); each reports its slot and permit when granted.
async fn enqueue(
    a: &Arc<Admission>,
    slots: &[usize],
) -> (Granted, Vec<tokio::task::JoinHandle<Option<Refused>>>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for &s in slots {
        let a = Arc::clone(a);
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            match a.admit(s).await {
                Ok(p) => {
                    let _ = tx.send((s, p));
                    None
                }
                Err(e) => Some(e),
            }
        }));
        settle().await;
    }
    (rx, tasks)
}

/// Frees the held slot, then takes `n` grants one at a time (each permit
/// dropped before the next grant); returns the slots in grant order.
async fn grants(held: Permit, rx: &mut Granted, n: usize) -> Vec<usize> {
    drop(held);
    let mut order = Vec::new();
    for _ in 0..n {
        let (s, p) = rx.recv().await.expect("a grant");
        order.push(s);
        drop(p);
    }
    order
}

fn count(order: &[usize], slot: usize) -> usize {
    order.iter().filter(|&&s| s == slot).count()
}

#[tokio::test(start_paused = true)]
async fn without_a_limit_everything_is_admitted_at_once() {
    let (a, slots) = Admission::new(&config("", &[("a", 0.0)]));
    let mut permits = Vec::new();
    for _ in 0..100 {
        permits.push(a.admit(slots[0]).await.expect("admitted"));
    }
    assert!(permits.iter().all(|p| !p.holds_slot() && !p.was_queued()));
    assert_eq!((a.inflight(), a.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_limit_queues_and_a_release_hands_the_slot_on() {
    let (a, slots) = Admission::new(&config("max_inflight = 2", &[("a", 0.0)]));
    let first = a.admit(slots[0]).await.unwrap();
    let second = a.admit(slots[0]).await.unwrap();
    assert!(first.holds_slot() && !first.was_queued());
    assert_eq!(a.inflight(), 2);
    let (mut rx, _tasks) = enqueue(&a, &[slots[0]]).await;
    assert_eq!(a.queued(), 1);
    let status = a.status();
    assert_eq!(
        (status.max_inflight, status.inflight, status.dispatch),
        (2, 2, "virtualclock")
    );
    assert_eq!(status.queued.get("a"), Some(&1));
    assert!(rx.try_recv().is_err());
    drop(second);
    let (_, p) = rx.recv().await.unwrap();
    assert!(p.was_queued() && p.holds_slot());
    assert_eq!((a.inflight(), a.queued()), (2, 0));
    drop((first, p));
    assert_eq!(a.inflight(), 0);
}

#[tokio::test(start_paused = true)]
async fn virtualclock_serves_a_guaranteed_site_before_earlier_best_effort_arrivals() {
    // gold: 100/s (Vtick 10 ms); bronze: the 1/s floor (Vtick 1 s). Bronze
    // queued first; VirtualClock grants by tag, FIFO by arrival.
    for (dispatch, want_gold_first) in [("virtualclock", true), ("fifo", false)] {
        let cfg = config(
            &format!("max_inflight = 1\nbest_effort_floor = 1.0\ndispatch = \"{dispatch}\""),
            &[("gold", 100.0), ("bronze", 0.0)],
        );
        let (a, slots) = Admission::new(&cfg);
        let (gold, bronze) = (slots[0], slots[1]);
        let held = a.admit(gold).await.unwrap();
        let (mut rx, _tasks) = enqueue(&a, &[bronze, bronze, bronze, gold, gold, gold]).await;
        let order = grants(held, &mut rx, 6).await;
        let want = if want_gold_first {
            vec![gold, gold, gold, bronze, bronze, bronze]
        } else {
            vec![bronze, bronze, bronze, gold, gold, gold]
        };
        assert_eq!(order, want, "{dispatch}");
    }
}

#[tokio::test(start_paused = true)]
async fn backlogged_sites_share_slots_in_proportion_to_their_guarantees() {
    let cfg = config("max_inflight = 1", &[("gold", 300.0), ("silver", 100.0)]);
    let (a, slots) = Admission::new(&cfg);
    let held = a.admit(slots[0]).await.unwrap();
    let arrivals: Vec<usize> = (0..200).flat_map(|_| [slots[0], slots[1]]).collect();
    let (mut rx, _tasks) = enqueue(&a, &arrivals).await;
    let order = grants(held, &mut rx, 200).await;
    // Equal demand, rates 3:1: 150 and 50 of 200 grants.
    assert_eq!(
        (count(&order, slots[0]), count(&order, slots[1])),
        (150, 50)
    );
    // And interleaved, not in blocks: every 4 grants hold one silver.
    for chunk in order.chunks(4) {
        assert_eq!(count(chunk, slots[1]), 1, "{order:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_best_effort_site_keeps_its_floor_share_against_a_busy_guaranteed_site() {
    let cfg = config(
        "max_inflight = 1\nbest_effort_floor = 10.0",
        &[("gold", 1000.0), ("bronze", 0.0)],
    );
    let (a, slots) = Admission::new(&cfg);
    let held = a.admit(slots[0]).await.unwrap();
    let arrivals: Vec<usize> = (0..300).flat_map(|_| [slots[0], slots[1]]).collect();
    let (mut rx, _tasks) = enqueue(&a, &arrivals).await;
    let order = grants(held, &mut rx, 303).await;
    // Rates 1000:10: bronze gets 1 slot in 101, never none.
    assert_eq!(count(&order, slots[1]), 3, "{order:?}");
    for chunk in order.chunks(101) {
        assert_eq!(count(chunk, slots[1]), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_site_that_becomes_busy_is_not_queued_behind_a_long_backlog() {
    let cfg = config("max_inflight = 1", &[("a", 100.0), ("b", 100.0)]);
    for (dispatch, within) in [("virtualclock", 2), ("fifo", 51)] {
        let mut c = cfg.clone();
        c.qos.dispatch = if dispatch == "fifo" {
            Dispatch::Fifo
        } else {
            Dispatch::VirtualClock
        };
        let (a, slots) = Admission::new(&c);
        let held = a.admit(slots[0]).await.unwrap();
        let (mut rx, _tasks) = enqueue(&a, &[slots[0]; 100]).await;
        // Site a has been served for a while...
        let order = grants(held, &mut rx, 49).await;
        assert!(order.iter().all(|&s| s == slots[0]));
        // ...holding one slot when site b's first request arrives.
        let (_, hold) = rx.recv().await.unwrap();
        let (mut rx_b, _tb) = enqueue(&a, &[slots[1]]).await;
        drop(hold);
        let mut waited = 0;
        loop {
            waited += 1;
            if let Ok((_, p)) = rx_b.try_recv() {
                drop(p);
                break;
            }
            let (_, p) = rx.recv().await.unwrap();
            drop(p);
            settle().await;
        }
        assert_eq!(waited, within, "{dispatch}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_full_site_queue_refuses_at_once_and_leaves_other_sites_alone() {
    let cfg = config("max_inflight = 1\nmax_queue = 2", &[("a", 0.0), ("b", 0.0)]);
    let (a, slots) = Admission::new(&cfg);
    let held = a.admit(slots[0]).await.unwrap();
    let (mut rx, _tasks) = enqueue(&a, &[slots[0], slots[0]]).await;
    assert_eq!(a.admit(slots[0]).await.unwrap_err(), Refused::QueueFull(2));
    let (mut rx_b, _tb) = enqueue(&a, &[slots[1]]).await;
    assert_eq!(a.queued(), 3);
    let order = grants(held, &mut rx, 1).await;
    assert_eq!(order, vec![slots[0]]);
    assert!(rx_b.recv().await.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_request_that_waits_too_long_is_refused_and_leaves_no_trace() {
    let (a, slots) = Admission::new(&config("max_inflight = 1", &[("a", 0.0)]));
    let held = a.admit(slots[0]).await.unwrap();
    let refused = a.admit(slots[0]).await.unwrap_err();
    assert_eq!(refused, Refused::Timeout(Duration::from_secs(2)));
    assert!(refused.to_string().contains("timeouts.queue"), "{refused}");
    assert_eq!((a.inflight(), a.queued()), (1, 0));
    drop(held);
    assert_eq!(a.inflight(), 0);
    let again = a.admit(slots[0]).await.unwrap();
    assert!(!again.was_queued());
}

#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_the_queue_gives_its_place_up() {
    let (a, slots) = Admission::new(&config("max_inflight = 1", &[("a", 0.0)]));
    let held = a.admit(slots[0]).await.unwrap();
    let (_rx, tasks) = enqueue(&a, &[slots[0]]).await;
    tasks[0].abort();
    settle().await;
    assert_eq!(a.queued(), 0);
    drop(held);
    assert_eq!(a.inflight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slot_granted_to_a_client_that_left_is_passed_on() {
    let (a, slots) = Admission::new(&config("max_inflight = 1", &[("a", 0.0)]));
    let held = a.admit(slots[0]).await.unwrap();
    let (_rx, tasks) = enqueue(&a, &[slots[0]]).await;
    // The grant is sent while the waiter is not running; it is then dropped
    // before it sees it.
    drop(held);
    tasks[0].abort();
    settle().await;
    assert_eq!((a.inflight(), a.queued()), (0, 0));
    let next = a.admit(slots[0]).await.unwrap();
    assert!(!next.was_queued());
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_queues_by_site_name_and_applies_a_new_limit() {
    let cfg = config("max_inflight = 1", &[("a", 0.0), ("b", 0.0)]);
    let (a, slots) = Admission::new(&cfg);
    let held = a.admit(slots[0]).await.unwrap();
    let (mut rx, _tasks) = enqueue(&a, &[slots[1], slots[1]]).await;
    // Reordered sites plus a new one; a higher limit.
    let reloaded = config("max_inflight = 3", &[("c", 0.0), ("b", 0.0), ("a", 0.0)]);
    let again = a.configure(&reloaded);
    assert_eq!(again, vec![2, slots[1], slots[0]]);
    // Both waiters were dispatched by the reload itself.
    let granted = [rx.recv().await, rx.recv().await];
    assert!(granted
        .iter()
        .all(|g| g.as_ref().is_some_and(|(s, _)| *s == slots[1])));
    assert_eq!(a.inflight(), 3);
    drop(granted);
    drop(held);
    // Turning the limit off lets everything through.
    a.configure(&config("", &[("a", 0.0)]));
    assert!(!a.admit(slots[0]).await.unwrap().holds_slot());
}

#[tokio::test(start_paused = true)]
async fn a_request_that_gives_up_does_not_use_up_its_sites_share() {
    // gold 100/s (Vtick 10 ms), bronze at the 10/s floor (100 ms): bronze's
    // three requests get tags 100, 200, 300 ms; the first then leaves. The
    // others move up to 100 and 200 ms, so bronze's next grant comes after
    // gold's tags 10..90 ms (at 100 ms the tie goes to bronze, which
    // arrived first): after 9 gold grants, not 19.
    let cfg = config("max_inflight = 1", &[("gold", 100.0), ("bronze", 0.0)]);
    let (a, slots) = Admission::new(&cfg);
    let (gold, bronze) = (slots[0], slots[1]);
    let held = a.admit(gold).await.unwrap();
    let (mut rx_b, bronze_tasks) = enqueue(&a, &[bronze; 3]).await;
    let (mut rx, _gold_tasks) = enqueue(&a, &[gold; 30]).await;
    bronze_tasks[0].abort();
    settle().await;
    assert_eq!(a.queued(), 32);
    drop(held);
    let mut before = 0;
    loop {
        settle().await;
        if let Ok((_, p)) = rx_b.try_recv() {
            drop(p);
            break;
        }
        let (_, p) = rx.recv().await.expect("a gold grant");
        drop(p);
        before += 1;
    }
    assert_eq!(before, 9);
}
