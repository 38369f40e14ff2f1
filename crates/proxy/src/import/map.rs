//! The rdmalb configuration made from the read HAProxy sections: global
//! settings, listeners, one site per backend (its hosts and path prefixes
//! from the rules reaching it) and one node per server; then HAProxy's rule
//! order is compared with rdmalb's precedence on probe requests
//! ([`super::probe`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use super::routes;
use super::sections::{Haproxy, Proxy, Role, Server};
use super::site::{backend_site_name, q, site_name, Site};
use super::{Kind, Note};

/// Whether the `use_backend` rules need `[[site_rule]]`s: a dynamic
/// backend name, or the hosts-and-prefixes mapping (its notes in `notes`)
/// changed or approximated a rule.
pub fn needs_site_rules(h: &Haproxy, notes: &[Note]) -> bool {
    h.proxies
        .iter()
        .any(|p| p.rules.iter().any(|r| r.backend.contains('%')))
        || notes.iter().any(|n| {
            (matches!(n.directive.as_str(), "use_backend" | "acl")
                && !n.why.starts_with("no http backend named"))
                || (matches!(n.directive.as_str(), "frontend" | "listen")
                    && n.why.contains("routes differently"))
        })
}

/// The rdmalb configuration; `by_rules`: the `use_backend` rules become
/// `[[site_rule]]`s (`import::rules`) and the sites take no hosts.
pub fn map(h: &Haproxy, dir: &Path, notes: &mut Vec<Note>, by_rules: bool) -> String {
    let mut out = String::from(
        "# Made by `rdmalb import` from an HAProxy configuration; review the notes it printed.\n",
    );
    let (frontends, backends) = routes::http_proxies(h, notes);
    let (routed, default) = routes::table(&frontends, &backends, by_rules, notes);
    let (sites, claimed) = routes::sites(&backends, &routed, notes);
    routes::compare(&routed, default.as_deref(), &sites, notes);
    global(
        &mut out,
        h,
        &frontends,
        &backends,
        default.as_deref(),
        notes,
    );
    super::bind::listeners(
        &mut out,
        &frontends,
        dir,
        h.global.crt_base.as_deref(),
        notes,
    );
    super::stats::emit(&mut out, &h.global.stats);
    super::acme::section(&mut out, h, notes);
    let any_taken = claimed.contains_key(&("*".to_string(), String::new()));
    let default = if by_rules { None } else { default.as_deref() };
    let written = Written {
        default,
        any_taken,
        by_rules,
    };
    write_sites(&mut out, h, &frontends, &backends, &sites, written, notes);
    out.push_str(&super::rules::rules(
        h, &frontends, &backends, by_rules, notes,
    ));
    for empty in ["\n[timeouts]\n\n", "\n[limits]\n\n", "\n[health]\n\n"] {
        out = out.replace(empty, "\n");
    }
    out
}

/// What every site's table depends on besides the site.
#[derive(Clone, Copy)]
struct Written<'a> {
    /// The default backend (none with `[[site_rule]]`s).
    default: Option<&'a str>,
    /// Whether some site claimed every host and path.
    any_taken: bool,
    by_rules: bool,
}

