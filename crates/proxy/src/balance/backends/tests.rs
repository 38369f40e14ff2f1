//! `Backends`: building from a config, picking (down and excluded nodes are
//! never chosen), reuse of node state across reloads.

use proptest::prelude::*;

use super::*;
use crate::balance::{Outcome, Transition};

fn config(balance: &str, nodes: &[(&str, u16, &str)]) -> Config {
    let mut text = format!(
        r#"
[global]
balance = "{balance}"

[health]
passive_failures = 1
rise = 2
fall = 1

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["*.shop.example.com", "shop.example.com"]
health_path = "/healthz"

[[site]]
name = "blog"
hosts = ["blog.example.com"]

[[site]]
name = "empty"
hosts = ["empty.example.com"]
"#
    );
    for (name, port, site) in nodes {
        text.push_str(&crate::fixtures::node(
            name,
            format!("127.0.0.1:{port}"),
            site,
        ));
    }
    crate::fixtures::config(&text)
}

const THREE: &[(&str, u16, &str)] = &[
    ("a", 9001, "shop"),
    ("b", 9002, "shop"),
    ("c", 9003, "blog"),
    ("d", 9004, "shop"),
];

#[test]
fn build_groups_nodes_by_site() {
    let b = Backends::build(&config("roundrobin", THREE), None);
    assert_eq!(b.nodes().len(), 4);
    let shop: Vec<_> = b.nodes_of(0).iter().map(|n| n.name.as_str()).collect();
    assert_eq!(shop, ["a", "b", "d"]);
    assert_eq!(b.nodes_of(1)[0].name, "c");
    assert!(b.nodes_of(2).is_empty());
    assert!(b.nodes_of(99).is_empty());
    assert_eq!(b.balance(), "roundrobin");
    assert_eq!(b.sites()[0].health_path, "/healthz");
    // The first *exact* host is the check Host, wildcards are skipped.
    assert_eq!(b.sites()[0].check_host.as_deref(), Some("shop.example.com"));
    for (i, n) in b.nodes().iter().enumerate() {
        assert_eq!(n.index, i);
    }
    assert_eq!(b.nodes()[3].site_name.as_deref(), Some("shop"));
}

#[test]
fn pick_reports_empty_all_down_and_exhausted() {
    let b = Backends::build(&config("roundrobin", THREE), None);
    assert_eq!(b.pick(2, &[]).unwrap_err(), NoNode::Empty);
    assert_eq!(b.pick(42, &[]).unwrap_err(), NoNode::Empty);
    // blog has one node: excluded → exhausted; down → all down.
    assert_eq!(b.pick(1, &[2]).unwrap_err(), NoNode::Exhausted);
    assert_eq!(
        b.nodes()[2].report(Outcome::ConnectFailed),
        Some(Transition::Down(crate::balance::DownReason::Passive))
    );
    assert_eq!(b.pick(1, &[]).unwrap_err(), NoNode::AllDown);
}

#[test]
fn pick_skips_down_and_excluded_nodes_and_holds_a_slot() {
    let b = Backends::build(&config("roundrobin", THREE), None);
    b.nodes()[0].report(Outcome::ServerError); // a ejected
    for _ in 0..10 {
        let p = b.pick(0, &[1]).unwrap();
        assert_eq!(p.node.name, "d");
        assert_eq!(p.node.inflight(), 1);
    }
    assert_eq!(b.nodes()[3].inflight(), 0);
}

#[test]
fn reload_reuses_state_of_unchanged_nodes() {
    let first = Backends::build(&config("leastconn", THREE), None);
    let held = first.pick(1, &[]).unwrap(); // c in flight
    first.nodes()[0].report(Outcome::ConnectFailed); // a down
                                                     // b changes address, d is removed, e is new, a moves to the end.
    let second = Backends::build(
        &config(
            "random",
            &[
                ("c", 9003, "blog"),
                ("b", 9102, "shop"),
                ("e", 9005, "shop"),
                ("a", 9001, "shop"),
            ],
        ),
        Some(&first),
    );
    assert_eq!(second.balance(), "random");
    let by_name = |name: &str| second.nodes().iter().find(|n| n.name == name).unwrap();
    // Same position and site: the very same Arc.
    assert!(
        Arc::ptr_eq(by_name("c"), &first.nodes()[2]) || by_name("c").same_node(&first.nodes()[2])
    );
    assert_eq!(by_name("c").inflight(), 1);
    // Moved: new index, same runtime state.
    let a = by_name("a");
    assert_eq!(a.index, 3);
    assert!(a.same_node(&first.nodes()[0]));
    assert!(!a.is_up(), "a reload must not resurrect a down node");
    // Address changed: a new node, up.
    assert!(!by_name("b").same_node(&first.nodes()[1]));
    assert!(by_name("b").is_up());
    assert!(
        second.find_same(&first.nodes()[3]).is_none(),
        "d was removed"
    );
    drop(held);
    assert_eq!(by_name("c").inflight(), 0);
}

