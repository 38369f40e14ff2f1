//! Unit tests of the load index: each normalisation, the weighted sum,
//! ranking, tie-breaking and the local scoring of stale, torn and unknown
//! nodes.

use super::*;

fn block(s: LoadSample) -> LoadBlock {
    LoadBlock {
        node_id: 1,
        seq: 2,
        updated_at_ns: 0,
        sample: s,
    }
}

fn fresh(s: LoadSample) -> NodeLoad {
    NodeLoad::Fresh(block(s))
}

fn cpu(ppm: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: ppm,
        ..Default::default()
    }
}

/// Only one weight set, the rest zero.
fn only(f: impl FnOnce(&mut LoadWeights)) -> LoadWeights {
    let mut w = LoadWeights {
        window: Default::default(),
        inflight: 0.0,
    };
    f(&mut w);
    w
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn idle_node_normalises_to_zero() {
    assert_eq!(
        Normalised::of(&LoadSample::default()),
        Normalised::default()
    );
    assert_eq!(
        Normalised::of(&LoadSample::default()).weighted(&LoadWeights::default()),
        0.0
    );
}

#[test]
fn fractions_of_a_maximum() {
    let n = Normalised::of(&LoadSample {
        cpu_util_ppm: 250_000,
        mem_used_ppm: 800_000,
        ..Default::default()
    });
    assert!(close(n.cpu, 0.25));
    assert!(close(n.memory, 0.8));
    // A collector reporting more than 100% is clamped.
    let n = Normalised::of(&LoadSample {
        cpu_util_ppm: 3_000_000,
        mem_used_ppm: u64::MAX,
        ..Default::default()
    });
    assert_eq!((n.cpu, n.memory), (1.0, 1.0));
}

#[test]
fn saturating_indices_are_half_at_their_half_point() {
    let n = Normalised::of(&LoadSample {
        run_queue_milli: 4_000,
        net_rx_bps: 100_000_000,
        net_tx_bps: 25_000_000,
        active_connections: 64,
        irq_rate: 50_000,
        ..Default::default()
    });
    assert!(close(n.run_queue, 0.5));
    assert!(close(n.network, 0.5));
    assert!(close(n.connections, 0.5));
    assert!(close(n.irq, 0.5));
    // Strictly increasing and below 1 even for huge values.
    let big = Normalised::of(&LoadSample {
        run_queue_milli: u64::MAX,
        net_rx_bps: u64::MAX,
        net_tx_bps: u64::MAX,
        active_connections: u64::MAX,
        irq_rate: u64::MAX,
        ..Default::default()
    });
    for x in [big.run_queue, big.network, big.connections, big.irq] {
        assert!(x > 0.99 && x <= 1.0, "{x}");
    }
    let a = Normalised::of(&LoadSample {
        active_connections: 500,
        ..Default::default()
    });
    let b = Normalised::of(&LoadSample {
        active_connections: 501,
        ..Default::default()
    });
    assert!(b.connections > a.connections);
}

#[test]
fn app_index_is_busy_plus_queue_over_capacity() {
    let app = |busy, queue, capacity| {
        Normalised::of(&LoadSample {
            app_busy: busy,
            app_queue_len: queue,
            app_capacity: capacity,
            ..Default::default()
        })
        .app
    };
    assert!(close(app(2, 0, 8), 0.25));
    assert!(close(app(8, 4, 8), 1.5));
    // Capped at APP_MAX.
    assert_eq!(app(8, 1000, 8), APP_MAX);
    // No capacity published: saturating on busy + queue.
    assert!(close(app(8, 0, 0), 0.5));
    assert_eq!(app(0, 0, 0), 0.0);
}

#[test]
fn index_is_the_weighted_sum() {
    let s = LoadSample {
        cpu_util_ppm: 500_000,
        mem_used_ppm: 250_000,
        app_busy: 4,
        app_capacity: 8,
        ..Default::default()
    };
    let w = LoadWeights::default();
    let got = Normalised::of(&s).weighted(&w);
    assert!(close(
        got,
        w.window.cpu * 0.5 + w.window.memory * 0.25 + w.window.app * 0.5
    ));
    assert!(close(inflight_part(&w, 8), w.inflight * 0.5));
    assert_eq!(inflight_part(&w, 0), 0.0);
}

#[test]
fn weights_choose_what_matters_for_the_site() {
    // a: CPU-bound, b: network-bound.
    let a = fresh(LoadSample {
        cpu_util_ppm: 900_000,
        ..Default::default()
    });
    let b = fresh(LoadSample {
        net_rx_bps: 1_000_000_000,
        ..Default::default()
    });
    let cands = [
        Candidate {
            load: &a,
            inflight: 0,
        },
        Candidate {
            load: &b,
            inflight: 0,
        },
    ];
    let mut scores = Vec::new();
    let dynamic = only(|w| w.window.cpu = 1.0);
    let static_site = only(|w| w.window.network = 1.0);
    assert_eq!(rank(&dynamic, &cands, 0, &mut scores), Some(1));
    assert_eq!(rank(&static_site, &cands, 0, &mut scores), Some(0));
}

#[test]
fn lowest_index_wins_wherever_it_is() {
    let loads: Vec<NodeLoad> = [500_000, 200_000, 700_000, 100_000, 300_000]
        .into_iter()
        .map(|c| fresh(cpu(c)))
        .collect();
    let cands: Vec<Candidate<'_>> = loads
        .iter()
        .map(|l| Candidate {
            load: l,
            inflight: 0,
        })
        .collect();
    let mut scores = Vec::new();
    for start in 0..7 {
        assert_eq!(
            rank(&LoadWeights::default(), &cands, start, &mut scores),
            Some(3)
        );
    }
    assert_eq!(scores.len(), 5);
    assert!(scores[3] < scores[1]);
}

#[test]
fn in_flight_counts_on_top_of_the_window() {
    let (a, b) = (fresh(cpu(100_000)), fresh(cpu(100_000)));
    let w = LoadWeights::default();
    let mut scores = Vec::new();
    let cands = [
        Candidate {
            load: &a,
            inflight: 30,
        },
        Candidate {
            load: &b,
            inflight: 2,
        },
    ];
    assert_eq!(rank(&w, &cands, 0, &mut scores), Some(1));
    assert!(close(
        scores[0] - scores[1],
        inflight_part(&w, 30) - inflight_part(&w, 2)
    ));
}

#[test]
fn ties_go_to_fewer_in_flight_then_rotate() {
    let w = only(|w| w.window.cpu = 1.0);
    let l = fresh(cpu(500_000));
    let mut scores = Vec::new();
    // Equal index (in-flight weight is 0), different in-flight: fewer wins
    // wherever the scan starts.
    let cands = [
        Candidate {
            load: &l,
            inflight: 3,
        },
        Candidate {
            load: &l,
            inflight: 1,
        },
        Candidate {
            load: &l,
            inflight: 2,
        },
    ];
    for start in 0..3 {
        assert_eq!(rank(&w, &cands, start, &mut scores), Some(1));
    }
    // Full tie: the scan start decides, so a rotating start spreads picks
    // evenly instead of always favouring the first node.
    let even: Vec<Candidate<'_>> = (0..3)
        .map(|_| Candidate {
            load: &l,
            inflight: 0,
        })
        .collect();
    let mut hits = [0usize; 3];
    for start in 0..300 {
        hits[rank(&w, &even, start, &mut scores).unwrap()] += 1;
    }
    assert_eq!(hits, [100, 100, 100]);
}

/// Idle nodes whose published numbers differ only by sampling noise (the
/// demo's run queues: 2, 3 and 4 runnable at the instants each sidecar
/// sampled) take turns; one busy worker of eight more is not noise.
#[test]
fn nodes_within_the_tie_band_take_turns_and_a_busy_worker_is_not_noise() {
    let w = LoadWeights::default();
    let idle = |run_queue_milli: u64, app_busy: u64| {
        fresh(LoadSample {
            cpu_util_ppm: 50_000,
            run_queue_milli,
            app_busy,
            app_capacity: 8,
            ..Default::default()
        })
    };
    let noisy = [idle(20, 0), idle(30, 0), idle(40, 0)];
    let cands: Vec<Candidate<'_>> = noisy
        .iter()
        .map(|l| Candidate {
            load: l,
            inflight: 0,
        })
        .collect();
    let mut scores = Vec::new();
    let mut hits = [0usize; 3];
    for start in 0..300 {
        hits[rank(&w, &cands, start, &mut scores).unwrap()] += 1;
    }
    assert!(
        scores[2] - scores[0] > 1e-6,
        "the samples differ: {scores:?}"
    );
    assert_eq!(hits, [100, 100, 100], "{scores:?}");
    // One worker busy of eight on node 0 (0.2 / 8 = 0.025 > LOAD_TIE).
    let busy = [idle(20, 1), idle(20, 0), idle(20, 0)];
    let cands: Vec<Candidate<'_>> = busy
        .iter()
        .map(|l| Candidate {
            load: l,
            inflight: 0,
        })
        .collect();
    for start in 0..30 {
        assert_ne!(rank(&w, &cands, start, &mut scores), Some(0));
    }
}

#[test]
fn unknown_nodes_are_scored_as_the_mean_of_fresh_ones_plus_in_flight() {
    let w = only(|w| {
        w.window.cpu = 1.0;
        w.inflight = 1.0;
    });
    let (lo, hi) = (fresh(cpu(200_000)), fresh(cpu(600_000)));
    let mut scores = Vec::new();
    for reason in Unknown::ALL {
        let unknown = if reason == Unknown::Stale {
            NodeLoad::Stale(block(cpu(0)))
        } else {
            NodeLoad::Unknown(reason)
        };
        let cands = [
            Candidate {
                load: &lo,
                inflight: 0,
            },
            Candidate {
                load: &hi,
                inflight: 0,
            },
            Candidate {
                load: &unknown,
                inflight: 0,
            },
        ];
        assert_eq!(rank(&w, &cands, 0, &mut scores), Some(0), "{reason:?}");
        // Not "idle" (which would win): the mean of the fresh ones, 0.4,
        // even for a stale block that claims 0.
        assert!(close(scores[2], 0.4), "{reason:?}: {}", scores[2]);
        assert_eq!(unknown.unknown(), Some(reason));
        assert!(unknown.fresh().is_none());
    }
}

#[test]
fn with_no_fresh_load_the_policy_is_least_in_flight() {
    let w = LoadWeights::default();
    let torn = NodeLoad::Unknown(Unknown::Torn);
    let gone = NodeLoad::Unknown(Unknown::Disconnected);
    let stale = NodeLoad::Stale(block(cpu(999_999)));
    let cands = [
        Candidate {
            load: &torn,
            inflight: 5,
        },
        Candidate {
            load: &gone,
            inflight: 4,
        },
        Candidate {
            load: &stale,
            inflight: 9,
        },
    ];
    let mut scores = Vec::new();
    assert_eq!(rank(&w, &cands, 0, &mut scores), Some(1));
    assert!(close(scores[1], inflight_part(&w, 4)));
}

#[test]
fn no_candidates_no_choice() {
    let mut scores = vec![1.0];
    assert_eq!(rank(&LoadWeights::default(), &[], 3, &mut scores), None);
    assert!(scores.is_empty());
}

#[test]
fn classify_by_age_at_read_time() {
    let now = SystemTime::now();
    let ns = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut b = block(cpu(1));
    b.updated_at_ns = ns(now - Duration::from_millis(100));
    let bound = Duration::from_millis(250);
    assert!(matches!(
        NodeLoad::classify(b, now, bound),
        NodeLoad::Fresh(_)
    ));
    b.updated_at_ns = ns(now - Duration::from_millis(300));
    assert!(matches!(
        NodeLoad::classify(b, now, bound),
        NodeLoad::Stale(_)
    ));
    // An owner whose clock runs ahead is not stale.
    b.updated_at_ns = ns(now + Duration::from_secs(5));
    assert!(matches!(
        NodeLoad::classify(b, now, bound),
        NodeLoad::Fresh(_)
    ));
}

/// The request path's classification in nanoseconds agrees with
/// [`NodeLoad::classify`] on both sides of the bound, at it, and for an
/// owner whose clock is ahead.
#[test]
fn classify_in_nanoseconds_agrees() {
    let now = SystemTime::now();
    let now_ns = rdmalb_base::time::unix_ns(now);
    let bound = Duration::from_millis(250);
    let bound_ns = bound.as_nanos() as u64;
    let mut b = block(cpu(1));
    for age in [
        0i64,
        1,
        100_000_000,
        bound_ns as i64 - 1,
        bound_ns as i64,
        bound_ns as i64 + 1,
        300_000_000,
        -5_000_000_000,
    ] {
        b.updated_at_ns = now_ns.wrapping_sub(age as u64);
        let by_ns = NodeLoad::classify_ns(b, now_ns, bound_ns);
        assert_eq!(by_ns, NodeLoad::classify(b, now, bound), "age {age} ns");
        assert_eq!(
            matches!(by_ns, NodeLoad::Stale(_)),
            age > bound_ns as i64,
            "age {age} ns"
        );
    }
}

#[test]
fn reason_labels_are_distinct_and_slots_match() {
    let labels: std::collections::HashSet<_> = Unknown::ALL.iter().map(|u| u.label()).collect();
    assert_eq!(labels.len(), Unknown::ALL.len());
    for (i, u) in Unknown::ALL.iter().enumerate() {
        assert_eq!(u.slot(), i);
    }
}
