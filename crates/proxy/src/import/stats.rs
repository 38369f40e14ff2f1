//! HAProxy's operational surface carried over: `stats socket` lines of the
//! `global` section become `[[stats_socket]]` entries (path or loopback
//! address, `mode`, `user`/`uid`, `group`/`gid`, `level`), `stats timeout`
//! every entry's `timeout` (HAProxy's is global: it applies to every
//! socket), and a frontend's `monitor-uri` its listeners' `monitor_uri`.
//!
//! What is not carried: `abns@`/`fd@` addresses and `expose-fd listeners`
//! (rdmalb hands its sockets to a restarted process itself), other bind
//! options, `stats maxconn` (rdmalb's socket serves 10 sessions at once,
//! HAProxy's default), and `monitor fail` conditions other than
//! `nbsrv(<backend>) lt <n>` (carried as `monitor_fail`).

use std::fmt::Write as _;
use std::net::SocketAddr;

use std::time::Duration;

use super::lexer::Line;
use super::site::q;
use super::{Kind, Note};
use crate::config::StatsSocket as StatsSocketConfig;

/// The shortest `timeout` rdmalb's stats socket takes.
const MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The `stats` lines of the `global` section.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    sockets: Vec<StatsSocket>,
    /// `stats timeout`, as rdmalb writes a duration.
    timeout: Option<String>,
}

/// One `stats socket` line.
#[derive(Debug, Clone)]
struct StatsSocket {
    /// `path = …` or `listen = …`, as TOML.
    endpoint: String,
    options: Vec<(&'static str, String)>,
}

fn note(line: &Line, kind: Kind, why: String) -> Note {
    let directive = format!("{} {}", line.keyword(), line.word(1));
    Note::new(line.number, directive.trim(), kind, why)
}

/// A `stats …` line of the `global` section.
pub fn global(stats: &mut Stats, line: &Line, notes: &mut Vec<Note>) {
    match line.word(1) {
        "socket" => {
            if let Some(s) = socket(line, notes) {
                stats.sockets.push(s);
            }
        }
        "timeout" => match super::sections::time(line.word(2)) {
            Some(t) if (MIN_TIMEOUT..=StatsSocketConfig::MAX_TIMEOUT).contains(&t) => {
                stats.timeout = Some(rdmalb_base::duration::format(t));
            }
            _ => notes.push(note(
                line,
                Kind::Unsupported,
                format!(
                    "`{}` is not a timeout rdmalb's stats socket takes (1s to 1d); it keeps 10 s",
                    line.word(2)
                ),
            )),
        },
        "maxconn" => notes.push(note(
            line,
            Kind::Approximated,
            "rdmalb's stats socket serves 10 sessions at once (HAProxy's default); the others wait"
                .into(),
        )),
        _ => notes.push(note(
            line,
            Kind::Unsupported,
            "not supported in the global section".into(),
        )),
    }
}

/// `stats socket <address> [options]`.
fn socket(line: &Line, notes: &mut Vec<Note>) -> Option<StatsSocket> {
    let address = line.word(2);
    let endpoint = if let Some(rest) = address
        .strip_prefix("ipv4@")
        .or(address.strip_prefix("ipv6@"))
    {
        let Ok(addr) = rest.parse::<SocketAddr>() else {
            notes.push(note(
                line,
                Kind::Unsupported,
                format!("`{address}` is not an address rdmalb can listen on; no stats socket made"),
            ));
            return None;
        };
        if addr.ip().is_loopback() {
            format!("listen = {}", q(&addr.to_string()))
        } else {
            notes.push(note(line, Kind::Approximated, format!("rdmalb's stats socket has no authentication and listens on loopback only: 127.0.0.1:{} instead of {addr}", addr.port())));
            format!("listen = {}", q(&format!("127.0.0.1:{}", addr.port())))
        }
    } else if address.starts_with('/') || address.starts_with("unix@") {
        format!("path = {}", q(address.trim_start_matches("unix@")))
    } else {
        notes.push(note(
            line,
            Kind::Unsupported,
            format!(
                "`{address}` is not a UNIX path or an ipv4@/ipv6@ address; no stats socket made"
            ),
        ));
        return None;
    };
    let mut options = Vec::new();
    let mut i = 3;
    while i < line.words.len() {
        let value = line.word(i + 1).to_string();
        let key = match line.word(i) {
            "mode" => "mode",
            "level" if matches!(value.as_str(), "user" | "operator" | "admin") => "level",
            "user" | "uid" => "user",
            "group" | "gid" => "group",
            "expose-fd" => {
                notes.push(note(line, Kind::Unsupported, "not needed: rdmalb hands its listening sockets to a restarted process itself (SIGUSR2)".into()));
                i += 2;
                continue;
            }
            other => {
                notes.push(note(
                    line,
                    Kind::Unsupported,
                    format!("the `{other}` option is not supported; left out"),
                ));
                i += 1;
                continue;
            }
        };
        options.push((key, value));
        i += 2;
    }
    Some(StatsSocket { endpoint, options })
}

/// The `[[stats_socket]]` sections.
pub fn emit(out: &mut String, stats: &Stats) {
    for s in &stats.sockets {
        writeln!(out, "\n[[stats_socket]]\n{}", s.endpoint).ok();
        for (key, value) in &s.options {
            writeln!(out, "{key} = {}", q(value)).ok();
        }
        if let Some(t) = &stats.timeout {
            writeln!(out, "timeout = {}", q(t)).ok();
        }
    }
}

/// A frontend's `monitor-uri` and `monitor fail`.
#[derive(Debug, Clone, Default)]
pub struct Monitor {
    pub uri: Option<String>,
    /// `monitor fail if { nbsrv(<backend>) lt <n> }`: the backend and n.
    pub fail: Option<(String, u64)>,
}

/// A frontend's `monitor-uri <path>` or `monitor fail if <condition>`,
/// the condition `{ nbsrv(<backend>) lt|le|eq <n> }` inline or an ACL of
/// `acls` (name, criterion words) saying that.
pub fn monitor(
    line: &Line,
    m: &mut Monitor,
    acls: &[(String, Vec<String>)],
    notes: &mut Vec<Note>,
) {
    if line.keyword() == "monitor-uri" {
        if line.word(1).starts_with('/') {
            m.uri = Some(line.word(1).to_string());
        } else {
            notes.push(note(
                line,
                Kind::Unsupported,
                format!("`{}` is not a request path; not carried over", line.word(1)),
            ));
        }
        return;
    }
    let words: Vec<&str> = line.words.iter().map(String::as_str).collect();
    let condition: Option<Vec<&str>> = match words.as_slice() {
        ["monitor", "fail", "if", "{", c @ .., "}"] => Some(c.to_vec()),
        ["monitor", "fail", "if", name] => acls
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, w)| w.iter().map(String::as_str).collect()),
        _ => None,
    };
    let below = condition.as_deref().and_then(|c| match c {
        [fetch, op, n] => {
            let backend = fetch.strip_prefix("nbsrv(")?.strip_suffix(')')?;
            let n: u64 = n.parse().ok()?;
            let below = match *op {
                "lt" => n,
                "le" => n + 1,
                "eq" if n == 0 => 1,
                _ => return None,
            };
            (below > 0).then(|| (backend.to_string(), below))
        }
        _ => None,
    });
    match below {
        Some(fail) => m.fail = Some(fail),
        None => notes.push(note(line, Kind::Unsupported, "not supported: rdmalb's monitor_fail takes `nbsrv(<backend>) lt <n>` (also `le`, `eq 0`), inline or as an ACL; the monitor URI answers 503 while the process drains".into())),
    }
}
