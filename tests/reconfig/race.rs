//! Multi-proxy race (issue 6): three agents, each with its own window served
//! over the transport under test and linked to the other two, and six node
//! windows over the same transport. One site stays hot → exactly one claim
//! per hot event, counted from the nodes' role epochs; repeated with
//! randomised timing (each agent's S and each node's apply time). Over shm,
//! then over tcp with a PSK.
//!
//! Invariants checked all along: a node's role word names one site (or the
//! idle pool) at any time by construction, and no node is ever lost: after
//! every event each node is ACTIVE for some site or the idle pool.

use std::sync::Arc;
use std::time::Duration;

use crate::support::reconfig::{agent_settings, psk, shm_path, site_hash, Nodes, Source, INITIAL};
use rand::{Rng, SeedableRng};
use rdmalb_proxy::config::{PeerProxy, ProxyWindow, Reconfig, ReconfigMode, WindowEndpoint};
use rdmalb_proxy::reconfig::{Agent, OwnWindow, PeerLinks};
use rdmalb_window::{SiteSlot, TransportKind};
use tokio::sync::watch;

const HOT: SiteSlot = SiteSlot::Site(0);
/// Node 0 serves the hot site; 1-3 the cold one; 4-5 are idle.
const EVENTS: u64 = 3;

struct Proxies {
    agents: Vec<Arc<Agent>>,
    _own: Vec<OwnWindow>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn start_proxies(tag: &str, nodes: &Nodes, tcp: bool, rng: &mut impl Rng) -> Proxies {
    let ids = [1u16, 2, 3];
    let psk = psk();
    let own: Vec<OwnWindow> = ids
        .iter()
        .map(|id| {
            let cfg = if tcp {
                ProxyWindow {
                    shm: None,
                    tcp: Some("127.0.0.1:0".parse().unwrap()),
                    ..ProxyWindow::default()
                }
            } else {
                ProxyWindow {
                    shm: Some(shm_path(&format!("{tag}-p{id}"))),
                    ..ProxyWindow::default()
                }
            };
            OwnWindow::serve(&cfg, *id, site_hash(), Some(&psk)).expect("serve proxy window")
        })
        .collect();
    let endpoint = |i: usize| match own[i].local_addr(TransportKind::Tcp) {
        Some(addr) => WindowEndpoint::Tcp { addr },
        None => WindowEndpoint::Shm {
            path: own[i].memory().path().unwrap().to_path_buf(),
        },
    };
    let (stop, stop_rx) = watch::channel(false);
    let mut agents = Vec::new();
    let mut tasks = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let peers: Vec<PeerProxy> = (0..ids.len())
            .filter(|&j| j != i)
            .map(|j| PeerProxy {
                id: ids[j],
                window: endpoint(j),
            })
            .collect();
        let links = Arc::new(PeerLinks::new(*id, site_hash(), Some(psk.clone()), &peers));
        links.connect_missing().await;
        for p in &peers {
            assert!(links.get(p.id).is_some(), "proxy {id} linked to {}", p.id);
        }
        let sensitivity = Duration::from_millis(rng.gen_range(8..=25));
        let reconfig = Reconfig {
            mode: ReconfigMode::Reconfigure,
            sensitivity,
            history: Duration::from_millis(60),
            lock_lease: Duration::from_secs(2),
            lock_skew: Duration::from_millis(500),
            cooldown: Duration::ZERO,
            lock_home: 1,
            peers,
            ..Reconfig::default()
        };
        let settings = agent_settings(*id, reconfig);
        let source = Source {
            nodes: nodes.connect(*id).await,
            peers: links.clone(),
        };
        let agent = Arc::new(Agent::new(
            settings,
            own[i].memory().clone(),
            Arc::new(source),
            None,
        ));
        tasks.push(tokio::spawn(agent.clone().run(stop_rx.clone())));
        tasks.push(tokio::spawn(links.maintain(stop_rx.clone())));
        agents.push(agent);
    }
    Proxies {
        agents,
        _own: own,
        stop,
        tasks,
    }
}

