//! The agent over window memories it owns in-process (the sidecar's side —
//! initial role, load publishing, applying — is played faithfully by the
//! test through the same words the contract names). Timing tests run on
//! paused tokio time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::balance::Backends;
use crate::config::Reconfig;
use arc_swap::ArcSwap;
use rdmalb_window::layout::word;
use rdmalb_window::{publish, LoadSample, RoleStatus, RoleStatusCode, RoleWord};

const S: Duration = Duration::from_millis(200);

struct Cluster {
    nodes: Vec<Arc<WindowMemory>>,
    proxies: Vec<Arc<WindowMemory>>,
}

struct Source {
    nodes: Vec<Arc<dyn RemoteWindow>>,
    proxies: HashMap<u16, Arc<dyn RemoteWindow>>,
}

impl WindowSource for Source {
    fn node(&self, index: usize) -> Option<Arc<dyn RemoteWindow>> {
        self.nodes.get(index).cloned()
    }
    fn proxy(&self, id: u16) -> Option<Arc<dyn RemoteWindow>> {
        self.proxies.get(&id).cloned()
    }
}

/// `sites[i]` is node i's initial site (None = idle).
fn cluster(sites: &[Option<u16>], proxies: u16) -> Cluster {
    let nodes = sites
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let m = Arc::new(WindowMemory::anonymous(i as u64, 0).unwrap());
            let role = RoleWord {
                site: s.map_or(SiteSlot::Idle, SiteSlot::Site),
                state: RoleState::Active,
                epoch: 1,
            };
            m.compare_swap(word::ROLE, 0, role.encode());
            apply(&m, 1, role.site, RoleStatusCode::Ok);
            m
        })
        .collect();
    let proxies = (1..=proxies)
        .map(|id| Arc::new(WindowMemory::anonymous(u64::from(id), 0).unwrap()))
        .collect();
    Cluster { nodes, proxies }
}

/// The sidecar's answer to a role: status, then (on success) applied.
fn apply(m: &WindowMemory, epoch: u64, serving: SiteSlot, code: RoleStatusCode) {
    let st = RoleStatus {
        epoch,
        serving,
        code,
    };
    m.words()[word::ROLE_STATUS].store(st.encode(), std::sync::atomic::Ordering::Release);
    if code == RoleStatusCode::Ok {
        m.words()[word::ROLE_APPLIED].store(epoch, std::sync::atomic::Ordering::Release);
    }
}

fn load(m: &WindowMemory, l: f64) {
    publish(
        m,
        &LoadSample {
            app_busy: (l * 100.0) as u64,
            app_capacity: 100,
            ..LoadSample::default()
        },
    );
}

fn role(m: &WindowMemory) -> RoleWord {
    RoleWord::decode(m.load(word::ROLE).unwrap()).unwrap()
}

fn agent(c: &Cluster, id: u16, sites: usize) -> Arc<Agent> {
    agent_routing(c, id, sites, None)
}

fn agent_routing(
    c: &Cluster,
    id: u16,
    sites: usize,
    routing: Option<Arc<ArcSwap<Backends>>>,
) -> Arc<Agent> {
    agent_over(c, id, sites, source(c), routing)
}

/// The cluster's windows, in process.
fn source(c: &Cluster) -> Source {
    Source {
        nodes: c
            .nodes
            .iter()
            .map(|m| Arc::new(LocalWindow::new(m.clone())) as Arc<dyn RemoteWindow>)
            .collect(),
        proxies: c
            .proxies
            .iter()
            .enumerate()
            .map(|(i, m)| {
                (
                    i as u16 + 1,
                    Arc::new(LocalWindow::new(m.clone())) as Arc<dyn RemoteWindow>,
                )
            })
            .collect(),
    }
}

