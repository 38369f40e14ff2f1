use super::*;

fn parse(text: &str) -> Result<Spec, ConfigErrors> {
    parse_spec(text, Path::new("/tmp/spec.toml"))
}

fn keys(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .problems
        .into_iter()
        .map(|p| p.key)
        .collect()
}

#[test]
fn minimal_spec_takes_defaults() {
    let s = parse("sites = [\"a\", \"b\"]").unwrap();
    assert_eq!(s.split, vec![1, 1]);
    assert_eq!(
        (s.proxies, s.balance.as_str(), s.seed),
        (1, "roundrobin", 1)
    );
    assert_eq!(s.mode, Mode::Closed { connections: 16 });
    assert_eq!(
        s.trace,
        TraceSource::Generate(Generator::SingleFile { size: "1k".into() })
    );
}

#[test]
fn full_spec_parses() {
    let s = parse(
        "sites = [\"shop\", \"blog\", \"news\"]\nsplit = \"3:3:2\"\nproxies = 2\nduration = \"3s\"\nrequests = 5000\nseed = 7\n\
         [trace]\nkind = \"bursty\"\nburst = 512\nmode = \"content\"\n\
         [node]\nslots = 2\n[proxy.global]\nbalance = \"leastconn\"\n[load]\nrate = 500.0\ninterval = \"500ms\"\n",
    )
    .unwrap();
    assert_eq!(s.split, vec![3, 3, 2]);
    assert_eq!(
        s.mode,
        Mode::Open {
            rate: 500.0,
            max_inflight: 1000
        }
    );
    assert!(matches!(
        s.trace,
        TraceSource::Generate(Generator::Bursty { burst: 512, .. })
    ));
    assert_eq!(s.proxy["global"]["balance"].as_str(), Some("leastconn"));
    assert_eq!(s.node["slots"].as_integer(), Some(2));
}

