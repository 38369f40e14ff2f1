use super::*;

fn node(text: &str) -> Result<NodeConfig, ConfigErrors> {
    parse_node(text, Path::new("/etc/rdmalb/n1.toml"))
}

const MIN: &str = "name = \"n1\"\nlisten = \"127.0.0.1:8081\"\nsite_file = \"n1.site.toml\"\n";

/// The keys of the problems reported for `MIN` plus `extra`.
fn rejected(extra: &str) -> Vec<String> {
    let e = node(&format!("{MIN}{extra}")).unwrap_err();
    e.problems.into_iter().map(|p| p.key).collect()
}

#[test]
fn minimal_node_takes_the_defaults() {
    let c = node(MIN).unwrap();
    assert_eq!(c.name, "n1");
    assert_eq!(c.site_file, PathBuf::from("/etc/rdmalb/n1.site.toml"));
    assert_eq!(c.model, Model::default());
    assert_eq!((c.push, c.pid_file), (None, None));
    assert_eq!(c.publish_interval, DEFAULT_PUBLISH_INTERVAL);
}

#[test]
fn the_example_config_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conf");
    let c = load_node(&dir.join("testsrv.toml")).unwrap();
    assert_eq!(
        c.model,
        Model::default(),
        "conf/testsrv.toml shows the defaults"
    );
    let site = load_site(&c.site_file).unwrap();
    assert_eq!(site.name, "shop");
    assert!(site.matches("SHOP.example.com:8080"));
}

#[test]
fn full_node_parses() {
    let c = node(&format!(
        "{MIN}pid_file = \"/run/n1.pid\"\npush = \"127.0.0.1:7301\"\nslots = 8\nqueue = 0\nstatic_base = \"500us\"\n\
         static_mib_per_s = 10.0\ndynamic_cost = \"20ms\"\nmax_cost = \"2s\"\ndynamic_size = \"4k\"\ncpu_fraction = 0.0\nmax_body = \"1m\"\n"
    ))
    .unwrap();
    assert_eq!(c.pid_file, Some(PathBuf::from("/run/n1.pid")));
    assert!(matches!(c.push, Some(PushListen::Tcp(a)) if a.port() == 7301));
    assert_eq!(
        (
            c.model.slots,
            c.model.queue,
            c.model.dynamic_size,
            c.model.max_body
        ),
        (8, 0, 4096, 1 << 20)
    );
    // 10 KiB at 10 MiB/s ≈ 0.98 ms on top of the base.
    let t = c.model.static_time(10 << 10);
    assert!(
        t > Duration::from_micros(1400) && t < Duration::from_micros(1500),
        "{t:?}"
    );
    let unix = node(&format!("{MIN}push = \"/run/n1-push.sock\"\n")).unwrap();
    assert!(matches!(unix.push, Some(PushListen::Unix(_))));
}

#[test]
fn missing_required_keys_are_each_reported() {
    let e = node("").unwrap_err();
    let keys: Vec<_> = e.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["name", "listen", "site_file"]);
    assert!(e
        .to_string()
        .contains("/etc/rdmalb/n1.toml: listen: missing"));
}

#[test]
fn each_bad_value_is_rejected_with_its_key() {
    assert_eq!(rejected("slots = 0"), ["slots"]);
    assert_eq!(rejected("queue = -1"), ["queue"]);
    assert_eq!(rejected("static_base = \"fast\""), ["static_base"]);
    assert_eq!(rejected("static_mib_per_s = 0.0"), ["static_mib_per_s"]);
    assert_eq!(rejected("dynamic_cost = \"10\""), ["dynamic_cost"]);
    assert_eq!(rejected("dynamic_cost = \"2s\""), ["dynamic_cost"]);
    assert_eq!(rejected("max_cost = \"0ms\""), ["max_cost"]);
    assert_eq!(rejected("cpu_fraction = 1.5"), ["cpu_fraction"]);
    assert_eq!(rejected("max_body = \"2g\""), ["max_body"]);
    assert_eq!(rejected("max_body = \"lots\""), ["max_body"]);
    assert_eq!(rejected("dynamic_size = \"32m\""), ["dynamic_size"]);
    assert_eq!(rejected("dynamic_size = \"1t\""), ["dynamic_size"]);
    assert_eq!(rejected("push = \"10.0.0.1:7301\""), ["push"]);
    assert_eq!(rejected("push = \"sidecar\""), ["push"]);
    assert_eq!(rejected("pid_file = \"\""), ["pid_file"]);
    assert_eq!(rejected("publish_interval = \"0ms\""), ["publish_interval"]);
    assert_eq!(rejected("shutdown_grace = \"1y\""), ["shutdown_grace"]);
    let bad_name = node("name = \"n 1\"\nlisten = \"127.0.0.1:1\"\nsite_file = \"s\"").unwrap_err();
    assert_eq!(bad_name.problems[0].key, "name");
    let bad_listen = node("name = \"n1\"\nlisten = \"localhost\"\nsite_file = \"s\"").unwrap_err();
    assert_eq!(bad_listen.problems[0].key, "listen");
    // All problems at once, not only the first.
    assert_eq!(
        rejected("slots = 0\ncpu_fraction = -1.0"),
        ["slots", "cpu_fraction"]
    );
}

