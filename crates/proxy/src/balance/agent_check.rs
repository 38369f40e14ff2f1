//! HAProxy's agent-check, the client side: for every node with `[[node]]
//! agent_port`, a loop that every `agent_interval` opens a TCP connection to
//! the node's agent, reads one line and applies what it says to the node's
//! [control state](super::control).
//!
//! The reply (HAProxy configuration manual, `agent-check`; parsed as
//! HAProxy's `tcpcheck_agent_expect_reply` does): one line ended by the
//! first CR or LF, words separated by spaces, tabs or commas, in any order,
//! case-insensitive; of several words of one kind the last wins.
//!
//! | word | effect |
//! |---|---|
//! | `N%`, `weight:N%` | weight = N % of the configured weight (at most 256) |
//! | `weight:N` | weight = N (0..=256) |
//! | `ready`, `drain`, `maint` | administrative state |
//! | `up` | the agent's "down" ends |
//! | `down`, `fail`, `stopped` | the node takes no new requests until `up` |
//! | `maxconn:N` | the node's in-flight cap (0: none, the site's limit applies) |
//! | `#` at the start of a word | the rest of the line is a description |
//!
//! Only what the agent says changes: a reply of `75%` leaves the
//! administrative state alone. An unknown or malformed word is reported
//! (log, metric `result="partial"`) and the other words still apply, as in
//! HAProxy. A reply that is not one complete line (the agent closed before
//! CR/LF, sent more than [`MAX_REPLY`] bytes, or a NUL byte) changes
//! nothing (HAProxy: "Ignoring incomplete line from agent").
//!
//! An agent that cannot be reached or does not answer within the timeout
//! (`[health] timeout`, at most the agent's interval) changes nothing
//! either: as HAProxy says, connectivity is the health check's business; it
//! is counted (`rdmalb_agent_checks_total{node,result}`) and logged at
//! debug. Only an agent's `up` undoes its `down`, and only its `ready` (or
//! the runtime API) undoes its `drain`/`maint`.
//!
//! Agent-checks go on while the node is in maintenance (otherwise an
//! agent's `maint` could never be undone by the agent). The loops are kept
//! by the health checks' supervisor ([`super::health::spawn_checks`]): they
//! follow reloads (a new `agent_port`, address or interval applies from the
//! next round), stop for removed nodes and on shutdown. A node whose
//! `agent_port` is removed by a reload loses the agent's "down" and
//! `maxconn:` (nothing could undo them any more); a weight or
//! administrative state the agent set stays until changed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rand::Rng;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::node_loop::NodeLoop;
use super::{AdminState, Backends, ControlSource, NodeState};

/// Counter `rdmalb_agent_checks_total{node,result}`; `result` is a
/// [`CheckResult::label`].
pub const AGENT_CHECKS: &str = "rdmalb_agent_checks_total";

/// The longest reply line accepted, in bytes (CR/LF included).
pub const MAX_REPLY: usize = 1024;

/// The agent-check loop kind for the supervisor: nodes with `agent_port`.
pub(crate) const AGENT_LOOP: NodeLoop = NodeLoop {
    what: "agent-check",
    wanted: |backends, node| backends.agent_of(node).is_some(),
    spawn: |node, backends, shutdown| tokio::spawn(node_loop(node, backends, shutdown)),
    stopped: |node, removed| {
        if !removed {
            // Nothing could end the agent's "down" or cap any more.
            node.set_agent_down(false);
            node.set_agent_max_inflight(None);
        }
    },
};

/// Why a reply as a whole was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("the agent closed the connection before ending its line with CR or LF (ignored)")]
    Incomplete,
    #[error("the reply line is longer than {limit} bytes (ignored)")]
    TooLong { limit: usize },
    #[error("the reply holds a NUL byte (ignored)")]
    Nul,
    #[error("the reply is not text (not UTF-8; ignored)")]
    NotText,
}

