//! `[[stick_table]]` as written and its validation into [`StickTable`]s,
//! and the names of the stick fetches (`sc0_http_req_rate`,
//! `src_conn_cur`, `table_cnt`, ...) a test may use. Every problem names
//! its key and what would be accepted.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::track::{StickFetch, SLOTS};
use super::{Data, KeyKind, StickTable, Store};
use rdmalb_base::problems::ConfigCheck;

/// `[[stick_table]]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTable {
    /// The table's name (rules' `table`).
    ///
    /// Default: none (required). Example: `"per_ip"`.
    pub name: Option<String>,
    /// What entries are keyed by: `"ip"`, `"ipv6"` or `"string"`.
    ///
    /// Default: none (required). Example: `"ip"`.
    pub key: Option<String>,
    /// Longest string key kept, in bytes (`key = "string"` only).
    ///
    /// Default: `32`. Example: `64`.
    pub len: Option<i64>,
    /// Most entries (HAProxy's `size`), up to 16777216; the least recently used
    /// goes first.
    ///
    /// Default: none (required). Example: `100000`.
    pub size: Option<i64>,
    /// An entry not touched for this long is dropped.
    ///
    /// Default: none (required). Example: `"10m"`.
    pub expire: Option<String>,
    /// The counters each entry keeps: `"http_req_rate(10s)"`, `"http_req_cnt"`,
    /// `"http_err_rate(10s)"`, `"http_err_cnt"`, `"conn_cur"`, `"conn_cnt"`,
    /// `"conn_rate(10s)"`, `"gpc0"`, `"gpc0_rate(10s)"`, `"gpc1"`,
    /// `"gpc1_rate(10s)"`.
    ///
    /// Default: `[]`. Example: `["http_req_rate(10s)", "conn_cur"]`.
    #[serde(default)]
    pub store: Vec<String>,
    /// Counted across the proxies of `[stick_share]`.
    ///
    /// Default: `false`. Example: `true`.
    pub shared: Option<bool>,
}

/// The largest table: 16 M entries (about 3 GB of memory).
const MAX_SIZE: i64 = 1 << 24;

const STORES: &str = "\"http_req_rate(10s)\", \"http_req_cnt\", \"http_err_rate(10s)\", \"http_err_cnt\", \"conn_cur\", \"conn_cnt\", \"conn_rate(10s)\", \"gpc0\", \"gpc0_rate(10s)\", \"gpc1\" or \"gpc1_rate(10s)\"";

/// Validates the `[[stick_table]]` entries: the tables, and their index
/// by name.
pub fn tables(
    c: &mut ConfigCheck,
    raw: Vec<Option<RawTable>>,
    share: bool,
) -> (Vec<Arc<StickTable>>, HashMap<String, usize>) {
    let mut out = Vec::new();
    let mut index = HashMap::new();
    for (i, t) in raw.into_iter().enumerate() {
        let Some(t) = t else { continue };
        let key = format!("stick_table[{i}]");
        if t.shared == Some(true) && !share {
            c.add(
                format!("{key}.shared"),
                "needs a [stick_share] section (the other proxies' addresses and the key), e.g. [stick_share] listen = \"10.0.0.1:7400\", peers = [\"10.0.0.2:7400\"], key_file = \"share.key\"",
            );
        }
        let Some(table) = table(c, &key, t) else {
            continue;
        };
        if index.insert(table.name.clone(), out.len()).is_some() {
            c.add(
                format!("{key}.name"),
                format!("stick table `{}` is defined twice", table.name),
            );
        }
        out.push(Arc::new(table));
    }
    (out, index)
}

fn table(c: &mut ConfigCheck, key: &str, t: RawTable) -> Option<StickTable> {
    let before = c.count();
    let t_shared = t.shared.unwrap_or(false);
    let name = t.name.filter(|n| super::super::config::valid_name(n));
    if name.is_none() {
        c.add(
            format!("{key}.name"),
            "missing or not a name (expected letters, digits, '-', '_', '.', e.g. \"per_ip\")",
        );
    }
    let kind = match t.key.as_deref() {
        Some("ip") => KeyKind::Ip,
        Some("ipv6") => KeyKind::Ipv6,
        Some("string") => {
            let len = c.int(&format!("{key}.len"), t.len, 32, 1, 1024);
            KeyKind::Str { len: len as usize }
        }
        Some(other) => {
            c.add(
                format!("{key}.key"),
                format!("`{other}` is not a key type (expected \"ip\", \"ipv6\" or \"string\")"),
            );
            KeyKind::Ip
        }
        None => {
            c.add(
                format!("{key}.key"),
                "missing (expected \"ip\", \"ipv6\" or \"string\")",
            );
            KeyKind::Ip
        }
    };
    if t.len.is_some() && !matches!(kind, KeyKind::Str { .. }) {
        c.add(format!("{key}.len"), "only for key = \"string\"");
    }
    let size = match t.size {
        Some(n) if (1..=MAX_SIZE).contains(&n) => n as usize,
        Some(n) => {
            c.add(
                format!("{key}.size"),
                format!(
                    "{n} is out of range (expected the most entries kept, from 1 to {MAX_SIZE})"
                ),
            );
            1
        }
        None => {
            c.add(
                format!("{key}.size"),
                "missing (expected the most entries the table keeps, e.g. 100000)",
            );
            1
        }
    };
    // HAProxy's expire is at most 2^31 - 1 ms (about 24 days).
    let expire = c.duration_within(
        &format!("{key}.expire"),
        t.expire.as_deref(),
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(i32::MAX as u64),
    );
    if t.expire.is_none() {
        c.add(
            format!("{key}.expire"),
            "missing (expected how long an untouched entry lives, e.g. \"30s\")",
        );
    }
    let mut store = Store::default();
    for (j, s) in t.store.iter().enumerate() {
        match data_type(s) {
            Ok((d, p)) => store.add(d, p),
            Err(e) => c.add(format!("{key}.store[{j}]"), e),
        }
    }
    (c.count() == before).then(|| {
        let t = StickTable::new(
            &name.unwrap_or_default(),
            kind,
            size,
            expire.as_millis() as u32,
            store,
        );
        if t_shared {
            t.shared()
        } else {
            t
        }
    })
}