#[test]
fn each_bad_value_is_reported() {
    assert_eq!(keys("sites = []"), ["sites", "split"]);
    assert_eq!(keys("sites = [\"a\", \"a\"]"), ["sites[1]"]);
    assert_eq!(keys("sites = [\"a b\"]"), ["sites[0]"]);
    assert_eq!(keys("sites = [\"a\"]\nsplit = \"1:1\""), ["split"]);
    assert_eq!(keys("sites = [\"a\"]\nsplit = \"0\""), ["split"]);
    assert_eq!(keys("sites = [\"a\"]\nproxies = 0"), ["proxies"]);
    assert_eq!(keys("sites = [\"a\"]\nduration = \"1\""), ["duration"]);
    assert_eq!(keys("sites = [\"a\"]\nduration = \"1ms\""), ["duration"]);
    assert_eq!(keys("sites = [\"a\"]\nrequests = 0"), ["requests"]);
    assert_eq!(keys("sites = [\"a\"]\nseed = -1"), ["seed"]);
    assert_eq!(
        keys("sites = [\"a\"]\ntrace_file = \"t\"\n[trace]\nkind = \"single-file\""),
        ["trace_file"]
    );
    assert_eq!(keys("sites = [\"a\"]\n[trace]\nkind = \"nope\""), ["trace"]);
    assert_eq!(
        keys("sites = [\"a\"]\n[trace]\nkind = \"bursty\""),
        ["trace"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[load]\nconnections = 0"),
        ["load.connections"]
    );
    assert_eq!(keys("sites = [\"a\"]\n[load]\nrate = -1.0"), ["load.rate"]);
    assert_eq!(
        keys("sites = [\"a\"]\n[load]\nrate = 1.0\nconnections = 2"),
        ["load.rate"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[load]\nmax_inflight = 0"),
        ["load.max_inflight"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[load]\ninterval = \"1ms\""),
        ["load.interval"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[load]\ntimeout = \"x\""),
        ["load.timeout"]
    );
    assert!(parse("sites = [\"a\"]\nbogus = 1")
        .unwrap_err()
        .to_string()
        .contains("bogus"));
    // Every problem at once.
    assert_eq!(
        keys("sites = [\"a\"]\nproxies = 0\nseed = -1"),
        ["proxies", "seed"]
    );
}

#[test]
fn reconfiguration_keys_parse() {
    let s = parse(
        "sites = [\"a\", \"b\"]\nsplit = \"2:2\"\nidle = 1\nmode = \"reconfigure\"\n[guarantee]\na = 500\nb = 250.5\n",
    )
    .unwrap();
    assert_eq!((s.split.clone(), s.idle), (vec![2, 2], 1));
    assert_eq!(s.reconfig, ReconfigMode::Reconfigure);
    assert!(!s.overprovision);
    assert_eq!(s.guarantees, vec![Some(500.0), Some(250.5)]);
    let d = parse("sites = [\"a\"]").unwrap();
    assert_eq!((d.reconfig, d.idle), (ReconfigMode::Rigid, 0));
    assert_eq!(d.guarantees, vec![None]);
}

#[test]
fn overprovision_gives_every_site_the_worst_case() {
    // Seed 001 §4.3: 6 of 8 nodes per site for 3:3:2, 5 for 2:2:2:2.
    let s =
        parse("sites = [\"a\", \"b\", \"c\"]\nsplit = \"3:3:2\"\noverprovision = true").unwrap();
    assert_eq!(s.split, vec![6, 6, 6]);
    let s = parse(
        "sites = [\"a\", \"b\", \"c\", \"d\"]\nsplit = \"2:2:2:2\"\noverprovision = true\nmode = \"rigid\"",
    )
    .unwrap();
    assert_eq!(s.split, vec![5, 5, 5, 5]);
    // Idle nodes count as nodes a site could take; none start idle.
    let s =
        parse("sites = [\"a\", \"b\"]\nsplit = \"2:2\"\nidle = 1\noverprovision = true").unwrap();
    assert_eq!((s.split.clone(), s.idle), (vec![4, 4], 0));
}

#[test]
fn transport_takes_shm_or_tcp() {
    let s = |t: &str| parse(&format!("sites = [\"a\"]{t}")).unwrap().transport;
    assert_eq!(s(""), WindowTransport::Shm);
    assert_eq!(s("\ntransport = \"shm\""), WindowTransport::Shm);
    assert_eq!(s("\ntransport = \"tcp\""), WindowTransport::Tcp);
    let e = parse("sites = [\"a\"]\ntransport = \"verbs\"").unwrap_err();
    assert_eq!(e.problems.len(), 1);
    assert_eq!(e.problems[0].key, "transport");
    assert!(e.to_string().contains("accepted: \"shm\", \"tcp\""), "{e}");
}

#[test]
fn bad_mode_is_rejected() {
    assert_eq!(keys("sites = [\"a\"]\nmode = \"elastic\""), ["mode"]);
}

#[test]
fn idle_out_of_range_is_rejected() {
    assert_eq!(keys("sites = [\"a\"]\nidle = -1"), ["idle"]);
    assert_eq!(keys("sites = [\"a\"]\nidle = 65"), ["idle"]);
}

#[test]
fn overprovision_with_reconfigure_is_rejected() {
    assert_eq!(
        keys("sites = [\"a\", \"b\"]\nmode = \"reconfigure\"\noverprovision = true"),
        ["overprovision"]
    );
}

#[test]
fn too_many_nodes_are_rejected() {
    // 4 sites × (40 + 40 + 40 + 40 − 3) over-provisioned.
    assert_eq!(
        keys("sites = [\"a\", \"b\", \"c\", \"d\"]\nsplit = \"40:40:40:40\"\noverprovision = true"),
        ["split"]
    );
}

#[test]
fn guarantee_for_an_unknown_site_is_rejected() {
    assert_eq!(
        keys("sites = [\"a\"]\n[guarantee]\nzz = 10"),
        ["guarantee.zz"]
    );
}

#[test]
fn guarantee_that_is_not_a_positive_rate_is_rejected() {
    assert_eq!(keys("sites = [\"a\"]\n[guarantee]\na = 0"), ["guarantee.a"]);
    assert_eq!(
        keys("sites = [\"a\"]\n[guarantee]\na = -5.0"),
        ["guarantee.a"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[guarantee]\na = \"fast\""),
        ["guarantee.a"]
    );
}

#[test]
fn priorities_parse() {
    let s = parse("sites = [\"a\", \"b\"]\n[priority]\na = 10\n").unwrap();
    assert_eq!(s.priorities, vec![Some(10), None]);
}

#[test]
fn priority_for_an_unknown_site_is_rejected() {
    assert_eq!(keys("sites = [\"a\"]\n[priority]\nzz = 1"), ["priority.zz"]);
}

#[test]
fn priority_out_of_range_is_rejected() {
    assert_eq!(
        keys("sites = [\"a\"]\n[priority]\na = 1001"),
        ["priority.a"]
    );
    assert_eq!(keys("sites = [\"a\"]\n[priority]\na = -1"), ["priority.a"]);
    assert_eq!(keys("sites = [\"a\"]\n[priority]\na = 1.5"), ["priority.a"]);
}

#[test]
fn merge_is_deep() {
    let mut base: toml::Table =
        toml::from_str("[global]\nbalance = \"roundrobin\"\nproxy_id = 1\n[health]\npath = \"/\"")
            .unwrap();
    let extra: toml::Table = toml::from_str(
        "[global]\nbalance = \"weighted-least-load\"\n[reconfig]\nmode = \"reconfigure\"",
    )
    .unwrap();
    merge(&mut base, &extra);
    assert_eq!(
        base["global"]["balance"].as_str(),
        Some("weighted-least-load")
    );
    assert_eq!(base["global"]["proxy_id"].as_integer(), Some(1));
    assert_eq!(base["reconfig"]["mode"].as_str(), Some("reconfigure"));
    assert_eq!(base["health"]["path"].as_str(), Some("/"));
}

#[test]
fn free_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
    let (low, high) = crate::ports::below_ephemeral();
    assert!(low < high);
    let addrs: Vec<_> = (0..50).map(|_| procs::free_addr().unwrap()).collect();
    let ports: std::collections::HashSet<u16> = addrs.iter().map(|a| a.port()).collect();
    assert_eq!(ports.len(), addrs.len(), "a port was handed out twice");
    for a in &addrs {
        assert!(a.ip().is_loopback());
        assert!(
            (low..high).contains(&a.port()),
            "{a} is outside {low}..{high}, where outgoing connections draw their source ports"
        );
        // Still free: the process it is meant for can bind it.
        std::net::TcpListener::bind(a).unwrap();
    }
}

#[test]
fn sticky_goes_to_every_site_and_node_and_the_proxy_accepts_it() {
    let spec = parse(
        "sites = [\"shop\"]\nsplit = \"2\"\n[sticky]\ncookie = \"SRVID\"\nclients = 50\nmax_load = 0.9\nmax_load_for = \"250ms\"",
    )
    .unwrap();
    let st = spec.sticky.as_ref().unwrap();
    assert_eq!((st.cookie.as_str(), st.clients), ("SRVID", 50));
    let nodes: Vec<gen::NodePlan> = (1..=2)
        .map(|n| gen::NodePlan {
            name: format!("n{n}"),
            site: "shop".into(),
            listen: format!("127.0.0.1:{}", 40000 + n).parse().unwrap(),
            push: format!("/tmp/n{n}.push.sock").into(),
            shm: format!("/dev/shm/rdmalb-test-n{n}").into(),
            tcp: None,
            site_file: format!("/tmp/n{n}.site.toml").into(),
            pid_file: format!("/tmp/n{n}.pid").into(),
        })
        .collect();
    let addrs = (
        "127.0.0.1:40100".parse().unwrap(),
        "127.0.0.1:40101".parse().unwrap(),
    );
    let t = gen::proxy(&spec, 1, &nodes, addrs, 7, None);
    let text = procs::toml_text(&t);
    let cfg = rdmalb_proxy::config::parse(&text, Path::new("/tmp/proxy1.toml")).unwrap();
    let sticky = cfg.sites[0].sticky.as_ref().unwrap();
    assert_eq!(sticky.cookie, "SRVID");
    assert_eq!(sticky.max_load, Some(0.9));
    assert_eq!(sticky.max_load_for, Duration::from_millis(250));
    let cookies: Vec<_> = cfg.nodes.iter().map(|n| n.cookie.clone()).collect();
    assert_eq!(cookies, [Some("n1".to_string()), Some("n2".to_string())]);
    // Without [sticky]: no cookie anywhere, and the proxy config as before.
    let plain = parse("sites = [\"shop\"]\nsplit = \"2\"").unwrap();
    assert!(plain.sticky.is_none());
    let text = procs::toml_text(&gen::proxy(&plain, 1, &nodes, addrs, 7, None));
    assert!(
        !text.contains("sticky") && !text.contains("cookie"),
        "{text}"
    );
}

#[test]
fn sticky_problems_are_reported_with_their_keys() {
    assert_eq!(
        keys("sites = [\"a\"]\n[sticky]\nclients = 10"),
        ["sticky.cookie"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[sticky]\ncookie = \"S\"\nclients = -1"),
        ["sticky.clients"]
    );
    assert_eq!(
        keys("sites = [\"a\"]\n[sticky]\ncookie = \"S\"\nmode = \"rewrite\""),
        ["sticky.mode"]
    );
}
