//! A `server` line (and its `default-server` options) read into a
//! [`Server`].

use std::net::{SocketAddr, ToSocketAddrs};

use super::super::lexer::Line;
use super::super::{Kind, Note};
use super::*;

pub(super) fn server(p: &mut Proxy, line: &Line, notes: &mut Vec<Note>) -> Option<Server> {
    let n = line.number;
    let mut s = Server {
        line: n,
        name: line.word(1).to_string(),
        ..Server::default()
    };
    let defaults: Vec<Line> = p.default_server.clone();
    for d in &defaults {
        server_options(&mut s, d, 1, notes);
    }
    server_options(&mut s, line, 3, notes);
    let addr = line.word(2);
    let addr = addr
        .strip_prefix("ipv4@")
        .or_else(|| addr.strip_prefix("ipv6@"))
        .unwrap_or(addr);
    s.address = match addr.parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => match addr
            .rsplit_once(':')
            .filter(|(_, port)| port.parse::<u16>().is_ok())
        {
            Some(_) => match addr.to_socket_addrs().ok().and_then(|mut a| a.next()) {
                Some(a) => {
                    notes.push(Note::new(
                        n,
                        "server",
                        Kind::Approximated,
                        format!("`{addr}` resolved once, at import time, to {a}"),
                    ));
                    Some(a)
                }
                None => None,
            },
            None => None,
        },
    };
    if s.address.is_none() {
        notes.push(Note::new(
            n,
            "server",
            Kind::Routing,
            format!("server `{}`: address `{}` not supported (expected ip:port or a resolvable name:port); server dropped", s.name, line.word(2)),
        ));
        return None;
    }
    Some(s)
}

/// Applies the server options of `line` from word `from` on.
fn server_options(s: &mut Server, line: &Line, from: usize, notes: &mut Vec<Note>) {
    let n = line.number;
    let kw = line.keyword();
    let mut i = from;
    while i < line.words.len() {
        let w = line.word(i);
        let arg = line.word(i + 1);
        let mut bad = |what: &str| {
            notes.push(Note::new(
                n,
                kw,
                Kind::Unsupported,
                format!("`{w} {arg}`: {what}; ignored"),
            ));
        };
        let mut takes_arg = true;
        match w {
            "check" => (s.check, takes_arg) = (true, false),
            "no-check" => (s.check, takes_arg) = (false, false),
            "backup" => (s.backup, takes_arg) = (true, false),
            "no-backup" => (s.backup, takes_arg) = (false, false),
            "disabled" => (s.disabled, takes_arg) = (true, false),
            "enabled" => (s.disabled, takes_arg) = (false, false),
            "agent-check" => (s.agent_check, takes_arg) = (true, false),
            "no-agent-check" => (s.agent_check, takes_arg) = (false, false),
            "send-proxy" => (s.send_proxy, takes_arg) = (Some("v1"), false),
            "send-proxy-v2" => (s.send_proxy, takes_arg) = (Some("v2"), false),
            "no-send-proxy" | "no-send-proxy-v2" => (s.send_proxy, takes_arg) = (None, false),
            "inter" => match time(arg) {
                Some(t) => s.inter = Some(t),
                None => bad("not a time"),
            },
            "agent-inter" => match time(arg) {
                Some(t) => s.agent_inter = Some(t),
                None => bad("not a time"),
            },
            "rise" | "fall" => match arg.parse::<u32>() {
                Ok(v) if v >= 1 && w == "rise" => s.rise = Some(v),
                Ok(v) if v >= 1 => s.fall = Some(v),
                _ => bad("not a count >= 1"),
            },
            "weight" => match arg.parse::<u32>() {
                Ok(v) if v <= 256 => s.weight = Some(v),
                _ => bad("not a weight 0..256"),
            },
            "maxconn" => match arg.parse::<u64>() {
                Ok(v) => s.maxconn = Some(v),
                _ => bad("not a number"),
            },
            "agent-port" => match arg.parse::<u16>() {
                Ok(v) => s.agent_port = Some(v),
                _ => bad("not a port"),
            },
            "agent-addr" => s.agent_addr = Some(arg.to_string()),
            "ssl" | "verify" | "ca-file" | "sni" | "alpn" | "check-ssl" | "check-sni" | "crt" => {
                takes_arg = !matches!(w, "ssl" | "check-ssl");
                notes.push(Note::new(
                    n,
                    kw,
                    Kind::Routing,
                    format!("`{w}` not supported: rdmalb speaks cleartext HTTP to its nodes"),
                ));
            }
            "cookie" => s.cookie = Some(arg.to_string()),
            "fastinter" | "downinter" | "slowstart" | "port" | "addr" | "id" | "resolvers"
            | "resolve-prefer" | "init-addr" | "on-error" | "observe" | "error-limit"
            | "maxqueue" | "minconn" | "agent-send" | "pool-max-conn" | "track" | "redir" => {
                notes.push(Note::new(
                    n,
                    kw,
                    Kind::Unsupported,
                    format!("server option `{w}` not supported; ignored"),
                ));
            }
            _ => {
                takes_arg = false;
                notes.push(Note::new(
                    n,
                    kw,
                    Kind::Unsupported,
                    format!("server option `{w}` not supported; ignored"),
                ));
            }
        }
        i += if takes_arg { 2 } else { 1 };
    }
}
