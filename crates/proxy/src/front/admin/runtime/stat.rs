//! `show stat`: one row per node and one `BACKEND` row per site, in
//! HAProxy's CSV layout (the same header, in the same order, as HAProxy
//! 2.6's `show stat`), so a script that reads HAProxy's columns by name
//! reads ours. Columns whose meaning rdmalb has are filled; the others are
//! left empty, as HAProxy leaves columns that do not apply.
//!
//! Mapping (pxname = site, svname = node):
//! `qcur` requests waiting for a slot of the site (BACKEND; 0 for a node:
//! rdmalb queues per site), `scur`/`smax` requests in flight now / at most,
//! `slim` the node's in-flight cap, `stot`/`lbtot` requests sent to it,
//! `bout` response bytes sent to clients, `econ` connect failures, `eresp`
//! timeouts and protocol errors, `status` (UP, DOWN, MAINT, DRAIN,
//! `DOWN (agent)`, `no check`), `weight`/`uweight` current / configured
//! weight, `act`/`bck`, `check_status`/`check_desc` how the last check
//! ended in HAProxy's words (`INI` before the first, `L7OK`, `L7STS`,
//! `L4CON`, `L4TOUT`, `L7TOUT`, `L7RSP`; empty without checks),
//! `check_code` the HTTP status it got, `chkfail` failed checks, `lastchg` seconds since
//! the last up/down change, `rate` requests per second (between reads at least 1 s apart),
//! `hrsp_1xx`..`hrsp_5xx`, `hrsp_other` (cut exchanges), `check_rise`,
//! `check_fall`, `addr`, `mode`, `algo` (BACKEND).

use std::collections::HashMap;

use crate::balance::health::CheckStatus;
use crate::balance::{AdminState, Backends, NodeState, SiteBackends};

pub use columns::COLUMNS;

mod columns;
mod filter;
mod typed;
pub use filter::{Filter, Format};
pub use typed::{json, tag_names, typed};

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Num(u64),
    Text(String),
}

impl Value {
    fn csv(&self) -> String {
        match self {
            Value::Num(n) => n.to_string(),
            // HAProxy's values never hold commas; ours (names, addresses)
            // cannot either, but never let one shift the columns.
            Value::Text(t) => t.replace([',', '\n', '\r'], " "),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Value::Num(n) => serde_json::Value::from(*n),
            Value::Text(t) => serde_json::Value::from(t.as_str()),
        }
    }
}

const COMPRESSION_COLUMNS: [&str; 4] = ["comp_in", "comp_out", "comp_byp", "comp_rsp"];

/// HAProxy's average-time columns: queue, connect, response, total.
const TIME_COLUMNS: [&str; 4] = ["qtime", "ctime", "rtime", "ttime"];

/// What a row describes (HAProxy's `type` column: 0, 1, 2).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Frontend,
    #[default]
    Backend,
    Server,
}

impl Kind {
    /// The bit of `show stat`'s `<type>` filter (1, 2, 4).
    pub fn bit(self) -> i64 {
        match self {
            Kind::Frontend => 1,
            Kind::Backend => 2,
            Kind::Server => 4,
        }
    }
}

/// One row: what it describes and the filled columns.
#[derive(Debug, Default, Clone)]
pub struct Row {
    pub kind: Kind,
    values: HashMap<&'static str, Value>,
}

impl Row {
    fn of(kind: Kind) -> Row {
        Row {
            kind,
            values: HashMap::new(),
        }
    }

    fn num(&mut self, column: &'static str, v: u64) -> &mut Self {
        debug_assert!(COLUMNS.contains(&column), "{column}");
        self.values.insert(column, Value::Num(v));
        self
    }

    fn text(&mut self, column: &'static str, v: impl Into<String>) -> &mut Self {
        debug_assert!(COLUMNS.contains(&column), "{column}");
        self.values.insert(column, Value::Text(v.into()));
        self
    }

