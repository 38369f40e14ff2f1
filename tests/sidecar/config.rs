//! Sidecar config validation: the shipped examples pass, and every rejected
//! value has its own test whose message names the file, the key and what
//! would be accepted.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rdmalb_sidecar::config::{self, CollectorConfig, PushListen, StatusFormat};

/// A temp dir holding a valid PSK (`cluster.psk`, 0600) next to the config.
struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    fn new() -> Dir {
        let dir = tempfile::tempdir().unwrap();
        let psk = dir.path().join("cluster.psk");
        std::fs::write(&psk, rdmalb_window::Psk::generate().to_text()).unwrap();
        std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
        Dir { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("sidecar.toml")
    }

    fn parse(&self, text: &str) -> Result<config::SidecarConfig, config::ConfigErrors> {
        config::parse(text, &self.file())
    }

    /// Expects a rejection with a problem at `key`; returns that message.
    fn reject(&self, text: &str, key: &str) -> String {
        let err = self.parse(text).expect_err("config should be rejected");
        let shown = err.to_string();
        assert!(
            shown.contains(&self.file().display().to_string()),
            "file not named: {shown}"
        );
        let p = err
            .problems
            .iter()
            .find(|p| p.key == key)
            .unwrap_or_else(|| panic!("no problem at `{key}`: {shown}"));
        assert!(
            shown.contains(&format!("{key}: ")) || key.is_empty(),
            "{shown}"
        );
        p.message.clone()
    }
}

const HEAD: &str = "node = \"n1\"\nnode_id = 1\nsites = [\"shop\", \"blog\", \"news\"]\n";
const SHM: &str = "[window.shm]\npath = \"/dev/shm/rdmalb-test-n1\"\n";
const SYSTEM: &str = "[[collector]]\nkind = \"system\"\n";

/// A valid config with `extra` spliced in at the top level (before tables).
fn with_top(extra: &str) -> String {
    format!("{HEAD}{extra}\n{SHM}{SYSTEM}")
}

fn with_collector(c: &str) -> String {
    format!("{HEAD}{SHM}[[collector]]\n{c}\n")
}

fn with_window(w: &str) -> String {
    format!("{HEAD}{w}\n{SYSTEM}")
}

#[test]
fn full_example_is_accepted_with_defaults_applied() {
    let d = Dir::new();
    let text = r#"
node = "n1"
node_id = 7
sites = ["shop", "blog", "news"]
publish_interval = "2ms"
[window.shm]
path = "/dev/shm/rdmalb-n1"
mode = "0640"
[window.tcp]
listen = "127.0.0.1:7101"
psk_file = "cluster.psk"
[[collector]]
kind = "system"
app_port = 8081
interfaces = ["eth0"]
[[collector]]
kind = "cgroup"
path = "/sys/fs/cgroup/system.slice/nginx.service"
[[collector]]
kind = "status"
url = "http://127.0.0.1:8081/nginx_status"
format = "nginx"
interval = "250ms"
capacity = 512
[[collector]]
kind = "push"
listen = "127.0.0.1:7301"
expire = "2s"
[[collector]]
kind = "push"
listen = "/run/rdmalb/push.sock"
[admin]
listen = "127.0.0.1:9201"
"#;
    let c = d.parse(text).unwrap();
    assert_eq!(c.node, "n1");
    assert_eq!(c.node_id, 7);
    assert_eq!(
        c.site_hash,
        rdmalb_window::site_table_hash(&["shop", "blog", "news"])
    );
    assert_eq!(c.publish_interval.as_millis(), 2);
    assert_eq!(c.staleness, config::DEFAULT_STALENESS);
    assert_eq!(c.window.shm.as_ref().unwrap().mode, 0o640);
    assert_eq!(
        c.window.tcp.as_ref().unwrap().psk_file,
        d.dir.path().join("cluster.psk")
    );
    assert!(c.window.verbs.is_none());
    assert_eq!(c.collectors.len(), 5);
    match &c.collectors[0] {
        CollectorConfig::System(s) => {
            assert_eq!(s.app_port, Some(8081));
            assert_eq!(s.interval, config::DEFAULT_COLLECT_INTERVAL);
            assert_eq!(s.proc_root, Path::new("/proc"));
        }
        other => panic!("{other:?}"),
    }
    match &c.collectors[2] {
        CollectorConfig::Status(s) => {
            assert_eq!(s.format, StatusFormat::Nginx);
            assert_eq!(s.timeout.as_millis(), 250);
            assert_eq!(s.capacity, Some(512));
        }
        other => panic!("{other:?}"),
    }
    match &c.collectors[4] {
        CollectorConfig::Push(p) => {
            assert_eq!(p.listen, PushListen::Unix("/run/rdmalb/push.sock".into()))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.admin.unwrap().listen.port(), 9201);
}

#[test]
fn shipped_examples_validate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let mut n = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !(name.starts_with("sidecar") && name.ends_with(".toml")) {
            continue;
        }
        // The examples name `cluster.psk` next to them; validate a copy in a
        // temp dir that has one (the real key is never in the repository).
        let d = Dir::new();
        let copy = d.dir.path().join(&name);
        std::fs::copy(&p, &copy).unwrap();
        if let Err(e) = config::load(&copy) {
            panic!("{name} does not validate:\n{e}");
        }
        n += 1;
    }
    assert!(
        n >= 2,
        "expected conf/sidecar.toml and at least one conf/sidecar-*.toml"
    );
}

