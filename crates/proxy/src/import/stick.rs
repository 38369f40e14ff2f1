//! Stick tables and what uses them (docs/rate-limits.md): a proxy's
//! `stick-table` line and a `peers` section's `table` lines as
//! `[[stick_table]]`s (named after the proxy, as HAProxy names them, or
//! `PEERS_TABLE`), `track-sc0..2` and `sc-inc-gpc0/1` actions, and the
//! `sc*_`/`src_`/`table_cnt` fetches of ACLs.

use std::fmt::Write;

use super::lexer::Line;
use super::sections::time;
use super::site::{q, site_name};

/// The data types rdmalb stores (the rest of HAProxy's are refused).
const TYPES: &[&str] = &[
    "gpc0",
    "gpc0_rate",
    "gpc1",
    "gpc1_rate",
    "conn_cnt",
    "conn_cur",
    "conn_rate",
    "http_req_cnt",
    "http_req_rate",
    "http_err_cnt",
    "http_err_rate",
];

/// What the fetches read after `scN_` / `src_`.
fn readable(what: &str) -> bool {
    TYPES.contains(&what)
        || matches!(
            what,
            "get_gpc0" | "get_gpc1" | "inc_gpc0" | "inc_gpc1" | "tracked"
        )
}

/// The `[[stick_table]]` name of a proxy's table, or of `peers/table`.
pub fn table_name(name: &str) -> String {
    site_name(&name.replace('/', "_"))
}

/// `stick-table type ... size ... [expire ...] [store ...]` of table
/// `name` as a `[[stick_table]]`, `shared` (or shared when its `peers`
/// option names `shared_peers`, the section `[stick_share]` comes from);
/// `approx` gets what is carried with a difference.
pub fn table(
    line: &Line,
    from: usize,
    name: &str,
    (mut shared, shared_peers): (bool, Option<&str>),
    out: &mut String,
    approx: &mut Vec<String>,
) -> Result<(), String> {
    let w = |i: usize| line.word(i);
    let mut keys = vec![("name", q(&table_name(name)))];
    let mut expire = None;
    let mut i = from;
    while i < line.words.len() {
        match w(i) {
            "type" => {
                let kind = match w(i + 1) {
                    k @ ("ip" | "ipv6" | "string") => k,
                    other => {
                        return Err(format!(
                            "a table of type `{other}` (rdmalb keys tables by ip, ipv6 or string)"
                        ))
                    }
                };
                keys.push(("key", q(kind)));
                if kind == "string" && w(i + 2) == "len" {
                    let len: u32 = w(i + 3).parse().map_err(|_| "`len` without a number")?;
                    keys.push(("len", len.to_string()));
                    i += 2;
                }
                i += 2;
            }
            "size" => {
                keys.push(("size", size(w(i + 1))?.to_string()));
                i += 2;
            }
            "expire" => {
                let d = time(w(i + 1)).ok_or_else(|| format!("`expire {}`", w(i + 1)))?;
                expire = Some(d.as_millis());
                i += 2;
            }
            "store" => {
                let mut list = Vec::new();
                for t in w(i + 1).split(',').filter(|t| !t.is_empty()) {
                    let (base, arg) = match t.split_once('(') {
                        Some((b, a)) => (b, Some(a.trim_end_matches(')'))),
                        None => (t, None),
                    };
                    if !TYPES.contains(&base) {
                        return Err(format!(
                            "the stored type `{t}` (rdmalb stores {})",
                            TYPES.join(", ")
                        ));
                    }
                    list.push(match arg {
                        Some(p) => {
                            let ms = time(p).ok_or_else(|| format!("the period of `{t}`"))?;
                            format!("{base}({}ms)", ms.as_millis())
                        }
                        None => base.to_string(),
                    });
                }
                keys.push(("store", super::cond::list(&list)));
                i += 2;
            }
            "nopurge" => {
                approx.push("`nopurge` is not carried: a full table evicts its least recently used untracked entries".into());
                i += 1;
            }
            "peers" if Some(w(i + 1)) == shared_peers => {
                shared = true;
                i += 2;
            }
            "peers" => {
                approx.push(format!("`peers {}`: the table is not replicated (rdmalb can share one table between proxies instead, docs/rate-limits.md)", w(i + 1)));
                i += 2;
            }
            other => return Err(format!("the stick-table option `{other}`")),
        }
    }
    // HAProxy keeps entries without `expire` until the table is full: the
    // longest expiry rdmalb takes (24 days) comes closest.
    let expire = expire.unwrap_or(i32::MAX as u128);
    if expire == i32::MAX as u128 {
        approx.push("no `expire`: entries expire after 24 days (HAProxy keeps them until the table is full)".into());
    }
    keys.push(("expire", q(&format!("{expire}ms"))));
    if shared {
        keys.push(("shared", "true".into()));
    }
    out.push_str("\n[[stick_table]]\n");
    for (k, v) in keys {
        writeln!(out, "{k} = {v}").ok();
    }
    Ok(())
}

