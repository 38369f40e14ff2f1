//! The persistence cookie's value format (HAProxy's dates), its removal
//! and unprefixing on the way in, and the node's cookies on the way out.
//! The whole exchange against the real HAProxy is the rules corpus'
//! `sticky-*` configurations.

use std::time::Duration;

use super::*;
use crate::fixtures::sticky;

#[test]
fn dates_are_five_base64_digits_of_30_bits() {
    assert_eq!(&s30_to_b64(0), b"AAAAA");
    assert_eq!(&s30_to_b64(1), b"AAAAB");
    assert_eq!(&s30_to_b64((1 << 30) - 1), b"/////");
    for v in [1u32, 63, 64, 441_000_000, (1 << 30) - 1] {
        assert_eq!(b64_to_s30(&s30_to_b64(v)), Some(v));
    }
    assert_eq!(b64_to_s30(b"AA-AA"), None);
    assert_eq!(b64_to_s30(b"AAA"), None);
}

#[test]
fn value_parts_in_each_mode() {
    let insert = sticky(CookieMode::Insert);
    assert_eq!(parse_value(&insert, b"s1"), (&b"s1"[..], 0, 0));
    let last = s30_to_b64(441_000_000);
    let first = s30_to_b64(440_000_000);
    let v = [&b"s1|"[..], &last, b"|", &first].concat();
    assert_eq!(
        parse_value(&insert, &v),
        (&b"s1"[..], 440_000_000 << 2, 441_000_000 << 2)
    );
    let prefix = sticky(CookieMode::Prefix);
    assert_eq!(parse_value(&prefix, b"s2~app|x"), (&b"s2"[..], 0, 0));
}

#[test]
fn expired_dates_name_no_node() {
    let mut st = sticky(CookieMode::Insert);
    st.maxidle = Some(Duration::from_secs(60));
    st.maxlife = Some(Duration::from_secs(3600));
    let now = 1_800_000_000;
    assert!(live_dates(&st, now - 100, now - 10, now).is_some());
    assert!(
        live_dates(&st, now - 100, now - 61, now).is_none(),
        "idle too long"
    );
    assert!(live_dates(&st, now - 3601, now, now).is_none(), "too old");
    assert!(
        live_dates(&st, 0, now + 90_000, now).is_none(),
        "a day ahead"
    );
    assert!(live_dates(&st, 0, 0, now).is_some());
}

fn cookie_lines(h: &HeaderMap) -> Vec<String> {
    h.get_all(header::COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn indirect_removes_the_cookie_and_prefix_mode_unprefixes_it() {
    let mut st = sticky(CookieMode::Insert);
    st.indirect = true;
    let mut h = HeaderMap::new();
    h.append(header::COOKIE, HeaderValue::from_static("a=b; SRV=s2; c=d"));
    h.append(header::COOKIE, HeaderValue::from_static("SRV=s1"));
    strip(&st, &mut h);
    assert_eq!(cookie_lines(&h), vec!["a=b; c=d"]);

    let st = sticky(CookieMode::Prefix);
    let mut h = HeaderMap::new();
    h.append(
        header::COOKIE,
        HeaderValue::from_static("x=1; SRV=a1~abc; y=2"),
    );
    strip(&st, &mut h);
    assert_eq!(cookie_lines(&h), vec!["x=1; SRV=abc; y=2"]);

    // Insert without indirect: the node sees the cookie as sent.
    let st = sticky(CookieMode::Insert);
    let mut h = HeaderMap::new();
    h.append(header::COOKIE, HeaderValue::from_static("SRV=s1"));
    strip(&st, &mut h);
    assert_eq!(cookie_lines(&h), vec!["SRV=s1"]);
}

fn set_cookies(h: &HeaderMap) -> Vec<String> {
    h.get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_nodes_cookie_is_rewritten_prefixed_or_dropped() {
    let node_sets = || {
        let mut h = HeaderMap::new();
        h.append(
            header::SET_COOKIE,
            HeaderValue::from_static("SRV=app; Path=/"),
        );
        h.append(header::SET_COOKIE, HeaderValue::from_static("other=1"));
        h
    };
    let mut h = node_sets();
    server_cookies(&sticky(CookieMode::Rewrite), &mut h, Some("s1"), false);
    assert_eq!(set_cookies(&h), vec!["SRV=s1; Path=/", "other=1"]);
    let mut h = node_sets();
    server_cookies(&sticky(CookieMode::Prefix), &mut h, Some("s1"), false);
    assert_eq!(set_cookies(&h), vec!["SRV=s1~app; Path=/", "other=1"]);
    let mut h = node_sets();
    server_cookies(&sticky(CookieMode::Insert), &mut h, Some("s1"), false);
    assert_eq!(set_cookies(&h), vec!["other=1"]);
    let mut h = node_sets();
    server_cookies(&sticky(CookieMode::Passive), &mut h, Some("s1"), false);
    assert_eq!(set_cookies(&h), vec!["SRV=app; Path=/", "other=1"]);
    let mut passive = sticky(CookieMode::Passive);
    passive.indirect = true;
    let mut h = node_sets();
    server_cookies(&passive, &mut h, Some("s1"), true);
    assert_eq!(set_cookies(&h), vec!["other=1"], "indirect on a direct hit");
}

#[test]
fn cacheability_as_haproxy_judges_it() {
    let mut h = HeaderMap::new();
    assert!(
        !cacheable_response(StatusCode::OK, &h),
        "no validator, no freshness"
    );
    h.insert(header::ETAG, HeaderValue::from_static("\"x\""));
    assert!(cacheable_response(StatusCode::OK, &h));
    assert!(!cacheable_response(StatusCode::FOUND, &h));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    assert!(!cacheable_response(StatusCode::OK, &h));
    let mut req = HeaderMap::new();
    assert!(cacheable_request(&Method::GET, &req));
    assert!(!cacheable_request(&Method::POST, &req));
    req.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic eDp5"),
    );
    assert!(!cacheable_request(&Method::GET, &req));
}