/// An agent reaching the cluster through `source`.
fn agent_over(
    c: &Cluster,
    id: u16,
    sites: usize,
    source: Source,
    routing: Option<Arc<ArcSwap<Backends>>>,
) -> Arc<Agent> {
    let reconfig = Reconfig {
        mode: ReconfigMode::Reconfigure,
        sensitivity: S,
        cooldown: Duration::from_secs(5),
        // The burst estimate is off unless a test turns it on
        // (tests/loans.rs): these tests repeat hot events of one length and
        // count a claim for each.
        claim_horizon: crate::config::Delay::Off,
        // Likewise the guarantee trigger, the reserve and batches
        // (tests/qos.rs turns them on): a short site waits for T and
        // claims one node per hot event.
        guarantee_history: crate::config::Delay::Off,
        guarantee_hold: crate::config::Delay::Off,
        claim_batch: 1,
        lock_home: 1,
        peers: (1..=c.proxies.len() as u16)
            .filter(|p| *p != id)
            .map(|p| crate::config::PeerProxy {
                id: p,
                window: crate::config::WindowEndpoint::Shm {
                    path: format!("/unused/{p}").into(),
                },
            })
            .collect(),
        ..Reconfig::default()
    };
    let settings = AgentSettings {
        proxy_id: id,
        reconfig,
        sites: (0..sites)
            .map(|s| {
                let limits = SiteLimits {
                    min_nodes: 1,
                    max_nodes: 100,
                };
                AgentSite {
                    name: format!("s{s}"),
                    limits,
                }
            })
            .collect(),
        nodes: (0..c.nodes.len())
            .map(|i| AgentNode {
                name: format!("n{i}"),
                has_window: true,
                configured_site: None,
            })
            .collect(),
        read_policy: ReadPolicy::default(),
    };
    Arc::new(Agent::new(
        settings,
        c.proxies[id as usize - 1].clone(),
        Arc::new(source),
        routing,
    ))
}

/// The agent [`agent`] builds, with `policy` for its QoS rules.
fn agent_qos(c: &Cluster, id: u16, policy: crate::qos::guarantee::QosPolicy) -> Arc<Agent> {
    let a = agent(c, id, policy.names.len());
    let Ok(a) = Arc::try_unwrap(a) else {
        unreachable!("a new agent has one owner")
    };
    Arc::new(a.with_qos(policy))
}

/// An event's kind, node, from, to and epoch.
fn event(
    e: &crate::reconfig::events::Event,
) -> (EventKind, &str, Option<&str>, Option<&str>, Option<u64>) {
    (
        e.kind,
        e.node.as_str(),
        e.from.as_deref(),
        e.to.as_deref(),
        e.epoch,
    )
}

fn epochs(c: &Cluster) -> u64 {
    c.nodes.iter().map(|m| role(m).epoch - 1).sum()
}

