//! The runtime commands, one implementation behind two doors: `POST
//! /runtime` on the admin listener (the body one or more commands
//! separated by `;` or new lines; `rdmalb ctl` sends them; every command
//! needs the admin token, [`super::guard`], and runs at the admin level)
//! and HAProxy's stats socket ([`super::socket`], at its configured
//! level). Both run each command through a [`Session`]; the answers are
//! HAProxy 2.6's text, each followed by an empty line.
//!
//! The commands are [`Command`]: [`command::COMMANDS`] names each one,
//! its usage, the level it needs and how its words parse (and prints
//! `help`; an unknown command gets HAProxy's usage answer), [`execute`]
//! holds one handler per command. Their answers are HAProxy's (`show
//! stat` [`stat`], `show info`, `show servers state`, the maps
//! [`maps`] (docs/rules.md: a change is for every worker, not in the
//! file), the stick tables [`tables`] (docs/rate-limits.md), `acme`
//! [`acme`] (docs/tls.md)); `set node`, `move node` and `release node`
//! are ours (docs/operations.md), and `show sess` [`sessions`] has
//! HAProxy's name over the counts rdmalb keeps.
//!
//! `POST /runtime` answers 200 with the commands' output when all succeeded; otherwise
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

mod acme;
pub mod command;
mod info;
mod maps;
mod servers;
pub mod session;
mod sessions;
pub mod stat;
pub mod tables;

use crate::config::Level;
pub use command::{bad, usage, Command, Outcome};
pub use session::Session;

/// The endpoint's path.
pub const PATH: &str = "/runtime";

