//! The routing table `rdmalb import` makes from HAProxy's sections: which
//! proxies are HTTP ones, every frontend's `use_backend` rules merged in
//! file order with its default backend, and the sites they make: the
//! (host, path prefix) pairs each backend's rules reach, the first claim
//! winning as HAProxy's first match does.

use std::collections::HashMap;

use super::acl::{self, Area};
use super::sections::{Haproxy, Proxy, Role};
use super::site::{backend_site_name, site_name, Routed, Site};
use super::{Kind, Note};

/// Which (host, path prefix) pair went to which site (its index).
pub(super) type Claimed = HashMap<(String, String), usize>;

/// The frontends and the backends rdmalb can serve: the sections in mode
/// http (a section in tcp mode is noted and dropped); a listen section
/// without servers (a stats page) is no backend.
pub(super) fn http_proxies<'a>(
    h: &'a Haproxy,
    notes: &mut Vec<Note>,
) -> (Vec<&'a Proxy>, Vec<&'a Proxy>) {
    let mut tcp_notes = Vec::new();
    let mut http = |p: &Proxy, noted: bool| {
        if !p.is_http() && noted {
            let line = p.mode_http.as_ref().map_or(p.line, |m| m.line);
            let dropped = if p.role == Role::Backend {
                "its servers are"
            } else {
                "its listeners are"
            };
            tcp_notes.push(Note::new(line, "mode", Kind::Routing, format!("`{}` is not in mode http (HAProxy's default mode is tcp): not supported, {dropped} dropped", p.name)));
        }
        p.is_http()
    };
    let frontends: Vec<&Proxy> = h
        .proxies
        .iter()
        .filter(|p| p.role.has_frontend())
        .filter(|p| http(p, true))
        .collect();
    let backends: Vec<&Proxy> = h
        .proxies
        .iter()
        .filter(|p| p.role == Role::Backend || (p.role == Role::Listen && !p.servers.is_empty()))
        .filter(|p| http(p, p.role == Role::Backend))
        .collect();
    notes.append(&mut tcp_notes);
    (frontends, backends)
}

/// Every frontend's rules merged in file order, and the default backend
/// (the first frontend's; a frontend routing otherwise is noted).
pub(super) fn table(
    frontends: &[&Proxy],
    backends: &[&Proxy],
    by_rules: bool,
    notes: &mut Vec<Note>,
) -> (Vec<Routed>, Option<String>) {
    let mut routed: Vec<Routed> = Vec::new();
    let mut default: Option<String> = None;
    let mut first_signature: Option<(String, String)> = None;
    for f in frontends {
        let mine = if by_rules {
            Vec::new()
        } else {
            frontend_rules(f, backends, notes)
        };
        let own = (f.role == Role::Listen && !f.servers.is_empty()).then(|| f.name.clone());
        let fdefault = f.default_backend.as_ref().map(|d| d.value.clone()).or(own);
        let signature = (
            format!(
                "{:?}",
                mine.iter()
                    .map(|r| (&r.backend, &r.areas))
                    .collect::<Vec<_>>()
            ),
            format!("{fdefault:?}"),
        );
        match &first_signature {
            None => {
                first_signature = Some(signature);
                default = fdefault;
            }
            Some(first) if *first != signature && !f.binds.is_empty() && !by_rules => notes.push(Note::new(
                f.line,
                f.role_word(),
                Kind::Routing,
                format!("rdmalb routes every listener with one table: `{}` routes differently from the first frontend, and its listeners use the merged rules (default backend `{}`)", f.name, default.as_deref().unwrap_or("none")),
            )),
            Some(_) => {}
        }
        routed.extend(mine);
    }
    let default = default.filter(|d| known_default(d, frontends, backends, notes));
    (routed, default)
}