#[tokio::test(start_paused = true)]
async fn a_short_spike_never_moves_a_node_and_a_sustained_one_does() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 1);
    let a = agent(&c, 1, 2);
    load(&c.nodes[1], 0.05);
    load(&c.nodes[2], 0.10);
    // Spikes of 0.8 s (four rounds above 0.8) separated by a quiet round.
    for _ in 0..3 {
        for l in [0.95, 0.95, 0.95, 0.95, 0.1] {
            load(&c.nodes[0], l);
            a.round().await;
            tokio::time::sleep(S).await;
        }
    }
    assert_eq!(epochs(&c), 0, "no node moved for short spikes");
    // Sustained: hot once T (1 s) has passed.
    load(&c.nodes[0], 0.95);
    let mut claimed_at = None;
    for r in 0..10 {
        let (_, outcomes) = a.round().await;
        if outcomes
            .iter()
            .any(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. })))
        {
            claimed_at.get_or_insert(r);
        }
        tokio::time::sleep(S).await;
    }
    assert_eq!(
        claimed_at,
        Some(5),
        "claimed in the round T after the load rose"
    );
    assert_eq!(epochs(&c), 1, "exactly one node moved");
    // The least loaded node of the other site was taken.
    assert_eq!(
        role(&c.nodes[1]),
        RoleWord {
            site: SiteSlot::Site(0),
            state: RoleState::Switching,
            epoch: 2
        }
    );
    assert_eq!(c.nodes[1].load(word::CLAIM_PROXY), Some(1));
    assert_eq!(a.counters().snapshot().claims, 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_node_is_rolled_back_and_not_picked_until_active() {
    let c = cluster(&[Some(0), Some(1), Some(1), None], 1);
    let a = agent(&c, 1, 2);
    for n in &c.nodes[1..] {
        load(n, 0.05);
    }
    load(&c.nodes[3], 0.01);
    load(&c.nodes[0], 0.95);
    let mut rounds = 0;
    while epochs(&c) == 0 && rounds < 20 {
        a.round().await;
        tokio::time::sleep(S).await;
        rounds += 1;
    }
    assert_eq!(role(&c.nodes[3]).site, SiteSlot::Site(0), "idle node first");
    // The sidecar fails to apply epoch 2 and still serves idle.
    apply(&c.nodes[3], 2, SiteSlot::Idle, RoleStatusCode::VerifyFailed);
    a.round().await;
    assert_eq!(
        role(&c.nodes[3]),
        RoleWord {
            site: SiteSlot::Idle,
            state: RoleState::Switching,
            epoch: 3
        }
    );
    assert_eq!(a.counters().snapshot().rollbacks, 1);
    // The event log has the claim, then the rollback, newest first.
    let events = a.status().events;
    assert_eq!(
        events.iter().map(event).collect::<Vec<_>>(),
        [
            (EventKind::Rollback, "n3", Some("s0"), Some("idle"), Some(3)),
            (EventKind::Claim, "n3", Some("idle"), Some("s0"), Some(2)),
        ]
    );
    assert_eq!(
        events[0].detail.as_deref(),
        Some(RoleStatusCode::VerifyFailed.as_str())
    );
    assert!(events[0].at_unix_ms >= events[1].at_unix_ms);
    // Until the node is ACTIVE again (and its cool-down over), the donor is
    // another node, however idle node 3 looks.
    let before = epochs(&c);
    for _ in 0..40 {
        a.round().await;
        tokio::time::sleep(S).await;
        if epochs(&c) > before {
            break;
        }
    }
    assert_eq!(
        role(&c.nodes[3]).epoch,
        3,
        "not picked while switching back"
    );
    assert_eq!(epochs(&c), before + 1);
    let status = a.status();
    assert!(status.nodes.iter().all(|n| n.error.is_none()));
}

#[tokio::test(start_paused = true)]
async fn three_agents_racing_make_exactly_one_claim_per_hot_event() {
    let c = cluster(&[Some(0), Some(1), Some(1), Some(1), None, None], 3);
    let agents: Vec<_> = (1..=3).map(|id| agent(&c, id, 2)).collect();
    for n in &c.nodes[1..] {
        load(n, 0.02);
    }
    let site0_load = |l: f64| {
        for m in c.nodes.iter().filter(|m| role(m).site == SiteSlot::Site(0)) {
            load(m, l);
        }
    };
    for event in 1..=3u64 {
        site0_load(0.95);
        // Run the three agents' rounds concurrently until one claims; then
        // let them run on a while: nobody may claim for the same event.
        for _ in 0..15 {
            futures_util::future::join_all(agents.iter().map(|a| a.round())).await;
            tokio::time::sleep(S).await;
        }
        assert_eq!(epochs(&c), event, "event {event}: one claim");
        // The sidecar applies the claim; the event is over.
        for m in &c.nodes {
            let r = role(m);
            if r.state == RoleState::Switching {
                apply(m, r.epoch, r.site, RoleStatusCode::Ok);
            }
        }
        site0_load(0.1);
        for _ in 0..30 {
            futures_util::future::join_all(agents.iter().map(|a| a.round())).await;
            tokio::time::sleep(S).await;
        }
    }
    let claims: u64 = agents.iter().map(|a| a.counters().snapshot().claims).sum();
    assert_eq!(claims, 3);
}

#[tokio::test(start_paused = true)]
async fn admin_moves_use_the_same_lock_and_cas() {
    let c = cluster(&[Some(0), Some(1)], 2);
    let a = agent(&c, 1, 2);
    let b = agent(&c, 2, 2);
    load(&c.nodes[0], 0.3);
    load(&c.nodes[1], 0.3);
    b.round().await;
    assert!(matches!(
        a.move_node("n1", "s0").await,
        Ok(ClaimOutcome::Claimed { epoch: 2, .. })
    ));
    // Proxy 1 logs its admin move; proxy 2 sees the role change in its
    // next round.
    assert_eq!(
        event(&a.status().events[0]),
        (EventKind::AdminMove, "n1", Some("s1"), Some("s0"), Some(2))
    );
    b.round().await;
    assert_eq!(
        event(&b.status().events[0]),
        (EventKind::Move, "n1", Some("s1"), Some("s0"), Some(2))
    );
    // Proxy 2's counter for s0 moved, so its agent skips its next s0 round.
    assert_eq!(
        c.proxies[1].load(rdmalb_window::layout::update_counter_word(0).unwrap()),
        Some(1)
    );
    assert!(
        matches!(
            b.move_node("n1", "s1").await,
            Err(MoveError::NotMovable { .. })
        ),
        "a switching node does not move"
    );
    assert!(matches!(
        b.move_node("n9", "s1").await,
        Err(MoveError::UnknownNode(_))
    ));
    assert!(matches!(
        b.move_node("n0", "blog").await,
        Err(MoveError::UnknownSite(_))
    ));
    // Someone else holds s1's lock: refused, nothing changes.
    let lock = rdmalb_window::layout::site_lock_word(1).unwrap();
    let held = rdmalb_window::SiteLock::held(2, rdmalb_base::time::unix_now_ms() + 60_000)
        .unwrap()
        .encode();
    c.proxies[0].compare_swap(lock, 0, held);
    assert_eq!(
        a.move_node("n0", "s1").await.unwrap(),
        ClaimOutcome::LockBusy { owner: 2 }
    );
    assert_eq!(role(&c.nodes[0]).epoch, 1);
}

#[tokio::test(start_paused = true)]
async fn taking_a_node_out_of_a_site_needs_that_sites_lock_too() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 1);
    let a = agent(&c, 1, 2);
    load(&c.nodes[0], 0.95);
    load(&c.nodes[1], 0.05);
    load(&c.nodes[2], 0.05);
    // Another proxy holds the donor site's lock (it is taking a node out of
    // it for a third site, say): the hot site must not take one meanwhile,
    // or both could take its last spare node below min_nodes.
    let lock = rdmalb_window::layout::site_lock_word(1).unwrap();
    let held = rdmalb_window::SiteLock::held(9, rdmalb_base::time::unix_now_ms() + 3_600_000)
        .unwrap()
        .encode();
    c.proxies[0].compare_swap(lock, 0, held);
    let mut busy = 0;
    for _ in 0..10 {
        let (_, outcomes) = a.round().await;
        busy += outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::LockBusy { owner: 9 })))
            .count();
        tokio::time::sleep(S).await;
    }
    assert!(busy > 0);
    assert_eq!(epochs(&c), 0);
    assert_eq!(
        c.proxies[0].load(rdmalb_window::layout::site_lock_word(0).unwrap()),
        Some(0),
        "the hot site's own lock was released"
    );
    c.proxies[0].compare_swap(lock, held, 0);
    for _ in 0..10 {
        a.round().await;
        tokio::time::sleep(S).await;
    }
    assert_eq!(epochs(&c), 1);
    assert_eq!(c.proxies[0].load(lock), Some(0), "both locks released");
}