/// A word of a reply that was not understood; the other words still apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordError {
    #[error("unknown word `{0}` (expected N%, weight:N, ready, drain, maint, up, down, fail, stopped, maxconn:N or #description)")]
    Unknown(String),
    #[error("bad weight `{word}`: {why}")]
    Weight { word: String, why: &'static str },
    #[error("bad maxconn `{word}`: {why}")]
    MaxConn { word: String, why: &'static str },
}

/// A weight an agent asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// `N%`: of the configured weight (at most 25600, as HAProxy caps it).
    Percent(u32),
    /// `weight:N`: absolute, 0..=256.
    Absolute(u32),
}

/// The agent's word on the node's operational state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Up,
    /// `down`, `fail` or `stopped` (all mean the same; the word is kept
    /// for the log).
    Down(DownWord),
}

/// Which of the three "down" words the agent used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownWord {
    Down,
    Fail,
    Stopped,
}

impl DownWord {
    pub fn as_str(self) -> &'static str {
        match self {
            DownWord::Down => "down",
            DownWord::Fail => "fail",
            DownWord::Stopped => "stopped",
        }
    }
}

/// What one reply line says. `None` fields were not mentioned and leave the
/// node as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub health: Option<Health>,
    pub admin: Option<AdminState>,
    pub weight: Option<Weight>,
    /// `maxconn:N`: `Some(None)` for `maxconn:0` (no cap of its own).
    pub max_inflight: Option<Option<usize>>,
    /// The text after `#`, if any.
    pub description: Option<String>,
    /// Words not understood (the rest still applies).
    pub problems: Vec<WordError>,
}

/// The first line of `buf`, the bytes read from an agent, without its CR or
/// LF. `closed`: the agent closed the connection (no more bytes will come).
/// `Ok(None)`: wait for more.
pub fn frame(buf: &[u8], closed: bool) -> Result<Option<&str>, ReplyError> {
    match buf.iter().position(|&b| b == b'\n' || b == b'\r' || b == 0) {
        Some(i) if buf[i] == 0 => Err(ReplyError::Nul),
        Some(i) if i < MAX_REPLY => std::str::from_utf8(&buf[..i])
            .map(Some)
            .map_err(|_| ReplyError::NotText),
        Some(_) => Err(ReplyError::TooLong { limit: MAX_REPLY }),
        None if buf.len() >= MAX_REPLY => Err(ReplyError::TooLong { limit: MAX_REPLY }),
        None if closed => Err(ReplyError::Incomplete),
        None => Ok(None),
    }
}

fn is_separator(c: char) -> bool {
    matches!(c, ' ' | '\t' | ',')
}

/// Parses one reply line (without its CR/LF).
pub fn parse(line: &str) -> Reply {
    let mut reply = Reply::default();
    let mut rest = line;
    loop {
        rest = rest.trim_start_matches(is_separator);
        if rest.is_empty() {
            break;
        }
        if let Some(description) = rest.strip_prefix('#') {
            let d = description.trim();
            reply.description = (!d.is_empty()).then(|| d.to_string());
            break;
        }
        let end = rest.find(is_separator).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        rest = after;
        reply.word(word);
    }
    reply
}

/// `prefix` matched case-insensitively at the start of `word`.
fn strip_prefix_ci<'a>(word: &'a str, prefix: &str) -> Option<&'a str> {
    let head = word.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &word[prefix.len()..])
}

impl Reply {
    fn word(&mut self, word: &str) {
        let lower = word.to_ascii_lowercase();
        match lower.as_str() {
            "up" => self.health = Some(Health::Up),
            "down" => self.health = Some(Health::Down(DownWord::Down)),
            "fail" => self.health = Some(Health::Down(DownWord::Fail)),
            "stopped" => self.health = Some(Health::Down(DownWord::Stopped)),
            "ready" => self.admin = Some(AdminState::Ready),
            "drain" => self.admin = Some(AdminState::Drain),
            "maint" => self.admin = Some(AdminState::Maint),
            _ if word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('%') => {
                self.weight_word(word, word)
            }
            _ => {
                if let Some(value) = strip_prefix_ci(word, "maxconn:") {
                    match parse_count(value) {
                        Ok(n) => self.max_inflight = Some((n != 0).then_some(n)),
                        Err(why) => self.problems.push(WordError::MaxConn {
                            word: word.to_string(),
                            why,
                        }),
                    }
                } else if let Some(value) = strip_prefix_ci(word, "weight:") {
                    self.weight_word(word, value)
                } else {
                    self.problems.push(WordError::Unknown(word.to_string()))
                }
            }
        }
    }