/// `http_req_rate(10s)`, `gpc0`: a data type and its period (ms).
pub fn data_type(s: &str) -> Result<(Data, u32), String> {
    let (name, arg) = match s.split_once('(') {
        Some((n, a)) => (n.trim(), a.strip_suffix(')')),
        None => (s.trim(), None),
    };
    let Some(d) = Data::parse(name) else {
        return Err(format!("`{s}` is not a data type (expected {STORES})"));
    };
    match (d.is_rate(), arg) {
        (true, Some(p)) => {
            let p = rdmalb_base::duration::parse_within(
                p,
                Duration::from_millis(1),
                Duration::from_millis(i32::MAX as u64),
            )
            .map_err(|e| format!("`{s}`: {e}"))?;
            Ok((d, p.as_millis() as u32))
        }
        (true, None) => Err(format!("`{s}` needs its period, e.g. \"{name}(10s)\"")),
        (false, None) => Ok((d, 0)),
        (false, Some(_)) => Err(format!("`{s}`: `{name}` takes no period")),
    }
}

/// The stick fetch named `name` (with its argument in `arg`:
/// `sc_http_req_rate` with `counter = 0`, `src_conn_cur` with
/// `table = "per_ip"`). The error says what is expected.
pub fn fetch(
    name: &str,
    counter: Option<i64>,
    table: Option<&str>,
    tables: &HashMap<String, usize>,
) -> Result<Option<StickFetch>, String> {
    let table_index = |what: &str| -> Result<usize, String> {
        let t =
            table.ok_or_else(|| format!("missing: fetch \"{what}\" needs the `table` it reads"))?;
        tables
            .get(t)
            .copied()
            .ok_or_else(|| format!("no [[stick_table]] named `{t}`"))
    };
    let slot = |n: i64| -> Result<usize, String> {
        usize::try_from(n)
            .ok()
            .filter(|n| *n < SLOTS)
            .ok_or_else(|| format!("{n} is not a stick counter (expected 0, 1 or 2)"))
    };
    if name == "table_cnt" {
        return Ok(Some(StickFetch::TableCnt(table_index(name)?)));
    }
    // `sc0_x`, `sc_x` (+ counter), `src_x` (+ table).
    let (from, what) = if let Some(rest) = name.strip_prefix("src_") {
        (None, rest)
    } else if let Some(rest) = name.strip_prefix("sc_") {
        let n = counter.ok_or_else(|| {
            format!("missing: fetch \"{name}\" needs the stick `counter` it reads (0, 1 or 2)")
        })?;
        (Some(slot(n)?), rest)
    } else if let Some(rest) = name
        .strip_prefix("sc")
        .and_then(|r| r.split_once('_'))
        .filter(|(n, _)| n.len() == 1)
    {
        let n = rest
            .0
            .parse::<i64>()
            .map_err(|_| format!("`{name}` is not a fetch"))?;
        (Some(slot(n)?), rest.1)
    } else {
        return Ok(None);
    };
    let gpc = |w: &str| match w {
        "inc_gpc0" => Some(0),
        "inc_gpc1" => Some(1),
        _ => None,
    };
    let data = match what {
        "get_gpc0" => Some(Data::Gpc0),
        "get_gpc1" => Some(Data::Gpc1),
        w => Data::parse(w),
    };
    Ok(Some(match (from, what) {
        (Some(n), "tracked") => StickFetch::ScTracked(n),
        (Some(n), w) if gpc(w).is_some() => StickFetch::ScIncGpc(gpc(w).unwrap_or(0), n),
        (None, w) if gpc(w).is_some() => {
            StickFetch::SrcIncGpc(table_index(name)?, gpc(w).unwrap_or(0))
        }
        (Some(n), _) if data.is_some() => StickFetch::Sc(n, data.unwrap_or(Data::Gpc0)),
        (None, _) if data.is_some() => {
            StickFetch::Src(table_index(name)?, data.unwrap_or(Data::Gpc0))
        }
        _ => {
            return Err(format!(
                "`{name}` is not a stick fetch (expected sc0_/sc1_/sc2_/sc_/src_ followed by a stored type such as http_req_rate, conn_cur, gpc0, get_gpc0, inc_gpc0, or table_cnt)"
            ))
        }
    }))
}