#[tokio::test(start_paused = true)]
async fn routing_follows_a_claim_made_by_another_proxy_within_role_poll() {
    let c = cluster(&[Some(0), Some(1), Some(1)], 2);
    let mut text = String::from(
        "[[listener]]\nlisten = \"127.0.0.1:8080\"\n[[site]]\nname = \"s0\"\nhosts = [\"s0.test\"]\n[[site]]\nname = \"s1\"\nhosts = [\"s1.test\"]\n",
    );
    for (i, site) in ["s0", "s1", "s1"].iter().enumerate() {
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"{site}\"\ntransport = \"shm\"\nsidecar = \"/dev/shm/unused-n{i}\"\n",
            9000 + i
        ));
    }
    let config = crate::fixtures::config(&text);
    let backends = Arc::new(ArcSwap::from_pointee(Backends::build(&config, None)));
    let watcher = agent_routing(&c, 1, 2, Some(backends.clone()));
    let claimer = agent(&c, 2, 2);
    for m in &c.nodes {
        load(m, 0.1);
    }
    watcher.poll_roles().await;
    let n2 = backends.load().nodes()[2].clone();
    assert!(n2.serves(1));
    // Proxy 2 moves n2 to s0: proxy 1's routing drops it from s1 at its
    // next role poll, without a round of its agent.
    assert!(matches!(
        claimer.move_node("n2", "s0").await,
        Ok(ClaimOutcome::Claimed { .. })
    ));
    assert!(n2.serves(1), "not seen yet");
    watcher.poll_roles().await;
    assert!(!n2.serves(1) && !n2.serves(0), "switching: serves nothing");
    apply(&c.nodes[2], 2, SiteSlot::Site(0), RoleStatusCode::Ok);
    watcher.poll_roles().await;
    assert!(n2.serves(0));
}

