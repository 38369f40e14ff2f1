//! `global.retries` and `global.retry_on`.

use super::*;

#[test]
fn retries_default_to_three_on_connect_failures_and_can_be_changed() {
    let c = ok(BASE);
    assert_eq!(c.global.retries, 3);
    assert_eq!(c.global.retry_on, RetryOn::DEFAULT);
    assert!(c.global.retry_on.conn_failure && !c.global.retry_on.empty_response);
    let c = ok(&BASE.replace(
        "balance = \"roundrobin\"",
        "retry_on = [\"conn-failure\", \"empty-response\"]",
    ));
    assert_eq!(c.global.retry_on, RetryOn::BOTH);
    let c = ok(&BASE.replace(
        "balance = \"roundrobin\"",
        "retries = 0\nretry_on = [\"conn-failure\"]",
    ));
    assert_eq!(c.global.retries, 0);
    assert!(c.global.retry_on.conn_failure && !c.global.retry_on.empty_response);
    let c = ok(&BASE.replace("balance = \"roundrobin\"", "retry_on = []"));
    assert!(!c.global.retry_on.conn_failure && !c.global.retry_on.empty_response);
}

#[test]
fn rejects_retries_out_of_range() {
    for n in ["-1", "11"] {
        rejects(
            &BASE.replace("balance = \"roundrobin\"", &format!("retries = {n}")),
            "global.retries",
            "from 0 to 10",
        );
    }
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "retries = \"3\""),
        "global",
        "expected i64",
    );
}

#[test]
fn rejects_unknown_retry_on_keyword_naming_the_entry() {
    crate::fixtures::rejects_at(
        &BASE.replace(
            "balance = \"roundrobin\"",
            "retry_on = [\"conn-failure\", \"response-timeout\"]",
        ),
        "global.retry_on[1]",
        "`response-timeout` is not a retry condition (expected \"conn-failure\" or \"empty-response\"",
    );
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "retry_on = \"conn-failure\""),
        "global",
        "expected a sequence",
    );
}
