//! ACL conditions of `use_backend` rules turned into what rdmalb's site
//! matching can express: a list of host patterns (exact, `*.suffix`, or any
//! host) × a list of path prefixes. A condition is a disjunction (`||`,
//! `or`) of conjunctions (implicit AND) of ACL references (named, possibly
//! negated with `!`, or anonymous `{ ... }`); a named ACL defined on several
//! lines is the OR of them, as in HAProxy.

use super::sections::Acl;
use super::{Kind, Note};

/// Requests a rule matches: hosts × path prefixes (`None` = any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Area {
    pub hosts: Option<Vec<String>>,
    pub paths: Option<Vec<String>>,
}

impl Area {
    pub const ALL: Area = Area {
        hosts: None,
        paths: None,
    };
}

/// What one ACL line matches.
#[derive(Debug, Clone)]
enum Match {
    Hosts(Vec<String>),
    Paths(Vec<String>),
    Always,
    Never,
    /// Not expressible; why.
    Other(String),
}

impl Match {
    /// Whether a request for `host` and `path` matches (`None`: unknown).
    fn test(&self, host: &str, path: &str) -> Option<bool> {
        match self {
            Match::Hosts(h) => Some(h.iter().any(|p| host_matches(p, host))),
            Match::Paths(p) => Some(p.iter().any(|p| path.starts_with(p.as_str()))),
            Match::Always => Some(true),
            Match::Never => Some(false),
            Match::Other(_) => None,
        }
    }
}

/// Whether the concrete name `host` matches `pattern` (exact, `*.suffix`
/// or `*`).
pub fn host_matches(pattern: &str, host: &str) -> bool {
    pattern == "*"
        || pattern == host
        || pattern
            .strip_prefix('*')
            .is_some_and(|s| host.len() > s.len() && host.ends_with(s))
}

/// A condition as HAProxy evaluates it, when every test in it is a host or
/// path test: an OR of ANDs of (negated, OR of matches).
#[derive(Debug, Clone)]
pub struct Exact {
    branches: Vec<Vec<(bool, Vec<Match>)>>,
    unless: bool,
}

impl Exact {
    /// Whether HAProxy's rule matches a request for `host` and `path`.
    pub fn matches(&self, host: &str, path: &str) -> bool {
        let hit = self.branches.iter().any(|b| {
            b.iter().all(|(negated, alts)| {
                alts.iter().any(|m| m.test(host, path) == Some(true)) != *negated
            })
        });
        hit != self.unless
    }

    /// The host patterns and path prefixes it tests (probe requests).
    pub fn names(&self) -> (Vec<String>, Vec<String>) {
        let (mut hosts, mut paths) = (Vec::new(), Vec::new());
        for (_, alts) in self.branches.iter().flatten() {
            for m in alts {
                match m {
                    Match::Hosts(h) => hosts.extend(h.iter().cloned()),
                    Match::Paths(p) => paths.extend(p.iter().cloned()),
                    _ => {}
                }
            }
        }
        (hosts, paths)
    }
}

/// A rule's condition as imported.
#[derive(Debug, Clone)]
pub struct Condition {
    /// What rdmalb's sites will match (OR).
    pub areas: Vec<Area>,
    /// HAProxy's meaning, when it is made of host and path tests only.
    pub exact: Option<Exact>,
    /// A negation or `unless` left out (e.g. "negation `!a`"): a routing
    /// change unless the probes find HAProxy's order gives the same
    /// backends anyway.
    pub left_out: Vec<String>,
}

