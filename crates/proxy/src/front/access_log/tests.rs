use super::*;
use std::time::{Duration, UNIX_EPOCH};

fn tag() -> SyslogTag {
    SyslogTag {
        host: "edge-1".into(),
        program: "rdmalb".into(),
        pid: 4242,
    }
}

fn record() -> AccessRecord {
    AccessRecord {
        client: "127.0.0.1:41234".parse().unwrap(),
        date: UNIX_EPOCH + Duration::from_millis(1_795_265_200_123),
        listener: "web".into(),
        tls: false,
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
        counts: Counts {
            actconn: 3,
            feconn: 2,
            beconn: 1,
            srv_conn: 0,
            retries: 1,
        },
        queues: (0, 4),
        method: Some(http::Method::GET),
        target: "/a\"b\n".into(),
        version: http::Version::HTTP_11,
    }
}

#[test]
fn formats_like_haproxy_httplog_in_a_syslog_file() {
    let mut s = String::new();
    let now = UNIX_EPOCH + Duration::from_secs(1_795_265_201);
    format_record(&record(), &tag(), now, &mut s);
    assert_eq!(
        s,
        "Nov 21 12:46:41 edge-1 rdmalb[4242]: 127.0.0.1:41234 [21/Nov/2026:12:46:40.123] web www/<NOSRV> 0/0/1/2/3 503 27 - - SC-- 3/2/1/0/+1 0/4 \"GET /a%22b%0A HTTP/1.1\""
    );
}

#[test]
fn tls_frontend_missing_status_and_bad_request() {
    let mut r = record();
    r.tls = true;
    r.site = None;
    r.status = 0;
    r.termination = "CD";
    r.counts.retries = 0;
    r.method = None;
    // A single-digit day is padded with a space, as syslog does.
    let now = UNIX_EPOCH + Duration::from_secs(1_794_000_000);
    let mut s = String::new();
    format_record(&r, &tag(), now, &mut s);
    assert_eq!(
        s,
        "Nov  6 21:20:00 edge-1 rdmalb[4242]: 127.0.0.1:41234 [21/Nov/2026:12:46:40.123] web~ <NOSITE>/<NOSRV> 0/0/1/2/3 -1 27 - - CD-- 3/2/1/0/0 0/4 \"<BADREQ>\""
    );
}

#[test]
fn civil_dates() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
}
