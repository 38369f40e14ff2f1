//! `rdmalb-testbed testsrv` configuration: the node file and the site file.
//!
//! Two files on purpose. The **node file** holds what never changes while
//! the node runs (listen address, slots, queue, service-time model, sidecar
//! push address). The **site file** is the tiny part a sidecar's role
//! template renders when the node is moved to another site
//! (`site = "shop"`, optional `hosts = [...]`); SIGHUP re-reads only it,
//! exactly as a real app's vhost file is rewritten and reloaded.
//!
//! Same three stages as the proxy config: raw serde structs with
//! `deny_unknown_fields` → validation collecting every problem (file, key,
//! what is accepted) into [`ConfigErrors`] → immutable [`NodeConfig`] /
//! [`Site`]. Relative paths are anchored at the node file's directory.
//! Defaults are the `DEFAULT_*` constants and `conf/testsrv.toml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use rdmalb_base::duration;
use rdmalb_base::problems::ConfigCheck;
pub use rdmalb_base::problems::{ConfigErrors, Problem};
use rdmalb_sidecar::config::PushListen;

/// Default worker slots.
pub const DEFAULT_SLOTS: u32 = 4;
/// Default queue length (requests waiting for a slot).
pub const DEFAULT_QUEUE: u32 = 16;
/// Default base service time of a static request.
pub const DEFAULT_STATIC_BASE: Duration = Duration::from_millis(1);
/// Default transfer rate of the static model, MiB/s.
pub const DEFAULT_STATIC_MIB_PER_S: f64 = 100.0;
/// Default service time of a dynamic request without `?cost=`.
pub const DEFAULT_DYNAMIC_COST: Duration = Duration::from_millis(10);
/// Largest accepted `?cost=` (default).
pub const DEFAULT_MAX_COST: Duration = Duration::from_secs(1);
/// Default body size of a dynamic response without `?size=`.
pub const DEFAULT_DYNAMIC_SIZE: u64 = 1024;
/// Default fraction of a dynamic service time spent spinning on a CPU.
pub const DEFAULT_CPU_FRACTION: f64 = 0.05;
/// Default largest response body.
pub const DEFAULT_MAX_BODY: u64 = 16 << 20;
/// Default coalescing interval of load pushes to the sidecar.
pub const DEFAULT_PUBLISH_INTERVAL: Duration = Duration::from_millis(1);
/// Default sampling interval of the node's timeline (`timeline_file`).
pub const DEFAULT_TIMELINE_EVERY: Duration = Duration::from_millis(5);
/// Default time in-flight requests get to finish on SIGTERM.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A validated node file. Immutable.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// Node name, sent in `X-Served-By`.
    pub name: String,
    pub listen: SocketAddr,
    /// Site file (absolute after validation).
    pub site_file: PathBuf,
    /// Written at start-up with our pid, removed at exit.
    pub pid_file: Option<PathBuf>,
    /// The sidecar's push collector, when the node has a sidecar.
    pub push: Option<PushListen>,
    pub publish_interval: Duration,
    pub model: Model,
    pub shutdown_grace: Duration,
    /// A co-tenant that comes and goes (`antagonist_*`); `None` = never.
    pub antagonist: Option<Antagonist>,
    /// Where to write the node's state every `timeline_every` (busy,
    /// queue, co-tenant slots, completions, 503s; CSV), for diagnosis;
    /// `None` = not written.
    pub timeline_file: Option<PathBuf>,
    pub timeline_every: Duration,
}

/// A co-tenant on the node (a CPU hog, a cron job): while on, it holds
/// `slots` of the node's worker slots, which the load the node pushes to
/// its sidecar shows at once as busy (as a hog shows at once in a node's
/// CPU index), while requests see it only as slower service and a growing
/// queue. On and off periods are exponential with the given means, drawn
/// from `seed` (the cluster gives each node its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Antagonist {
    pub slots: u32,
    pub on: Duration,
    pub off: Duration,
    pub seed: u64,
}

/// The capacity model (docs/testbed.md, "Capacity model").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// W: requests served at once.
    pub slots: u32,
    /// Q: requests waiting for a slot; beyond W + Q → 503.
    pub queue: u32,
    pub static_base: Duration,
    /// Bytes per second of the static transfer model.
    pub static_bytes_per_s: f64,
    pub dynamic_cost: Duration,
    pub max_cost: Duration,
    pub dynamic_size: u64,
    /// Share of a dynamic service time burnt on a CPU; the rest sleeps.
    pub cpu_fraction: f64,
    pub max_body: u64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            slots: DEFAULT_SLOTS,
            queue: DEFAULT_QUEUE,
            static_base: DEFAULT_STATIC_BASE,
            static_bytes_per_s: DEFAULT_STATIC_MIB_PER_S * 1048576.0,
            dynamic_cost: DEFAULT_DYNAMIC_COST,
            max_cost: DEFAULT_MAX_COST,
            dynamic_size: DEFAULT_DYNAMIC_SIZE,
            cpu_fraction: DEFAULT_CPU_FRACTION,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

