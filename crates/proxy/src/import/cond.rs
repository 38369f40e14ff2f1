//! HAProxy ACLs and `if`/`unless` conditions turned into rdmalb tests
//! (`[[acl]]` entries, docs/rules.md): each `acl` line's fetch, flags
//! (`-i`, `-m`, `-f`) and patterns; conditions as expressions over their
//! names, anonymous `{ ... }` tests named after their line.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::sections::Acl;
use super::site::{q, site_name};

/// One test as TOML keys (`fetch`, `match`, `values`, ...), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestToml {
    pub keys: Vec<(&'static str, String)>,
    /// `http_auth(LIST)`: credentials of a user list, handled by `auth`.
    pub http_auth: Option<String>,
}

impl TestToml {
    fn new(fetch: &str) -> TestToml {
        TestToml {
            keys: vec![("fetch", q(fetch))],
            http_auth: None,
        }
    }

    /// `{ fetch = "path", match = "prefix", values = ["/a"] }`.
    pub fn inline(&self) -> String {
        let body: Vec<String> = self
            .keys
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        format!("{{ {} }}", body.join(", "))
    }
}

/// A string list as TOML.
pub fn list(values: &[String]) -> String {
    format!(
        "[{}]",
        values.iter().map(|v| q(v)).collect::<Vec<_>>().join(", ")
    )
}

/// HAProxy's predefined ACLs rdmalb can express.
fn predefined(name: &str) -> Option<Vec<String>> {
    let w = |s: &str| s.split_whitespace().map(str::to_string).collect();
    Some(match name {
        "TRUE" | "HTTP" | "HTTP_1.1" => w("method -m found"),
        "LOCALHOST" => w("src 127.0.0.1/8 ::1"),
        "METH_GET" => w("method GET HEAD"),
        "METH_HEAD" => w("method HEAD"),
        "METH_POST" => w("method POST"),
        "METH_PUT" => w("method PUT"),
        "METH_DELETE" => w("method DELETE"),
        "METH_OPTIONS" => w("method OPTIONS"),
        "METH_TRACE" => w("method TRACE"),
        "METH_CONNECT" => w("method CONNECT"),
        "HTTP_URL_SLASH" => w("url_beg /"),
        _ => return None,
    })
}

/// Translates one ACL's words (`fetch [flags] [patterns]`); the error
/// says what rdmalb cannot express.
pub fn test(words: &[String]) -> Result<TestToml, String> {
    test_in(words, None)
}

