//! One test per rejected value: each checks the key path and that the message
//! says what would be accepted.

use std::net::SocketAddr;

use super::*;
use crate::config::parse;
use crate::fixtures::{config as ok, rejects};

const BASE: &str = r#"
[global]
balance = "roundrobin"

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com", "*.shop.example.com"]

[[site]]
name = "blog"
hosts = ["blog.example.com"]
path_prefixes = ["/api/"]

[[node]]
name = "n1"
address = "127.0.0.1:9001"
site = "shop"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn base_config_is_valid_and_defaults_apply() {
    let c = ok(BASE);
    assert_eq!(c.sites.len(), 2);
    assert_eq!(c.sites[1].index, 1);
    assert_eq!(c.nodes[0].site, Some(0));
    assert_eq!(c.timeouts.connect, Duration::from_secs(2));
    assert_eq!(c.health.rise, 2);
    assert_eq!(c.global.proxy_id, 1);
    assert_eq!(c.sites[0].weights, LoadWeights::default());
    assert!(c.sites[0].hosts[1].matches("a.shop.example.com"));
    assert!(!c.sites[0].hosts[1].matches("shop.example.com"));
}

#[test]
fn site_weights_override_global_weights() {
    let text = BASE.replace(
        "[[site]]\nname = \"shop\"",
        "[weights]\ncpu = 2.0\n\n[[site]]\nname = \"shop\"\nweights = { network = 3.0 }",
    );
    let c = ok(&text);
    assert_eq!(c.sites[0].weights.window.cpu, 2.0);
    assert_eq!(c.sites[0].weights.window.network, 3.0);
    assert_eq!(c.sites[1].weights.window.cpu, 2.0);
}

#[test]
fn syntax_error_names_the_line() {
    rejects("[global\nbalance = 1", "line 1", "TOML syntax error");
}

#[test]
fn unknown_top_level_section() {
    rejects(&with("[frontend]\nx = 1"), "frontend", "expected one of");
}

#[test]
fn unknown_key_in_section() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "balanse = \"roundrobin\""),
        "global",
        "unknown field",
    );
}

#[test]
fn unknown_key_in_site_entry() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\nweight = 3"),
        "site[2]",
        "unknown field",
    );
}

#[test]
fn bad_send_proxy() {
    rejects(
        &BASE.replace(
            "site = \"shop\"\n",
            "site = \"shop\"\nsend_proxy = \"v3\"\n",
        ),
        "node[0] (n1).send_proxy",
        "\"v1\" or \"v2\"",
    );
}

#[test]
fn node_control_keys_default_like_haproxy_and_parse() {
    let c = ok(BASE);
    let n = &c.nodes[0];
    assert_eq!((n.weight, n.disabled, n.backup), (1, false, false));
    assert_eq!((n.max_inflight, n.agent), (None, None));
    let c = ok(&BASE.replace(
        "site = \"shop\"\n",
        "site = \"shop\"\nweight = 0\nbackup = true\ndisabled = true\nmax_inflight = 12\n\
         agent_port = 9999\nagent_interval = \"500ms\"\n",
    ));
    let n = &c.nodes[0];
    assert_eq!(
        (n.weight, n.disabled, n.backup, n.max_inflight),
        (0, true, true, Some(12))
    );
    let agent = n.agent.unwrap();
    assert_eq!(agent.address, SocketAddr::new(n.address.ip(), 9999));
    assert_eq!(agent.interval, Duration::from_millis(500));
    let c = ok(&BASE.replace(
        "site = \"shop\"\n",
        "site = \"shop\"\nagent_port = 9999\nagent_address = \"127.0.0.9\"\n",
    ));
    assert_eq!(
        c.nodes[0].agent.unwrap().address,
        "127.0.0.9:9999".parse().unwrap()
    );
    assert_eq!(c.nodes[0].agent.unwrap().interval, Duration::from_secs(2));
}

