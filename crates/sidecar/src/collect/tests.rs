use super::*;

#[test]
fn later_slot_wins_per_field_and_unknown_fields_show_through() {
    let a = Slot::new("system#0".into(), "n1".into());
    let b = Slot::new("push#1".into(), "n1".into());
    let mut ra = Reading::default();
    ra.set(Field::Cpu, 10);
    ra.set(Field::AppBusy, 1);
    a.store(ra);
    let mut rb = Reading::default();
    rb.set(Field::AppBusy, 7);
    b.store(rb);
    let m = merge(&[a.clone(), b.clone()]);
    assert_eq!(m.get(Field::Cpu), Some(10));
    assert_eq!(m.get(Field::AppBusy), Some(7));
    assert_eq!(m.get(Field::Mem), None);
    assert_eq!(m.value(Field::Mem), 0);
    b.clear();
    assert_eq!(merge(&[a, b]).get(Field::AppBusy), Some(1));
}

#[test]
fn health_tracks_state_changes() {
    let s = Slot::new("status#0".into(), "n1".into());
    s.store(Reading::default());
    let e = CollectError::Http {
        url: "http://x".into(),
        detail: "refused".into(),
    };
    s.record_error(&e);
    s.record_error(&e);
    let h = s.health();
    assert_eq!(h.errors_total, 2);
    assert!(h.error.as_deref().unwrap().contains("refused"));
    s.store(Reading::default());
    assert!(s.health().error.is_none());
    assert_eq!(s.health().samples_total, 2);
}
