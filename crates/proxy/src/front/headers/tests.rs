use super::*;

fn map(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn strips_hop_by_hop_and_connection_listed() {
    let mut h = map(&[
        ("connection", "keep-alive, X-Secret"),
        ("x-secret", "1"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "gzip"),
        ("trailer", "x-sum"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("x-kept", "yes"),
    ]);
    let p = Present::scan(&h);
    strip_hop_by_hop(&mut h, p, false);
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(h["x-kept"], "yes");
    // End to end (RFC 9110 section 6.6.2): without it hyper drops the
    // trailer fields of a forwarded chunked body.
    assert_eq!(h["trailer"], "x-sum");

    let mut h = map(&[("te", "trailers")]);
    let p = Present::scan(&h);
    strip_hop_by_hop(&mut h, p, false);
    assert_eq!(h["te"], "trailers");
}

#[test]
fn keeps_upgrade_for_upgrades() {
    let mut h = map(&[("connection", "Upgrade"), ("upgrade", "websocket")]);
    let p = Present::scan(&h);
    assert!(is_upgrade_request(Version::HTTP_11, &h, p));
    assert!(!is_upgrade_request(Version::HTTP_10, &h, p));
    // Either header alone is no upgrade.
    for one in ["connection", "upgrade"] {
        let single = map(&[(
            one,
            if one == "connection" {
                "upgrade"
            } else {
                "websocket"
            },
        )]);
        assert!(!is_upgrade_request(
            Version::HTTP_11,
            &single,
            Present::scan(&single)
        ));
    }
    strip_hop_by_hop(&mut h, p, true);
    assert_eq!(h["connection"], "upgrade");
    assert_eq!(h["upgrade"], "websocket");
}

#[test]
fn forwarding_headers_append() {
    let mut h = map(&[
        ("x-forwarded-for", "10.0.0.1"),
        ("forwarded", "for=10.0.0.1"),
    ]);
    let id = ClientId::new("192.0.2.7".parse().unwrap(), "https");
    let p = Present::scan(&h);
    add_forwarding(&mut h, p, &id, Some("example.com:8443"), true);
    assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
    assert_eq!(h["x-forwarded-proto"], "https");
    assert_eq!(
        h["forwarded"],
        "for=10.0.0.1, for=192.0.2.7;proto=https;host=\"example.com:8443\""
    );
    let mut h = HeaderMap::new();
    let p = Present::scan(&h);
    add_forwarding(
        &mut h,
        p,
        &ClientId::new("::1".parse().unwrap(), "http"),
        Some("a.example"),
        false,
    );
    assert_eq!(h["forwarded"], "for=\"[::1]\";proto=http;host=a.example");
    // IPv4-mapped IPv6 peers are logged as IPv4.
    let mut h = HeaderMap::new();
    let id = ClientId::new("::ffff:192.0.2.1".parse().unwrap(), "http");
    let p = Present::scan(&h);
    add_forwarding(&mut h, p, &id, None, false);
    assert_eq!(h["x-forwarded-for"], "192.0.2.1");
}

#[test]
fn forwarding_headers_from_an_untrusted_client_are_replaced() {
    let mut h = map(&[
        ("x-forwarded-for", "203.0.113.9"),
        ("x-forwarded-for", "198.51.100.1"),
        ("forwarded", "for=203.0.113.9;by=evil"),
        ("x-forwarded-proto", "https"),
    ]);
    let id = ClientId::new("192.0.2.7".parse().unwrap(), "http");
    let p = Present::scan(&h);
    add_forwarding(&mut h, p, &id, Some("a.example"), false);
    assert_eq!(
        h.get_all("x-forwarded-for").iter().collect::<Vec<_>>(),
        ["192.0.2.7"]
    );
    assert_eq!(
        h.get_all("forwarded").iter().collect::<Vec<_>>(),
        ["for=192.0.2.7;proto=http;host=a.example"]
    );
    assert_eq!(h["x-forwarded-proto"], "http");
}

#[test]
fn via_appends() {
    let via = HeaderValue::from_static("1.1 rdmalb");
    let mut h = map(&[("via", "1.0 fred")]);
    let p = Present::scan(&h);
    add_via(&mut h, p, &via);
    assert_eq!(h["via"], "1.0 fred, 1.1 rdmalb");
    let mut h = HeaderMap::new();
    let p = Present::scan(&h);
    add_via(&mut h, p, &via);
    assert_eq!(h["via"], "1.1 rdmalb");
}

#[test]
fn only_chunked_accepts_chunked_alone_in_any_case_and_spacing() {
    let te = |lines: &[&str]| {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(header::TRANSFER_ENCODING, HeaderValue::from_str(l).unwrap());
        }
        only_chunked(&h)
    };
    assert!(te(&[]));
    assert!(te(&["chunked"]));
    assert!(te(&[" Chunked "]));
    assert!(te(&["chunked", "chunked"]));
    assert!(!te(&["cow, chunked"]));
    assert!(!te(&["cow", "chunked"]));
    assert!(!te(&["gzip, chunked"]));
    assert!(!te(&["identity"]));
}

#[test]
fn chunked_twice_counts_over_every_line() {
    let te = |lines: &[&str]| {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(header::TRANSFER_ENCODING, HeaderValue::from_str(l).unwrap());
        }
        chunked_twice(&h)
    };
    assert!(!te(&[]));
    assert!(!te(&["chunked"]));
    assert!(!te(&["gzip, chunked"]));
    assert!(te(&["chunked", "chunked"]));
    assert!(te(&["chunked, Chunked"]));
    assert!(te(&[" chunked ;x=1", "gzip", "CHUNKED"]));
}

