//! The hash functions against their published check values, the key
//! extraction rules of HAProxy's `balance` keys, and the tables' layout
//! and bounded-load walk. That the same key reaches the same server as in
//! HAProxy itself is the rules corpus' job (`tests/import/rules/hash-*`).

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue, Uri};

use super::functions::*;
use super::*;
use crate::balance::{control::Source, Pick, Thresholds};
use crate::config::{HashFunction, HashKey};

const T: Thresholds = Thresholds {
    rise: 2,
    fall: 3,
    passive_failures: 3,
};

fn nodes(n: usize) -> Vec<Arc<NodeState>> {
    (0..n)
        .map(|i| {
            Arc::new(NodeState::new(
                i,
                format!("n{i}"),
                format!("127.0.0.1:{}", 11_000 + i).parse().unwrap(),
                Some((0, "s".to_string())),
                T,
            ))
        })
        .collect()
}

fn conf(key: HashKey, consistent: bool) -> HashBalance {
    HashBalance {
        key,
        consistent,
        function: HashFunction::Sdbm,
        avalanche: false,
        balance_factor: None,
        bound_load: BoundLoad::Published,
    }
}

#[test]
fn functions_match_their_definitions() {
    // CRC-32/ISO-HDLC check value.
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    assert_eq!(djb2(b""), 5381);
    assert_eq!(djb2(b"a"), 5381 * 33 + 97);
    assert_eq!(sdbm(b""), 0);
    assert_eq!(sdbm(b"a"), 97);
    // sdbm("ab") = 'b' + (97 << 6) + (97 << 16) - 97
    assert_eq!(sdbm(b"ab"), 98 + (97 << 6) + (97 << 16) - 97);
    assert_eq!(wt6(b""), 0xa53c_965a ^ 0x5ca6_953a);
    assert_ne!(wt6(b"a"), wt6(b"b"));
    // full_hash is a bijection of 32-bit words: no two small keys collide.
    let mut seen: Vec<u32> = (0..100_000).map(full_hash).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 100_000);
}