#[test]
fn bad_node_control_keys() {
    for (extra, key, says) in [
        ("weight = 257", "node[0] (n1).weight", "256"),
        ("weight = -1", "node[0] (n1).weight", "0"),
        ("max_inflight = 0", "node[0] (n1).max_inflight", "1"),
        ("agent_port = 70000", "node[0] (n1).agent_port", "65535"),
        (
            "agent_interval = \"1s\"",
            "node[0] (n1).agent_interval",
            "agent_port is not",
        ),
        (
            "agent_port = 9\nagent_address = \"host:9\"",
            "node[0] (n1).agent_address",
            "not an IP address",
        ),
        (
            "agent_port = 9\nagent_interval = \"10ms\"",
            "node[0] (n1).agent_interval",
            "100ms",
        ),
    ] {
        rejects(
            &BASE.replace("site = \"shop\"\n", &format!("site = \"shop\"\n{extra}\n")),
            key,
            says,
        );
    }
}

#[test]
fn bad_balance() {
    rejects(
        &BASE.replace("\"roundrobin\"", "\"fastest\""),
        "global.balance",
        "roundrobin",
    );
}

#[test]
fn bad_default_site() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "default_site = \"nope\""),
        "global.default_site",
        "[[site]]",
    );
}

#[test]
fn bad_proxy_id() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "proxy_id = 0"),
        "global.proxy_id",
        "from 1 to 65535",
    );
}

#[test]
fn bad_workers() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "workers = 0"),
        "global.workers",
        "from 1",
    );
}

#[test]
fn bad_shutdown_grace() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "shutdown_grace = \"soon\""),
        "global.shutdown_grace",
        "expected e.g.",
    );
}

#[test]
fn empty_access_log() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "access_log = \"\""),
        "global.access_log",
        "stdout",
    );
}

#[test]
fn bad_timeout_unit() {
    rejects(
        &with("[timeouts]\nconnect = \"2 fortnights\""),
        "timeouts.connect",
        "unknown unit",
    );
}

#[test]
fn zero_timeout() {
    rejects(
        &with("[timeouts]\nqueue = \"0s\""),
        "timeouts.queue",
        "greater than zero",
    );
}

#[test]
fn timeout_without_unit() {
    rejects(
        &with("[timeouts]\nserver = \"30\""),
        "timeouts.server",
        "no unit",
    );
}

#[test]
fn bad_max_header_bytes() {
    rejects(
        &with("[limits]\nmax_header_bytes = 10"),
        "limits.max_header_bytes",
        "from 1024",
    );
}

#[test]
fn bad_max_headers() {
    rejects(
        &with("[limits]\nmax_headers = -1"),
        "limits.max_headers",
        "out of range",
    );
}

#[test]
fn bad_health_path() {
    rejects(
        &with("[health]\npath = \"health\""),
        "health.path",
        "/health",
    );
}

#[test]
fn bad_health_rise() {
    rejects(&with("[health]\nrise = 0"), "health.rise", "from 1 to 100");
}

#[test]
fn health_expect_status_defaults_to_none_and_parses() {
    assert_eq!(ok(BASE).health.expect_status, None);
    assert_eq!(
        ok(&with("[health]\nexpect_status = 204"))
            .health
            .expect_status,
        Some(204)
    );
}

#[test]
fn bad_health_expect_status() {
    rejects(
        &with("[health]\nexpect_status = 99"),
        "health.expect_status",
        "from 100 to 599",
    );
}

#[test]
fn any_host_star_is_a_host_pattern() {
    let c = ok(&with(
        "[[site]]\nname = \"any\"\nhosts = [\"*\"]\npath_prefixes = [\"/static/\"]",
    ));
    assert!(c.sites[2].hosts[0].matches("anything.org"));
    rejects(
        &with("[[site]]\nname = \"any\"\nhosts = [\"**\"]"),
        "site[2] (any).hosts[0]",
        "\"*\" for any host",
    );
}

#[test]
fn bad_health_fall() {
    rejects(
        &with("[health]\nfall = 1000"),
        "health.fall",
        "from 1 to 100",
    );
}

/// Issue 27, defect 6: a site named `idle` was accepted, but the name means
/// the idle pool, so the site was never routed to.
#[test]
fn the_idle_pool_name_is_reserved_for_sites() {
    for name in ["idle", "IDLE", "Idle"] {
        rejects(
            &BASE.replace("name = \"blog\"", &format!("name = \"{name}\"")),
            "site[1].name",
            "reserved",
        );
    }
}

