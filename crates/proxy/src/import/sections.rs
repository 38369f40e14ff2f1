//! HAProxy's sections (`global`, `defaults`, `frontend`, `backend`,
//! `listen`) read into [`Proxy`] and [`Global`] values: the directives the
//! importer maps, each with its line; everything else becomes a note here.
//! A proxy starts from the last `defaults` section before it (or the one
//! its `from` names), as HAProxy's do.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::lexer::Line;
use super::{Kind, Note};

mod server;
use server::server;

/// What a proxy section is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Defaults,
    Frontend,
    Backend,
    Listen,
}

impl Role {
    pub fn has_frontend(self) -> bool {
        matches!(self, Role::Frontend | Role::Listen | Role::Defaults)
    }
}

/// A value and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct At<T> {
    pub value: T,
    pub line: usize,
}

/// `global`.
#[derive(Debug, Default)]
pub struct Global {
    pub maxconn: Option<At<u64>>,
    pub nbthread: Option<At<u64>>,
    /// `crt-base`: the directory relative `crt` paths are in.
    pub crt_base: Option<String>,
    /// `stats socket` and `stats timeout`.
    pub stats: super::stats::Stats,
    /// `maxcompcpuusage`: the CPU percentage above which compression stops.
    pub maxcompcpuusage: Option<At<u64>>,
    /// `tune.comp.maxlevel`.
    pub comp_maxlevel: Option<At<u64>>,
    /// `localpeer`: this HAProxy's name in its `peers` sections.
    pub localpeer: Option<String>,
}

/// One `bind` address.
#[derive(Debug, Clone)]
pub struct Bind {
    pub line: usize,
    pub address: SocketAddr,
    /// `ssl crt ...`: certificate paths as written (files or directories).
    pub crt: Option<Vec<String>>,
    pub h2: bool,
    pub accept_proxy: bool,
    /// `verify`, `ca-file`, `crl-file`: the TOML keys they become.
    pub client_auth: Vec<(&'static str, String)>,
}

/// `acl <name> <criterion> [flags] <patterns>`.
#[derive(Debug, Clone)]
pub struct Acl {
    pub line: usize,
    pub name: String,
    /// Criterion, flags and patterns.
    pub words: Vec<String>,
}

/// `use_backend <name> [if|unless <condition>]`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub line: usize,
    pub backend: String,
    /// `if` (true) or `unless` (false) and the condition's words.
    pub condition: Option<(bool, Vec<String>)>,
}

/// A `server` line with its `default-server` settings applied.
#[derive(Debug, Clone, Default)]
pub struct Server {
    pub line: usize,
    pub name: String,
    pub address: Option<SocketAddr>,
    pub check: bool,
    pub inter: Option<Duration>,
    pub rise: Option<u32>,
    pub fall: Option<u32>,
    pub weight: Option<u32>,
    pub maxconn: Option<u64>,
    pub backup: bool,
    pub disabled: bool,
    pub agent_check: bool,
    pub agent_port: Option<u16>,
    pub agent_inter: Option<Duration>,
    pub agent_addr: Option<String>,
    pub send_proxy: Option<&'static str>,
    /// `cookie VALUE`: the value of the backend's persistence cookie.
    pub cookie: Option<String>,
}

/// A `defaults`, `frontend`, `backend` or `listen` section.
#[derive(Debug, Clone)]
pub struct Proxy {
    pub role: Role,
    pub name: String,
    pub line: usize,
    /// Line of a `mode` other than http (HAProxy's default mode is tcp).
    pub mode_http: Option<At<bool>>,
    pub binds: Vec<Bind>,
    pub acls: Vec<Acl>,
    pub rules: Vec<Rule>,
    pub default_backend: Option<At<String>>,
    pub balance: Option<At<String>>,
    pub servers: Vec<Server>,
    default_server: Vec<Line>,
    pub timeouts: BTreeMap<String, At<Duration>>,
    pub forwardfor: bool,
    pub httpchk: Option<At<String>>,
    pub expect_status: Option<At<u16>>,
    pub retries: Option<At<u64>>,
    /// `retry-on` keywords.
    pub retry_on: Option<At<Vec<String>>>,
    pub maxconn: Option<At<u64>>,
    pub monitor: super::stats::Monitor,
    pub compression: super::compression::Comp,
    /// `http-request`, `http-response`, `redirect`, `errorfile` and
    /// `http-error` lines, and `tcp-request` lines that track, in order
    /// (`import::rules` translates them).
    pub http_lines: Vec<Line>,
    /// `balance`, `hash-type`, `hash-balance-factor` and `cookie` lines
    /// (`import::balancing` writes them).
    pub balancing: Vec<Line>,
    /// The proxy's own `stick-table` line.
    pub stick_table: Option<Line>,
}

