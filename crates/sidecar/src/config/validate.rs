//! Validation: raw sections → [`SidecarConfig`], collecting every problem.
//!
//! Each section is deserialized on its own, so a type error in one section
//! (serde stops at the first) still lets every other section be checked.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{self, RawAdmin, RawAgentCheck, RawCollector, RawShm, RawTcp, RawVerbs};
use super::*;
use rdmalb_base::duration;
use rdmalb_base::problems::ConfigCheck;

mod role;

/// A pre-shared key file: present, holding a key made by `rdmalb psk` (256
/// random bits), not accessible by "other" (the key authenticates claims on
/// this node).
fn psk_file(r: &mut ConfigCheck, key: &str, text: Option<&str>) -> Option<PathBuf> {
    let Some(text) = text else {
        r.add(key, "missing (expected the path of a pre-shared key file made by `rdmalb psk --out FILE`, mode 0600 or 0640)");
        return None;
    };
    if text.is_empty() {
        r.add(
            key,
            "empty path (expected the path of a pre-shared key file)",
        );
        return None;
    }
    let path = r.path(text);
    // The same check the transports make at start-up, so `rdmalb check`
    // and a real start agree on what is a usable key.
    match rdmalb_window::Psk::from_file(&path) {
        Ok(_) => Some(path),
        Err(rdmalb_window::WindowError::Psk { reason, .. }) => {
            r.add(
                key,
                format!("`{}`: {reason} (accepted: a key made by `rdmalb psk`, in a file with no permissions for \"other\")", path.display()),
            );
            None
        }
        Err(e) => {
            r.add(key, e.to_string());
            None
        }
    }
}

/// Validates config text into a [`SidecarConfig`].
pub fn validate(text: &str, path: &Path) -> Result<SidecarConfig, ConfigErrors> {
    let mut r = ConfigCheck::new(path);
    let table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            r.add("", format!("not valid TOML: {}", e.to_string().trim()));
            return Err(r.into_errors());
        }
    };
    for k in table.keys() {
        if !raw::TOP_LEVEL_KEYS.contains(&k.as_str()) {
            r.add(
                k.clone(),
                format!("unknown key (accepted: {})", raw::TOP_LEVEL_KEYS.join(", ")),
            );
        }
    }

    let node = node_name(&mut r, table.get("node"));
    let node_id = node_id(&mut r, table.get("node_id"));
    let sites = sites(&mut r, table.get("sites"));
    let publish_interval = {
        let t: Option<String> = r.field(
            "publish_interval",
            table.get("publish_interval"),
            "a duration string such as \"1ms\"",
        );
        r.duration_within(
            "publish_interval",
            t.as_deref(),
            DEFAULT_PUBLISH_INTERVAL,
            Duration::from_micros(100),
            Duration::from_secs(10),
        )
    };
    let staleness = {
        let t: Option<String> = r.field(
            "staleness",
            table.get("staleness"),
            "a duration string such as \"50ms\"",
        );
        let d = r.duration_within(
            "staleness",
            t.as_deref(),
            DEFAULT_STALENESS.max(publish_interval * 2),
            Duration::from_micros(200),
            Duration::from_secs(600),
        );
        if t.is_some() && d < publish_interval * 2 {
            r.add(
                "staleness",
                format!(
                    "{} is shorter than two publish intervals ({}); readers would see a healthy node as stale (accepted: at least {})",
                    duration::format(d),
                    duration::format(publish_interval),
                    duration::format(publish_interval * 2)
                ),
            );
        }
        d
    };
    let window = window(&mut r, table.get("window"));
    let collectors = collectors(&mut r, table.get("collector"));
    let admin = match table.get("admin") {
        None => None,
        Some(v) => {
            let raw: RawAdmin = r.value("admin", v);
            r.ip_socket_addr("admin.listen", raw.listen.as_deref())
                .map(|listen| AdminConfig { listen })
        }
    };
    let agent_check = match table.get("agent_check") {
        None => None,
        Some(v) => {
            let raw: RawAgentCheck = r.value("agent_check", v);
            r.ip_socket_addr("agent_check.listen", raw.listen.as_deref())
                .map(|listen| AgentCheckConfig { listen })
        }
    };
    let site = role::initial_site(&mut r, table.get("site"), &sites);
    let role = role::role(&mut r, table.get("role"), &sites, site);
    check_port_clashes(
        &mut r,
        &window,
        &collectors,
        admin.as_ref(),
        agent_check.as_ref(),
    );
    let state_file = state_file(&mut r, table.get("state_file"), node.as_deref());

    let site_hash = rdmalb_window::layout::site_table_hash(&sites);
    let file = r.file().to_path_buf();
    r.finish(SidecarConfig {
        file,
        node: node.unwrap_or_default(),
        node_id: node_id.unwrap_or_default(),
        sites,
        site_hash,
        publish_interval,
        staleness,
        window,
        collectors,
        admin,
        agent_check,
        site,
        state_file,
        role,
    })
}