/// The `[[site]]` tables (with their balancing, ACME and compression
/// lines) and the `[[node]]` ones.
fn write_sites(
    out: &mut String,
    h: &Haproxy,
    frontends: &[&Proxy],
    backends: &[&Proxy],
    sites: &[Site<'_>],
    written: Written<'_>,
    notes: &mut Vec<Note>,
) {
    let acme_domains = super::acme::domains(h);
    let health_path = most_common(
        &backends
            .iter()
            .filter_map(|b| b.httpchk.as_ref())
            .map(|c| (c.value.clone(), c.line))
            .collect::<Vec<_>>(),
    )
    .map_or("/".to_string(), |(p, _)| p);
    let front_comp = frontend_compression(frontends, notes);
    let level = h.global.comp_maxlevel.as_ref().map(|l| l.value);
    let balance = super::balancing::global_policy(backends);
    for s in sites {
        site(
            out,
            s,
            written.default,
            &health_path,
            written.any_taken,
            written.by_rules,
            notes,
        );
        super::balancing::site(out, s.backend, balance, notes);
        super::acme::site_line(out, &s.hosts, &acme_domains);
        let own = Some(&s.backend.compression).filter(|c| c.enabled());
        if let Some(c) = own.or(front_comp) {
            c.write(out, level);
        }
    }
    let hosts: Vec<&String> = sites.iter().flat_map(|s| &s.hosts).collect();
    super::acme::unserved(h, &acme_domains, &hosts, notes);
    nodes(out, sites, notes);
}

/// The compression a backend without its own takes: the first
/// frontend's that compresses (noted when another frontend does not).
fn frontend_compression<'a>(
    frontends: &[&'a Proxy],
    notes: &mut Vec<Note>,
) -> Option<&'a super::compression::Comp> {
    let front_comp = frontends
        .iter()
        .map(|f| &f.compression)
        .find(|c| c.enabled());
    if let (Some(c), Some(f)) = (
        front_comp,
        frontends.iter().find(|f| !f.compression.enabled()),
    ) {
        notes.push(Note::new(f.line, "compression", Kind::Approximated, format!("`{}` does not compress but another frontend does: rdmalb compresses per site, so responses through `{}` are compressed too (line {})", f.name, f.name, c.algos.as_ref().map_or(0, |a| a.line))));
    }
    front_comp
}

impl Proxy {
    pub(super) fn role_word(&self) -> &'static str {
        match self.role {
            Role::Frontend => "frontend",
            Role::Listen => "listen",
            Role::Backend => "backend",
            Role::Defaults => "defaults",
        }
    }
}

fn dur(d: Duration) -> String {
    q(&rdmalb_base::duration::format(d))
}

/// The most common value and the lines that differ from it.
fn most_common<T: Ord + Clone>(values: &[(T, usize)]) -> Option<(T, Vec<(T, usize)>)> {
    // Count, and the first position (a tie goes to the value seen first).
    let mut counts: BTreeMap<T, (usize, std::cmp::Reverse<usize>)> = BTreeMap::new();
    for (i, (v, _)) in values.iter().enumerate() {
        counts
            .entry(v.clone())
            .or_insert((0, std::cmp::Reverse(i)))
            .0 += 1;
    }
    let best = counts.iter().max_by_key(|(_, c)| **c)?.0.clone();
    let others = values.iter().filter(|(v, _)| *v != best).cloned().collect();
    Some((best, others))
}

/// Writes `key = <the most common value>` for a setting rdmalb has once
/// and HAProxy per proxy or server (`key_path` names it in notes, its last
/// part is the key), and notes each line with another value.
fn one_key<T: Ord + Clone>(
    out: &mut String,
    notes: &mut Vec<Note>,
    key_path: &str,
    directive: &str,
    values: &[(T, usize)],
    show: impl Fn(&T) -> String,
) -> Option<T> {
    let (best, others) = most_common(values)?;
    let key = key_path.rsplit('.').next().unwrap_or(key_path);
    writeln!(out, "{key} = {}", show(&best)).ok();
    for (v, line) in others {
        notes.push(Note::new(
            line,
            directive,
            Kind::Approximated,
            format!(
                "rdmalb has one `{key_path}`: {} (the most common) instead of {}",
                show(&best),
                show(&v)
            ),
        ));
    }
    Some(best)
}

