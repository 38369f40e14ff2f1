//! Raw → typed validation, one validator per section: [`global`],
//! [`listeners`], [`sites`], [`nodes`], `health` and `admin` here,
//! [`routing`], [`limits`] (timeouts and limits), the node windows
//! ([`endpoints`], `nodes::windows_keyed`), `[reconfig]` with its own window
//! (`config::reconfig`), `[qos]` (`config::qos`), `[acme]`, the stats
//! sockets and the rules' sections. Every problem is collected with its key
//! path and what would be accepted; nothing stops at the first error. The
//! sections are read in a fixed order so the problems come out in the
//! order of the file's sections.
//!
//! Which setting wins: a site's own `weights`, `health_path` and `balance`
//! over the global ones (`[weights]`, `[health] path`, `global.balance`),
//! over the defaults.

use std::path::Path;
use std::time::Duration;

use super::raw::*;
use super::types::*;
use super::ConfigErrors;
use rdmalb_base::name::is_valid as valid_name;
use rdmalb_base::problems::ConfigCheck;

mod endpoints;
mod global;
mod limits;
mod listeners;
mod nodes;
mod routing;
mod sites;

pub(super) use endpoints::{window_endpoint, WindowAt};

/// The sections as written, each read on its own so that problems in
/// several are all reported.
struct RawSections {
    global: RawGlobal,
    timeouts: RawTimeouts,
    limits: RawLimits,
    health: RawHealth,
    admin: Option<RawAdmin>,
    cluster: RawCluster,
    weights: RawWeights,
    routing: RawRouting,
    listeners: Vec<Option<RawListener>>,
    sites: Vec<Option<RawSite>>,
    nodes: Vec<Option<RawNode>>,
    reconfig: RawReconfig,
    qos: RawQos,
    stats_sockets: Vec<Option<super::stats_socket::RawStatsSocket>>,
}

impl RawSections {
    fn read(c: &mut ConfigCheck, table: &toml::Table) -> RawSections {
        RawSections {
            global: c.section(table, "global"),
            timeouts: c.section(table, "timeouts"),
            limits: c.section(table, "limits"),
            health: c.section(table, "health"),
            admin: table
                .contains_key("admin")
                .then(|| c.section(table, "admin")),
            cluster: c.section(table, "cluster"),
            weights: c.section(table, "weights"),
            routing: c.section(table, "routing"),
            listeners: c.entries(table, "listener"),
            sites: c.entries(table, "site"),
            nodes: c.entries(table, "node"),
            reconfig: c.section(table, "reconfig"),
            qos: c.section(table, "qos"),
            stats_sockets: c.entries(table, "stats_socket"),
        }
    }
}

/// Validates config text. `file` is used in messages and to resolve relative paths.
pub fn validate(text: &str, file: &Path) -> Result<Config, ConfigErrors> {
    let table = toml_table(text, file)?;
    let mut c = ConfigCheck::new(file);
    unknown_sections(&mut c, &table);
    let raw = RawSections::read(&mut c, &table);
    let acme = table.contains_key("acme").then(|| {
        let raw = c.section(&table, "acme");
        super::acme::validate(&mut c, raw)
    });

    let timeouts = limits::timeouts(&mut c, &raw.timeouts);
    let limits = limits::limits(&mut c, &raw.limits);
    let health = health(&mut c, &raw.health);
    let admin = raw.admin.and_then(|a| admin(&mut c, a));
    let cluster = Cluster {
        psk_file: raw.cluster.psk_file.as_deref().map(|p| c.path(p)),
    };
    let default_weights = weights(&mut c, "weights", &raw.weights, LoadWeights::default());
    let routing = routing::routing(&mut c, &raw.routing);
    let listeners = listeners::listeners(&mut c, &table, raw.listeners, acme.is_some());
    let defaults = sites::Defaults {
        weights: default_weights,
        health_path: &health.path,
        acme: acme.is_some(),
    };
    let (sites, site_index) = sites::sites(&mut c, &table, raw.sites, &defaults);
    listeners::monitored_sites(&mut c, &listeners, &site_index);
    let nodes = nodes::nodes(&mut c, raw.nodes, &sites, &site_index);
    nodes::windows_keyed(&mut c, &nodes, &cluster);
    let global = global::global(&mut c, raw.global, &site_index);
    let reconfig = super::reconfig::validate(&mut c, raw.reconfig, &global, &cluster, &nodes);
    let qos = super::qos::validate(&mut c, raw.qos);
    let stats_sockets = super::stats_socket::validate(&mut c, raw.stats_sockets);
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

/// The file as a TOML table, or its syntax error with the line.
fn toml_table(text: &str, file: &Path) -> Result<toml::Table, ConfigErrors> {
    text.parse().map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}")
            })
            .unwrap_or_default();
        ConfigErrors::single(
            file,
            &at,
            format!(
                "TOML syntax error: {}",
                e.message().trim().replace('\n', " ")
            ),
        )
    })
}

/// Every top-level key that is no section of ours or of the rules.
fn unknown_sections(c: &mut ConfigCheck, table: &toml::Table) {
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
}

/// `[health]`: the active checks' defaults (a site's `health_path` wins).
fn health(c: &mut ConfigCheck, raw: &RawHealth) -> HealthCheck {
    HealthCheck {
        path: http_path(c, "health.path", raw.path.as_deref(), "/"),
        interval: c.duration(
            "health.interval",
            raw.interval.as_deref(),
            Duration::from_secs(2),
        ),
        timeout: c.duration(
            "health.timeout",
            raw.timeout.as_deref(),
            Duration::from_secs(1),
        ),
        rise: c.int("health.rise", raw.rise, 2, 1, 100) as u32,
        fall: c.int("health.fall", raw.fall, 3, 1, 100) as u32,
        passive_failures: c.int("health.passive_failures", raw.passive_failures, 3, 0, 1000) as u32,
        expect_status: raw
            .expect_status
            .map(|_| c.int("health.expect_status", raw.expect_status, 200, 100, 599) as u16),
    }
}

/// `[admin]`: the admin listener, refused on a non-loopback address
/// without a token unless that is said to be meant.
fn admin(c: &mut ConfigCheck, a: RawAdmin) -> Option<Admin> {
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
}

/// A list of IP networks (`key[i]` named in each problem).
pub(super) fn networks(c: &mut ConfigCheck, key: &str, list: Option<&[String]>) -> Vec<IpNetwork> {
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

pub(super) fn http_path(c: &mut ConfigCheck, key: &str, v: Option<&str>, default: &str) -> String {
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

pub(super) fn pattern_text(p: &HostPattern) -> String {
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

pub(super) fn weights(
    c: &mut ConfigCheck,
    key: &str,
    w: &RawWeights,
    base: LoadWeights,
) -> LoadWeights {
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
    let b = base.window;
    let out = LoadWeights {
        window: LoadIndices {
            cpu: get("cpu", w.cpu, b.cpu),
            run_queue: get("run_queue", w.run_queue, b.run_queue),
            memory: get("memory", w.memory, b.memory),
            network: get("network", w.network, b.network),
            connections: get("connections", w.connections, b.connections),
            irq: get("irq", w.irq, b.irq),
            app: get("app", w.app, b.app),
        },
        inflight: get("inflight", w.inflight, base.inflight),
    };
    routing::weights_not_all_zero(c, key, &out);
    out
}

#[cfg(test)]
mod tests;
