//! Donor rules: priority order, min_nodes, guarantees, busy pulls only from
//! strictly lower priority for a short site, multi-stage pulls, idle nodes
//! flowing back, and a property test of the invariants.

use proptest::prelude::*;

use super::*;
use crate::reconfig::view::{test_view, Freshness};
use rdmalb_window::{RoleStatus, RoleStatusCode};

const LIMITS: [SiteLimits; 3] = [SiteLimits {
    min_nodes: 1,
    max_nodes: 10,
}; 3];

fn node(index: usize, site: SiteSlot, load: f64) -> Option<NodeView> {
    let mut v = test_view(site, 1, 1, load);
    v.index = index;
    Some(v)
}

fn site(s: u16) -> SiteSlot {
    SiteSlot::Site(s)
}

/// A site's last interval: `offered` and `served` rps against `guarantee`.
/// One interval of S = 200 ms at these rates.
fn qos(offered: f64, served: f64, guarantee: f64) -> SiteQos {
    SiteQos {
        offered_rps: offered,
        served_rps: served,
        guarantee_rps: guarantee,
        interval_s: 0.2,
        ..SiteQos::default()
    }
}

/// A query with the tests' usual settings (limits min 1 / max 10, no
/// priorities, QoS, reserve, homes, history or take-back; watermarks 0.2
/// and 0.8; nothing cooling): each test spells out only what differs.
fn query<'a>(hot_site: usize, views: &'a [Option<NodeView>]) -> DonorQuery<'a> {
    DonorQuery {
        hot_site,
        views,
        sites: &LIMITS,
        priorities: &[],
        qos: &[],
        fixed: &[0, 0],
        low_watermark: 0.2,
        high_watermark: 0.8,
        cooling: &|_| false,
        reserve: &[],
        homes: &[],
        spare: &[],
        given: &[],
    }
}

/// One decision for hot site `hot` with `cooling`, the rest as in the
/// query (so one query serves several hot sites).
trait Pick {
    fn pick(&self, hot: usize, cooling: &dyn Fn(usize) -> bool) -> Option<usize>;
}

impl Pick for DonorQuery<'_> {
    fn pick(&self, hot: usize, cooling: &dyn Fn(usize) -> bool) -> Option<usize> {
        choose_donor(&DonorQuery {
            hot_site: hot,
            cooling,
            ..*self
        })
    }
}

fn pick(views: &[Option<NodeView>], hot: usize, cooling: &dyn Fn(usize) -> bool) -> Option<usize> {
    query(hot, views).pick(hot, cooling)
}

#[test]
fn lowest_idle_node_of_another_site_that_keeps_its_minimum() {
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(1), 0.10),
        node(2, site(1), 0.05),
        node(3, site(2), 0.01), // site 2's only node: min_nodes 1
        None,
    ];
    assert_eq!(pick(&views, 0, &|_| false), Some(2));
    assert_eq!(
        pick(&views, 0, &|i| i == 2),
        Some(1),
        "cooling node skipped"
    );
    assert_eq!(pick(&views, 0, &|i| i == 1 || i == 2), None);
}

#[test]
fn a_node_idle_for_a_moment_in_a_loaded_site_is_not_given() {
    // Site 1's mean load is 0.63, under the high watermark, but on one node
    // fewer its work would be 0.95: taking n3 would make it hot.
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(1), 0.9),
        node(2, site(1), 0.9),
        node(3, site(1), 0.1),
    ];
    assert_eq!(pick(&views, 0, &|_| false), None);
    // Lighter, 0.45 on two nodes: n3 is spare.
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(1), 0.4),
        node(2, site(1), 0.5),
        node(3, site(1), 0.1),
    ];
    assert_eq!(pick(&views, 0, &|_| false), Some(3));
}

#[test]
fn idle_pool_nodes_have_no_minimum_and_come_first() {
    let views = vec![
        node(0, site(0), 0.9),
        node(1, site(1), 0.01),
        node(2, site(1), 0.01),
        node(3, SiteSlot::Idle, 0.15),
    ];
    assert_eq!(pick(&views, 0, &|_| false), Some(3));
}

