//! One test per rejected `[reconfig]` value: each checks the key path and
//! that the message says what would be accepted.

use crate::fixtures::{config as ok, rejects_at as rejects};
use std::path::Path;
use std::time::Duration;

use crate::config::{PeerProxy, ReconfigMode, WindowEndpoint};

/// Two sites, one node with a shm window (so "reconfigure" is allowed) and a
/// psk file (so tcp proxy windows are allowed).
const BASE: &str = r#"
[global]
proxy_id = 2

[cluster]
psk_file = "cluster.psk"

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com"]

[[site]]
name = "blog"
hosts = ["blog.example.com"]

[[node]]
name = "n1"
address = "127.0.0.1:9001"
site = "shop"
transport = "shm"
sidecar = "/dev/shm/rdmalb-n1"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn defaults_when_the_section_is_absent() {
    let r = ok(BASE).reconfig;
    assert_eq!(r.mode, ReconfigMode::Rigid);
    assert_eq!(r.sensitivity, Duration::from_millis(200));
    assert_eq!(r.role_poll, Duration::from_millis(10));
    assert_eq!(r.history, Duration::from_secs(1));
    assert_eq!(r.history_max, Duration::from_secs(4));
    assert_eq!(r.high_watermark, 0.8);
    assert_eq!(r.low_watermark, 0.2);
    assert_eq!(r.lock_lease, Duration::from_secs(2));
    assert_eq!(r.lock_skew, Duration::from_millis(500));
    assert_eq!(r.cooldown, Duration::from_secs(5));
    assert_eq!(r.lock_home, 2, "alone, this proxy is its own lock home");
    assert!(!r.window.is_served());
    assert!(r.peers.is_empty());
}

#[test]
fn full_section_is_accepted() {
    let r = ok(&with(
        r#"
[reconfig]
mode = "reconfigure"
sensitivity = "100ms"
history = "2s"
history_max = "2s"
high_watermark = 0.9
low_watermark = 0.1
lock_lease = "3s"
lock_skew = "600ms"
cooldown = "0s"
window = { shm = "/dev/shm/rdmalb-proxy-2", tcp = "127.0.0.1:7102" }

[[reconfig.peer]]
id = 1
transport = "shm"
window = "/dev/shm/rdmalb-proxy-1"

[[reconfig.peer]]
id = 3
transport = "tcp"
window = "127.0.0.1:7103"
"#,
    ))
    .reconfig;
    assert_eq!(r.mode, ReconfigMode::Reconfigure);
    assert_eq!(r.sensitivity, Duration::from_millis(100));
    assert_eq!(r.history, Duration::from_secs(2));
    assert_eq!(r.history_max, Duration::from_secs(2), "T fixed");
    assert_eq!(r.lock_skew, Duration::from_millis(600));
    assert_eq!(r.cooldown, Duration::ZERO);
    assert_eq!(r.lock_home, 1, "default lock home: the lowest proxy id");
    assert_eq!(
        r.window.shm.as_deref(),
        Some(Path::new("/dev/shm/rdmalb-proxy-2"))
    );
    assert_eq!(r.window.tcp, Some("127.0.0.1:7102".parse().unwrap()));
    assert_eq!(
        r.peers[1],
        PeerProxy {
            id: 3,
            window: WindowEndpoint::Tcp {
                addr: "127.0.0.1:7103".parse().unwrap()
            }
        }
    );
}

#[test]
fn explicit_lock_home() {
    let r = ok(&with(
        "[reconfig]\nlock_home = 3\nwindow = { shm = \"/dev/shm/p2\" }\n[[reconfig.peer]]\nid = 3\ntransport = \"shm\"\nwindow = \"/dev/shm/p3\"",
    ))
    .reconfig;
    assert_eq!(r.lock_home, 3);
}

#[test]
fn bad_mode() {
    rejects(
        &with("[reconfig]\nmode = \"overprovision\""),
        "reconfig.mode",
        "\"rigid\" or \"reconfigure\"",
    );
}

