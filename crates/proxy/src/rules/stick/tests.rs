//! Stick tables: bounded size under key churn, expiry, eviction that
//! spares tracked entries, and rule sets that track and limit, compiled
//! from TOML.

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue};

use super::*;
use crate::rules::{Answer, ClientCert, Conn, Rules};

fn store(types: &[&str]) -> Store {
    let mut s = Store::default();
    for t in types {
        let (d, p) = config::data_type(t).unwrap();
        s.add(d, p);
    }
    s
}

fn v4(n: u32) -> Key {
    Key::V4(n.to_be_bytes())
}

#[test]
fn key_churn_never_holds_more_than_size_entries() {
    let size = 1000;
    let t = StickTable::new("t", KeyKind::Ip, size, 60_000, store(&["http_req_cnt"]));
    let mut now = 1_000u32;
    for i in 0..(10 * size as u32) {
        now = now.wrapping_add(1);
        let e = t.entry(v4(i), now).expect("room is made for a new key");
        e.counters.lock().request(&t.store, now);
        assert!(t.len() <= size, "{} entries after {i} keys", t.len());
    }
    assert!(t.len() > size / 2, "the table stays in use: {}", t.len());
    // The most recent keys are the ones kept (least recently used go).
    assert!(t.get(&v4(10 * size as u32 - 1), now).is_some());
    assert!(t.get(&v4(0), now).is_none());
}

#[test]
fn a_full_table_of_tracked_entries_refuses_new_keys() {
    let t = StickTable::new("t", KeyKind::Ip, 4, 60_000, store(&["conn_cur"]));
    let held: Vec<_> = (0..4).map(|i| t.entry(v4(i), 10).unwrap()).collect();
    assert!(
        t.entry(v4(99), 11).is_none(),
        "tracked entries are not evicted"
    );
    drop(held);
    assert!(t.entry(v4(99), 12).is_some());
    assert_eq!(t.len(), 4);
}

#[test]
fn entries_expire_after_their_last_touch_unless_tracked() {
    let t = StickTable::new("t", KeyKind::Ip, 10, 1_000, store(&["http_req_cnt"]));
    let e = t.entry(v4(1), 100).unwrap();
    e.counters.lock().request(&t.store, 100);
    drop(e);
    t.entry(v4(2), 100).unwrap();
    assert_eq!(t.purge(1_099), 0);
    // Touched again at 900: lives until 1900.
    t.entry(v4(1), 900).unwrap();
    assert_eq!(t.purge(1_100), 1, "key 2 expired");
    assert!(t.get(&v4(1), 1_800).is_some());
    let held = t.get(&v4(1), 1_800).unwrap();
    assert_eq!(t.purge(5_000), 0, "a tracked entry stays");
    drop(held);
    assert_eq!(t.purge(5_000), 1);
    assert!(t.is_empty());
    // A reused expired key starts from zero.
    let e = t.entry(v4(3), 6_000).unwrap();
    e.counters.lock().request(&t.store, 6_000);
    drop(e);
    let e = t.entry(v4(3), 9_000).unwrap();
    assert_eq!(e.counters.lock().http_req_cnt, 0);
}