/// The areas (OR) a rule's condition matches. Parts rdmalb cannot express
/// are left out (the rule then matches more than in HAProxy) with a note
/// naming them, marked as a routing change (`!` and `unless` in
/// [`Condition::left_out`], decided after the probes).
pub fn condition(
    rule_line: usize,
    positive: bool,
    words: &[String],
    acls: &[Acl],
    notes: &mut Vec<Note>,
) -> Condition {
    let mut left_out = Vec::new();
    let mut note =
        |why: String| notes.push(Note::new(rule_line, "use_backend", Kind::Routing, why));
    let mut areas = Vec::new();
    let mut exact = Some(Vec::new());
    for branch in split_or(words) {
        // Each term is an OR of matches; the branch is their AND, distributed.
        let mut products: Vec<Vec<Match>> = vec![Vec::new()];
        let mut literals = Vec::new();
        let mut i = 0;
        while i < branch.len() {
            let (negated, word) = match branch[i].strip_prefix('!') {
                Some("") => {
                    i += 1;
                    (true, branch.get(i).cloned().unwrap_or_default())
                }
                Some(rest) => (true, rest.to_string()),
                None => (false, branch[i].clone()),
            };
            let (text, alternatives) = if word == "{" {
                let end = branch[i..]
                    .iter()
                    .position(|w| w == "}")
                    .map_or(branch.len(), |e| i + e);
                let inline = &branch[i + 1..end];
                i = end;
                (
                    format!("{{ {} }}", inline.join(" ")),
                    vec![criterion(inline)],
                )
            } else {
                let lines: Vec<&Acl> = acls.iter().filter(|a| a.name == word).collect();
                let alts = match (word.as_str(), lines.is_empty()) {
                    ("TRUE", true) => vec![Match::Always],
                    ("FALSE", true) => vec![Match::Never],
                    (_, true) => vec![Match::Other(format!("no ACL named `{word}`"))],
                    _ => lines.iter().map(|a| criterion(&a.words)).collect(),
                };
                (word.clone(), alts)
            };
            i += 1;
            if alternatives.iter().any(|m| matches!(m, Match::Other(_))) {
                exact = None;
            }
            literals.push((negated, alternatives.clone()));
            if negated {
                if positive {
                    left_out.push(format!("negation `!{text}`"));
                }
                continue;
            }
            let mut kept = Vec::new();
            for alt in alternatives {
                match alt {
                    Match::Other(why) => note(format!(
                        "`{text}`: {why}; the rule is imported without it (it matches more)"
                    )),
                    m => kept.push(m),
                }
            }
            if kept.is_empty() {
                continue;
            }
            products = products
                .into_iter()
                .flat_map(|p| {
                    kept.iter().map(move |m| {
                        let mut p = p.clone();
                        p.push(m.clone());
                        p
                    })
                })
                .collect();
        }
        if let Some(e) = exact.as_mut() {
            e.push(literals);
        }
        for conj in products {
            if let Some(area) = conjunction(&conj) {
                areas.push(area);
            }
        }
    }
    if !positive {
        left_out.push("`unless`".into());
        areas = vec![Area::ALL];
    }
    Condition {
        areas,
        exact: exact.map(|branches| Exact {
            branches,
            unless: !positive,
        }),
        left_out,
    }
}

fn split_or(words: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0;
    for w in words {
        match w.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            _ => {}
        }
        if depth == 0 && (w == "||" || w == "or") {
            out.push(Vec::new());
        } else {
            out.last_mut().expect("never empty").push(w.clone());
        }
    }
    out
}

/// The area of an AND of matches: `None` when it matches nothing.
fn conjunction(matches: &[Match]) -> Option<Area> {
    let mut area = Area::ALL;
    for m in matches {
        match m {
            Match::Always | Match::Other(_) => {}
            Match::Never => return None,
            Match::Hosts(h) => {
                area.hosts = Some(match area.hosts.take() {
                    None => h.clone(),
                    Some(prev) => {
                        let both: Vec<String> = prev
                            .iter()
                            .filter(|p| h.iter().any(|q| host_within(p, q) || host_within(q, p)))
                            .map(|p| {
                                let q = h
                                    .iter()
                                    .find(|q| host_within(p, q) || host_within(q, p))
                                    .expect("found above");
                                if host_within(p, q) {
                                    p.clone()
                                } else {
                                    q.clone()
                                }
                            })
                            .collect();
                        if both.is_empty() {
                            return None;
                        }
                        both
                    }
                })
            }
            Match::Paths(ps) => {
                area.paths = Some(match area.paths.take() {
                    None => ps.clone(),
                    Some(prev) => {
                        let mut both = Vec::new();
                        for a in &prev {
                            for b in ps {
                                if a.starts_with(b.as_str()) {
                                    both.push(a.clone());
                                } else if b.starts_with(a.as_str()) {
                                    both.push(b.clone());
                                }
                            }
                        }
                        if both.is_empty() {
                            return None;
                        }
                        both
                    }
                })
            }
        }
    }
    Some(area)
}

/// Whether every host `inner` matches is matched by `outer` (`*.a.com`
/// covers `b.a.com` and `*.b.a.com`).
pub fn host_within(inner: &str, outer: &str) -> bool {
    inner == outer
        || outer.strip_prefix('*').is_some_and(|suffix| {
            inner.trim_start_matches('*').ends_with(suffix) && inner.len() > suffix.len()
        })
}