#[test]
fn all_problems_are_reported_not_just_the_first() {
    let d = Dir::new();
    let text = "node = \"bad name\"\nnode_id = 0\nsites = []\npublish_interval = \"soon\"\n[window.shm]\npath = \"rel\"\n[[collector]]\nkind = \"status\"\nurl = \"ftp://x\"\nformat = \"iis\"\n[admin]\nlisten = \"nowhere\"\n";
    let err = d.parse(text).unwrap_err();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    for k in [
        "node",
        "node_id",
        "sites",
        "publish_interval",
        "window.shm.path",
        "collector[0].url",
        "collector[0].format",
        "admin.listen",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
}

#[test]
fn rejects_invalid_toml() {
    let m = Dir::new().reject("node = \n", "");
    assert!(m.contains("not valid TOML"), "{m}");
}

#[test]
fn rejects_unknown_top_level_key() {
    let m = Dir::new().reject(&with_top("nodes = 3"), "nodes");
    assert!(m.contains("accepted: node, node_id"), "{m}");
}

#[test]
fn rejects_missing_node() {
    let text = format!("node_id = 1\nsites = [\"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new().reject(&text, "node").contains("missing"));
}

#[test]
fn rejects_bad_node_name() {
    let text = format!("node = \"n 1/x\"\nnode_id = 1\nsites = [\"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new()
        .reject(&text, "node")
        .contains("accepted: 1 to 64"));
}

#[test]
fn rejects_node_id_zero() {
    let text = format!("node = \"n1\"\nnode_id = 0\nsites = [\"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new().reject(&text, "node_id").contains("1 to 65535"));
}

#[test]
fn rejects_node_id_too_large() {
    let text = format!("node = \"n1\"\nnode_id = 65536\nsites = [\"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new().reject(&text, "node_id").contains("1 to 65535"));
}

#[test]
fn rejects_node_id_of_wrong_type() {
    let text = format!("node = \"n1\"\nnode_id = \"one\"\nsites = [\"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new()
        .reject(&text, "node_id")
        .contains("expected an integer"));
}

#[test]
fn rejects_missing_sites() {
    let text = format!("node = \"n1\"\nnode_id = 1\n{SHM}{SYSTEM}");
    assert!(Dir::new()
        .reject(&text, "sites")
        .contains("proxy-config order"));
}

#[test]
fn rejects_empty_site_table() {
    let text = format!("node = \"n1\"\nnode_id = 1\nsites = []\n{SHM}{SYSTEM}");
    assert!(Dir::new()
        .reject(&text, "sites")
        .contains("accepted: 1 to 64"));
}

#[test]
fn rejects_more_than_64_sites() {
    let names: Vec<String> = (0..65).map(|i| format!("\"s{i}\"")).collect();
    let text = format!(
        "node = \"n1\"\nnode_id = 1\nsites = [{}]\n{SHM}{SYSTEM}",
        names.join(",")
    );
    assert!(Dir::new().reject(&text, "sites").contains("65 sites"));
}

#[test]
fn rejects_duplicate_site() {
    let text = format!("node = \"n1\"\nnode_id = 1\nsites = [\"a\", \"b\", \"a\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new()
        .reject(&text, "sites[2]")
        .contains("listed twice"));
}

/// Issue 27, defect 6: `idle` names the idle pool in the role state file
/// and in role commands, so it cannot name a site.
#[test]
fn rejects_the_idle_pool_name_as_a_site() {
    let text = format!("node = \"n1\"\nnode_id = 1\nsites = [\"a\", \"idle\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new().reject(&text, "sites[1]").contains("reserved"));
}

#[test]
fn rejects_empty_site_name() {
    let text = format!("node = \"n1\"\nnode_id = 1\nsites = [\"a\", \"\"]\n{SHM}{SYSTEM}");
    assert!(Dir::new().reject(&text, "sites[1]").contains("non-empty"));
}

#[test]
fn rejects_unparsable_publish_interval() {
    let m = Dir::new().reject(
        &with_top("publish_interval = \"often\""),
        "publish_interval",
    );
    assert!(m.contains("expected e.g."), "{m}");
}

#[test]
fn rejects_too_short_publish_interval() {
    let m = Dir::new().reject(&with_top("publish_interval = \"10us\""), "publish_interval");
    assert!(m.contains("accepted: 100us to 10s"), "{m}");
}

#[test]
fn rejects_staleness_below_two_intervals() {
    let m = Dir::new().reject(
        &with_top("publish_interval = \"10ms\"\nstaleness = \"15ms\""),
        "staleness",
    );
    assert!(m.contains("at least 20ms"), "{m}");
}

#[test]
fn rejects_missing_window() {
    let text = format!("{HEAD}{SYSTEM}");
    assert!(Dir::new().reject(&text, "window").contains("at least one"));
}

#[test]
fn rejects_window_without_transport() {
    let text = format!("{HEAD}[window]\n{SYSTEM}");
    assert!(Dir::new().reject(&text, "window").contains("no transport"));
}

#[test]
fn rejects_unknown_window_transport() {
    let m = Dir::new().reject(
        &with_window("[window.rdma]\ncontrol = \"x\""),
        "window.rdma",
    );
    assert!(m.contains("accepted: shm, tcp, verbs"), "{m}");
}

#[test]
fn rejects_missing_shm_path() {
    let m = Dir::new().reject(
        &with_window("[window.shm]\nmode = \"0600\""),
        "window.shm.path",
    );
    assert!(m.contains("absolute path"), "{m}");
}

#[test]
fn rejects_relative_shm_path() {
    let m = Dir::new().reject(
        &with_window("[window.shm]\npath = \"rdmalb-n1\""),
        "window.shm.path",
    );
    assert!(m.contains("not absolute"), "{m}");
}

#[test]
fn rejects_world_readable_shm_mode() {
    let m = Dir::new().reject(
        &with_window("[window.shm]\npath = \"/dev/shm/x\"\nmode = \"0644\""),
        "window.shm.mode",
    );
    assert!(m.contains("nothing for \"other\""), "{m}");
}

#[test]
fn rejects_non_octal_shm_mode() {
    let m = Dir::new().reject(
        &with_window("[window.shm]\npath = \"/dev/shm/x\"\nmode = \"rw-------\""),
        "window.shm.mode",
    );
    assert!(m.contains("accepted: octal"), "{m}");
}

#[test]
fn rejects_unknown_key_in_shm_section() {
    let m = Dir::new().reject(
        &with_window("[window.shm]\npath = \"/dev/shm/x\"\nsize = 4096"),
        "window.shm",
    );
    assert!(m.contains("unknown field `size`"), "{m}");
}

#[test]
fn rejects_bad_tcp_listen() {
    let m = Dir::new().reject(
        &with_window("[window.tcp]\nlisten = \"localhost\"\npsk_file = \"cluster.psk\""),
        "window.tcp.listen",
    );
    assert!(m.contains("IP:port"), "{m}");
}

#[test]
fn rejects_missing_psk_file() {
    let m = Dir::new().reject(
        &with_window("[window.tcp]\nlisten = \"127.0.0.1:7101\"\npsk_file = \"nope.psk\""),
        "window.tcp.psk_file",
    );
    assert!(m.contains("cannot read"), "{m}");
}

#[test]
fn rejects_world_readable_psk_file() {
    let d = Dir::new();
    let p = d.dir.path().join("open.psk");
    std::fs::write(&p, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let m = d.reject(
        &with_window("[window.tcp]\nlisten = \"127.0.0.1:7101\"\npsk_file = \"open.psk\""),
        "window.tcp.psk_file",
    );
    assert!(m.contains("chmod 600"), "{m}");
}

#[test]
fn rejects_short_psk() {
    let d = Dir::new();
    let p = d.dir.path().join("short.psk");
    std::fs::write(&p, "tiny").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let m = d.reject(
        &with_window("[window.verbs]\ncontrol = \"127.0.0.1:7201\"\npsk_file = \"short.psk\""),
        "window.verbs.psk_file",
    );
    assert!(
        m.contains("not a generated key") && m.contains("rdmalb psk"),
        "{m}"
    );
}

/// Issue 12, defect 1: verbs peers use NIC atomics, shm peers and the tcp
/// responder CPU atomics; on one node's control words the two are not
/// atomic with each other, so two proxies could both win a claim. One
/// atomicity domain per node: verbs is served alone.
#[test]
fn rejects_verbs_served_beside_shm_or_tcp() {
    let d = Dir::new();
    let verbs = "[window.verbs]\ncontrol = \"127.0.0.1:7201\"\npsk_file = \"cluster.psk\"";
    let tcp = "[window.tcp]\nlisten = \"127.0.0.1:7101\"\npsk_file = \"cluster.psk\"";
    for other in [SHM, tcp] {
        let m = d.reject(&with_window(&format!("{other}\n{verbs}")), "window.verbs");
        assert!(m.contains("not atomic with"), "{m}");
        assert!(m.contains("verbs only"), "{m}");
    }
    // Each alone, and shm with tcp (both CPU atomics), stay accepted.
    for ok in [verbs.to_string(), tcp.to_string(), format!("{SHM}{tcp}")] {
        d.parse(&with_window(&ok)).unwrap();
    }
}

#[test]
fn rejects_bad_verbs_control() {
    let m = Dir::new().reject(
        &with_window("[window.verbs]\ncontrol = \"7201\"\npsk_file = \"cluster.psk\""),
        "window.verbs.control",
    );
    assert!(m.contains("IP:port"), "{m}");
}

#[test]
fn rejects_empty_verbs_device() {
    let m = Dir::new().reject(&with_window("[window.verbs]\ncontrol = \"127.0.0.1:7201\"\npsk_file = \"cluster.psk\"\ndevice = \"\""), "window.verbs.device");
    assert!(m.contains("RDMA device name"), "{m}");
}

#[test]
fn rejects_missing_collectors() {
    let text = format!("{HEAD}{SHM}");
    assert!(Dir::new()
        .reject(&text, "collector")
        .contains("at least one"));
}

#[test]
fn rejects_collector_without_kind() {
    let m = Dir::new().reject(&with_collector("app_port = 80"), "collector[0].kind");
    assert!(
        m.contains("\"system\", \"cgroup\", \"status\", \"push\""),
        "{m}"
    );
}

#[test]
fn rejects_unknown_collector_kind() {
    let m = Dir::new().reject(&with_collector("kind = \"snmp\""), "collector[0].kind");
    assert!(m.contains("not a collector kind"), "{m}");
}

#[test]
fn rejects_key_of_another_kind() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\nurl = \"http://127.0.0.1/\""),
        "collector[0].url",
    );
    assert!(
        m.contains("not valid for kind = \"system\"") && m.contains("app_port"),
        "{m}"
    );
}

#[test]
fn rejects_unknown_collector_key() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\nport = 80"),
        "collector[0]",
    );
    assert!(m.contains("unknown field `port`"), "{m}");
}

#[test]
fn rejects_app_port_zero() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\napp_port = 0"),
        "collector[0].app_port",
    );
    assert!(m.contains("1 to 65535"), "{m}");
}