impl Proxy {
    fn new(role: Role, name: &str, line: usize) -> Proxy {
        Proxy {
            role,
            name: name.to_string(),
            line,
            mode_http: None,
            binds: Vec::new(),
            acls: Vec::new(),
            rules: Vec::new(),
            default_backend: None,
            balance: None,
            servers: Vec::new(),
            default_server: Vec::new(),
            timeouts: BTreeMap::new(),
            forwardfor: false,
            httpchk: None,
            expect_status: None,
            retries: None,
            retry_on: None,
            maxconn: None,
            monitor: Default::default(),
            compression: Default::default(),
            http_lines: Vec::new(),
            balancing: Vec::new(),
            stick_table: None,
        }
    }

    /// Whether the proxy is in `mode http` (set here or inherited).
    pub fn is_http(&self) -> bool {
        self.mode_http.as_ref().is_some_and(|m| m.value)
    }
}

/// The whole configuration, sections in file order.
#[derive(Debug, Default)]
pub struct Haproxy {
    pub global: Global,
    pub proxies: Vec<Proxy>,
    /// `userlist` sections: the section line and its lines.
    pub userlists: Vec<(Line, Vec<Line>)>,
    /// HAProxy 3.2's `acme` and `crt-store` sections, likewise
    /// (`super::acme`).
    pub acme: Vec<(Line, Vec<Line>)>,
    /// `table` lines of `peers` sections, with the section's name.
    pub peer_tables: Vec<(String, Line)>,
    /// `peer`, `server` and `bind` lines of `peers` sections, likewise.
    pub peer_members: Vec<(String, Line)>,
}

/// Reads the directives into sections; notes what is not mapped.
pub fn read(lines: &[Line], notes: &mut Vec<Note>) -> Haproxy {
    let mut out = Haproxy::default();
    let mut defaults: Vec<Proxy> = Vec::new();
    let mut current: Option<Proxy> = None;
    let mut in_global = false;
    let mut skipping = false;
    let mut in_userlist = false;
    let mut peers: Option<String> = None;
    for line in lines {
        let kw = line.keyword();
        let role = match kw {
            "defaults" => Some(Role::Defaults),
            "frontend" => Some(Role::Frontend),
            "backend" => Some(Role::Backend),
            "listen" => Some(Role::Listen),
            _ => None,
        };
        let other_section = matches!(
            kw,
            "peers"
                | "resolvers"
                | "cache"
                | "program"
                | "mailers"
                | "http-errors"
                | "ring"
                | "fcgi-app"
        );
        let collected = matches!(kw, "userlist" | "acme" | "crt-store");
        if role.is_some() || other_section || kw == "global" || collected {
            finish(&mut current, &mut defaults, &mut out);
            in_global = kw == "global";
            in_userlist = collected;
            peers = (kw == "peers").then(|| line.word(1).to_string());
            if collected {
                let into = if kw == "userlist" {
                    &mut out.userlists
                } else {
                    &mut out.acme
                };
                into.push((line.clone(), Vec::new()));
                skipping = false;
                continue;
            }
            skipping = other_section;
            if other_section {
                notes.push(other_section_note(line));
            }
            if let Some(role) = role {
                current = Some(proxy_section(role, line, &defaults, notes));
            }
            continue;
        }
        if in_userlist {
            // The section being collected is the last one pushed to either.
            let last = |v: &[(Line, Vec<Line>)]| v.last().map_or(0, |(l, _)| l.number);
            let into = if last(&out.userlists) > last(&out.acme) {
                &mut out.userlists
            } else {
                &mut out.acme
            };
            if let Some((_, lines)) = into.last_mut() {
                lines.push(line.clone());
            }
            continue;
        }
        if let (Some(p), "table") = (&peers, kw) {
            out.peer_tables.push((p.clone(), line.clone()));
            continue;
        }
        if let (Some(p), "peer" | "server" | "bind") = (&peers, kw) {
            out.peer_members.push((p.clone(), line.clone()));
            continue;
        }
        if skipping {
            continue;
        }
        if in_global {
            global(&mut out.global, line, notes);
        } else if let Some(p) = current.as_mut() {
            directive(p, line, notes);
        } else {
            notes.push(Note::new(
                line.number,
                kw,
                Kind::Unsupported,
                "outside any section; ignored".into(),
            ));
        }
    }
    finish(&mut current, &mut defaults, &mut out);
    out
}