fn key(k: HashKey, uri: &str, headers: &[(&str, &str)], client: &str) -> Option<u32> {
    let mut h = HeaderMap::new();
    for (n, v) in headers {
        h.append(
            http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let client: IpAddr = client.parse().unwrap();
    key_hash(&conf(k, false), &uri.parse::<Uri>().unwrap(), &h, client)
}

#[test]
fn source_is_the_address_as_a_number() {
    assert_eq!(
        key(HashKey::Source, "/", &[], "127.0.0.9"),
        Some(0x7f00_0009)
    );
    assert_eq!(key(HashKey::Source, "/", &[], "::1"), Some(1));
    assert_eq!(
        key(HashKey::Source, "/", &[], "1:0:0:0:0:0:0:1"),
        Some(0x0001_0000 ^ 1)
    );
}

#[test]
fn uri_stops_at_the_query_and_honours_len_and_depth() {
    let uri = |whole, len, depth, u: &str| {
        key(
            HashKey::Uri {
                whole,
                path_only: false,
                len,
                depth,
            },
            u,
            &[],
            "127.0.0.1",
        )
    };
    let s = |t: &str| Some(sdbm(t.as_bytes()));
    assert_eq!(uri(false, 0, 0, "/a/b?x=1"), s("/a/b"));
    assert_eq!(uri(true, 0, 0, "/a/b?x=1"), s("/a/b?x=1"));
    assert_eq!(uri(false, 3, 0, "/a/b?x=1"), s("/a/"));
    assert_eq!(uri(false, 0, 1, "/a/b/c"), s("/a"));
    assert_eq!(uri(false, 0, 2, "/a/b/c"), s("/a/b"));
    assert_eq!(uri(false, 0, 2, "/a"), s("/a"));
}

#[test]
fn url_param_is_found_only_as_a_whole_name() {
    let p = |u: &str| key(HashKey::UrlParam("uid".into()), u, &[], "127.0.0.1");
    let s = |t: &str| Some(sdbm(t.as_bytes()));
    assert_eq!(p("/s?uid=42"), s("42"));
    assert_eq!(p("/s?a=1&uid=42&b=2"), s("42"));
    assert_eq!(p("/s?xuid=5&uid=9"), s("9"));
    assert_eq!(p("/s?uid="), s(""));
    assert_eq!(p("/s?uid"), None);
    assert_eq!(p("/s?xuid=5"), None);
    assert_eq!(p("/s"), None);
}

#[test]
fn header_takes_the_first_element_and_the_domain_on_request() {
    let name = http::HeaderName::from_static("x-tenant");
    let h = |domain_only, v: &str| {
        key(
            HashKey::Header {
                name: name.clone(),
                domain_only,
            },
            "/",
            &[("x-tenant", v)],
            "127.0.0.1",
        )
    };
    let s = |t: &str| Some(sdbm(t.as_bytes()));
    assert_eq!(h(false, "acme"), s("acme"));
    assert_eq!(h(false, " b , c"), s("b"));
    assert_eq!(h(false, ","), None, "an empty value is no key");
    assert_eq!(h(true, "www.example.com"), s("example"));
    assert_eq!(h(true, "example.com:8080"), s("example"));
    assert_eq!(h(true, "localhost"), s("localhost"));
    assert_eq!(
        key(
            HashKey::Header {
                name: name.clone(),
                domain_only: false
            },
            "/",
            &[],
            "127.0.0.1"
        ),
        None
    );
}

#[test]
fn cookie_key_is_the_first_non_empty_cookie_of_that_name() {
    let c = |v: &str| {
        key(
            HashKey::Cookie("session".into()),
            "/",
            &[("cookie", v)],
            "127.0.0.1",
        )
    };
    assert_eq!(c("a=b; session=xyz"), Some(sdbm(b"xyz")));
    assert_eq!(c("session=q, a=b"), Some(sdbm(b"q")));
    assert_eq!(c("session="), None);
    assert_eq!(c("other=1"), None);
}

#[test]
fn map_gives_each_node_its_weight_in_slots_spread_out() {
    let eweights = [1, 2, 3];
    let map = server_map(&eweights, 6);
    assert_eq!(map.len(), 6);
    for (i, w) in eweights.iter().enumerate() {
        assert_eq!(
            map.iter().filter(|&&m| m as usize == i).count(),
            *w as usize
        );
    }
    // Equal weights: config order, round and round.
    assert_eq!(server_map(&[1, 1, 1], 3), vec![0, 1, 2]);
    // The heaviest node's slots are not all together.
    assert_ne!(&map[..3], &[2, 2, 2]);
}

#[test]
fn ring_places_weight_times_16_points_and_picks_the_nearest() {
    let ns = nodes(3);
    ns[2].set_weight(2, Source::Runtime);
    let c = conf(HashKey::Source, true);
    let t = HashTable::build(&c, &ns, |i| i as u32 + 1, 1);
    let Layout::Ring(points) = &t.layout else {
        panic!("a ring")
    };
    assert_eq!(points.len(), 16 + 16 + 32);
    assert!(points.windows(2).all(|w| w[0].0 <= w[1].0));
    // A key on a point goes to that point's node; the same key always to
    // the same node.
    let windows = NodeWindows::none();
    for (k, node) in points.iter().take(10) {
        let got = t.pick(Some(*k), |_| true, &windows).unwrap();
        assert_eq!(got.index, *node as usize);
    }
    // A key just after a point and far from the next goes to that point.
    let (k0, n0) = points[0];
    let gap = points[1].0 - k0;
    if gap > 4 {
        let got = t.pick(Some(k0 + 1), |_| true, &windows).unwrap();
        assert_eq!(got.index, n0 as usize);
    }
}

#[test]
fn excluded_nodes_are_walked_past() {
    let ns = nodes(3);
    let t = HashTable::build(&conf(HashKey::Source, true), &ns, |i| i as u32 + 1, 1);
    let windows = NodeWindows::none();
    for k in (0..u32::MAX).step_by(0x0100_0000) {
        let first = t.pick(Some(k), |_| true, &windows).unwrap();
        let other = t
            .pick(Some(k), |n| n.index != first.index, &windows)
            .unwrap();
        assert_ne!(other.index, first.index);
    }
    assert!(t.pick(Some(7), |_| false, &windows).is_none());
}

#[test]
fn keyless_requests_go_round_the_table() {
    let ns = nodes(3);
    let t = HashTable::build(&conf(HashKey::Source, false), &ns, |i| i as u32 + 1, 1);
    let windows = NodeWindows::none();
    let order: Vec<usize> = (0..6)
        .map(|_| t.pick(None, |_| true, &windows).unwrap().index)
        .collect();
    assert_eq!(order, vec![0, 1, 2, 0, 1, 2]);
}

#[test]
fn bounded_loads_skip_a_node_over_its_share() {
    let ns = nodes(3);
    let mut c = conf(HashKey::Source, true);
    c.balance_factor = Some(125);
    let t = HashTable::build(&c, &ns, |i| i as u32 + 1, 1);
    let windows = NodeWindows::none();
    let k = 0x1234_5678;
    let home = t.pick(Some(k), |_| true, &windows).unwrap();
    // The key's node holds 10 requests, the others none: over 125 % of
    // the average (10 + 1) / 3, it is skipped.
    let _held: Vec<Pick> = (0..10).map(|_| Pick::acquire(Arc::clone(&home))).collect();
    let moved = t.pick(Some(k), |_| true, &windows).unwrap();
    assert_ne!(moved.index, home.index);
    // Without the bound the key stays.
    let free = HashTable::build(&conf(HashKey::Source, true), &ns, |i| i as u32 + 1, 1);
    assert_eq!(
        free.pick(Some(k), |_| true, &windows).unwrap().index,
        home.index
    );
}

/// Three shm windows in `dir` and the windows a proxy reads them through;
/// returns each node's window memory.
async fn shm_windows(
    dir: &std::path::Path,
) -> (Arc<NodeWindows>, Vec<rdmalb_window::WindowMemory>) {
    let site = rdmalb_window::site_table_hash(&["s"]);
    let mut text = String::from(
        "[[listener]]\nlisten = \"127.0.0.1:1\"\n[[site]]\nname = \"s\"\nhosts = [\"s.test\"]\n",
    );
    let mut mems = Vec::new();
    for i in 0..3 {
        let path = dir.join(format!("w{i}"));
        let m = rdmalb_window::WindowMemory::create_shm(&path, 0o600, i as u64 + 1, site).unwrap();
        rdmalb_window::seqlock::publish(&m, &rdmalb_window::LoadSample::default());
        mems.push(m);
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"s\"\ntransport = \"shm\"\nsidecar = \"{}\"\nnode_id = {}\n",
            9000 + i,
            path.display(),
            i + 1
        ));
    }
    let cfg =
        crate::config::parse(&text, &dir.join("rdmalb.toml")).unwrap_or_else(|e| panic!("{e}"));
    let (_tx, rx) = tokio::sync::watch::channel(false);
    (NodeWindows::start(&cfg, rx).await.unwrap(), mems)
}