fn global(
    out: &mut String,
    h: &Haproxy,
    frontends: &[&Proxy],
    backends: &[&Proxy],
    default: Option<&str>,
    notes: &mut Vec<Note>,
) {
    out.push_str("\n[global]\n");
    writeln!(
        out,
        "balance = {}",
        q(super::balancing::global_policy(backends))
    )
    .ok();
    if let Some(d) = default {
        writeln!(out, "default_site = {}", q(&backend_site_name(d))).ok();
    }
    if let Some(n) = &h.global.nbthread {
        writeln!(out, "workers = {}", n.value).ok();
    }
    if let Some(c) = &h.global.maxcompcpuusage {
        writeln!(out, "compression_max_cpu = {}", c.value.clamp(1, 100)).ok();
    }
    let ff: Vec<bool> = frontends
        .iter()
        .chain(backends)
        .map(|p| p.forwardfor)
        .collect();
    if ff.iter().any(|f| *f) {
        out.push_str("forwarded_for = \"append\"\n");
        if let Some(p) = frontends.iter().chain(backends).find(|p| !p.forwardfor) {
            notes.push(Note::new(
                p.line,
                "option forwardfor",
                Kind::Approximated,
                format!(
                    "rdmalb sets X-Forwarded-For on every request, `{}` included",
                    p.name
                ),
            ));
        }
    }
    retries(out, backends, notes);
    timeouts(out, frontends, backends, notes);
    limits(out, h, frontends, notes);
    health(out, backends, notes);
}

/// `[timeouts]`: the client side from frontends, the server side from
/// backends, the most common value of each.
fn timeouts(out: &mut String, frontends: &[&Proxy], backends: &[&Proxy], notes: &mut Vec<Note>) {
    out.push_str("\n[timeouts]\n");
    for (haproxy, key, side) in [
        ("connect", "connect", false),
        ("client", "client", true),
        ("server", "server", false),
        ("http-request", "http_request", true),
        ("http-keep-alive", "keep_alive", true),
        ("queue", "queue", false),
    ] {
        let proxies: &[&Proxy] = if side { frontends } else { backends };
        let values: Vec<(Duration, usize)> = proxies
            .iter()
            .filter_map(|p| p.timeouts.get(haproxy))
            .map(|t| (t.value, t.line))
            .collect();
        let key = format!("timeouts.{key}");
        one_key(
            out,
            notes,
            &key,
            &format!("timeout {haproxy}"),
            &values,
            |d| dur(*d),
        );
    }
}

/// `[limits]`: the frontends' `maxconn` (the most common), else the
/// global one.
fn limits(out: &mut String, h: &Haproxy, frontends: &[&Proxy], notes: &mut Vec<Note>) {
    out.push_str("\n[limits]\n");
    let maxconns: Vec<(u64, usize)> = frontends
        .iter()
        .filter_map(|f| f.maxconn.as_ref())
        .map(|m| (m.value, m.line))
        .collect();
    let per_listener = one_key(
        out,
        notes,
        "limits.max_connections",
        "maxconn",
        &maxconns,
        u64::to_string,
    );
    if let (None, Some(g)) = (per_listener, &h.global.maxconn) {
        writeln!(out, "max_connections = {}", g.value).ok();
    }
}

/// `[health]`: the most common per-server and per-backend check values.
fn health(out: &mut String, backends: &[&Proxy], notes: &mut Vec<Note>) {
    out.push_str("\n[health]\n");
    let checked: Vec<&Server> = backends
        .iter()
        .flat_map(|b| b.servers.iter())
        .filter(|s| s.check)
        .collect();
    let paths: Vec<(String, usize)> = backends
        .iter()
        .filter_map(|b| b.httpchk.as_ref())
        .map(|c| (c.value.clone(), c.line))
        .collect();
    if let Some((best, _)) = most_common(&paths) {
        writeln!(out, "path = {}", q(&best)).ok();
    }
    let inters: Vec<(Duration, usize)> = checked
        .iter()
        .map(|s| (s.inter.unwrap_or(Duration::from_secs(2)), s.line))
        .collect();
    one_key(out, notes, "health.interval", "server", &inters, |d| {
        dur(*d)
    });
    let checks: Vec<(Duration, usize)> = backends
        .iter()
        .filter_map(|b| b.timeouts.get("check"))
        .map(|t| (t.value, t.line))
        .collect();
    if let Some((best, _)) = most_common(&checks) {
        writeln!(out, "timeout = {}", dur(best.max(Duration::from_millis(1)))).ok();
    }
    for (key, get, dflt) in [
        (
            "rise",
            (|s: &Server| s.rise) as fn(&Server) -> Option<u32>,
            2,
        ),
        ("fall", |s: &Server| s.fall, 3),
    ] {
        let values: Vec<(u32, usize)> = checked
            .iter()
            .map(|s| (get(s).unwrap_or(dflt), s.line))
            .collect();
        one_key(
            out,
            notes,
            &format!("health.{key}"),
            "server",
            &values,
            u32::to_string,
        );
    }
    let expects: Vec<(u16, usize)> = backends
        .iter()
        .filter_map(|b| b.expect_status.as_ref())
        .map(|e| (e.value, e.line))
        .collect();
    one_key(
        out,
        notes,
        "health.expect_status",
        "http-check expect",
        &expects,
        u16::to_string,
    );
    for b in backends {
        if b.httpchk.is_none() && b.servers.iter().any(|s| s.check) {
            notes.push(Note::new(b.line, "backend", Kind::Approximated, format!("`{}` has no `option httpchk`: HAProxy checks that a TCP connection opens, rdmalb sends an HTTP GET and wants 2xx/3xx", b.name)));
        }
    }
}

