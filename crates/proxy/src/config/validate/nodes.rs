//! `[[node]]`: each node's name, address, the site it starts in, its window
//! endpoint, HAProxy's server settings (weight, backup, send-proxy,
//! maxconn, agent-check, cookie), and the key the keyed window transports
//! need ([`windows_keyed`]).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::endpoints::node_window;
use super::{routing, valid_name};
use crate::config::raw::RawNode;
use crate::config::types::*;
use rdmalb_base::problems::ConfigCheck;

/// Validates every `[[node]]` against the sites.
pub(super) fn nodes(
    c: &mut ConfigCheck,
    raw: Vec<Option<RawNode>>,
    sites: &[Site],
    site_index: &HashMap<String, usize>,
) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut node_names = HashSet::new();
    let mut node_ids = HashMap::new();
    for (i, n) in raw.into_iter().enumerate() {
        let Some(n) = n else { continue };
        let key = format!("node[{i}]");
        let name = match n.name.clone() {
            Some(name) if valid_name(&name) => name,
            Some(name) => {
                c.add(
                    format!("{key}.name"),
                    format!("`{name}` is not a valid name (expected 1-64 characters from a-z, A-Z, 0-9, '-', '_', '.')"),
                );
                continue;
            }
            None => {
                c.add(format!("{key}.name"), "missing (every node needs a name)");
                continue;
            }
        };
        if !node_names.insert(name.clone()) {
            c.add(
                format!("{key}.name"),
                format!("node `{name}` is defined twice"),
            );
            continue;
        }
        let key = format!("node[{i}] ({name})");
        if let Some(node) = node(c, &key, name, n, sites, site_index, &mut node_ids) {
            nodes.push(Node {
                index: nodes.len(),
                ..node
            });
        }
    }
    nodes
}

/// One node (its `index` set by the caller); `None` without an address.
fn node(
    c: &mut ConfigCheck,
    key: &str,
    name: String,
    n: RawNode,
    sites: &[Site],
    site_index: &HashMap<String, usize>,
    node_ids: &mut HashMap<u16, String>,
) -> Option<Node> {
    let address = c.socket_addr(&format!("{key}.address"), n.address.as_deref());
    let site = site(c, key, n.site.as_deref(), sites, site_index);
    let window = node_window(c, key, &n);
    if n.device.is_some() && n.transport.as_deref() != Some("verbs") {
        c.add(
            format!("{key}.device"),
            "is set but allowed only with transport = \"verbs\" (remove it or switch the transport)",
        );
    }
    let node_id = routing::node_id(c, key, &n, node_ids);
    let send_proxy = n.send_proxy.as_deref().and_then(|v| {
        SendProxy::parse(v).or_else(|| {
            c.add(
                format!("{key}.send_proxy"),
                format!(
                    "`{v}` is not a PROXY protocol version (expected {})",
                    SendProxy::ACCEPTED
                ),
            );
            None
        })
    });
    let weight = c.int(
        &format!("{key}.weight"),
        n.weight,
        u64::from(Node::DEFAULT_WEIGHT),
        0,
        u64::from(Node::MAX_WEIGHT),
    ) as u32;
    let max_inflight = n
        .max_inflight
        .map(|v| c.int(&format!("{key}.max_inflight"), Some(v), 0, 1, 1_000_000) as usize);
    let agent = node_agent(c, key, &n, address);
    let cookie =
        crate::config::balancing::node_cookie(c, &format!("{key}.cookie"), n.cookie.clone());
    Some(Node {
        index: 0,
        name,
        address: address?,
        site,
        window,
        node_id,
        check: n.check.unwrap_or(true),
        send_proxy,
        weight,
        disabled: n.disabled.unwrap_or(false),
        max_inflight,
        backup: n.backup.unwrap_or(false),
        agent,
        cookie,
    })
}

/// The site a node starts in: `None` for the idle pool (unset or "idle").
fn site(
    c: &mut ConfigCheck,
    key: &str,
    site: Option<&str>,
    sites: &[Site],
    site_index: &HashMap<String, usize>,
) -> Option<usize> {
    match site {
        None => None,
        Some(s) if s == rdmalb_window::role::IDLE_POOL => None,
        Some(s) => match site_index.get(s) {
            Some(&idx) => Some(idx),
            None => {
                c.add(
                    format!("{key}.site"),
                    format!(
                        "no site named `{s}` (expected one of: {}, or \"idle\")",
                        sites
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                None
            }
        },
    }
}

/// The nodes' windows over tcp or verbs need `cluster.psk_file`.
pub(super) fn windows_keyed(c: &mut ConfigCheck, nodes: &[Node], cluster: &Cluster) {
    let needs_psk = nodes
        .iter()
        .any(|n| n.window.as_ref().is_some_and(WindowEndpoint::needs_key));
    if needs_psk && cluster.psk_file.is_none() {
        c.add(
            "cluster.psk_file",
            "missing: nodes use the tcp or verbs transport, which require authentication (expected the path of a pre-shared key file made by `rdmalb psk --out FILE`)",
        );
    }
}

/// `[[node]] agent_port`, `agent_interval`, `agent_address`.
fn node_agent(
    c: &mut ConfigCheck,
    key: &str,
    n: &RawNode,
    address: Option<SocketAddr>,
) -> Option<AgentCheck> {
    let Some(port) = n.agent_port else {
        for (set, name) in [
            (n.agent_interval.is_some(), "agent_interval"),
            (n.agent_address.is_some(), "agent_address"),
        ] {
            if set {
                c.add(
                    format!("{key}.{name}"),
                    "is set but agent_port is not (the agent-check needs a port)",
                );
            }
        }
        return None;
    };
    let port = c.int(&format!("{key}.agent_port"), Some(port), 1, 1, 65535) as u16;
    let interval = c.duration_within(
        &format!("{key}.agent_interval"),
        n.agent_interval.as_deref(),
        Duration::from_secs(2),
        Duration::from_millis(100),
        Duration::from_secs(3600),
    );
    let ip = match n.agent_address.as_deref() {
        None => address.map(|a| a.ip()),
        Some(text) => match text.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                c.add(
                    format!("{key}.agent_address"),
                    format!("`{text}` is not an IP address (the port is agent_port)"),
                );
                None
            }
        },
    };
    ip.map(|ip| AgentCheck {
        address: SocketAddr::new(ip, port),
        interval,
    })
}