#[test]
fn unknown_key() {
    rejects(
        &with("[reconfig]\nsensitivty = \"1s\""),
        "reconfig",
        "unknown field",
    );
}

#[test]
fn bad_sensitivity() {
    rejects(
        &with("[reconfig]\nsensitivity = \"soon\""),
        "reconfig.sensitivity",
        "",
    );
}

#[test]
fn zero_sensitivity() {
    rejects(
        &with("[reconfig]\nsensitivity = \"0s\""),
        "reconfig.sensitivity",
        "greater than zero",
    );
}

#[test]
fn zero_role_poll() {
    rejects(
        &with("[reconfig]\nrole_poll = \"0ms\""),
        "reconfig.role_poll",
        "greater than zero",
    );
}

#[test]
fn role_poll_defaults_to_at_most_sensitivity() {
    let r = ok(&with(
        "[reconfig]\nsensitivity = \"5ms\"\nhistory = \"10ms\"",
    ))
    .reconfig;
    assert_eq!(r.role_poll, Duration::from_millis(5));
}

#[test]
fn role_poll_longer_than_sensitivity() {
    rejects(
        &with("[reconfig]\nrole_poll = \"500ms\""),
        "reconfig.role_poll",
        "expected role_poll <= sensitivity",
    );
}

#[test]
fn bad_history() {
    rejects(&with("[reconfig]\nhistory = \"5\""), "reconfig.history", "");
}

#[test]
fn history_max_defaults_to_four_times_history() {
    let r = ok(&with("[reconfig]\nhistory = \"300ms\"")).reconfig;
    assert_eq!(r.history_max, Duration::from_millis(1200));
}

#[test]
fn history_max_shorter_than_history() {
    rejects(
        &with("[reconfig]\nhistory = \"2s\"\nhistory_max = \"1s\""),
        "reconfig.history_max",
        "expected history_max >= history",
    );
}

#[test]
fn history_shorter_than_sensitivity() {
    rejects(
        &with("[reconfig]\nsensitivity = \"1s\"\nhistory = \"500ms\""),
        "reconfig.history",
        "expected history >= sensitivity",
    );
}

#[test]
fn high_watermark_not_positive() {
    rejects(
        &with("[reconfig]\nhigh_watermark = 0.0"),
        "reconfig.high_watermark",
        "expected a number above 0",
    );
}

#[test]
fn high_watermark_too_large() {
    rejects(
        &with("[reconfig]\nhigh_watermark = 1000.0"),
        "reconfig.high_watermark",
        "at most 100",
    );
}

#[test]
fn low_watermark_negative() {
    rejects(
        &with("[reconfig]\nlow_watermark = -0.5"),
        "reconfig.low_watermark",
        "expected a number above 0",
    );
}

#[test]
fn low_watermark_not_below_high() {
    rejects(
        &with("[reconfig]\nlow_watermark = 0.8\nhigh_watermark = 0.8"),
        "reconfig.low_watermark",
        "expected low_watermark < high_watermark",
    );
}

#[test]
fn zero_lock_lease() {
    rejects(
        &with("[reconfig]\nlock_lease = \"0ms\""),
        "reconfig.lock_lease",
        "greater than zero",
    );
}

#[test]
fn bad_lock_skew() {
    rejects(
        &with("[reconfig]\nlock_skew = \"a while\""),
        "reconfig.lock_skew",
        "",
    );
}

#[test]
fn bad_cooldown() {
    rejects(
        &with("[reconfig]\ncooldown = \"-1s\""),
        "reconfig.cooldown",
        "",
    );
}

#[test]
fn window_relative_shm_path() {
    rejects(
        &with("[reconfig]\nwindow = { shm = \"rdmalb-proxy\" }"),
        "reconfig.window.shm",
        "absolute path",
    );
}

#[test]
fn window_bad_tcp_address() {
    rejects(
        &with("[reconfig]\nwindow = { tcp = \"port 7101\" }"),
        "reconfig.window.tcp",
        "host:port",
    );
}

