//! Nodes that do not finish, on paused time: a node whose app stays down is
//! rolled back with a growing backoff, not every round (issue 12, defect 7);
//! a node SWITCHING past `switch_timeout` is reclaimed when its sidecar is
//! alive and parked when it is gone (defect 3).

use super::*;
use rdmalb_window::seqlock::publish_at;

/// The node's load block, fresh (or written long ago when `stale`).
fn beat(m: &WindowMemory, stale: bool) {
    let s = LoadSample {
        app_busy: 5,
        app_capacity: 100,
        ..LoadSample::default()
    };
    if stale {
        publish_at(m, &s, 1);
    } else {
        load(m, 0.05);
    }
}

/// What a proxy does: CAS node `m`'s role word to `next(site, SWITCHING)`.
fn claim_node(m: &WindowMemory, site: SiteSlot) -> RoleWord {
    let old = role(m);
    let new = old.next(site, RoleState::Switching);
    assert_eq!(
        m.compare_swap(word::ROLE, old.encode(), new.encode()),
        Some(old.encode())
    );
    new
}

#[tokio::test(start_paused = true)]
async fn a_node_whose_app_stays_down_is_rolled_back_with_a_growing_backoff() {
    let c = cluster(&[Some(0), None], 1);
    let a = agent(&c, 1, 1);
    let n = &c.nodes[1];
    let e = claim_node(n, SiteSlot::Site(0)).epoch;
    // The app is down: every role the sidecar gets fails, idle kept.
    apply(n, e, SiteSlot::Idle, RoleStatusCode::ReloadFailed);
    let mut rollbacks_at = Vec::new();
    let start = Instant::now();
    for _ in 0..60 {
        beat(&c.nodes[0], false);
        beat(n, false);
        let before = role(n).epoch;
        a.round().await;
        let r = role(n);
        if r.epoch != before {
            rollbacks_at.push(start.elapsed());
            apply(n, r.epoch, SiteSlot::Idle, RoleStatusCode::ReloadFailed);
        }
        tokio::time::sleep(S).await;
    }
    let snap = a.counters().snapshot();
    assert_eq!(snap.rollbacks, rollbacks_at.len() as u64);
    // 12 s of rounds: without a backoff, a rollback every round.
    assert!(
        (3..=7).contains(&rollbacks_at.len()),
        "rollbacks at {rollbacks_at:?}"
    );
    let gaps: Vec<Duration> = rollbacks_at.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] > g[0]),
        "the gaps grow: {gaps:?}"
    );
    assert!(snap.rollback_backoffs >= 2, "{snap:?}");
    let st = a.status();
    assert!(st.nodes[1].consecutive_failures >= 3);
    assert!(st.nodes[1].rollback_in_ms.is_some());
    // The app is back: the next rollback applies and the streak ends.
    let mut rounds = 0;
    while role(n).epoch == rollbacks_at.len() as u64 + e && rounds < 400 {
        beat(&c.nodes[0], false);
        beat(n, false);
        a.round().await;
        tokio::time::sleep(S).await;
        rounds += 1;
    }
    apply(n, role(n).epoch, SiteSlot::Idle, RoleStatusCode::Ok);
    beat(n, false);
    a.round().await;
    assert_eq!(a.status().nodes[1].consecutive_failures, 0);
}

#[test]
fn the_backoff_doubles_from_s_and_stops_at_its_cap() {
    let s = Duration::from_millis(200);
    let cap = Duration::from_secs(1);
    let waits: Vec<Duration> = (1..=6).map(|k| track::backoff(k, s, cap)).collect();
    assert_eq!(
        waits,
        [0, 400, 800, 1000, 1000, 1000].map(Duration::from_millis)
    );
    assert_eq!(track::backoff(200, s, cap), cap);
}

#[tokio::test(start_paused = true)]
async fn a_node_switching_past_the_deadline_is_reclaimed_if_its_sidecar_lives_else_parked() {
    let c = cluster(&[Some(0), Some(1)], 1);
    let a = agent(&c, 1, 2);
    let n = &c.nodes[1];
    let timeout = Reconfig::default().switch_timeout;
    let rounds = |d: Duration| d.as_millis() / S.as_millis() + 2;

    // Claimed for site 0; the sidecar is alive but never answers.
    let claimed = claim_node(n, SiteSlot::Site(0));
    for _ in 0..rounds(timeout) {
        beat(&c.nodes[0], false);
        beat(n, false);
        a.round().await;
        tokio::time::sleep(S).await;
    }
    assert_eq!(
        role(n),
        claimed.next(SiteSlot::Site(1), RoleState::Switching),
        "sent back to the site it serves"
    );
    assert_eq!(a.counters().snapshot().switch_timeouts, 1);

    // Claimed again, and its sidecar dies: nothing can apply it.
    apply(n, role(n).epoch, SiteSlot::Site(1), RoleStatusCode::Ok);
    beat(n, false);
    a.round().await;
    let claimed = claim_node(n, SiteSlot::Site(0));
    for _ in 0..rounds(timeout) {
        beat(&c.nodes[0], false);
        beat(n, true);
        a.round().await;
        tokio::time::sleep(S).await;
    }
    assert_eq!(
        role(n),
        claimed,
        "a node whose sidecar is gone is not CASed"
    );
    let st = a.status();
    assert!(st.nodes[1].parked, "{:?}", st.nodes[1]);
    assert!(st.nodes[1].switching_ms.unwrap() >= timeout.as_millis() as u64);
    assert_eq!(st.counters.switch_timeouts, 2);

    // Its sidecar is back and has resolved the role: no longer parked.
    apply(n, claimed.epoch, SiteSlot::Site(0), RoleStatusCode::Ok);
    beat(n, false);
    a.round().await;
    let st = a.status();
    assert!(!st.nodes[1].parked && st.nodes[1].switching_ms.is_none());
}