/// HAProxy's sizes: `100k` is 102400.
fn size(s: &str) -> Result<u64, String> {
    let (num, mul) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("`size {s}`"))
}

/// A stick fetch as test keys, `None` when `base` is not one; `table` is
/// the proxy's own table (what `src_*` without a table reads).
pub fn fetch(
    base: &str,
    arg: Option<&str>,
    table: Option<&str>,
) -> Result<Option<super::cond::TestToml>, String> {
    let mut keys: Vec<(&'static str, String)> = Vec::new();
    let own = |arg: Option<&str>| -> Result<String, String> {
        arg.filter(|a| !a.is_empty())
            .or(table)
            .map(table_name)
            .ok_or_else(|| format!("`{base}` outside a proxy with a stick-table"))
    };
    if base == "table_cnt" {
        keys.push(("table", q(&own(arg)?)));
    } else if let Some(what) = base.strip_prefix("src_") {
        if !readable(what) {
            return Err(format!("`{base}` is not a fetch rdmalb has"));
        }
        keys.push(("table", q(&own(arg)?)));
    } else if let Some(what) = base.strip_prefix("sc_") {
        if !readable(what) {
            return Err(format!("`{base}` is not a fetch rdmalb has"));
        }
        let args: Vec<&str> = arg.unwrap_or("").split(',').map(str::trim).collect();
        match args.as_slice() {
            [n] if n.parse::<u8>().is_ok() => keys.push(("counter", n.to_string())),
            _ => {
                return Err(format!(
                    "`{base}({})`: rdmalb reads a counter's own table only",
                    arg.unwrap_or("")
                ))
            }
        }
    } else if let Some((n, what)) = base.strip_prefix("sc").and_then(|r| r.split_once('_')) {
        if n.len() != 1 || !n.chars().all(|c| c.is_ascii_digit()) || !readable(what) {
            return Ok(None);
        }
        if arg.is_some_and(|a| !a.is_empty()) {
            return Err(format!(
                "`{base}({})`: rdmalb reads a counter's own table only",
                arg.unwrap_or("")
            ));
        }
    } else {
        return Ok(None);
    }
    let mut t = super::cond::TestToml {
        keys: vec![("fetch", q(base))],
        http_auth: None,
    };
    t.keys.extend(keys);
    Ok(Some(t))
}

/// `track-scN <key> [table <t>]` and `sc-inc-gpc0(N)` /
/// `sc-inc-gpc(IDX,N)` as rule keys; `None` when `args` is another
/// action. `table` is the proxy's own table.
pub fn action(args: &[String], table: &str) -> Option<Result<Vec<(&'static str, String)>, String>> {
    let action = args.first()?.as_str();
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    if let Some(n) = action.strip_prefix("track-sc") {
        if !matches!(n, "0" | "1" | "2") {
            return Some(Err(format!("`{action}` (rdmalb has sc0, sc1 and sc2)")));
        }
        let t = match (args.len(), arg(2)) {
            (2, _) => table.to_string(),
            (4, "table") => arg(3).to_string(),
            _ => return Some(Err(format!("`{action}` with options other than `table`"))),
        };
        return Some(Ok(vec![
            ("action", q(action)),
            ("key", q(arg(1))),
            ("table", q(&table_name(&t))),
        ]));
    }
    let (idx, counter) = if let Some(n) = action
        .strip_prefix("sc-inc-gpc0(")
        .or_else(|| action.strip_prefix("sc-inc-gpc1("))
    {
        (&action[10..11], n.trim_end_matches(')'))
    } else if let Some(a) = action.strip_prefix("sc-inc-gpc(") {
        match a.trim_end_matches(')').split_once(',') {
            Some((i, n)) => (i.trim(), n.trim()),
            None => return Some(Err(format!("`{action}`"))),
        }
    } else {
        return None;
    };
    if !matches!(idx, "0" | "1") || !matches!(counter, "0" | "1" | "2") || args.len() > 1 {
        return Some(Err(format!(
            "`{}` (rdmalb has gpc0 and gpc1 of sc0, sc1 and sc2)",
            args.join(" ")
        )));
    }
    Some(Ok(vec![
        ("action", q(&format!("sc-inc-gpc{idx}"))),
        ("counter", counter.to_string()),
    ]))
}
