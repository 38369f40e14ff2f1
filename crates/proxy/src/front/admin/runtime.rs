//! The runtime API: `POST /runtime` on the admin listener, the body one or
//! more commands in the words of HAProxy's stats socket (separated by `;`
//! or new lines), the answer plain text as HAProxy's. `rdmalb ctl` sends
//! them. Every command needs the admin token ([`super::guard`]: bearer
//! token, no cross-origin request, no form content type), reads included.
//!
//! Commands (HAProxy's spelling accepted where one exists):
//! - `show stat [json]` — [`stat`]: HAProxy's CSV columns, or JSON;
//! - `show info [json]` — `Name: value` lines as HAProxy's;
//! - `set node NODE state ready|drain|maint` — also `set server
//!   SITE/NODE state …`, `enable server SITE/NODE`, `disable server
//!   SITE/NODE` (maint);
//! - `set node NODE weight N|N%` — also `set weight SITE/NODE N|N%`, `set
//!   server SITE/NODE weight N|N%` (N % of the configured weight);
//! - `get weight NODE` — also `get weight SITE/NODE`: `current (initial
//!   initial)` as HAProxy answers;
//! - `move node NODE site SITE` — through the reconfiguration agent's
//!   site lock and role-word CAS (`site idle`: the idle pool);
//! - `show map [MAP]`, `add map MAP KEY VALUE`, `set map MAP KEY VALUE`,
//!   `del map MAP KEY`, `clear map MAP` — [`maps`]: the rules' maps
//!   (docs/rules.md), changed at once for every worker, not in the file (a
//!   reload drops the change, as HAProxy's);
//! - `help`.
//!
//! Answers: 200 with the commands' output when all succeeded; otherwise
//! the status of the first failure (400 unknown command or bad argument,
//! 404 unknown node or site, 409 a move that could not happen now, 502 a
//! window not reached, 503 no agent), its message, and no later command
//! run. One request takes at most [`MAX_COMMANDS`] commands (413, none
//! run, for more) and answers at most [`MAX_ANSWER`] bytes (507 at the
//! command that passes it, the answer cut there, no later command run);
//! when a request of several commands stops early, its last line says how
//! many ran and where it stopped. Between two commands the control runtime
//! runs its other tasks. State set here lives in the node's runtime state: it survives
//! SIGHUP reloads (see `balance::control`).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};

use super::AdminState as Admin;
use crate::balance::{AdminState, ControlSource, NodeState};
use crate::reconfig::ClaimOutcome;

mod maps;
pub mod stat;

/// The endpoint's path.
pub const PATH: &str = "/runtime";

/// Largest command body.
const MAX_BODY: usize = 64 * 1024;
/// Most commands in one request (HAProxy takes any number on its socket;
/// here one request must not hold the control runtime for long).
pub const MAX_COMMANDS: usize = 100;
/// Largest answer: a request stops at the command that passes it.
pub const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// What a command produced, or why it failed.
type Outcome = Result<String, (StatusCode, String)>;

fn bad(message: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, message.into())
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Answers `POST /runtime` on a connection that came in on `local`.
pub async fn serve<B>(state: &Admin, req: Request<B>, local: SocketAddr) -> Response<Full<Bytes>>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if req.method() != http::Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "use POST with the commands as the body\n".into(),
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    if let Some(refused) = super::guard::refusal(state, &req, local) {
        return refused;
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the commands (at most {MAX_BODY} bytes): {e}\n"),
            )
        }
    };
    let Ok(body) = std::str::from_utf8(&body) else {
        return text(
            StatusCode::BAD_REQUEST,
            "the commands are not UTF-8 text\n".into(),
        );
    };
    match split(body) {
        Ok(commands) => run_all(state, &commands, MAX_ANSWER).await,
        Err((status, message)) => text(status, message),
    }
}

/// The commands of a request body, in order; refused when there is none
/// or more than [`MAX_COMMANDS`].
fn split(body: &str) -> Result<Vec<&str>, (StatusCode, String)> {
    let commands: Vec<&str> = body
        .split([';', '\n'])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    if commands.is_empty() {
        return Err(bad("no command (try `help`)\n"));
    }
    if commands.len() > MAX_COMMANDS {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} commands in one request; at most {MAX_COMMANDS} are taken (none ran): send them in several requests\n",
                commands.len()
            ),
        ));
    }
    Ok(commands)
}

