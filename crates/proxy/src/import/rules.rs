//! The request and response rules of the HAProxy file as rdmalb's
//! (docs/rules.md): `http-request`, `redirect`, `http-response`,
//! `errorfile`, `http-error`, `userlist`, and — when the sites' hosts and
//! path prefixes cannot say what the `use_backend` rules say — every
//! `use_backend` as a `[[site_rule]]`, in HAProxy's order. A frontend's
//! rules are scoped to its listeners when the file has several.
//!
//! A line that cannot be carried over is noted ([`access::dropped`]); one
//! that refuses, answers or rewrites requests is a routing change.

use std::fmt::Write;

use super::access;
use super::action::{self, Maps};
use super::cond::{list, Tests};
use super::lexer::Line;
use super::sections::{Haproxy, Proxy, Role};
use super::site::{backend_site_name, q, site_name};
use super::{Kind, Note};

/// Where one proxy's rules go.
struct Scope<'a> {
    proxy: &'a Proxy,
    /// `site = ...` for a backend's rules.
    site: Option<String>,
    /// `listeners = [...]` for one frontend among several.
    listeners: Option<Vec<String>>,
    /// Prefix of the ACL names written.
    prefix: String,
}

/// The rule sections, as TOML text.
pub fn rules(
    h: &Haproxy,
    frontends: &[&Proxy],
    backends: &[&Proxy],
    by_rules: bool,
    notes: &mut Vec<Note>,
) -> String {
    let mut body = String::new();
    let mut maps = Maps::default();
    let mut tests_out = String::new();
    let mut pages = String::new();
    let several = frontends.iter().filter(|f| !f.binds.is_empty()).count() > 1;
    let defaults: Vec<Option<String>> = frontends.iter().map(|f| frontend_default(f)).collect();
    let defaults_differ = defaults.iter().any(|d| *d != defaults[0]);
    for (fi, f) in frontends.iter().enumerate() {
        let scope = Scope {
            proxy: f,
            site: None,
            listeners: several.then(|| super::bind::names(f)),
            prefix: if several {
                format!("{}_", site_name(&f.name))
            } else {
                String::new()
            },
        };
        let mut tests = Tests::of(&f.acls, own_table(f));
        lines(&scope, &mut tests, &mut maps, &mut body, &mut pages, notes);
        if by_rules {
            for r in &f.rules {
                site_rule(&scope, &mut tests, &mut maps, r, backends, &mut body, notes);
            }
            if several && defaults_differ {
                if let Some(d) = &defaults[fi] {
                    write!(
                        body,
                        "\n[[site_rule]]\nsite = {}\n",
                        q(&backend_site_name(d))
                    )
                    .ok();
                    listeners(&scope, &mut body);
                }
            }
        }
        tests.write(&mut tests_out);
    }
    for b in backends.iter().filter(|b| b.role == Role::Backend) {
        let scope = Scope {
            proxy: b,
            site: Some(backend_site_name(&b.name)),
            listeners: None,
            prefix: format!("{}_", site_name(&b.name)),
        };
        let mut tests = Tests::of(&b.acls, own_table(b));
        lines(&scope, &mut tests, &mut maps, &mut body, &mut pages, notes);
        tests.write(&mut tests_out);
    }
    let mut out = String::new();
    tables(h, frontends, backends, &mut out, notes);
    userlists(h, &mut out, notes);
    maps.write(&mut out);
    out.push_str(&tests_out);
    out.push_str(&body);
    out.push_str(&pages);
    out
}

/// The name of a proxy's own stick table, when it has one.
fn own_table(p: &Proxy) -> Option<String> {
    p.stick_table.as_ref().map(|_| p.name.clone())
}

/// The `stick-table` lines of the proxies and the `peers` sections'
/// `table` lines, as `[[stick_table]]`s.
fn tables(
    h: &Haproxy,
    frontends: &[&Proxy],
    backends: &[&Proxy],
    out: &mut String,
    notes: &mut Vec<Note>,
) {
    let mut seen = std::collections::BTreeSet::new();
    let own = frontends
        .iter()
        .chain(backends)
        .filter(|p| seen.insert(p.name.clone()))
        .filter_map(|p| Some((p.name.clone(), p.stick_table.as_ref()?, 1)));
    let shared = super::peers::share(h, out, notes);
    let shared = shared.as_deref();
    let own = own.map(|(name, l, from)| (name, l, from, false));
    let peers = h.peer_tables.iter().map(|(peers, l)| {
        let name = format!("{peers}/{}", l.word(1));
        (name, l, 2, Some(peers.as_str()) == shared)
    });
    for (name, line, from, in_share) in own.chain(peers) {
        let mut approx = Vec::new();
        match super::stick::table(line, from, &name, (in_share, shared), out, &mut approx) {
            Ok(()) => notes.extend(approx.into_iter().map(|why| {
                Note::new(line.number, line.keyword(), Kind::Approximated, why)
            })),
            Err(why) => notes.push(Note::new(
                line.number,
                line.keyword(),
                Kind::Routing,
                format!("table dropped: {why} is not supported; the rules that limit with it are dropped too"),
            )),
        }
    }
}