/// `state_file`: where the role survives a restart (default `<node>.state`
/// beside the config file). Its directory must exist; the sidecar creates
/// the file.
fn state_file(r: &mut ConfigCheck, v: Option<&toml::Value>, node: Option<&str>) -> PathBuf {
    let text: Option<String> = r.field(
        "state_file",
        v,
        "a file path such as \"/var/lib/rdmalb/n1.state\"",
    );
    let path = match text.as_deref() {
        Some("") => {
            r.add(
                "state_file",
                "empty path (expected a file the sidecar may write, such as \"/var/lib/rdmalb/n1.state\")",
            );
            return PathBuf::new();
        }
        Some(t) => r.path(t),
        None => r.path(&format!("{}.state", node.unwrap_or("sidecar"))),
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.is_dir() {
        r.add(
            "state_file",
            format!("`{}` is a directory (expected a file path)", path.display()),
        );
    } else if !dir.is_dir() {
        r.add(
            "state_file",
            format!(
                "directory `{}` does not exist (create it, writable by the sidecar; the role state must survive restarts, so not under /tmp or /run)",
                dir.display()
            ),
        );
    }
    path
}

fn node_name(r: &mut ConfigCheck, v: Option<&toml::Value>) -> Option<String> {
    if v.is_none() {
        r.add(
            "node",
            "missing (expected the node's name as in the proxy config, e.g. node = \"n1\")",
        );
        return None;
    }
    let name: String = r.field("node", v, "a string")?;
    if !rdmalb_base::name::is_valid(&name) {
        r.add(
            "node",
            format!("`{name}` is not a node name (accepted: 1 to 64 of A-Z a-z 0-9 - _ .)"),
        );
        return None;
    }
    Some(name)
}

fn node_id(r: &mut ConfigCheck, v: Option<&toml::Value>) -> Option<u16> {
    if v.is_none() {
        r.add(
            "node_id",
            "missing (expected an integer from 1 to 65535, unique in the cluster)",
        );
        return None;
    }
    let id: i64 = r.field("node_id", v, "an integer from 1 to 65535")?;
    match u16::try_from(id) {
        Ok(id) if id > 0 => Some(id),
        _ => {
            r.add(
                "node_id",
                format!(
                    "{id} is out of range (accepted: 1 to 65535; 0 is reserved for \"no node\")"
                ),
            );
            None
        }
    }
}

fn sites(r: &mut ConfigCheck, v: Option<&toml::Value>) -> Vec<String> {
    if v.is_none() {
        r.add("sites", "missing (expected the cluster's site names in proxy-config order, e.g. sites = [\"shop\", \"blog\"])");
        return Vec::new();
    }
    let Some(sites) = r.field::<Vec<String>>("sites", v, "an array of site names") else {
        return Vec::new();
    };
    if sites.is_empty() || sites.len() > rdmalb_window::layout::MAX_SITES {
        r.add(
            "sites",
            format!(
                "{} sites listed (accepted: 1 to {})",
                sites.len(),
                rdmalb_window::layout::MAX_SITES
            ),
        );
    }
    let mut seen = HashSet::new();
    for (i, s) in sites.iter().enumerate() {
        if s.is_empty() || s.contains('\0') {
            r.add(
                format!("sites[{i}]"),
                "empty name or NUL byte (accepted: a non-empty site name)",
            );
        } else if rdmalb_window::role::is_reserved_site_name(s) {
            r.add(
                format!("sites[{i}]"),
                format!("`{s}` is reserved: it names the idle pool, not a site (rename the site in the proxy config and here)"),
            );
        } else if !seen.insert(s.as_str()) {
            r.add(
                format!("sites[{i}]"),
                format!("`{s}` is listed twice (site names must be unique)"),
            );
        }
    }
    sites
}

fn window(r: &mut ConfigCheck, v: Option<&toml::Value>) -> WindowServing {
    let mut w = WindowServing::default();
    let Some(v) = v else {
        r.add(
            "window",
            "missing (configure at least one of [window.shm], [window.tcp], [window.verbs])",
        );
        return w;
    };
    let Some(t) = v.as_table() else {
        r.add(
            "window",
            format!("expected a table, found {}", v.type_str()),
        );
        return w;
    };
    for k in t.keys() {
        if !raw::WINDOW_KEYS.contains(&k.as_str()) {
            r.add(
                format!("window.{k}"),
                format!("unknown key (accepted: {})", raw::WINDOW_KEYS.join(", ")),
            );
        }
    }
    if let Some(v) = t.get("shm") {
        let s: RawShm = r.value("window.shm", v);
        w.shm = shm(r, s);
    }
    if let Some(v) = t.get("tcp") {
        let s: RawTcp = r.value("window.tcp", v);
        let listen = r.ip_socket_addr("window.tcp.listen", s.listen.as_deref());
        let psk = psk_file(r, "window.tcp.psk_file", s.psk_file.as_deref());
        if let (Some(listen), Some(psk_file)) = (listen, psk) {
            w.tcp = Some(TcpServe { listen, psk_file });
        }
    }
    if let Some(v) = t.get("verbs") {
        let s: RawVerbs = r.value("window.verbs", v);
        let control = r.ip_socket_addr("window.verbs.control", s.control.as_deref());
        let psk = psk_file(r, "window.verbs.psk_file", s.psk_file.as_deref());
        if s.device.as_deref() == Some("") {
            r.add("window.verbs.device", "empty (accepted: an RDMA device name such as \"rxe0\" or \"mlx5_0\", or leave the key out for the first device)");
        }
        if let (Some(control), Some(psk_file)) = (control, psk) {
            w.verbs = Some(VerbsServe {
                control,
                psk_file,
                device: s.device.filter(|d| !d.is_empty()),
            });
        }
    }
    if t.contains_key("verbs") && (t.contains_key("shm") || t.contains_key("tcp")) {
        // One atomicity domain per node (docs/window.md, "Role word"): a verbs peer's
        // CAS/FAA runs on the NIC, an shm peer's and the tcp responder's on
        // the CPU, and the two are not atomic with each other on the same
        // control word, so two proxies could both win one claim.
        r.add(
            "window.verbs",
            "cannot be served beside [window.shm] or [window.tcp]: the NIC's atomics (verbs CAS and fetch-and-add) are not atomic with the CPU atomics that shm peers and the tcp responder use on the same role and lock words, so two proxies reaching this node by different transports could both win a claim; serve this node over verbs only (a proxy on the same host reaches it over verbs too), or over shm and tcp only (docs/verbs.md, \"Security notes and atomics\")",
        );
    }
    if t.get("shm").is_none() && t.get("tcp").is_none() && t.get("verbs").is_none() {
        r.add("window", "no transport configured (configure at least one of [window.shm], [window.tcp], [window.verbs])");
    }
    w
}

fn shm(r: &mut ConfigCheck, s: RawShm) -> Option<ShmServe> {
    let path = match s.path {
        None => {
            r.add(
                "window.shm.path",
                "missing (expected an absolute path such as \"/dev/shm/rdmalb-n1\")",
            );
            None
        }
        Some(p) if !Path::new(&p).is_absolute() => {
            r.add(
                "window.shm.path",
                format!("`{p}` is not absolute (expected e.g. \"/dev/shm/rdmalb-n1\")"),
            );
            None
        }
        Some(p) if p.ends_with('/') => {
            r.add(
                "window.shm.path",
                format!(
                    "`{p}` names a directory (expected a file path such as \"/dev/shm/rdmalb-n1\")"
                ),
            );
            None
        }
        Some(p) => Some(PathBuf::from(p)),
    };
    let mode = match s.mode.as_deref() {
        None => Some(DEFAULT_SHM_MODE),
        Some(text) => match u32::from_str_radix(text.trim_start_matches("0o"), 8) {
            Ok(m) if m <= 0o777 && m & 0o600 == 0o600 && m & 0o117 == 0 => Some(m),
            _ => {
                r.add(
                    "window.shm.mode",
                    format!("`{text}` is not accepted (accepted: octal \"0600\", \"0640\" or \"0660\": owner read-write, no execute, nothing for \"other\")"),
                );
                None
            }
        },
    };
    Some(ShmServe {
        path: path?,
        mode: mode?,
    })
}

/// Keys each collector kind accepts besides `kind`.
fn kind_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "system" => &["interval", "proc_root", "app_port", "interfaces"],
        "cgroup" => &["interval", "path", "cpus", "proc_root"],
        "status" => &["interval", "url", "format", "timeout", "capacity"],
        "push" => &["listen", "expire"],
        _ => return None,
    })
}

