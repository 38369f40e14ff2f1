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
//! weight, `act`/`bck`, `chkfail` failed checks, `lastchg` seconds since
//! the last up/down change, `rate` requests per second (between reads at least 1 s apart),
//! `hrsp_1xx`..`hrsp_5xx`, `hrsp_other` (cut exchanges), `check_rise`,
//! `check_fall`, `addr`, `mode`, `algo` (BACKEND).

use std::collections::HashMap;

use crate::balance::{AdminState, Backends, NodeState};

/// HAProxy 2.6's `show stat` columns, in order.
pub const COLUMNS: [&str; 128] = [
    "pxname",
    "svname",
    "qcur",
    "qmax",
    "scur",
    "smax",
    "slim",
    "stot",
    "bin",
    "bout",
    "dreq",
    "dresp",
    "ereq",
    "econ",
    "eresp",
    "wretr",
    "wredis",
    "status",
    "weight",
    "act",
    "bck",
    "chkfail",
    "chkdown",
    "lastchg",
    "downtime",
    "qlimit",
    "pid",
    "iid",
    "sid",
    "throttle",
    "lbtot",
    "tracked",
    "type",
    "rate",
    "rate_lim",
    "rate_max",
    "check_status",
    "check_code",
    "check_duration",
    "hrsp_1xx",
    "hrsp_2xx",
    "hrsp_3xx",
    "hrsp_4xx",
    "hrsp_5xx",
    "hrsp_other",
    "hanafail",
    "req_rate",
    "req_rate_max",
    "req_tot",
    "cli_abrt",
    "srv_abrt",
    "comp_in",
    "comp_out",
    "comp_byp",
    "comp_rsp",
    "lastsess",
    "last_chk",
    "last_agt",
    "qtime",
    "ctime",
    "rtime",
    "ttime",
    "agent_status",
    "agent_code",
    "agent_duration",
    "check_desc",
    "agent_desc",
    "check_rise",
    "check_fall",
    "check_health",
    "agent_rise",
    "agent_fall",
    "agent_health",
    "addr",
    "cookie",
    "mode",
    "algo",
    "conn_rate",
    "conn_rate_max",
    "conn_tot",
    "intercepted",
    "dcon",
    "dses",
    "wrew",
    "connect",
    "reuse",
    "cache_lookups",
    "cache_hits",
    "srv_icur",
    "src_ilim",
    "qtime_max",
    "ctime_max",
    "rtime_max",
    "ttime_max",
    "eint",
    "idle_conn_cur",
    "safe_conn_cur",
    "used_conn_cur",
    "need_conn_est",
    "uweight",
    "agg_server_status",
    "agg_server_check_status",
    "agg_check_status",
    "-",
    "ssl_sess",
    "ssl_reused_sess",
    "ssl_failed_handshake",
    "h2_headers_rcvd",
    "h2_data_rcvd",
    "h2_settings_rcvd",
    "h2_rst_stream_rcvd",
    "h2_goaway_rcvd",
    "h2_detected_conn_protocol_errors",
    "h2_detected_strm_protocol_errors",
    "h2_rst_stream_resp",
    "h2_goaway_resp",
    "h2_open_connections",
    "h2_backend_open_streams",
    "h2_total_connections",
    "h2_backend_total_streams",
    "h1_open_connections",
    "h1_open_streams",
    "h1_total_connections",
    "h1_total_streams",
    "h1_bytes_in",
    "h1_bytes_out",
    "h1_spliced_bytes_in",
    "h1_spliced_bytes_out",
];

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

/// One row: the filled columns.
#[derive(Debug, Default, Clone)]
pub struct Row(HashMap<&'static str, Value>);

impl Row {
    fn num(&mut self, column: &'static str, v: u64) -> &mut Self {
        debug_assert!(COLUMNS.contains(&column), "{column}");
        self.0.insert(column, Value::Num(v));
        self
    }

    fn text(&mut self, column: &'static str, v: impl Into<String>) -> &mut Self {
        debug_assert!(COLUMNS.contains(&column), "{column}");
        self.0.insert(column, Value::Text(v.into()));
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

    pub fn get(&self, column: &str) -> Option<&Value> {
        self.0.get(column)
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

/// The rows of `show stat`: each site's nodes, then its BACKEND row.
/// `queued` gives the requests waiting per site name.
pub fn rows(backends: &Backends, queued: &dyn Fn(&str) -> u64) -> Vec<Row> {
    let limit = backends.max_inflight();
    let health = backends.health();
    let mut out = Vec::new();
    for (s, site) in backends.sites().iter().enumerate() {
        let iid = s as u64 + 1;
        let serving: Vec<_> = site
            .nodes()
            .iter()
            .filter(|n| n.assigned_site() == Some(site.index))
            .collect();
        let mut total = Row::default();
        let (mut scur, mut stot, mut bout, mut rate, mut econ, mut eresp) = (0, 0, 0, 0, 0, 0);
        let mut hrsp = [0u64; 6];
        let (mut weight, mut act, mut bck) = (0u64, 0u64, 0u64);
        let mut last_change: Option<u64> = None;
        for n in &serving {
            let t = n.traffic();
            let c = n.control();
            let h = n.health();
            let mut row = Row::default();
            row.text("pxname", &site.name)
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
                row.num("chkfail", h.checks_failed_total)
                    .num("check_rise", u64::from(health.rise))
                    .num("check_fall", u64::from(health.fall));
            }
            if let Some(age) = since(h.last_change_unix) {
                row.num("lastchg", age);
            }
            row.responses(&t.responses);
            for (sum, n) in hrsp.iter_mut().zip(t.responses) {
                *sum += n;
            }
            scur += n.inflight() as u64;
            stot += t.requests_total;
            bout += t.bytes_out_total;
            rate += t.rate;
            econ += t.upstream_errors[0];
            eresp += t.upstream_errors[1] + t.upstream_errors[2];
            if n.admits() {
                weight += u64::from(c.weight);
                if c.backup {
                    bck += 1;
                } else {
                    act += 1;
                }
            }
            last_change = match (last_change, since(h.last_change_unix)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            out.push(row);
        }
        total
            .text("pxname", &site.name)
            .text("svname", "BACKEND")
            .num("qcur", queued(&site.name))
            .num("scur", scur)
            .num("stot", stot)
            .num("lbtot", stot)
            .num("bout", bout)
            .num("econ", econ)
            .num("eresp", eresp)
            .text("status", if act + bck > 0 { "UP" } else { "DOWN" })
            .num("weight", weight)
            .num("act", act)
            .num("bck", bck)
            .num("pid", 1)
            .num("iid", iid)
            .num("sid", 0)
            .num("type", 1)
            .num("rate", rate)
            .num("req_tot", stot)
            .text("mode", "http")
            .text("algo", backends.balance());
        total.responses(&hrsp);
        if let Some(age) = last_change {
            total.num("lastchg", age);
        }
        out.push(total);
    }
    out
}

/// HAProxy's CSV: the `# `-prefixed header, one line per row, each line
/// ending with a comma as HAProxy's do, and a blank line at the end.
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
    out.push('\n');
    out
}

/// The same rows as JSON: an array of objects holding the filled columns
/// (numbers as numbers), keyed by HAProxy's column names.
pub fn json(rows: &[Row]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|row| {
                let mut m = serde_json::Map::new();
                for c in COLUMNS {
                    if let Some(v) = row.get(c) {
                        m.insert(c.to_string(), v.json());
                    }
                }
                serde_json::Value::Object(m)
            })
            .collect(),
    )
}
