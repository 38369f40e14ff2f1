//! Values computed per request: header values, redirect locations, paths
//! and dynamic site names written as text with `{source|filter|...}`
//! parts (HAProxy's log-format `%[fetch,converter,...]`).
//!
//! Sources: `host`, `path`, `query`, `url`, `method`, `src`, `sni`,
//! `scheme`, `cert_used`, `cert_verify`, `header.NAME`, `cookie.NAME`, `param.NAME`. Filters: `lower`,
//! `upper`, `map:NAME` and `map:NAME:DEFAULT` (the map's value, or DEFAULT
//! when the key is not in it; without a default an unmapped key gives no
//! value). `{{` and `}}` are literal braces. A missing value is empty.

use std::borrow::Cow;

use http::HeaderName;

use super::condition::Facts;
use super::map::Map;

/// A compiled template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Value(Source, Vec<Filter>),
}

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Host,
    Path,
    Query,
    Url,
    Method,
    Src,
    Sni,
    Scheme,
    /// `1` when the client sent a certificate, else `0` (`ssl_c_used`).
    CertUsed,
    /// Its verify result, `0` when it verified (`ssl_c_verify`).
    CertVerify,
    Header(HeaderName),
    Cookie(String),
    Param(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    Lower,
    Upper,
    /// Map index and default.
    Map(usize, Option<String>),
}

impl Template {
    /// A template of plain text.
    pub fn text(s: &str) -> Template {
        Template {
            parts: vec![Part::Text(s.to_string())],
        }
    }

    /// Parses `text`; `map` gives the index of a map name.
    pub fn parse(text: &str, map: impl Fn(&str) -> Option<usize>) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['{', '}']) {
            lit.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                lit.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            if tail.starts_with('}') {
                return Err(format!(
                    "`}}` without `{{` in `{text}` (write `}}}}` for a brace)"
                ));
            }
            let Some(end) = tail.find('}') else {
                return Err(format!("`{{` without `}}` in `{text}`"));
            };
            if !lit.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut lit)));
            }
            parts.push(value(&tail[1..end], &map)?);
            rest = &tail[end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts })
    }

    /// Whether the template is plain text (`Some(text)`).
    pub fn as_text(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// Appends the value for a request to `out`.
    pub fn render(&self, f: &Facts<'_>, maps: &[Map], out: &mut String) {
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Value(src, filters) => {
                    if let Some(v) = apply(sample(src, f), filters, maps) {
                        out.push_str(&v);
                    }
                }
            }
        }
    }

    /// The value as a new string.
    pub fn string(&self, f: &Facts<'_>, maps: &[Map]) -> String {
        let mut s = String::new();
        self.render(f, maps, &mut s);
        s
    }
}

fn value(inner: &str, map: &impl Fn(&str) -> Option<usize>) -> Result<Part, String> {
    let mut it = inner.split('|').map(str::trim);
    let src = it.next().unwrap_or("");
    let source = match src {
        "host" => Source::Host,
        "path" => Source::Path,
        "query" => Source::Query,
        "url" => Source::Url,
        "method" => Source::Method,
        "src" => Source::Src,
        "sni" => Source::Sni,
        "scheme" => Source::Scheme,
        "cert_used" => Source::CertUsed,
        "cert_verify" => Source::CertVerify,
        s => match s.split_once('.') {
            Some(("header", n)) => Source::Header(
                HeaderName::try_from(n).map_err(|_| format!("`{n}` is not a header name"))?,
            ),
            Some(("cookie", n)) if !n.is_empty() => Source::Cookie(n.to_string()),
            Some(("param", n)) if !n.is_empty() => Source::Param(n.to_string()),
            _ => return Err(format!("`{s}` is not a value (expected host, path, query, url, method, src, sni, scheme, cert_used, cert_verify, header.NAME, cookie.NAME or param.NAME)")),
        },
    };
    let mut filters = Vec::new();
    for f in it {
        filters.push(match f {
            "lower" => Filter::Lower,
            "upper" => Filter::Upper,
            f => match f.strip_prefix("map:") {
                Some(spec) => {
                    let (name, default) = match spec.split_once(':') {
                        Some((n, d)) => (n, Some(d.to_string())),
                        None => (spec, None),
                    };
                    let i = map(name).ok_or_else(|| format!("no [[map]] named `{name}`"))?;
                    Filter::Map(i, default)
                }
                None => {
                    return Err(format!(
                    "`{f}` is not a filter (expected lower, upper, map:NAME or map:NAME:DEFAULT)"
                ))
                }
            },
        });
    }
    Ok(Part::Value(source, filters))
}

fn sample<'a>(src: &Source, f: &Facts<'a>) -> Option<Cow<'a, str>> {
    Some(match src {
        Source::Host => Cow::Borrowed(f.host()?),
        Source::Path => Cow::Borrowed(f.path()),
        Source::Query => Cow::Borrowed(f.query()?),
        Source::Url => Cow::Borrowed(f.url()),
        Source::Method => Cow::Borrowed(f.method.as_str()),
        Source::Src => Cow::Owned(f.client.to_canonical().to_string()),
        Source::Sni => Cow::Borrowed(f.sni?),
        Source::Scheme => Cow::Borrowed(if f.tls { "https" } else { "http" }),
        Source::CertUsed => Cow::Borrowed(if f.cert.present { "1" } else { "0" }),
        Source::CertVerify => Cow::Owned(f.cert.verify.to_string()),
        Source::Header(n) => Cow::Borrowed(f.headers.get(n)?.to_str().ok()?),
        Source::Cookie(n) => Cow::Borrowed(f.cookie(n)?),
        Source::Param(n) => Cow::Borrowed(f.param(n)?),
    })
}

fn apply<'a>(
    mut v: Option<Cow<'a, str>>,
    filters: &[Filter],
    maps: &[Map],
) -> Option<Cow<'a, str>> {
    for filter in filters {
        let cur = v?;
        v = match filter {
            Filter::Lower => Some(Cow::Owned(cur.to_ascii_lowercase())),
            Filter::Upper => Some(Cow::Owned(cur.to_ascii_uppercase())),
            Filter::Map(i, default) => {
                let found = maps
                    .get(*i)
                    .and_then(|m| m.with(&cur, |r| r.map(str::to_string)));
                found.or_else(|| default.clone()).map(Cow::Owned)
            }
        };
    }
    v
}

/// Renders `t` when every value in it is present: `None` when one is
/// missing (a site choice then falls through, as HAProxy's does when its
/// log-format gives no name).
pub fn render_all(t: &Template, f: &Facts<'_>, maps: &[Map]) -> Option<String> {
    let mut out = String::new();
    for p in &t.parts {
        match p {
            Part::Text(s) => out.push_str(s),
            Part::Value(src, filters) => out.push_str(&apply(sample(src, f), filters, maps)?),
        }
    }
    Some(out)
}