/// One frontend's `use_backend` rules as areas of hosts and paths (a rule
/// naming no http backend is noted and dropped).
fn frontend_rules(f: &Proxy, backends: &[&Proxy], notes: &mut Vec<Note>) -> Vec<Routed> {
    // Only the ACLs routing uses: the others are request rules'.
    let routing: Vec<_> = f
        .acls
        .iter()
        .filter(|a| {
            f.rules.iter().any(|r| {
                r.condition
                    .as_ref()
                    .is_some_and(|(_, w)| w.iter().any(|w| w.trim_start_matches('!') == a.name))
            })
        })
        .cloned()
        .collect();
    acl::approximations(&routing, notes);
    let mut mine = Vec::new();
    for r in &f.rules {
        if !backends.iter().any(|b| b.name == r.backend) {
            notes.push(Note::new(
                r.line,
                "use_backend",
                Kind::Routing,
                format!("no http backend named `{}`; rule dropped", r.backend),
            ));
            continue;
        }
        let c = match &r.condition {
            None => acl::Condition {
                areas: vec![Area::ALL],
                exact: None,
                left_out: Vec::new(),
            },
            Some((positive, words)) => acl::condition(r.line, *positive, words, &f.acls, notes),
        };
        mine.push(Routed {
            line: r.line,
            backend: r.backend.clone(),
            areas: c.areas,
            exact: c.exact,
            left_out: c.left_out,
        });
    }
    mine
}

/// Whether the default backend `d` is an http backend; noted when not.
fn known_default(
    d: &str,
    frontends: &[&Proxy],
    backends: &[&Proxy],
    notes: &mut Vec<Note>,
) -> bool {
    if backends.iter().any(|b| b.name == d) {
        return true;
    }
    let line = frontends
        .iter()
        .find_map(|f| f.default_backend.as_ref().filter(|x| x.value == d))
        .map_or(0, |x| x.line);
    notes.push(Note::new(
        line,
        "default_backend",
        Kind::Routing,
        format!("no http backend named `{d}`"),
    ));
    false
}

/// One site per backend, its hosts and path prefixes those its rules
/// reach (see [`claim`]); also which pair went to which site.
pub(super) fn sites<'a>(
    backends: &[&'a Proxy],
    routed: &[Routed],
    notes: &mut Vec<Note>,
) -> (Vec<Site<'a>>, Claimed) {
    let mut sites: Vec<Site> = backends
        .iter()
        .map(|b| Site {
            name: {
                let name = backend_site_name(&b.name);
                if name != site_name(&b.name) {
                    notes.push(Note::new(b.line, "backend", Kind::Approximated, format!("`{}` is reserved in rdmalb (it names the idle pool); its site is named `{name}`", b.name)));
                }
                name
            },
            backend: b,
            pairs: Vec::new(),
            hosts: Vec::new(),
            paths: Vec::new(),
            line: routed
                .iter()
                .find(|r| r.backend == b.name)
                .map_or(b.line, |r| r.line),
        })
        .collect();
    let claimed = claim(&mut sites, routed);
    for (si, s) in sites.iter_mut().enumerate() {
        hosts_and_paths(si, s, &claimed, notes);
    }
    (sites, claimed)
}