fn collectors(r: &mut ConfigCheck, v: Option<&toml::Value>) -> Vec<CollectorConfig> {
    let Some(v) = v else {
        r.add(
            "collector",
            "missing (configure at least one [[collector]], e.g. kind = \"system\")",
        );
        return Vec::new();
    };
    let Some(entries) = v.as_array() else {
        r.add(
            "collector",
            "expected an array of tables ([[collector]] entries)",
        );
        return Vec::new();
    };
    if entries.is_empty() {
        r.add(
            "collector",
            "empty (configure at least one [[collector]], e.g. kind = \"system\")",
        );
    }
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let key = format!("collector[{i}]");
        let c: RawCollector = r.value(&key, e);
        let Some(kind) = c.kind.clone() else {
            if e.as_table().is_some_and(|t| !t.contains_key("kind")) {
                r.add(
                    format!("{key}.kind"),
                    "missing (accepted: \"system\", \"cgroup\", \"status\", \"push\")",
                );
            }
            continue;
        };
        let Some(allowed) = kind_keys(&kind) else {
            r.add(format!("{key}.kind"), format!("`{kind}` is not a collector kind (accepted: \"system\", \"cgroup\", \"status\", \"push\")"));
            continue;
        };
        let mut fine = true;
        for k in c.keys_set() {
            if !allowed.contains(&k) {
                r.add(
                    format!("{key}.{k}"),
                    format!(
                        "not valid for kind = \"{kind}\" (accepted: kind, {})",
                        allowed.join(", ")
                    ),
                );
                fine = false;
            }
        }
        let interval = r.duration_within(
            &format!("{key}.interval"),
            c.interval.as_deref(),
            DEFAULT_COLLECT_INTERVAL,
            Duration::from_millis(1),
            Duration::from_secs(60),
        );
        let proc_root = PathBuf::from(c.proc_root.as_deref().unwrap_or(DEFAULT_PROC_ROOT));
        if matches!(kind.as_str(), "system" | "cgroup") && !proc_root.is_absolute() {
            r.add(
                format!("{key}.proc_root"),
                format!(
                    "`{}` is not absolute (expected e.g. \"/proc\")",
                    proc_root.display()
                ),
            );
            fine = false;
        }
        let built = match kind.as_str() {
            "system" => system(r, &key, &c, interval, proc_root),
            "cgroup" => cgroup(r, &key, &c, interval, proc_root),
            "status" => status(r, &key, &c, interval),
            _ => push(r, &key, &c),
        };
        if let (true, Some(b)) = (fine, built) {
            out.push(b);
        }
    }
    out
}

