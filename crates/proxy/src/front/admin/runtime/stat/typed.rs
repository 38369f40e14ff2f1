//! `show stat typed` and `show stat json` in HAProxy 2.6's layout: one
//! line (or JSON object) per filled field, naming the object (`F`rontend,
//! `B`ackend, `S`erver), its proxy and server ids, the field's position and
//! name, the process (always 1), the field's tags (origin, nature, scope)
//! and its type. Tags and types are HAProxy's for each field (its
//! `stat_fields` table); a field whose tags differ by object type says so.

use super::{Kind, Row, Value, COLUMNS};

/// A field's tags as HAProxy writes them in `typed`: origin, nature and
/// scope letters, then the value's type.
fn tags(column: &str, kind: Kind) -> (&'static str, &'static str) {
    match column {
        "pxname" | "svname" => ("KNS", "str"),
        "qcur" | "scur" => ("MGP", "u32"),
        "rate_max" if kind == Kind::Backend => ("MGP", "u32"),
        "qmax" | "smax" | "rate_max" | "req_rate_max" | "conn_rate_max" => ("MMP", "u32"),
        "slim" | "rate_lim" => ("CLP", "u32"),
        "status" => ("SGP", "str"),
        "weight" | "uweight" => ("MaP", "u32"),
        "act" | "bck" if kind == Kind::Server => ("SGP", "u32"),
        "act" | "bck" => ("MGP", "u32"),
        "lastchg" => ("MAP", "u32"),
        "downtime" => ("MCP", "u32"),
        "pid" => ("KGP", "u32"),
        "iid" | "sid" => ("KGS", "u32"),
        "type" | "check_rise" | "check_fall" | "check_health" => ("CGS", "u32"),
        "rate" if kind == Kind::Backend => ("MGP", "u32"),
        "rate" | "req_rate" | "conn_rate" => ("MRP", "u32"),
        "check_status" | "last_chk" | "check_desc" => ("MOP", "str"),
        "addr" | "mode" | "algo" | "cookie" => ("CGS", "str"),
        _ => ("MCP", "u64"),
    }
}

fn letter(kind: Kind) -> &'static str {
    match kind {
        Kind::Frontend => "F",
        Kind::Backend => "B",
        Kind::Server => "S",
    }
}

/// The filled fields of `row`: position, name, value.
fn fields(row: &Row) -> impl Iterator<Item = (usize, &'static str, &Value)> {
    COLUMNS
        .iter()
        .enumerate()
        .filter_map(|(i, c)| row.get(c).map(|v| (i, *c, v)))
}

fn ids(row: &Row) -> (u64, u64) {
    (
        row.number("iid").unwrap_or(0),
        row.number("sid").unwrap_or(0),
    )
}

/// `show stat typed`.
pub fn typed(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        let (iid, sid) = ids(row);
        for (pos, name, value) in fields(row) {
            let (tags, ty) = tags(name, row.kind);
            let v = match value {
                Value::Num(n) => n.to_string(),
                Value::Text(t) => t.replace('\n', " "),
            };
            out.push_str(&format!(
                "{}.{iid}.{sid}.{pos}.{name}.1:{tags}:{ty}:{v}\n",
                letter(row.kind)
            ));
        }
    }
    out
}

/// HAProxy's JSON names of a field's tag letters.
pub fn tag_names(tags: &str) -> serde_json::Value {
    let mut t = tags.chars();
    let origin = match t.next() {
        Some('M') => "Metric",
        Some('S') => "Status",
        Some('K') => "Key",
        Some('C') => "Config",
        _ => "Product",
    };
    let nature = match t.next() {
        Some('A') => "Age",
        Some('a') => "Avg",
        Some('C') => "Counter",
        Some('D') => "Duration",
        Some('G') => "Gauge",
        Some('L') => "Limit",
        Some('M') => "Max",
        Some('m') => "Min",
        Some('N') => "Name",
        Some('O') => "Output",
        Some('R') => "Rate",
        _ => "Time",
    };
    let scope = match t.next() {
        Some('P') => "Process",
        Some('S') => "Service",
        Some('s') => "System",
        _ => "Cluster",
    };
    serde_json::json!({ "origin": origin, "nature": nature, "scope": scope })
}

/// `show stat json`: an array per row of HAProxy's field objects.
pub fn json(rows: &[Row]) -> serde_json::Value {
    let object = |row: &Row| {
        let (iid, sid) = ids(row);
        let kind = match row.kind {
            Kind::Frontend => "Frontend",
            Kind::Backend => "Backend",
            Kind::Server => "Server",
        };
        fields(row)
            .map(|(pos, name, value)| {
                let (tags, ty) = tags(name, row.kind);
                serde_json::json!({
                    "objType": kind,
                    "proxyId": iid,
                    "id": sid,
                    "field": { "pos": pos, "name": name },
                    "processNum": 1,
                    "tags": tag_names(tags),
                    "value": { "type": ty, "value": value.json() },
                })
            })
            .collect::<Vec<_>>()
    };
    serde_json::Value::Array(
        rows.iter()
            .map(|r| serde_json::Value::from(object(r)))
            .collect(),
    )
}