/// Runs `commands` in order, yielding to the control runtime between two,
/// until one fails or the answer passes `max_answer` bytes (it is then
/// cut there); a request of several commands that stops early ends with a
/// line saying which ran.
async fn run_all(state: &Admin, commands: &[&str], max_answer: usize) -> Response<Full<Bytes>> {
    let mut out = String::new();
    for (i, command) in commands.iter().enumerate() {
        let (status, message, ran) = match run(state, command).await {
            Ok(o) if out.len() + o.len() <= max_answer => {
                out.push_str(&o);
                // A long list of commands does not hold the control
                // runtime (signals, reloads, health checks) between two.
                tokio::task::yield_now().await;
                continue;
            }
            Ok(o) => {
                out.push_str(&o[..floor_char_boundary(&o, max_answer.saturating_sub(out.len()))]);
                out.push('\n');
                let message = format!("answer cut: it passed {max_answer} bytes");
                (StatusCode::INSUFFICIENT_STORAGE, message, i + 1)
            }
            Err((status, message)) => {
                tracing::info!(command, status = status.as_u16(), %message, "runtime command refused");
                (status, message, i)
            }
        };
        out.push_str(&message);
        out.push('\n');
        if commands.len() > 1 {
            let _ = writeln!(
                out,
                "# {ran} of {} commands ran; stopped at command {} (`{command}`); the rest were not run",
                commands.len(),
                i + 1
            );
        }
        return text(status, out);
    }
    text(StatusCode::OK, out)
}

/// The largest index `<= at` on a character boundary of `s`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

