//! Selector invariants: fairness of round robin, minimality of leastconn,
//! power-of-two never taking the busier of the two, and (property tests)
//! every policy returning one of its candidates, `None` only for none.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::balance::{Pick, Thresholds};

const T: Thresholds = Thresholds {
    rise: 2,
    fall: 3,
    passive_failures: 3,
};

fn nodes(n: usize) -> Vec<Arc<NodeState>> {
    (0..n)
        .map(|i| {
            Arc::new(NodeState::new(
                i,
                format!("n{i}"),
                format!("127.0.0.1:{}", 10_000 + i).parse().unwrap(),
                Some((0, "s".to_string())),
                T,
            ))
        })
        .collect()
}

/// Holds `loads[i]` in-flight slots on node i.
fn load(nodes: &[Arc<NodeState>], loads: &[usize]) -> Vec<Pick> {
    nodes
        .iter()
        .zip(loads)
        .flat_map(|(n, &k)| (0..k).map(|_| Pick::acquire(Arc::clone(n))))
        .collect()
}

fn all() -> Vec<Arc<dyn Selector>> {
    vec![
        Arc::new(RoundRobin::new(2)),
        Arc::new(LeastConn::new(2)),
        Arc::new(RandomTwo),
        Arc::new(PeakEwma),
        Arc::new(First),
        Arc::new(crate::balance::Prequal::new(
            2,
            crate::balance::NodeWindows::none(),
        )),
    ]
}

#[test]
fn empty_candidates_give_none() {
    for s in all() {
        assert!(s.select(0, &[]).is_none(), "{}", s.name());
    }
}

#[test]
fn out_of_range_site_does_not_panic() {
    let ns = nodes(3);
    for s in all() {
        assert!(s.select(usize::MAX, &ns).is_some(), "{}", s.name());
    }
}

#[test]
fn round_robin_is_exactly_fair_over_whole_rounds() {
    let ns = nodes(5);
    let rr = RoundRobin::new(1);
    let mut counts = HashMap::new();
    for _ in 0..5 * 40 {
        let n = rr.select(0, &ns).unwrap();
        *counts.entry(n.index).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 5);
    assert!(counts.values().all(|&c| c == 40), "{counts:?}");
}

