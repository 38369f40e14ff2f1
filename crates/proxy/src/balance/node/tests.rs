//! Health state machine: rise/fall, passive ejection, in-flight slots.

use super::*;

fn node(rise: u32, fall: u32, passive_failures: u32) -> NodeState {
    NodeState::new(
        0,
        "n1",
        "127.0.0.1:1".parse().unwrap(),
        Some((0, "site".to_string())),
        Thresholds {
            rise,
            fall,
            passive_failures,
        },
    )
}

fn fail(n: &NodeState) -> Option<Transition> {
    n.record_check(Err("connect failed".into()))
}

fn pass(n: &NodeState) -> Option<Transition> {
    n.record_check(Ok(()))
}

#[test]
fn starts_up_and_goes_down_after_fall_consecutive_failures() {
    let n = node(2, 3, 0);
    assert!(n.is_up());
    assert_eq!(fail(&n), None);
    assert_eq!(fail(&n), None);
    assert!(n.is_up());
    assert_eq!(fail(&n), Some(Transition::Down(DownReason::Checks)));
    assert!(!n.is_up());
    // Further failures cause no new transition.
    assert_eq!(fail(&n), None);
    let h = n.health();
    assert_eq!(h.down_reason, Some(DownReason::Checks));
    assert_eq!(h.consecutive_fail, 4);
    assert_eq!(h.checks_total, 4);
    assert_eq!(h.checks_failed_total, 4);
    assert_eq!(h.last_check_error.as_deref(), Some("connect failed"));
    assert_eq!(h.last_check_ok, Some(false));
    assert!(h.last_change_unix.is_some());
}

#[test]
fn a_pass_breaks_the_failure_streak() {
    let n = node(2, 3, 0);
    fail(&n);
    fail(&n);
    pass(&n);
    fail(&n);
    fail(&n);
    assert!(
        n.is_up(),
        "2 + 2 failures separated by a pass never reach fall=3"
    );
    assert_eq!(fail(&n), Some(Transition::Down(DownReason::Checks)));
}

#[test]
fn comes_back_after_rise_consecutive_passes() {
    let n = node(3, 1, 0);
    assert_eq!(fail(&n), Some(Transition::Down(DownReason::Checks)));
    assert_eq!(pass(&n), None);
    assert_eq!(pass(&n), None);
    assert_eq!(fail(&n), None, "already down");
    assert_eq!(pass(&n), None);
    assert_eq!(pass(&n), None);
    assert!(!n.is_up());
    assert_eq!(pass(&n), Some(Transition::Up));
    assert!(n.is_up());
    let h = n.health();
    assert_eq!(h.down_reason, None);
    assert_eq!(h.last_check_ok, Some(true));
    // The last error stays visible after recovery.
    assert_eq!(h.last_check_error.as_deref(), Some("connect failed"));
}

#[test]
fn passive_ejection_after_consecutive_failed_requests() {
    let n = node(2, 3, 3);
    assert_eq!(n.report(Outcome::ConnectFailed), None);
    assert_eq!(n.report(Outcome::ServerError), None);
    assert!(n.is_up());
    assert_eq!(
        n.report(Outcome::Timeout),
        Some(Transition::Down(DownReason::Passive))
    );
    assert!(!n.is_up());
    let h = n.health();
    assert_eq!(h.down_reason, Some(DownReason::Passive));
    assert_eq!(h.ejections_total, 1);
    // More failures while down change nothing.
    assert_eq!(n.report(Outcome::ProtocolError), None);
    assert_eq!(n.health().ejections_total, 1);
}

#[test]
fn a_successful_request_resets_the_passive_streak() {
    let n = node(2, 3, 3);
    n.report(Outcome::ConnectFailed);
    n.report(Outcome::ConnectFailed);
    assert_eq!(n.health().passive_streak, 2);
    n.report(Outcome::Success);
    assert_eq!(n.health().passive_streak, 0);
    n.report(Outcome::ConnectFailed);
    n.report(Outcome::ConnectFailed);
    assert!(n.is_up());
}

#[test]
fn a_node_shedding_load_with_503_is_never_ejected_and_keeps_a_failure_streak() {
    let n = node(2, 3, 3);
    for _ in 0..100 {
        assert_eq!(n.report(Outcome::Busy), None);
    }
    assert!(n.is_up());
    assert_eq!(n.health().passive_streak, 0);
    // Busy neither resets nor extends a streak of real failures.
    n.report(Outcome::ServerError);
    n.report(Outcome::Busy);
    n.report(Outcome::Timeout);
    assert_eq!(n.health().passive_streak, 2);
    assert_eq!(
        n.report(Outcome::ConnectFailed),
        Some(Transition::Down(DownReason::Passive))
    );
    assert_eq!(Outcome::Busy.error_kind(), Some("5xx"));
}

