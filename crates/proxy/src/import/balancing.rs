//! A backend's balancing and stickiness: `balance` (a policy, or a hash
//! key: `source`, `uri`, `url_param`, `hdr(name)`, `hash req.cook(name)`),
//! `hash-type`, `hash-balance-factor` and `cookie`, written as the site's
//! `balance`, `[site.hash]` and `[site.sticky]` (docs/balancing.md), and
//! `global.balance` as the policy most backends use.

use std::fmt::Write;

use super::lexer::Line;
use super::sections::{time, Proxy};
use super::site::q;
use super::{Kind, Note};

/// The rdmalb policy for a `balance` that is not a hash, and whether it
/// is only close (`static-rr`, `first`).
fn policy(algo: &str) -> Option<(&'static str, bool)> {
    let name = algo.split('(').next().unwrap_or(algo);
    match name {
        "roundrobin" => Some(("roundrobin", false)),
        "leastconn" => Some(("leastconn", false)),
        "random" => Some(("random", false)),
        "first" => Some(("first", false)),
        "static-rr" => Some(("roundrobin", true)),
        _ => None,
    }
}

/// The last `keyword` line of `p` (HAProxy: the last one wins; a
/// backend's own after its `defaults`' ones).
fn last<'a>(p: &'a Proxy, keyword: &str) -> Option<&'a Line> {
    p.balancing.iter().rev().find(|l| l.keyword() == keyword)
}

/// `global.balance`: the policy most backends with servers use (a hash
/// backend has its own and does not vote); `roundrobin` when none.
pub fn global_policy(backends: &[&Proxy]) -> &'static str {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for b in backends.iter().filter(|b| !b.servers.is_empty()) {
        let algo = last(b, "balance").map_or("roundrobin", |l| l.word(1));
        if let Some((p, _)) = policy(algo) {
            match counts.iter_mut().find(|(n, _)| *n == p) {
                Some((_, c)) => *c += 1,
                None => counts.push((p, 1)),
            }
        }
    }
    // The most common; a tie goes to the first seen.
    let mut best = ("roundrobin", 0);
    for (p, c) in counts {
        if c > best.1 {
            best = (p, c);
        }
    }
    best.0
}

/// Writes a site's `balance` (when it is not `global`) and its
/// `[site.hash]` and `[site.sticky]` tables: call before any other table
/// of the site.
pub fn site(out: &mut String, b: &Proxy, global: &str, notes: &mut Vec<Note>) {
    let line = last(b, "balance");
    let algo = line.map_or("roundrobin", |l| l.word(1));
    let mut tables = String::new();
    match policy(algo) {
        Some((p, close)) => {
            if close {
                if let Some(l) = line {
                    notes.push(Note::new(
                        l.number,
                        "balance",
                        Kind::Approximated,
                        format!("`{algo}` is not an rdmalb policy; roundrobin instead"),
                    ));
                }
            }
            if p != global {
                writeln!(out, "balance = {}", q(p)).ok();
            }
        }
        None => match line.and_then(|l| hash(l, notes)) {
            Some((key, mut opts)) => {
                writeln!(out, "balance = {}", q(key)).ok();
                hash_type(b, &mut opts, notes);
                if !opts.is_empty() {
                    tables.push_str("\n[site.hash]\n");
                    tables.push_str(&opts);
                }
            }
            None => {
                if let Some(l) = line {
                    notes.push(Note::new(
                        l.number,
                        "balance",
                        Kind::Approximated,
                        format!("`{algo}` is not supported; {global} instead"),
                    ));
                }
            }
        },
    }
    if let Some(l) = last(b, "cookie") {
        cookie(l, &mut tables, notes);
    }
    out.push_str(&tables);
}