#[test]
fn busy_failed_switching_and_gone_nodes_are_never_donors() {
    let mut views = vec![
        node(0, site(0), 0.9),
        node(1, SiteSlot::Idle, 0.5), // busy
        node(2, SiteSlot::Idle, 0.0),
        node(3, SiteSlot::Idle, 0.0),
        node(4, SiteSlot::Idle, 0.0),
    ];
    if let Some(v) = views[2].as_mut() {
        v.applied = 0; // switching
    }
    if let Some(v) = views[3].as_mut() {
        v.applied = 0;
        v.status = Some(RoleStatus {
            epoch: 1,
            serving: SiteSlot::Idle,
            code: RoleStatusCode::RenderFailed,
        });
    }
    if let Some(v) = views[4].as_mut() {
        v.freshness = Freshness::Stale;
    }
    assert_eq!(pick(&views, 0, &|_| false), None);
}

#[test]
fn a_site_at_max_nodes_takes_nothing() {
    let views = vec![node(0, site(0), 0.9), node(1, SiteSlot::Idle, 0.0)];
    let limits = [SiteLimits {
        min_nodes: 0,
        max_nodes: 1,
    }];
    let case = DonorQuery {
        sites: &limits,
        ..query(0, &views)
    };
    assert_eq!(case.pick(0, &|_| false), None);
}

#[test]
fn idle_nodes_of_the_lowest_priority_site_first_then_the_lowest_load() {
    // Site 0 is hot; site 1 (priority 9) and site 2 (priority 1) both have
    // idle nodes; site 2's is the more loaded one but the less important.
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(1), 0.01),
        node(2, site(1), 0.02),
        node(3, site(2), 0.15),
        node(4, site(2), 0.10),
        node(5, site(2), 0.12),
    ];
    let case = DonorQuery {
        priorities: &[5, 9, 1],
        ..query(0, &views)
    };
    assert_eq!(case.pick(0, &|_| false), Some(4));
    assert_eq!(case.pick(0, &|i| i == 4), Some(5));
    // Site 2's idle nodes all cooling: site 1's, lowest load first.
    assert_eq!(case.pick(0, &|i| i >= 3), Some(1));
}

#[test]
fn busy_nodes_only_for_a_short_site_and_only_from_strictly_lower_priority() {
    // Site 0 (priority 5, guarantee 500) is served 300 of its 800 rps.
    let views = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.9), // priority 5: equal
        node(2, site(1), 0.9),
        node(3, site(2), 0.7), // priority 1: lower
        node(4, site(2), 0.6),
    ];
    let short = [
        qos(800.0, 300.0, 500.0),
        qos(0.0, 0.0, 0.0),
        qos(0.0, 0.0, 0.0),
    ];
    let case = DonorQuery {
        priorities: &[5, 5, 1],
        qos: &short,
        ..query(0, &views)
    };
    assert!(short[0].short());
    assert_eq!(case.pick(0, &|_| false), Some(4), "lowest load of site 2");
    // Equal priority never gives a busy node.
    assert_eq!(case.pick(0, &|i| i >= 3), None);
    // Keeping the guarantee (or hot by load alone): no busy pull at all.
    let kept = [
        qos(800.0, 520.0, 500.0),
        qos(0.0, 0.0, 0.0),
        qos(0.0, 0.0, 0.0),
    ];
    let case = DonorQuery { qos: &kept, ..case };
    assert_eq!(case.pick(0, &|_| false), None);
    // The lower-priority site never takes a busy node from a higher one,
    // even short of its own guarantee.
    let low_short = [
        qos(0.0, 0.0, 0.0),
        qos(0.0, 0.0, 0.0),
        qos(900.0, 100.0, 400.0),
    ];
    let case = DonorQuery {
        qos: &low_short,
        ..case
    };
    assert_eq!(case.pick(2, &|_| false), None);
}