/// `retries` and `retry-on` (HAProxy's defaults: 3, `conn-failure`) as
/// `global.retries` and `global.retry_on`, the most common values of the
/// backends with servers; written only when some backend sets them.
fn retries(out: &mut String, backends: &[&Proxy], notes: &mut Vec<Note>) {
    let with_servers: Vec<&&Proxy> = backends.iter().filter(|b| !b.servers.is_empty()).collect();
    if with_servers.iter().any(|b| b.retries.is_some()) {
        let max = crate::config::MAX_RETRIES;
        let counts: Vec<(u64, usize)> = with_servers
            .iter()
            .map(|b| {
                b.retries
                    .as_ref()
                    .map_or((3, b.line), |r| (r.value, r.line))
            })
            .map(|(n, line)| {
                if n > max {
                    notes.push(Note::new(
                        line,
                        "retries",
                        Kind::Approximated,
                        format!("rdmalb retries at most {max} times: {n} lowered"),
                    ));
                }
                (n.min(max), line)
            })
            .collect();
        one_key(out, notes, "global.retries", "retries", &counts, |n| {
            n.to_string()
        });
    }
    if !with_servers.iter().any(|b| b.retry_on.is_some()) {
        return;
    }
    let sets: Vec<(Vec<String>, usize)> = with_servers
        .iter()
        .map(|b| {
            b.retry_on.as_ref().map_or((vec!["conn-failure".to_string()], b.line), |r| {
                let mut kept = Vec::new();
                for w in &r.value {
                    match w.as_str() {
                        "conn-failure" | "empty-response" => kept.push(w.clone()),
                        "none" => {}
                        other => notes.push(Note::new(r.line, "retry-on", Kind::Approximated, format!("`{other}` is not retried by rdmalb (it retries conn-failure and empty-response)"))),
                    }
                }
                kept.sort();
                kept.dedup();
                (kept, r.line)
            })
        })
        .collect();
    one_key(out, notes, "global.retry_on", "retry-on", &sets, |v| {
        format!(
            "[{}]",
            v.iter().map(|w| q(w)).collect::<Vec<_>>().join(", ")
        )
    });
}