/// [`test`] in a proxy whose own stick table is `table` (what `src_*`
/// fetches without a table argument read).
pub fn test_in(words: &[String], table: Option<&str>) -> Result<TestToml, String> {
    let fetch_word = words.first().ok_or("empty ACL")?;
    let (base, arg) = match fetch_word.split_once('(') {
        Some((b, a)) => (
            b.to_ascii_lowercase(),
            Some(a.trim_end_matches(')').to_string()),
        ),
        None => (fetch_word.to_ascii_lowercase(), None),
    };
    let Flags {
        icase,
        method,
        files,
        values,
    } = flags(&words[1..])?;
    if let Some(t) = super::stick::fetch(&base, arg.as_deref(), table)? {
        return stick_test(t, method.as_deref(), values);
    }
    // The fetch and the match its name implies (`path_beg` → path, prefix).
    let (stem, implied) = split_suffix(&base);
    let stem = stem.strip_prefix("req.").unwrap_or(stem);
    let arg_lower = arg.as_deref().map(str::to_ascii_lowercase);
    let mut t = match (stem, arg_lower.as_deref()) {
        ("hdr" | "fhdr", Some("host")) => TestToml::new("host"),
        ("hdr" | "fhdr", Some(h)) if !h.contains(',') => {
            let mut t = TestToml::new("header");
            t.keys.push(("header", q(arg.as_deref().unwrap_or(h))));
            t
        }
        ("res.hdr" | "shdr" | "res.fhdr", Some(h)) if !h.contains(',') => {
            let mut t = TestToml::new("response_header");
            t.keys.push(("header", q(h)));
            t
        }
        ("path", None) => TestToml::new("path"),
        ("url", None) => TestToml::new("url"),
        ("query", None) => TestToml::new("query"),
        ("method", None) => TestToml::new("method"),
        ("src", None) => TestToml::new("src"),
        ("ssl_fc", None) => TestToml::new("tls"),
        ("ssl_fc_sni" | "ssl_sni", None) => TestToml::new("sni"),
        ("ssl_c_used", None) => TestToml::new("client_cert"),
        ("ssl_c_verify", None) => TestToml::new("client_cert_verify"),
        ("status" | "res.status", None) => TestToml::new("status"),
        ("url_param" | "urlp", Some(p)) if !p.contains(',') => {
            let mut t = TestToml::new("param");
            t.keys.push(("param", q(arg.as_deref().unwrap_or(p))));
            t
        }
        ("cook" | "scook", Some(c)) if !c.is_empty() => {
            let mut t = TestToml::new("cookie");
            t.keys.push(("cookie", q(arg.as_deref().unwrap_or(c))));
            t
        }
        ("http_auth", Some(l)) if values.is_empty() => {
            let mut t = TestToml::new("method");
            t.http_auth = Some(l.to_string());
            return Ok(t);
        }
        _ => return Err(format!("`{fetch_word}` is not a fetch rdmalb tests")),
    };
    let kind = match_kind(method.as_deref().or(implied))?;
    if let Some(k) = kind {
        t.keys.push(("match", q(k)));
    }
    if !values.is_empty() {
        t.keys.push(("values", list(&values)));
    }
    match files.as_slice() {
        [] => {}
        [f] => t.keys.push(("file", q(f))),
        _ => return Err("several `-f` files on one line (write one acl line per file)".into()),
    }
    if icase {
        t.keys.push(("ignore_case", "true".into()));
    }
    Ok(t)
}

/// An ACL line's flags (`-i`, `-m`, `-f`, …) and its values, from the
/// words after the fetch.
struct Flags {
    icase: bool,
    method: Option<String>,
    files: Vec<String>,
    values: Vec<String>,
}

fn flags(words: &[String]) -> Result<Flags, String> {
    let mut icase = false;
    let mut method: Option<String> = None;
    let mut files = Vec::new();
    let mut values = Vec::new();
    let mut i = 0;
    let mut flags = true;
    while i < words.len() {
        let w = words[i].as_str();
        match w {
            "-i" if flags => icase = true,
            "-n" if flags => {}
            "--" if flags => flags = false,
            "-m" if flags => {
                method = words.get(i + 1).cloned();
                i += 1;
            }
            "-f" if flags => {
                files.push(words.get(i + 1).cloned().unwrap_or_default());
                i += 1;
            }
            "-u" if flags => i += 1,
            "-M" if flags => return Err("`-M` (a map file as patterns) is not supported".into()),
            _ => {
                flags = false;
                values.push(w.to_string());
            }
        }
        i += 1;
    }
    Ok(Flags {
        icase,
        method,
        files,
        values,
    })
}

/// rdmalb's `match` for HAProxy's `-m` method (or a fetch's `_suffix`).
fn match_kind(method: Option<&str>) -> Result<Option<&'static str>, String> {
    Ok(match method {
        None => None,
        Some(m) => Some(match m {
            "str" => "exact",
            "beg" => "prefix",
            "end" => "suffix",
            "sub" => "substring",
            "dom" => "domain",
            "dir" => "dir",
            "reg" => "regex",
            "found" => "found",
            "int" => "int",
            "ip" => "ip",
            "bool" => "bool",
            other => {
                return Err(format!(
                    "`-m {other}` (or `_{other}`) is not a match rdmalb has"
                ))
            }
        }),
    })
}

/// A stick fetch's test: integer matches only.
fn stick_test(
    mut t: TestToml,
    method: Option<&str>,
    values: Vec<String>,
) -> Result<TestToml, String> {
    match method {
        None | Some("int") => {}
        Some(m) => {
            return Err(format!(
                "`-m {m}` on a stick counter (rdmalb compares them as integers)"
            ))
        }
    }
    if values.is_empty() {
        return Err("a stick counter test without values".into());
    }
    t.keys.push(("values", list(&values)));
    Ok(t)
}