#[test]
fn keys_follow_the_table_type() {
    let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
    assert_eq!(KeyKind::Ip.of_addr(mapped), Some(Key::V4([10, 0, 0, 1])));
    assert_eq!(KeyKind::Ip.of_addr("2001:db8::1".parse().unwrap()), None);
    assert_eq!(
        KeyKind::Ipv6.of_addr("10.0.0.1".parse().unwrap()),
        Some(Key::V6(
            "::ffff:10.0.0.1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        ))
    );
    assert_eq!(
        KeyKind::Str { len: 4 }.of_text("abcdef"),
        Some(Key::Str("abcd".into()))
    );
}

fn compile(toml_text: &str) -> Result<crate::config::Config, String> {
    let dir = tempfile::tempdir().unwrap();
    let base = format!(
        "[[listener]]\nlisten = \"127.0.0.1:0\"\n[[site]]\nname = \"app\"\nhosts = [\"app.example.com\"]\n{toml_text}"
    );
    crate::config::parse(&base, &dir.path().join("rdmalb.toml")).map_err(|e| e.to_string())
}

/// Sends a GET from `client` through the request rules; the status of
/// the answer, or 200 when the request would go on, and the tracking.
fn send(rules: &Rules, client: &str, headers: &[(&'static str, &str)]) -> (u16, Option<Answer>) {
    let conn = Conn {
        client: client.parse().unwrap(),
        listener: "web",
        tls: false,
        sni: None,
        cert: ClientCert::default(),
        now: crate::rules::stick::now_ms(),
        recent: None,
    };
    let mut h = HeaderMap::new();
    h.insert("host", HeaderValue::from_static("app.example.com"));
    for (k, v) in headers {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    let mut req = http::Request::new(());
    *req.headers_mut() = h;
    let mut track = None;
    let a = rules.run_request(&rules.request, &conn, &mut req, &mut track);
    (a.as_ref().map_or(200, |a| a.status.as_u16()), a)
}

const LIMIT: &str = r#"
[[stick_table]]
name = "per_ip"
key = "ip"
size = 1000
expire = "60s"
store = ["http_req_rate(10s)", "http_err_cnt", "conn_cur"]

[[request_rule]]
action = "track-sc0"
key = "src"

[[request_rule]]
action = "deny"
status = 429
if = { fetch = "sc0_http_req_rate", match = "int", values = ["gt", "5"] }
"#;

#[test]
fn a_client_over_its_rate_gets_429_with_retry_after_and_others_do_not() {
    let config = compile(LIMIT).unwrap();
    let rules = &config.rules;
    let statuses: Vec<u16> = (0..8).map(|_| send(rules, "192.0.2.1", &[]).0).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    let (s, a) = send(rules, "192.0.2.1", &[]);
    assert_eq!(s, 429);
    // The window of the limit: the rate's 10 s period.
    assert_eq!(a.unwrap().headers["retry-after"], "10");
    assert_eq!(send(rules, "192.0.2.2", &[]).0, 200);
    let t = rules.table("per_ip").unwrap();
    let e = t.get(&v4(0xc000_0201), now_ms()).unwrap();
    let c = *e.counters.lock();
    assert_eq!(c.http_req_rate.read(now_ms(), 10_000), 9);
    assert_eq!(c.http_err_cnt, 4, "each deny counts an HTTP error");
    assert_eq!(c.conn_cur, 0, "each request's tracking ended");
    assert_eq!(c.conn_cnt, 9);
}

#[test]
fn a_string_table_tracks_a_header_and_counts_gpc() {
    let config = compile(
        r#"
[[stick_table]]
name = "per_key"
key = "string"
len = 8
size = 10
expire = "1m"
store = ["gpc0", "http_req_cnt"]

[[request_rule]]
action = "track-sc1"
key = "hdr(x-api-key)"
table = "per_key"

[[request_rule]]
action = "sc-inc-gpc0"
counter = 1
if = { fetch = "path", values = ["/login"] }

[[request_rule]]
action = "deny"
status = 429
retry_after = 30
if = { fetch = "sc_get_gpc0", counter = 1, match = "int", values = ["ge", "2"] }

[[request_rule]]
action = "deny"
status = 403
if = { fetch = "table_cnt", table = "per_key", match = "int", values = ["gt", "1"] }
"#,
    )
    .unwrap();
    let rules = &config.rules;
    // `/` does not count gpc0; without the header nothing is tracked.
    assert_eq!(send(rules, "192.0.2.1", &[]).0, 200);
    assert_eq!(send(rules, "192.0.2.1", &[("x-api-key", "k1")]).0, 200);
    assert_eq!(send(rules, "192.0.2.1", &[("x-api-key", "k1")]).0, 200);
    let t = rules.table("per_key").unwrap();
    assert_eq!(t.len(), 1);
    let e = t.get(&Key::Str("k1".into()), now_ms()).unwrap();
    assert_eq!(e.counters.lock().http_req_cnt, 2);
    drop(e);
    // A second key: over the `table_cnt` limit. Its key is cut to `len`.
    assert_eq!(
        send(rules, "192.0.2.1", &[("x-api-key", "abcdefgh1")]).0,
        403
    );
    assert_eq!(t.len(), 2);
    assert!(t.get(&Key::Str("abcdefgh".into()), now_ms()).is_some());
}

#[test]
fn gpc_counts_from_an_action_deny_after_two() {
    let config = compile(
        r#"
[[stick_table]]
name = "abuse"
key = "ip"
size = 10
expire = "1m"
store = ["gpc0"]

[[acl]]
name = "login"
fetch = "path"
values = ["/"]

[[request_rule]]
action = "track-sc0"
key = "src"

[[request_rule]]
action = "deny"
status = 429
if = { fetch = "sc0_get_gpc0", match = "int", values = ["ge", "2"] }

[[request_rule]]
action = "sc-inc-gpc0"
counter = 0
if = "login"
"#,
    )
    .unwrap();
    let s: Vec<u16> = (0..4)
        .map(|_| send(&config.rules, "192.0.2.7", &[]).0)
        .collect();
    assert_eq!(s, [200, 200, 429, 429]);
    let (_, a) = send(&config.rules, "192.0.2.7", &[]);
    // A count's window is the table's expiry.
    assert_eq!(a.unwrap().headers["retry-after"], "60");
}

#[test]
fn src_fetches_read_without_creating_entries() {
    let config = compile(
        r#"
[[stick_table]]
name = "per_ip"
key = "ip"
size = 10
expire = "1m"
store = ["http_req_cnt"]

[[request_rule]]
action = "deny"
status = 403
if = { fetch = "src_http_req_cnt", table = "per_ip", match = "int", values = ["ge", "0"] }
"#,
    )
    .unwrap();
    // An absent entry reads 0 (HAProxy's src_* fetches), and stays absent.
    assert_eq!(send(&config.rules, "192.0.2.1", &[]).0, 403);
    assert!(config.rules.tables[0].is_empty());
}

#[test]
fn bad_tables_and_rules_are_named() {
    let err = compile(
        r#"
[[stick_table]]
name = "t"
key = "mac"
size = 0
store = ["http_req_rate", "bogus", "gpc0(1s)"]

[[request_rule]]
action = "track-sc3"
key = "src"

[[request_rule]]
action = "track-sc0"
key = "body"
table = "nope"

[[acl]]
name = "x"
fetch = "sc_http_req_rate"
values = ["gt", "1"]

[[acl]]
name = "y"
fetch = "src_conn_cur"
table = "missing"
values = ["gt", "1"]
"#,
    )
    .unwrap_err();
    for want in [
        "stick_table[0].key: `mac` is not a key type",
        "stick_table[0].size: 0 is out of range",
        "stick_table[0].expire: missing",
        "stick_table[0].store[0]: `http_req_rate` needs its period",
        "stick_table[0].store[1]: `bogus` is not a data type",
        "stick_table[0].store[2]: `gpc0(1s)`: `gpc0` takes no period",
        "request_rule[0].action: `track-sc3` is not a request action",
        "request_rule[1].table: no [[stick_table]] named `nope`",
        "acl[0].fetch: missing: fetch \"sc_http_req_rate\" needs the stick `counter`",
        "acl[1].fetch: no [[stick_table]] named `missing`",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
}

#[test]
fn show_table_prints_as_haproxy() {
    let t = StickTable::new(
        "per_ip",
        KeyKind::Ip,
        100,
        30_000,
        store(&["gpc0", "http_req_rate(10s)", "http_req_cnt"]),
    );
    let now = now_ms();
    let e = t.entry(v4(0x7f00_0001), now).unwrap();
    e.counters.lock().request(&t.store, now);
    drop(e);
    let all = show::selection(&t, &[]).unwrap();
    let text = show::entries(&t, &all);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("# table: per_ip, type: ip, size:100, used:1")
    );
    let entry = lines.next().unwrap();
    let (id, rest) = entry.split_once(": ").unwrap();
    assert!(id.starts_with("0x"), "{entry}");
    assert!(rest.starts_with("key=127.0.0.1 use=0 exp="), "{entry}");
    assert!(
        rest.ends_with(" gpc0=0 http_req_cnt=1 http_req_rate(10000)=1"),
        "{entry}"
    );
    let none = show::selection(&t, &["data.http_req_cnt", "gt", "1"]).unwrap();
    assert_eq!(
        show::entries(&t, &none).lines().count(),
        1,
        "the head alone"
    );
    let absent = show::selection(&t, &["key", "10.0.0.9"]).unwrap();
    assert_eq!(show::entries(&t, &absent), "", "no head for an absent key");
    assert!(show::selection(&t, &["data.conn_cur", "gt", "1"]).is_err());
    let key = show::selection(&t, &["key", "127.0.0.1"]).unwrap();
    assert_eq!(show::clear(&t, &key), 1);
    assert!(t.is_empty());
}

#[test]
fn a_reload_keeps_the_counters_of_an_unchanged_table() {
    let old = compile(LIMIT).unwrap();
    for _ in 0..3 {
        send(&old.rules, "192.0.2.1", &[]);
    }
    let new = compile(LIMIT).unwrap();
    new.rules.tables[0].adopt(&old.rules.tables[0]);
    let statuses: Vec<u16> = (0..3)
        .map(|_| send(&new.rules, "192.0.2.1", &[]).0)
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
}

#[test]
fn the_reported_entry_size_counts_the_key_text() {
    let ip = entry_bytes(KeyKind::Ip);
    eprintln!("entry bytes: ip {ip}");
    assert!((100..=160).contains(&ip), "{ip}");
    assert_eq!(entry_bytes(KeyKind::Str { len: 32 }), ip + 32);
}

/// A shared IPv4 table of 10 entries expiring after `expire` ms, storing
/// `types`.
fn ip_table(expire: u32, types: &[&str]) -> Arc<StickTable> {
    Arc::new(StickTable::new("t", KeyKind::Ip, 10, expire, store(types)))
}

/// One request of a connection remembering `recent`, tracking `key` in
/// slot 0 of `t`; its count of requests after it.
fn track_on(recent: &track::Recent, t: &Arc<StickTable>, key: Key, now: u32) -> u32 {
    let mut slots = None;
    track::start(&mut slots, 0, (0, t), key, Some(recent), now);
    let tr = slots
        .as_deref()
        .and_then(|s| s[0].as_ref())
        .expect("tracked");
    let n = tr.entry.counters.lock().http_req_cnt;
    track::stop(&mut slots, now);
    n
}

#[test]
fn a_connection_remembers_its_entry_but_the_table_still_owns_it() {
    let t = ip_table(1_000, &["http_req_cnt"]);
    let recent = track::Recent::default();
    assert_eq!(track_on(&recent, &t, v4(1), 100), 1);
    assert_eq!(track_on(&recent, &t, v4(1), 200), 2, "the same entry again");
    // Another key in the same slot is looked up (and then remembered).
    assert_eq!(track_on(&recent, &t, v4(2), 300), 1);
    assert_eq!(track_on(&recent, &t, v4(1), 400), 3);
    assert_eq!(t.len(), 2);

    // An idle connection holds nothing: `clear table` removes the entry
    // it remembers, and its next request counts in a new one, in the map.
    assert_eq!(t.clear(Some(&v4(1))), 1);
    assert_eq!(track_on(&recent, &t, v4(1), 500), 1);
    assert_eq!(t.get(&v4(1), 500).unwrap().counters.lock().http_req_cnt, 1);

    // Expiry: a remembered entry past its expiry and tracked by no one is
    // as good as new, as one found in the map; purged, it is gone.
    assert_eq!(track_on(&recent, &t, v4(1), 2_000), 1);
    assert_eq!(t.purge(5_000), 2);
    assert!(t.is_empty());
    assert_eq!(track_on(&recent, &t, v4(1), 5_100), 1);
    assert_eq!(t.len(), 1);

    // A reload's new table (same definition) adopts the entry: the
    // connection finds it there, not through the old table.
    let t2 = ip_table(1_000, &["http_req_cnt"]);
    t2.adopt(&t);
    drop(t);
    assert_eq!(track_on(&recent, &t2, v4(1), 5_200), 2);
    assert_eq!(t2.len(), 1);
}

#[test]
fn a_connection_reuses_the_room_of_its_last_counters() {
    let t = ip_table(1_000, &["http_req_cnt", "conn_cur"]);
    let recent = track::Recent::default();
    let mut slots = None;
    track::start(&mut slots, 0, (0, &t), v4(1), Some(&recent), 100);
    let room = slots.as_deref().map(|s| s as *const Slots);
    track::stop(&mut slots, 100);
    track::recycle(&mut slots, &recent);
    assert!(slots.is_none());
    // The ended request holds its entry no more: untracked, clearable.
    assert_eq!(t.get(&v4(1), 100).unwrap().counters.lock().conn_cur, 0);
    assert_eq!(t.clear(None), 1);

    let mut next = None;
    track::start(&mut next, 1, (0, &t), v4(2), Some(&recent), 200);
    let s = next.as_deref().expect("tracked");
    assert_eq!(Some(s as *const Slots), room, "the same room");
    assert!(s[0].is_none() && s[2].is_none(), "emptied");
    assert_eq!(s[1].as_ref().unwrap().entry.counters.lock().conn_cur, 1);
}

#[test]
fn a_remembered_entry_being_removed_is_looked_up_again() {
    let t = ip_table(1_000, &["http_req_cnt"]);
    let recent = track::Recent::default();
    assert_eq!(track_on(&recent, &t, v4(1), 100), 1);
    // The table marks an entry gone while it removes it: a connection
    // that took it back from its memory at that moment does not count in
    // it but in the map's (here still the same entry: the removal did not
    // happen, as the connection held it when the count was read).
    let e = t.get(&v4(1), 100).unwrap();
    e.gone.store(true, Ordering::Relaxed);
    assert!(t.remembered(Arc::clone(&e), 150).is_none());
    e.gone.store(false, Ordering::Relaxed);
    drop(e);
    assert_eq!(track_on(&recent, &t, v4(1), 200), 2);
}

#[test]
fn a_connection_never_counts_in_an_entry_the_table_removed() {
    // One thread tracks through its connection's memory while another
    // clears the table over and over: every tracked entry is the map's
    // (a removed one would be an orphan, its counts lost).
    let t = ip_table(60_000, &["http_req_cnt"]);
    let stop = Arc::new(AtomicBool::new(false));
    let clearer = {
        let (t, stop) = (Arc::clone(&t), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut removed = 0;
            while !stop.load(Ordering::Relaxed) {
                removed += t.clear(None);
            }
            removed
        })
    };
    let recent = track::Recent::default();
    let mut orphans = 0;
    for i in 0..100_000u32 {
        let mut slots = None;
        track::start(&mut slots, 0, (0, &t), v4(1), Some(&recent), 100 + i % 1000);
        let tr = slots
            .as_deref()
            .and_then(|s| s[0].as_ref())
            .expect("tracked");
        if !t
            .get(&v4(1), 100)
            .is_some_and(|e| Arc::ptr_eq(&e, &tr.entry))
        {
            orphans += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let removed = clearer.join().unwrap();
    assert_eq!(
        orphans, 0,
        "tracked entries not in the table ({removed} removals)"
    );
    assert!(
        removed > 0,
        "the table was cleared while the connection tracked"
    );
}

#[test]
fn streams_of_one_connection_at_once_look_up_the_map() {
    let t = ip_table(1_000, &["http_req_cnt"]);
    let recent = track::Recent::default();
    let busy = recent.lock_for_test();
    assert_eq!(track_on(&recent, &t, v4(1), 100), 1);
    drop(busy);
    assert_eq!(track_on(&recent, &t, v4(1), 200), 2);
}