#[test]
fn window_empty() {
    rejects(
        &with("[reconfig]\nwindow = {}"),
        "reconfig.window",
        "expected `shm",
    );
}

#[test]
fn window_unknown_key() {
    rejects(
        &with("[reconfig]\nwindow = { rdma = \"127.0.0.1:1\" }"),
        "reconfig",
        "unknown field",
    );
}

#[test]
fn verbs_window_and_peer_accepted() {
    let c = ok(&with(
        "[reconfig]\nwindow = { verbs = \"127.0.0.1:7102\", device = \"rxe0\" }\n\n[[reconfig.peer]]\nid = 1\ntransport = \"verbs\"\nwindow = \"127.0.0.1:7201\"\ndevice = \"rxe0\"",
    ));
    assert_eq!(
        c.reconfig.window.verbs,
        Some("127.0.0.1:7102".parse().unwrap())
    );
    assert_eq!(c.reconfig.window.device.as_deref(), Some("rxe0"));
    assert!(c.reconfig.window.is_served());
    assert_eq!(
        c.reconfig.peers,
        vec![PeerProxy {
            id: 1,
            window: WindowEndpoint::Verbs {
                control: "127.0.0.1:7201".parse().unwrap(),
                device: Some("rxe0".into()),
            },
        }]
    );
}

#[test]
fn verbs_window_with_shm() {
    rejects(
        &with("[reconfig]\nwindow = { verbs = \"127.0.0.1:7102\", shm = \"/dev/shm/p2\" }"),
        "reconfig.window.verbs",
        "expected verbs alone",
    );
}

#[test]
fn verbs_window_bad_address() {
    rejects(
        &with("[reconfig]\nwindow = { verbs = \"nowhere\" }"),
        "reconfig.window.verbs",
        "nowhere",
    );
}

#[test]
fn window_device_without_verbs() {
    rejects(
        &with("[reconfig]\nwindow = { shm = \"/dev/shm/p2\", device = \"rxe0\" }"),
        "reconfig.window.device",
        "only with `verbs",
    );
}

#[test]
fn verbs_window_without_psk() {
    let text = with("[reconfig]\nwindow = { verbs = \"127.0.0.1:7102\" }")
        .replace("[cluster]\npsk_file = \"cluster.psk\"", "");
    rejects(&text, "cluster.psk_file", "tcp or verbs transport");
}

#[test]
fn peer_device_without_verbs() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\ntransport = \"shm\"\nwindow = \"/dev/shm/p1\"\ndevice = \"rxe0\""),
        "reconfig.peer[0].device",
        "only with transport = \"verbs\"",
    );
}

#[test]
fn tcp_window_without_psk() {
    let text = with("[reconfig]\nwindow = { tcp = \"127.0.0.1:7102\" }")
        .replace("[cluster]\npsk_file = \"cluster.psk\"", "");
    rejects(
        &text,
        "cluster.psk_file",
        "proxy windows use the tcp or verbs transport",
    );
}

#[test]
fn peer_without_id() {
    rejects(
        &with("[[reconfig.peer]]\ntransport = \"shm\"\nwindow = \"/dev/shm/p1\""),
        "reconfig.peer[0].id",
        "missing",
    );
}

#[test]
fn peer_id_zero() {
    rejects(
        &with("[[reconfig.peer]]\nid = 0\ntransport = \"shm\"\nwindow = \"/dev/shm/p1\""),
        "reconfig.peer[0].id",
        "1 to 65535",
    );
}

#[test]
fn peer_id_is_our_own() {
    rejects(
        &with("[[reconfig.peer]]\nid = 2\ntransport = \"shm\"\nwindow = \"/dev/shm/p1\""),
        "reconfig.peer[0].id",
        "used twice",
    );
}