#[test]
fn a_short_site_takes_an_idle_lower_priority_node_without_its_spare_history() {
    // Start-up (issue 16, experiment 3): site 1's nodes are idle, but no
    // round of T has been seen yet, so site 1 is not spare over T. Site 0
    // (priority 5, guarantee 1200) is short: 1080 of 1500 rps served.
    let views = vec![
        node(0, site(0), 1.0),
        node(1, site(1), 0.05),
        node(2, site(1), 0.05),
    ];
    let short = [qos(1500.0, 1080.0, 1200.0), qos(0.0, 0.0, 0.0)];
    let case = DonorQuery {
        priorities: &[5, 0],
        qos: &short,
        spare: &[false, false],
        ..query(0, &views)
    };
    assert_eq!(case.pick(0, &|_| false), Some(1), "a priority pull");
    // Not short: the idle node waits for the spare history, as before.
    let kept = [qos(1500.0, 1300.0, 1200.0), qos(0.0, 0.0, 0.0)];
    assert_eq!(DonorQuery { qos: &kept, ..case }.pick(0, &|_| false), None);
    // Short, but of equal priority: no pull, so the spare rule holds.
    assert_eq!(
        DonorQuery {
            priorities: &[5, 5],
            ..case
        }
        .pick(0, &|_| false),
        None
    );
    // min_nodes still holds: site 1's last node stays.
    let one = vec![node(0, site(0), 1.0), node(1, site(1), 0.05)];
    assert_eq!(
        DonorQuery {
            views: &one,
            ..case
        }
        .pick(0, &|_| false),
        None
    );
}

#[test]
fn a_busy_pull_never_takes_a_donor_below_min_nodes() {
    let views = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 0.7),
        node(2, site(1), 0.6),
    ];
    let short = [qos(800.0, 300.0, 500.0), qos(0.0, 0.0, 0.0)];
    let limits = [
        LIMITS[0],
        SiteLimits {
            min_nodes: 2,
            max_nodes: 10,
        },
    ];
    let case = DonorQuery {
        priorities: &[5, 1],
        qos: &short,
        sites: &limits,
        ..query(0, &views)
    };
    assert_eq!(case.pick(0, &|_| false), None);
}

#[test]
fn a_donor_keeps_the_nodes_its_own_guarantee_needs() {
    // Site 1 (priority 1, guarantee 200): 3 nodes fully busy serving 300
    // rps, so 100 rps per node.
    let views = vec![
        node(0, site(0), 1.2),
        node(1, site(1), 1.0),
        node(2, site(1), 1.0),
        node(3, site(1), 1.0),
    ];
    let priorities = [5, 1];
    // Demand 900 rps: the guarantee's 200 (+5%) need all 3 nodes.
    let busy = [qos(800.0, 300.0, 500.0), qos(900.0, 300.0, 200.0)];
    let case = DonorQuery {
        priorities: &priorities,
        qos: &busy,
        ..query(0, &views)
    };
    assert_eq!(case.pick(0, &|_| false), None);
    // Guarantee 150: 158 rps need 2 nodes, one can go.
    let lower = [qos(800.0, 300.0, 500.0), qos(900.0, 300.0, 150.0)];
    let case = DonorQuery {
        qos: &lower,
        ..case
    };
    assert_eq!(case.pick(0, &|_| false), Some(1));
    // Demand but nothing served: capacity unknown, nothing is taken.
    let unknown = [qos(800.0, 300.0, 500.0), qos(900.0, 0.0, 150.0)];
    let case = DonorQuery {
        qos: &unknown,
        ..case
    };
    assert_eq!(case.pick(0, &|_| false), None);
}