/// Waits (bounded) until `f` holds, polling every 5 ms.
async fn until(what: &str, bound: Duration, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + bound;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn assert_no_node_lost(nodes: &Nodes) {
    for i in 0..INITIAL.len() {
        let r = nodes.role(i);
        assert_eq!(
            nodes.applied(i),
            r.epoch,
            "node {i} is not active ({r}): a node serving nothing"
        );
    }
}

async fn race(tag: &str, tcp: bool, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let nodes = Nodes::start(tag, &INITIAL, tcp);
    {
        let mut b = nodes.behaviour.lock().unwrap();
        for d in b.apply_delay.iter_mut() {
            *d = Duration::from_millis(rng.gen_range(0..=80));
        }
        b.loads = vec![0.1, 0.05, 0.06, 0.07, 0.01, 0.02];
    }
    let proxies = start_proxies(tag, &nodes, tcp, &mut rng).await;
    for event in 1..=EVENTS {
        // The hot site's nodes run hot until one more node serves it.
        let members = nodes.active_in(HOT);
        for &n in &members {
            nodes.set_load(n, 0.95);
        }
        until(
            &format!("seed {seed} event {event}: a claim"),
            Duration::from_secs(20),
            || nodes.moves() >= event,
        )
        .await;
        until(
            &format!("seed {seed} event {event}: the moved node active"),
            Duration::from_secs(20),
            || nodes.active_in(HOT).len() == members.len() + 1,
        )
        .await;
        // Let every agent run many more rounds on the same event: nobody
        // may claim again for it.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..=500))).await;
        assert_eq!(
            nodes.moves(),
            event,
            "seed {seed}: exactly one claim for hot event {event}"
        );
        assert_no_node_lost(&nodes);
        for &n in &members {
            nodes.set_load(n, 0.1);
        }
    }
    let claims: u64 = proxies
        .agents
        .iter()
        .map(|a| a.counters().snapshot().claims)
        .sum();
    assert_eq!(claims, EVENTS, "seed {seed}: agents' claim counters");
    let status = proxies.agents[0].status();
    assert!(status.nodes.iter().all(|n| n.error.is_none()), "{status:?}");
    let _ = proxies.stop.send(true);
    for t in proxies.tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_claim_per_hot_event_over_shm() {
    for seed in 0..3 {
        race(&format!("race-shm-{seed}"), false, seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_claim_per_hot_event_over_tcp() {
    for seed in 10..13 {
        race(&format!("race-tcp-{seed}"), true, seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_node_is_rolled_back_and_picked_only_when_active_again() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(99);
    // Only one donor: the idle node 4 (node 5 is busy).
    let nodes = Nodes::start(
        "rollback",
        &[Some(0), Some(1), Some(1), Some(1), None, None],
        false,
    );
    {
        let mut b = nodes.behaviour.lock().unwrap();
        b.loads = vec![0.95, 0.5, 0.5, 0.5, 0.01, 0.5];
        b.fail_next.insert(4);
        for d in b.apply_delay.iter_mut() {
            *d = Duration::from_millis(20);
        }
    }
    let proxies = start_proxies("rollback", &nodes, false, &mut rng).await;
    // Claimed (epoch 2), fails, rolled back to idle (epoch 3), re-applied,
    // then claimed again once ACTIVE (epoch 4) and applied this time.
    until("the second claim applied", Duration::from_secs(20), || {
        nodes.role(4).site == HOT && nodes.applied(4) == nodes.role(4).epoch
    })
    .await;
    assert_eq!(nodes.role(4).epoch, 4, "claim, rollback, claim");
    let snap = |f: fn(&rdmalb_proxy::reconfig::status::CountersSnapshot) -> u64| -> u64 {
        proxies
            .agents
            .iter()
            .map(|a| f(&a.counters().snapshot()))
            .sum()
    };
    assert_eq!(snap(|c| c.rollbacks), 1, "exactly one proxy rolled it back");
    assert_eq!(snap(|c| c.claims), 2);
    assert_no_node_lost(&nodes);
    let _ = proxies.stop.send(true);
    for t in proxies.tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_sidecar_is_never_a_donor_and_its_role_is_not_touched() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let nodes = Nodes::start("stalled", &INITIAL, false);
    // Node 4 is the only idle node, but its sidecar stalled 10 s ago: its
    // last block says idle and is stale.
    nodes.behaviour.lock().unwrap().loads = vec![0.95, 0.5, 0.5, 0.5, 0.01, 0.5];
    nodes.stall(4, 0.01, Duration::from_secs(10));
    let proxies = start_proxies("stalled", &nodes, false, &mut rng).await;
    // The hot site stays hot for many times T: still no claim.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(nodes.moves(), 0, "no claim of a node whose sidecar is gone");
    let status = proxies.agents[0].status();
    assert_eq!(
        status.nodes[4].freshness,
        Some(rdmalb_proxy::reconfig::view::Freshness::Stale)
    );
    // The sidecar comes back: the node is claimed.
    nodes.behaviour.lock().unwrap().frozen.clear();
    until(
        "claim after the sidecar is back",
        Duration::from_secs(20),
        || nodes.role(4).site == HOT,
    )
    .await;
    assert_eq!(nodes.moves(), 1);
    let _ = proxies.stop.send(true);
    for t in proxies.tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
}
