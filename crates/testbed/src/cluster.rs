//! `rdmalb-testbed cluster`: an emulated cluster on loopback from a small spec.
//!
//! The spec (TOML, `deny_unknown_fields`, every problem reported with its
//! key) names the sites, the initial node split (`"3:3:2"`: 3 nodes for
//! the first site, 3 for the second, 2 for the third — seed 001 §6), the
//! number of proxies, the balance mode, how the proxies read the node
//! windows (`transport`: shm, or the sidecars' tcp responders with a
//! per-run PSK), the trace and the load. Three
//! pass-through tables let later experiments set anything the components
//! accept without touching this code: `[node]` (testsrv keys for every
//! node), `[sidecar]` (merged into every sidecar config) and `[proxy]`
//! (deep-merged into every proxy config, e.g. `[proxy.global] balance =
//! "weighted-least-load"` or a `[proxy.reconfig]` section); the generated
//! files are validated by the components themselves, so a bad key is
//! reported by the component that owns it.
//!
//! Reconfiguration (seed 001 §4.3; docs/testbed.md): `mode = "rigid" |
//! "reconfigure"` sets every proxy's `[reconfig] mode`; every sidecar gets
//! a `[role]` section that renders its testsrv site file and reloads the
//! node with SIGHUP, so a proxy's claim really moves the node. `idle = N`
//! adds N nodes that start in the idle pool; `overprovision = true` is the
//! rigid worst-case baseline: every site gets as many nodes as it could
//! hold under reconfiguration (all nodes but one per other site).
//! `[guarantee]` names per-site throughput guarantees for the QoS-meeting
//! percentages in the outputs ([`super::qos`]); they and `[priority]` are
//! also written into the proxies' `[[site]]` tables for the QoS policy.
//! `[sticky]` gives every site a persistence cookie and the load client
//! that many cookie-keeping clients ([`sticky`]).
//!
//! [`run`] ([`procs`]) starts K `rdmalb sidecar` (shm window, push
//! collector) + K `rdmalb-testbed testsrv` + P `rdmalb proxy` processes, replays
//! the trace through the proxies with [`super::load`], writes the outputs
//! ([`write_outputs`]) and tears everything down on every exit path.

pub(crate) mod gen;
pub(crate) mod procs;
pub mod sticky;

pub use gen::{NodeEnd, Outcome, QosOut};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use procs::run;

use super::load::Mode;
use super::plot;
use super::report::Report;
use super::trace::{Generator, TraceError};
use rdmalb_base::duration;
use rdmalb_base::problems::ConfigCheck;
pub use rdmalb_base::problems::{ConfigErrors, Problem};

/// Most nodes a cluster may run (over-provisioning included).
pub const MAX_NODES: u32 = 128;

/// What the proxies' reconfiguration agents do (`mode` in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconfigMode {
    /// Nodes never move (the agent only follows role words).
    Rigid,
    /// The agents claim idle nodes for hot sites.
    Reconfigure,
}

impl ReconfigMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReconfigMode::Rigid => "rigid",
            ReconfigMode::Reconfigure => "reconfigure",
        }
    }
}

/// How the proxies read the nodes' load windows (`transport` in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowTransport {
    /// One-sided: the proxies map each sidecar's shm window file.
    Shm,
    /// Two-sided: each sidecar also serves its window on a loopback tcp
    /// responder (PSK handshake) and the proxies read it there; the shm
    /// window stays for the cluster's own end-of-run role check.
    Tcp,
}

impl WindowTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowTransport::Shm => "shm",
            WindowTransport::Tcp => "tcp",
        }
    }
}