/// Largest command body.
const MAX_BODY: usize = 64 * 1024;
/// Most commands in one request (HAProxy takes any number on its socket;
/// here one request must not hold the control runtime for long).
pub const MAX_COMMANDS: usize = 100;
/// Largest answer: a request stops at the command that passes it.
pub const MAX_ANSWER: usize = 8 * 1024 * 1024;

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
    let mut session = Session::new(Level::Admin);
    for (i, command) in commands.iter().enumerate() {
        let (status, message, ran) = match session.run(state, command).await {
            // `quit`: the commands after it are not run, as on the socket.
            Ok(None) => break,
            Ok(Some(mut o)) if out.len() + o.len() < max_answer => {
                // Each answer ends with an empty line, as on the socket.
                o.push('\n');
                out.push_str(&o);
                // A long list of commands does not hold the control
                // runtime (signals, reloads, health checks) between two.
                tokio::task::yield_now().await;
                continue;
            }
            Ok(Some(o)) => {
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

/// Runs one command at the admin level (the HTTP door's), in a session
/// of its own (`quit` answers nothing).
pub async fn run(state: &Admin, command: &str) -> Outcome {
    Session::new(Level::Admin)
        .run(state, command)
        .await
        .map(Option::unwrap_or_default)
}

/// Runs `command` for `session`: the one handler of each [`Command`];
/// `Ok(None)` after `quit`, else the command's answer.
pub(crate) async fn execute(
    state: &Admin,
    command: Command<'_>,
    session: &mut Session,
) -> Result<Option<String>, command::Refusal> {
    let outcome = match command {
        Command::ShowStat { args } => show_stat(state, args),
        Command::ShowInfo { args } => info::show_info(state, args),
        Command::ShowBackend => servers::show_backend(state),
        Command::ShowServersState { backend } => servers::show_servers_state(state, backend),
        Command::ShowSess => sessions::show(state),
        Command::ShowCliLevel => Ok(format!("{}\n", session.level.as_str())),
        Command::SetState { node, state: word } => set_state(state, node, word),
        Command::SetWeight { node, weight } => set_weight(state, node, weight),
        Command::SetAddr { node, args } => servers::set_addr(&*find(state, node)?, args),
        Command::SetServerUsage { node } => {
            find(state, node)?;
            Err(bad(
                "usage: set server <backend>/<server> addr | state | weight",
            ))
        }
        Command::GetWeight { node } => {
            let n = find(state, node)?;
            let c = n.control();
            Ok(format!("{} (initial {})\n", c.weight, c.initial_weight))
        }
        Command::MoveNode { node, site } => move_node(state, node, site).await,
        Command::ReleaseNode { node } => release_node(state, node).await,
        Command::AcmeStatus => acme::status(state),
        Command::AcmeRenew { certificate } => acme::renew(state, certificate),
        Command::ShowMap { map } => maps::show(state, map),
        Command::EditMap { map, edit } => maps::edit(state, map, edit),
        Command::ShowTable { table, filters } => tables::show(state, table, filters),
        Command::ClearTable { table, filters } => tables::clear(state, table, filters),
        Command::Help { words } => Ok(usage(words, true)),
        Command::Lower(to) => session.lower(to),
        Command::Prompt => {
            session.prompt = !session.prompt;
            Ok(String::new())
        }
        Command::SetTimeout(timeout) => {
            session.timeout = timeout;
            Ok(String::new())
        }
        Command::Quit => return Ok(None),
    };
    outcome.map(Some)
}

/// Finds a node by `NODE` or HAProxy's `SITE/NODE` (the site must then be
/// the one the node serves now).
fn find(state: &Admin, spec: &str) -> Result<Arc<NodeState>, (StatusCode, String)> {
    let backends = state.backends.load();
    let (site, name) = match spec.split_once('/') {
        Some((s, n)) => (Some(s), n),
        None => (None, spec),
    };
    // HAProxy's answers to `<bk>/<srv>` naming no backend, or no server in it.
    let not_found = |m: &str| Err((StatusCode::NOT_FOUND, m.to_string()));
    if site.is_some_and(|s| !backends.sites().iter().any(|b| b.name == s)) {
        return not_found("No such backend.");
    }
    let Some(node) = backends.nodes().iter().find(|n| n.name == name) else {
        return match site {
            Some(_) => not_found("No such server."),
            None => not_found(&format!("no node named `{name}`")),
        };
    };
    if site.is_some_and(|s| backends.site_of(node).map(|b| b.name.as_str()) != Some(s)) {
        return not_found("No such server.");
    }
    Ok(Arc::clone(node))
}

fn set_state(state: &Admin, node: &str, word: &str) -> Outcome {
    let Some(admin) = AdminState::parse(word) else {
        return Err(bad(
            "'set server <srv> state' expects 'ready', 'drain' and 'maint'.",
        ));
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
    // HAProxy finds the server first, then reads the weight.
    let n = find(state, node)?;
    let value: u32 = digits
        .parse()
        .map_err(|_| bad("Empty weight string empty or preceded by garbage"))?;
    if !percent && value > max {
        return Err(bad(format!(
            "Absolute weight can only be between 0 and {max} inclusive."
        )));
    }
    if percent {
        n.set_weight_percent(value, ControlSource::Runtime);
    } else {
        n.set_weight(value, ControlSource::Runtime);
    }
    Ok(String::new())
}

fn show_stat(state: &Admin, rest: &[&str]) -> Outcome {
    let rows = stat::rows(state);
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|r| match r.get("pxname") {
            Some(stat::Value::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let filter =
        stat::Filter::parse(rest, &names).map_err(|m| (StatusCode::NOT_FOUND, m.into()))?;
    let rows: Vec<stat::Row> = rows.iter().filter(|r| filter.keeps(r)).cloned().collect();
    Ok(match filter.format {
        stat::Format::Csv => stat::csv(&rows),
        stat::Format::Typed => stat::typed(&rows),
        stat::Format::Json => {
            let mut s = stat::json(&rows).to_string();
            s.push('\n');
            s
        }
    })
}

/// The reconfiguration agent, or 503 when this proxy runs none.
fn agent(state: &Admin) -> Result<&crate::reconfig::Agent, (StatusCode, String)> {
    state.reconfig.as_deref().ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "this proxy runs no reconfiguration agent (no node has a sidecar window)".into(),
        )
    })
}

async fn move_node(state: &Admin, node: &str, site: &str) -> Outcome {
    let agent = agent(state)?;
    let result = agent.move_node(node, site).await;
    tracing::info!(node, site, result = ?result, "runtime move");
    let status = super::reconfig::move_status(&result);
    let pin = agent.manual_pin();
    match result {
        Ok(ClaimOutcome::Claimed { node, site, epoch }) if pin.is_zero() => Ok(format!(
            "node {node} claimed for {site} (epoch {epoch}); its sidecar applies the role\n"
        )),
        Ok(ClaimOutcome::Claimed { node, site, epoch }) => Ok(format!(
            "node {node} claimed for {site} (epoch {epoch}); its sidecar applies the role; \
             pinned for {} (release node {node})\n",
            rdmalb_base::duration::format(pin)
        )),
        Ok(other) => Err((
            status,
            format!("node not moved: {}", serde_json::json!(other)),
        )),
        Err(e) => Err((status, e.to_string())),
    }
}

async fn release_node(state: &Admin, node: &str) -> Outcome {
    let agent = agent(state)?;
    let result = agent.release_node(node).await;
    tracing::info!(node, result = ?result, "runtime release");
    match result {
        Ok(old) if old.holds_at(rdmalb_base::time::unix_now_ms()) => Ok(format!(
            "node {node} released: the agents may move it again\n"
        )),
        Ok(_) => Ok(format!("node {node} was not pinned\n")),
        Err(e) => Err((super::reconfig::move_error_status(&e), e.to_string())),
    }
}

#[cfg(test)]
pub(crate) mod tests;
