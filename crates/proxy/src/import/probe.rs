//! HAProxy's first-match rule order against rdmalb's precedence, on probe
//! requests: every host and path prefix the rules name (a wildcard as one
//! name under it and the bare domain), and a host and a path no rule
//! names. A request the two send to different backends is a routing note.

use std::collections::BTreeSet;

use super::acl::host_matches;
use super::site::{Routed, Site};
use super::{Kind, Note};

/// Where HAProxy sends a request: the first rule that matches (its exact
/// condition when it has one, else the areas imported).
fn haproxy_route<'a>(
    routed: &'a [Routed],
    default: Option<&'a str>,
    host: &str,
    path: &str,
) -> Option<&'a str> {
    routed
        .iter()
        .find(|r| {
            if let Some(e) = &r.exact {
                return e.matches(host, path);
            }
            r.areas.iter().any(|a| {
                a.hosts
                    .as_ref()
                    .is_none_or(|hs| hs.iter().any(|h| host_matches(h, host)))
                    && a.paths
                        .as_ref()
                        .is_none_or(|ps| ps.iter().any(|p| path.starts_with(p.as_str())))
            })
        })
        .map(|r| r.backend.as_str())
        .or(default)
}

/// Where rdmalb sends it (front/route.rs): the most specific host pattern
/// with a matching prefix (exact, longest wildcard, `*`), longest prefix.
fn rdmalb_route<'a>(
    sites: &'a [Site],
    default: Option<&'a str>,
    host: &str,
    path: &str,
) -> Option<&'a str> {
    let mut best: Option<((u8, usize, usize), &str)> = None;
    for s in sites {
        for h in &s.hosts {
            if !host_matches(h, host) {
                continue;
            }
            let rank = if h == "*" {
                0
            } else if h.starts_with('*') {
                1
            } else {
                2
            };
            let prefixes: Vec<&str> = if s.paths.iter().all(|p| p.is_empty()) {
                vec![""]
            } else {
                s.paths
                    .iter()
                    .map(|p| if p.is_empty() { "/" } else { p.as_str() })
                    .collect()
            };
            for p in prefixes {
                if path.starts_with(p) {
                    let key = (rank, h.len(), p.len());
                    if best.is_none_or(|(k, _)| key > k) {
                        best = Some((key, s.backend.name.as_str()));
                    }
                }
            }
        }
    }
    // Within one host pattern the longest prefix wins; across patterns the
    // more specific pattern wins first, which the key's order encodes.
    best.map(|(_, b)| b).or(default)
}

/// Notes each pair of backends (HAProxy's, rdmalb's) some probe request
/// reaches differently; returns the backends involved.
pub(super) fn compare(
    routed: &[Routed],
    default: Option<&str>,
    sites: &[Site],
    notes: &mut Vec<Note>,
) -> BTreeSet<String> {
    let mut hosts = vec!["unlisted.invalid".to_string()];
    let mut paths = vec!["/".to_string(), "/unlisted".to_string()];
    for r in routed {
        let (mut named_hosts, mut named_paths) =
            r.exact.as_ref().map(|e| e.names()).unwrap_or_default();
        for a in &r.areas {
            named_hosts.extend(a.hosts.iter().flatten().cloned());
            named_paths.extend(a.paths.iter().flatten().cloned());
        }
        for h in named_hosts {
            match h.strip_prefix("*.") {
                Some(s) => {
                    hosts.push(format!("probe.{s}"));
                    hosts.push(s.to_string());
                }
                None if h == "*" => {}
                None => hosts.push(h),
            }
        }
        for p in named_paths {
            paths.push(format!("{p}probe"));
            paths.push(p);
        }
    }
    hosts.sort();
    hosts.dedup();
    paths.sort();
    paths.dedup();
    let mut seen = Vec::new();
    let mut involved = BTreeSet::new();
    for host in &hosts {
        for path in &paths {
            let want = haproxy_route(routed, default, host, path);
            let got = rdmalb_route(sites, default, host, path);
            if want == got {
                continue;
            }
            involved.extend(want.into_iter().chain(got).map(str::to_string));
            if seen.contains(&(want, got)) {
                continue;
            }
            seen.push((want, got));
            let line = routed
                .iter()
                .find(|r| Some(r.backend.as_str()) == want)
                .or_else(|| routed.iter().find(|r| Some(r.backend.as_str()) == got))
                .map_or(0, |r| r.line);
            notes.push(Note::new(
                line,
                "use_backend",
                Kind::Routing,
                format!(
                    "not expressible as rdmalb sites: Host `{host}` path `{path}` reaches backend `{}` in HAProxy, `{}` in rdmalb",
                    want.unwrap_or("none"),
                    got.unwrap_or("none")
                ),
            ));
        }
    }
    involved
}