#[test]
fn rejects_app_port_too_large() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\napp_port = 80808"),
        "collector[0].app_port",
    );
    assert!(m.contains("1 to 65535"), "{m}");
}

#[test]
fn rejects_empty_interface_list() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\ninterfaces = []"),
        "collector[0].interfaces",
    );
    assert!(m.contains("leave the key out"), "{m}");
}

#[test]
fn rejects_bad_interface_name() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\ninterfaces = [\"eth0\", \"a/b\"]"),
        "collector[0].interfaces[1]",
    );
    assert!(m.contains("not an interface name"), "{m}");
}

#[test]
fn rejects_relative_proc_root() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\nproc_root = \"proc\""),
        "collector[0].proc_root",
    );
    assert!(m.contains("not absolute"), "{m}");
}

#[test]
fn rejects_collector_interval_out_of_range() {
    let m = Dir::new().reject(
        &with_collector("kind = \"system\"\ninterval = \"2h\""),
        "collector[0].interval",
    );
    assert!(m.contains("accepted: 1ms to 60s"), "{m}");
}

#[test]
fn rejects_cgroup_without_path() {
    let m = Dir::new().reject(&with_collector("kind = \"cgroup\""), "collector[0].path");
    assert!(m.contains("cgroup v2 directory"), "{m}");
}