#[test]
fn peer_id_twice() {
    rejects(
        &with("[[reconfig.peer]]\nid = 5\ntransport = \"shm\"\nwindow = \"/dev/shm/p5\"\n[[reconfig.peer]]\nid = 5\ntransport = \"shm\"\nwindow = \"/dev/shm/p6\""),
        "reconfig.peer[1].id",
        "used twice",
    );
}

#[test]
fn peer_without_window() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\ntransport = \"shm\""),
        "reconfig.peer[0].window",
        "missing",
    );
}

#[test]
fn peer_unknown_transport() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\ntransport = \"rdma\"\nwindow = \"127.0.0.1:7201\""),
        "reconfig.peer[0].transport",
        "expected \"shm\", \"tcp\" or \"verbs\"",
    );
}

#[test]
fn peer_without_transport() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\nwindow = \"/dev/shm/p1\""),
        "reconfig.peer[0].transport",
        "missing",
    );
}

#[test]
fn peer_relative_shm_path() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\ntransport = \"shm\"\nwindow = \"p1\""),
        "reconfig.peer[0].window",
        "absolute path",
    );
}

#[test]
fn peer_bad_tcp_address() {
    rejects(
        &with("[[reconfig.peer]]\nid = 1\ntransport = \"tcp\"\nwindow = \"p1\""),
        "reconfig.peer[0].window",
        "host:port",
    );
}

#[test]
fn peer_tcp_without_psk() {
    let text = with("[[reconfig.peer]]\nid = 1\ntransport = \"tcp\"\nwindow = \"127.0.0.1:7101\"")
        .replace("[cluster]\npsk_file = \"cluster.psk\"", "");
    rejects(
        &text,
        "cluster.psk_file",
        "proxy windows use the tcp or verbs transport",
    );
}

#[test]
fn lock_home_unknown_proxy() {
    rejects(
        &with("[reconfig]\nlock_home = 9"),
        "reconfig.lock_home",
        "expected global.proxy_id or a reconfig.peer id: 2",
    );
}

#[test]
fn reconfigure_with_peers_needs_own_window() {
    rejects(
        &with("[reconfig]\nmode = \"reconfigure\"\n[[reconfig.peer]]\nid = 1\ntransport = \"shm\"\nwindow = \"/dev/shm/p1\""),
        "reconfig.window",
        "this proxy must serve a window",
    );
}

#[test]
fn reconfigure_needs_nodes_with_windows() {
    let text = with("[reconfig]\nmode = \"reconfigure\"").replace(
        "transport = \"shm\"\nsidecar = \"/dev/shm/rdmalb-n1\"\n",
        "",
    );
    rejects(&text, "reconfig.mode", "needs nodes with a sidecar window");
}

/// Issue 12, defect 4: a skew shorter than an op timeout lets a late write
/// land after a takeover; a lease shorter than the fenced steps never claims.
#[test]
fn lock_skew_and_lease_too_short_for_the_fenced_steps() {
    rejects(
        &with("[reconfig]\nlock_skew = \"100ms\""),
        "reconfig.lock_skew",
        "operation timeout (500ms)",
    );
    rejects(
        &with("[reconfig]\nlock_lease = \"1s\""),
        "reconfig.lock_lease",
        "at least 2s",
    );
}

#[test]
fn loan_return_defaults_to_history_and_turns_off() {
    let r = ok(&with("[reconfig]\nhistory = \"300ms\"")).reconfig;
    assert_eq!(r.loan_return(), Some(Duration::from_millis(300)));
    let r = ok(&with("[reconfig]\nloan_return = \"2s\"")).reconfig;
    assert_eq!(r.loan_return(), Some(Duration::from_secs(2)));
    let r = ok(&with("[reconfig]\nloan_return = \"off\"")).reconfig;
    assert_eq!(r.loan_return(), None);
}

#[test]
fn loan_return_not_a_duration() {
    rejects(
        &with("[reconfig]\nloan_return = \"never\""),
        "reconfig.loan_return",
        "or \"off\"",
    );
}

