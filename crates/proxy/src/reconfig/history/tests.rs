use super::*;

const S: Duration = Duration::from_millis(200);
const T: Duration = Duration::from_secs(1);

/// Feeds `loads` one per S and returns in which rounds the site was hot.
async fn run(t: &mut HotTracker, loads: &[f64]) -> Vec<bool> {
    let mut out = Vec::new();
    for &l in loads {
        out.push(t.observe(0, Some(l), Instant::now()));
        tokio::time::sleep(S).await;
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_short_spike_is_never_hot() {
    let mut t = HotTracker::new(1, T, 0.8);
    // 0.8 s above the watermark, then back down, twice.
    let spike = [0.95, 0.95, 0.95, 0.95, 0.95, 0.1];
    let hot = run(&mut t, &[spike, spike].concat()).await;
    assert!(hot.iter().all(|h| !h), "{hot:?}");
}

#[tokio::test(start_paused = true)]
async fn a_sustained_load_is_hot_after_the_history_window() {
    let mut t = HotTracker::new(1, T, 0.8);
    let hot = run(&mut t, &[0.9; 8]).await;
    // Rounds at 0, 0.2, .. 0.8 s are not yet T; the round at 1.0 s is.
    assert_eq!(hot, [false, false, false, false, false, true, true, true]);
    assert!(t.hot_since(0).is_some());
    t.reset(0);
    assert!(
        !t.observe(0, Some(0.9), Instant::now()),
        "a reset starts a new window"
    );
}

#[tokio::test(start_paused = true)]
async fn a_missed_guarantee_is_hot_after_the_history_window_whatever_the_load() {
    let mut t = HotTracker::new(1, T, 0.8);
    // Load under the watermark (say the app reports no capacity and CPU
    // is low) but the guarantee is missed: hot once it lasted T.
    let mut hot = Vec::new();
    for _ in 0..7 {
        hot.push(t.observe_round(0, Some(0.3), true, Instant::now()));
        tokio::time::sleep(S).await;
    }
    assert_eq!(hot, [false, false, false, false, false, true, true]);
    // One round that keeps the guarantee (and is not loaded) ends it.
    assert!(!t.observe_round(0, Some(0.3), false, Instant::now()));
    assert_eq!(t.hot_since(0), None);
    // Short and loaded rounds alternating keep one streak going.
    let mut hot = Vec::new();
    for i in 0..6 {
        let (load, short) = if i % 2 == 0 {
            (0.3, true)
        } else {
            (0.9, false)
        };
        hot.push(t.observe_round(0, Some(load), short, Instant::now()));
        tokio::time::sleep(S).await;
    }
    assert_eq!(hot, [false, false, false, false, false, true]);
    // A short burst of missed guarantee never is.
    t.reset(0);
    for _ in 0..4 {
        assert!(!t.observe_round(0, None, true, Instant::now()));
        tokio::time::sleep(S).await;
    }
    assert!(!t.observe_round(0, None, false, Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn an_unmeasurable_round_breaks_the_streak() {
    let mut t = HotTracker::new(2, T, 0.8);
    for _ in 0..4 {
        t.observe(1, Some(0.9), Instant::now());
        tokio::time::sleep(S).await;
    }
    assert!(!t.observe(1, None, Instant::now()));
    tokio::time::sleep(S).await;
    assert!(!t.observe(1, Some(0.9), Instant::now()));
    assert!(!t.observe(7, Some(5.0), Instant::now()), "unknown site");
    assert!(
        !t.observe(0, Some(0.8), Instant::now()),
        "at the watermark is not above"
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_that_ends_as_the_node_arrives_doubles_t_up_to_the_maximum() {
    let mut t = HotTracker::adaptive(2, T, 4 * T, 0.8);
    for expect in [2 * T, 4 * T, 4 * T] {
        t.claimed(0, 1000.0, Instant::now());
        tokio::time::sleep(S).await;
        assert_eq!(t.judge(0, 900.0, Instant::now()), None, "demand holds");
        tokio::time::sleep(S).await;
        // The burst ended 0.4 s after the claim, well within 2 T.
        assert_eq!(t.judge(0, 100.0, Instant::now()), Some(Verdict::Wasted));
        assert_eq!(t.history_of(0), expect);
        assert_eq!(t.judge(0, 100.0, Instant::now()), None, "judged once");
    }
    assert_eq!(t.history_of(1), T, "per site");
    // With T = 4 s a 3 s burst is not hot any more.
    let hot = run(&mut t, &[0.95; 15]).await;
    assert!(hot.iter().all(|h| !h), "{hot:?}");
}

#[tokio::test(start_paused = true)]
async fn a_move_whose_demand_holds_halves_t_back_to_the_base() {
    let mut t = HotTracker::adaptive(1, T, 8 * T, 0.8);
    for _ in 0..3 {
        t.claimed(0, 1000.0, Instant::now());
        tokio::time::sleep(S).await;
        t.judge(0, 10.0, Instant::now());
    }
    assert_eq!(t.history_of(0), 8 * T);
    let mut seen = Vec::new();
    for _ in 0..5 {
        t.claimed(0, 1000.0, Instant::now());
        let mut verdict = None;
        while verdict.is_none() {
            tokio::time::sleep(S).await;
            verdict = t.judge(0, 800.0, Instant::now());
        }
        assert_eq!(verdict, Some(Verdict::Useful));
        seen.push(t.history_of(0));
    }
    assert_eq!(seen, [4 * T, 2 * T, T, T, T]);
}

#[tokio::test(start_paused = true)]
async fn fixed_t_and_unmeasured_demand_are_never_judged() {
    let mut fixed = HotTracker::new(1, T, 0.8);
    fixed.claimed(0, 1000.0, Instant::now());
    assert_eq!(fixed.judge(0, 0.0, Instant::now()), None);
    assert_eq!(fixed.history_of(0), T);
    let mut t = HotTracker::adaptive(1, T, 4 * T, 0.8);
    t.claimed(0, 0.0, Instant::now());
    assert_eq!(t.judge(0, 0.0, Instant::now()), None);
    assert_eq!(t.judge(7, 0.0, Instant::now()), None, "unknown site");
    t.claimed(7, 5.0, Instant::now());
}

#[tokio::test(start_paused = true)]
async fn a_site_is_cool_from_its_first_quiet_round_until_it_is_loaded_or_short() {
    let mut t = HotTracker::new(1, T, 0.8);
    assert_eq!(t.cool_for(0, Instant::now()), None, "not observed yet");
    run(&mut t, &[0.9, 0.9]).await;
    assert_eq!(t.cool_for(0, Instant::now()), None, "loaded");
    run(&mut t, &[0.3, 0.1, 0.5]).await;
    // Quiet since the round 3 S ago.
    assert_eq!(t.cool_for(0, Instant::now()), Some(S * 3));
    t.reset(0);
    assert_eq!(
        t.cool_for(0, Instant::now()),
        Some(S * 3),
        "a claim's reset is not a load change"
    );
    t.observe_round(0, Some(0.1), true, Instant::now());
    assert_eq!(t.cool_for(0, Instant::now()), None, "short is not cool");
    run(&mut t, &[0.1]).await;
    t.observe(0, None, Instant::now());
    assert_eq!(
        t.cool_for(0, Instant::now()),
        None,
        "unmeasurable is not cool"
    );
}

#[tokio::test(start_paused = true)]
async fn the_burst_estimate_is_the_longest_recent_loaded_period() {
    let mut t = HotTracker::new(2, T, 0.8);
    assert_eq!(t.burst_left(0, Instant::now()), None, "not loaded");
    // A 0.6 s blip (shorter than T: never a burst); with nothing known, a
    // burst is expected to last as long again as it has.
    run(&mut t, &[0.9, 0.9, 0.9]).await;
    assert_eq!(t.burst_left(0, Instant::now()), Some(S * 3));
    assert_eq!(t.estimated_left(0, Instant::now()), None, "no estimate");
    run(&mut t, &[0.1]).await;
    assert_eq!(t.burst_left(0, Instant::now()), None, "not loaded");
    // A 1.6 s burst.
    run(&mut t, &[0.9; 8]).await;
    t.reset(0); // a claim does not cut the loaded period
    run(&mut t, &[0.1]).await;
    // Loaded again: 1.6 s expected, 0.4 s gone.
    run(&mut t, &[0.9, 0.9]).await;
    t.observe(0, Some(0.9), Instant::now());
    assert_eq!(
        t.burst_left(0, Instant::now()),
        Some(Duration::from_millis(1200))
    );
    // Site 1 has no burst of its own yet: it borrows every site's.
    t.observe(1, Some(0.9), Instant::now());
    assert_eq!(
        t.burst_left(1, Instant::now()),
        Some(Duration::from_millis(1600))
    );
    assert_eq!(
        t.estimated_left(0, Instant::now()),
        Some(Duration::from_millis(1200)),
        "the estimate alone bounds it"
    );
    // Outlived (2 s so far): as long again.
    run(&mut t, &[0.9; 8]).await;
    assert_eq!(
        t.burst_left(0, Instant::now()),
        Some(Duration::from_secs(2))
    );
    assert_eq!(t.estimated_left(0, Instant::now()), None, "outlived");
}

#[tokio::test(start_paused = true)]
async fn the_estimate_is_the_mean_rest_of_the_kept_bursts_longer_than_this_one() {
    let mut t = HotTracker::new(1, T, 0.8);
    // Three bursts of 1.2 s and one of 3 s.
    for rounds in [6, 6, 6, 15] {
        run(&mut t, &vec![0.9; rounds]).await;
        run(&mut t, &[0.1]).await;
    }
    // 0.2 s into the next: the mean rest of the four, (3 × 1.0 + 2.8) / 4,
    // not the longest one's 2.8 s.
    run(&mut t, &[0.9]).await;
    t.observe(0, Some(0.9), Instant::now());
    assert_eq!(
        t.burst_left(0, Instant::now()),
        Some(Duration::from_millis(1450))
    );
    // 1.4 s in: only the 3 s burst lasted longer.
    run(&mut t, &[0.9; 6]).await;
    assert_eq!(
        t.estimated_left(0, Instant::now()),
        Some(Duration::from_millis(1600))
    );
    // Past all of them (3.2 s): as long again.
    run(&mut t, &[0.9; 9]).await;
    assert_eq!(t.estimated_left(0, Instant::now()), None);
    assert_eq!(
        t.burst_left(0, Instant::now()),
        Some(Duration::from_millis(3200))
    );
}
