use super::*;
use std::time::Duration;

const S: Duration = Duration::from_millis(200);

/// Feeds one interval of `offered` arrivals and `served` good answers
/// (plus `failed` 5xx) for site 0, S long, and samples.
async fn interval(d: &Demand, a: &mut QosAccount, offered: u64, served: u64) -> SiteQos {
    let site = d.site("gold").expect("site");
    for i in 0..offered {
        site.arrived();
        site.answered(i < served);
    }
    tokio::time::sleep(S).await;
    a.sample(&d.totals(), Instant::now())[0]
}

#[tokio::test(start_paused = true)]
async fn rates_verdicts_and_the_meeting_percentage() {
    let d = Demand::new(["gold".to_string(), "bronze".to_string()]);
    // Guarantee 99 rps: about 20 requests per 200 ms interval.
    let mut a = QosAccount::new(vec![99.0, 0.0]);
    assert_eq!(a.sample(&d.totals(), Instant::now())[0].kept, None);

    let q = interval(&d, &mut a, 30, 30).await;
    assert_eq!((q.offered_rps, q.served_rps), (150.0, 150.0));
    assert_eq!(q.kept, Some(true));
    // Demand over the guarantee, served under it: missed, and short.
    let q = interval(&d, &mut a, 40, 10).await;
    assert_eq!((q.offered_rps, q.served_rps), (200.0, 50.0));
    assert_eq!(q.kept, Some(false));
    assert!(q.short());
    // Demand under the guarantee: the interval does not count, even if
    // little of it is served (it is still short of what it asked for).
    let q = interval(&d, &mut a, 10, 2).await;
    assert_eq!(q.kept, None);
    assert!(q.short());
    // Within the tolerance of the guarantee (95 >= 0.95 * 99): kept.
    let q = interval(&d, &mut a, 25, 19).await;
    assert_eq!((q.served_rps, q.kept), (95.0, Some(true)));
    assert!(!q.short());
    assert_eq!((q.counted, q.kept_intervals), (3, 2));
    let p = q.meeting_percent().expect("counted");
    assert!((p - 200.0 / 3.0).abs() < 1e-9, "{p}");
    // A best-effort site never counts and is never short.
    let b = a.sites()[1];
    assert_eq!((b.kept, b.counted, b.short()), (None, 0, false));
    assert_eq!(b.meeting_percent(), None);
}

/// A request still in flight at the end of an otherwise idle interval is
/// not a shortfall; two requests missing are.
#[tokio::test(start_paused = true)]
async fn one_request_across_the_interval_end_is_not_short() {
    let d = Demand::new(["gold".to_string()]);
    let mut a = QosAccount::new(vec![200.0]);
    a.sample(&d.totals(), Instant::now());
    let site = d.site("gold").expect("site");
    // One request arrives and is answered only in the next interval.
    site.arrived();
    tokio::time::sleep(S).await;
    let q = a.sample(&d.totals(), Instant::now())[0];
    assert_eq!((q.offered_rps, q.served_rps), (5.0, 0.0));
    assert!(!q.short(), "{q:?}");
    // Next interval: it is served, one more arrives and is served.
    site.answered(true);
    let q = interval(&d, &mut a, 1, 1).await;
    assert!(!q.short(), "{q:?}");
    // Three arrive, one is served and two fail: more than one missing.
    let q = interval(&d, &mut a, 3, 1).await;
    assert!(q.short(), "{q:?}");
}

#[tokio::test(start_paused = true)]
async fn rates_are_per_second_of_the_real_interval() {
    let d = Demand::new(["gold".to_string()]);
    let mut a = QosAccount::new(vec![10.0]);
    a.sample(&d.totals(), Instant::now());
    let site = d.site("gold").expect("site");
    for _ in 0..50 {
        site.arrived();
        site.answered(true);
    }
    // A late round (2 s instead of S): 25 rps, not 250.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let q = a.sample(&d.totals(), Instant::now())[0];
    assert_eq!((q.offered_rps, q.served_rps), (25.0, 25.0));
    // A second sample at the same instant changes nothing.
    let again = a.sample(&d.totals(), Instant::now())[0];
    assert_eq!(again, q);
    assert!(d.site("unknown").is_none());
}

#[test]
fn nodes_needed_from_served_per_active_node() {
    let q = |offered: f64, served: f64| SiteQos {
        offered_rps: offered,
        served_rps: served,
        guarantee_rps: 400.0,
        ..SiteQos::default()
    };
    // 4 fully busy nodes serve 400 rps: 100 per node, 400 need 5 with
    // headroom (420 / 100).
    assert_eq!(q(900.0, 400.0).nodes_needed(4, Some(1.2)), 5);
    // Half busy: each could serve 200, so the 300 rps in use need 2.
    assert_eq!(q(300.0, 300.0).nodes_needed(3, Some(0.5)), 2);
    // Nearly idle: capacity is extrapolated 4x at most.
    assert_eq!(q(40.0, 40.0).nodes_needed(4, Some(0.01)), 2);
    // No demand, or best effort: nothing needed for the guarantee.
    assert_eq!(q(0.0, 0.0).nodes_needed(4, Some(0.0)), 0);
    let be = SiteQos {
        offered_rps: 500.0,
        served_rps: 500.0,
        ..SiteQos::default()
    };
    assert_eq!(be.nodes_needed(4, Some(1.0)), 0);
    // Demand but nothing served, or no active node: cannot estimate.
    assert_eq!(q(100.0, 0.0).nodes_needed(2, Some(1.0)), usize::MAX);
    assert_eq!(q(100.0, 50.0).nodes_needed(0, None), usize::MAX);
}
