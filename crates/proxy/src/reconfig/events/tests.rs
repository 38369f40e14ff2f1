use super::*;

fn event(n: usize) -> Event {
    Event {
        at_unix_ms: n as u64,
        kind: EventKind::Move,
        node: format!("n{n}"),
        from: Some("idle".into()),
        to: Some("shop".into()),
        epoch: Some(n as u64),
        detail: None,
    }
}

#[test]
fn newest_first_and_bounded() {
    let log = EventLog::default();
    assert!(log.latest().is_empty());
    for n in 0..CAPACITY + 5 {
        log.record(event(n));
    }
    let latest = log.latest();
    assert_eq!(latest.len(), CAPACITY);
    assert_eq!(latest[0].node, format!("n{}", CAPACITY + 4));
    assert_eq!(latest[CAPACITY - 1].node, "n5");
}

#[test]
fn serialises_kinds_in_snake_case() {
    let mut e = event(1);
    e.kind = EventKind::SwitchTimeout;
    e.detail = Some("parked".into());
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["kind"], "switch_timeout");
    assert_eq!(v["detail"], "parked");
    assert_eq!(v["from"], "idle");
    let mut e = event(2);
    e.kind = EventKind::AdminMove;
    assert_eq!(serde_json::to_value(&e).unwrap()["kind"], "admin_move");
}