#[test]
fn missing_listener() {
    let text = BASE.replace("[[listener]]\nlisten = \"127.0.0.1:8080\"", "");
    rejects(&text, "listener", "at least one");
}

#[test]
fn bad_listener_address() {
    rejects(
        &BASE.replace("127.0.0.1:8080", "127.0.0.1:99999"),
        "listener[0].listen",
        "not an address",
    );
}

#[test]
fn duplicate_listener_address() {
    rejects(
        &with("[[listener]]\nlisten = \"127.0.0.1:8080\""),
        "listener[1].listen",
        "used by another",
    );
}

#[test]
fn tls_without_certificates() {
    rejects(
        &with("[[listener]]\nlisten = \"127.0.0.1:8443\"\ntls = { certificates = [] }"),
        "listener[1].tls.certificates",
        "at least one",
    );
}

#[test]
fn tls_missing_cert_file() {
    rejects(
        &with("[[listener]]\nlisten = \"127.0.0.1:8443\"\ntls = { certificates = [{ cert = \"/nonexistent.pem\", key = \"/nonexistent.key\" }] }"),
        "listener[1].tls.certificates[0].cert",
        "cannot read",
    );
}

#[test]
fn tls_cert_file_without_pem() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("junk.pem");
    std::fs::write(&f, "not a certificate").unwrap();
    rejects(
        &with(&format!(
            "[[listener]]\nlisten = \"127.0.0.1:8443\"\ntls = {{ certificates = [{{ cert = \"{0}\", key = \"{0}\" }}] }}",
            f.display()
        )),
        "listener[1].tls.certificates[0].key",
        "no PEM private key",
    );
}

#[test]
fn missing_site() {
    let text = "[[listener]]\nlisten = \"127.0.0.1:8080\"\n";
    rejects(text, "site", "at least one");
}

#[test]
fn site_without_name() {
    rejects(
        &with("[[site]]\nhosts = [\"x.com\"]"),
        "site[2].name",
        "missing",
    );
}

#[test]
fn site_bad_name() {
    rejects(
        &with("[[site]]\nname = \"my site\"\nhosts = [\"x.com\"]"),
        "site[2].name",
        "a-z",
    );
}

#[test]
fn site_duplicate_name() {
    rejects(
        &with("[[site]]\nname = \"shop\"\nhosts = [\"x.com\"]"),
        "site[2].name",
        "twice",
    );
}

#[test]
fn site_without_hosts() {
    rejects(
        &with("[[site]]\nname = \"x\""),
        "site[2] (x).hosts",
        "expected host names",
    );
}

#[test]
fn site_bad_host() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"http://x.com:80\"]"),
        "site[2] (x).hosts[0]",
        "no port",
    );
}

#[test]
fn site_host_routed_twice() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"SHOP.example.com\"]"),
        "site[2] (x).hosts",
        "already routed to site `shop`",
    );
}

#[test]
fn same_host_different_prefixes_is_fine() {
    ok(&with(
        "[[site]]\nname = \"x\"\nhosts = [\"blog.example.com\"]\npath_prefixes = [\"/static/\"]",
    ));
}

#[test]
fn site_bad_path_prefix() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\npath_prefixes = [\"api\"]"),
        "path_prefixes[0]",
        "start with '/'",
    );
}

#[test]
fn site_negative_guarantee() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\nguarantee = -5.0"),
        "site[2] (x).guarantee",
        ">= 0",
    );
}

#[test]
fn site_bad_priority() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\npriority = -1"),
        "site[2] (x).priority",
        "from 0 to 1000",
    );
}

#[test]
fn site_max_below_min() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\nmin_nodes = 3\nmax_nodes = 2"),
        "site[2] (x).max_nodes",
        "max_nodes >= min_nodes",
    );
}

#[test]
fn site_negative_weight() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\nweights = { cpu = -1.0 }"),
        "site[2] (x).weights.cpu",
        ">= 0",
    );
}

#[test]
fn site_unknown_weight() {
    rejects(
        &with("[[site]]\nname = \"x\"\nhosts = [\"x.com\"]\nweights = { gpu = 1.0 }"),
        "site[2]",
        "unknown field",
    );
}

