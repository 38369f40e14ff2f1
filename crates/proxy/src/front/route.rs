//! Host (and path prefix) routing to sites, built once per config snapshot.
//!
//! Order of precedence: an exact host name, then wildcards with the longest
//! suffix first (`*.a.example.com` before `*.example.com`), then `*` (any
//! host); within the
//! matching host, the longest path prefix wins, and a site without prefixes
//! matches every path. A host whose entries match no path falls through to
//! the next host pattern, then to `global.default_site`.

use std::collections::HashMap;

use crate::config::{Config, HostPattern};

/// One (path prefix → site) entry of a host pattern. Empty prefix = all paths.
#[derive(Debug, Clone)]
struct Entry {
    prefix: String,
    site: usize,
}

/// Immutable routing table of one config snapshot.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    /// Exact host → entries, longest prefix first.
    exact: HashMap<String, Vec<Entry>>,
    /// Wildcard suffix (with leading dot) → entries, longest prefix first.
    wildcard: HashMap<String, Vec<Entry>>,
    default_site: Option<usize>,
}

impl RouteTable {
    /// Builds the table from a validated config (which already rejected
    /// duplicate host/prefix pairs).
    pub fn build(config: &Config) -> RouteTable {
        let mut t = RouteTable {
            default_site: config.global.default_site,
            ..RouteTable::default()
        };
        for site in &config.sites {
            let prefixes: Vec<String> = if site.path_prefixes.is_empty() {
                vec![String::new()]
            } else {
                site.path_prefixes.clone()
            };
            for host in &site.hosts {
                let (map, key) = match host {
                    HostPattern::Exact(h) => (&mut t.exact, h.clone()),
                    HostPattern::Wildcard(s) => (&mut t.wildcard, s.clone()),
                };
                let entries = map.entry(key).or_default();
                for p in &prefixes {
                    entries.push(Entry {
                        prefix: p.clone(),
                        site: site.index,
                    });
                }
            }
        }
        for entries in t.exact.values_mut().chain(t.wildcard.values_mut()) {
            entries.sort_by_key(|e| std::cmp::Reverse(e.prefix.len()));
        }
        t
    }

    /// The site for a request. `host` is the raw Host header or :authority
    /// (any case, with or without port); `path` the request path.
    pub fn route(&self, host: Option<&str>, path: &str) -> Option<usize> {
        if let Some(host) = host.and_then(normalize_host) {
            let host: &str = &host;
            if let Some(site) = self.exact.get(host).and_then(|e| by_prefix(e, path)) {
                return Some(site);
            }
            if !self.wildcard.is_empty() {
                // Suffixes from the longest: "a.b.example.com" tries
                // ".b.example.com", ".example.com", ".com".
                for (i, b) in host.bytes().enumerate() {
                    if b == b'.' && i > 0 {
                        if let Some(site) = self
                            .wildcard
                            .get(&host[i..])
                            .and_then(|e| by_prefix(e, path))
                        {
                            return Some(site);
                        }
                    }
                }
            }
        }
        // `*`: any host (or none), the last pattern tried.
        if let Some(site) = self.wildcard.get("").and_then(|e| by_prefix(e, path)) {
            return Some(site);
        }
        self.default_site
    }
}

fn by_prefix(entries: &[Entry], path: &str) -> Option<usize> {
    entries
        .iter()
        .find(|e| path.starts_with(e.prefix.as_str()))
        .map(|e| e.site)
}

/// Lower-cases a host and strips its port (`Example.COM:8080` →
/// `example.com`, `[::1]:80` → `[::1]`); a trailing dot is dropped.
/// Borrows when nothing changes (the common case).
pub fn normalize_host(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    let raw = raw.trim();
    let host = if raw.starts_with('[') {
        match raw.find(']') {
            Some(end) => &raw[..=end],
            None => return None,
        }
    } else {
        match raw.rfind(':') {
            Some(i) => &raw[..i],
            None => raw,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Some(std::borrow::Cow::Owned(host.to_ascii_lowercase()))
    } else {
        Some(std::borrow::Cow::Borrowed(host))
    }
}

/// Whether two authorities (`host[:port]`, any case, `userinfo@` ignored)
/// name the same origin once normalized as RFC 3986 section 6.2 says: host
/// case and a trailing dot do not matter, and a missing or empty port is
/// `default_port` (80 for `http`, 443 for `https`). RFC 9113 section 8.3.1
/// compares an HTTP/2 request's Host with its `:authority` this way.
pub fn same_authority(a: &str, b: &str, default_port: u16) -> bool {
    match (
        host_and_port(a, default_port),
        host_and_port(b, default_port),
    ) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The normalized host and the port of an authority.
fn host_and_port(raw: &str, default_port: u16) -> Option<(std::borrow::Cow<'_, str>, u16)> {
    let raw = raw.trim();
    let raw = raw.rsplit_once('@').map_or(raw, |(_, h)| h);
    let (host, port) = if raw.starts_with('[') {
        let end = raw.find(']')?;
        (&raw[..=end], &raw[end + 1..])
    } else {
        match raw.rfind(':') {
            Some(i) => (&raw[..i], &raw[i..]),
            None => (raw, ""),
        }
    };
    let port = match port {
        "" | ":" => default_port,
        p => p.strip_prefix(':')?.parse().ok()?,
    };
    Some((normalize_host(host)?, port))
}

#[cfg(test)]
mod tests;
