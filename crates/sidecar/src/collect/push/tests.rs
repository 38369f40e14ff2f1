use super::*;

#[test]
fn lines_parse_and_reject() {
    let r = parse_line("busy=3 capacity=8 queue=1 requests_total=1234").unwrap();
    assert_eq!(r.get(Field::AppBusy), Some(3));
    assert_eq!(r.get(Field::AppCapacity), Some(8));
    assert_eq!(r.get(Field::AppQueue), Some(1));
    assert_eq!(r.get(Field::RequestsTotal), Some(1234));
    assert_eq!(r.get(Field::Connections), None);
    assert!(parse_line("").unwrap().is_empty());
    assert!(parse_line("busy").unwrap_err().contains("key=value"));
    assert!(parse_line("cpu=3").unwrap_err().contains("unknown key"));
    assert!(parse_line("busy=-1").unwrap_err().contains("unsigned"));
    assert!(parse_line("busy=99999999999999999999999").is_err());
    assert!(parse_line("busy==3").is_err());
}

#[test]
fn sample_round_trips_through_the_line() {
    let s = PushSample {
        busy: Some(2),
        capacity: Some(16),
        queue: None,
        requests_total: Some(9),
        connections: Some(4),
        latency_us: Some(1500),
        queue_limit: Some(64),
    };
    let line = s.to_line();
    assert_eq!(
        line,
        "busy=2 capacity=16 requests_total=9 connections=4 latency_us=1500 queue_limit=64\n"
    );
    let r = parse_line(line.trim_end()).unwrap();
    assert_eq!(r.get(Field::Connections), Some(4));
    assert_eq!(r.get(Field::AppQueue), None);
    assert_eq!(r.get(Field::AppLatency), Some(1500));
    assert_eq!(r.get(Field::AppQueueLimit), Some(64));
}

proptest::proptest! {
    #[test]
    fn push_lines_never_panic_and_round_trip(
        text in "\\PC*",
        busy in proptest::option::of(proptest::num::u64::ANY),
        capacity in proptest::option::of(proptest::num::u64::ANY),
        requests_total in proptest::option::of(proptest::num::u64::ANY),
    ) {
        let _ = parse_line(&text);
        let s = PushSample { busy, capacity, queue: None, requests_total, connections: None, latency_us: None, queue_limit: None };
        let r = parse_line(s.to_line().trim_end()).unwrap();
        proptest::prop_assert_eq!(r.get(Field::AppBusy), busy);
        proptest::prop_assert_eq!(r.get(Field::AppCapacity), capacity);
        proptest::prop_assert_eq!(r.get(Field::RequestsTotal), requests_total);
    }
}