/// `path_beg` → (`path`, `beg`); `hdr_dom` → (`hdr`, `dom`).
fn split_suffix(base: &str) -> (&str, Option<&'static str>) {
    for s in [
        "beg", "end", "sub", "dom", "dir", "reg", "len", "cnt", "val",
    ] {
        if let Some(stem) = base.strip_suffix(s).and_then(|b| b.strip_suffix('_')) {
            if !matches!(stem, "url" | "ssl_c" | "ssl_fc") || s != "len" {
                let implied = match s {
                    "beg" => "beg",
                    "end" => "end",
                    "sub" => "sub",
                    "dom" => "dom",
                    "dir" => "dir",
                    "reg" => "reg",
                    _ => "unsupported",
                };
                return (stem, Some(implied));
            }
        }
    }
    (base, None)
}

/// The tests of a proxy's ACLs, named; collected once per name.
#[derive(Debug, Default)]
pub struct Tests {
    /// The proxy's own stick table (`src_*` fetches without a table).
    pub table: Option<String>,
    /// Name → definitions (OR), each a test or why it cannot be carried.
    pub defined: BTreeMap<String, Vec<Result<TestToml, String>>>,
    /// Names written to the TOML, with the definitions' lines.
    pub used: BTreeMap<String, Vec<TestToml>>,
}

/// An `if`/`unless` condition translated: the expression (or one
/// anonymous test) and the user list an `http_auth` term named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    /// `if` or `unless`.
    pub keyword: &'static str,
    /// A TOML value: an expression string or an inline table.
    pub value: String,
}

/// A condition's terms: OR of ANDs of (negated, acl name or anonymous words).
type Terms = Vec<Vec<(bool, Term)>>;

#[derive(Debug, Clone)]
enum Term {
    Named(String),
    Anonymous(Vec<String>),
}

fn parse(words: &[String]) -> Result<Terms, String> {
    let mut out: Terms = vec![Vec::new()];
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        if w == "||" || w == "or" {
            out.push(Vec::new());
            i += 1;
            continue;
        }
        let (neg, rest) = match w.strip_prefix('!') {
            Some("") => {
                i += 1;
                (true, words.get(i).map_or("", String::as_str))
            }
            Some(r) => (true, r),
            None => (false, w),
        };
        let term = if rest == "{" {
            let end = words[i..]
                .iter()
                .position(|w| w == "}")
                .map(|e| i + e)
                .ok_or("`{` without `}`")?;
            let inner = words[i + 1..end].to_vec();
            i = end;
            Term::Anonymous(inner)
        } else {
            Term::Named(rest.to_string())
        };
        if let Some(b) = out.last_mut() {
            b.push((neg, term));
        }
        i += 1;
    }
    if out.iter().any(Vec::is_empty) {
        return Err("an empty branch in the condition".into());
    }
    Ok(out)
}

impl Tests {
    /// The ACLs of a proxy (earlier ones first: a frontend's, then a
    /// backend's names shadow nothing across proxies; the caller keeps
    /// one `Tests` per proxy and prefixes names when needed).
    pub fn of(acls: &[Acl], table: Option<String>) -> Tests {
        let mut t = Tests {
            table,
            ..Tests::default()
        };
        for a in acls {
            let one = test_in(&a.words, t.table.as_deref());
            t.defined.entry(a.name.clone()).or_default().push(one);
        }
        t
    }

    fn test(&self, words: &[String]) -> Result<TestToml, String> {
        test_in(words, self.table.as_deref())
    }