    /// `hrsp_1xx`..`hrsp_5xx` and `hrsp_other` from counts by class (1xx
    /// to 5xx, then cut exchanges).
    fn responses(&mut self, by_class: &[u64; 6]) -> &mut Self {
        const COLUMNS: [&str; 6] = [
            "hrsp_1xx",
            "hrsp_2xx",
            "hrsp_3xx",
            "hrsp_4xx",
            "hrsp_5xx",
            "hrsp_other",
        ];
        for (col, n) in COLUMNS.into_iter().zip(by_class) {
            self.num(col, *n);
        }
        self
    }

    /// A numeric column (`iid`, `sid`, …), when filled.
    pub fn number(&self, column: &str) -> Option<u64> {
        match self.get(column) {
            Some(Value::Num(n)) => Some(*n),
            _ => None,
        }
    }

    /// A node's `rate_max`, aborts and time averages; `qmax` 0: rdmalb
    /// queues requests per site, never on a node.
    fn timing(&mut self, t: &crate::balance::TrafficSnapshot) -> &mut Self {
        self.num("qmax", 0)
            .num("wretr", t.retries)
            .num("wredis", t.retries)
            .num("rate_max", t.rate_max)
            .num("cli_abrt", t.aborts[0])
            .num("srv_abrt", t.aborts[1]);
        for (col, ms) in TIME_COLUMNS.into_iter().zip(t.times_ms) {
            self.num(col, ms);
        }
        self
    }

    /// The compression columns at 0, HAProxy's value without a compression
    /// filter; [`rows`] empties them again where a site compresses
    /// (rdmalb does not count its compression yet).
    fn uncompressed(&mut self) -> &mut Self {
        for col in COMPRESSION_COLUMNS {
            self.num(col, 0);
        }
        self
    }

    pub fn get(&self, column: &str) -> Option<&Value> {
        self.values.get(column)
    }
}

/// HAProxy's `status` column for a node.
pub fn node_status(n: &NodeState) -> String {
    let health = n.health();
    match n.admin_state() {
        AdminState::Maint => "MAINT".into(),
        AdminState::Drain => "DRAIN".into(),
        AdminState::Ready if n.control().agent_down => "DOWN (agent)".into(),
        AdminState::Ready if !health.check => "no check".into(),
        AdminState::Ready if health.up => "UP".into(),
        AdminState::Ready => "DOWN".into(),
    }
}

fn since(unix: Option<u64>) -> Option<u64> {
    unix.map(|t| rdmalb_base::time::unix_now_secs().saturating_sub(t))
}

/// The rows of `show stat` in HAProxy's order: one FRONTEND row per
/// listener, then each site's nodes and its BACKEND row. Proxy ids
/// (`iid`) number the listeners from 1, then the sites.
pub fn rows(state: &crate::front::admin::AdminState) -> Vec<Row> {
    let config = state.config.load();
    let mut out: Vec<Row> = state
        .frontends
        .iter()
        .enumerate()
        .map(|(i, f)| frontend(f, i as u64 + 1, config.limits.max_connections as u64))
        .collect();
    let queued = state.admission.as_ref().map(|a| a.status().queued);
    let waiting = |site: &str| {
        queued
            .as_ref()
            .and_then(|q| q.get(site))
            .map_or(0, |&n| n as u64)
    };
    out.extend(backend_rows(
        &state.backends.load(),
        out.len() as u64,
        &waiting,
    ));
    // A site with `[site.compression]`: its BACKEND row, and the FRONTEND
    // rows, leave the compression columns empty (not counted yet).
    let compressing: Vec<&str> = config
        .sites
        .iter()
        .filter(|s| s.compression.is_some())
        .map(|s| s.name.as_str())
        .collect();
    for row in &mut out {
        let named = |r: &Row| matches!(r.get("pxname"), Some(Value::Text(t)) if compressing.contains(&t.as_str()));
        let compresses = match row.kind {
            Kind::Frontend => !compressing.is_empty(),
            Kind::Backend => named(row),
            Kind::Server => false,
        };
        if compresses {
            for col in COMPRESSION_COLUMNS {
                row.values.remove(col);
            }
        }
    }
    out
}