#[test]
fn unknown_keys_are_errors() {
    let e = node(&format!("{MIN}slot = 4\n")).unwrap_err();
    assert!(e.to_string().contains("slot"), "{e}");
}

#[test]
fn site_file_parses_and_rejects() {
    let p = Path::new("/tmp/n1.site.toml");
    let s = parse_site("site = \"shop\"\nhosts = [\"Shop.Localhost\", \"shop\"]", p).unwrap();
    assert_eq!(s.hosts, ["shop", "shop.localhost"]);
    assert!(s.matches("shop.localhost:8080") && s.matches("SHOP") && !s.matches("blog.localhost"));
    let e = parse_site("hosts = []", p).unwrap_err();
    assert_eq!(e.problems[0].key, "site");
    let e = parse_site("site = \"a b\"", p).unwrap_err();
    assert_eq!(e.problems[0].key, "site");
    let e = parse_site(
        "site = \"shop\"\nhosts = [\"ok.example\", \"bad host:80\"]",
        p,
    )
    .unwrap_err();
    assert_eq!(e.problems[0].key, "hosts[1]");
    assert!(parse_site("site = \"shop\"\nhost = [\"x\"]", p).is_err());
    assert!(parse_site("site = ", p).is_err());
}

#[test]
fn sizes_and_ports() {
    assert_eq!(parse_size("512"), Ok(512));
    assert_eq!(parse_size("1k"), Ok(1024));
    assert_eq!(parse_size("2KiB"), Ok(2048));
    assert_eq!(parse_size("1m"), Ok(1 << 20));
    assert!(
        parse_size("").is_err()
            && parse_size("1.5k").is_err()
            && parse_size("99999999999g").is_err()
    );
    assert_eq!(format_size(1024), "1k");
    assert_eq!(format_size(3 << 20), "3m");
    assert_eq!(format_size(1500), "1500");
    assert_eq!(strip_port("a.b:80"), "a.b");
    assert_eq!(strip_port("[::1]:80"), "::1");
    assert_eq!(strip_port("a.b"), "a.b");
}

#[test]
fn an_antagonist_parses_and_is_bounded() {
    assert_eq!(node(MIN).unwrap().antagonist, None);
    let c = node(&format!(
        "{MIN}slots = 8\nantagonist_slots = 6\nantagonist_on = \"1s\"\nantagonist_off = \"3s\"\nantagonist_seed = 9\n"
    ))
    .unwrap();
    assert_eq!(
        c.antagonist,
        Some(Antagonist {
            slots: 6,
            on: Duration::from_secs(1),
            off: Duration::from_secs(3),
            seed: 9,
        })
    );
    assert_eq!(
        rejected("antagonist_slots = 5\n"),
        ["antagonist_slots"],
        "more than the 4 slots"
    );
    assert_eq!(rejected("antagonist_on = \"1s\"\n"), ["antagonist_on"]);
    assert_eq!(
        rejected("antagonist_slots = 1\nantagonist_off = \"1ms\"\n"),
        ["antagonist_off"]
    );
}

/// `timeline_file` is a path next to the node's config; `timeline_every`
/// is 1 ms..10 s and a bad value names the key.
#[test]
fn timeline_settings_are_checked() {
    let c = node(&format!(
        "{MIN}timeline_file = \"n1.timeline.csv\"\ntimeline_every = \"20ms\"\n"
    ))
    .unwrap();
    assert_eq!(
        c.timeline_file,
        Some(PathBuf::from("/etc/rdmalb/n1.timeline.csv"))
    );
    assert_eq!(c.timeline_every, Duration::from_millis(20));
    assert_eq!(node(MIN).unwrap().timeline_every, DEFAULT_TIMELINE_EVERY);
    for bad in ["\"0ms\"", "\"11s\"", "\"soon\""] {
        assert_eq!(
            rejected(&format!("timeline_every = {bad}\n")),
            ["timeline_every"],
            "{bad}"
        );
    }
}
