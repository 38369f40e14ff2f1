use std::net::SocketAddr;

use rdmalb_window::{DatagramKey, Psk};

use super::wire::{self, WireError, MAX_DATAGRAM};
use super::*;
use crate::rules::stick::config::data_type;

const P: u32 = 60_000;

fn table(size: usize, shared: bool) -> std::sync::Arc<StickTable> {
    let mut store = Store::default();
    for s in ["http_req_rate(60s)", "http_req_cnt", "http_err_cnt", "gpc0"] {
        let (d, p) = data_type(s).unwrap();
        store.add(d, p);
    }
    let t = StickTable::new("per_ip", KeyKind::Ip, size, 120_000, store);
    std::sync::Arc::new(if shared { t.shared() } else { t })
}

fn ip(n: u32) -> Key {
    Key::V4(n.to_be_bytes())
}

/// One request of `key` on proxy `t`, as `track-sc0` counts it.
fn request(t: &std::sync::Arc<StickTable>, key: Key, now: u32) {
    let mut slots = None;
    crate::rules::stick::track::start(&mut slots, 0, (0, t), key, None, now);
}

fn rate(t: &StickTable, key: &Key, now: u32) -> u32 {
    t.get(key, now).map_or(0, |e| {
        e.counters.lock().get(Data::HttpReqRate, &t.store, now)
    })
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Sends `from`'s pending increments to `to` as the share task does.
fn flush(from: &StickTable, to: &StickTable, key: &DatagramKey, seq: &mut u64, now: u32) {
    let a = addr("127.0.0.1:7400");
    for d in wire::encode(key, a, seq, &from.name, &from.take_pending()) {
        let got = wire::decode(key, a, &d).unwrap();
        for (k, delta) in got.entries {
            to.merge(k, &delta, now).unwrap();
        }
    }
}

#[test]
fn a_client_alternating_between_two_proxies_is_counted_once_on_each() {
    let (a, b) = (table(100, true), table(100, true));
    let key = DatagramKey::new(&Psk::generate(), wire::KEY_LABEL);
    let (mut sa, mut sb) = (1, 1);
    // The process clock: a tracking's end touches its entry at `now_ms()`.
    let now = crate::rules::stick::now_ms();
    for i in 0..20u32 {
        let on = if i % 2 == 0 { &a } else { &b };
        request(on, ip(7), now + i);
        if i % 4 == 3 {
            flush(&a, &b, &key, &mut sa, now + i);
            flush(&b, &a, &key, &mut sb, now + i);
        }
    }
    // Both proxies see all 20 requests, not 10 each.
    assert_eq!(rate(&a, &ip(7), now + 20), 20);
    assert_eq!(rate(&b, &ip(7), now + 20), 20);
    let e = b.get(&ip(7), now + 20).unwrap();
    let c = *e.counters.lock();
    assert_eq!((c.http_req_cnt, c.conn_cnt), (20, 20));
    // Received increments are not sent back.
    assert!(a.take_pending().is_empty() && b.take_pending().is_empty());
}

#[test]
fn a_table_not_shared_keeps_no_increments_and_errors_and_gpc_are_carried() {
    let local = table(10, false);
    request(&local, ip(1), 5);
    assert!(local.take_pending().is_empty());

    let t = table(10, true);
    let mut slots = None;
    crate::rules::stick::track::start(&mut slots, 0, (0, &t), ip(1), None, 5);
    let tables = [table(10, true)];
    // `error` and `inc_gpc` look the table up by index / take it given.
    let tr = slots.as_deref().unwrap()[0].as_ref().unwrap();
    crate::rules::stick::track::inc_gpc(&t, tr, 0, 6);
    crate::rules::stick::track::error(&slots, &tables, crate::rules::stick::now_ms());
    let p = t.take_pending();
    assert_eq!(
        p,
        vec![(
            ip(1),
            Delta {
                req: 1,
                conn: 1,
                gpc: [1, 0],
                err: 0
            }
        )]
    );
    // The error was noted in the table of index 0 of `tables`.
    assert_eq!(tables[0].take_pending()[0].1.err, 1);
}

#[test]
fn pending_increments_never_hold_more_than_size_keys() {
    let t = table(4, true);
    let refused = (0..10u32)
        .filter(|n| !t.note(Some(&ip(*n)), |d| d.req += 1))
        .count();
    assert_eq!(refused, 6);
    assert_eq!(t.take_pending().len(), 4);
    // Taken: room again.
    assert!(t.note(Some(&ip(99)), |d| d.req += 1));
}

#[test]
fn merged_keys_take_slots_within_size_and_of_the_tables_type() {
    let t = table(2, true);
    let d = Delta {
        req: 3,
        ..Delta::default()
    };
    assert_eq!(
        t.merge(Key::Str("x".into()), &d, 10),
        Err(MergeRefusal::WrongKey)
    );
    assert_eq!(
        t.merge(Key::V6([0; 16]), &d, 10),
        Err(MergeRefusal::WrongKey)
    );
    // Two entries tracked by requests fill the table: a third key is
    // refused rather than evicting them.
    let mut s1 = None;
    let mut s2 = None;
    crate::rules::stick::track::start(&mut s1, 0, (0, &t), ip(1), None, 10);
    crate::rules::stick::track::start(&mut s2, 0, (0, &t), ip(2), None, 10);
    assert_eq!(t.merge(ip(3), &d, 10), Err(MergeRefusal::Full));
    assert!(t.merge(ip(1), &d, 10).is_ok());
    assert_eq!(rate(&t, &ip(1), 10), 4);
    assert!(t.len() <= 2);
}

#[test]
fn datagrams_are_bounded_and_round_trip_every_key_type() {
    let key = DatagramKey::new(&Psk::generate(), wire::KEY_LABEL);
    let from = addr("[::1]:7401");
    let mut entries: Vec<(Key, Delta)> = (0..500u32)
        .map(|n| {
            (
                ip(n),
                Delta {
                    req: n,
                    err: 1,
                    conn: 2,
                    gpc: [3, u32::MAX],
                },
            )
        })
        .collect();
    entries.push((Key::V6([9; 16]), Delta::default()));
    entries.push((Key::Str("é".repeat(500).into()), Delta::default()));
    let mut seq = 41;
    let grams = wire::encode(&key, from, &mut seq, "per_ip", &entries);
    assert!(grams.len() > 1 && grams.iter().all(|g| g.len() <= MAX_DATAGRAM));
    assert_eq!(seq, 41 + grams.len() as u64);
    let mut back = Vec::new();
    for (i, g) in grams.iter().enumerate() {
        let d = wire::decode(&key, from, g).unwrap();
        assert_eq!((d.seq, d.table.as_str()), (41 + i as u64, "per_ip"));
        back.extend(d.entries);
    }
    assert_eq!(back, entries);
}

#[test]
fn forged_altered_or_misaddressed_datagrams_are_refused() {
    let key = DatagramKey::new(&Psk::generate(), wire::KEY_LABEL);
    let from = addr("127.0.0.1:7401");
    let one = [(
        ip(1),
        Delta {
            req: 1_000_000,
            ..Delta::default()
        },
    )];
    let g = wire::encode(&key, from, &mut 1, "per_ip", &one).remove(0);
    // Another key (a forger without the key file).
    let forger = DatagramKey::new(&Psk::generate(), wire::KEY_LABEL);
    let forged = wire::encode(&forger, from, &mut 1, "per_ip", &one).remove(0);
    assert_eq!(wire::decode(&key, from, &forged), Err(WireError::BadTag));
    // The right bytes from another address (a replay from elsewhere).
    let elsewhere = addr("127.0.0.1:7402");
    assert_eq!(wire::decode(&key, elsewhere, &g), Err(WireError::BadTag));
    // Any byte altered.
    for i in 8..g.len() {
        let mut bad = g.clone();
        bad[i] ^= 0x40;
        assert_eq!(
            wire::decode(&key, from, &bad),
            Err(WireError::BadTag),
            "byte {i}"
        );
    }
    // Cut, empty, not ours, oversized.
    assert_eq!(wire::decode(&key, from, &g[..20]), Err(WireError::NotShare));
    assert_eq!(wire::decode(&key, from, b""), Err(WireError::NotShare));
    let mut other = g.clone();
    other[0] = b'X';
    assert_eq!(wire::decode(&key, from, &other), Err(WireError::NotShare));
    assert_eq!(
        wire::decode(&key, from, &vec![0u8; MAX_DATAGRAM + 1]),
        Err(WireError::NotShare)
    );
}

#[test]
fn decoding_any_bytes_never_panics() {
    use rand::{Rng, SeedableRng};
    let key = DatagramKey::new(&Psk::generate(), wire::KEY_LABEL);
    let from = addr("127.0.0.1:7401");
    let mut rng = rand::rngs::StdRng::seed_from_u64(30);
    for _ in 0..20_000 {
        let n = rng.gen_range(0..MAX_DATAGRAM + 8);
        let mut b: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        if n >= 8 && rng.gen_bool(0.5) {
            b[..8].copy_from_slice(&wire::MAGIC);
        }
        assert!(wire::decode(&key, from, &b).is_err());
    }
}

#[test]
fn merged_increments_follow_the_rate_period() {
    let t = table(10, true);
    let d = Delta {
        req: 8,
        ..Delta::default()
    };
    let t0 = crate::rules::stick::now_ms() & !1;
    t.merge(ip(1), &d, t0).unwrap();
    assert_eq!(rate(&t, &ip(1), t0.wrapping_add(P - 1)), 8);
    // Half of the next period gone: half of the last one still counts.
    t.merge(ip(1), &Delta { req: 1, ..d }, t0.wrapping_add(P))
        .unwrap();
    assert_eq!(rate(&t, &ip(1), t0.wrapping_add(P + P / 2)), 1 + 4);
}

fn check(dir: &std::path::Path, share: &str) -> Result<crate::config::Config, String> {
    let text = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[site]]\nname = \"app\"\nhosts = [\"app.example.com\"]\n\
         [[stick_table]]\nname = \"t\"\nkey = \"ip\"\nsize = 10\nexpire = \"1m\"\nshared = true\n{share}"
    );
    crate::config::parse(&text, &dir.join("rdmalb.toml")).map_err(|e| e.to_string())
}

