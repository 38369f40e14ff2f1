//! When a pinned node keeps its session: HAProxy's rules without a load
//! bound (drain keeps sessions, down releases them), and the bound's
//! drain and held-load rules.

use std::time::Duration;

use super::*;
use crate::balance::control::Source;
use crate::balance::Thresholds;
use crate::config::CookieMode;

const T: Thresholds = Thresholds {
    rise: 2,
    fall: 3,
    passive_failures: 3,
};

fn node() -> NodeState {
    NodeState::new(
        0,
        "n0",
        "127.0.0.1:12000".parse().unwrap(),
        Some((0, "s".into())),
        T,
    )
}

fn sticky(max_load: Option<f64>) -> Sticky {
    Sticky {
        max_load,
        max_load_for: Duration::from_millis(30),
        ..crate::fixtures::sticky(CookieMode::Insert)
    }
}

#[test]
fn haproxy_rules_without_a_bound() {
    let n = node();
    let (b, w) = (LoadBound::new(1), NodeWindows::none());
    let weights = LoadWeights::default();
    let st = sticky(None);
    assert_eq!(keep(&n, 0, &st, &b, &w, &weights), Pinned::Kept);
    assert_eq!(
        keep(&n, 1, &st, &b, &w, &weights),
        Pinned::Left(Move::Moved)
    );
    n.set_admin_state(AdminState::Drain, Source::Runtime);
    assert_eq!(
        keep(&n, 0, &st, &b, &w, &weights),
        Pinned::Kept,
        "HAProxy's drain keeps sessions"
    );
    n.set_admin_state(AdminState::Maint, Source::Runtime);
    assert_eq!(keep(&n, 0, &st, &b, &w, &weights), Pinned::Left(Move::Down));
}

#[test]
fn the_bound_releases_a_draining_node() {
    let n = node();
    let (b, w) = (LoadBound::new(1), NodeWindows::none());
    n.set_admin_state(AdminState::Drain, Source::Runtime);
    assert_eq!(
        keep(&n, 0, &sticky(Some(0.9)), &b, &w, &LoadWeights::default()),
        Pinned::Left(Move::Drain)
    );
}

#[test]
fn load_must_stay_above_the_bound_for_the_hold_time() {
    let b = LoadBound::new(1);
    let hold = Duration::from_millis(30);
    assert!(!b.held_over(0, Some(0.95), 0.9, hold), "just went over");
    std::thread::sleep(Duration::from_millis(40));
    assert!(
        b.held_over(0, Some(0.95), 0.9, hold),
        "over for the hold time"
    );
    assert!(!b.held_over(0, Some(0.5), 0.9, hold), "back under: reset");
    assert!(
        !b.held_over(0, Some(0.95), 0.9, hold),
        "the hold starts again"
    );
    assert!(!b.held_over(0, None, 0.9, hold), "no read: never over");
    assert!(!b.held_over(7, Some(1.0), 0.9, hold), "unknown node");
}
