//! Loans (issue 16, docs/reconfiguration.md "Loans"), on paused time: a
//! node claimed away from its home site goes home once its borrower has
//! cooled and its home is below its configured share; never while the
//! borrower is hot, never when the return would make the borrower hot, never
//! with `loan_return = "off"`; a returned node is not pulled back by the
//! cool site; several proxies seeing the same loan make one return. And
//! the burst estimate: no claim for a burst expected to end within
//! `claim_horizon`, and a batch only for a burst expected to last one
//! horizon per node; a site below its configured share takes its own
//! node back whatever the estimate says, one node, never beyond the share.

use std::sync::Arc;

use super::*;
use crate::config::Delay;

/// `c`'s agent `id` for `sites` sites whose nodes' `[[node]]` sites are
/// `homes`, with `loan_return` (`None`: "off").
fn agent_homes(
    c: &Cluster,
    id: u16,
    sites: usize,
    homes: &[Option<usize>],
    loan_return: Option<Duration>,
) -> Arc<Agent> {
    let Ok(mut a) = Arc::try_unwrap(agent(c, id, sites)) else {
        unreachable!("a new agent has one owner")
    };
    for (n, home) in a.settings.nodes.iter_mut().zip(homes) {
        n.configured_site = *home;
    }
    a.settings.reconfig.loan_return = loan_return.map_or(Delay::Off, Delay::Set);
    Arc::new(a)
}

/// What a live sidecar does every round: publish its node's load and apply
/// a role it was given.
fn sidecars(c: &Cluster, loads: &[f64]) {
    for (m, l) in c.nodes.iter().zip(loads) {
        let r = role(m);
        if r.state == RoleState::Switching && m.load(word::ROLE_APPLIED) != Some(r.epoch) {
            apply(m, r.epoch, r.site, RoleStatusCode::Ok);
        }
        load(m, *l);
    }
}

/// Runs `rounds` rounds of `agents` (concurrently) with the sidecars
/// publishing `loads`; returns every outcome.
async fn rounds(
    c: &Cluster,
    agents: &[Arc<Agent>],
    loads: &[f64],
    rounds: usize,
) -> Vec<(usize, Result<ClaimOutcome, ProtocolError>)> {
    let mut all = Vec::new();
    for _ in 0..rounds {
        sidecars(c, loads);
        for (_, outcomes) in futures_util::future::join_all(agents.iter().map(|a| a.round())).await
        {
            all.extend(outcomes);
        }
        tokio::time::sleep(S).await;
    }
    all
}

fn site_of(m: &WindowMemory) -> SiteSlot {
    role(m).site
}

fn returns(a: &Agent) -> usize {
    a.events
        .latest()
        .iter()
        .filter(|e| e.kind == EventKind::Return)
        .count()
}

/// Two sites of two nodes each (n0, n1 home s0; n2, n3 home s1).
const HOMES: [Option<usize>; 4] = [Some(0), Some(0), Some(1), Some(1)];