/// A hash `balance` line: the key's name and its `[site.hash]` options.
fn hash(l: &Line, notes: &mut Vec<Note>) -> Option<(&'static str, String)> {
    let algo = l.word(1);
    let args = &l.words[2.min(l.words.len())..];
    let mut opts = String::new();
    let unsupported = |notes: &mut Vec<Note>, what: &str| {
        notes.push(Note::new(
            l.number,
            "balance",
            Kind::Unsupported,
            format!("{what} is not supported; ignored"),
        ));
    };
    let key = if algo == "source" {
        "source"
    } else if algo == "uri" {
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                "whole" => opts.push_str("whole = true\n"),
                "path-only" => opts.push_str("path_only = true\n"),
                k @ ("len" | "depth") => {
                    let n = args
                        .get(i + 1)
                        .and_then(|v| v.parse::<u32>().ok())
                        .filter(|n| *n > 0);
                    match n {
                        Some(n) => writeln!(opts, "{k} = {n}").unwrap_or(()),
                        None => unsupported(notes, &format!("`{k}` without a positive number")),
                    }
                    i += 1;
                }
                other => unsupported(notes, &format!("`uri {other}`")),
            }
            i += 1;
        }
        "uri"
    } else if algo == "url_param" {
        writeln!(opts, "param = {}", q(args.first()?)).ok();
        if args.len() > 1 {
            unsupported(
                notes,
                "`url_param ... check_post` (parameters in a POST body)",
            );
        }
        "url_param"
    } else if let Some(name) = algo.strip_prefix("hdr(").and_then(|r| r.strip_suffix(')')) {
        writeln!(opts, "header = {}", q(&name.to_ascii_lowercase())).ok();
        if args.first().map(String::as_str) == Some("use_domain_only") {
            opts.push_str("use_domain_only = true\n");
        }
        "hdr"
    } else if algo == "hash" {
        let expr = args.first()?.as_str();
        let arg = |prefixes: &[&str]| {
            prefixes.iter().find_map(|p| {
                expr.strip_prefix(p)
                    .and_then(|r| r.strip_prefix('('))
                    .and_then(|r| r.strip_suffix(')'))
            })
        };
        if let Some(c) = arg(&["req.cook", "cook"]) {
            writeln!(opts, "cookie = {}", q(c)).ok();
            "cookie"
        } else if let Some(h) = arg(&["req.hdr", "hdr"]) {
            writeln!(opts, "header = {}", q(&h.to_ascii_lowercase())).ok();
            "hdr"
        } else {
            return None;
        }
    } else {
        return None;
    };
    Some((key, opts))
}

/// `hash-type` and `hash-balance-factor` into `[site.hash]`.
fn hash_type(b: &Proxy, out: &mut String, notes: &mut Vec<Note>) {
    if let Some(l) = last(b, "hash-type") {
        for w in &l.words[1..] {
            match w.as_str() {
                "consistent" => out.push_str("type = \"consistent\"\n"),
                "map-based" => out.push_str("type = \"map-based\"\n"),
                f @ ("sdbm" | "djb2" | "wt6" | "crc32") => {
                    writeln!(out, "function = {}", q(f)).ok();
                }
                "avalanche" => out.push_str("avalanche = true\n"),
                other => notes.push(Note::new(
                    l.number,
                    "hash-type",
                    Kind::Unsupported,
                    format!("`{other}` is not supported; ignored"),
                )),
            }
        }
    }
    if let Some(l) = last(b, "hash-balance-factor") {
        match l.word(1).parse::<u32>() {
            Ok(0) => {}
            Ok(f) if f >= 100 => {
                writeln!(out, "balance_factor = {f}").ok();
            }
            _ => notes.push(Note::new(
                l.number,
                "hash-balance-factor",
                Kind::Unsupported,
                format!("`{}` is not 0 or a percentage >= 100; ignored", l.word(1)),
            )),
        }
    }
}

/// A `cookie` line as `[site.sticky]`.
fn cookie(l: &Line, out: &mut String, notes: &mut Vec<Note>) {
    let name = l.word(1);
    if name.is_empty() {
        return;
    }
    writeln!(out, "\n[site.sticky]\ncookie = {}", q(name)).ok();
    let mut mode = "passive";
    let mut domains = Vec::new();
    let mut i = 2;
    while i < l.words.len() {
        let w = l.word(i);
        let arg = l.word(i + 1);
        match w {
            "insert" | "rewrite" | "prefix" => mode = if w == "insert" { "insert" } else { w },
            "indirect" | "nocache" | "httponly" | "secure" => {
                writeln!(out, "{w} = true").ok();
            }
            "domain" => {
                domains.push(q(arg));
                i += 1;
            }
            "maxidle" | "maxlife" => {
                match time(arg) {
                    Some(t) if !t.is_zero() => {
                        writeln!(out, "{w} = {}", q(&rdmalb_base::duration::format(t))).ok();
                    }
                    _ => notes.push(Note::new(
                        l.number,
                        "cookie",
                        Kind::Unsupported,
                        format!("`{w} {arg}`: not a time; ignored"),
                    )),
                }
                i += 1;
            }
            "postonly" | "preserve" | "dynamic" | "attr" => {
                if w == "attr" {
                    i += 1;
                }
                notes.push(Note::new(
                    l.number,
                    "cookie",
                    Kind::Unsupported,
                    format!("cookie option `{w}` is not supported; ignored"),
                ));
            }
            other => notes.push(Note::new(
                l.number,
                "cookie",
                Kind::Unsupported,
                format!("cookie option `{other}` is not supported; ignored"),
            )),
        }
        i += 1;
    }
    if mode != "insert" {
        writeln!(out, "mode = {}", q(mode)).ok();
    }
    if !domains.is_empty() {
        writeln!(out, "domain = [{}]", domains.join(", ")).ok();
    }
}
