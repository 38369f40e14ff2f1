//! The probe pool: HCL over probes, the placed request counted, reuse and
//! pool limits, and a cold start.

use super::*;
use crate::balance::{Pick, Thresholds};

fn nodes(n: usize) -> Vec<Arc<NodeState>> {
    (0..n)
        .map(|i| {
            Arc::new(NodeState::new(
                i,
                format!("n{i}"),
                format!("127.0.0.1:{}", 9000 + i).parse().unwrap(),
                Some((0, "s".into())),
                Thresholds {
                    rise: 1,
                    fall: 1,
                    passive_failures: 0,
                },
            ))
        })
        .collect()
}

fn probe(rif: f64, latency_ms: f64) -> Probe {
    Probe {
        rif,
        latency_ns: latency_ms * 1e6,
    }
}

#[test]
fn the_pool_choice_counts_the_placed_request() {
    let pool = SitePool::default();
    let ns = nodes(2);
    pool.add(&ns[0], probe(3.0, 5.0));
    pool.add(&ns[1], probe(1.0, 9.0));
    // No threshold yet (fewer than 8 RIFs): both cold, lower latency wins.
    assert_eq!(pool.take(&ns).unwrap().name, "n0");
    let probes = pool.probes.lock().unwrap().clone();
    let n0 = probes.iter().find(|p| p.name == "n0").unwrap();
    assert_eq!((n0.probe.rif, n0.uses), (4.0, 1));
}

#[test]
fn a_probe_is_used_at_most_max_reuse_times() {
    let pool = SitePool::default();
    let ns = nodes(1);
    pool.add(&ns[0], probe(0.0, 1.0));
    for _ in 0..MAX_REUSE {
        assert!(pool.take(&ns).is_some());
    }
    assert!(pool.take(&ns).is_none(), "the probe is spent");
}

#[test]
fn the_pool_keeps_the_newest_probes() {
    let pool = SitePool::default();
    let ns = nodes(2);
    pool.add(&ns[0], probe(0.0, 1.0));
    for _ in 0..POOL {
        pool.add(&ns[1], probe(0.0, 1.0));
    }
    let probes = pool.probes.lock().unwrap().clone();
    assert_eq!(probes.len(), POOL);
    assert!(
        probes.iter().all(|p| p.name == "n1"),
        "the oldest went first"
    );
}

#[test]
fn probes_of_nodes_not_offered_are_not_used() {
    let pool = SitePool::default();
    let ns = nodes(2);
    pool.add(&ns[0], probe(0.0, 1.0));
    assert!(pool.take(&ns[1..]).is_none());
}

#[test]
fn a_hot_node_is_avoided_even_when_fastest_and_the_fastest_cold_one_leads() {
    let p = Prequal::new(1, NodeWindows::none());
    let ns = nodes(8);
    // n0: the fastest, but 30 requests in flight (probes without windows
    // carry this proxy's in-flight counts): hot, its probes being the top
    // eighth of the RIFs seen (above the 84th percentile). n3 is the
    // fastest of the cold ones.
    let _held: Vec<Pick> = (0..30).map(|_| Pick::acquire(Arc::clone(&ns[0]))).collect();
    for (n, ms) in ns.iter().zip([1, 8, 8, 3, 8, 8, 8, 8]) {
        n.observe_latency(Duration::from_millis(ms));
    }
    let mut picked = std::collections::HashMap::new();
    for _ in 0..400 {
        let n = p.select(0, &ns).unwrap();
        *picked.entry(n.name.clone()).or_insert(0) += 1;
    }
    let count = |name: &str| picked.get(name).copied().unwrap_or(0);
    // A cold start (empty pool) picks at random a few times.
    assert!(count("n0") < 60, "{picked:?}");
    for other in ["n1", "n2", "n4", "n5", "n6", "n7"] {
        assert!(count("n3") > count(other), "{picked:?}");
    }
}