#[test]
fn ejected_node_needs_rise_passes_counted_from_the_ejection() {
    let n = node(2, 3, 1);
    // Passes before the ejection do not count towards recovery.
    pass(&n);
    pass(&n);
    pass(&n);
    assert_eq!(
        n.report(Outcome::ServerError),
        Some(Transition::Down(DownReason::Passive))
    );
    assert_eq!(pass(&n), None);
    assert!(!n.is_up());
    assert_eq!(pass(&n), Some(Transition::Up));
    assert!(n.is_up());
    // Recovery starts a fresh passive streak.
    assert_eq!(n.health().passive_streak, 0);
}

#[test]
fn zero_passive_failures_disables_ejection() {
    let n = node(2, 3, 0);
    for _ in 0..100 {
        assert_eq!(n.report(Outcome::ConnectFailed), None);
    }
    assert!(n.is_up());
}

#[test]
fn a_node_without_check_is_never_taken_down() {
    let n = node(2, 1, 1);
    n.set_checked(false);
    assert!(!n.health().check);
    // Failed requests do not eject it (HAProxy without `check`).
    for _ in 0..5 {
        assert_eq!(n.report(Outcome::ConnectFailed), None);
    }
    assert!(n.is_up());
    assert_eq!(n.health().ejections_total, 0);
    assert_eq!(n.health().passive_streak, 0);
    // A role move keeps it up; routing waits for the role to be applied.
    assert!(n.follow_role(Some(1), false));
    assert!(n.is_up());
    assert!(!n.serves(1));
    assert!(n.follow_role(Some(1), true));
    assert!(n.serves(1) && n.is_up());
}

#[test]
fn switching_checks_off_brings_a_down_node_up_and_on_again_keeps_it() {
    let n = node(2, 1, 0);
    assert_eq!(fail(&n), Some(Transition::Down(DownReason::Checks)));
    n.set_checked(false);
    let h = n.health();
    assert!(h.up && !h.check, "{h:?}");
    assert_eq!(h.down_reason, None);
    n.set_checked(true);
    assert!(n.is_up() && n.health().check);
    // Checked again: the next failure (fall = 1) takes it down.
    assert_eq!(fail(&n), Some(Transition::Down(DownReason::Checks)));
}

#[test]
fn thresholds_of_zero_behave_as_one() {
    let t = Thresholds::from_config(&crate::config::HealthCheck {
        path: "/".into(),
        interval: std::time::Duration::from_secs(1),
        timeout: std::time::Duration::from_secs(1),
        rise: 0,
        fall: 0,
        passive_failures: 0,
        expect_status: None,
    });
    assert_eq!((t.rise, t.fall), (1, 1));
}

#[test]
fn pick_counts_in_flight_until_dropped() {
    let n = Arc::new(node(2, 3, 0));
    let a = Pick::acquire(Arc::clone(&n));
    let b = Pick::acquire(Arc::clone(&n));
    assert_eq!(n.inflight(), 2);
    drop(a);
    assert_eq!(n.inflight(), 1);
    drop(b);
    assert_eq!(n.inflight(), 0);
}

#[test]
fn relocated_node_shares_health_and_inflight() {
    let n = Arc::new(node(2, 1, 0));
    let _slot = Pick::acquire(Arc::clone(&n));
    fail(&n);
    let moved = n.relocated(5, Some((1, "other".into())), None);
    assert!(moved.same_node(&n));
    assert_eq!(moved.index, 5);
    assert_eq!(moved.site, Some(1));
    assert_eq!(moved.site_name.as_deref(), Some("other"));
    assert!(!moved.is_up());
    assert_eq!(moved.inflight(), 1);
}

#[test]
fn concurrent_failures_eject_exactly_once() {
    let n = Arc::new(node(2, 3, 5));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let n = Arc::clone(&n);
            std::thread::spawn(move || {
                (0..50)
                    .filter(|_| n.report(Outcome::ConnectFailed).is_some())
                    .count()
            })
        })
        .collect();
    let transitions: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(transitions, 1);
    assert_eq!(n.health().ejections_total, 1);
    assert!(!n.is_up());
}