fn system(
    r: &mut ConfigCheck,
    key: &str,
    c: &RawCollector,
    interval: Duration,
    proc_root: PathBuf,
) -> Option<CollectorConfig> {
    let mut ok = true;
    let app_port = match c.app_port {
        None => None,
        Some(p) => match u16::try_from(p) {
            Ok(p) if p > 0 => Some(p),
            _ => {
                r.add(
                    format!("{key}.app_port"),
                    format!("{p} is not a TCP port (accepted: 1 to 65535)"),
                );
                ok = false;
                None
            }
        },
    };
    if let Some(list) = &c.interfaces {
        if list.is_empty() {
            r.add(
                format!("{key}.interfaces"),
                "empty list (leave the key out to sum every interface except lo)",
            );
            ok = false;
        }
        for (j, name) in list.iter().enumerate() {
            // Linux interface names: 1..15 bytes, no '/', ':' or whitespace.
            if name.is_empty()
                || name.len() > 15
                || name
                    .chars()
                    .any(|ch| ch == '/' || ch == ':' || ch.is_whitespace())
            {
                r.add(format!("{key}.interfaces[{j}]"), format!("`{name}` is not an interface name (accepted: 1 to 15 characters, no '/', ':' or spaces)"));
                ok = false;
            }
        }
    }
    ok.then(|| {
        CollectorConfig::System(SystemCollector {
            interval,
            proc_root,
            app_port,
            interfaces: c.interfaces.clone(),
        })
    })
}