const HELP: &str = "\
show stat [json]                     : HAProxy's stats CSV (or JSON): one row per node, one BACKEND row per site
show info [json]                     : process information
set node NODE state ready|drain|maint : change a node's administrative state
set node NODE weight N|N%            : change a node's weight (N% of its configured weight)
get weight NODE                      : current and configured weight
move node NODE site SITE|idle        : move a node through the reconfiguration agent
show map [MAP]                       : the maps (or one map's entries); MAP is a [[map]] name or file
add map MAP KEY VALUE                : add an entry (at once, every worker; not written to the file:
set map MAP KEY VALUE                :   a reload reads the file again and drops the change)
del map MAP KEY                      : delete a key's entries
clear map MAP                        : delete every entry
(HAProxy's `set server SITE/NODE state|weight …`, `set weight SITE/NODE …`,
 `get weight SITE/NODE`, `enable server SITE/NODE`, `disable server SITE/NODE` are accepted)
";

/// Runs one command.
pub async fn run(state: &Admin, command: &str) -> Outcome {
    let words: Vec<&str> = command.split_whitespace().collect();
    match words.as_slice() {
        ["help"] => Ok(HELP.to_string()),
        ["show", "stat", rest @ ..] => show_stat(state, rest),
        ["show", "info", rest @ ..] => show_info(state, rest),
        ["set", "node", node, "state", s] | ["set", "server", node, "state", s] => {
            set_state(state, node, s)
        }
        ["enable", "server", node] => set_state(state, node, "ready"),
        ["disable", "server", node] => set_state(state, node, "maint"),
        ["set", "node", node, "weight", w]
        | ["set", "server", node, "weight", w]
        | ["set", "weight", node, w] => set_weight(state, node, w),
        ["get", "weight", node] => {
            let n = find(state, node)?;
            let c = n.control();
            Ok(format!("{} (initial {})\n", c.weight, c.initial_weight))
        }
        ["move", "node", node, "site", site] => move_node(state, node, site).await,
        w => maps::run(state, w).unwrap_or_else(|| unknown(command)),
    }
}

fn unknown(command: &str) -> Outcome {
    Err(bad(format!(
        "unknown command or wrong arguments: `{command}` (try `help`)"
    )))
}

/// Finds a node by `NODE` or HAProxy's `SITE/NODE` (the site must then be
/// the one the node serves now).
fn find(state: &Admin, spec: &str) -> Result<Arc<NodeState>, (StatusCode, String)> {
    let backends = state.backends.load();
    let (site, name) = match spec.split_once('/') {
        Some((s, n)) => (Some(s), n),
        None => (None, spec),
    };
    let Some(node) = backends.nodes().iter().find(|n| n.name == name) else {
        return Err((StatusCode::NOT_FOUND, format!("no node named `{name}`")));
    };
    if let Some(site) = site {
        let serves = backends.site_of(node).map(|s| s.name.as_str());
        if serves != Some(site) {
            return Err((
                StatusCode::NOT_FOUND,
                format!(
                    "node `{name}` is not in site `{site}` (it serves {})",
                    serves.unwrap_or("no site: idle pool")
                ),
            ));
        }
    }
    Ok(Arc::clone(node))
}

fn set_state(state: &Admin, node: &str, word: &str) -> Outcome {
    let Some(admin) = AdminState::parse(word) else {
        return Err(bad(format!(
            "`{word}` is not a node state (expected {})",
            AdminState::ACCEPTED
        )));
    };
    let n = find(state, node)?;
    n.set_admin_state(admin, ControlSource::Runtime);
    Ok(String::new())
}

fn set_weight(state: &Admin, node: &str, word: &str) -> Outcome {
    let (digits, percent) = match word.strip_suffix('%') {
        Some(d) => (d, true),
        None => (word, false),
    };
    let max = crate::config::Node::MAX_WEIGHT;
    let value: u32 = digits
        .parse()
        .ok()
        .filter(|v| percent || *v <= max)
        .ok_or_else(|| {
            bad(format!(
                "`{word}` is not a weight (expected 0..{max}, or a percentage such as 50%)"
            ))
        })?;
    let n = find(state, node)?;
    if percent {
        n.set_weight_percent(value, ControlSource::Runtime);
    } else {
        n.set_weight(value, ControlSource::Runtime);
    }
    Ok(String::new())
}

fn json_flag(rest: &[&str]) -> Result<bool, (StatusCode, String)> {
    match rest {
        [] | ["typed"] => Ok(false),
        ["json"] => Ok(true),
        other => Err(bad(format!(
            "unexpected `{}` (expected nothing or `json`)",
            other.join(" ")
        ))),
    }
}

fn show_stat(state: &Admin, rest: &[&str]) -> Outcome {
    let json = json_flag(rest)?;
    let queued = state.admission.as_ref().map(|a| a.status().queued);
    let waiting = |site: &str| {
        queued
            .as_ref()
            .and_then(|q| q.get(site))
            .map_or(0, |&n| n as u64)
    };
    let rows = stat::rows(&state.backends.load(), &waiting);
    Ok(if json {
        let mut s = serde_json::to_string_pretty(&stat::json(&rows)).unwrap_or_default();
        s.push('\n');
        s
    } else {
        stat::csv(&rows)
    })
}

fn show_info(state: &Admin, rest: &[&str]) -> Outcome {
    let json = json_flag(rest)?;
    let config = state.config.load();
    let backends = state.backends.load();
    let uptime = std::time::SystemTime::now()
        .duration_since(state.started_at)
        .map_or(0, |d| d.as_secs());
    let (d, h, m, s) = (
        uptime / 86400,
        uptime % 86400 / 3600,
        uptime % 3600 / 60,
        uptime % 60,
    );
    let nodes = backends.nodes();
    let inflight: usize = nodes.iter().map(|n| n.inflight()).sum();
    let requests: u64 = nodes.iter().map(|n| n.traffic().requests_total).sum();
    let fields: Vec<(&str, String)> = vec![
        ("Name", "rdmalb".into()),
        ("Version", env!("CARGO_PKG_VERSION").into()),
        ("Nbthread", config.global.workers.to_string()),
        ("Process_num", "1".into()),
        ("Pid", std::process::id().to_string()),
        ("Uptime", format!("{d}d {h}h{m:02}m{s:02}s")),
        ("Uptime_sec", uptime.to_string()),
        ("Maxconn", config.limits.max_connections.to_string()),
        ("CumReq", requests.to_string()),
        ("Listeners", config.listeners.len().to_string()),
        ("Proxy_id", config.global.proxy_id.to_string()),
        ("Config_file", config.source.display().to_string()),
        ("Balance", backends.balance().to_string()),
        ("Sites", backends.sites().len().to_string()),
        ("Nodes", nodes.len().to_string()),
        (
            "Nodes_up",
            nodes.iter().filter(|n| n.admits()).count().to_string(),
        ),
        ("Inflight", inflight.to_string()),
    ];
    if json {
        let map: serde_json::Map<String, serde_json::Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v)))
            .collect();
        let mut s = serde_json::to_string_pretty(&map).unwrap_or_default();
        s.push('\n');
        return Ok(s);
    }
    let mut out = String::new();
    for (k, v) in fields {
        let _ = writeln!(out, "{k}: {v}");
    }
    out.push('\n');
    Ok(out)
}

async fn move_node(state: &Admin, node: &str, site: &str) -> Outcome {
    let Some(agent) = &state.reconfig else {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            "this proxy runs no reconfiguration agent (no node has a sidecar window)".into(),
        ));
    };
    let result = agent.move_node(node, site).await;
    tracing::info!(node, site, result = ?result, "runtime move");
    let status = super::reconfig::move_status(&result);
    match result {
        Ok(ClaimOutcome::Claimed { node, site, epoch }) => Ok(format!(
            "node {node} claimed for {site} (epoch {epoch}); its sidecar applies the role\n"
        )),
        Ok(other) => Err((
            status,
            format!("node not moved: {}", serde_json::json!(other)),
        )),
        Err(e) => Err((status, e.to_string())),
    }
}

#[cfg(test)]
mod tests;