    /// Translates `words` (after `if`/`unless`); `scope` prefixes the
    /// names written (one proxy's ACLs do not meet another's);
    /// `anon` names anonymous tests. `auth_list` receives the user list of
    /// an `http_auth` term removed from the condition (for `auth`).
    pub fn condition(
        &mut self,
        unless: bool,
        words: &[String],
        scope: &str,
        anon: &str,
        auth_list: Option<&mut Option<String>>,
    ) -> Result<Option<Cond>, String> {
        let mut terms = parse(words)?;
        // `auth ... unless auth_ok` / `if admin !auth_ok`: the action checks
        // the credentials itself.
        if let Some(slot) = auth_list {
            for branch in &mut terms {
                let mut kept = Vec::new();
                for (neg, term) in branch.drain(..) {
                    match self.auth_of(&term) {
                        Some(l) if neg != unless => *slot = Some(l),
                        _ => kept.push((neg, term)),
                    }
                }
                *branch = kept;
            }
            if terms.iter().all(Vec::is_empty) {
                return Ok(None);
            }
            if terms.iter().any(Vec::is_empty) {
                return Err("`http_auth` in one branch of several".into());
            }
        }
        // One anonymous test alone: an inline table.
        if let [branch] = terms.as_slice() {
            if let [(false, Term::Anonymous(inner))] = branch.as_slice() {
                let t = self
                    .test(inner)
                    .map_err(|e| format!("`{{ {} }}`: {e}", inner.join(" ")))?;
                if t.http_auth.is_some() {
                    return Err("`http_auth` outside an `auth` rule".into());
                }
                return Ok(Some(Cond {
                    keyword: if unless { "unless" } else { "if" },
                    value: t.inline(),
                }));
            }
        }
        let mut expr = String::new();
        let mut anon_n = 0;
        for (bi, branch) in terms.iter().enumerate() {
            if bi > 0 {
                expr.push_str(" || ");
            }
            for (ti, (neg, term)) in branch.iter().enumerate() {
                if ti > 0 {
                    expr.push(' ');
                }
                let name = match term {
                    Term::Anonymous(inner) => {
                        anon_n += 1;
                        let t = self
                            .test(inner)
                            .map_err(|e| format!("`{{ {} }}`: {e}", inner.join(" ")))?;
                        let name = format!("{anon}_{anon_n}");
                        self.used.insert(name.clone(), vec![t]);
                        name
                    }
                    Term::Named(n) => self.use_name(n, scope)?,
                };
                if *neg {
                    expr.push('!');
                }
                expr.push_str(&name);
            }
        }
        Ok(Some(Cond {
            keyword: if unless { "unless" } else { "if" },
            value: q(&expr),
        }))
    }

    fn auth_of(&self, term: &Term) -> Option<String> {
        match term {
            Term::Named(n) => match self.defined.get(n).map(Vec::as_slice) {
                Some([Ok(t)]) => t.http_auth.clone(),
                _ => None,
            },
            Term::Anonymous(inner) => test(inner).ok().and_then(|t| t.http_auth),
        }
    }

    /// Marks `name` used; the name written.
    fn use_name(&mut self, name: &str, scope: &str) -> Result<String, String> {
        let written = format!("{scope}{}", site_name(name));
        let defs: Vec<Result<TestToml, String>> = match self.defined.get(name) {
            Some(d) => d.clone(),
            None => match predefined(name) {
                Some(words) => vec![test(&words)],
                None if name == "FALSE" => return Err("the predefined ACL `FALSE`".into()),
                None => return Err(format!("no ACL named `{name}`")),
            },
        };
        let mut tests = Vec::new();
        for d in defs {
            let t = d.map_err(|e| format!("`{name}`: {e}"))?;
            if t.http_auth.is_some() {
                return Err(format!("`{name}`: `http_auth` outside an `auth` rule"));
            }
            tests.push(t);
        }
        self.used.insert(written.clone(), tests);
        Ok(written)
    }

    /// The `[[acl]]` entries of the names used.
    pub fn write(&self, out: &mut String) {
        for (name, tests) in &self.used {
            for t in tests {
                write!(out, "\n[[acl]]\nname = {}\n", q(name)).ok();
                for (k, v) in &t.keys {
                    writeln!(out, "{k} = {v}").ok();
                }
            }
        }
    }
}
