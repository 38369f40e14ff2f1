use super::*;

fn gid(s: &str) -> Gid {
    Gid::from(s.parse::<std::net::Ipv6Addr>().unwrap())
}

#[test]
fn gid_preference_matches_rxe_table() {
    // A RoCE table where each address appears as RoCEv1 and RoCEv2: the
    // IPv4-mapped RoCEv2 entry wins (rxe0 in the test guest has only
    // fe80::… at 0 and ::ffff:10.77.0.1 RoCEv2 at 1, and picks 1).
    let table = [
        (gid("fe80::1"), false),
        (gid("fe80::1"), true),
        (gid("::ffff:10.77.0.1"), false),
        (gid("::ffff:10.77.0.1"), true),
    ];
    let best = table
        .iter()
        .enumerate()
        .max_by_key(|(i, (g, v2))| (gid_score(g, *v2), std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    assert_eq!(best, Some(3));
    assert!(gid_score(&gid("2001:db8::5"), true) > gid_score(&gid("2001:db8::5"), false));
    assert!(gid_score(&gid("2001:db8::5"), false) > gid_score(&gid("fe80::5"), false));
}

#[test]
fn psn_is_24_bits() {
    for _ in 0..100 {
        assert!(random_psn() < (1 << 24));
    }
}
