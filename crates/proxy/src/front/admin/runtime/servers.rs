//! `show backend`, `show servers state` and `set server … addr` in HAProxy
//! 2.6's output. A site is a backend, a node serving it a server; proxy
//! and server ids are `show stat`'s `iid` and `sid`.
//!
//! `show servers state` columns (the file format of HAProxy's
//! `server-state-file`, version 1): `srv_op_state` 2 running / 0 stopped;
//! `srv_admin_state` 0x01 forced maintenance, 0x08 forced drain;
//! `srv_check_status` HAProxy's `HCHK_STATUS_*` (`CheckStatus::haproxy`:
//! 1 not checked yet, 15 a passed HTTP check, 8 connection failure, 7 and
//! 12 timeouts, 13 not HTTP, 17 a bad status);
//! `srv_check_result` 0 unknown, 2 failed, 3 passed; `srv_check_state` 6
//! (configured and enabled) when the node is checked.

use std::fmt::Write as _;

use http::StatusCode;

use super::{stat, Admin, Outcome};
use crate::balance::health::CheckStatus;
use crate::balance::{AdminState, NodeState};

/// `show backend`.
pub fn show_backend(state: &Admin) -> Outcome {
    let mut out = String::from("# name\n");
    for site in state.backends.load().sites() {
        let _ = writeln!(out, "{}", site.name);
    }
    Ok(out)
}

const STATE_HEADER: &str = "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n";

/// `show servers state [<backend>]`.
pub fn show_servers_state(state: &Admin, backend: Option<&str>) -> Outcome {
    let backends = state.backends.load();
    if let Some(b) = backend {
        if !backends.sites().iter().any(|s| s.name == b) {
            return Err((StatusCode::NOT_FOUND, "Can't find backend.".into()));
        }
    }
    let mut out = format!("1\n{STATE_HEADER}");
    for row in stat::rows(state) {
        if row.kind != stat::Kind::Server {
            continue;
        }
        let text = |c: &str| match row.get(c) {
            Some(stat::Value::Text(t)) => t.clone(),
            _ => String::new(),
        };
        let (site, name) = (text("pxname"), text("svname"));
        if backend.is_some_and(|b| b != site) {
            continue;
        }
        let Some(node) = backends.nodes().iter().find(|n| n.name == name) else {
            continue;
        };
        let num = |c: &str| row.number(c).unwrap_or(0);
        let _ = writeln!(
            out,
            "{} {site} {} {name} {} {}",
            num("iid"),
            num("sid"),
            node.address.ip(),
            server_state(node, num("lastchg"), backends.health())
        );
    }
    Ok(out)
}

/// The columns after `srv_addr`.
fn server_state(n: &NodeState, since_change: u64, t: &crate::config::HealthCheck) -> String {
    let rise = t.rise;
    let h = n.health();
    let c = n.control();
    let admin = match n.admin_state() {
        AdminState::Maint => 0x01,
        AdminState::Drain => 0x08,
        AdminState::Ready => 0,
    };
    let (status, result, health, check_state) = if !h.check {
        (1, 0, rise, 0)
    } else {
        let status = CheckStatus::haproxy(h.last_check_status).code;
        let result = match h.last_check_ok {
            None => 0,
            Some(true) => 3,
            Some(false) => 2,
        };
        (
            status,
            result,
            // HAProxy's health counter: rise..rise+fall-1 while up, one
            // less per failed check; 0..rise-1 while down, one more per
            // passed check.
            if h.up {
                (rise + t.fall - 1).saturating_sub(h.consecutive_fail)
            } else {
                h.consecutive_ok
            },
            6,
        )
    };
    format!(
        "{} {admin} {} {} {since_change} {status} {result} {health} {check_state} 0 0 0 - {} - 0 0 - - 0",
        if h.up { 2 } else { 0 },
        c.weight,
        c.initial_weight,
        n.address.port(),
    )
}

/// `set server <bk>/<srv> addr <ip> [port <port>]`: a node's address is
/// part of the config (it names its window and its health checks), so only
/// the one in force is accepted, with HAProxy's answer to a change that is
/// no change; any other is refused and says how to change it.
pub fn set_addr(n: &NodeState, args: &[&str]) -> Outcome {
    let (ip, port) = match args {
        [ip] => (*ip, None),
        [ip, "port", port] => (*ip, Some(*port)),
        _ => {
            return Err((
                StatusCode::BAD_REQUEST,
                "set server <b>/<s> addr requires an address and optionally a port.".into(),
            ))
        }
    };
    let same_ip = ip.parse().ok() == Some(n.address.ip());
    let same_port = port.is_none_or(|p| p.parse().ok() == Some(n.address.port()));
    if same_ip && same_port {
        return Ok("no need to change the addr by 'stats socket command'\n".into());
    }
    Err((
        StatusCode::CONFLICT,
        format!(
            "node {} keeps its configured address {}: change `address` in the config and reload (SIGHUP)",
            n.name, n.address
        ),
    ))
}
