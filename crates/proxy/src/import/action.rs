//! One `http-request`, `http-response` or `redirect` action translated to
//! the keys of a `[[request_rule]]` / `[[response_rule]]`, with HAProxy's
//! log-format values (`%[req.hdr(host),lower,map(f,def)]`) as rdmalb
//! values (`{host|lower|map:f:def}`) and its regex replacements (`\1`) as
//! the `regex` crate's (`${1}`).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::site::{q, site_name};

/// The maps the translated values use: file and match → name.
#[derive(Debug, Default)]
pub struct Maps {
    by_file: BTreeMap<(String, &'static str), String>,
}

impl Maps {
    /// The name of the map of `file` matched as `kind`.
    fn name(&mut self, file: &str, kind: &'static str) -> String {
        if let Some(n) = self.by_file.get(&(file.to_string(), kind)) {
            return n.clone();
        }
        let stem = std::path::Path::new(file)
            .file_stem()
            .map_or("map".into(), |s| site_name(&s.to_string_lossy()));
        let mut name = if kind == "exact" {
            stem.clone()
        } else {
            format!("{stem}_{kind}")
        };
        let mut k = 2;
        while self.by_file.values().any(|n| *n == name) {
            name = format!("{stem}_{k}");
            k += 1;
        }
        self.by_file.insert((file.to_string(), kind), name.clone());
        name
    }