#[tokio::test]
async fn the_bound_counts_published_work_unless_told_own() {
    let dir = tempfile::tempdir().unwrap();
    let (windows, mems) = shm_windows(dir.path()).await;
    let ns = nodes(3);
    let mut c = conf(HashKey::Source, true);
    c.balance_factor = Some(125);
    let k = 0x1234_5678;
    let t = HashTable::build(&c, &ns, |i| i as u32 + 1, 1);
    let home = t.pick(Some(k), |_| true, &windows).unwrap();
    // Other proxies' requests: the key's node publishes 10 in its app,
    // this proxy has none in flight anywhere.
    let busy = rdmalb_window::LoadSample {
        app_busy: 4,
        app_queue_len: 6,
        ..Default::default()
    };
    rdmalb_window::seqlock::publish(&mems[home.index], &busy);
    let moved = t.pick(Some(k), |_| true, &windows).unwrap();
    assert_ne!(moved.index, home.index, "published work counts");
    // HAProxy's count (`bound_load = "own"`): this proxy sent nothing, the
    // key stays on its node.
    c.bound_load = BoundLoad::Own;
    let own = HashTable::build(&c, &ns, |i| i as u32 + 1, 1);
    assert_eq!(
        own.pick(Some(k), |_| true, &windows).unwrap().index,
        home.index
    );
}

#[test]
fn gcd_of_weights() {
    assert_eq!(weights_gcd([20, 10, 0].into_iter()), 10);
    assert_eq!(weights_gcd([0, 0].into_iter()), 1);
    assert_eq!(weights_gcd([3, 5].into_iter()), 1);
}