#[tokio::test(start_paused = true)]
async fn a_loaned_node_returns_home_when_the_borrower_cools_not_while_it_is_hot() {
    let c = cluster(&[Some(0), Some(0), Some(1), Some(1)], 1);
    let a = agent_homes(&c, 1, 2, &HOMES, Some(Duration::from_secs(1)));
    let agents = [Arc::clone(&a)];
    // s0 is hot: after T (1 s) it claims s1's least loaded idle node, n2.
    let out = rounds(&c, &agents, &[0.95, 0.95, 0.05, 0.1], 8).await;
    let claims = out
        .iter()
        .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. })))
        .count();
    assert_eq!(claims, 1, "one claim for the hot event");
    assert_eq!(
        site_of(&c.nodes[2]),
        SiteSlot::Site(0),
        "n2 is on loan to s0"
    );
    assert_eq!(epochs(&c), 1);

    // s0 stays hot (its own nodes queue up) while n2 itself is idle, well
    // past the cool-down (5 s) and loan_return (1 s): n2 stays. s1 is at
    // its min_nodes, so no second claim either.
    rounds(&c, &agents, &[1.5, 1.5, 0.05, 0.1], 40).await;
    assert_eq!(
        site_of(&c.nodes[2]),
        SiteSlot::Site(0),
        "no return while hot"
    );
    assert_eq!(epochs(&c), 1);
    assert_eq!(returns(&a), 0);

    // s0 cools: loan_return after its first quiet round, n2 goes home.
    let quiet = [0.1, 0.1, 0.05, 0.1];
    let mut back_at = None;
    for r in 0..20 {
        let out = rounds(&c, &agents, &quiet, 1).await;
        if out
            .iter()
            .any(|(s, o)| *s == 1 && matches!(o, Ok(ClaimOutcome::Claimed { .. })))
        {
            back_at.get_or_insert(r);
        }
    }
    assert_eq!(
        back_at,
        Some(5),
        "returned in the round s0 had been cool for loan_return (1 s)"
    );
    assert_eq!(
        (role(&c.nodes[2]).site, role(&c.nodes[2]).epoch),
        (SiteSlot::Site(1), 3)
    );
    assert_eq!(epochs(&c), 2, "one return, nothing else moved");
    assert_eq!(returns(&a), 1);
    let e = a.events.latest();
    assert_eq!(
        event(&e[0]),
        (EventKind::Return, "n2", Some("s0"), Some("s1"), Some(3))
    );

    // No ping-pong: the cool site does not pull the node back, and nothing
    // else moves while the split is the configured one.
    rounds(&c, &agents, &[0.5, 0.5, 0.05, 0.1], 60).await;
    assert_eq!(site_of(&c.nodes[2]), SiteSlot::Site(1));
    assert_eq!(epochs(&c), 2);
    // Only a new hot event moves a node again (one claim).
    rounds(&c, &agents, &[0.95, 0.95, 0.05, 0.1], 10).await;
    assert_eq!(epochs(&c), 3);
}

#[tokio::test(start_paused = true)]
async fn loans_off_keep_a_claimed_node_where_it_landed() {
    // n2 (home s1) serves s0 from the start.
    let c = cluster(&[Some(0), Some(0), Some(0), Some(1)], 1);
    let a = agent_homes(&c, 1, 2, &HOMES, None);
    rounds(&c, &[Arc::clone(&a)], &[0.1, 0.1, 0.05, 0.1], 60).await;
    assert_eq!(epochs(&c), 0);
    assert_eq!(returns(&a), 0);
}

#[tokio::test(start_paused = true)]
async fn no_return_that_would_make_the_borrower_hot() {
    let c = cluster(&[Some(0), Some(0), Some(0), Some(1)], 1);
    let a = agent_homes(&c, 1, 2, &HOMES, Some(Duration::from_secs(1)));
    let agents = [Arc::clone(&a)];
    // s0's mean load is 0.63 (cool), but its work on two nodes would be
    // 0.95: above the high watermark, so s0 would pull the node back.
    rounds(&c, &agents, &[0.9, 0.9, 0.1, 0.1], 40).await;
    assert_eq!(epochs(&c), 0);
    // Lighter: 0.45 on two nodes. n2 goes home.
    rounds(&c, &agents, &[0.4, 0.4, 0.1, 0.1], 10).await;
    assert_eq!(site_of(&c.nodes[2]), SiteSlot::Site(1));
    assert_eq!(epochs(&c), 1);
    assert_eq!(returns(&a), 1);
}

#[tokio::test(start_paused = true)]
async fn returns_stop_at_the_share_and_never_take_a_borrower_below_min_nodes() {
    // n1 (home s0) serves s1: s0 has one node of its two, s1 three.
    let c = cluster(&[Some(0), Some(1), Some(1), Some(1)], 1);
    let a = agent_homes(&c, 1, 2, &HOMES, Some(Duration::from_secs(1)));
    let agents = [Arc::clone(&a)];
    rounds(&c, &agents, &[0.1, 0.05, 0.1, 0.1], 10).await;
    assert_eq!(site_of(&c.nodes[1]), SiteSlot::Site(0), "n1 went home");
    // Both sites hold their share now: nothing more moves.
    rounds(&c, &agents, &[0.1, 0.05, 0.1, 0.1], 60).await;
    assert_eq!(epochs(&c), 1);
    assert_eq!(returns(&a), 1);

    // n2 (home s1) serves s0, whose min_nodes is all three of its nodes.
    let c = cluster(&[Some(0), Some(0), Some(0), Some(1)], 1);
    let agent = agent_homes(&c, 1, 2, &HOMES, Some(Duration::from_secs(1)));
    let Ok(mut b) = Arc::try_unwrap(agent) else {
        unreachable!("a new agent has one owner")
    };
    b.settings.sites[0].limits.min_nodes = 3;
    rounds(&c, &[Arc::new(b)], &[0.1, 0.1, 0.05, 0.1], 40).await;
    assert_eq!(epochs(&c), 0, "s0 keeps its min_nodes");
}

