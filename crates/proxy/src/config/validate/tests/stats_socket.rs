//! `[[stats_socket]]`: where it listens, the socket file's mode and owner,
//! the level.

use super::*;
use crate::config::{Level, StatsEndpoint};

#[test]
fn stats_socket_defaults_to_haproxys_operator_level() {
    let c = ok(&with("[[stats_socket]]\npath = \"/run/rdmalb/admin.sock\""));
    let s = &c.stats_sockets[0];
    assert_eq!(
        s.endpoint,
        StatsEndpoint::Unix("/run/rdmalb/admin.sock".into())
    );
    assert_eq!(
        (s.level, s.mode, s.uid, s.gid),
        (Level::Operator, None, None, None)
    );
    assert_eq!(s.timeout, std::time::Duration::from_secs(10));
}

#[test]
fn stats_socket_timeout_is_haproxys_stats_timeout() {
    let c = ok(&with(
        "[[stats_socket]]\npath = \"admin.sock\"\ntimeout = \"2m\"",
    ));
    assert_eq!(
        c.stats_sockets[0].timeout,
        std::time::Duration::from_secs(120)
    );
}

#[test]
fn bad_stats_socket_timeouts() {
    for (value, says) in [
        ("\"0s\"", "accepted: 1s to 86400s"),
        ("\"25h\"", "accepted: 1s to 86400s"),
        ("\"soon\"", "expected e.g. 250ms, 2s, 1m"),
    ] {
        rejects(
            &with(&format!(
                "[[stats_socket]]\npath = \"admin.sock\"\ntimeout = {value}"
            )),
            "stats_socket[0].timeout",
            says,
        );
    }
}

#[test]
fn stats_socket_mode_owner_and_level() {
    let c = ok(&with(
        "[[stats_socket]]\npath = \"admin.sock\"\nmode = \"660\"\nuser = \"root\"\ngroup = \"0\"\nlevel = \"admin\"\n\
         [[stats_socket]]\nlisten = \"127.0.0.1:9999\"\nlevel = \"user\"",
    ));
    let s = &c.stats_sockets[0];
    assert_eq!(
        (s.mode, s.uid, s.gid, s.level),
        (Some(0o660), Some(0), Some(0), Level::Admin)
    );
    assert_eq!(
        c.stats_sockets[1].endpoint,
        StatsEndpoint::Tcp("127.0.0.1:9999".parse().unwrap())
    );
}

#[test]
fn stats_socket_needs_one_place() {
    rejects(
        &with("[[stats_socket]]\nlevel = \"admin\""),
        "stats_socket[0]",
        "exactly one of `path`",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\nlisten = \"127.0.0.1:9999\""),
        "stats_socket[0]",
        "exactly one of `path`",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"\""),
        "stats_socket[0].path",
        "empty",
    );
}

#[test]
fn stats_socket_tcp_stays_on_loopback() {
    rejects(
        &with("[[stats_socket]]\nlisten = \"0.0.0.0:9999\""),
        "stats_socket[0].listen",
        "loopback",
    );
    rejects(
        &with("[[stats_socket]]\nlisten = \"nowhere\""),
        "stats_socket[0].listen",
        "host:port",
    );
    rejects(
        &with("[[stats_socket]]\nlisten = \"127.0.0.1:9999\"\nmode = \"600\""),
        "stats_socket[0]",
        "apply to a UNIX socket",
    );
}

#[test]
fn stats_socket_bad_mode_owner_level() {
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\nmode = \"rw\""),
        "stats_socket[0].mode",
        "octal",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\nmode = \"1777\""),
        "stats_socket[0].mode",
        "octal",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\nuser = \"no-such-user-here\""),
        "stats_socket[0].user",
        "/etc/passwd",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\ngroup = \"no-such-group-here\""),
        "stats_socket[0].group",
        "/etc/group",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\nlevel = \"root\""),
        "stats_socket[0].level",
        "user, operator or admin",
    );
    rejects(
        &with("[[stats_socket]]\npath = \"a.sock\"\n[[stats_socket]]\npath = \"a.sock\""),
        "stats_socket[1]",
        "already a stats socket",
    );
}

/// `[[listener]] monitor_uri`, HAProxy's other operational surface.
#[test]
fn monitor_uri_is_a_request_path() {
    let listener = "listen = \"127.0.0.1:8080\"\n";
    let c = ok(&BASE.replace(
        listener,
        &format!("{listener}monitor_uri = \"/haproxy_test\"\n"),
    ));
    assert_eq!(c.listeners[0].monitor_uri.as_deref(), Some("/haproxy_test"));
    rejects(
        &BASE.replace(listener, &format!("{listener}monitor_uri = \"health\"\n")),
        "listener[0].monitor_uri",
        "not a request path",
    );
}

/// `monitor_fail`: HAProxy's `monitor fail if { nbsrv(<site>) lt <n> }`.
#[test]
fn monitor_fail_names_a_site_and_needs_monitor_uri() {
    let listener = "listen = \"127.0.0.1:8080\"\n";
    let with_fail = |extra: &str| BASE.replace(listener, &format!("{listener}{extra}\n"));
    let c = ok(&with_fail(
        "monitor_uri = \"/m\"\nmonitor_fail = { site = \"shop\", serving_below = 2 }",
    ));
    let f = c.listeners[0].monitor_fail.clone().unwrap();
    assert_eq!((f.site.as_str(), f.serving_below), ("shop", 2));
    rejects(
        &with_fail("monitor_fail = { site = \"shop\" }"),
        "listener[0].monitor_fail",
        "without monitor_uri",
    );
    rejects(
        &with_fail("monitor_uri = \"/m\"\nmonitor_fail = { site = \"nope\" }"),
        "listener[0].monitor_fail.site",
        "no site named `nope`",
    );
    rejects(
        &with_fail("monitor_uri = \"/m\"\nmonitor_fail = { site = \"shop\", serving_below = 0 }"),
        "listener[0].monitor_fail.serving_below",
        "",
    );
}
