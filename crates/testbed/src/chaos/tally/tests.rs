use super::*;

#[test]
fn a_request_counts_in_the_worst_state_it_met() {
    let p = ProxyStates::new(1);
    let live = p.read(0);
    assert_eq!(StateWord::during(live, p.read(0), false), ProxyState::Live);
    // Killed and restarted while the request was out: killed.
    p.set(0, ProxyState::Killed);
    let killed = p.read(0);
    assert_eq!(StateWord::during(live, killed, false), ProxyState::Killed);
    p.set(0, ProxyState::Restarting);
    p.answered(0);
    assert_eq!(p.read(0).state(), ProxyState::Live);
    assert_eq!(StateWord::during(live, p.read(0), true), ProxyState::Killed);
    // Sent while it was killed, answered by nobody: killed.
    assert_eq!(StateWord::during(killed, killed, false), ProxyState::Killed);
    // Stopped in between.
    let before = p.read(0);
    p.set(0, ProxyState::Stopped);
    p.set(0, ProxyState::Live);
    assert_eq!(
        StateWord::during(before, p.read(0), true),
        ProxyState::Stopped
    );
}

#[test]
fn a_restarting_proxy_is_live_once_it_answers() {
    let p = ProxyStates::new(2);
    p.set(1, ProxyState::Restarting);
    let start = p.read(1);
    // Refused while it starts: restarting.
    assert_eq!(
        StateWord::during(start, p.read(1), false),
        ProxyState::Restarting
    );
    // Its first answer makes it live, and that answer counts as live.
    p.answered(1);
    assert_eq!(StateWord::during(start, p.read(1), true), ProxyState::Live);
    // An answer from a live proxy changes nothing; proxy 0 never moved.
    p.answered(0);
    assert_eq!(p.read(0), StateWord(0));
    // A stopped proxy is not made live by an answer.
    p.set(0, ProxyState::Stopped);
    p.answered(0);
    assert_eq!(p.read(0).state(), ProxyState::Stopped);
}

#[test]
fn the_live_share_counts_only_5xx_answered_by_live_proxies() {
    let t = Tally::default();
    for _ in 0..997 {
        t.count(ProxyState::Live, true, None);
    }
    let bad_gateway = Cause::Status {
        status: 502,
        by_proxy: true,
        reason: "bad gateway".into(),
    };
    t.count(ProxyState::Live, false, Some((bad_gateway.clone(), true)));
    t.count(ProxyState::Live, false, Some((bad_gateway, false)));
    t.count(ProxyState::Live, false, Some((Cause::Timeout, true)));
    for _ in 0..50 {
        t.count(ProxyState::Killed, false, Some((Cause::Refused, true)));
    }
    let r = t.report();
    assert_eq!(r.by_proxy_state["live"].requests, 1000);
    assert_eq!(r.by_proxy_state["live"].errors, 3);
    assert_eq!(r.by_proxy_state["killed"].errors, 50);
    assert!((r.live_proxy_5xx_share - 0.002).abs() < 1e-12);
    assert!((r.live_proxy_5xx_share_site_had_healthy_node - 0.001).abs() < 1e-12);
    let text = r.text();
    assert!(text.contains("live-proxy 5xx share: 0.2000 %"), "{text}");
    assert!(
        text.contains("killed     no answer: connection refused: 50 (50)"),
        "{text}"
    );
    assert!(
        text.contains("502 from the proxy: bad gateway: 2 (1)"),
        "{text}"
    );
}