#[test]
fn node_without_name() {
    rejects(
        &with("[[node]]\naddress = \"127.0.0.1:1\""),
        "node[1].name",
        "missing",
    );
}

#[test]
fn node_duplicate_name() {
    rejects(
        &with("[[node]]\nname = \"n1\"\naddress = \"127.0.0.1:1\""),
        "node[1].name",
        "twice",
    );
}

#[test]
fn node_bad_address() {
    rejects(
        &with("[[node]]\nname = \"n2\"\naddress = \"nowhere\""),
        "node[1] (n2).address",
        "host:port",
    );
}

#[test]
fn node_unknown_site() {
    rejects(
        &with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\nsite = \"news\""),
        "node[1] (n2).site",
        "shop, blog, or \"idle\"",
    );
}

#[test]
fn node_idle_is_accepted() {
    let c = ok(&with(
        "[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\nsite = \"idle\"",
    ));
    assert_eq!(c.nodes[1].site, None);
}

#[test]
fn node_bad_transport() {
    rejects(&with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"carrier-pigeon\"\nsidecar = \"x\""), "node[1] (n2).transport", "\"shm\", \"tcp\" or \"verbs\"");
}

#[test]
fn node_transport_without_sidecar() {
    rejects(
        &with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"shm\""),
        "node[1] (n2).sidecar",
        "missing",
    );
}

#[test]
fn node_sidecar_without_transport() {
    rejects(
        &with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\nsidecar = \"/dev/shm/x\""),
        "node[1] (n2).transport",
        "missing",
    );
}

#[test]
fn node_shm_relative_path() {
    rejects(&with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"shm\"\nsidecar = \"rdmalb-n2\""), "node[1] (n2).sidecar", "absolute path");
}

#[test]
fn node_tcp_without_psk() {
    rejects(&with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"tcp\"\nsidecar = \"127.0.0.1:7101\""), "cluster.psk_file", "pre-shared key");
}

#[test]
fn node_tcp_with_psk_is_accepted() {
    let c = ok(&with("[cluster]\npsk_file = \"cluster.psk\"\n[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"verbs\"\nsidecar = \"127.0.0.1:7201\"\ndevice = \"rxe0\""));
    assert_eq!(
        c.nodes[1].window,
        Some(WindowEndpoint::Verbs {
            control: "127.0.0.1:7201".parse().unwrap(),
            device: Some("rxe0".into())
        })
    );
    assert_eq!(
        c.cluster.psk_file.as_deref(),
        Some(Path::new("cluster.psk"))
    );
}

#[test]
fn node_device_without_verbs() {
    rejects(&with("[[node]]\nname = \"n2\"\naddress = \"127.0.0.1:1\"\ntransport = \"shm\"\nsidecar = \"/dev/shm/x\"\ndevice = \"rxe0\""), "node[1] (n2).device", "only with transport = \"verbs\"");
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let text = BASE
        .replace("\"roundrobin\"", "\"fastest\"")
        .replace("127.0.0.1:9001", "nowhere")
        + "\n[timeouts]\nconnect = \"x\"\n";
    let err = parse(&text, Path::new("test.toml")).unwrap_err();
    assert!(err.problems.len() >= 3, "{err}");
}

#[test]
fn qos_defaults_to_no_limit_and_parses_every_key() {
    let d = ok(BASE).qos;
    assert_eq!(d, Qos::default());
    assert_eq!((d.max_inflight, d.dispatch), (0, Dispatch::VirtualClock));
    let c = ok(&with(
        "[qos]\nmax_inflight = 64\ndispatch = \"fifo\"\nbest_effort_floor = 2.5\nmax_queue = 16",
    ))
    .qos;
    assert_eq!(
        c,
        Qos {
            max_inflight: 64,
            dispatch: Dispatch::Fifo,
            best_effort_floor: 2.5,
            max_queue: 16
        }
    );
}

#[test]
fn qos_unknown_dispatch() {
    rejects(
        &with("[qos]\ndispatch = \"wfq\""),
        "qos.dispatch",
        "\"virtualclock\" or \"fifo\"",
    );
}

#[test]
fn qos_zero_best_effort_floor() {
    rejects(
        &with("[qos]\nbest_effort_floor = 0.0"),
        "qos.best_effort_floor",
        "above 0",
    );
}