#[test]
fn rejects_relative_cgroup_path() {
    let m = Dir::new().reject(
        &with_collector("kind = \"cgroup\"\npath = \"system.slice\""),
        "collector[0].path",
    );
    assert!(m.contains("not absolute"), "{m}");
}

#[test]
fn rejects_zero_cgroup_cpus() {
    let m = Dir::new().reject(
        &with_collector("kind = \"cgroup\"\npath = \"/sys/fs/cgroup\"\ncpus = 0.0"),
        "collector[0].cpus",
    );
    assert!(m.contains("above 0"), "{m}");
}

#[test]
fn rejects_status_without_url() {
    let m = Dir::new().reject(
        &with_collector("kind = \"status\"\nformat = \"nginx\""),
        "collector[0].url",
    );
    assert!(m.contains("missing"), "{m}");
}

#[test]
fn rejects_https_status_url() {
    let m = Dir::new().reject(
        &with_collector("kind = \"status\"\nformat = \"nginx\"\nurl = \"https://127.0.0.1/s\""),
        "collector[0].url",
    );
    assert!(m.contains("http:// URL"), "{m}");
}

#[test]
fn rejects_status_without_format() {
    let m = Dir::new().reject(
        &with_collector("kind = \"status\"\nurl = \"http://127.0.0.1/s\""),
        "collector[0].format",
    );
    assert!(m.contains("\"nginx\""), "{m}");
}

