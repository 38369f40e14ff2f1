//! Sticky sessions on the emulated cluster (the spec's `[sticky]` table).
//!
//! ```toml
//! [sticky]
//! cookie = "SRVID"     # the persistence cookie (required)
//! clients = 200        # simulated clients, each with its jar (default 200)
//! max_load = 0.9       # any other key goes to every proxy's [site.sticky]
//! ```
//!
//! Every proxy's `[[site]]` gets `[site.sticky]` with `cookie` and the
//! other keys (the proxy validates them), every `[[node]]` its name as its
//! `cookie` (`SRVID=n3`), and the load client sends each request as one of
//! `clients` with its cookie jar ([`crate::load::sticky`]). The emulated
//! nodes set no cookie, so only `mode = "insert"` applies. After the load,
//! the run writes `sticky.json`: what the clients saw and the proxies'
//! `rdmalb_sticky_moves_total` by reason, summed over the proxies.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use crate::load::StickySummary;

/// Default simulated clients.
pub const DEFAULT_CLIENTS: u32 = 200;

/// A validated `[sticky]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct StickySpec {
    pub cookie: String,
    pub clients: u32,
    /// What every proxy's `[site.sticky]` gets (`cookie` included).
    pub site: toml::Table,
}

/// Validates `[sticky]`; problems go to `add` under `sticky.<key>`.
pub fn parse(mut raw: toml::Table, add: &mut impl FnMut(&str, String)) -> Option<StickySpec> {
    let clients = match raw.remove("clients") {
        None => DEFAULT_CLIENTS,
        Some(toml::Value::Integer(n))
            if (1..=i64::from(crate::load::sticky::MAX_CLIENTS)).contains(&n) =>
        {
            n as u32
        }
        Some(v) => {
            add(
                "sticky.clients",
                format!(
                    "`{v}` is out of range (accepted: 1 to {})",
                    crate::load::sticky::MAX_CLIENTS
                ),
            );
            DEFAULT_CLIENTS
        }
    };
    match raw.get("mode").map(|m| m.as_str()) {
        None | Some(Some("insert")) => {}
        Some(_) => add(
            "sticky.mode",
            "the emulated nodes set no cookie: only \"insert\" applies".into(),
        ),
    }
    let cookie = match raw.get("cookie").and_then(|c| c.as_str()) {
        Some(c) if crate::load::StickyClients::new(c, 1).is_ok() => c.to_string(),
        _ => {
            add(
                "sticky.cookie",
                "expected the persistence cookie's name, a token such as \"SRVID\"".into(),
            );
            return None;
        }
    };
    Some(StickySpec {
        cookie,
        clients,
        site: raw,
    })
}

/// `sticky.json`.
#[derive(Debug, Clone, Serialize)]
pub struct StickyOut {
    /// What the clients saw.
    pub clients: StickySummary,
    /// `rdmalb_sticky_moves_total` by `reason`, summed over the proxies
    /// that answered.
    pub proxy_moves: BTreeMap<String, u64>,
    /// Proxies whose `/metrics` could not be read.
    pub proxies_unread: u32,
}

/// Reads every proxy's `rdmalb_sticky_moves_total` from its admin
/// listener (`GET /metrics`, 2 s per proxy).
pub async fn proxy_moves(admins: &[SocketAddr]) -> (BTreeMap<String, u64>, u32) {
    let mut moves = BTreeMap::new();
    let mut unread = 0;
    for &a in admins {
        match tokio::time::timeout(Duration::from_secs(2), metrics(a)).await {
            Ok(Some(text)) => {
                for (reason, n) in sticky_moves(&text) {
                    *moves.entry(reason).or_default() += n;
                }
            }
            _ => unread += 1,
        }
    }
    (moves, unread)
}

async fn metrics(admin: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(admin).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut buf = Vec::new();
    // At most 16 MiB: the exposition of a test cluster is far smaller.
    s.take(16 << 20).read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.starts_with("HTTP/1.1 200").then_some(text)
}

/// `rdmalb_sticky_moves_total{...,reason="R",...} N` lines of a Prometheus
/// text exposition, summed by reason (over sites).
fn sticky_moves(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("rdmalb_sticky_moves_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let Some(reason) = labels
            .split(',')
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == "reason")
            .map(|(_, v)| v.trim().trim_matches('"').to_string())
        else {
            continue;
        };
        let n = value.trim().parse::<f64>().unwrap_or(0.0);
        *out.entry(reason).or_default() += n.max(0.0) as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_summed_by_reason() {
        let text = "# TYPE rdmalb_sticky_moves_total counter\n\
            rdmalb_sticky_moves_total{site=\"shop\",reason=\"load\"} 7\n\
            rdmalb_sticky_moves_total{reason=\"down\",site=\"shop\"} 1\n\
            rdmalb_sticky_moves_total{site=\"blog\",reason=\"load\"} 3\n\
            rdmalb_requests_total{site=\"shop\"} 99\n";
        assert_eq!(
            sticky_moves(text),
            BTreeMap::from([("down".into(), 1), ("load".into(), 10)])
        );
    }

    #[test]
    fn the_table_is_checked_and_passed_through() {
        let mut problems = Vec::new();
        let mut add = |k: &str, m: String| problems.push(format!("{k}: {m}"));
        let raw: toml::Table =
            toml::from_str("cookie = \"SRVID\"\nclients = 50\nmax_load = 0.9").unwrap();
        let s = parse(raw, &mut add).unwrap();
        assert_eq!((s.cookie.as_str(), s.clients), ("SRVID", 50));
        assert!(s.site.contains_key("max_load") && s.site.contains_key("cookie"));
        assert!(!s.site.contains_key("clients"));
        let raw: toml::Table = toml::from_str("clients = 0\nmode = \"prefix\"").unwrap();
        assert!(parse(raw, &mut add).is_none());
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("sticky.clients"));
        assert!(problems[1].starts_with("sticky.mode"));
        assert!(problems[2].starts_with("sticky.cookie"));
    }
}