/// Why a cluster run failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster: {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster: generated {component} config is invalid (check the [{table}] pass-through keys):\n{errors}")]
    Generated {
        component: String,
        table: String,
        errors: ConfigErrors,
    },
    #[error("cluster: {name} exited during start-up ({status}); last log lines:\n{log}")]
    EarlyExit {
        name: String,
        status: String,
        log: String,
    },
    #[error("cluster: {0}")]
    NotReady(String),
    #[error("cluster: {0}")]
    Trace(#[from] TraceError),
    #[error("cluster: {0}")]
    Load(#[from] super::load::LoadError),
    #[error("cluster: {0}")]
    Plot(#[from] plot::PlotError),
    #[error("cluster: interrupted during start-up")]
    Interrupted,
}

/// A validated cluster spec.
#[derive(Debug, Clone)]
pub struct Spec {
    pub file: PathBuf,
    pub sites: Vec<String>,
    /// Nodes per site, in site order, as started (over-provisioning
    /// applied).
    pub split: Vec<u32>,
    /// Nodes that start in the idle pool (after the sites' nodes).
    pub idle: u32,
    pub reconfig: ReconfigMode,
    /// Whether `split` is the over-provisioned worst case.
    pub overprovision: bool,
    /// Per site (site order): its throughput guarantee in requests/s
    /// (also the proxies' `[[site]] guarantee`).
    pub guarantees: Vec<Option<f64>>,
    /// Per site (site order): the proxies' `[[site]] priority` (0..1000).
    pub priorities: Vec<Option<u32>>,
    pub proxies: u32,
    pub balance: String,
    /// How the proxies read the nodes' windows (default shm).
    pub transport: WindowTransport,
    pub duration: Duration,
    pub requests: Option<u64>,
    pub seed: u64,
    pub trace: TraceSource,
    pub node: toml::Table,
    /// Slots of each node, cycled over the nodes (`node_slots`; empty: the
    /// `[node]` table's, the same for every node).
    pub node_slots: Vec<u32>,
    pub sidecar: toml::Table,
    pub proxy: toml::Table,
    pub mode: Mode,
    pub interval: Duration,
    pub timeout: Duration,
    /// `[sticky]`: sticky sessions and cookie-keeping clients.
    pub sticky: Option<sticky::StickySpec>,
}

/// Where the requests come from.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceSource {
    File(PathBuf),
    /// Generated with `requests` (default 1,000,000) and `seed`.
    Generate(Generator),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    sites: Option<Vec<String>>,
    split: Option<String>,
    idle: Option<i64>,
    mode: Option<String>,
    overprovision: Option<bool>,
    guarantee: Option<toml::Table>,
    priority: Option<toml::Table>,
    proxies: Option<i64>,
    balance: Option<String>,
    transport: Option<String>,
    duration: Option<String>,
    requests: Option<i64>,
    seed: Option<i64>,
    trace_file: Option<String>,
    trace: Option<toml::Value>,
    node: Option<toml::Table>,
    node_slots: Option<Vec<i64>>,
    sidecar: Option<toml::Table>,
    proxy: Option<toml::Table>,
    load: Option<RawLoad>,
    sticky: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    connections: Option<i64>,
    rate: Option<f64>,
    max_inflight: Option<i64>,
    interval: Option<String>,
    timeout: Option<String>,
}

/// Reads and validates a cluster spec.
pub fn load_spec(path: &Path) -> Result<Spec, ConfigErrors> {
    parse_spec(&rdmalb_base::problems::read(path)?, path)
}

/// Validates spec text; relative paths are anchored at `path`'s directory.
pub fn parse_spec(text: &str, path: &Path) -> Result<Spec, ConfigErrors> {
    let raw: RawSpec = toml::from_str(text)
        .map_err(|e| ConfigErrors::single(path, "", e.message().trim().to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut check = ConfigCheck::new(path);
    let mut add = |key: &str, message: String| check.add(key, message);
    let (sites, split) = sites_and_split(raw.sites, raw.split, &mut add);
    let idle = in_range(&mut add, "idle", raw.idle, 0, 64).map_or(0, |n| n as u32);
    let reconfig = match raw.mode.as_deref() {
        None | Some("rigid") => ReconfigMode::Rigid,
        Some("reconfigure") => ReconfigMode::Reconfigure,
        Some(m) => {
            add(
                "mode",
                format!("`{m}` is not a mode (accepted: \"rigid\", \"reconfigure\")"),
            );
            ReconfigMode::Rigid
        }
    };
    let transport = match raw.transport.as_deref() {
        None | Some("shm") => WindowTransport::Shm,
        Some("tcp") => WindowTransport::Tcp,
        Some(t) => {
            add(
                "transport",
                format!("`{t}` is not a cluster transport (accepted: \"shm\", \"tcp\")"),
            );
            WindowTransport::Shm
        }
    };
    let overprovision = raw.overprovision.unwrap_or(false);
    let split = provisioned(split, idle, sites.len(), overprovision, reconfig, &mut add);
    let (guarantees, priorities) = site_targets(&sites, raw.guarantee, raw.priority, &mut add);
    let proxies = in_range(&mut add, "proxies", raw.proxies, 1, 16).map_or(1, |n| n as u32);
    let mut dur =
        |key: &str, t: Option<String>, default: Duration, min: Duration, max: Duration| match t {
            None => default,
            Some(t) => duration::parse_within(&t, min, max).unwrap_or_else(|e| {
                add(key, e);
                default
            }),
        };
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    let load = raw.load.unwrap_or_default();
    let run_for = dur("duration", raw.duration, s(10), ms(100), s(86_400));
    let interval = dur("load.interval", load.interval, s(1), ms(10), s(3600));
    let timeout = dur("load.timeout", load.timeout, s(10), ms(1), s(600));
    let requests = in_range(&mut add, "requests", raw.requests, 1, 100_000_000).map(|n| n as u64);
    let seed = match raw.seed {
        None => 1,
        Some(n) if n >= 0 => n as u64,
        Some(n) => {
            add("seed", format!("{n} is negative"));
            1
        }
    };
    let trace = trace_source(raw.trace_file, raw.trace, base, &mut add);
    let mode = load_mode(load.connections, load.rate, load.max_inflight, &mut add);
    let node_slots = node_slots(raw.node_slots.unwrap_or_default(), &mut add);
    let sticky = raw.sticky.and_then(|t| sticky::parse(t, &mut add));
    check.finish(Spec {
        file: path.to_path_buf(),
        sites,
        split,
        idle: if overprovision { 0 } else { idle },
        reconfig,
        overprovision,
        guarantees,
        priorities,
        proxies,
        balance: raw.balance.unwrap_or_else(|| "roundrobin".into()),
        transport,
        duration: run_for,
        requests,
        seed,
        trace,
        node: raw.node.unwrap_or_default(),
        node_slots,
        sidecar: raw.sidecar.unwrap_or_default(),
        proxy: raw.proxy.unwrap_or_default(),
        mode,
        interval,
        timeout,
        sticky,
    })
}

/// `v` when it is within `lo..=hi`; out of range it is reported (and
/// `None`), as is no value.
fn in_range(
    add: &mut impl FnMut(&str, String),
    key: &str,
    v: Option<i64>,
    lo: i64,
    hi: i64,
) -> Option<i64> {
    let n = v?;
    if (lo..=hi).contains(&n) {
        return Some(n);
    }
    add(key, format!("{n} is out of range (accepted: {lo} to {hi})"));
    None
}

/// The site names (1 to 64, each a name once) and the nodes each gets
/// (`split`, "3:3:2"; one each by default).
fn sites_and_split(
    sites: Option<Vec<String>>,
    split: Option<String>,
    add: &mut impl FnMut(&str, String),
) -> (Vec<String>, Vec<u32>) {
    let sites = sites.unwrap_or_default();
    if sites.is_empty() || sites.len() > 64 {
        add(
            "sites",
            "expected 1 to 64 site names, e.g. sites = [\"shop\", \"blog\", \"news\"]".into(),
        );
    }
    for (i, s) in sites.iter().enumerate() {
        if s.is_empty()
            || !s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
            || sites[..i].contains(s)
        {
            add(
                &format!("sites[{i}]"),
                format!("`{s}` is empty, repeated or has characters other than a-z A-Z 0-9 _ -"),
            );
        }
    }
    let split_text = split.unwrap_or_else(|| vec!["1"; sites.len().max(1)].join(":"));
    let split: Vec<u32> = split_text
        .split(':')
        .map(|n| n.trim().parse::<u32>().unwrap_or(0))
        .collect();
    if split.len() != sites.len() || split.iter().any(|&n| n == 0 || n > 64) {
        add(
            "split",
            format!(
                "`{split_text}` must give 1 to 64 nodes for each of the {} sites, e.g. \"3:3:2\"",
                sites.len()
            ),
        );
    }
    (sites, split)
}

/// The nodes each site starts with: `split`, or with `overprovision` what
/// each could hold under reconfiguration; at most [`MAX_NODES`] in all.
fn provisioned(
    split: Vec<u32>,
    idle: u32,
    sites: usize,
    overprovision: bool,
    reconfig: ReconfigMode,
    add: &mut impl FnMut(&str, String),
) -> Vec<u32> {
    if overprovision && reconfig == ReconfigMode::Reconfigure {
        add(
            "overprovision",
            "over-provisioning is the rigid worst-case baseline: use it with mode = \"rigid\""
                .into(),
        );
    }
    let mut split = split;
    let total: u32 = split.iter().sum::<u32>() + idle;
    if overprovision && sites > 0 {
        // Every site gets what it could hold under reconfiguration: all
        // nodes but one per other site (seed 001 §4.3: 6 of 8 for 3 sites,
        // 5 of 8 for 4 sites).
        let worst = total.saturating_sub(sites as u32 - 1).max(1);
        split = vec![worst; sites];
    }
    let started: u32 = split.iter().sum::<u32>() + if overprovision { 0 } else { idle };
    if started > MAX_NODES {
        add(
            "split",
            format!(
                "{started} nodes in all (with idle and over-provisioning) is more than {MAX_NODES}"
            ),
        );
    }
    split
}

/// Each site's `guarantee` (requests/s) and `priority`, where given.
fn site_targets(
    sites: &[String],
    guarantee: Option<toml::Table>,
    priority: Option<toml::Table>,
    add: &mut impl FnMut(&str, String),
) -> (Vec<Option<f64>>, Vec<Option<u32>>) {
    let guarantees = per_site(sites, guarantee, "guarantee", add, |v| {
        match v.as_float().or_else(|| v.as_integer().map(|n| n as f64)) {
            Some(g) if g > 0.0 && g <= 1e7 => Ok(g),
            _ => Err(format!(
                "`{v}` is not a rate (accepted: requests/s above 0, at most 10000000)"
            )),
        }
    });
    let priorities = per_site(sites, priority, "priority", add, |v| match v.as_integer() {
        Some(p) if (0..=1000).contains(&p) => Ok(p as u32),
        _ => Err(format!(
            "`{v}` is not a priority (accepted: an integer 0 to 1000)"
        )),
    });
    (guarantees, priorities)
}

/// The trace replayed: a file, or a `[trace]` generator (one 1k file by
/// default).
fn trace_source(
    file: Option<String>,
    generator: Option<toml::Value>,
    base: &Path,
    add: &mut impl FnMut(&str, String),
) -> TraceSource {
    let default = || TraceSource::Generate(Generator::SingleFile { size: "1k".into() });
    match (file, generator) {
        (Some(_), Some(_)) => {
            add(
                "trace_file",
                "give either trace_file or a [trace] generator, not both".into(),
            );
            default()
        }
        (Some(f), None) => TraceSource::File(base.join(f)),
        (None, None) => default(),
        (None, Some(v)) => match v.try_into::<Generator>() {
            Ok(g) => TraceSource::Generate(g),
            Err(e) => {
                add("trace", format!("{} (kinds: single-file, zipf, bursty, world-cup; keys as the `rdmalb-testbed trace` options)", e.message().trim()));
                default()
            }
        },
    }
}

/// The load's loop: closed over `connections` (16 by default) or open at
/// `rate` with at most `max_inflight` requests in flight.
fn load_mode(
    connections: Option<i64>,
    rate: Option<f64>,
    max_inflight: Option<i64>,
    add: &mut impl FnMut(&str, String),
) -> Mode {
    let max_inflight =
        in_range(add, "load.max_inflight", max_inflight, 1, 1_000_000).map_or(1000, |n| n as u32);
    let closed = Mode::Closed { connections: 16 };
    match (connections, rate) {
        (Some(_), Some(_)) => {
            add(
                "load.rate",
                "give either load.connections (closed loop) or load.rate (open loop), not both"
                    .into(),
            );
            closed
        }
        (None, Some(r)) if r > 0.0 && r <= 1e6 => Mode::Open {
            rate: r,
            max_inflight,
        },
        (None, Some(r)) => {
            add(
                "load.rate",
                format!("{r} is out of range (accepted: above 0, at most 1000000)"),
            );
            closed
        }
        (Some(c), None) => {
            in_range(add, "load.connections", Some(c), 1, 10_000).map_or(closed, |c| Mode::Closed {
                connections: c as u32,
            })
        }
        (None, None) => closed,
    }
}

/// `node_slots`: each 1 to 4096.
fn node_slots(v: Vec<i64>, add: &mut impl FnMut(&str, String)) -> Vec<u32> {
    v.into_iter()
        .filter_map(|v| match u32::try_from(v) {
            Ok(v) if (1..=4096).contains(&v) => Some(v),
            _ => {
                add(
                    "node_slots",
                    format!("{v} is out of range (accepted: 1 to 4096 slots per node)"),
                );
                None
            }
        })
        .collect()
}

/// Deep-merges `extra` into `base` (tables recursively; other values and
/// arrays of tables replace).
pub fn merge(base: &mut toml::Table, extra: &toml::Table) {
    for (k, v) in extra {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(e)) => merge(b, e),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Writes a report's CSV, JSON and PNG (with the wide `<png>.csv` it is
/// drawn from) where asked.
pub fn write_outputs(
    report: &Report,
    csv: Option<&Path>,
    json: Option<&Path>,
    png: Option<&Path>,
    title: &str,
) -> Result<(), ClusterError> {
    let write = |p: &Path, text: String| {
        std::fs::write(p, text).map_err(|e| ClusterError::Io {
            what: format!("cannot write {}", p.display()),
            source: e,
        })
    };
    if let Some(p) = csv {
        write(p, report.csv())?;
    }
    if let Some(p) = json {
        write(p, report.json())?;
    }
    if let Some(p) = png {
        let wide = p.with_extension("csv");
        write(&wide, report.throughput_csv())?;
        plot::throughput_png(&wide, report.sites.len(), p, title)?;
    }
    Ok(())
}

/// A per-site table of the spec (`[guarantee]`, `[priority]`): each key must
/// name a site, each value must pass `parse`; every problem goes to `add`
/// under `<table>.<site>`. Returns one entry per site, in site order.
fn per_site<T: Clone>(
    sites: &[String],
    table: Option<toml::Table>,
    name: &str,
    add: &mut impl FnMut(&str, String),
    parse: impl Fn(&toml::Value) -> Result<T, String>,
) -> Vec<Option<T>> {
    let mut out = vec![None; sites.len()];
    for (site, v) in table.unwrap_or_default() {
        let key = format!("{name}.{site}");
        let Some(i) = sites.iter().position(|s| *s == site) else {
            add(
                &key,
                format!(
                    "no site named `{site}` (expected one of: {})",
                    sites.join(", ")
                ),
            );
            continue;
        };
        match parse(&v) {
            Ok(x) => out[i] = Some(x),
            Err(e) => add(&key, e),
        }
    }
    out
}

#[cfg(test)]
mod tests;