/// Gives each site the (host, prefix) pairs its backend's rules reach,
/// first claim wins. A pattern also claims the more specific patterns
/// other rules name (`*` every name, `*.a.com` `b.a.com`): rdmalb prefers
/// those, so without them a later rule for `b.a.com` would win where
/// HAProxy's earlier rule does. A pair inside an earlier claim is never
/// reached in HAProxy (another backend's earlier rule takes it all) and is
/// left out. `order`: the claims that shadow.
fn claim(sites: &mut [Site<'_>], routed: &[Routed]) -> Claimed {
    let mut named: Vec<String> = Vec::new();
    for a in routed.iter().flat_map(|r| &r.areas) {
        for h in a.hosts.iter().flatten() {
            if !named.contains(h) {
                named.push(h.clone());
            }
        }
    }
    let mut claimed = Claimed::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for r in routed {
        let si = sites
            .iter()
            .position(|s| s.backend.name == r.backend)
            .expect("checked above");
        // Only a rule imported whole shadows later ones: one imported
        // without a part matches more here than in HAProxy.
        let covers = r.left_out.is_empty() && (r.exact.is_some() || r.areas == [Area::ALL]);
        for a in &r.areas {
            let paths = a.paths.clone().unwrap_or_else(|| vec![String::new()]);
            for host in &expanded_hosts(a, &named) {
                for path in &paths {
                    let key = (host.clone(), path.clone());
                    let shadowed = order.iter().any(|(h, p)| {
                        claimed[&(h.clone(), p.clone())] != si
                            && (h == "*" || acl::host_within(host, h))
                            && path.starts_with(p.as_str())
                    });
                    if claimed.contains_key(&key) || shadowed {
                        continue;
                    }
                    claimed.insert(key.clone(), si);
                    if covers {
                        order.push(key.clone());
                    }
                    sites[si].pairs.push(key);
                }
            }
        }
    }
    claimed
}

/// The hosts of `a` (all, `*`, when it names none) with the more specific
/// ones of `named` they cover.
fn expanded_hosts(a: &Area, named: &[String]) -> Vec<String> {
    let hosts = a.hosts.clone().unwrap_or_else(|| vec!["*".into()]);
    let mut expanded = hosts.clone();
    for h in &hosts {
        for n in named {
            if !expanded.contains(n) && (h == "*" || (n != h && acl::host_within(n, h))) {
                expanded.push(n.clone());
            }
        }
    }
    expanded
}

/// A site's hosts and paths from its pairs; hosts × paths may take pairs
/// another site claimed: such hosts are dropped, and noted.
fn hosts_and_paths(si: usize, s: &mut Site<'_>, claimed: &Claimed, notes: &mut Vec<Note>) {
    for (host, path) in &s.pairs {
        if !s.hosts.contains(host) {
            s.hosts.push(host.clone());
        }
        if !s.paths.contains(path) {
            s.paths.push(path.clone());
        }
    }
    let paths = s.paths.clone();
    let name = s.name.clone();
    let backend = s.backend.name.clone();
    let line = s.line;
    s.hosts.retain(|h| {
        let taken: Vec<&String> = paths.iter().filter(|p| claimed.get(&(h.clone(), (*p).clone())).is_some_and(|&o| o != si)).collect();
        if taken.is_empty() {
            return true;
        }
        notes.push(Note::new(line, "use_backend", Kind::Routing, format!("site `{name}` cannot take host `{h}` for paths {} of backend `{backend}`: another site routes that host with the same prefixes", paths.iter().map(|p| format!("`{}`", if p.is_empty() { "/" } else { p })).collect::<Vec<_>>().join(", "))));
        false
    });
}

/// Compares HAProxy's first-match order with rdmalb's precedence and notes
/// each part of a rule left out, as changing routing or not.
pub(super) fn compare(
    routed: &[Routed],
    default: Option<&str>,
    sites: &[Site<'_>],
    notes: &mut Vec<Note>,
) {
    let involved = super::probe::compare(routed, default, sites, notes);
    let all_exact = routed
        .iter()
        .all(|r| r.exact.is_some() || r.areas == [Area::ALL]);
    for r in routed {
        for what in &r.left_out {
            // Only when HAProxy's every condition is known can the probes judge.
            notes.push(if !all_exact || involved.contains(&r.backend) {
                Note::new(r.line, "use_backend", Kind::Routing, format!("{what} is not expressible with host and path prefix matching; the rule is imported without it (it matches more)"))
            } else {
                Note::new(r.line, "use_backend", Kind::Approximated, format!("{what} is left out, and the order of the rules still gives every host and path they name the same backend as in HAProxy"))
            });
        }
    }
}
