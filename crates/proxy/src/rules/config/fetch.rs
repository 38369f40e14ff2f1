//! A test of a condition as written (`[[acl]]` or an anonymous `if`
//! table): its `fetch = "…"` word read into a [`Fetch`] (`fn fetch`, and
//! [`FETCHES`], the accepted words in messages) and its match into a
//! [`Test`].

use std::collections::HashMap;

use http::header::HeaderName;

use super::super::condition::{Fetch, Test};
use super::super::pattern::{MatchKind, Patterns};
use super::super::stick::config as stick_config;
use super::RawTest;
use rdmalb_base::problems::ConfigCheck;

/// The fetch of a test.
fn fetch(
    c: &mut ConfigCheck,
    key: &str,
    a: &RawTest,
    tables: &HashMap<String, usize>,
) -> Option<Fetch> {
    let Some(f) = a.fetch.as_deref() else {
        c.add(
            format!("{key}.fetch"),
            format!("missing (expected {FETCHES})"),
        );
        return None;
    };
    let named = |c: &mut ConfigCheck, field: &str, v: Option<&String>| match v {
        Some(v) if !v.is_empty() => Some(v.clone()),
        _ => {
            c.add(
                format!("{key}.{field}"),
                format!("missing: fetch \"{f}\" needs the {field}'s name"),
            );
            None
        }
    };
    let header = |c: &mut ConfigCheck| {
        let h = named(c, "header", a.header.as_ref())?;
        match HeaderName::try_from(h.as_str()) {
            Ok(n) => Some(n),
            Err(_) => {
                c.add(
                    format!("{key}.header"),
                    format!("`{h}` is not a header name"),
                );
                None
            }
        }
    };
    Some(match f {
        "host" => Fetch::Host,
        "header" => Fetch::Header(header(c)?),
        "response_header" => Fetch::ResponseHeader(header(c)?),
        "path" => Fetch::Path,
        "query" => Fetch::Query,
        "url" => Fetch::Url,
        "param" => Fetch::Param(named(c, "param", a.param.as_ref())?),
        "method" => Fetch::Method,
        "src" => Fetch::Src,
        "tls" => Fetch::Tls,
        "sni" => Fetch::Sni,
        "cookie" => Fetch::Cookie(named(c, "cookie", a.cookie.as_ref())?),
        "client_cert" => Fetch::ClientCert,
        "client_cert_verify" => Fetch::ClientCertVerify,
        "status" => Fetch::Status,
        "listener" => Fetch::Listener,
        other => match stick_config::fetch(other, a.counter, a.table.as_deref(), tables) {
            Ok(Some(s)) => Fetch::Stick(s),
            Ok(None) => {
                c.add(
                    format!("{key}.fetch"),
                    format!("`{other}` is not a fetch (expected {FETCHES})"),
                );
                return None;
            }
            Err(e) => {
                c.add(format!("{key}.fetch"), e);
                return None;
            }
        },
    })
}

const FETCHES: &str = "\"host\", \"header\", \"path\", \"query\", \"url\", \"param\", \"method\", \"src\", \"tls\", \"sni\", \"cookie\", \"client_cert\", \"client_cert_verify\", \"status\", \"response_header\", \"listener\" or a stick fetch (\"sc0_http_req_rate\", \"src_conn_cur\", \"table_cnt\", ...)";

pub(super) fn test(
    c: &mut ConfigCheck,
    key: &str,
    a: &RawTest,
    tables: &HashMap<String, usize>,
) -> Option<Test> {
    let fetch = fetch(c, key, a, tables)?;
    for (field, set, wanted) in [
        (
            "header",
            a.header.is_some(),
            matches!(fetch, Fetch::Header(_) | Fetch::ResponseHeader(_)),
        ),
        ("param", a.param.is_some(), matches!(fetch, Fetch::Param(_))),
        (
            "cookie",
            a.cookie.is_some(),
            matches!(fetch, Fetch::Cookie(_)),
        ),
        (
            "counter",
            a.counter.is_some(),
            a.fetch.as_deref().is_some_and(|f| f.starts_with("sc_")),
        ),
        ("table", a.table.is_some(), matches!(fetch, Fetch::Stick(_))),
    ] {
        if set && !wanted {
            c.add(
                format!("{key}.{field}"),
                format!("not used by fetch \"{}\"", a.fetch.as_deref().unwrap_or("")),
            );
        }
    }
    let kind = match a.match_kind.as_deref() {
        None => fetch.default_match(),
        Some(k) => match MatchKind::parse(k) {
            Some(k) => k,
            None => {
                c.add(
                    format!("{key}.match"),
                    format!("`{k}` is not a match (expected {})", MatchKind::ACCEPTED),
                );
                return None;
            }
        },
    };
    let fits = match &fetch {
        Fetch::Src => matches!(kind, MatchKind::Ip | MatchKind::Found) || kind.is_text(),
        Fetch::Tls | Fetch::ClientCert => {
            matches!(kind, MatchKind::Bool | MatchKind::Found | MatchKind::Int)
        }
        Fetch::ClientCertVerify | Fetch::Status | Fetch::Stick(_) => {
            matches!(kind, MatchKind::Int | MatchKind::Found) || kind.is_text()
        }
        _ => kind.is_text() || kind == MatchKind::Found || kind == MatchKind::Int,
    };
    if !fits {
        c.add(
            format!("{key}.match"),
            format!(
                "\"{}\" does not apply to fetch \"{}\"",
                kind.as_str(),
                a.fetch.as_deref().unwrap_or("")
            ),
        );
        return None;
    }
    let mut values = a.values.clone();
    if let Some(f) = &a.file {
        let path = c.path(f);
        match std::fs::read_to_string(&path) {
            Ok(text) => values.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string),
            ),
            Err(e) => {
                c.add(
                    format!("{key}.file"),
                    format!("cannot read {}: {e}", path.display()),
                );
                return None;
            }
        }
    }
    let needs_values = !matches!(kind, MatchKind::Found | MatchKind::Bool);
    if needs_values && values.is_empty() && a.file.is_none() {
        c.add(
            format!("{key}.values"),
            format!(
                "empty: match \"{}\" needs values (or a file of them)",
                kind.as_str()
            ),
        );
        return None;
    }
    if !needs_values && !values.is_empty() {
        c.add(
            format!("{key}.values"),
            format!("not used by match \"{}\"", kind.as_str()),
        );
    }
    match Patterns::compile(kind, &values, a.ignore_case.unwrap_or(false)) {
        Ok(patterns) => Some(Test {
            fetch,
            kind,
            patterns,
        }),
        Err(e) => {
            c.add(format!("{key}.values"), e);
            None
        }
    }
}