/// The note on a section rdmalb does not read (`peers` only for its
/// tables).
fn other_section_note(line: &Line) -> Note {
    let kw = line.keyword();
    Note::new(
        line.number,
        kw,
        Kind::Unsupported,
        if kw == "peers" {
            "section not supported as such (no replication); its `table` lines are carried as [[stick_table]]s, shared through [stick_share] when the section names other peers, its other lines skipped".into()
        } else {
            format!("section not supported; its {} lines are skipped", kw)
        },
    )
}

/// A `defaults`, `frontend`, `backend` or `listen` section opened by
/// `line`: it inherits the `defaults` it names with `from`, else the last
/// one; a listen section's address on the line is its first bind.
fn proxy_section(role: Role, line: &Line, defaults: &[Proxy], notes: &mut Vec<Note>) -> Proxy {
    let (kw, name) = (line.keyword(), line.word(1));
    let mut p = match line.words.iter().position(|w| w == "from") {
        Some(i) => match defaults.iter().rev().find(|d| d.name == line.word(i + 1)) {
            Some(d) => inherit(d, role, name, line.number),
            None => {
                notes.push(Note::new(
                    line.number,
                    kw,
                    Kind::Routing,
                    format!("no defaults section named `{}`", line.word(i + 1)),
                ));
                Proxy::new(role, name, line.number)
            }
        },
        None => match defaults.last() {
            Some(d) => inherit(d, role, name, line.number),
            None => Proxy::new(role, name, line.number),
        },
    };
    if role == Role::Listen && !line.word(2).is_empty() && line.word(2) != "from" {
        super::bind::parse(&mut p, line, 2, notes);
    }
    p
}

fn finish(current: &mut Option<Proxy>, defaults: &mut Vec<Proxy>, out: &mut Haproxy) {
    if let Some(p) = current.take() {
        if p.role == Role::Defaults {
            defaults.push(p);
        } else {
            out.proxies.push(p);
        }
    }
}

/// A new proxy with the settings of a `defaults` section.
fn inherit(d: &Proxy, role: Role, name: &str, line: usize) -> Proxy {
    let mut p = d.clone();
    p.role = role;
    p.name = name.to_string();
    p.line = line;
    p.servers.clear();
    p.binds.clear();
    p.acls.clear();
    p.rules.clear();
    // Error pages carry over from defaults; rules only from named ones,
    // which the importer does not read.
    p.http_lines
        .retain(|l| matches!(l.keyword(), "errorfile" | "http-error"));
    p.stick_table = None;
    p
}

fn global(g: &mut Global, line: &Line, notes: &mut Vec<Note>) {
    let kw = line.keyword();
    match kw {
        "crt-base" => g.crt_base = Some(line.word(1).to_string()),
        "localpeer" => g.localpeer = Some(line.word(1).to_string()),
        "maxcompcpuusage" | "tune.comp.maxlevel" => {
            if let Some(v) = number(line, 1, notes) {
                let at = Some(At {
                    value: v,
                    line: line.number,
                });
                if kw == "maxcompcpuusage" {
                    g.maxcompcpuusage = at;
                } else {
                    g.comp_maxlevel = at;
                }
            }
        }
        "maxcomprate" => notes.push(Note::new(
            line.number,
            kw,
            Kind::Approximated,
            "rdmalb caps compression by CPU use only (global.compression_max_cpu), not by input rate".into(),
        )),
        "maxconn" | "nbthread" => match number(line, 1, notes) {
            Some(v) if kw == "maxconn" => {
                g.maxconn = Some(At {
                    value: v,
                    line: line.number,
                })
            }
            Some(v) => {
                g.nbthread = Some(At {
                    value: v,
                    line: line.number,
                })
            }
            None => {}
        },
        "daemon" | "user" | "group" | "uid" | "gid" | "chroot" | "pidfile" | "master-worker" => {
            notes.push(Note::new(
                line.number,
                kw,
                Kind::Unsupported,
                "not needed: rdmalb runs in the foreground under its systemd unit (conf/systemd)"
                    .into(),
            ))
        }
        "log" => notes.push(Note::new(
            line.number,
            kw,
            Kind::Unsupported,
            "not supported: rdmalb writes its access log to global.access_log (stdout)".into(),
        )),
        "stats" => super::stats::global(&mut g.stats, line, notes),
        _ => notes.push(Note::new(
            line.number,
            kw,
            Kind::Unsupported,
            "not supported in the global section".into(),
        )),
    }
}