/// The backend a frontend sends what no rule takes to.
fn frontend_default(f: &Proxy) -> Option<String> {
    f.default_backend
        .as_ref()
        .map(|d| d.value.clone())
        .or_else(|| (f.role == Role::Listen && !f.servers.is_empty()).then(|| f.name.clone()))
}

fn listeners(scope: &Scope<'_>, out: &mut String) {
    if let Some(l) = &scope.listeners {
        writeln!(out, "listeners = {}", list(l)).ok();
    }
}

/// `if`/`unless` and the words before it.
fn split_condition(words: &[String]) -> (&[String], Option<(bool, &[String])>) {
    match words.iter().position(|w| w == "if" || w == "unless") {
        Some(i) => (&words[..i], Some((words[i] == "unless", &words[i + 1..]))),
        None => (words, None),
    }
}

/// One proxy's rule lines.
fn lines(
    scope: &Scope<'_>,
    tests: &mut Tests,
    maps: &mut Maps,
    out: &mut String,
    pages: &mut String,
    notes: &mut Vec<Note>,
) {
    for line in &scope.proxy.http_lines {
        let kw = line.keyword();
        let result = match kw {
            "errorfile" => error_page(line, pages),
            "http-error" => http_error(line, pages),
            "redirect" => rule(scope, tests, maps, line, &line.words, false, out, notes),
            "http-request" => rule(
                scope,
                tests,
                maps,
                line,
                &line.words[1..],
                false,
                out,
                notes,
            ),
            "tcp-request" => {
                notes.push(Note::new(line.number, kw, Kind::Approximated, format!("imported as an http-request rule: rdmalb tracks per request, so `conn_cur` counts requests in progress and `conn_cnt`/`conn_rate` requests (HAProxy's `{}` counts connections)", line.word(1))));
                rule(
                    scope,
                    tests,
                    maps,
                    line,
                    &line.words[2..],
                    false,
                    out,
                    notes,
                )
            }
            "http-response" | "http-after-response" => {
                if kw == "http-after-response" {
                    notes.push(Note::new(line.number, kw, Kind::Approximated, "imported as an http-response rule: it does not apply to rdmalb's own answers".into()));
                }
                rule(scope, tests, maps, line, &line.words[1..], true, out, notes)
            }
            _ => Ok(()),
        };
        if let Err(why) = result {
            notes.push(access::dropped(line, &why));
        }
    }
}

/// One `http-request`/`http-response`/`redirect` rule.
#[allow(clippy::too_many_arguments)]
fn rule(
    scope: &Scope<'_>,
    tests: &mut Tests,
    maps: &mut Maps,
    line: &Line,
    words: &[String],
    response: bool,
    out: &mut String,
    notes: &mut Vec<Note>,
) -> Result<(), String> {
    let (args, cond) = split_condition(words);
    let mut approx = Vec::new();
    let mut keys = match super::stick::action(args, &scope.proxy.name) {
        Some(_) if response => return Err("tracking on the response is not supported".into()),
        Some(k) => k?,
        None => action::keys(args, response, &scope.proxy.name, maps, &mut approx)?,
    };
    let is_auth = args.first().is_some_and(|a| a == "auth");
    let mut userlist = None;
    let anon = format!("{}line{}", scope.prefix, line.number);
    let cond = match cond {
        Some((unless, w)) => tests.condition(
            unless,
            w,
            &scope.prefix,
            &anon,
            is_auth.then_some(&mut userlist),
        )?,
        None => None,
    };
    if is_auth {
        match userlist {
            Some(l) => keys.push(("userlist", q(&l))),
            // No credentials are ever accepted: a 401 that asks for them.
            None => {
                let realm = keys
                    .iter()
                    .find(|(k, _)| *k == "realm")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let realm: String = toml::from_str::<toml::Value>(&format!("v = {realm}"))
                    .ok()
                    .and_then(|v| v.get("v").and_then(|s| s.as_str().map(str::to_string)))
                    .unwrap_or_default();
                keys = vec![
                    ("action", q("return")),
                    ("status", "401".into()),
                    (
                        "headers",
                        format!(
                            "{{ {} = {} }}",
                            q("WWW-Authenticate"),
                            q(&format!("Basic realm=\"{realm}\""))
                        ),
                    ),
                ];
            }
        }
    }
    write!(
        out,
        "\n[[{}]]\n",
        if response {
            "response_rule"
        } else {
            "request_rule"
        }
    )
    .ok();
    for (k, v) in &keys {
        writeln!(out, "{k} = {v}").ok();
    }
    if let Some(s) = &scope.site {
        writeln!(out, "site = {}", q(s)).ok();
    }
    listeners(scope, out);
    if let Some(c) = cond {
        writeln!(out, "{} = {}", c.keyword, c.value).ok();
    }
    for why in approx {
        notes.push(Note::new(
            line.number,
            line.keyword(),
            Kind::Approximated,
            why,
        ));
    }
    Ok(())
}