#[test]
fn qos_negative_max_inflight() {
    rejects(
        &with("[qos]\nmax_inflight = -1"),
        "qos.max_inflight",
        "from 0 to 1000000",
    );
}

#[test]
fn qos_zero_max_queue() {
    rejects(
        &with("[qos]\nmax_queue = 0"),
        "qos.max_queue",
        "from 1 to 1000000",
    );
}

#[test]
fn qos_unknown_key() {
    rejects(&with("[qos]\nmaxinflight = 4"), "qos", "maxinflight");
}

#[test]
fn forwarded_for_defaults_to_replace_and_trusts_only_the_listed_networks() {
    let c = ok(BASE);
    assert_eq!(c.global.forwarded_for, ForwardedFor::Replace);
    assert!(!c.global.keeps_forwarded("127.0.0.1".parse().unwrap()));
    let c = ok(&BASE.replace(
        "balance = \"roundrobin\"",
        "balance = \"roundrobin\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::/8\", \"::1/128\"]",
    ));
    let keeps = |ip: &str| c.global.keeps_forwarded(ip.parse().unwrap());
    assert!(keeps("10.1.2.3"));
    assert!(keeps("::ffff:10.1.2.3"), "IPv4-mapped IPv6 counts as IPv4");
    assert!(keeps("192.0.2.7"));
    assert!(!keeps("192.0.2.8"));
    assert!(!keeps("11.0.0.1"));
    assert!(keeps("fd12::1"));
    assert!(keeps("::1"));
    assert!(!keeps("::2"));
    assert!(!keeps("127.0.0.1"));
    let c = ok(&BASE.replace(
        "balance = \"roundrobin\"",
        "balance = \"roundrobin\"\nforwarded_for = \"append\"",
    ));
    assert_eq!(c.global.forwarded_for, ForwardedFor::Append);
    assert!(c.global.keeps_forwarded("203.0.113.9".parse().unwrap()));
    let all = ok(&BASE.replace(
        "balance = \"roundrobin\"",
        "balance = \"roundrobin\"\ntrusted_proxies = [\"0.0.0.0/0\", \"::/0\"]",
    ));
    assert!(all.global.keeps_forwarded("203.0.113.9".parse().unwrap()));
    assert!(all.global.keeps_forwarded("2001:db8::1".parse().unwrap()));
}

#[test]
fn rejects_unknown_forwarded_for() {
    rejects(
        &BASE.replace("balance = \"roundrobin\"", "forwarded_for = \"keep\""),
        "global.forwarded_for",
        "expected \"replace\" or \"append\"",
    );
}

#[test]
fn rejects_bad_trusted_proxies_naming_each_entry() {
    let text = |list: &str| {
        BASE.replace(
            "balance = \"roundrobin\"",
            &format!("trusted_proxies = [\"10.0.0.0/8\", {list}]"),
        )
    };
    for (list, needle) in [
        ("\"10.0.0/8\"", "`10.0.0` is not an IP address"),
        ("\"localhost\"", "`localhost` is not an IP address"),
        (
            "\"10.0.0.0/33\"",
            "`/33` is not a prefix length from 0 to 32",
        ),
        ("\"::1/129\"", "`/129` is not a prefix length from 0 to 128"),
        ("\"10.0.0.0/\"", "`/` is not a prefix length"),
        ("\"10.0.0.1/8\"", "the network is `10.0.0.0/8`"),
    ] {
        crate::fixtures::rejects_at(&text(list), "global.trusted_proxies[1]", needle);
        crate::fixtures::rejects_at(
            &text(list),
            "global.trusted_proxies[1]",
            "expected an IPv4 or IPv6 network",
        );
    }
    rejects(&text("10"), "global", "expected a string");
}

#[test]
fn rejects_trusted_proxies_with_append() {
    rejects(
        &BASE.replace(
            "balance = \"roundrobin\"",
            "forwarded_for = \"append\"\ntrusted_proxies = [\"10.0.0.0/8\"]",
        ),
        "global.trusted_proxies",
        "has no effect with global.forwarded_for = \"append\"",
    );
}

mod admin;
mod proxy_protocol;
mod retries;
mod stats_socket;
mod tls;
