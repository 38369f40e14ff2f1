//! Operator control in picks: drain, maint, weights, backups, per-node caps,
//! and runtime state across reloads.

use std::collections::HashMap;

use super::*;
use crate::balance::{AdminState, ControlSource};

fn weighted(balance: &str, extra: &[(&str, &str)]) -> Config {
    let mut text = format!(
        "[global]\nbalance = \"{balance}\"\n[[listener]]\nlisten = \"127.0.0.1:8080\"\n{}",
        crate::fixtures::site("shop", &["shop.example.com"])
    );
    for (i, (name, keys)) in extra.iter().enumerate() {
        text.push_str(&crate::fixtures::node(
            name,
            format!("127.0.0.1:{}", 9100 + i),
            "shop",
        ));
        text.push_str(keys);
        text.push('\n');
    }
    crate::fixtures::config(&text)
}

/// Names picked in `n` sequential picks (each slot released at once).
fn picks(b: &Backends, n: usize) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..n {
        let p = b.pick(0, &[]).expect("a node");
        *seen.entry(p.node.name.clone()).or_insert(0) += 1;
    }
    seen
}

#[test]
fn roundrobin_gives_each_node_its_weight_share_every_cycle() {
    let b = Backends::build(
        &weighted(
            "roundrobin",
            &[("a", "weight = 3"), ("b", "weight = 1"), ("c", "")],
        ),
        None,
    );
    let seen = picks(&b, 500);
    assert_eq!(seen["a"], 300);
    assert_eq!(seen["b"], 100);
    assert_eq!(seen["c"], 100);
}

#[test]
fn roundrobin_spreads_a_heavy_node_over_the_cycle() {
    let b = Backends::build(
        &weighted("roundrobin", &[("a", "weight = 4"), ("b", "")]),
        None,
    );
    let order: Vec<String> = (0..5)
        .map(|_| b.pick(0, &[]).unwrap().node.name.clone())
        .collect();
    // Exactly one b per cycle of 5, never at the same end twice in a row.
    assert_eq!(order.iter().filter(|n| *n == "b").count(), 1);
    assert_ne!(order[..4], ["a", "a", "a", "a"], "{order:?}");
}

#[test]
fn random_draws_by_weight() {
    let b = Backends::build(&weighted("random", &[("a", "weight = 9"), ("b", "")]), None);
    let seen = picks(&b, 2000);
    // Idle nodes: (0+1)/9 < (0+1)/1, so a wins whenever drawn with b; b
    // gets only what its own weight draws would not give it anyway.
    assert!(seen["a"] > 1800, "{seen:?}");
}

#[test]
fn leastconn_counts_in_flight_per_unit_of_weight() {
    let b = Backends::build(
        &weighted("leastconn", &[("a", "weight = 2"), ("b", "")]),
        None,
    );
    // Held picks: a should hold twice what b holds.
    let held: Vec<Pick> = (0..30).map(|_| b.pick(0, &[]).unwrap()).collect();
    let a = held.iter().filter(|p| p.node.name == "a").count();
    assert_eq!(a, 20, "a holds 2/3 of 30");
}

#[test]
fn drained_and_maintained_nodes_take_no_new_requests() {
    let b = Backends::build(
        &weighted("roundrobin", &[("a", ""), ("b", ""), ("c", "")]),
        None,
    );
    let held = b.pick(0, &[]).unwrap();
    let node = Arc::clone(&held.node);
    assert!(node.set_admin_state(AdminState::Drain, ControlSource::Runtime));
    assert_eq!(node.inflight(), 1, "in-flight requests finish");
    b.nodes()[1].set_admin_state(AdminState::Maint, ControlSource::Runtime);
    let seen = picks(&b, 20);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(!seen.contains_key(&node.name));
    assert!(!seen.contains_key("b"));
    drop(held);
    node.set_admin_state(AdminState::Ready, ControlSource::Runtime);
    assert_eq!(picks(&b, 30).len(), 2);
}

#[test]
fn weight_zero_takes_no_new_requests() {
    let b = Backends::build(
        &weighted("leastconn", &[("a", "weight = 0"), ("b", "")]),
        None,
    );
    assert_eq!(picks(&b, 10)["b"], 10);
    b.nodes()[0].set_weight(5, ControlSource::Runtime);
    assert!(picks(&b, 60).contains_key("a"));
}

#[test]
fn backups_serve_only_when_no_other_node_can() {
    let b = Backends::build(
        &weighted(
            "roundrobin",
            &[("a", ""), ("b", "backup = true"), ("c", "backup = true")],
        ),
        None,
    );
    assert_eq!(picks(&b, 10)["a"], 10);
    b.nodes()[0].set_admin_state(AdminState::Maint, ControlSource::Runtime);
    let seen = picks(&b, 10);
    assert_eq!(
        (seen["b"], seen["c"]),
        (5, 5),
        "every backup shares the load"
    );
    b.nodes()[0].set_admin_state(AdminState::Ready, ControlSource::Runtime);
    assert_eq!(picks(&b, 10)["a"], 10);
}

#[test]
fn a_disabled_node_starts_in_maintenance() {
    let b = Backends::build(
        &weighted("roundrobin", &[("a", "disabled = true"), ("b", "")]),
        None,
    );
    assert_eq!(b.nodes()[0].admin_state(), AdminState::Maint);
    assert_eq!(picks(&b, 4)["b"], 4);
}

#[test]
fn runtime_state_survives_a_reload() {
    let config = weighted("roundrobin", &[("a", "weight = 2"), ("b", "")]);
    let first = Backends::build(&config, None);
    first.nodes()[0].set_admin_state(AdminState::Drain, ControlSource::Runtime);
    first.nodes()[1].set_weight(9, ControlSource::Runtime);
    let second = Backends::build(&config, Some(&first));
    assert_eq!(second.nodes()[0].admin_state(), AdminState::Drain);
    assert_eq!(second.nodes()[1].weight(), 9);
}

#[tokio::test]
async fn a_node_cap_of_its_own_queues_at_that_node() {
    let b = Backends::build(
        &weighted(
            "roundrobin",
            &[("a", "max_inflight = 1"), ("b", "max_inflight = 2")],
        ),
        None,
    );
    let held: Vec<Pick> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(b.pick_queued(0, &[]).await.expect("room"));
        }
        v
    };
    let a = held.iter().filter(|p| p.node.name == "a").count();
    assert_eq!(a, 1);
    assert!(matches!(
        tokio::time::timeout(Duration::from_millis(200), b.pick_queued(0, &[])).await,
        Err(_) | Ok(Err(PickError::QueueTimeout(_)))
    ));
}
