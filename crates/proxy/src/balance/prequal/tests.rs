//! The probe pool: HCL over probes, the placed request counted, reuse and
//! pool limits, and a cold start.

use super::*;
use crate::balance::Thresholds;

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
fn a_hot_node_is_avoided_even_when_fastest_and_the_fastest_cold_one_wins() {
    let pool = SitePool::default();
    let ns = nodes(4);
    // Recent RIFs mostly 1: the 84th percentile is 1, so RIF 30 is hot.
    for _ in 0..56 {
        pool.history.record(1.0);
    }
    pool.add(&ns[0], probe(30.0, 1.0));
    pool.add(&ns[1], probe(1.0, 8.0));
    pool.add(&ns[2], probe(0.0, 8.0));
    pool.add(&ns[3], probe(1.0, 3.0));
    assert_eq!(pool.history.threshold(), 1.0);
    assert_eq!(pool.take(&ns).unwrap().name, "n3");
}

#[test]
fn when_every_probe_is_hot_the_lowest_rif_wins() {
    let pool = SitePool::default();
    let ns = nodes(3);
    for _ in 0..64 {
        pool.history.record(0.0);
    }
    pool.add(&ns[0], probe(9.0, 1.0));
    pool.add(&ns[1], probe(4.0, 50.0));
    pool.add(&ns[2], probe(12.0, 2.0));
    assert_eq!(pool.take(&ns).unwrap().name, "n1");
}

#[test]
fn a_select_places_the_request_and_sends_probes() {
    let p = Prequal::new(1, NodeWindows::none());
    let ns = nodes(3);
    // Cold start: an empty pool, a candidate at random, and probes sent
    // (without windows they carry this proxy's in-flight counts).
    assert!(p.select(0, &ns).is_some());
    let pooled = p.site(0).probes.lock().unwrap().len();
    assert_eq!(pooled, PROBES_PER_REQUEST);
}