#[test]
fn round_robin_cursors_are_per_site() {
    let ns = nodes(2);
    let rr = RoundRobin::new(2);
    let a = rr.select(0, &ns).unwrap().index;
    // Site 1's first pick does not advance site 0's rotation.
    let b = rr.select(1, &ns).unwrap().index;
    let c = rr.select(0, &ns).unwrap().index;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn leastconn_picks_the_minimum() {
    let ns = nodes(4);
    let _held = load(&ns, &[3, 1, 4, 2]);
    let lc = LeastConn::new(1);
    for _ in 0..20 {
        assert_eq!(lc.select(0, &ns).unwrap().index, 1);
    }
}

#[test]
fn leastconn_rotates_among_ties() {
    let ns = nodes(4);
    let _held = load(&ns, &[2, 0, 5, 0]);
    let lc = LeastConn::new(1);
    let mut counts = HashMap::new();
    for _ in 0..100 {
        *counts.entry(lc.select(0, &ns).unwrap().index).or_insert(0) += 1;
    }
    assert_eq!(
        counts
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [1, 3].into()
    );
    assert!(
        counts.values().all(|&c| c >= 25),
        "ties should share: {counts:?}"
    );
}

#[test]
fn leastconn_follows_in_flight_as_picks_are_held() {
    let ns = nodes(3);
    let lc = LeastConn::new(1);
    // Holding every pick makes leastconn spread evenly.
    let held: Vec<Pick> = (0..30)
        .map(|_| Pick::acquire(lc.select(0, &ns).unwrap()))
        .collect();
    assert!(ns.iter().all(|n| n.inflight() == 10));
    drop(held);
    assert!(ns.iter().all(|n| n.inflight() == 0));
}

#[test]
fn random_two_with_two_different_loads_always_takes_the_lower() {
    let ns = nodes(2);
    let _held = load(&ns, &[1, 7]);
    for _ in 0..500 {
        assert_eq!(RandomTwo.select(0, &ns).unwrap().index, 0);
    }
}

#[test]
fn random_two_never_picks_the_busiest_of_several() {
    let ns = nodes(5);
    let _held = load(&ns, &[3, 3, 9, 3, 3]);
    for _ in 0..500 {
        assert_ne!(RandomTwo.select(0, &ns).unwrap().index, 2);
    }
}

#[test]
fn random_two_spreads_over_equal_nodes() {
    let ns = nodes(4);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..400 {
        seen.insert(RandomTwo.select(0, &ns).unwrap().index);
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn first_takes_the_first_candidate_whatever_the_loads_and_weights() {
    let ns = nodes(3);
    let _held = load(&ns, &[9, 0, 0]);
    ns[1].set_weight(200, crate::balance::ControlSource::Runtime);
    assert_eq!(First.select(0, &ns).unwrap().index, 0);
    // Node 0 gone from the candidates (down, or tried by this request).
    assert_eq!(First.select(0, &ns[1..]).unwrap().index, 1);
}

/// HAProxy's `balance first` with `maxconn`: each node takes requests up
/// to its cap, in config order, before the next one gets any; a freed slot
/// goes back to the earliest node.
#[tokio::test]
async fn first_fills_each_node_to_its_cap_in_config_order() {
    let mut text = String::from(
        "[global]\nbalance = \"first\"\n[limits]\nmax_inflight_per_node = 2\n\
         [timeouts]\nqueue = \"10ms\"\n[[listener]]\nlisten = \"127.0.0.1:1\"\n",
    );
    text.push_str(&crate::fixtures::site("s", &["s.test"]));
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        text.push_str(&crate::fixtures::node(
            name,
            format!("127.0.0.1:{}", 9001 + i),
            "s",
        ));
    }
    text.push_str("max_inflight = 1\n"); // c: a cap of its own
    let backends = crate::balance::Backends::build(&crate::fixtures::config(&text), None);
    let mut held = Vec::new();
    for expected in ["a", "a", "b", "b", "c"] {
        let pick = backends.pick_queued(0, &[]).await.unwrap();
        assert_eq!(pick.node.name, expected);
        held.push(pick);
    }
    assert!(
        backends.pick_queued(0, &[]).await.is_err(),
        "every node full"
    );
    drop(held.remove(0));
    assert_eq!(backends.pick_queued(0, &[]).await.unwrap().node.name, "a");
}

/// The registry (`Policy::of`): every config name builds the policy that
/// reports that name, reading windows exactly for the load-aware ones.
#[test]
fn from_config_names_match() {
    for (balance, load_aware) in [
        ("roundrobin", false),
        ("leastconn", false),
        ("random", false),
        ("peak-ewma", false),
        ("prequal", false),
        ("weighted-least-load", true),
        ("hot-cold", true),
        ("shortest-wait", true),
        ("first", false),
    ] {
        let text = format!(
            "[global]\nbalance = \"{balance}\"\n[[listener]]\nlisten = \"127.0.0.1:1\"\n\
             [[site]]\nname = \"s\"\nhosts = [\"s.test\"]\n"
        );
        let config = crate::fixtures::config(&text);
        let windows = crate::balance::NodeWindows::none();
        let policy = crate::balance::Policy::from_config(&config, &windows);
        assert_eq!(policy.name(), balance);
        assert_eq!(
            matches!(policy, crate::balance::Policy::LoadAware(_)),
            load_aware,
            "{balance}"
        );
    }
}

proptest! {
    /// Whatever the loads and candidate subset, each policy returns one of
    /// the candidates, and `None` exactly when there are none.
    #[test]
    fn selection_returns_a_candidate(
        loads in proptest::collection::vec(0usize..5, 0..8),
        mask in proptest::collection::vec(any::<bool>(), 8),
        rounds in 1usize..20,
    ) {
        let ns = nodes(loads.len());
        let _held = load(&ns, &loads);
        let candidates: Vec<_> = ns.iter().zip(&mask).filter(|(_, m)| **m).map(|(n, _)| Arc::clone(n)).collect();
        for s in all() {
            for _ in 0..rounds {
                match s.select(0, &candidates) {
                    None => prop_assert!(candidates.is_empty(), "{} gave None with candidates", s.name()),
                    Some(n) => prop_assert!(candidates.iter().any(|c| Arc::ptr_eq(c, &n)), "{} picked a non-candidate", s.name()),
                }
            }
        }
    }

    /// leastconn's pick always has the minimum in-flight count.
    #[test]
    fn leastconn_pick_is_minimal(loads in proptest::collection::vec(0usize..6, 1..8)) {
        let ns = nodes(loads.len());
        let _held = load(&ns, &loads);
        let min = *loads.iter().min().unwrap();
        let lc = LeastConn::new(1);
        for _ in 0..loads.len() {
            prop_assert_eq!(lc.select(0, &ns).unwrap().inflight(), min);
        }
    }

    /// p2c never returns the strictly busiest node when there are two or more.
    #[test]
    fn random_two_never_picks_a_strict_maximum(loads in proptest::collection::vec(0usize..6, 2..8)) {
        let ns = nodes(loads.len());
        let _held = load(&ns, &loads);
        let max = *loads.iter().max().unwrap();
        let strict_max = loads.iter().filter(|&&l| l == max).count() == 1;
        for _ in 0..20 {
            let picked = RandomTwo.select(0, &ns).unwrap().inflight();
            if strict_max {
                prop_assert!(picked < max);
            }
        }
    }
}

#[test]
fn peak_ewma_prefers_the_node_that_answers_faster() {
    let ns = nodes(2);
    ns[0].observe_latency(std::time::Duration::from_millis(40));
    ns[1].observe_latency(std::time::Duration::from_millis(2));
    let s = PeakEwma;
    for _ in 0..50 {
        assert_eq!(s.select(0, &ns).unwrap().name, "n1");
    }
    // Until its in-flight count outweighs its speed: 2 ms × 30 > 40 ms × 1.
    let _held = load(&ns, &[0, 30]);
    assert_eq!(s.select(0, &ns).unwrap().name, "n0");
}