#[tokio::test(start_paused = true)]
async fn proxies_seeing_the_same_loan_make_exactly_one_return() {
    // n2 (home s1) serves s0; three proxies, each with its own agent.
    let c = cluster(&[Some(0), Some(0), Some(0), Some(1)], 3);
    let agents: Vec<Arc<Agent>> = (1..=3)
        .map(|id| agent_homes(&c, id, 2, &HOMES, Some(Duration::from_secs(1))))
        .collect();
    let out = rounds(&c, &agents, &[0.1, 0.1, 0.05, 0.1], 40).await;
    assert_eq!(site_of(&c.nodes[2]), SiteSlot::Site(1));
    assert_eq!(epochs(&c), 1, "exactly one node moved, once");
    let landed = out
        .iter()
        .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. })))
        .count();
    assert_eq!(landed, 1, "one return decision, one claim: {out:?}");
    let claims: u64 = agents.iter().map(|a| a.counters().snapshot().claims).sum();
    assert_eq!(claims, 1);
    assert_eq!(agents.iter().map(|a| returns(a)).sum::<usize>(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_burst_expected_to_end_within_the_claim_horizon_moves_no_node() {
    // s0 (n0, n1) is bursty; s1 (n2..n5) idle. Loans off: only claims move.
    let c = cluster(&[Some(0), Some(0), Some(1), Some(1), Some(1), Some(1)], 1);
    let homes = [Some(0), Some(0), Some(1), Some(1), Some(1), Some(1)];
    let Ok(mut a) = Arc::try_unwrap(agent_homes(&c, 1, 2, &homes, None)) else {
        unreachable!("a new agent has one owner")
    };
    a.settings.reconfig.claim_horizon = Delay::Set(Duration::from_secs(2));
    let agents = [Arc::new(a)];
    // A burst of `secs` on every node serving s0, then 6 s of quiet;
    // returns the claims made.
    let burst = |secs: usize| {
        let agents = agents.clone();
        let c = &c;
        async move {
            let mut claims = 0;
            for r in 0..(secs * 5 + 30) {
                let loads: Vec<f64> = c
                    .nodes
                    .iter()
                    .map(|m| {
                        let s0 = site_of(m) == SiteSlot::Site(0);
                        if s0 && r < secs * 5 {
                            0.95
                        } else {
                            0.05
                        }
                    })
                    .collect();
                let out = rounds(c, &agents, &loads, 1).await;
                claims += out
                    .iter()
                    .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. })))
                    .count();
            }
            claims
        }
    };
    // Nothing known yet: a burst is expected to last as long again as it
    // has, so a 2 s burst never reaches the point where 2 s more are
    // expected.
    assert_eq!(burst(2).await, 0);
    // Known now: at T, 1 s of the 2 s is left, under the 2 s horizon (the
    // node would be held for its cool-down after the burst ended).
    assert_eq!(burst(2).await, 0);
    assert_eq!(epochs(&c), 0);
    // A longer burst outlives the estimate and claims once it has lasted
    // the horizon (2 s), then waits a T for the next: one claim in 3 s.
    assert_eq!(burst(3).await, 1);
    // The next one: at T the kept bursts (2, 2 and 3 s) leave 4/3 s on
    // average, under the horizon; at 2 s only the 3 s one lasted longer,
    // 1 s more. The longest alone (the estimate before issue 16's fourth
    // pass) promised 2 s at T and claimed.
    assert_eq!(burst(3).await, 0);
    // A burst longer than every kept one claims once it has outlived
    // them all (at 3 s, "as long again" is past the horizon), and once
    // more a T after that node landed.
    assert_eq!(burst(5).await, 2);
    assert_eq!(epochs(&c), 3);
}