#[test]
fn multi_stage_priority_i_plus_1_pulls_from_i() {
    // Top (2) and middle (1) have guarantees, bottom (0) is best effort
    // with 3 busy nodes.
    let mut views = vec![
        node(0, site(0), 1.3),
        node(1, site(1), 0.9),
        node(2, site(1), 0.9),
        node(3, site(1), 0.9),
        node(4, site(2), 0.8),
        node(5, site(2), 0.9),
        node(6, site(2), 0.7),
    ];
    let priorities = [2, 1, 0];
    // Stage 1: top is short; bottom's nodes just moved (cooling), so it
    // pulls from the level below it: middle, whose guarantee needs 2 of 3.
    let q1 = [
        qos(900.0, 200.0, 600.0),
        qos(400.0, 390.0, 200.0),
        qos(500.0, 480.0, 0.0),
    ];
    let stage1 = DonorQuery {
        priorities: &priorities,
        qos: &q1,
        ..query(0, &views)
    }
    .pick(0, &|i| i >= 4);
    assert_eq!(stage1, Some(1));
    // Stage 2: node 1 now serves top; middle, down to 2 nodes, is short of
    // its guarantee and pulls from bottom (cooled down by now).
    views[1] = node(1, site(0), 0.9);
    let q2 = [
        qos(900.0, 500.0, 600.0),
        qos(400.0, 150.0, 200.0),
        qos(500.0, 480.0, 0.0),
    ];
    let case = DonorQuery {
        priorities: &priorities,
        qos: &q2,
        ..query(0, &views)
    };
    assert_eq!(case.pick(1, &|_| false), Some(6), "bottom's least loaded");
    // Top, short too, would now take straight from bottom, not middle.
    assert_eq!(case.pick(0, &|_| false), Some(6));
    // Bottom has nothing strictly lower to pull from.
    assert_eq!(case.pick(2, &|_| false), None);
}

#[test]
fn idle_nodes_flow_back_when_high_priority_demand_falls() {
    // High (priority 9, guarantee 300) and best-effort low (priority 0),
    // hot by load.
    let burst = vec![
        node(0, site(0), 0.95),
        node(1, site(0), 0.9),
        node(2, site(0), 0.9),
        node(3, site(1), 1.5),
    ];
    let priorities = [9, 0];
    let during = [qos(900.0, 880.0, 300.0), qos(400.0, 100.0, 0.0)];
    let case = DonorQuery {
        priorities: &priorities,
        qos: &during,
        ..query(0, &burst)
    };
    assert_eq!(case.pick(1, &|_| false), None, "high's nodes are busy");
    // The burst is over: 30 rps at 5% load; its guarantee needs 1 node.
    let after = vec![
        node(0, site(0), 0.05),
        node(1, site(0), 0.04),
        node(2, site(0), 0.06),
        node(3, site(1), 1.5),
    ];
    let calm = [qos(30.0, 30.0, 300.0), qos(400.0, 100.0, 0.0)];
    let case = DonorQuery {
        views: &after,
        qos: &calm,
        ..case
    };
    assert_eq!(case.pick(1, &|_| false), Some(1));
    // Two nodes later, high keeps its minimum (and its guarantee's node).
    let flowed = vec![
        node(0, site(1), 0.7),
        node(1, site(1), 0.7),
        node(2, site(0), 0.06),
        node(3, site(1), 0.7),
    ];
    let case = DonorQuery {
        views: &flowed,
        ..case
    };
    assert_eq!(case.pick(1, &|_| false), None);
}

#[test]
fn a_donor_keeps_its_guarantee_reserve() {
    // Site 0 (guarantee, no demand now) has 3 idle nodes; site 1 is hot.
    let views = vec![
        node(0, site(0), 0.0),
        node(1, site(0), 0.0),
        node(2, site(0), 0.0),
        node(3, site(1), 1.5),
    ];
    let idle = [qos(0.0, 0.0, 600.0), qos(0.0, 0.0, 0.0)];
    let case = DonorQuery {
        priorities: &[10, 0],
        qos: &idle,
        ..query(0, &views)
    };
    // No reserve: its idle nodes flow to the hot site down to min_nodes.
    assert_eq!(case.pick(1, &|_| false), Some(0));
    // Its recent peak needed 3 nodes: it keeps them all.
    let held = DonorQuery {
        reserve: &[3, 0],
        ..case
    };
    assert_eq!(held.pick(1, &|_| false), None);
    // A peak of 2: one node may go.
    let two = DonorQuery {
        reserve: &[2, 0],
        ..case
    };
    assert_eq!(two.pick(1, &|_| false), Some(0));
    // The reserve is counted by `guarantee_needs` only from the need now.
    let q = DonorQuery {
        priorities: &[10, 0],
        qos: &idle,
        ..query(1, &views)
    };
    assert_eq!(guarantee_needs(&q), vec![0, 0, 0]);
}

