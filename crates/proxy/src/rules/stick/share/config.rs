//! `[stick_share]` as written and its validation: where this proxy
//! receives the other proxies' increments, where theirs are, the key that
//! authenticates them and how often they are sent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use rdmalb_base::problems::ConfigCheck;
use rdmalb_window::{DatagramKey, Psk};

/// `[stick_share]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawShare {
    /// The UDP address this proxy receives on and sends from.
    ///
    /// Default: none (required). Example: `"10.0.0.1:7400"`.
    pub listen: Option<String>,
    /// The other proxies' `listen` addresses.
    ///
    /// Default: none (required). Example: `["10.0.0.2:7400"]`.
    pub peers: Option<Vec<String>>,
    /// The pre-shared key (`rdmalb psk --out FILE`).
    ///
    /// Default: none (required). Example: `"share.key"`.
    pub key_file: Option<String>,
    /// How often increments are sent.
    ///
    /// Default: `"50ms"`.
    pub interval: Option<String>,
}

/// The validated `[stick_share]`.
#[derive(Debug)]
pub struct Share {
    pub listen: SocketAddr,
    pub peers: Vec<SocketAddr>,
    pub key_file: PathBuf,
    pub key: DatagramKey,
    pub interval: Duration,
}

/// The default flush interval.
pub const INTERVAL: Duration = Duration::from_millis(50);
/// The most peers (a datagram a flush goes to each).
pub const MAX_PEERS: usize = 64;

/// Validates `[stick_share]`; `None` (reported) when it is unusable.
pub fn validate(c: &mut ConfigCheck, raw: RawShare) -> Option<Share> {
    let before = c.count();
    let listen = c.ip_socket_addr("stick_share.listen", raw.listen.as_deref());
    if let Some(l) = listen.filter(|l| l.ip().is_unspecified() || l.port() == 0) {
        c.add(
            "stick_share.listen",
            format!(
                "`{l}` is not a concrete address (the other proxies check that increments come from the address they list, e.g. \"10.0.0.1:7400\")"
            ),
        );
    }
    let mut peers = Vec::new();
    match raw.peers {
        None => c.add(
            "stick_share.peers",
            "missing (expected the other proxies' [stick_share] listen addresses, e.g. [\"10.0.0.2:7400\"])",
        ),
        Some(list) if list.is_empty() || list.len() > MAX_PEERS => c.add(
            "stick_share.peers",
            format!("{} peers (expected 1 to {MAX_PEERS} addresses)", list.len()),
        ),
        Some(list) => {
            for (i, p) in list.iter().enumerate() {
                let key = format!("stick_share.peers[{i}]");
                let Some(a) = c.ip_socket_addr(&key, Some(p)) else {
                    continue;
                };
                if Some(a) == listen {
                    c.add(key, format!("`{a}` is this proxy's own listen address"));
                } else if peers.contains(&a) {
                    c.add(key, format!("`{a}` is listed twice"));
                } else {
                    peers.push(a);
                }
            }
        }
    }
    let interval = c.duration_within(
        "stick_share.interval",
        raw.interval.as_deref(),
        INTERVAL,
        Duration::from_millis(1),
        Duration::from_secs(10),
    );
    let key_file = match raw.key_file.as_deref() {
        None | Some("") => {
            c.add(
                "stick_share.key_file",
                "missing (expected a key file made by `rdmalb psk --out FILE`, the same on every proxy)",
            );
            None
        }
        Some(p) => Some(c.path(p)),
    };
    let psk = key_file.as_ref().and_then(|p| match Psk::from_file(p) {
        Ok(k) => Some(k),
        Err(e) if !p.exists() => {
            c.add(
                "stick_share.key_file",
                format!(
                    "{e}; make it with `rdmalb psk --out {}` and copy it to every proxy",
                    p.display()
                ),
            );
            None
        }
        Err(e) => {
            c.add("stick_share.key_file", e.to_string());
            None
        }
    });
    if c.count() != before {
        return None;
    }
    Some(Share {
        listen: listen?,
        peers,
        key: DatagramKey::new(&psk?, super::wire::KEY_LABEL),
        key_file: key_file?,
        interval,
    })
}