#[test]
fn bad_stick_share_settings_are_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    Psk::generate()
        .write_new_file(dir.path().join("ok.key"))
        .unwrap();
    let good = "[stick_share]\nlisten = \"127.0.0.1:7400\"\npeers = [\"127.0.0.1:7401\"]\nkey_file = \"ok.key\"\n";
    let c = check(dir.path(), good).unwrap();
    let s = c.rules.share.as_ref().unwrap();
    assert_eq!((s.peers.len(), s.interval), (1, config::INTERVAL));
    assert!(c.rules.tables[0].is_shared());

    std::fs::write(dir.path().join("open.key"), Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(
        dir.path().join("open.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let err = check(
        dir.path(),
        "[stick_share]\nlisten = \"0.0.0.0:7400\"\npeers = [\"127.0.0.1:7401\", \"127.0.0.1:7401\", \"0.0.0.0:7400\", \"nope\"]\nkey_file = \"open.key\"\ninterval = \"20s\"\n",
    )
    .unwrap_err();
    for want in [
        "stick_share.listen: `0.0.0.0:7400` is not a concrete address",
        "stick_share.peers[1]: `127.0.0.1:7401` is listed twice",
        "stick_share.peers[2]: `0.0.0.0:7400` is this proxy's own listen address",
        "stick_share.peers[3]: `nope` is not an IP:port address",
        "stick_share.key_file: pre-shared key file",
        "lets other users access the key",
        "stick_share.interval:",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    let err = check(dir.path(), "[stick_share]\nlisten = \"127.0.0.1:7400\"\n").unwrap_err();
    assert!(err.contains("stick_share.peers: missing"), "{err}");
    assert!(err.contains("stick_share.key_file: missing"), "{err}");
    let err = check(
        dir.path(),
        "[stick_share]\nlisten = \"127.0.0.1:7400\"\npeers = [\"127.0.0.1:7401\"]\nkey_file = \"absent.key\"\n",
    )
    .unwrap_err();
    assert!(err.contains("make it with `rdmalb psk --out"), "{err}");
    let err = check(dir.path(), "").unwrap_err();
    assert!(
        err.contains("stick_table[0].shared: needs a [stick_share] section"),
        "{err}"
    );
}