/// One ACL line (`criterion [flags] patterns`) as a match.
fn criterion(words: &[String]) -> Match {
    let Some(fetch) = words.first() else {
        return Match::Other("empty ACL".into());
    };
    let mut method = None;
    let mut patterns = Vec::new();
    let mut i = 1;
    while i < words.len() {
        match words[i].as_str() {
            "-i" | "-n" | "--" => {}
            "-m" => {
                method = words.get(i + 1).cloned();
                i += 1;
            }
            "-f" | "-M" => {
                return Match::Other(format!("pattern files (`{}`) are not supported", words[i]))
            }
            "-u" => i += 1,
            p => patterns.push(p.to_string()),
        }
        i += 1;
    }
    let f = fetch.to_ascii_lowercase();
    let (base, implied) = match f.split_once('(') {
        Some((b, arg)) => (b.to_string(), arg.trim_end_matches(')').to_string()),
        None => (f.clone(), String::new()),
    };
    let header_host = implied == "host";
    let kind = match (base.as_str(), method.as_deref()) {
        ("hdr" | "req.hdr", None | Some("str")) if header_host => "host",
        ("hdr_dom" | "req.hdr_dom", _) | ("hdr" | "req.hdr", Some("dom")) if header_host => {
            "host_dom"
        }
        ("hdr_end" | "req.hdr_end", _) | ("hdr" | "req.hdr", Some("end")) if header_host => {
            "host_end"
        }
        ("ssl_fc_sni" | "req.ssl_sni", None | Some("str")) => "sni",
        ("path_beg", _) | ("path", Some("beg")) | ("url_beg", _) => "path_beg",
        ("path", None | Some("str")) => "path",
        _ => "",
    };
    if patterns.is_empty() && !kind.is_empty() {
        return Match::Other(format!("`{fetch}` without patterns"));
    }
    match kind {
        "host" | "sni" => {
            let mut hosts = Vec::new();
            for p in &patterns {
                match plain_host(p) {
                    Some(h) => hosts.push(h),
                    None => return Match::Other(format!("`{p}` is not a host name rdmalb can match (a Host with a port, or other characters)")),
                }
            }
            Match::Hosts(hosts)
        }
        "host_dom" | "host_end" => {
            let mut hosts = Vec::new();
            for p in &patterns {
                let bare = p.trim_start_matches('.');
                match plain_host(bare) {
                    Some(h) if kind == "host_end" && p.starts_with('.') => {
                        hosts.push(format!("*.{h}"))
                    }
                    Some(h) => {
                        hosts.push(h.clone());
                        hosts.push(format!("*.{h}"));
                    }
                    None => {
                        return Match::Other(format!("`{p}` is not a host name rdmalb can match"))
                    }
                }
            }
            Match::Hosts(hosts)
        }
        "path_beg" | "path" => {
            if patterns.iter().any(|p| !p.starts_with('/')) {
                return Match::Other("a path pattern not starting with '/'".into());
            }
            // A request path has no blanks (they arrive as %20, which
            // HAProxy's path does not decode): such a pattern never matches.
            patterns.retain(|p| !p.contains(char::is_whitespace));
            if patterns.is_empty() {
                return Match::Never;
            }
            Match::Paths(patterns)
        }
        _ => Match::Other(format!("`{fetch}` is not a host or path-prefix test")),
    }
}

fn plain_host(p: &str) -> Option<String> {
    let h = p.to_ascii_lowercase();
    crate::config::validate::host_pattern(&h).ok().map(|_| h)
}

/// Notes for ACL lines that match approximately (written once per line).
pub fn approximations(acls: &[Acl], notes: &mut Vec<Note>) {
    for a in acls {
        let f = a
            .words
            .first()
            .map_or(String::new(), |w| w.to_ascii_lowercase());
        let m = a
            .words
            .iter()
            .position(|w| w == "-m")
            .and_then(|i| a.words.get(i + 1))
            .map(String::as_str);
        let why = if f.starts_with("hdr_dom") || f.starts_with("req.hdr_dom") || m == Some("dom") {
            Some("matched as the name and `*.name`; HAProxy's hdr_dom also matches the name inside a longer one (name.example.net)")
        } else if (f.starts_with("hdr_end") || f.starts_with("req.hdr_end") || m == Some("end"))
            && a.words
                .iter()
                .skip(1)
                .any(|w| !w.starts_with('-') && !w.starts_with('.'))
        {
            Some("a suffix without a leading dot is matched as the name and `*.name`; HAProxy's hdr_end also matches e.g. `myname`")
        } else if (f.starts_with("path") || f.starts_with("url_beg"))
            && a.words.iter().any(|w| w.contains(char::is_whitespace))
        {
            Some("a pattern with a blank never matches (request paths carry blanks as %20, which HAProxy's path does not decode); left out")
        } else if f == "path" && m.is_none() {
            Some("an exact path is matched as a path prefix")
        } else if f.starts_with("url_beg") {
            Some("url_beg is matched as a path prefix (the same for origin-form requests)")
        } else if f.starts_with("ssl_fc_sni") || f.starts_with("req.ssl_sni") {
            Some("the TLS server name is matched as the Host header")
        } else if f.starts_with("path_beg") && a.words.iter().any(|w| w == "-i") {
            Some("rdmalb's path prefixes are case-sensitive (`-i` dropped)")
        } else {
            None
        };
        if let Some(why) = why {
            notes.push(Note::new(
                a.line,
                "acl",
                Kind::Approximated,
                format!("`{}`: {why}", a.name),
            ));
        }
    }
}
