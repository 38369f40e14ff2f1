use super::*;

const BOTH: RetryOn = RetryOn::BOTH;
const CONN_ONLY: RetryOn = RetryOn {
    conn_failure: true,
    empty_response: false,
};
const EMPTY_ONLY: RetryOn = RetryOn {
    conn_failure: false,
    empty_response: true,
};

#[test]
fn tried_nodes_hold_every_attempt_without_duplicates() {
    let mut t = Tried::default();
    t.insert(3);
    t.insert(3);
    assert_eq!(t.as_slice(), &[3]);
    for n in 0..100 {
        t.insert(100 + n);
    }
    // The first node, MAX_RETRIES retries, MISDIRECTED_REPLAYS replays.
    assert_eq!(t.as_slice().len(), 1 + MAX_RETRIES as usize + 2);
    t.remove(3);
    assert_eq!(t.as_slice()[0], 100);
    let len = t.as_slice().len();
    t.remove(42);
    assert_eq!(t.as_slice().len(), len);
}

#[test]
fn connect_failures_take_the_retries_budget() {
    let mut a = Attempts::new(2, BOTH);
    a.picking(1);
    assert!(a.connect_failed(ErrorKind::ConnectFailed));
    a.picking(2);
    assert!(a.connect_failed(ErrorKind::ConnectTimeout));
    a.picking(3);
    assert!(!a.connect_failed(ErrorKind::ConnectFailed));
    assert_eq!(a.last_error, Some(ErrorKind::ConnectFailed));
    assert_eq!(a.tried(), &[1, 2, 3]);
    // Exhausted after connect failures: the same nodes are not tried again.
    assert!(!a.retry_tried_nodes());
    let mut off = Attempts::new(3, EMPTY_ONLY);
    assert!(!off.connect_failed(ErrorKind::ConnectFailed));
}

#[test]
fn an_empty_response_is_retried_only_with_a_copy_and_on_a_new_connection() {
    let mut a = Attempts::new(1, BOTH);
    a.picking(4);
    assert!(
        !a.empty_response(ErrorKind::UpstreamProtocol, false),
        "no copy kept"
    );
    let mut a = Attempts::new(1, BOTH);
    a.picking(4);
    assert!(a.empty_response(ErrorKind::UpstreamProtocol, true));
    assert!(a.fresh);
    // The only node: tried again, once per retry.
    assert!(a.retry_tried_nodes());
    assert!(a.tried().is_empty());
    assert!(!a.retry_tried_nodes());
    a.picking(4);
    assert!(
        !a.empty_response(ErrorKind::UpstreamProtocol, true),
        "budget spent"
    );
    assert!(!a.fresh);
    let mut off = Attempts::new(3, CONN_ONLY);
    assert!(!off.empty_response(ErrorKind::UpstreamProtocol, true));
}

#[test]
fn a_copy_is_kept_only_for_requests_that_may_be_sent_again() {
    let a = Attempts::new(3, BOTH);
    // GET without a body, nodes static: for an empty response.
    assert!(a.may_replay(false, true, false));
    // A body is never replayed.
    assert!(!a.may_replay(true, true, true));
    // POST: only where a 421 may come (any method is replayed after 421).
    assert!(!a.may_replay(false, false, false));
    assert!(a.may_replay(false, false, true));
    // No budget, or empty responses not retried: no copy unless nodes move.
    let none = Attempts::new(0, BOTH);
    assert!(!none.may_replay(false, true, false));
    let conn_only = Attempts::new(3, CONN_ONLY);
    assert!(!conn_only.may_replay(false, true, false));
    assert!(conn_only.may_replay(false, true, true));
}

#[test]
fn stale_connections_and_misdirected_replays_have_their_own_budgets() {
    let mut a = Attempts::new(0, BOTH);
    a.picking(7);
    for _ in 0..STALE_RETRIES {
        assert!(a.stale(7));
        assert!(
            a.tried().is_empty(),
            "a stale connection is not the node's failure"
        );
        a.picking(7);
    }
    assert!(!a.stale(7));
    for _ in 0..MISDIRECTED_REPLAYS {
        assert!(a.misdirected());
    }
    assert!(!a.misdirected());
}

#[test]
fn reason_labels_follow_the_index() {
    let all = [
        RetryReason::ConnFailure,
        RetryReason::EmptyResponse,
        RetryReason::Misdirected,
    ];
    for (i, r) in all.into_iter().enumerate() {
        assert_eq!(r.index(), i);
    }
    assert_eq!(
        RetryReason::LABELS[RetryReason::EmptyResponse.index()],
        "empty-response"
    );
}
