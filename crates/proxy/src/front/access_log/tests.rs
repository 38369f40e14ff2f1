use super::*;
use std::time::Duration;

#[test]
fn formats_like_haproxy_httplog() {
    let rec = AccessRecord {
        client: "127.0.0.1:41234".parse().unwrap(),
        date: UNIX_EPOCH + Duration::from_millis(1_795_265_200_123),
        listener: "web".into(),
        site: Some("www".into()),
        node: None,
        timers: Timers {
            tq: 0,
            tw: 0,
            tc: 1,
            tr: 2,
            ta: 3,
        },
        status: 503,
        bytes: 27,
        termination: "SC",
        method: Some(http::Method::GET),
        target: "/a\"b\n".into(),
        version: http::Version::HTTP_11,
    };
    let mut s = String::new();
    format_record(&rec, &mut s);
    assert_eq!(
        s,
        "127.0.0.1:41234 [21/Nov/2026:12:46:40.123] web www/<NOSRV> 0/0/1/2/3 503 27 SC \"GET /a%22b%0A HTTP/1.1\""
    );
}

#[test]
fn civil_dates() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
}