/// A query for `shortfall` of `hot` over `views` with `qos`, min 1 / max 10.
fn short_by(views: &[Option<NodeView>], hot: usize, qos: &[SiteQos], short: bool) -> usize {
    shortfall(
        &DonorQuery {
            qos,
            fixed: &[0, 0, 0],
            ..query(hot, views)
        },
        short,
    )
}

#[test]
fn shortfall_is_the_guarantee_need_or_the_queued_work() {
    // One node serving 350 rps at full load; guarantee 1200 of an offered
    // 1500: 1260 / 350 -> 4 nodes, 3 more.
    let views = vec![
        node(0, site(0), 1.0),
        node(1, site(1), 0.1),
        node(2, site(1), 0.1),
        node(3, site(1), 0.1),
        node(4, site(1), 0.1),
    ];
    let gold = [qos(1500.0, 350.0, 1200.0), qos(0.0, 0.0, 0.0)];
    assert_eq!(short_by(&views, 0, &gold, true), 3);
    // Not short: the guarantee does not count; load 1.0 is no queue.
    assert_eq!(short_by(&views, 0, &gold, false), 1);
    // Two nodes with work queued to 2.6x their capacity: 6 nodes' worth,
    // 4 more.
    let queued = vec![node(0, site(0), 2.6), node(1, site(0), 2.6)];
    assert_eq!(short_by(&queued, 0, &[], false), 4);
    // A load just above the watermark: one node.
    let warm = vec![node(0, site(0), 0.9), node(1, site(0), 0.85)];
    assert_eq!(short_by(&warm, 0, &[], false), 1);
    // Never beyond max_nodes (10): a huge queue asks for the room left.
    let flooded = vec![node(0, site(0), 1e12), node(1, site(0), 1e12)];
    assert_eq!(short_by(&flooded, 0, &[], false), 8);
    // At max_nodes: nothing.
    let full: Vec<Option<NodeView>> = (0..10).map(|i| node(i, site(0), 3.0)).collect();
    assert_eq!(short_by(&full, 0, &[], false), 0);
}

/// A random cluster: 3 sites with random priorities, minimums, guarantees
/// and rates; 8 nodes with random sites, loads and states.
fn cluster() -> impl Strategy<Value = (Vec<Option<NodeView>>, [u32; 3], [SiteQos; 3], [usize; 3])> {
    let nodes = (0u16..4, 0.0f64..1.5, 0u8..6);
    let sites = (
        0u32..3,
        0usize..4,
        0.0f64..500.0,
        0.0f64..800.0,
        0.0f64..1.0,
    );
    (
        prop::collection::vec(nodes, 8),
        prop::array::uniform3(sites),
    )
        .prop_map(|(nodes, sites)| {
            let views = nodes
                .into_iter()
                .enumerate()
                .map(|(i, (s, load, state))| {
                    let slot = if s == 3 {
                        SiteSlot::Idle
                    } else {
                        SiteSlot::Site(s)
                    };
                    let mut v = node(i, slot, load)?;
                    match state {
                        0 => v.applied = 0,                  // switching
                        1 => v.freshness = Freshness::Stale, // sidecar gone
                        _ => {}
                    }
                    Some(v)
                })
                .collect();
            let priorities = sites.map(|s| s.0);
            let qos = sites.map(|(_, _, g, offered, served)| qos(offered, offered * served, g));
            let mins = sites.map(|s| s.1);
            (views, priorities, qos, mins)
        })
}

