use super::*;

#[test]
fn buckets_by_completion_time_and_site() {
    let t0 = Instant::now();
    let r = Recorder::new(vec!["a".into(), "b".into()], Duration::from_secs(1), t0);
    let ms = Duration::from_millis;
    for i in 1..=100u64 {
        r.record(0, t0 + ms(10), ms(i), Outcome::Status(200));
    }
    r.record(1, t0 + ms(1500), ms(3), Outcome::Status(503));
    r.record(1, t0 + ms(1600), ms(3), Outcome::Connect);
    r.record(1, t0 + ms(1700), ms(7), Outcome::Status(204));
    let rep = r.finish(ms(2000));
    assert_eq!(rep.intervals.len(), 4);
    let a0 = &rep.intervals[0];
    assert_eq!((a0.site.as_str(), a0.served, a0.errors), ("a", 100, 0));
    assert_eq!((a0.p50_ms, a0.p99_ms, a0.max_ms), (50.0, 99.0, 100.0));
    let b1 = &rep.intervals[3];
    assert_eq!(
        (b1.site.as_str(), b1.requests, b1.served, b1.errors),
        ("b", 3, 1, 2)
    );
    assert_eq!(b1.error_kinds.get("503"), Some(&1));
    assert_eq!(b1.error_kinds.get("connect"), Some(&1));
    let csv = rep.csv();
    assert!(csv.starts_with(CSV_HEADER));
    assert!(
        csv.contains("1.000,b,3,1,1.0,2,7.000,7.000,7.000,503:1;connect:1"),
        "{csv}"
    );
    assert_eq!(
        rep.throughput_csv(),
        "time_s,a,b\n0.000,100.0,0.0\n1.000,0.0,1.0\n"
    );
    let total = rep.summary.last().unwrap();
    assert_eq!(
        (total.site.as_str(), total.requests, total.served),
        ("TOTAL", 103, 101)
    );
    assert!(rep.table().contains("503:1;connect:1"));
    let json: serde_json::Value = serde_json::from_str(&rep.json()).unwrap();
    assert_eq!(json["summary"][1]["error_kinds"]["503"], 1);
}

#[test]
fn empty_intervals_are_reported_as_zero() {
    let t0 = Instant::now();
    let r = Recorder::new(vec!["a".into()], Duration::from_secs(1), t0);
    let rep = r.finish(Duration::from_millis(2500));
    assert_eq!(rep.intervals.len(), 3);
    assert!(rep
        .intervals
        .iter()
        .all(|row| row.requests == 0 && row.p99_ms == 0.0));
}

#[test]
fn the_far_tail_and_the_goodput_under_each_objective() {
    let t0 = Instant::now();
    let r = Recorder::new(vec!["a".into()], Duration::from_secs(10), t0);
    // 1000 served: 990 at 5 ms, 9 at 40 ms, 1 at 900 ms; one 503.
    for i in 0..1000u64 {
        let ms = match i {
            0..=989 => 5,
            990..=998 => 40,
            _ => 900,
        };
        r.record(0, t0, Duration::from_millis(ms), Outcome::Status(200));
    }
    r.record(0, t0, Duration::from_millis(1), Outcome::Status(503));
    let rep = r.finish(Duration::from_secs(10));
    let s = &rep.summary[0];
    assert_eq!((s.p99_ms, s.p999_ms, s.max_ms), (5.0, 40.0, 900.0));
    assert_eq!(s.served_within_ms[&10], 990);
    assert_eq!(s.served_within_ms[&50], 999);
    assert_eq!(s.served_within_ms[&1000], 1000, "503s are never goodput");
    // Counted as slower than any served request, the one 503 moves the
    // p99 over all 1001 requests from the 990th to the 991st: 40 ms.
    assert_eq!(s.p99_all_ms, Some(40.0));
}

#[test]
fn a_p99_over_all_requests_counts_errors_as_slowest() {
    let t0 = Instant::now();
    let r = Recorder::new(vec!["a".into()], Duration::from_secs(10), t0);
    for _ in 0..98 {
        r.record(0, t0, Duration::from_millis(5), Outcome::Status(200));
    }
    r.record(0, t0, Duration::from_millis(70), Outcome::Status(200));
    r.record(0, t0, Duration::from_millis(1), Outcome::Status(503));
    let s = &r.finish(Duration::from_secs(10)).summary[0];
    // 100 requests: the 99th slowest is the 70 ms one (the 503 is the 100th).
    assert_eq!((s.p99_ms, s.p99_all_ms), (70.0, Some(70.0)));
    r.record(0, t0, Duration::from_millis(1), Outcome::Status(503));
    let s = &r.finish(Duration::from_secs(10)).summary[0];
    // 101 requests, 2 failed: rank 100 falls on a 503.
    assert_eq!((s.p99_ms, s.p99_all_ms), (70.0, None));
    let json: serde_json::Value =
        serde_json::from_str(&r.finish(Duration::from_secs(10)).json()).unwrap();
    assert!(json["summary"][0]["p99_all_ms"].is_null());
}