impl Model {
    /// Service time of a static response of `size` bytes.
    pub fn static_time(&self, size: u64) -> Duration {
        self.static_base + Duration::from_secs_f64(size as f64 / self.static_bytes_per_s)
    }
}

/// The site a node serves: its name and the host names that belong to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub name: String,
    /// Lower-case host names, the site name first (it always matches).
    pub hosts: Vec<String>,
}

impl Site {
    /// Whether a Host header value (any case, port allowed) belongs here.
    pub fn matches(&self, host: &str) -> bool {
        let host = strip_port(host);
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }
}

/// `host:port`, `[v6]:port` or a bare host → the host part.
pub fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Option<String>,
    listen: Option<String>,
    site_file: Option<String>,
    pid_file: Option<String>,
    push: Option<String>,
    publish_interval: Option<String>,
    shutdown_grace: Option<String>,
    slots: Option<i64>,
    queue: Option<i64>,
    static_base: Option<String>,
    static_mib_per_s: Option<f64>,
    dynamic_cost: Option<String>,
    max_cost: Option<String>,
    dynamic_size: Option<String>,
    cpu_fraction: Option<f64>,
    max_body: Option<String>,
    antagonist_slots: Option<i64>,
    antagonist_on: Option<String>,
    antagonist_off: Option<String>,
    antagonist_seed: Option<i64>,
    timeline_file: Option<String>,
    timeline_every: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    site: Option<String>,
    hosts: Option<Vec<String>>,
}

/// A byte size (see [`parse_size`]); `default` when absent.
fn size(r: &mut ConfigCheck, key: &str, text: Option<&str>, default: u64) -> u64 {
    let Some(text) = text else { return default };
    parse_size(text).unwrap_or_else(|e| {
        r.add(key, e);
        default
    })
}

/// A file named in the config, relative to the config's folder; an empty
/// path is a problem.
fn file_path(r: &mut ConfigCheck, key: &str, text: Option<&str>) -> Option<PathBuf> {
    match text {
        Some("") => {
            r.add(key, "empty path");
            None
        }
        Some(t) => Some(r.path(t)),
        None => None,
    }
}

/// Parses a byte size: `512`, `1k`, `4K`, `2KiB`, `1m`, `1MB` (k/m/g are
/// powers of 1024, as the seeds' "1 KB" files are 1024 bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (expected e.g. 512, 1k, 4k, 1m)"))?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        u => {
            return Err(format!(
                "`{text}`: unknown unit `{u}` (expected none, k, m or g)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is out of range"))
}

/// Formats a size the way [`parse_size`] reads it (`1k`, `64k`, `1m`, `300`).
pub fn format_size(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}m", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}k", n >> 10)
    } else {
        n.to_string()
    }
}

fn deserialize<T: for<'de> Deserialize<'de>>(text: &str, path: &Path) -> Result<T, ConfigErrors> {
    toml::from_str(text).map_err(|e| {
        let key = e.span().map(|s| {
            // Name the key the parser stopped at, when the span covers one.
            text.get(s)
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        });
        let msg = e.message().trim().to_string();
        match key {
            Some(k) if !k.is_empty() && !msg.contains(&k) => ConfigErrors::single(path, &k, msg),
            _ => ConfigErrors::single(path, "", msg),
        }
    })
}

/// Reads and validates a node file (not the site file it names).
pub fn load_node(path: &Path) -> Result<NodeConfig, ConfigErrors> {
    parse_node(&rdmalb_base::problems::read(path)?, path)
}