#[test]
fn loan_return_shorter_than_sensitivity() {
    rejects(
        &with("[reconfig]\nsensitivity = \"500ms\"\nhistory = \"1s\"\nloan_return = \"100ms\""),
        "reconfig.loan_return",
        "expected a duration of at least sensitivity",
    );
}

#[test]
fn claim_horizon_defaults_to_cooldown_and_turns_off() {
    let r = ok(&with("[reconfig]\ncooldown = \"2s\"")).reconfig;
    assert_eq!(r.claim_horizon(), Some(Duration::from_secs(2)));
    let r = ok(&with("[reconfig]\nclaim_horizon = \"800ms\"")).reconfig;
    assert_eq!(r.claim_horizon(), Some(Duration::from_millis(800)));
    let r = ok(&with("[reconfig]\nclaim_horizon = \"off\"")).reconfig;
    assert_eq!(r.claim_horizon(), None);
}

#[test]
fn claim_horizon_not_a_duration() {
    rejects(
        &with("[reconfig]\nclaim_horizon = \"soon\""),
        "reconfig.claim_horizon",
        "or \"off\"",
    );
}

#[test]
fn claim_batch_defaults_to_4_and_takes_1_to_64() {
    assert_eq!(ok(&with("[reconfig]")).reconfig.claim_batch, 4);
    let r = ok(&with("[reconfig]\nclaim_batch = 1")).reconfig;
    assert_eq!(r.claim_batch, 1);
    let r = ok(&with("[reconfig]\nclaim_batch = 64")).reconfig;
    assert_eq!(r.claim_batch, 64);
}

#[test]
fn claim_batch_out_of_range() {
    for bad in ["0", "-1", "65"] {
        rejects(
            &with(&format!("[reconfig]\nclaim_batch = {bad}")),
            "reconfig.claim_batch",
            "expected an integer from 1 to 64",
        );
    }
}

#[test]
fn guarantee_hold_defaults_to_history_and_turns_off() {
    let r = ok(&with("[reconfig]\nhistory = \"300ms\"")).reconfig;
    assert_eq!(r.guarantee_hold(), Some(Duration::from_millis(300)));
    let r = ok(&with("[reconfig]\nguarantee_hold = \"3s\"")).reconfig;
    assert_eq!(r.guarantee_hold(), Some(Duration::from_secs(3)));
    let r = ok(&with("[reconfig]\nguarantee_hold = \"off\"")).reconfig;
    assert_eq!(r.guarantee_hold(), None);
}

#[test]
fn guarantee_hold_rejected_values() {
    rejects(
        &with("[reconfig]\nguarantee_hold = \"forever\""),
        "reconfig.guarantee_hold",
        "or \"off\"",
    );
    rejects(
        &with("[reconfig]\nsensitivity = \"500ms\"\nhistory = \"1s\"\nguarantee_hold = \"100ms\""),
        "reconfig.guarantee_hold",
        "expected a duration of at least sensitivity",
    );
}

#[test]
fn guarantee_history_defaults_to_sensitivity_and_turns_off() {
    let r = ok(&with("[reconfig]\nsensitivity = \"100ms\"")).reconfig;
    assert_eq!(r.guarantee_history(), Some(Duration::from_millis(100)));
    let r = ok(&with("[reconfig]\nguarantee_history = \"400ms\"")).reconfig;
    assert_eq!(r.guarantee_history(), Some(Duration::from_millis(400)));
    let r = ok(&with("[reconfig]\nguarantee_history = \"off\"")).reconfig;
    assert_eq!(r.guarantee_history(), None);
}

#[test]
fn guarantee_history_rejected_values() {
    rejects(
        &with("[reconfig]\nguarantee_history = \"now\""),
        "reconfig.guarantee_history",
        "or \"off\"",
    );
    rejects(
        &with(
            "[reconfig]\nsensitivity = \"500ms\"\nhistory = \"1s\"\nguarantee_history = \"100ms\"",
        ),
        "reconfig.guarantee_history",
        "expected a duration of at least sensitivity",
    );
}
