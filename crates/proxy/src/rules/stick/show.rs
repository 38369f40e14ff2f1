//! The stats socket's `show table` and `clear table`, printed as HAProxy
//! prints them:
//!
//! ```text
//! # table: per_ip, type: ip, size:102400, used:1
//! 0x55d5e1c2a0b0: key=127.0.0.1 use=0 exp=29995 http_req_cnt=3 http_req_rate(10000)=3
//! ```
//!
//! `show table` alone lists the tables' heads; with a name, their entries,
//! filtered by `data.<type> <op> <value>` (`eq`, `ne`, `lt`, `le`, `gt`,
//! `ge`) and/or `key <key>`.

use std::fmt::Write;
use std::sync::Arc;

use super::{now_ms, Counters, Data, Key, StickTable};

/// One entry filter.
#[derive(Debug, Clone, Copy)]
struct Filter {
    data: Data,
    op: fn(i64, i64) -> bool,
    value: i64,
}

/// What `show table NAME ...` / `clear table NAME ...` selects.
#[derive(Debug, Default)]
pub struct Selection {
    filters: Vec<Filter>,
    key: Option<String>,
}

/// Parses the words after the table's name (HAProxy's error texts).
pub fn selection(t: &StickTable, words: &[&str]) -> Result<Selection, String> {
    let mut s = Selection::default();
    let mut i = 0;
    while i < words.len() {
        let n = s.filters.len() + 1;
        match words[i] {
            "key" => {
                let k = words.get(i + 1).ok_or("Key value expected")?;
                s.key = Some(k.to_string());
                i += 2;
            }
            w if w.starts_with("data.") => {
                let data = Data::parse(&w[5..])
                    .filter(|d| t.store.has(*d))
                    .ok_or(format!("Filter entry #{n}: Data type not stored in this table"))?;
                let op: fn(i64, i64) -> bool = match words.get(i + 1).copied() {
                    Some("eq") => |a, b| a == b,
                    Some("ne") => |a, b| a != b,
                    Some("lt") => |a, b| a < b,
                    Some("le") => |a, b| a <= b,
                    Some("gt") => |a, b| a > b,
                    Some("ge") => |a, b| a >= b,
                    _ => return Err(format!("Filter entry #{n}: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"")),
                };
                let value = words
                    .get(i + 2)
                    .and_then(|v| v.parse().ok())
                    .ok_or(format!("Filter entry #{n}: Require a valid integer value to compare against"))?;
                s.filters.push(Filter { data, op, value });
                i += 3;
            }
            _ => return Err("Optional argument only supports \"data.<store_data_type>\" <operator> <value> and key <key>".into()),
        }
    }
    Ok(s)
}

impl Selection {
    fn takes(&self, t: &StickTable, key: &Key, c: &Counters, now: u32) -> bool {
        if let Some(k) = &self.key {
            if t.kind.of_text(k).as_ref() != Some(key) {
                return false;
            }
        }
        self.filters
            .iter()
            .all(|f| (f.op)(i64::from(c.get(f.data, &t.store, now)), f.value))
    }
}

/// The head line of a table.
pub fn head(t: &StickTable, out: &mut String) {
    writeln!(
        out,
        "# table: {}, type: {}, size:{}, used:{}",
        t.name,
        t.kind.name(),
        t.size,
        t.len()
    )
    .ok();
}

/// `show table`: the heads of every table, by name (HAProxy's order).
pub fn list(tables: &[Arc<StickTable>]) -> String {
    let mut out = String::new();
    let now = now_ms();
    let mut sorted: Vec<&Arc<StickTable>> = tables.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for t in sorted {
        t.purge(now);
        head(t, &mut out);
    }
    out
}

/// `show table NAME ...`: the head and the selected entries; with a key,
/// nothing when the table has no such entry (HAProxy prints no head then).
pub fn entries(t: &StickTable, s: &Selection) -> String {
    let now = now_ms();
    t.purge(now);
    let mut out = String::new();
    let rows: Vec<_> = t
        .snapshot(now)
        .into_iter()
        .filter(|(key, _, _, c)| s.takes(t, key, c, now))
        .collect();
    if s.key.is_some() && rows.is_empty() {
        return out;
    }
    head(t, &mut out);
    for (key, used, remain, c) in rows {
        write!(
            out,
            "{:#x}: key={key} use={used} exp={}",
            entry_id(&key),
            remain.max(0)
        )
        .ok();
        for d in t.store.types() {
            let v = c.get(d, &t.store, now);
            if d.is_rate() {
                write!(out, " {}({})={v}", d.name(), t.store.period(d)).ok();
            } else {
                write!(out, " {}={v}", d.name()).ok();
            }
        }
        out.push('\n');
    }
    out
}

/// A stable identifier for an entry in place of HAProxy's pointer.
fn entry_id(key: &Key) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    0x5500_0000_0000 | (h.finish() & 0xff_ffff_fff0)
}

/// `clear table NAME ...`: removes the selected untracked entries.
pub fn clear(t: &StickTable, s: &Selection) -> usize {
    let now = now_ms();
    match (&s.key, s.filters.is_empty()) {
        (Some(k), true) => t.kind.of_text(k).map_or(0, |k| t.clear(Some(&k))),
        (None, true) => t.clear(None),
        _ => t
            .snapshot(now)
            .into_iter()
            .filter(|(key, _, _, c)| s.takes(t, key, c, now))
            .map(|(key, ..)| t.clear(Some(&key)))
            .sum(),
    }
}