    fn weight_word(&mut self, word: &str, value: &str) {
        match parse_weight(value) {
            Ok(w) => self.weight = Some(w),
            Err(why) => self.problems.push(WordError::Weight {
                word: word.to_string(),
                why,
            }),
        }
    }

    /// Applies the reply to `node` in HAProxy's order: administrative
    /// state, weight, cap, then health. Returns whether routing changed.
    pub fn apply(&self, node: &NodeState) -> bool {
        let mut changed = false;
        if let Some(state) = self.admin {
            changed |= node.set_admin_state(state, ControlSource::Agent);
        }
        match self.weight {
            Some(Weight::Percent(p)) => changed |= node.set_weight_percent(p, ControlSource::Agent),
            Some(Weight::Absolute(w)) => changed |= node.set_weight(w, ControlSource::Agent),
            None => {}
        }
        if let Some(limit) = self.max_inflight {
            node.set_agent_max_inflight(limit);
        }
        match self.health {
            Some(Health::Up) => changed |= node.set_agent_down(false),
            Some(Health::Down(_)) => changed |= node.set_agent_down(true),
            None => {}
        }
        changed
    }
}

/// HAProxy's cap on a relative weight (it avoids overflow the same way).
const MAX_PERCENT: u32 = 25_600;

fn parse_weight(value: &str) -> Result<Weight, &'static str> {
    if value.is_empty() {
        return Err("expected N% or N");
    }
    let (digits, percent) = match value.strip_suffix('%') {
        Some(d) => (d, true),
        None => (value, false),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(if percent || !value.contains('%') {
            "expected a non-negative integer, optionally followed by %"
        } else {
            "trailing characters after %"
        });
    }
    // Longer than any u32: saturate (a percentage is capped anyway).
    let n = digits.parse::<u64>().unwrap_or(u64::MAX);
    if percent {
        Ok(Weight::Percent(n.min(u64::from(MAX_PERCENT)) as u32))
    } else if n <= u64::from(crate::config::Node::MAX_WEIGHT) {
        Ok(Weight::Absolute(n as u32))
    } else {
        Err("an absolute weight is 0..=256")
    }
}

fn parse_count(value: &str) -> Result<usize, &'static str> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a non-negative integer");
    }
    value.parse::<usize>().map_err(|_| "too large")
}

/// Why one agent-check got no usable reply.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("connect to {addr} failed: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading from {addr} failed: {source}")]
    Read {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("no reply line from {addr} within {}", rdmalb_base::duration::format(*.timeout))]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("bad reply from {addr}: {source}")]
    Reply {
        addr: SocketAddr,
        #[source]
        source: ReplyError,
    },
}

/// The outcome of one agent-check, the `result` label of
/// [`AGENT_CHECKS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckResult {
    /// Every word understood and applied.
    Ok,
    /// Applied, but some words were not understood.
    Partial,
    /// Not one complete line: nothing applied.
    BadReply,
    /// No connection.
    ConnectFailed,
    /// Connected, no line within the timeout.
    Timeout,
    /// The connection failed while reading.
    ReadFailed,
}