fn number(line: &Line, i: usize, notes: &mut Vec<Note>) -> Option<u64> {
    match line.word(i).parse() {
        Ok(v) => Some(v),
        Err(_) => {
            notes.push(Note::new(
                line.number,
                line.keyword(),
                Kind::Unsupported,
                format!("`{}` is not a number; ignored", line.word(i)),
            ));
            None
        }
    }
}

/// HAProxy's time format: a number and an optional unit (us, ms, s, m, h,
/// d); a bare number is milliseconds.
pub fn time(text: &str) -> Option<Duration> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().ok()?;
    Some(match unit {
        "us" => Duration::from_micros(n),
        "" | "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        "d" => Duration::from_secs(n.checked_mul(86_400)?),
        _ => return None,
    })
}

fn directive(p: &mut Proxy, line: &Line, notes: &mut Vec<Note>) {
    let kw = line.keyword();
    let n = line.number;
    let mut note = |kind, why: String| notes.push(Note::new(n, kw, kind, why));
    match kw {
        "mode" => {
            p.mode_http = Some(At {
                value: line.word(1) == "http",
                line: n,
            })
        }
        "bind" if p.role.has_frontend() && p.role != Role::Defaults => {
            super::bind::parse(p, line, 1, notes)
        }
        "acl" => p.acls.push(Acl {
            line: n,
            name: line.word(1).to_string(),
            words: line.words.get(2..).unwrap_or_default().to_vec(),
        }),
        "use_backend" => {
            let condition = match line.word(2) {
                "" => None,
                w @ ("if" | "unless") => Some((w == "if", line.words[3..].to_vec())),
                other => {
                    note(
                        Kind::Routing,
                        format!("`{other}` is not `if` or `unless`; rule dropped"),
                    );
                    return;
                }
            };
            p.rules.push(Rule {
                line: n,
                backend: line.word(1).to_string(),
                condition,
            });
        }
        "default_backend" => {
            p.default_backend = Some(At {
                value: line.word(1).to_string(),
                line: n,
            })
        }
        "balance" => {
            p.balance = Some(At {
                value: line.word(1).to_string(),
                line: n,
            });
            p.balancing.push(line.clone());
        }
        "cookie" | "hash-type" | "hash-balance-factor" => p.balancing.push(line.clone()),
        "server" => {
            if let Some(s) = server(p, line, notes) {
                p.servers.push(s);
            }
        }
        "default-server" => p.default_server.push(line.clone()),
        "timeout" => timeout(p, line, notes),
        "option" | "no" => option(p, line, notes),
        "http-check" => http_check(p, line, notes),
        "retries" => {
            if let Some(v) = number(line, 1, notes) {
                p.retries = Some(At { value: v, line: n });
            }
        }
        "maxconn" => {
            if let Some(v) = number(line, 1, notes) {
                p.maxconn = Some(At { value: v, line: n });
            }
        }
        "compression" => p.compression.directive(line, notes),
        "retry-on" => {
            p.retry_on = Some(At {
                value: line.words[1..].to_vec(),
                line: n,
            })
        }
        "log" => note(
            Kind::Unsupported,
            "not supported: rdmalb writes its access log to global.access_log (stdout)".into(),
        ),
        "http-request"
        | "http-response"
        | "http-after-response"
        | "redirect"
        | "errorfile"
        | "http-error" => p.http_lines.push(line.clone()),
        "tcp-request"
            if matches!(line.word(1), "connection" | "session" | "content")
                && (line.word(2).starts_with("track-sc")
                    || line.word(2).starts_with("sc-inc-gpc")) =>
        {
            p.http_lines.push(line.clone())
        }
        "tcp-request" | "tcp-response" => notes.push(super::access::rule(line)),
        "stick-table" => p.stick_table = Some(line.clone()),
        "stick" | "use-server" => note(
            Kind::Unsupported,
            "not supported: rdmalb has no session stickiness".into(),
        ),
        "capture" | "unique-id-format" | "unique-id-header" | "log-format" | "stats" => {
            note(Kind::Unsupported, "not supported".into())
        }
        "monitor-uri" | "monitor" => {
            let acls: Vec<(String, Vec<String>)> = p
                .acls
                .iter()
                .map(|a| (a.name.clone(), a.words.clone()))
                .collect();
            super::stats::monitor(line, &mut p.monitor, &acls, notes)
        }
        _ => note(Kind::Unsupported, "not supported".into()),
    }
}

