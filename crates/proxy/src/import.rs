//! `rdmalb import`: an HAProxy configuration turned into rdmalb's proxy
//! TOML, and a note for every directive that could not be mapped exactly.
//!
//! Four steps: [`lexer`] applies HAProxy's quoting and comment rules;
//! [`sections`] reads `global`, `defaults`, `frontend`, `backend` and
//! `listen` (a proxy inherits its `defaults`); [`acl`] turns `use_backend`
//! conditions into the host × path-prefix areas rdmalb's sites match;
//! [`map`] makes one `[[site]]` per backend, one `[[node]]` per server, the
//! listeners and the global sections, and compares HAProxy's first-match
//! rule order with rdmalb's precedence (exact host, then the longest
//! wildcard, then `*`; the longest path prefix) and [`probe`] checks it on
//! probe requests, noting every request the two send to different
//! backends.
//!
//! Relative paths (`crt` files) are taken relative to the HAProxy file's
//! directory; put the TOML beside it.

mod access;
mod acl;
mod acme;
mod action;
mod balancing;
mod bind;
mod compression;
mod cond;
mod lexer;
mod map;
mod peers;
mod probe;
mod routes;
mod rules;
mod sections;
mod site;
mod stats;
mod stick;

use std::fmt;
use std::path::Path;

/// How far a note's directive is from rdmalb's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Mapped, with a difference the note explains.
    Approximated,
    /// Not mapped; which backend a request reaches does not change.
    Unsupported,
    /// Not mapped, and a request may reach another backend than in HAProxy
    /// (or none): `rdmalb import` exits with status 3.
    Routing,
}

/// One directive the importer could not map exactly.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Note {
    /// 1-based line in the HAProxy file.
    pub line: usize,
    pub directive: String,
    pub kind: Kind,
    pub why: String,
}

impl Note {
    pub fn new(line: usize, directive: &str, kind: Kind, why: String) -> Note {
        Note {
            line,
            directive: directive.to_string(),
            kind,
            why,
        }
    }

    /// `haproxy.cfg:12: use_backend: routing changed: ...`.
    pub fn render(&self, file: &str) -> String {
        format!("{file}:{}: {}: {}", self.line, self.directive, self)
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.kind {
            Kind::Approximated => "approximated",
            Kind::Unsupported => "not supported",
            Kind::Routing => "routing changed",
        };
        if self.kind == Kind::Unsupported && self.why.starts_with("not ") {
            write!(f, "{}", self.why)
        } else {
            write!(f, "{label}: {}", self.why)
        }
    }
}

/// The result of an import.
#[derive(Debug)]
pub struct Imported {
    /// The rdmalb proxy configuration.
    pub toml: String,
    /// In line order, each once.
    pub notes: Vec<Note>,
}

impl Imported {
    /// Whether some request may reach another backend than in HAProxy.
    pub fn changes_routing(&self) -> bool {
        self.notes.iter().any(|n| n.kind == Kind::Routing)
    }
}

/// Imports HAProxy configuration `text`; `dir` is the directory relative
/// `crt` paths are read from.
pub fn import(text: &str, dir: &Path) -> Imported {
    let (lines, mut notes) = lexer::lex(text);
    let haproxy = sections::read(&lines, &mut notes);
    // Sites' hosts and path prefixes when they say what the `use_backend`
    // rules say; else every rule as a `[[site_rule]]`.
    let mut by_hosts = Vec::new();
    let mut toml = map::map(&haproxy, dir, &mut by_hosts, false);
    if map::needs_site_rules(&haproxy, &by_hosts) {
        toml = map::map(&haproxy, dir, &mut notes, true);
    } else {
        notes.append(&mut by_hosts);
    }
    notes.sort();
    notes.dedup();
    Imported { toml, notes }
}

#[cfg(test)]
mod tests;