#[tokio::test(start_paused = true)]
async fn a_loaded_site_claims_a_batch_only_for_a_burst_expected_to_last() {
    // s0 has one node (n0) and queues work for four (load 4.0: short by
    // three); s1's four nodes give idle ones. Claim horizon 1 s, batch 4,
    // T = 1 s. A first burst of `first` rounds (s1 busy then: no donor)
    // sets s0's burst estimate; the second claims at T.
    for (first, taken) in [
        // Estimate 2.4 s: 1.4 s left at T, one horizon: one node a round.
        (12, 1),
        // Estimate 6 s: 5 s left, five horizons: the batch (3 needed).
        (30, 3),
    ] {
        let c = cluster(&[Some(0), Some(1), Some(1), Some(1), Some(1)], 1);
        let homes = [Some(0), Some(1), Some(1), Some(1), Some(1)];
        let Ok(mut a) = Arc::try_unwrap(agent_homes(&c, 1, 2, &homes, None)) else {
            unreachable!("a new agent has one owner")
        };
        a.settings.reconfig.claim_horizon = Delay::Set(Duration::from_secs(1));
        a.settings.reconfig.claim_batch = 4;
        let agents = [Arc::new(a)];
        let mut busy = vec![0.6; 5];
        busy[0] = 4.0;
        rounds(&c, &agents, &busy, first).await;
        rounds(&c, &agents, &[0.05; 5], 3).await;
        assert_eq!(epochs(&c), 0, "no donor in the first burst");
        let mut at = None;
        for r in 0..8 {
            let loads: Vec<f64> = c
                .nodes
                .iter()
                .map(|m| {
                    if site_of(m) == SiteSlot::Site(0) {
                        4.0
                    } else {
                        0.05
                    }
                })
                .collect();
            let n = rounds(&c, &agents, &loads, 1)
                .await
                .iter()
                .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. })))
                .count();
            if n > 0 && at.is_none() {
                at = Some(r);
                assert_eq!(n, taken, "first burst of {first} rounds");
            }
        }
        // Hot at T: the sixth round of the burst.
        assert_eq!(at, Some(5), "first burst of {first} rounds");
    }
}

#[tokio::test(start_paused = true)]
async fn a_short_burst_takes_a_node_back_to_the_share_but_no_further() {
    // 2:2 by the config (HOMES); n1, s0's, is on loan to s1 (s1 serves
    // n1, n2, n3). s0 bursts for 2 s, then quiet, three times: a burst the
    // estimate says ends within the 2 s horizon, so without its share s0
    // would serve every burst on one node (before issue 16 goal 1: no claim,
    // as in `a_burst_expected_to_end_within_the_claim_horizon_moves_no_node`).
    // Loans off: only claims move.
    let c = cluster(&[Some(0), Some(1), Some(1), Some(1)], 1);
    let Ok(mut a) = Arc::try_unwrap(agent_homes(&c, 1, 2, &HOMES, None)) else {
        unreachable!("a new agent has one owner")
    };
    a.settings.reconfig.claim_horizon = Delay::Set(Duration::from_secs(2));
    a.settings.reconfig.claim_batch = 4;
    let agents = [Arc::new(a)];
    let mut claims = Vec::new();
    for _ in 0..3 {
        for r in 0..40 {
            let loads: Vec<f64> = c
                .nodes
                .iter()
                .map(|m| {
                    // Load 4.0: work queued for four nodes (a batch would
                    // take every idle node it could).
                    if site_of(m) == SiteSlot::Site(0) && r < 10 {
                        4.0
                    } else {
                        0.05
                    }
                })
                .collect();
            claims.extend(
                rounds(&c, &agents, &loads, 1)
                    .await
                    .into_iter()
                    .filter(|(_, o)| matches!(o, Ok(ClaimOutcome::Claimed { .. }))),
            );
        }
    }
    // One claim, n1 (its home, a loan coming back), in the first burst;
    // at its share s0 claims nothing more for bursts this short.
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert!(matches!(&claims[0].1, Ok(ClaimOutcome::Claimed { node, .. }) if node == "n1"));
    assert_eq!(site_of(&c.nodes[1]), SiteSlot::Site(0));
    assert_eq!(site_of(&c.nodes[2]), SiteSlot::Site(1));
    assert_eq!(site_of(&c.nodes[3]), SiteSlot::Site(1));
}