/// Validates node-file text; `path` names it in messages and anchors
/// relative paths.
pub fn parse_node(text: &str, path: &Path) -> Result<NodeConfig, ConfigErrors> {
    let raw: RawNode = deserialize(text, path)?;
    let mut r = ConfigCheck::new(path);
    let name = node_name(&mut r, raw.name.as_deref());
    let listen = listen_address(&mut r, raw.listen.as_deref());
    let site_file = file_path(&mut r, "site_file", raw.site_file.as_deref());
    if raw.site_file.is_none() {
        r.add("site_file", "missing (expected the path of the site file, e.g. \"n1.site.toml\", holding site = \"...\")");
    }
    let pid_file = file_path(&mut r, "pid_file", raw.pid_file.as_deref());
    let timeline_file = file_path(&mut r, "timeline_file", raw.timeline_file.as_deref());
    let push = push_listen(&mut r, raw.push.as_deref());
    let ms = Duration::from_millis;
    let publish_interval = r.duration_within(
        "publish_interval",
        raw.publish_interval.as_deref(),
        DEFAULT_PUBLISH_INTERVAL,
        ms(1),
        ms(10_000),
    );
    let shutdown_grace = r.duration_within(
        "shutdown_grace",
        raw.shutdown_grace.as_deref(),
        DEFAULT_SHUTDOWN_GRACE,
        Duration::ZERO,
        ms(600_000),
    );
    let timeline_every = r.duration_within(
        "timeline_every",
        raw.timeline_every.as_deref(),
        DEFAULT_TIMELINE_EVERY,
        ms(1),
        ms(10_000),
    );
    let model = model(&mut r, &raw);
    let antagonist = antagonist(&mut r, &raw, model.slots);
    let (Some(listen), Some(site_file)) = (listen, site_file) else {
        return Err(r.into_errors());
    };
    r.finish(NodeConfig {
        file: path.to_path_buf(),
        name,
        listen,
        site_file,
        pid_file,
        push,
        publish_interval,
        model,
        shutdown_grace,
        antagonist,
        timeline_file,
        timeline_every,
    })
}

/// `name`: the node's, as the proxy's `[[node]] name`.
fn node_name(r: &mut ConfigCheck, name: Option<&str>) -> String {
    match name {
        None => {
            r.add(
                "name",
                "missing (expected the node's name, e.g. \"n1\", as in the proxy's [[node]] name)",
            );
            String::new()
        }
        Some(n) if !valid_name(n) => {
            r.add(
                "name",
                format!("`{n}` is not a valid name (accepted: 1-64 of a-z A-Z 0-9 . _ -)"),
            );
            String::new()
        }
        Some(n) => n.to_string(),
    }
}

/// `listen`: the address testsrv serves on.
fn listen_address(r: &mut ConfigCheck, listen: Option<&str>) -> Option<SocketAddr> {
    match listen {
        None => {
            r.add(
                "listen",
                "missing (expected an address such as \"127.0.0.1:8081\")",
            );
            None
        }
        Some(t) => match t.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                r.add(
                    "listen",
                    format!("`{t}` is not an IP:port address (e.g. \"127.0.0.1:8081\")"),
                );
                None
            }
        },
    }
}

/// `push`: where the node pushes its load, a loopback address or a unix
/// socket path.
fn push_listen(r: &mut ConfigCheck, push: Option<&str>) -> Option<PushListen> {
    match push {
        None => None,
        Some(t) if t.starts_with('/') => Some(PushListen::Unix(PathBuf::from(t))),
        Some(t) => match t.parse::<SocketAddr>() {
            Ok(a) if a.ip().is_loopback() => Some(PushListen::Tcp(a)),
            Ok(a) => {
                r.add("push", format!("{a} is not a loopback address (the push protocol is unauthenticated; accepted: 127.0.0.1:PORT, [::1]:PORT or a unix socket path)"));
                None
            }
            Err(_) => {
                r.add("push", format!("`{t}` is neither an address nor an absolute unix socket path (e.g. \"127.0.0.1:7301\")"));
                None
            }
        },
    }
}