impl CheckResult {
    pub fn label(self) -> &'static str {
        match self {
            CheckResult::Ok => "ok",
            CheckResult::Partial => "partial",
            CheckResult::BadReply => "bad_reply",
            CheckResult::ConnectFailed => "connect_failed",
            CheckResult::Timeout => "timeout",
            CheckResult::ReadFailed => "read_failed",
        }
    }

    /// The result of [`ask`].
    pub fn of(r: &Result<Reply, AgentError>) -> CheckResult {
        match r {
            Ok(reply) if reply.problems.is_empty() => CheckResult::Ok,
            Ok(_) => CheckResult::Partial,
            Err(AgentError::Connect { .. }) => CheckResult::ConnectFailed,
            Err(AgentError::Read { .. }) => CheckResult::ReadFailed,
            Err(AgentError::Timeout { .. }) => CheckResult::Timeout,
            Err(AgentError::Reply { .. }) => CheckResult::BadReply,
        }
    }
}

/// One agent-check: connects to `addr`, reads one line (at most
/// [`MAX_REPLY`] bytes) within `timeout`, closes and parses it. Sends
/// nothing (HAProxy's `agent-send` is not supported).
pub async fn ask(addr: SocketAddr, timeout: Duration) -> Result<Reply, AgentError> {
    match tokio::time::timeout(timeout, read_line(addr)).await {
        Ok(r) => r.map(|line| parse(&line)),
        Err(_) => Err(AgentError::Timeout { addr, timeout }),
    }
}

async fn read_line(addr: SocketAddr) -> Result<String, AgentError> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|source| AgentError::Connect { addr, source })?;
    let mut buf = Vec::with_capacity(128);
    let mut chunk = [0u8; 512];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|source| AgentError::Read { addr, source })?;
        // `frame` fails once the buffer reaches MAX_REPLY without a line end,
        // so it never holds more than MAX_REPLY + 1 bytes.
        let take = n.min(MAX_REPLY + 1 - buf.len());
        buf.extend_from_slice(&chunk[..take]);
        match frame(&buf, n == 0) {
            Ok(Some(line)) => return Ok(line.to_string()),
            Ok(None) => {}
            Err(source) => return Err(AgentError::Reply { addr, source }),
        }
    }
}

async fn node_loop(
    mut node: Arc<NodeState>,
    backends: Arc<ArcSwap<Backends>>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Stagger the first check over one interval, as the health checks do.
    let first = backends
        .load()
        .agent_of(&node)
        .map_or(Duration::ZERO, |a| a.interval)
        .mul_f64(rand::thread_rng().gen::<f64>());
    tokio::select! {
        _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
        _ = tokio::time::sleep(first) => {}
    }
    loop {
        let snap = backends.load();
        let agent = snap.find_same(&node).and_then(|n| {
            node = Arc::clone(n);
            snap.agent_of(n)
        });
        let Some(agent) = agent else {
            // Removed by a reload: the supervisor stops this loop once it
            // sees the new snapshot; until then idle (a loop that ends on
            // its own means a panic).
            let interval = snap.health().interval;
            drop(snap);
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = tokio::time::sleep(interval) => continue,
            }
        };
        let timeout = snap.health().timeout.min(agent.interval);
        drop(snap);

        let result = tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            r = ask(agent.address, timeout) => r,
        };
        let outcome = CheckResult::of(&result);
        metrics::counter!(AGENT_CHECKS, "node" => node.name.clone(), "result" => outcome.label())
            .increment(1);
        match &result {
            Ok(reply) => {
                for p in &reply.problems {
                    tracing::warn!(node = %node.name, agent = %agent.address, problem = %p, "agent-check: word ignored");
                }
                reply.apply(&node);
                if let Some(Health::Down(word)) = reply.health {
                    tracing::debug!(
                        node = %node.name, agent = %agent.address, word = word.as_str(),
                        description = reply.description.as_deref().unwrap_or(""),
                        "agent-check: the agent reports the node down"
                    );
                }
            }
            Err(e) => {
                tracing::debug!(node = %node.name, error = %e, "agent-check failed; nothing changed")
            }
        }
        tokio::select! {
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
            _ = tokio::time::sleep(agent.interval) => {}
        }
    }
}

#[cfg(test)]
mod tests;