/// A listener's FRONTEND row.
fn frontend(f: &crate::front::listener::FrontendStats, iid: u64, limit: u64) -> Row {
    use std::sync::atomic::Ordering::Relaxed;
    let mut row = Row::of(Kind::Frontend);
    let total = f.counters.accepted.load(Relaxed);
    let rate = f.counters.rate.per_second(total);
    let rate_max = f.counters.rate_max.fetch_max(rate, Relaxed).max(rate);
    row.text("pxname", &*f.name)
        .text("svname", "FRONTEND")
        .num("scur", f.open.load(Relaxed) as u64)
        .num("smax", f.counters.most_open.load(Relaxed) as u64)
        .num("slim", limit)
        .num("stot", total)
        .num("conn_tot", total)
        .num("rate", rate)
        .num("rate_max", rate_max)
        .num("bout", f.counters.bytes_out.load(Relaxed))
        .num("ereq", f.counters.request_errors.load(Relaxed))
        .text("status", "OPEN")
        .num("pid", 1)
        .num("iid", iid)
        .num("sid", 0)
        .num("type", 0)
        .text("mode", "http");
    let by_class: [u64; 6] = std::array::from_fn(|i| f.counters.responses[i].load(Relaxed));
    row.responses(&by_class)
        .num("req_tot", by_class.iter().sum())
        .uncompressed()
        // rdmalb has no session-rate limit (HAProxy's 0) and no deny rule.
        .num("rate_lim", 0)
        .num("dreq", 0);
    row
}

/// Each site's node rows and BACKEND row; sites take the proxy ids after
/// `first_iid`.
fn backend_rows(backends: &Backends, first_iid: u64, queued: &dyn Fn(&str) -> u64) -> Vec<Row> {
    let mut out = Vec::new();
    for (s, site) in backends.sites().iter().enumerate() {
        let iid = first_iid + s as u64 + 1;
        let mut sums = BackendSums::default();
        for n in site
            .nodes()
            .iter()
            .filter(|n| n.assigned_site() == Some(site.index))
        {
            out.push(server_row(backends, &site.name, n, iid));
            sums.add(n);
        }
        out.push(sums.row(backends, site, iid, queued(&site.name)));
    }
    out
}

/// A node's row under the site `site` it serves, whose proxy id is `iid`.
fn server_row(backends: &Backends, site: &str, n: &NodeState, iid: u64) -> Row {
    let limit = backends.max_inflight();
    let health = backends.health();
    let t = n.traffic();
    let c = n.control();
    let h = n.health();
    let mut row = Row::of(Kind::Server);
    row.text("pxname", site)
        .text("svname", &n.name)
        .num("qcur", 0)
        .num("scur", n.inflight() as u64)
        .num("smax", t.inflight_max as u64)
        .num("stot", t.requests_total)
        .num("lbtot", t.requests_total)
        .num("bout", t.bytes_out_total)
        .num("econ", t.upstream_errors[0])
        .num("eresp", t.upstream_errors[1] + t.upstream_errors[2])
        .text("status", node_status(n))
        .num("weight", u64::from(c.weight))
        .num("uweight", u64::from(c.initial_weight))
        .num("act", u64::from(!c.backup))
        .num("bck", u64::from(c.backup))
        .num("pid", 1)
        .num("iid", iid)
        .num("sid", n.index as u64 + 1)
        .num("type", 2)
        .num("rate", t.rate)
        .text("addr", n.address.to_string())
        .text("mode", "http");
    if let Some(l) = c.max_inflight.or((limit > 0).then_some(limit)) {
        row.num("slim", l as u64);
    }
    if h.check {
        if let Some(ms) = h.last_check_ms {
            row.num("check_duration", ms);
        }
        let check = CheckStatus::haproxy(h.last_check_status);
        row.text("check_status", check.status)
            .text("check_desc", check.description);
        if let Some(code) = h.last_check_code {
            row.num("check_code", u64::from(code));
        }
        row.num("chkfail", h.checks_failed_total)
            .num("downtime", h.downtime_secs)
            .num("check_rise", u64::from(health.rise))
            .num("check_fall", u64::from(health.fall));
    }
    if let Some(age) = since(h.last_change_unix) {
        row.num("lastchg", age);
    }
    row.responses(&t.responses);
    row.timing(&t);
    row
}