/// The capacity model: slots, queue and the costs of static and dynamic
/// requests.
fn model(r: &mut ConfigCheck, raw: &RawNode) -> Model {
    let ms = Duration::from_millis;
    let d = Model::default();
    let slots = r.int("slots", raw.slots, u64::from(d.slots), 1, 100_000) as u32;
    let queue = r.int("queue", raw.queue, u64::from(d.queue), 0, 1_000_000) as u32;
    let static_base = r.duration_within(
        "static_base",
        raw.static_base.as_deref(),
        d.static_base,
        Duration::ZERO,
        ms(60_000),
    );
    let mib = match raw.static_mib_per_s {
        None => DEFAULT_STATIC_MIB_PER_S,
        Some(v) if v.is_finite() && v > 0.0 && v <= 1e6 => v,
        Some(v) => {
            r.add(
                "static_mib_per_s",
                format!("{v} is out of range (accepted: more than 0, at most 1000000)"),
            );
            DEFAULT_STATIC_MIB_PER_S
        }
    };
    let max_cost = r.duration_within(
        "max_cost",
        raw.max_cost.as_deref(),
        d.max_cost,
        ms(1),
        ms(600_000),
    );
    let dynamic_cost = r.duration_within(
        "dynamic_cost",
        raw.dynamic_cost.as_deref(),
        d.dynamic_cost,
        Duration::ZERO,
        ms(600_000),
    );
    if dynamic_cost > max_cost {
        r.add(
            "dynamic_cost",
            format!(
                "{} is above max_cost ({})",
                duration::format(dynamic_cost),
                duration::format(max_cost)
            ),
        );
    }
    let cpu_fraction = match raw.cpu_fraction {
        None => d.cpu_fraction,
        Some(v) if (0.0..=1.0).contains(&v) => v,
        Some(v) => {
            r.add(
                "cpu_fraction",
                format!("{v} is out of range (accepted: 0.0 to 1.0)"),
            );
            d.cpu_fraction
        }
    };
    let max_body = size(r, "max_body", raw.max_body.as_deref(), d.max_body);
    if max_body > 1 << 30 {
        r.add("max_body", "is above 1g (the largest accepted)");
    }
    let dynamic_size = size(
        r,
        "dynamic_size",
        raw.dynamic_size.as_deref(),
        d.dynamic_size,
    );
    if dynamic_size > max_body {
        r.add(
            "dynamic_size",
            format!(
                "{} is above max_body ({})",
                format_size(dynamic_size),
                format_size(max_body)
            ),
        );
    }
    Model {
        slots,
        queue,
        static_base,
        static_bytes_per_s: mib * 1048576.0,
        dynamic_cost,
        max_cost,
        dynamic_size,
        cpu_fraction,
        max_body,
    }
}

/// The antagonist (`antagonist_slots` and its on and off times), which
/// takes slots of the node's `slots` in bursts; its keys without
/// `antagonist_slots` are reported.
fn antagonist(r: &mut ConfigCheck, raw: &RawNode, slots: u32) -> Option<Antagonist> {
    let ms = Duration::from_millis;
    match raw.antagonist_slots {
        None | Some(0) => {
            for (set, key) in [
                (raw.antagonist_on.is_some(), "antagonist_on"),
                (raw.antagonist_off.is_some(), "antagonist_off"),
                (raw.antagonist_seed.is_some(), "antagonist_seed"),
            ] {
                if set {
                    r.add(
                        key,
                        "is set but antagonist_slots is not (how many slots the antagonist takes)",
                    );
                }
            }
            None
        }
        Some(n) => {
            let slots_taken = r.int("antagonist_slots", Some(n), 1, 1, u64::from(slots)) as u32;
            let on = r.duration_within(
                "antagonist_on",
                raw.antagonist_on.as_deref(),
                ms(2000),
                ms(10),
                ms(3_600_000),
            );
            let off = r.duration_within(
                "antagonist_off",
                raw.antagonist_off.as_deref(),
                ms(4000),
                ms(10),
                ms(3_600_000),
            );
            let seed = r.int("antagonist_seed", raw.antagonist_seed, 1, 0, u64::MAX >> 1);
            Some(Antagonist {
                slots: slots_taken,
                on,
                off,
                seed,
            })
        }
    }
}

use rdmalb_base::name::is_valid as valid_name;

fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b))
}

/// Reads and validates a site file.
pub fn load_site(path: &Path) -> Result<Site, ConfigErrors> {
    parse_site(&rdmalb_base::problems::read(path)?, path)
}

/// Validates site-file text.
pub fn parse_site(text: &str, path: &Path) -> Result<Site, ConfigErrors> {
    let raw: RawSite = deserialize(text, path)?;
    let mut r = ConfigCheck::new(path);
    let name = match raw.site.as_deref() {
        None => {
            r.add(
                "site",
                "missing (expected the site's name, e.g. site = \"shop\")",
            );
            String::new()
        }
        Some(s) if !valid_name(s) => {
            r.add(
                "site",
                format!("`{s}` is not a valid site name (accepted: 1-64 of a-z A-Z 0-9 . _ -)"),
            );
            String::new()
        }
        Some(s) => s.to_string(),
    };
    let mut hosts = vec![name.to_ascii_lowercase()];
    for (i, h) in raw.hosts.unwrap_or_default().iter().enumerate() {
        let h = h.to_ascii_lowercase();
        if !valid_host(&h) {
            r.add(
                format!("hosts[{i}]"),
                format!(
                    "`{h}` is not a host name (accepted: letters, digits, '.', '-', '_'; no port)"
                ),
            );
        } else if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    r.finish(Site { name, hosts })
}

#[cfg(test)]
mod tests;
