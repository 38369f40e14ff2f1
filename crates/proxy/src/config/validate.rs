//! Raw → typed validation. Every problem is collected with its key path and
//! what would be accepted; nothing stops at the first error.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use super::raw::*;
use super::types::*;
use super::ConfigErrors;
use rdmalb_base::problems::ConfigCheck;

/// Validates config text. `file` is used in messages and to resolve relative paths.
pub fn validate(text: &str, file: &Path) -> Result<Config, ConfigErrors> {
    let table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}")
                })
                .unwrap_or_default();
            return Err(ConfigErrors::single(
                file,
                &at,
                format!(
                    "TOML syntax error: {}",
                    e.message().trim().replace('\n', " ")
                ),
            ));
        }
    };
    let mut c = ConfigCheck::new(file);
    let rule_keys = crate::rules::config::KEYS;
    for key in table.keys() {
        if !TOP_LEVEL_KEYS.contains(&key.as_str()) && !rule_keys.contains(&key.as_str()) {
            c.add(
                key.clone(),
                format!(
                    "unknown section (expected one of: {}, {})",
                    TOP_LEVEL_KEYS.join(", "),
                    rule_keys.join(", ")
                ),
            );
        }
    }
    let raw_global: RawGlobal = c.section(&table, "global");
    let raw_timeouts: RawTimeouts = c.section(&table, "timeouts");
    let raw_limits: RawLimits = c.section(&table, "limits");
    let raw_health: RawHealth = c.section(&table, "health");
    let raw_admin: Option<RawAdmin> = table
        .contains_key("admin")
        .then(|| c.section(&table, "admin"));
    let raw_cluster: RawCluster = c.section(&table, "cluster");
    let raw_weights: RawWeights = c.section(&table, "weights");
    let raw_routing: RawRouting = c.section(&table, "routing");
    let raw_listeners: Vec<Option<RawListener>> = c.entries(&table, "listener");
    let raw_sites: Vec<Option<RawSite>> = c.entries(&table, "site");
    let raw_nodes: Vec<Option<RawNode>> = c.entries(&table, "node");
    let raw_reconfig: RawReconfig = c.section(&table, "reconfig");
    let raw_qos: RawQos = c.section(&table, "qos");
    let raw_stats_sockets = c.entries(&table, "stats_socket");
    let acme = table.contains_key("acme").then(|| {
        let raw = c.section(&table, "acme");
        super::acme::validate(&mut c, raw)
    });

    let timeouts = limits::timeouts(&mut c, &raw_timeouts);
    let limits = limits::limits(&mut c, &raw_limits);
    let health = HealthCheck {
        path: http_path(&mut c, "health.path", raw_health.path.as_deref(), "/"),
        interval: c.duration(
            "health.interval",
            raw_health.interval.as_deref(),
            Duration::from_secs(2),
        ),
        timeout: c.duration(
            "health.timeout",
            raw_health.timeout.as_deref(),
            Duration::from_secs(1),
        ),
        rise: c.int("health.rise", raw_health.rise, 2, 1, 100) as u32,
        fall: c.int("health.fall", raw_health.fall, 3, 1, 100) as u32,
        passive_failures: c.int(
            "health.passive_failures",
            raw_health.passive_failures,
            3,
            0,
            1000,
        ) as u32,
        expect_status: raw_health.expect_status.map(|_| {
            c.int(
                "health.expect_status",
                raw_health.expect_status,
                200,
                100,
                599,
            ) as u16
        }),
    };
    let admin = raw_admin.and_then(|a| {
        let token_file = match a.token_file.as_deref() {
            Some("") => {
                c.add(
                    "admin.token_file",
                    "empty path (expected the path of a file holding the admin token)",
                );
                None
            }
            t => t.map(|p| c.path(p)),
        };
        let listen = c.socket_addr("admin.listen", a.listen.as_deref())?;
        if !listen.ip().is_loopback()
            && token_file.is_none()
            && a.allow_remote_without_token != Some(true)
        {
            c.add(
                "admin.listen",
                format!("{listen} is reachable from other hosts and [admin] has no token_file: anyone who can connect reads /status and /metrics and can hold the admin listener's slots (expected a loopback address such as 127.0.0.1:{port}, a token_file, or allow_remote_without_token = true to accept this on a management network)", port = listen.port()),
            );
        }
        Some(Admin { listen, token_file })
    });
    let cluster = Cluster {
        psk_file: raw_cluster.psk_file.as_deref().map(|p| c.path(p)),
    };
    let default_weights = weights(&mut c, "weights", &raw_weights, LoadWeights::default());
    let routing = routing::routing(&mut c, &raw_routing);

    // Listeners.
    let mut listeners = Vec::new();
    let mut seen_listen = HashSet::new();
    if raw_listeners.is_empty() && !table.contains_key("listener") {
        c.add(
            "listener",
            "no listener (add at least one [[listener]] with listen = \"0.0.0.0:80\")",
        );
    }
    for (i, l) in raw_listeners.into_iter().enumerate() {
        let Some(l) = l else { continue };
        let key = format!("listener[{i}]");
        let Some(listen) = c.socket_addr(&format!("{key}.listen"), l.listen.as_deref()) else {
            continue;
        };
        if !seen_listen.insert(listen) {
            c.add(
                format!("{key}.listen"),
                format!("{listen} is used by another listener"),
            );
        }
        let tls = l.tls.map(|t| tls(&mut c, &key, t, acme.is_some()));
        let accept_proxy = l.accept_proxy.unwrap_or(false);
        let accept_proxy_from = match (accept_proxy, &l.accept_proxy_from) {
            (true, None) => {
                c.add(
                    format!("{key}.accept_proxy_from"),
                    "missing: accept_proxy trusts the client address a PROXY header claims, so name the peers allowed to send one (expected e.g. [\"10.0.0.0/8\"] for the load balancers in front; [\"0.0.0.0/0\", \"::/0\"] trusts any peer, as HAProxy's accept-proxy does)",
                );
                Vec::new()
            }
            (false, Some(_)) => {
                c.add(
                    format!("{key}.accept_proxy_from"),
                    "has no effect without accept_proxy = true (expected accept_proxy = true, or no accept_proxy_from)",
                );
                Vec::new()
            }
            (_, list) => networks(&mut c, &format!("{key}.accept_proxy_from"), list.as_deref()),
        };
        let monitor_uri = l.monitor_uri.filter(|u| {
            let ok = u.starts_with('/') && http::uri::PathAndQuery::try_from(u.as_str()).is_ok();
            if !ok {
                c.add(
                    format!("{key}.monitor_uri"),
                    format!("`{u}` is not a request path (expected one such as \"/haproxy_test\")"),
                );
            }
            ok
        });
        let monitor_fail = l.monitor_fail.and_then(|f| {
            let key = format!("{key}.monitor_fail");
            if monitor_uri.is_none() {
                c.add(&key, "has no effect without monitor_uri (expected a monitor_uri, or no monitor_fail)");
            }
            let below = c.int(&format!("{key}.serving_below"), f.serving_below, 1, 1, 1 << 20);
            match f.site {
                Some(site) => Some(MonitorFail { site, serving_below: below as usize }),
                None => {
                    c.add(key, "missing `site` (expected { site = \"app\", serving_below = 1 })");
                    None
                }
            }
        });
        listeners.push(Listener {
            name: l.name.unwrap_or_else(|| format!("listener{i}")),
            listen,
            tls,
            accept_proxy,
            accept_proxy_from,
            monitor_uri,
            monitor_fail,
        });
    }

    // Sites.
    let mut sites: Vec<Site> = Vec::new();
    let mut site_index: HashMap<String, usize> = HashMap::new();
    let mut host_routes: HashMap<(HostPattern, String), String> = HashMap::new();
    if raw_sites.is_empty() && !table.contains_key("site") {
        c.add(
            "site",
            "no site (add at least one [[site]] with a name and hosts)",
        );
    }
    for (i, s) in raw_sites.into_iter().enumerate() {
        let Some(s) = s else { continue };
        let key = format!("site[{i}]");
        let name = match s.name {
            Some(n) if rdmalb_window::role::is_reserved_site_name(&n) => {
                c.add(
                    format!("{key}.name"),
                    format!("`{n}` is reserved: it names the idle pool (nodes no site uses); choose another name, e.g. `{n}-site`"),
                );
                continue;
            }
            Some(n) if valid_name(&n) => n,
            Some(n) => {
                c.add(
                    format!("{key}.name"),
                    format!("`{n}` is not a valid name (expected 1-64 characters from a-z, A-Z, 0-9, '-', '_', '.')"),
                );
                continue;
            }
            None => {
                c.add(format!("{key}.name"), "missing (every site needs a name)");
                continue;
            }
        };
        if site_index.contains_key(&name) {
            c.add(
                format!("{key}.name"),
                format!("site `{name}` is defined twice"),
            );
            continue;
        }
        let key = format!("site[{i}] ({name})");
        let mut hosts = Vec::new();
        // A site only `[[site_rule]]`s route to needs no hosts.
        if s.hosts.is_empty() && !table.contains_key("site_rule") {
            c.add(
                format!("{key}.hosts"),
                "empty (expected host names such as [\"www.example.com\", \"*.example.com\"])",
            );
        }
        for (j, h) in s.hosts.iter().enumerate() {
            match host_pattern(h) {
                Ok(p) => hosts.push(p),
                Err(e) => c.add(format!("{key}.hosts[{j}]"), e),
            }
        }
        let mut path_prefixes = Vec::new();
        for (j, p) in s.path_prefixes.iter().enumerate() {
            if !p.starts_with('/') || p.contains(char::is_whitespace) {
                c.add(
                    format!("{key}.path_prefixes[{j}]"),
                    format!("`{p}` is not a path prefix (expected it to start with '/', e.g. \"/api/\")"),
                );
            } else {
                path_prefixes.push(p.clone());
            }
        }
        let route_prefixes = if path_prefixes.is_empty() {
            vec![String::new()]
        } else {
            path_prefixes.clone()
        };
        for h in &hosts {
            for p in &route_prefixes {
                if let Some(other) = host_routes.insert((h.clone(), p.clone()), name.clone()) {
                    c.add(
                        format!("{key}.hosts"),
                        format!(
                            "host {} with path prefix `{}` is already routed to site `{other}`",
                            pattern_text(h),
                            if p.is_empty() { "/" } else { p }
                        ),
                    );
                }
            }
        }
        let priority = c.int(&format!("{key}.priority"), s.priority, 0, 0, 1000) as u32;
        let guarantee = match s.guarantee {
            None => 0.0,
            Some(g) if g.is_finite() && g >= 0.0 => g,
            Some(g) => {
                c.add(
                    format!("{key}.guarantee"),
                    format!("{g} is not a rate (expected requests per second >= 0)"),
                );
                0.0
            }
        };
        let min_nodes = c.int(&format!("{key}.min_nodes"), s.min_nodes, 1, 0, 10_000) as usize;
        let max_nodes = c.int(&format!("{key}.max_nodes"), s.max_nodes, 10_000, 0, 10_000) as usize;
        if max_nodes < min_nodes {
            c.add(
                format!("{key}.max_nodes"),
                format!("{max_nodes} is below min_nodes = {min_nodes} (expected max_nodes >= min_nodes)"),
            );
        }
        let weights = match &s.weights {
            Some(w) => weights(&mut c, &format!("{key}.weights"), w, default_weights),
            None => default_weights,
        };
        let health_path = match &s.health_path {
            Some(p) => http_path(&mut c, &format!("{key}.health_path"), Some(p), "/"),
            None => health.path.clone(),
        };
        let compression = s
            .compression
            .map(|raw| super::compression::validate(&mut c, &format!("{key}.compression"), raw));
        let balance = super::balancing::site_balance(&mut c, &key, s.balance.as_deref(), s.hash);
        let sticky = s
            .sticky
            .map(|raw| super::balancing::sticky(&mut c, &format!("{key}.sticky"), raw));
        let acme_names = super::acme::site_names(&mut c, &key, &hosts, s.acme.unwrap_or(false));
        if !acme_names.is_empty() && acme.is_none() {
            c.add(
                format!("{key}.acme"),
                "needs an [acme] section (expected [acme] with storage = \"/var/lib/rdmalb/acme\")",
            );
        }
        if sites.len() >= 64 {
            c.add(
                key.clone(),
                "too many sites (at most 64: the window has 64 site slots)",
            );
            continue;
        }
        site_index.insert(name.clone(), sites.len());
        sites.push(Site {
            index: sites.len(),
            name,
            hosts,
            path_prefixes,
            priority,
            guarantee,
            min_nodes,
            max_nodes,
            weights,
            health_path,
            compression,
            balance,
            sticky,
            acme_names,
        });
    }

    for (i, l) in listeners.iter().enumerate() {
        if let Some(f) = l
            .monitor_fail
            .as_ref()
            .filter(|f| !site_index.contains_key(&f.site))
        {
            c.add(
                format!("listener[{i}].monitor_fail.site"),
                format!(
                    "no site named `{}` (expected one of the [[site]] names)",
                    f.site
                ),
            );
        }
    }

    // Nodes.
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_names = HashSet::new();
    let mut node_ids = HashMap::new();
    for (i, n) in raw_nodes.into_iter().enumerate() {
        let Some(n) = n else { continue };
        let key = format!("node[{i}]");
        let name = match n.name.clone() {
            Some(name) if valid_name(&name) => name,
            Some(name) => {
                c.add(
                    format!("{key}.name"),
                    format!("`{name}` is not a valid name (expected 1-64 characters from a-z, A-Z, 0-9, '-', '_', '.')"),
                );
                continue;
            }
            None => {
                c.add(format!("{key}.name"), "missing (every node needs a name)");
                continue;
            }
        };
        if !node_names.insert(name.clone()) {
            c.add(
                format!("{key}.name"),
                format!("node `{name}` is defined twice"),
            );
            continue;
        }
        let key = format!("node[{i}] ({name})");
        let address = c.socket_addr(&format!("{key}.address"), n.address.as_deref());
        let site = match n.site.as_deref() {
            None => None,
            Some(s) if s == rdmalb_window::role::IDLE_POOL => None,
            Some(s) => match site_index.get(s) {
                Some(&idx) => Some(idx),
                None => {
                    c.add(
                        format!("{key}.site"),
                        format!(
                            "no site named `{s}` (expected one of: {}, or \"idle\")",
                            sites
                                .iter()
                                .map(|s| s.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                    None
                }
            },
        };
        let window = node_window(&mut c, &key, &n);
        if n.device.is_some() && n.transport.as_deref() != Some("verbs") {
            c.add(
                format!("{key}.device"),
                "is set but allowed only with transport = \"verbs\" (remove it or switch the transport)",
            );
        }
        let node_id = routing::node_id(&mut c, &key, &n, &mut node_ids);
        let send_proxy = n.send_proxy.as_deref().and_then(|v| {
            SendProxy::parse(v).or_else(|| {
                c.add(
                    format!("{key}.send_proxy"),
                    format!(
                        "`{v}` is not a PROXY protocol version (expected {})",
                        SendProxy::ACCEPTED
                    ),
                );
                None
            })
        });
        let weight = c.int(
            &format!("{key}.weight"),
            n.weight,
            u64::from(Node::DEFAULT_WEIGHT),
            0,
            u64::from(Node::MAX_WEIGHT),
        ) as u32;
        let max_inflight = n
            .max_inflight
            .map(|v| c.int(&format!("{key}.max_inflight"), Some(v), 0, 1, 1_000_000) as usize);
        let agent = node_agent(&mut c, &key, &n, address);
        let cookie =
            super::balancing::node_cookie(&mut c, &format!("{key}.cookie"), n.cookie.clone());
        if let Some(address) = address {
            nodes.push(Node {
                index: nodes.len(),
                name,
                address,
                site,
                window,
                node_id,
                check: n.check.unwrap_or(true),
                send_proxy,
                weight,
                disabled: n.disabled.unwrap_or(false),
                max_inflight,
                backup: n.backup.unwrap_or(false),
                agent,
                cookie,
            });
        }
    }
    let needs_psk = nodes.iter().any(|n| {
        matches!(
            n.window,
            Some(WindowEndpoint::Tcp { .. }) | Some(WindowEndpoint::Verbs { .. })
        )
    });
    if needs_psk && cluster.psk_file.is_none() {
        c.add(
            "cluster.psk_file",
            "missing: nodes use the tcp or verbs transport, which require authentication (expected the path of a pre-shared key file made by `rdmalb psk --out FILE`)",
        );
    }

    let balance = match raw_global.balance.as_deref() {
        None => Balance::RoundRobin,
        Some(b) => Balance::parse(b).unwrap_or_else(|| {
            c.add(
                "global.balance",
                format!(
                    "`{b}` is not a balancing algorithm (expected {})",
                    Balance::ACCEPTED
                ),
            );
            Balance::RoundRobin
        }),
    };
    let default_site = raw_global.default_site.as_deref().and_then(|s| {
        let idx = site_index.get(s).copied();
        if idx.is_none() {
            c.add(
                "global.default_site",
                format!("no site named `{s}` (expected the name of a [[site]])"),
            );
        }
        idx
    });
    let forwarded_for = match raw_global.forwarded_for.as_deref() {
        None => ForwardedFor::Replace,
        Some(f) => ForwardedFor::parse(f).unwrap_or_else(|| {
            c.add(
                "global.forwarded_for",
                format!(
                    "`{f}` is not a choice (expected {})",
                    ForwardedFor::ACCEPTED
                ),
            );
            ForwardedFor::Replace
        }),
    };
    let trusted_proxies = networks(
        &mut c,
        "global.trusted_proxies",
        raw_global.trusted_proxies.as_deref(),
    );
    if forwarded_for == ForwardedFor::Append && !trusted_proxies.is_empty() {
        c.add(
            "global.trusted_proxies",
            "has no effect with global.forwarded_for = \"append\", which keeps every client's X-Forwarded-For (expected no trusted_proxies, or forwarded_for = \"replace\")",
        );
    }
    let retry_on = match &raw_global.retry_on {
        None => RetryOn::DEFAULT,
        Some(list) => {
            let mut on = RetryOn {
                conn_failure: false,
                empty_response: false,
            };
            for (i, k) in list.iter().enumerate() {
                if !on.set(k) {
                    c.add(
                        format!("global.retry_on[{i}]"),
                        format!(
                            "`{k}` is not a retry condition (expected {}; [] retries nothing)",
                            RetryOn::ACCEPTED
                        ),
                    );
                }
            }
            on
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let global = Global {
        proxy_id: c.int("global.proxy_id", raw_global.proxy_id, 1, 1, 65535) as u16,
        balance,
        default_site,
        workers: c.int("global.workers", raw_global.workers, cpus as u64, 1, 1024) as usize,
        shutdown_grace: c.duration(
            "global.shutdown_grace",
            raw_global.shutdown_grace.as_deref(),
            Duration::from_secs(10),
        ),
        access_log: match raw_global.access_log.as_deref() {
            None | Some("stdout") => AccessLog::Stdout,
            Some("off") => AccessLog::Off,
            Some("") => {
                c.add(
                    "global.access_log",
                    "empty (expected \"off\", \"stdout\" or a file path)",
                );
                AccessLog::Off
            }
            Some(p) => AccessLog::File(c.path(p)),
        },
        via_name: raw_global.via_name.unwrap_or_else(|| "rdmalb".to_string()),
        forwarded_for,
        trusted_proxies,
        retries: c.int("global.retries", raw_global.retries, 3, 0, MAX_RETRIES) as u8,
        retry_on,
        compression_max_cpu: c.int(
            "global.compression_max_cpu",
            raw_global.compression_max_cpu,
            90,
            1,
            100,
        ) as u32,
    };
    let reconfig = super::reconfig::validate(&mut c, raw_reconfig, &global, &cluster, &nodes);
    let qos = super::qos::validate(&mut c, raw_qos);
    let stats_sockets = super::stats_socket::validate(&mut c, raw_stats_sockets);
    let listener_names: Vec<String> = listeners.iter().map(|l| l.name.clone()).collect();
    let rules =
        crate::rules::config::validate(&mut c, &table, &site_index, sites.len(), &listener_names);

    c.finish(Config {
        source: file.to_path_buf(),
        global,
        timeouts,
        limits,
        health,
        admin,
        cluster,
        routing,
        listeners,
        sites,
        nodes,
        reconfig,
        qos,
        stats_sockets,
        rules: std::sync::Arc::new(rules),
        acme,
    })
}

/// A list of IP networks (`key[i]` named in each problem).
fn networks(c: &mut ConfigCheck, key: &str, list: Option<&[String]>) -> Vec<IpNetwork> {
    let mut out = Vec::new();
    for (i, text) in list.unwrap_or_default().iter().enumerate() {
        match IpNetwork::parse(text.trim()) {
            Ok(net) => out.push(net),
            Err(why) => c.add(
                format!("{key}[{i}]"),
                format!("{why} (expected an IPv4 or IPv6 network such as \"10.0.0.0/8\" or \"::1/128\", or one address)"),
            ),
        }
    }
    out
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
}

fn http_path(c: &mut ConfigCheck, key: &str, v: Option<&str>, default: &str) -> String {
    match v {
        None => default.to_string(),
        Some(p) if p.starts_with('/') && !p.contains(char::is_whitespace) => p.to_string(),
        Some(p) => {
            c.add(
                key,
                format!("`{p}` is not an HTTP path (expected e.g. \"/health\")"),
            );
            default.to_string()
        }
    }
}

fn pattern_text(p: &HostPattern) -> String {
    match p {
        HostPattern::Exact(h) => format!("`{h}`"),
        HostPattern::Wildcard(s) => format!("`*{s}`"),
    }
}

/// Parses `www.example.com`, `*.example.com` or `*` (any host), lower-cased.
pub fn host_pattern(h: &str) -> Result<HostPattern, String> {
    let lower = h.trim().to_ascii_lowercase();
    if lower == "*" {
        // Any host, after every exact name and wildcard (front/route.rs).
        return Ok(HostPattern::Wildcard(String::new()));
    }
    let (wild, name) = match lower.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        });
    if !ok {
        return Err(format!(
            "`{h}` is not a host name (expected e.g. \"www.example.com\", \"*.example.com\" or \"*\" for any host; no port, no scheme)"
        ));
    }
    Ok(if wild {
        HostPattern::Wildcard(format!(".{name}"))
    } else {
        HostPattern::Exact(name.to_string())
    })
}

fn weights(c: &mut ConfigCheck, key: &str, w: &RawWeights, base: LoadWeights) -> LoadWeights {
    let mut get = |name: &str, v: Option<f64>, dflt: f64| match v {
        None => dflt,
        Some(x) if x.is_finite() && x >= 0.0 => x,
        Some(x) => {
            c.add(
                format!("{key}.{name}"),
                format!("{x} is not a weight (expected a number >= 0)"),
            );
            dflt
        }
    };
    let out = LoadWeights {
        cpu: get("cpu", w.cpu, base.cpu),
        run_queue: get("run_queue", w.run_queue, base.run_queue),
        memory: get("memory", w.memory, base.memory),
        network: get("network", w.network, base.network),
        connections: get("connections", w.connections, base.connections),
        irq: get("irq", w.irq, base.irq),
        app: get("app", w.app, base.app),
        inflight: get("inflight", w.inflight, base.inflight),
    };
    routing::weights_not_all_zero(c, key, &out);
    out
}

mod endpoints;
mod limits;
use endpoints::{node_window, tls};

mod routing;

#[cfg(test)]
mod tests;

/// `[[node]] agent_port`, `agent_interval`, `agent_address`.
fn node_agent(
    c: &mut ConfigCheck,
    key: &str,
    n: &RawNode,
    address: Option<SocketAddr>,
) -> Option<AgentCheck> {
    let Some(port) = n.agent_port else {
        for (set, name) in [
            (n.agent_interval.is_some(), "agent_interval"),
            (n.agent_address.is_some(), "agent_address"),
        ] {
            if set {
                c.add(
                    format!("{key}.{name}"),
                    "is set but agent_port is not (the agent-check needs a port)",
                );
            }
        }
        return None;
    };
    let port = c.int(&format!("{key}.agent_port"), Some(port), 1, 1, 65535) as u16;
    let interval = c.duration_within(
        &format!("{key}.agent_interval"),
        n.agent_interval.as_deref(),
        Duration::from_secs(2),
        Duration::from_millis(100),
        Duration::from_secs(3600),
    );
    let ip = match n.agent_address.as_deref() {
        None => address.map(|a| a.ip()),
        Some(text) => match text.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                c.add(
                    format!("{key}.agent_address"),
                    format!("`{text}` is not an IP address (the port is agent_port)"),
                );
                None
            }
        },
    };
    ip.map(|ip| AgentCheck {
        address: SocketAddr::new(ip, port),
        interval,
    })
}