mod faults;
mod fences;
mod loans;
mod qos;

/// Experiment 5's Zipf run (issue 16) on the agent: web (s0) on n0 and n1,
/// app (s1) on n2 and n3, both loaded; app is hot all along. Web's work
/// dips for a round (and then for less than T): no node goes. Only a dip
/// that lasts T lets web's idle node go; when web is then hot itself
/// (after the node's cool-down), it takes that node back, not app's least
/// loaded one.
#[tokio::test(start_paused = true)]
async fn a_dip_shorter_than_t_gives_no_node_and_a_site_gets_back_what_it_gave() {
    let c = cluster(&[Some(0), Some(0), Some(1), Some(1)], 1);
    let a = agent(&c, 1, 2);
    let web = |l0: f64, l1: f64| {
        load(&c.nodes[0], l0);
        load(&c.nodes[1], l1);
    };
    web(0.9, 0.9);
    load(&c.nodes[2], 1.8);
    load(&c.nodes[3], 1.8);
    let rounds = |n: usize| {
        let a = a.clone();
        async move {
            for _ in 0..n {
                a.round().await;
                tokio::time::sleep(S).await;
            }
        }
    };
    // App hot for T (1 s); web loaded.
    rounds(6).await;
    // One round where web's work fits on one node (n1's sample idle).
    web(0.3, 0.05);
    rounds(1).await;
    web(0.9, 0.9);
    rounds(3).await;
    // A dip of four rounds (0.8 s < T).
    web(0.3, 0.05);
    rounds(4).await;
    web(0.9, 0.9);
    rounds(3).await;
    assert_eq!(epochs(&c), 0, "no node moved for dips shorter than T");
    // A dip that lasts T: web's idle node n1 is spare and goes to app.
    web(0.3, 0.05);
    rounds(7).await;
    assert_eq!(epochs(&c), 1, "one node moved once web was spare for T");
    assert_eq!(role(&c.nodes[1]).site, SiteSlot::Site(1));
    apply(
        &c.nodes[1],
        role(&c.nodes[1]).epoch,
        SiteSlot::Site(1),
        RoleStatusCode::Ok,
    );
    // App's load falls (it has spare nodes, n3 the least loaded). Web
    // stays under the watermark for n1's cool-down (5 s), then is loaded
    // on its one node: hot after T, it takes n1 back (within two
    // cool-downs of the move).
    load(&c.nodes[0], 0.5);
    load(&c.nodes[1], 0.1);
    load(&c.nodes[2], 0.3);
    load(&c.nodes[3], 0.02);
    rounds(25).await;
    assert_eq!(epochs(&c), 1);
    load(&c.nodes[0], 1.5);
    let mut back = None;
    for r in 0..40 {
        let (_, outcomes) = a.round().await;
        if outcomes
            .iter()
            .any(|(s, o)| *s == 0 && matches!(o, Ok(ClaimOutcome::Claimed { .. })))
        {
            back = Some(r);
            break;
        }
        tokio::time::sleep(S).await;
    }
    assert!(back.is_some(), "web claimed a node");
    assert_eq!(epochs(&c), 2, "exactly one more move");
    assert_eq!(role(&c.nodes[1]).site, SiteSlot::Site(0), "n1 came back");
    assert_eq!(role(&c.nodes[3]).site, SiteSlot::Site(1), "not app's n3");
}