/// Writes one `[[site]]`; `any_taken`: another site has `*` for all paths.
fn site(
    out: &mut String,
    s: &Site,
    default: Option<&str>,
    health_path: &str,
    any_taken: bool,
    by_rules: bool,
    notes: &mut Vec<Note>,
) {
    write!(out, "\n[[site]]\nname = {}\n", q(&s.name)).ok();
    if by_rules {
        out.push_str(
            "# Reached by the [[site_rule]]s below (or as global.default_site).\nhosts = []\n",
        );
    } else if s.hosts.is_empty() && default == Some(s.backend.name.as_str()) && !any_taken {
        // `*` for every path is what the default backend takes in HAProxy:
        // whatever no rule matches (the lowest precedence in rdmalb too).
        out.push_str("hosts = [\"*\"]\n");
    } else if s.hosts.is_empty() {
        let reached = default == Some(s.backend.name.as_str());
        if !reached {
            notes.push(Note::new(
                s.backend.line,
                "backend",
                Kind::Unsupported,
                format!(
                    "no rule reaches `{}`; its site gets the placeholder host `{}.invalid`",
                    s.backend.name, s.name
                ),
            ));
        }
        writeln!(
            out,
            "# Reached as {}: the host below is a placeholder (rdmalb sites need one).",
            if reached {
                "global.default_site"
            } else {
                "nothing"
            }
        )
        .ok();
        writeln!(out, "hosts = [{}]", q(&format!("{}.invalid", s.name))).ok();
    } else {
        writeln!(
            out,
            "hosts = [{}]",
            s.hosts.iter().map(|h| q(h)).collect::<Vec<_>>().join(", ")
        )
        .ok();
        if s.paths.iter().any(|p| !p.is_empty()) {
            let paths: Vec<String> = s
                .paths
                .iter()
                .map(|p| q(if p.is_empty() { "/" } else { p }))
                .collect();
            writeln!(out, "path_prefixes = [{}]", paths.join(", ")).ok();
        }
    }
    // The global path is the most common `option httpchk` URI; a backend
    // with another one (or none: HAProxy's check then only connects, `/`
    // is the closest HTTP check) gets its own.
    let own = s.backend.httpchk.as_ref().map_or("/", |c| c.value.as_str());
    if own != health_path && !s.backend.servers.is_empty() {
        writeln!(out, "health_path = {}", q(own)).ok();
    }
}

fn nodes(out: &mut String, sites: &[Site], notes: &mut Vec<Note>) {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for s in sites {
        for srv in &s.backend.servers {
            *count.entry(srv.name.as_str()).or_default() += 1;
        }
    }
    for s in sites {
        for srv in &s.backend.servers {
            let name = if count[srv.name.as_str()] > 1 {
                format!("{}-{}", s.name, site_name(&srv.name))
            } else {
                site_name(&srv.name)
            };
            let addr = srv.address.expect("servers without address are dropped");
            write!(
                out,
                "\n[[node]]\nname = {}\naddress = {}\nsite = {}\n",
                q(&name),
                q(&addr.to_string()),
                q(&s.name)
            )
            .ok();
            if !srv.check {
                out.push_str("check = false\n");
            }
            if let Some(v) = srv.send_proxy {
                writeln!(out, "send_proxy = {}", q(v)).ok();
            }
            if let Some(w) = srv.weight.filter(|w| *w != 1) {
                writeln!(out, "weight = {w}").ok();
            }
            if let Some(m) = srv.maxconn.filter(|m| *m > 0) {
                writeln!(out, "max_inflight = {m}").ok();
            }
            if let Some(c) = &srv.cookie {
                writeln!(out, "cookie = {}", q(c)).ok();
            }
            if srv.backup {
                out.push_str("backup = true\n");
            }
            if srv.disabled {
                out.push_str("disabled = true\n");
            }
            if srv.agent_check {
                if srv.agent_port.is_none() {
                    notes.push(Note::new(
                        srv.line,
                        "server",
                        Kind::Unsupported,
                        "`agent-check` without `agent-port` (HAProxy refuses it): no agent check"
                            .into(),
                    ));
                }
                if let Some(p) = srv.agent_port {
                    writeln!(out, "agent_port = {p}").ok();
                }
                if let Some(i) = srv.agent_inter {
                    writeln!(
                        out,
                        "agent_interval = {}",
                        dur(i.max(Duration::from_millis(1)))
                    )
                    .ok();
                }
                if let Some(a) = &srv.agent_addr {
                    writeln!(out, "agent_address = {}", q(a)).ok();
                }
            }
        }
    }
}