/// A BACKEND row's sums over the nodes serving the site.
#[derive(Default)]
struct BackendSums {
    scur: u64,
    stot: u64,
    bout: u64,
    rate: u64,
    econ: u64,
    eresp: u64,
    hrsp: [u64; 6],
    aborts: [u64; 2],
    /// Per time column, the sum of each node's average times its requests.
    times: [u64; 4],
    retries: u64,
    /// Of the nodes that take requests: their weights, how many are
    /// active and how many backups.
    weight: u64,
    act: u64,
    bck: u64,
    last_change: Option<u64>,
}

impl BackendSums {
    fn add(&mut self, n: &NodeState) {
        let t = n.traffic();
        let c = n.control();
        for (sum, n) in self.hrsp.iter_mut().zip(t.responses) {
            *sum += n;
        }
        self.retries += t.retries;
        for (sum, n) in self.aborts.iter_mut().zip(t.aborts) {
            *sum += n;
        }
        for (sum, ms) in self.times.iter_mut().zip(t.times_ms) {
            *sum += ms * t.requests_total;
        }
        self.scur += n.inflight() as u64;
        self.stot += t.requests_total;
        self.bout += t.bytes_out_total;
        self.rate += t.rate;
        self.econ += t.upstream_errors[0];
        self.eresp += t.upstream_errors[1] + t.upstream_errors[2];
        if n.admits() {
            self.weight += u64::from(c.weight);
            if c.backup {
                self.bck += 1;
            } else {
                self.act += 1;
            }
        }
        self.last_change = match (self.last_change, since(n.health().last_change_unix)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// The BACKEND row of `site` (proxy id `iid`, `qcur` requests queued).
    fn row(self, backends: &Backends, site: &SiteBackends, iid: u64, qcur: u64) -> Row {
        let mut total = Row::of(Kind::Backend);
        total
            .text("pxname", &site.name)
            .text("svname", "BACKEND")
            .num("qcur", qcur)
            .num("scur", self.scur)
            .num("stot", self.stot)
            .num("lbtot", self.stot)
            .num("bout", self.bout)
            .num("econ", self.econ)
            .num("eresp", self.eresp)
            .text(
                "status",
                if self.act + self.bck > 0 {
                    "UP"
                } else {
                    "DOWN"
                },
            )
            .num("weight", self.weight)
            .num("uweight", self.weight)
            .num("act", self.act)
            .num("bck", self.bck)
            .num("pid", 1)
            .num("iid", iid)
            .num("sid", 0)
            .num("type", 1)
            .num("rate", self.rate)
            .num("req_tot", self.stot)
            .text("mode", "http")
            .text("algo", backends.site_balance(site.index));
        total
            .responses(&self.hrsp)
            .uncompressed()
            .num("cli_abrt", self.aborts[0])
            .num("srv_abrt", self.aborts[1])
            .num("wretr", self.retries)
            .num("wredis", self.retries);
        // The backend's averages: its nodes', weighted by their requests.
        for (col, sum) in TIME_COLUMNS.into_iter().zip(self.times) {
            total.num(col, sum.checked_div(self.stot).unwrap_or(0));
        }
        if let Some(age) = self.last_change {
            total.num("lastchg", age);
        }
        total
    }
}

/// HAProxy's CSV: the `# `-prefixed header, one line per row, each line
/// ending with a comma as HAProxy's do.
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from("# ");
    for c in COLUMNS {
        out.push_str(c);
        out.push(',');
    }
    out.push('\n');
    for row in rows {
        for c in COLUMNS {
            if let Some(v) = row.get(c) {
                out.push_str(&v.csv());
            }
            out.push(',');
        }
        out.push('\n');
    }
    out
}