#[test]
fn reload_applies_new_thresholds_to_kept_nodes() {
    let first = Backends::build(&config("roundrobin", THREE), None);
    let text = config("roundrobin", THREE);
    let mut changed = text.clone();
    changed.health.passive_failures = 7;
    let second = Backends::build(&changed, Some(&first));
    assert_eq!(second.nodes()[0].thresholds().passive_failures, 7);
    assert!(Arc::ptr_eq(&second.nodes()[0], &first.nodes()[0]));
}

#[test]
fn round_robin_through_pick_is_fair() {
    let b = Backends::build(&config("roundrobin", THREE), None);
    let mut counts = std::collections::HashMap::new();
    for _ in 0..30 {
        *counts
            .entry(b.pick(0, &[]).unwrap().node.index)
            .or_insert(0) += 1;
    }
    assert_eq!(counts.get(&0), Some(&10));
    assert_eq!(counts.get(&1), Some(&10));
    assert_eq!(counts.get(&3), Some(&10));
}

proptest! {
    /// For random up/down sets and exclusions, every policy returns an up,
    /// non-excluded node of the site, or an error exactly when there is none
    /// (and the right one).
    #[test]
    fn pick_respects_health_and_exclusions(
        balance in prop_oneof![Just("roundrobin"), Just("leastconn"), Just("random")],
        down in proptest::collection::vec(any::<bool>(), 6),
        excluded in proptest::collection::vec(any::<bool>(), 6),
        loads in proptest::collection::vec(0usize..4, 6),
    ) {
        let nodes: Vec<(String, u16)> = (0..6).map(|i| (format!("n{i}"), 9100 + i as u16)).collect();
        let spec: Vec<(&str, u16, &str)> = nodes.iter().map(|(n, p)| (n.as_str(), *p, "shop")).collect();
        let b = Backends::build(&config(balance, &spec), None);
        let _held: Vec<_> = b.nodes().iter().zip(&loads)
            .flat_map(|(n, &k)| (0..k).map(|_| Pick::acquire(Arc::clone(n)))).collect();
        for (n, d) in b.nodes().iter().zip(&down) {
            if *d { n.report(Outcome::ConnectFailed); }
        }
        let exclude: Vec<usize> = (0..6).filter(|i| excluded[*i]).collect();
        let any_up = down.iter().any(|d| !d);
        let any_usable = (0..6).any(|i| !down[i] && !excluded[i]);
        for _ in 0..12 {
            match b.pick(0, &exclude) {
                Ok(p) => {
                    prop_assert!(p.node.is_up());
                    prop_assert!(!exclude.contains(&p.node.index));
                    prop_assert!(any_usable);
                }
                Err(NoNode::AllDown) => prop_assert!(!any_up),
                Err(NoNode::Exhausted) => prop_assert!(any_up && !any_usable),
                Err(NoNode::Empty) => prop_assert!(false, "site has nodes"),
            }
        }
    }
}

fn limited(max_inflight: usize) -> Config {
    let mut c = config("roundrobin", THREE);
    c.limits.max_inflight_per_node = max_inflight;
    c.timeouts.queue = std::time::Duration::from_secs(5);
    c
}

#[tokio::test(start_paused = true)]
async fn pick_queued_without_limit_is_pick() {
    let b = Backends::build(&limited(0), None);
    let held: Vec<_> = (0..10).map(|_| b.pick(1, &[]).unwrap()).collect();
    let p = b.pick_queued(1, &[]).await.unwrap();
    assert_eq!(p.node.inflight(), 11);
    drop(held);
    assert_eq!(
        b.pick_queued(2, &[]).await.unwrap_err(),
        PickError::NoNode(NoNode::Empty)
    );
}

