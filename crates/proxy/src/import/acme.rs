//! HAProxy 3.2's ACME client: an `acme <name>` section becomes `[acme]`
//! (`directory`, `contact`, `challenge`; the account key and the
//! certificates go to a `storage` folder in rdmalb), and the `crt-store`
//! sections' `load crt <file> acme <name> domains "<a>,<b>"` lines say
//! which names are ordered: each site with one of them among its hosts
//! gets `acme = true` (rdmalb orders one certificate per site, for its
//! exact hosts).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::lexer::Line;
use super::sections::Haproxy;
use super::site::q;
use super::{Kind, Note};

/// The names `crt-store` `load` lines order with ACME.
pub(super) fn domains(h: &Haproxy) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, lines) in h.acme.iter().filter(|(s, _)| s.keyword() == "crt-store") {
        for l in lines.iter().filter(|l| l.keyword() == "load") {
            if value(l, "acme").is_none() {
                continue;
            }
            for d in value(l, "domains").unwrap_or("").split(',') {
                let d = d.trim().to_ascii_lowercase();
                if !d.is_empty() {
                    out.insert(d);
                }
            }
        }
    }
    out
}

/// The word after `key` on `line`.
fn value<'a>(line: &'a Line, key: &str) -> Option<&'a str> {
    let i = line.words.iter().position(|w| w == key)?;
    Some(line.word(i + 1)).filter(|w| !w.is_empty())
}

/// Writes `[acme]` from the first `acme` section; notes what differs.
pub(super) fn section(out: &mut String, h: &Haproxy, notes: &mut Vec<Note>) {
    let mut sections = h.acme.iter().filter(|(s, _)| s.keyword() == "acme");
    let Some((head, lines)) = sections.next() else {
        return;
    };
    for (other, _) in sections {
        notes.push(Note::new(
            other.number,
            "acme",
            Kind::Unsupported,
            format!("a second acme section (`{}`): rdmalb has one ACME account; its certificates are ordered with `{}`'s", other.word(1), head.word(1)),
        ));
    }
    writeln!(
        out,
        "\n# From HAProxy's `acme {}` (docs/tls.md).\n[acme]",
        head.word(1)
    )
    .ok();
    out.push_str("# HAProxy keeps the account key in `account-key` and the certificates in\n# its crt-store; rdmalb keeps both here (files 0600).\nstorage = \"acme\"\n");
    let mut contact = Vec::new();
    for l in lines {
        match l.keyword() {
            "directory" => {
                writeln!(out, "directory = {}", q(l.word(1))).ok();
            }
            "contact" => contact.push(q(l.word(1))),
            "challenge" => match l.word(1).to_ascii_lowercase().as_str() {
                c @ ("http-01" | "tls-alpn-01") => {
                    writeln!(out, "challenge = {}", q(c)).ok();
                }
                other => notes.push(Note::new(
                    l.number,
                    "challenge",
                    Kind::Unsupported,
                    format!("`{other}` is not answered by rdmalb (http-01 or tls-alpn-01); http-01 is used"),
                )),
            },
            "account-key" => notes.push(Note::new(
                l.number,
                "account-key",
                Kind::Approximated,
                "rdmalb creates its account (and key) in [acme] storage; this key is not used".into(),
            )),
            "map" => {}
            kw => notes.push(Note::new(
                l.number,
                kw,
                Kind::Approximated,
                "not mapped: rdmalb orders P-256 ECDSA keys (instant-acme's)".into(),
            )),
        }
    }
    if !contact.is_empty() {
        writeln!(out, "contact = [{}]", contact.join(", ")).ok();
    }
}

/// `acme = true` for a site with a host among `domains`.
pub(super) fn site_line(out: &mut String, hosts: &[String], domains: &BTreeSet<String>) {
    if hosts
        .iter()
        .any(|h| domains.contains(&h.to_ascii_lowercase()))
    {
        out.push_str("acme = true\n");
    }
}

/// Notes the ordered names no site serves.
pub(super) fn unserved(
    h: &Haproxy,
    domains: &BTreeSet<String>,
    hosts: &[&String],
    notes: &mut Vec<Note>,
) {
    let line = h
        .acme
        .iter()
        .find(|(s, _)| s.keyword() == "crt-store")
        .map_or(0, |(s, _)| s.number);
    for d in domains {
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(d)) {
            notes.push(Note::new(
                line,
                "load",
                Kind::Unsupported,
                format!("`{d}` is ordered with ACME in HAProxy but no site has it as a host: rdmalb orders certificates for sites' hosts"),
            ));
        }
    }
}