fn cgroup(
    r: &mut ConfigCheck,
    key: &str,
    c: &RawCollector,
    interval: Duration,
    proc_root: PathBuf,
) -> Option<CollectorConfig> {
    let path = match c.path.as_deref() {
        None => {
            r.add(format!("{key}.path"), "missing (expected a cgroup v2 directory such as \"/sys/fs/cgroup/system.slice/nginx.service\")");
            None
        }
        Some(p) if !Path::new(p).is_absolute() => {
            r.add(format!("{key}.path"), format!("`{p}` is not absolute (expected e.g. \"/sys/fs/cgroup/system.slice/nginx.service\")"));
            None
        }
        Some(p) => Some(PathBuf::from(p)),
    };
    let cpus = match c.cpus {
        Some(n) if !(n.is_finite() && n > 0.0 && n <= 4096.0) => {
            r.add(format!("{key}.cpus"), format!("{n} is out of range (accepted: a number of CPUs above 0, at most 4096, e.g. 2 or 0.5)"));
            return None;
        }
        n => n,
    };
    Some(CollectorConfig::Cgroup(CgroupCollector {
        interval,
        path: path?,
        cpus,
        proc_root,
    }))
}

fn status(
    r: &mut ConfigCheck,
    key: &str,
    c: &RawCollector,
    interval: Duration,
) -> Option<CollectorConfig> {
    let url = match c.url.as_deref() {
        None => {
            r.add(
                format!("{key}.url"),
                "missing (expected e.g. \"http://127.0.0.1:8081/nginx_status\")",
            );
            None
        }
        Some(u) => match u.parse::<http::Uri>() {
            Ok(uri) if uri.scheme_str() == Some("http") && uri.host().is_some() => Some(uri),
            _ => {
                r.add(format!("{key}.url"), format!("`{u}` is not accepted (expected an http:// URL with a host, e.g. \"http://127.0.0.1:8081/nginx_status\"; https is not supported for local status pages)"));
                None
            }
        },
    };
    let format = match c.format.as_deref() {
        None => {
            r.add(
                format!("{key}.format"),
                "missing (accepted: \"nginx\" for stub_status, \"apache\" for mod_status ?auto)",
            );
            None
        }
        Some("nginx") => Some(StatusFormat::Nginx),
        Some("apache") => Some(StatusFormat::Apache),
        Some(f) => {
            r.add(
                format!("{key}.format"),
                format!("`{f}` is not a status format (accepted: \"nginx\", \"apache\")"),
            );
            None
        }
    };
    let timeout = r.duration_within(
        &format!("{key}.timeout"),
        c.timeout.as_deref(),
        interval.min(Duration::from_secs(1)),
        Duration::from_millis(1),
        Duration::from_secs(60),
    );
    let capacity = match c.capacity {
        None => None,
        Some(n) if n > 0 => Some(n as u64),
        Some(n) => {
            r.add(format!("{key}.capacity"), format!("{n} is out of range (accepted: a positive number of concurrent requests the app can serve)"));
            return None;
        }
    };
    Some(CollectorConfig::Status(StatusCollector {
        interval,
        url: url?,
        format: format?,
        timeout,
        capacity,
    }))
}

