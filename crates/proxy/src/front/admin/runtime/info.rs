//! `show info [json|typed]`: HAProxy 2.6's fields, in its order, for the
//! ones rdmalb has a meaning for (the ones hatop requires among them:
//! `Name`, `Version`, `Release_date`, `Nbproc`, `Process_num`, `Pid`,
//! `Uptime`, `Maxconn`, `CurrConns`, `Maxpipes`, `PipesUsed`, `Tasks`,
//! `Run_queue`, `node`), then rdmalb's own (`Proxy_id`, `Config_file`,
//! `Balance`, `Sites`, `Nodes`, `Nodes_up`, `Inflight`).
//!
//! `Release_date` is the day the running binary was built (its file's
//! date); `Tasks` and `Run_queue` are the control runtime's (the one
//! serving this command) live tasks and queued ones; `Maxpipes` and
//! `PipesUsed` are 0: rdmalb splices nothing.

use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use super::{Admin, Outcome};

/// `Name: value` pairs, in order.
fn fields(state: &Admin) -> Vec<(&'static str, String)> {
    let config = state.config.load();
    let backends = state.backends.load();
    let uptime = state.uptime_secs();
    let (d, h, m, s) = (
        uptime / 86400,
        uptime % 86400 / 3600,
        uptime % 3600 / 60,
        uptime % 60,
    );
    let nodes = backends.nodes();
    let traffic: Vec<_> = nodes.iter().map(|n| n.traffic()).collect();
    let conns: usize = state.frontends.iter().map(|f| f.open.load(Relaxed)).sum();
    let cum_conns: u64 = state
        .frontends
        .iter()
        .map(|f| f.counters.accepted.load(Relaxed))
        .sum();
    let (tasks, run_queue) = tokio::runtime::Handle::try_current().map_or((0, 0), |h| {
        let m = h.metrics();
        (m.num_alive_tasks(), m.global_queue_depth())
    });
    let maxconn = config.limits.max_connections.to_string();
    vec![
        ("Name", "rdmalb".into()),
        ("Version", env!("CARGO_PKG_VERSION").into()),
        ("Release_date", release_date()),
        ("Nbthread", config.global.workers.to_string()),
        ("Nbproc", "1".into()),
        ("Process_num", "1".into()),
        ("Pid", std::process::id().to_string()),
        ("Uptime", format!("{d}d {h}h{m:02}m{s:02}s")),
        ("Uptime_sec", uptime.to_string()),
        ("Maxconn", maxconn.clone()),
        ("Hard_maxconn", maxconn),
        ("CurrConns", conns.to_string()),
        ("CumConns", cum_conns.to_string()),
        (
            "CumReq",
            traffic
                .iter()
                .map(|t| t.requests_total)
                .sum::<u64>()
                .to_string(),
        ),
        ("Maxpipes", "0".into()),
        ("PipesUsed", "0".into()),
        ("PipesFree", "0".into()),
        ("Tasks", tasks.to_string()),
        ("Run_queue", run_queue.to_string()),
        ("node", hostname()),
        ("Stopping", "0".into()),
        ("Listeners", config.listeners.len().to_string()),
        (
            "TotalBytesOut",
            traffic
                .iter()
                .map(|t| t.bytes_out_total)
                .sum::<u64>()
                .to_string(),
        ),
        (
            "Start_time_sec",
            rdmalb_base::time::unix_secs(state.started_at).to_string(),
        ),
        ("Proxy_id", config.global.proxy_id.to_string()),
        ("Config_file", config.source.display().to_string()),
        ("Balance", backends.balance().to_string()),
        ("Sites", backends.sites().len().to_string()),
        ("Nodes", nodes.len().to_string()),
        (
            "Nodes_up",
            nodes.iter().filter(|n| n.admits()).count().to_string(),
        ),
        (
            "Inflight",
            nodes
                .iter()
                .map(|n| n.inflight())
                .sum::<usize>()
                .to_string(),
        ),
    ]
}

/// The day the running binary was written, as HAProxy's `YYYY/MM/DD`.
fn release_date() -> String {
    let built = std::env::current_exe()
        .and_then(std::fs::metadata)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let days = rdmalb_base::time::unix_secs(built) / 86400;
    let (y, m, d) = civil(days as i64);
    format!("{y:04}/{m:02}/{d:02}")
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(super) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// HAProxy 2.6's position, tags (origin, nature, scope) and type of each
/// field, for `typed` and `json`; rdmalb's own fields follow HAProxy's last
/// position (71).
fn field(name: &str) -> (usize, &'static str, &'static str) {
    match name {
        "Name" => (0, "POS", "str"),
        "Version" => (1, "POS", "str"),
        "Release_date" => (2, "POS", "str"),
        "Nbthread" => (3, "CGS", "u32"),
        "Nbproc" => (4, "CGS", "u32"),
        "Process_num" => (5, "KGP", "u32"),
        "Pid" => (6, "SGP", "u32"),
        "Uptime" => (7, "MDP", "str"),
        "Uptime_sec" => (8, "MDP", "u32"),
        "Maxconn" => (15, "CLP", "u32"),
        "Hard_maxconn" => (16, "CLP", "u32"),
        "CurrConns" => (17, "MGP", "u32"),
        "CumConns" => (18, "MCP", "u32"),
        "CumReq" => (19, "MCP", "u32"),
        "Maxpipes" => (23, "CLP", "u32"),
        "PipesUsed" => (24, "MGP", "u32"),
        "PipesFree" => (25, "MGP", "u32"),
        "Tasks" => (47, "MGP", "u32"),
        "Run_queue" => (48, "MGP", "u32"),
        "node" => (50, "COS", "str"),
        "Stopping" => (52, "MGP", "u32"),
        "Listeners" => (55, "MGP", "u32"),
        "TotalBytesOut" => (61, "MGP", "u64"),
        "Start_time_sec" => (70, "MDP", "u32"),
        "Proxy_id" => (72, "CGS", "u32"),
        "Config_file" => (73, "COS", "str"),
        "Balance" => (74, "COS", "str"),
        "Sites" => (75, "CGS", "u32"),
        "Nodes" => (76, "CGS", "u32"),
        "Nodes_up" => (77, "MGP", "u32"),
        _ => (78, "MGP", "u32"),
    }
}

pub fn show_info(state: &Admin, rest: &[&str]) -> Outcome {
    let fields = fields(state);
    let mut out = String::new();
    // HAProxy ignores the words it does not know.
    if rest.contains(&"json") {
        let fields: Vec<serde_json::Value> = fields
            .into_iter()
            .map(|(k, v)| {
                let (pos, tags, ty) = field(k);
                let value = match ty {
                    "str" => serde_json::Value::from(v),
                    _ => v
                        .parse::<u64>()
                        .map_or(serde_json::Value::from(v), Into::into),
                };
                serde_json::json!({
                    "field": { "pos": pos, "name": k },
                    "processNum": 1,
                    "tags": super::stat::tag_names(tags),
                    "value": { "type": ty, "value": value },
                })
            })
            .collect();
        out = serde_json::Value::from(fields).to_string();
        out.push('\n');
    } else if rest.contains(&"typed") {
        for (k, v) in fields {
            let (pos, tags, ty) = field(k);
            out.push_str(&format!("{pos}.{k}.1:{tags}:{ty}:{v}\n"));
        }
    } else {
        for (k, v) in fields {
            out.push_str(&format!("{k}: {v}\n"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(20_454), (2026, 1, 1));
        assert_eq!(super::civil(11_016), (2000, 2, 29));
    }
}