#[test]
fn rejects_unknown_status_format() {
    let m = Dir::new().reject(
        &with_collector("kind = \"status\"\nurl = \"http://127.0.0.1/s\"\nformat = \"iis\""),
        "collector[0].format",
    );
    assert!(m.contains("accepted: \"nginx\", \"apache\""), "{m}");
}

#[test]
fn rejects_bad_status_timeout() {
    let m = Dir::new().reject(&with_collector("kind = \"status\"\nurl = \"http://127.0.0.1/s\"\nformat = \"nginx\"\ntimeout = \"0ms\""), "collector[0].timeout");
    assert!(m.contains("out of range"), "{m}");
}

#[test]
fn rejects_zero_status_capacity() {
    let m = Dir::new().reject(
        &with_collector(
            "kind = \"status\"\nurl = \"http://127.0.0.1/s\"\nformat = \"nginx\"\ncapacity = 0",
        ),
        "collector[0].capacity",
    );
    assert!(m.contains("positive"), "{m}");
}

#[test]
fn rejects_push_without_listen() {
    let m = Dir::new().reject(&with_collector("kind = \"push\""), "collector[0].listen");
    assert!(m.contains("loopback"), "{m}");
}

#[test]
fn rejects_push_on_public_address() {
    let m = Dir::new().reject(
        &with_collector("kind = \"push\"\nlisten = \"0.0.0.0:7301\""),
        "collector[0].listen",
    );
    assert!(m.contains("unauthenticated"), "{m}");
}