/// A `use_backend` as a `[[site_rule]]`.
#[allow(clippy::too_many_arguments)]
fn site_rule(
    scope: &Scope<'_>,
    tests: &mut Tests,
    maps: &mut Maps,
    r: &super::sections::Rule,
    backends: &[&Proxy],
    out: &mut String,
    notes: &mut Vec<Note>,
) {
    let site = if r.backend.contains('%') {
        action::log_format(&r.backend, maps)
    } else if backends.iter().any(|b| b.name == r.backend) {
        Ok(action::log_format(&backend_site_name(&r.backend), maps).unwrap_or_default())
    } else {
        Err(format!("no http backend named `{}`", r.backend))
    };
    let anon = format!("{}line{}", scope.prefix, r.line);
    let cond = match &r.condition {
        Some((positive, w)) => tests.condition(!positive, w, &scope.prefix, &anon, None),
        None => Ok(None),
    };
    match (site, cond) {
        (Ok(site), Ok(cond)) => {
            write!(out, "\n[[site_rule]]\nsite = {}\n", q(&site)).ok();
            listeners(scope, out);
            if let Some(c) = cond {
                writeln!(out, "{} = {}", c.keyword, c.value).ok();
            }
        }
        (Err(why), _) | (_, Err(why)) => notes.push(Note::new(
            r.line,
            "use_backend",
            Kind::Routing,
            format!("rule dropped: {why}"),
        )),
    }
}

/// `errorfile CODE FILE`.
fn error_page(line: &Line, out: &mut String) -> Result<(), String> {
    let status = line.word(1);
    if !status
        .parse::<u16>()
        .is_ok_and(|s| (200..=599).contains(&s))
        || line.words.len() != 3
    {
        return Err("expected `errorfile <status> <file>`".into());
    }
    write!(
        out,
        "\n[[error_page]]\nstatus = {status}\nfile = {}\n",
        q(line.word(2))
    )
    .ok();
    Ok(())
}

/// `http-error status N [content-type T] [string S | file F | errorfile F]`.
fn http_error(line: &Line, out: &mut String) -> Result<(), String> {
    let mut keys = Vec::new();
    let mut i = 1;
    while i < line.words.len() {
        let v = q(line.word(i + 1));
        match line.word(i) {
            "status" => keys.push(format!("status = {}", line.word(i + 1))),
            "content-type" => keys.push(format!("content_type = {v}")),
            "string" => keys.push(format!("body = {v}")),
            "file" => keys.push(format!("body_file = {v}")),
            "errorfile" => keys.push(format!("file = {v}")),
            other => return Err(format!("`http-error ... {other}` is not supported")),
        }
        i += 2;
    }
    writeln!(out, "\n[[error_page]]\n{}", keys.join("\n")).ok();
    Ok(())
}

/// `userlist` sections.
fn userlists(h: &Haproxy, out: &mut String, notes: &mut Vec<Note>) {
    for (head, lines) in &h.userlists {
        let mut users = Vec::new();
        for l in lines {
            match (l.keyword(), l.word(2)) {
                ("user", "password") if crate::rules::userlist::Password::hash(l.word(3)).is_ok() => {
                    users.push(format!("{{ name = {}, password = {} }}", q(l.word(1)), q(l.word(3))))
                }
                ("user", "insecure-password") => users.push(format!("{{ name = {}, insecure_password = {} }}", q(l.word(1)), q(l.word(3)))),
                ("user", "password") => notes.push(Note::new(l.number, "user", Kind::Routing, format!("user `{}` dropped: its hash is not bcrypt or SHA-crypt (MD5-crypt and DES are not checked by rdmalb), so it cannot log in", l.word(1)))),
                (kw, _) => notes.push(Note::new(l.number, kw, Kind::Unsupported, "not supported in a userlist (groups are not)".into())),
            }
        }
        write!(
            out,
            "\n[[userlist]]\nname = {}\nusers = [\n",
            q(head.word(1))
        )
        .ok();
        for u in users {
            writeln!(out, "  {u},").ok();
        }
        out.push_str("]\n");
    }
}