proptest! {
    #[test]
    fn the_donor_rules_always_hold(
        (views, priorities, qos, mins) in cluster(),
        hot in 0usize..3,
        cooling in prop::collection::vec(any::<bool>(), 8),
        reserve in prop::array::uniform3(0usize..5),
        spare in prop::array::uniform3(any::<bool>()),
        given in prop::collection::vec(prop::option::of(0usize..3), 8),
    ) {
        let sites = mins.map(|m| SiteLimits { min_nodes: m, max_nodes: 10 });
        let q = DonorQuery {
            sites: &sites,
            priorities: &priorities,
            qos: &qos,
            fixed: &[0, 0, 0],
            cooling: &|i| cooling[i],
            reserve: &reserve,
            spare: &spare,
            given: &given,
            ..query(hot, &views)
        };
        if let Some(i) = choose_donor(&q) {
            let v = views[i].as_ref().expect("a donor has a view");
            prop_assert!(v.is_live() && v.effective() == Effective::Active && !cooling[i]);
            let load = v.load.expect("live");
            if let Some(d) = v.role.site.index() {
                prop_assert_ne!(d, hot);
                let members = q.members(d);
                prop_assert!(members > mins[d], "donor site below min_nodes");
                prop_assert!(members > q.needed(d), "donor below its guarantee");
                prop_assert!(members > reserve[d], "donor below its guarantee reserve");
                if load >= 0.2 {
                    prop_assert!(priorities[d] < priorities[hot], "busy from higher or equal priority");
                    prop_assert!(qos[hot].short(), "busy pull for a site that is not short");
                } else {
                    let pulled = qos[hot].short() && priorities[d] < priorities[hot];
                    prop_assert!(
                        spare[d] || given[i] == Some(hot) || pulled,
                        "idle node of a site not spare over T"
                    );
                }
            } else {
                prop_assert!(load < 0.2, "busy idle-pool node");
            }
        }
    }
}

mod history;

#[test]
fn a_site_below_its_share_takes_back_only_its_own_or_a_node_it_gave() {
    // 2:2 by the config (n0, n1 home site 0; n2, n3 home site 1). n1 is on
    // loan to site 1, which is idle: site 0, hot on n0 alone, is below its
    // share and the donor is its own n1.
    let homes = [Some(0), Some(0), Some(1), Some(1)];
    let shares = [2, 2];
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(1), 0.01),
        node(2, site(1), 0.02),
        node(3, site(1), 0.03),
    ];
    let q = DonorQuery {
        homes: &homes,
        ..query(0, &views)
    };
    assert_eq!(choose_home_claim(&q, &shares), Some(1));
    // n1 cooling: the donor would be n2, site 1's own node, a move away
    // from the split: not a take-back (the burst estimate decides).
    let cooling = |i: usize| i == 1;
    let q = DonorQuery {
        homes: &homes,
        cooling: &cooling,
        ..query(0, &views)
    };
    assert_eq!(choose_donor(&q), Some(2));
    assert_eq!(choose_home_claim(&q, &shares), None);
    // ... unless site 0 gave n2 away within the take-back window.
    let given = [None, None, Some(0), None];
    let q = DonorQuery {
        homes: &homes,
        cooling: &cooling,
        given: &given,
        ..query(0, &views)
    };
    assert_eq!(choose_home_claim(&q, &shares), Some(2));
    // At its share (n1 back home), nothing is taken back: site 1 at its
    // share gives n2 or n3 only by the ordinary rules.
    let views = vec![
        node(0, site(0), 0.95),
        node(1, site(0), 0.95),
        node(2, site(1), 0.02),
        node(3, site(1), 0.03),
    ];
    let q = DonorQuery {
        homes: &homes,
        ..query(0, &views)
    };
    assert_eq!(choose_donor(&q), Some(2));
    assert_eq!(choose_home_claim(&q, &shares), None);
}