#[test]
fn rejects_push_listen_garbage() {
    let m = Dir::new().reject(
        &with_collector("kind = \"push\"\nlisten = \"push.sock\""),
        "collector[0].listen",
    );
    assert!(m.contains("absolute unix socket path"), "{m}");
}

#[test]
fn rejects_bad_push_expire() {
    let m = Dir::new().reject(
        &with_collector("kind = \"push\"\nlisten = \"127.0.0.1:7301\"\nexpire = \"whenever\""),
        "collector[0].expire",
    );
    assert!(m.contains("not a duration"), "{m}");
}

#[test]
fn rejects_interval_on_push() {
    let m = Dir::new().reject(
        &with_collector("kind = \"push\"\nlisten = \"127.0.0.1:7301\"\ninterval = \"1s\""),
        "collector[0].interval",
    );
    assert!(m.contains("accepted: kind, listen, expire"), "{m}");
}

#[test]
fn rejects_bad_admin_listen() {
    let text = format!("{HEAD}{SHM}{SYSTEM}[admin]\nlisten = \":9201\"\n");
    assert!(Dir::new().reject(&text, "admin.listen").contains("IP:port"));
}

#[test]
fn rejects_unknown_admin_key() {
    let text = format!("{HEAD}{SHM}{SYSTEM}[admin]\nlisten = \"127.0.0.1:9201\"\ntoken = \"x\"\n");
    assert!(Dir::new()
        .reject(&text, "admin")
        .contains("unknown field `token`"));
}

#[test]
fn rejects_two_listeners_on_one_address() {
    let text = format!("{HEAD}[window.tcp]\nlisten = \"127.0.0.1:7101\"\npsk_file = \"cluster.psk\"\n{SYSTEM}[admin]\nlisten = \"127.0.0.1:7101\"\n");
    let m = Dir::new().reject(&text, "admin.listen");
    assert!(m.contains("already used by window.tcp.listen"), "{m}");
}

#[test]
fn accepts_an_agent_check_listener() {
    let text = format!("{HEAD}{SHM}{SYSTEM}[agent_check]\nlisten = \"0.0.0.0:9999\"\n");
    let cfg = Dir::new().parse(&text).unwrap();
    assert_eq!(
        cfg.agent_check.map(|a| a.listen),
        Some("0.0.0.0:9999".parse().unwrap())
    );
    assert!(Dir::new()
        .parse(&format!("{HEAD}{SHM}{SYSTEM}"))
        .unwrap()
        .agent_check
        .is_none());
}

#[test]
fn rejects_bad_agent_check_listen() {
    let text = format!("{HEAD}{SHM}{SYSTEM}[agent_check]\nlisten = \"localhost\"\n");
    let m = Dir::new().reject(&text, "agent_check.listen");
    assert!(m.contains("`localhost` is not an IP:port address"), "{m}");
    let text = format!("{HEAD}{SHM}{SYSTEM}[agent_check]\n");
    let m = Dir::new().reject(&text, "agent_check.listen");
    assert!(m.contains("missing"), "{m}");
}

#[test]
fn rejects_unknown_agent_check_key() {
    let text =
        format!("{HEAD}{SHM}{SYSTEM}[agent_check]\nlisten = \"127.0.0.1:9999\"\nsend = \"x\"\n");
    assert!(Dir::new()
        .reject(&text, "agent_check")
        .contains("unknown field `send`"));
}

#[test]
fn rejects_an_agent_check_on_the_admin_address() {
    let text = format!("{HEAD}{SHM}{SYSTEM}[admin]\nlisten = \"127.0.0.1:9201\"\n[agent_check]\nlisten = \"127.0.0.1:9201\"\n");
    let m = Dir::new().reject(&text, "agent_check.listen");
    assert!(m.contains("already used by admin.listen"), "{m}");
}