    pub fn write(&self, out: &mut String) {
        for ((file, kind), name) in &self.by_file {
            write!(out, "\n[[map]]\nname = {}\nfile = {}\n", q(name), q(file)).ok();
            if *kind != "exact" {
                writeln!(out, "match = {}", q(kind)).ok();
            }
        }
    }
}

/// HAProxy log-format text as an rdmalb value.
pub fn log_format(text: &str, maps: &mut Maps) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(['%', '{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match tail.as_bytes()[0] {
            b'{' => {
                out.push_str("{{");
                rest = &tail[1..];
            }
            b'}' => {
                out.push_str("}}");
                rest = &tail[1..];
            }
            _ if tail.starts_with("%%") => {
                out.push('%');
                rest = &tail[2..];
            }
            _ if tail.starts_with("%[") => {
                let end = tail
                    .find(']')
                    .ok_or_else(|| format!("`{text}`: `%[` without `]`"))?;
                out.push_str(&sample(&tail[2..end], maps)?);
                rest = &tail[end + 1..];
            }
            _ if tail.starts_with("%ci") => {
                out.push_str("{src}");
                rest = &tail[3..];
            }
            _ => {
                return Err(format!(
                    "`{text}`: the log-format variable at `{}` is not supported",
                    tail.chars().take(4).collect::<String>()
                ))
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Splits `a,b(c,d),e` at top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// `fetch,conv,...` as `{source|filter|...}`.
fn sample(expr: &str, maps: &mut Maps) -> Result<String, String> {
    let parts = split_top(expr.trim());
    let fetch = parts[0].trim();
    let (base, arg) = match fetch.split_once('(') {
        Some((b, a)) => (b, Some(a.trim_end_matches(')'))),
        None => (fetch, None),
    };
    let source = match (base.strip_prefix("req.").unwrap_or(base), arg) {
        ("hdr" | "fhdr", Some(h)) if h.eq_ignore_ascii_case("host") => "host".to_string(),
        ("hdr" | "fhdr", Some(h)) if !h.contains(',') => format!("header.{h}"),
        ("src", None) => "src".into(),
        ("path", None) => "path".into(),
        ("query", None) => "query".into(),
        ("url", None) => "url".into(),
        ("method", None) => "method".into(),
        ("ssl_fc_sni", None) => "sni".into(),
        ("ssl_c_used", None) => "cert_used".into(),
        ("ssl_c_verify", None) => "cert_verify".into(),
        ("cook", Some(c)) => format!("cookie.{c}"),
        ("url_param" | "urlp", Some(p)) => format!("param.{p}"),
        _ => return Err(format!("the sample `%[{expr}]` is not supported")),
    };
    let mut out = format!("{{{source}");
    for conv in &parts[1..] {
        let conv = conv.trim();
        let (name, args) = match conv.split_once('(') {
            Some((n, a)) => (n, a.trim_end_matches(')')),
            None => (conv, ""),
        };
        let kind = match name {
            "lower" | "upper" => {
                write!(out, "|{name}").ok();
                continue;
            }
            "map" | "map_str" => "exact",
            "map_beg" => "prefix",
            "map_end" => "suffix",
            "map_sub" => "substring",
            "map_dom" => "domain",
            "map_dir" => "dir",
            "map_reg" | "map_regm" => "regex",
            _ => {
                return Err(format!(
                    "the converter `{conv}` in `%[{expr}]` is not supported"
                ))
            }
        };
        let (file, default) = match args.split_once(',') {
            Some((f, d)) => (f.trim(), Some(d.trim())),
            None => (args.trim(), None),
        };
        let m = maps.name(file, kind);
        match default {
            Some(d) => write!(out, "|map:{m}:{d}").ok(),
            None => write!(out, "|map:{m}").ok(),
        };
    }
    out.push('}');
    Ok(out)
}

/// `\1` → `${1}`, `$` → `$$`: HAProxy's replacement in the regex crate's form.
fn replacement(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' if it.peek().is_some_and(char::is_ascii_digit) => {
                write!(out, "${{{}}}", it.next().unwrap_or('0')).ok();
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

fn regex(re: &str) -> Result<String, String> {
    regex::Regex::new(re)
        .map(|_| q(re))
        .map_err(|_| format!("the regular expression `{re}` uses what the regex crate does not have (look-around, back-references)"))
}

/// A status word.
fn status(w: &str) -> Result<String, String> {
    match w.parse::<u16>() {
        Ok(s) if (200..=599).contains(&s) => Ok(s.to_string()),
        _ => Err(format!("`{w}` is not a status rdmalb answers with")),
    }
}

/// Keys of one rule: `args` is the action and its arguments (the
/// condition cut off); `response` for http-response; `realm` the proxy's
/// name (HAProxy's default realm). Approximations go to `approx`.
pub fn keys(
    args: &[String],
    response: bool,
    realm: &str,
    maps: &mut Maps,
    approx: &mut Vec<String>,
) -> Result<Vec<(&'static str, String)>, String> {
    let action = args.first().map_or("", String::as_str);
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    let mut k: Vec<(&'static str, String)> = vec![("action", q(action))];
    match action {
        "deny" | "tarpit" | "reject" | "silent-drop" => {
            k[0].1 = q("deny");
            k.push(("status", deny_status(args, response, approx)?));
        }
        "return" => return_keys(args, &mut k)?,
        "redirect" if !response => redirect_keys(args, maps, &mut k)?,
        "auth" if !response => {
            let r = if arg(1) == "realm" { arg(2) } else { realm };
            if args.len() > 3 || (args.len() > 1 && arg(1) != "realm") {
                return Err("`auth` arguments other than `realm`".into());
            }
            k.push(("realm", q(r)));
        }
        "set-header" | "add-header" => {
            if args.len() != 3 {
                return Err(format!("`{action}` takes a name and one value"));
            }
            k.push(("name", q(arg(1))));
            k.push(("value", q(&log_format(arg(2), maps)?)));
        }
        "del-header" => {
            match (args.len(), arg(2), arg(3)) {
                (2, _, _) | (4, "-m", "str") => {}
                _ => return Err("`del-header` with a match other than `-m str`".into()),
            }
            k.push(("name", q(arg(1))));
        }
        "replace-header" | "replace-value" => {
            if args.len() != 4 {
                return Err(format!(
                    "`{action}` takes a name, a regex and a replacement"
                ));
            }
            k.push(("name", q(arg(1))));
            k.push(("regex", regex(arg(2))?));
            k.push(("replacement", q(&replacement(arg(3)))));
        }
        "set-path" | "set-query" if !response && args.len() == 2 => {
            k.push(("value", q(&log_format(arg(1), maps)?)));
        }
        "replace-path" if !response && args.len() == 3 => {
            k.push(("regex", regex(arg(1))?));
            k.push(("replacement", q(&replacement(arg(2)))));
        }
        other => return Err(format!("the action `{other}` is not supported")),
    }
    Ok(k)
}

/// The status of a `deny` (or of `tarpit`, `reject` and `silent-drop`,
/// imported as one, noted in `approx`).
fn deny_status(
    args: &[String],
    response: bool,
    approx: &mut Vec<String>,
) -> Result<String, String> {
    let action = args.first().map_or("", String::as_str);
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    let mut st = if action == "tarpit" { "500" } else { "403" }.to_string();
    if response {
        st = "502".into();
    }
    let mut i = 1;
    while i < args.len() {
        match arg(i) {
            "deny_status" => st = status(arg(i + 1))?,
            other => return Err(format!("`{action} {other}` is not supported")),
        }
        i += 2;
    }
    if action != "deny" {
        approx.push(format!(
            "`{action}` is imported as a deny with status {st} (rdmalb answers; it does not {})",
            if action == "tarpit" {
                "hold the connection first"
            } else {
                "close the connection without a response"
            }
        ));
    }
    Ok(st)
}

/// A `return`'s keys: status, content type, body or body file, headers.
fn return_keys(args: &[String], k: &mut Vec<(&'static str, String)>) -> Result<(), String> {
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    let mut i = 1;
    let mut headers = Vec::new();
    while i < args.len() {
        let v = arg(i + 1);
        match arg(i) {
            "status" => k.push(("status", status(v)?)),
            "content-type" => k.push(("content_type", q(v))),
            "string" => k.push(("body", q(v))),
            "lf-string" if !v.contains('%') => k.push(("body", q(v))),
            "file" => k.push(("body_file", q(v))),
            "hdr" => {
                headers.push(format!("{} = {}", q(v), q(arg(i + 2))));
                i += 1;
            }
            other => return Err(format!("`return ... {other}` is not supported")),
        }
        i += 2;
    }
    if !headers.is_empty() {
        k.push(("headers", format!("{{ {} }}", headers.join(", "))));
    }
    Ok(())
}

/// A `redirect`'s keys: its target, code and options.
fn redirect_keys(
    args: &[String],
    maps: &mut Maps,
    k: &mut Vec<(&'static str, String)>,
) -> Result<(), String> {
    let arg = |i: usize| args.get(i).map_or("", String::as_str);
    let mut i = 1;
    while i < args.len() {
        let v = arg(i + 1);
        match arg(i) {
            t @ ("location" | "prefix") => {
                k.push((
                    if t == "location" {
                        "location"
                    } else {
                        "prefix"
                    },
                    q(&log_format(v, maps)?),
                ));
                i += 1;
            }
            "scheme" => {
                k.push(("scheme", q(&log_format(v, maps)?)));
                i += 1;
            }
            "code" => {
                match v {
                    "301" | "302" | "303" | "307" | "308" => k.push(("code", v.to_string())),
                    _ => return Err(format!("`code {v}` is not a redirect code")),
                }
                i += 1;
            }
            "drop-query" => k.push(("drop_query", "true".into())),
            "append-slash" => k.push(("append_slash", "true".into())),
            other => return Err(format!("redirect option `{other}` is not supported")),
        }
        i += 1;
    }
    Ok(())
}