#[tokio::test(start_paused = true)]
async fn pick_queued_never_exceeds_the_limit_and_times_out() {
    let b = Backends::build(&limited(2), None);
    // shop has 3 nodes: 6 slots.
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(b.pick_queued(0, &[]).await.unwrap());
    }
    assert!(b.nodes_of(0).iter().all(|n| n.inflight() == 2));
    let start = tokio::time::Instant::now();
    let e = b.pick_queued(0, &[]).await.unwrap_err();
    assert_eq!(
        e,
        PickError::QueueTimeout(std::time::Duration::from_secs(5))
    );
    // Paused clock: exactly the queue timeout elapsed, no real waiting.
    assert!(start.elapsed() >= std::time::Duration::from_secs(5));
    assert!(b.nodes_of(0).iter().all(|n| n.inflight() == 2));
}

#[tokio::test(start_paused = true)]
async fn a_released_slot_wakes_a_queued_request() {
    let b = Arc::new(Backends::build(&limited(1), None));
    let first = b.pick_queued(1, &[]).await.unwrap();
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.pick_queued(1, &[]).await.map(|p| p.node.name.clone()) })
    };
    // Let the waiter register and sleep.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(!waiter.is_finished());
    drop(first);
    assert_eq!(waiter.await.unwrap().unwrap(), "c");
}

#[tokio::test(start_paused = true)]
async fn a_release_from_an_older_snapshot_wakes_waiters_of_the_new_one() {
    let old = Backends::build(&limited(1), None);
    let first = old.pick_queued(1, &[]).await.unwrap();
    let new = Arc::new(Backends::build(&limited(1), Some(&old)));
    let waiter = {
        let b = Arc::clone(&new);
        tokio::spawn(async move { b.pick_queued(1, &[]).await.is_ok() })
    };
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    drop(first);
    assert!(waiter.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn queued_request_fails_fast_when_the_site_goes_down() {
    let b = Arc::new(Backends::build(&limited(1), None));
    let _first = b.pick_queued(1, &[]).await.unwrap();
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.pick_queued(1, &[]).await.map(|_| ()) })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    b.nodes()[2].report(Outcome::ConnectFailed);
    let e = waiter.await.unwrap().unwrap_err();
    assert_eq!(e, PickError::NoNode(NoNode::AllDown));
}

#[test]
fn concurrent_limited_picks_never_overshoot() {
    let b = Arc::new(Backends::build(&limited(3), None));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let b = Arc::clone(&b);
                tokio::spawn(async move {
                    for _ in 0..200 {
                        let p = b.pick_queued(0, &[]).await.unwrap();
                        assert!(p.node.inflight() <= 3, "limit overshot");
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert!(b.nodes_of(0).iter().all(|n| n.inflight() == 0));
}

#[test]
fn cached_up_list_follows_health_changes() {
    let b = Backends::build(&config("roundrobin", THREE), None);
    // Build the cache with every node up.
    for _ in 0..3 {
        b.pick(0, &[]).unwrap();
    }
    let a = Arc::clone(&b.nodes()[0]);
    a.report(Outcome::ConnectFailed);
    for _ in 0..12 {
        assert_ne!(b.pick(0, &[]).unwrap().node.name, "a");
    }
    // Back up after `rise` (2) passed checks: picked again.
    a.record_check(Ok(()));
    assert_eq!(a.record_check(Ok(())), Some(Transition::Up));
    let picked: std::collections::HashSet<_> =
        (0..6).map(|_| b.pick(0, &[]).unwrap().node.index).collect();
    assert!(picked.contains(&0), "{picked:?}");
    // Excluding the only other up nodes exhausts the site.
    b.nodes()[1].report(Outcome::ConnectFailed);
    assert_eq!(b.pick(0, &[0, 3]).unwrap_err(), NoNode::Exhausted);
    assert_eq!(b.pick(0, &[3]).unwrap().node.index, 0);
}

mod control;
mod keyed;
mod roles;