fn timeout(p: &mut Proxy, line: &Line, notes: &mut Vec<Note>) {
    let which = line.word(1);
    let n = line.number;
    match (which, time(line.word(2))) {
        (
            "connect" | "client" | "server" | "http-request" | "http-keep-alive" | "queue"
            | "check",
            Some(t),
        ) if t.is_zero() => notes.push(Note::new(
            n,
            "timeout",
            Kind::Unsupported,
            format!("`timeout {which} 0` (none) is not supported: rdmalb's default is kept"),
        )),
        (
            "connect" | "client" | "server" | "http-request" | "http-keep-alive" | "queue"
            | "check",
            Some(t),
        ) => {
            p.timeouts
                .insert(which.to_string(), At { value: t, line: n });
        }
        (
            "connect" | "client" | "server" | "http-request" | "http-keep-alive" | "queue"
            | "check",
            None,
        ) => notes.push(Note::new(
            n,
            "timeout",
            Kind::Unsupported,
            format!(
                "`{}` is not a time (expected e.g. 5s, 500ms, 1m); ignored",
                line.word(2)
            ),
        )),
        _ => notes.push(Note::new(
            n,
            "timeout",
            Kind::Unsupported,
            format!("`timeout {which}` not supported"),
        )),
    }
}

fn option(p: &mut Proxy, line: &Line, notes: &mut Vec<Note>) {
    let n = line.number;
    let (on, words) = if line.keyword() == "no" {
        (false, line.words.get(2..).unwrap_or_default())
    } else {
        (true, &line.words[1..])
    };
    let name = words.first().map_or("", String::as_str);
    match name {
        "forwardfor" => {
            p.forwardfor = on;
            if on {
                super::access::forwardfor(line, &words[1..], notes);
            }
        }
        "httpchk" => {
            // `option httpchk <uri>`, or `<method> <uri> [<version>]`.
            let uri = match words.len() {
                1 => "/".to_string(),
                2 => words[1].clone(),
                _ => {
                    if words[1] != "GET" {
                        notes.push(Note::new(
                            n,
                            "option httpchk",
                            Kind::Approximated,
                            format!("rdmalb checks with GET, not {}", words[1]),
                        ));
                    }
                    words[2].clone()
                }
            };
            p.httpchk = on.then_some(At {
                value: uri,
                line: n,
            });
        }
        "httplog" | "http-keep-alive" | "dontlognull" | "redispatch" | "log-health-checks"
        | "prefer-last-server" => {}
        "http-server-close" | "httpclose" | "forceclose" => notes.push(Note::new(
            n,
            &format!("option {name}"),
            Kind::Approximated,
            "rdmalb keeps connections alive on both sides (pooled upstream connections)".into(),
        )),
        _ => notes.push(Note::new(
            n,
            &format!("option {name}"),
            Kind::Unsupported,
            "not supported".into(),
        )),
    }
}

fn http_check(p: &mut Proxy, line: &Line, notes: &mut Vec<Note>) {
    let n = line.number;
    match (line.word(1), line.word(2)) {
        ("expect", "status") => match line.word(3).parse::<u16>() {
            Ok(code) if (100..=599).contains(&code) => {
                p.expect_status = Some(At {
                    value: code,
                    line: n,
                })
            }
            _ => notes.push(Note::new(
                n,
                "http-check expect",
                Kind::Unsupported,
                format!("`{}` is not one status code; ignored", line.word(3)),
            )),
        },
        ("send", _) => {
            if let Some(i) = line.words.iter().position(|w| w == "uri") {
                p.httpchk = Some(At {
                    value: line.word(i + 1).to_string(),
                    line: n,
                });
            }
        }
        (what, _) => notes.push(Note::new(
            n,
            &format!("http-check {what}"),
            Kind::Unsupported,
            "not supported (rdmalb's check passes on [health] expect_status)".into(),
        )),
    }
}