#[test]
fn a_body_of_unknown_length_is_chunked_for_the_node() {
    let mut h = map(&[("host", "a")]);
    chunk_unknown_length(&mut h, true);
    assert_eq!(h["transfer-encoding"], "chunked");
    let mut h = map(&[("content-length", "5")]);
    chunk_unknown_length(&mut h, true);
    assert!(!h.contains_key("transfer-encoding"), "{h:?}");
    let mut h = map(&[]);
    chunk_unknown_length(&mut h, false);
    assert!(h.is_empty(), "{h:?}");
}

#[test]
fn closes_after_follows_hypers_keep_alive_rules() {
    let none = map(&[]);
    let close = map(&[("connection", "Keep-Alive, Close")]);
    let keep = map(&[("connection", "keep-alive")]);
    assert!(!closes_after(Version::HTTP_11, &none));
    assert!(closes_after(Version::HTTP_11, &close));
    assert!(!closes_after(Version::HTTP_11, &keep));
    assert!(closes_after(Version::HTTP_10, &none));
    assert!(!closes_after(Version::HTTP_10, &keep));
    assert!(!closes_after(Version::HTTP_2, &close));
}

#[test]
fn present_flags_exactly_the_names_the_rewriting_reads() {
    let h = map(&[
        ("Host", "a.example"),
        ("TE", "trailers"),
        ("x-forwarded-for", "10.0.0.1"),
        ("Via", "1.1 other"),
        ("x-other", "1"),
    ]);
    let p = Present::scan(&h);
    assert!(p.has(Present::TE) && p.has(Present::X_FORWARDED_FOR) && p.has(Present::VIA));
    for flag in [
        Present::CONNECTION,
        Present::KEEP_ALIVE,
        Present::PROXY_CONNECTION,
        Present::TRANSFER_ENCODING,
        Present::UPGRADE,
        Present::EXPECT,
        Present::FORWARDED,
    ] {
        assert!(!p.has(flag), "{flag:#x} flagged in {h:?}");
    }
    assert_eq!(Present::scan(&HeaderMap::new()), Present::default());
}

#[test]
fn a_header_named_by_connection_is_gone_before_via_is_appended() {
    // The scan flagged Via; Connection names it, so it is stripped, and
    // add_via (reading the stale flag) finds none and sets its own.
    let mut h = map(&[("connection", "via"), ("via", "1.0 spoofed")]);
    let p = Present::scan(&h);
    strip_hop_by_hop(&mut h, p, false);
    add_via(&mut h, p, &HeaderValue::from_static("1.1 rdmalb"));
    assert_eq!(h.get_all("via").iter().collect::<Vec<_>>(), ["1.1 rdmalb"]);
}

#[test]
fn a_cached_client_id_is_the_one_new_makes() {
    for (ip, proto) in [
        ("192.0.2.7", "http"),
        ("192.0.2.7", "http"),
        ("192.0.2.7", "https"),
        ("::1", "https"),
        ("::ffff:192.0.2.1", "http"),
        ("192.0.2.7", "http"),
    ] {
        let ip: IpAddr = ip.parse().unwrap();
        let (a, b) = (ClientId::cached(ip, proto), ClientId::new(ip, proto));
        assert_eq!(
            (&a.ip, &*a.for_proto, a.proto),
            (&b.ip, &*b.for_proto, b.proto)
        );
    }
}