fn push(r: &mut ConfigCheck, key: &str, c: &RawCollector) -> Option<CollectorConfig> {
    let listen = match c.listen.as_deref() {
        None => {
            r.add(format!("{key}.listen"), "missing (expected a loopback address such as \"127.0.0.1:7301\" or a unix socket path such as \"/run/rdmalb/push.sock\")");
            None
        }
        Some(t) if t.starts_with('/') => Some(PushListen::Unix(PathBuf::from(t))),
        Some(t) => match t.parse::<SocketAddr>() {
            Ok(a) if a.ip().is_loopback() => Some(PushListen::Tcp(a)),
            Ok(a) => {
                r.add(format!("{key}.listen"), format!("{a} is not a loopback address; the push protocol is unauthenticated, so anyone who reaches it could fake this node's load (accepted: 127.0.0.1:PORT, [::1]:PORT or a unix socket path)"));
                None
            }
            Err(_) => {
                r.add(format!("{key}.listen"), format!("`{t}` is neither an address nor an absolute unix socket path (e.g. \"127.0.0.1:7301\" or \"/run/rdmalb/push.sock\")"));
                None
            }
        },
    };
    let expire = c.expire.as_deref().map(|t| {
        r.duration_within(
            &format!("{key}.expire"),
            Some(t),
            Duration::ZERO,
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )
    });
    Some(CollectorConfig::Push(PushCollector {
        listen: listen?,
        expire: expire.filter(|d| !d.is_zero()),
    }))
}

/// Two listeners on one TCP address would fail at start-up; say so now.
fn check_port_clashes(
    r: &mut ConfigCheck,
    w: &WindowServing,
    cs: &[CollectorConfig],
    admin: Option<&AdminConfig>,
    agent_check: Option<&AgentCheckConfig>,
) {
    let mut used: Vec<(String, SocketAddr)> = Vec::new();
    if let Some(t) = &w.tcp {
        used.push(("window.tcp.listen".into(), t.listen));
    }
    if let Some(v) = &w.verbs {
        used.push(("window.verbs.control".into(), v.control));
    }
    for (i, c) in cs.iter().enumerate() {
        if let CollectorConfig::Push(PushCollector {
            listen: PushListen::Tcp(a),
            ..
        }) = c
        {
            used.push((format!("collector[{i}].listen"), *a));
        }
    }
    if let Some(a) = admin {
        used.push(("admin.listen".into(), a.listen));
    }
    if let Some(a) = agent_check {
        used.push(("agent_check.listen".into(), a.listen));
    }
    for i in 0..used.len() {
        for j in 0..i {
            let (a, b) = (used[i].1, used[j].1);
            if a.port() != 0 && a == b {
                r.add(
                    used[i].0.clone(),
                    format!(
                        "{a} is already used by {} (each listener needs its own address)",
                        used[j].0
                    ),
                );
            }
        }
    }
}
