//! `[[request_rule]]` and `[[response_rule]]` actions and `[[error_page]]`
//! answers as written, validated into [`Action`]s and [`Answer`]s.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use regex::Regex;

use super::super::action::{Action, Answer, Redirect, RedirectTo};
use super::super::condition::{Condition, Fetch};
use super::super::stick::track::KeyFetch;
use super::super::template::Template;
use super::super::Rule;
use super::{condition, listener_names, Names, RawRule};
use rdmalb_base::problems::ConfigCheck;

pub(super) fn status(
    c: &mut ConfigCheck,
    key: &str,
    v: Option<i64>,
    default: Option<u16>,
) -> Option<StatusCode> {
    let code = match (v, default) {
        (Some(v), _) => v,
        (None, Some(d)) => i64::from(d),
        (None, None) => {
            c.add(key, "missing (expected an HTTP status from 200 to 599)");
            return None;
        }
    };
    match u16::try_from(code)
        .ok()
        .filter(|s| (200..=599).contains(s))
        .and_then(|s| StatusCode::from_u16(s).ok())
    {
        Some(s) => Some(s),
        None => {
            c.add(key, format!("{code} is not an HTTP status from 200 to 599"));
            None
        }
    }
}

/// A `return` answer or an error page from its parts.
pub(super) fn answer(
    c: &mut ConfigCheck,
    key: &str,
    status: StatusCode,
    content_type: Option<&str>,
    body: Option<&str>,
    body_file: Option<&str>,
    headers: Option<&BTreeMap<String, String>>,
) -> Option<Answer> {
    let body = match (body, body_file) {
        (Some(_), Some(_)) => {
            c.add(
                format!("{key}.body_file"),
                "give body or body_file, not both",
            );
            return None;
        }
        (Some(b), None) => Bytes::from(b.to_string()),
        (None, Some(f)) => match std::fs::read(c.path(f)) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                c.add(format!("{key}.body_file"), format!("cannot read {f}: {e}"));
                return None;
            }
        },
        (None, None) => Bytes::new(),
    };
    let mut h = HeaderMap::new();
    if let Some(ct) = content_type {
        match HeaderValue::from_str(ct) {
            Ok(v) => {
                h.insert(header::CONTENT_TYPE, v);
            }
            Err(_) => c.add(
                format!("{key}.content_type"),
                format!("`{ct}` is not a header value"),
            ),
        }
    } else if !body.is_empty() {
        c.add(
            format!("{key}.content_type"),
            "missing: a body needs its content type (e.g. \"text/html\")",
        );
    }
    for (name, value) in headers.into_iter().flatten() {
        match (
            HeaderName::try_from(name.as_str()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(v)) => {
                h.append(n, v);
            }
            _ => c.add(
                format!("{key}.headers.{name}"),
                "not a header name and value",
            ),
        }
    }
    Some(Answer {
        status,
        headers: h,
        body,
    })
}

/// An HAProxy errorfile: a whole HTTP/1 response.
pub(super) fn raw_response(path: &Path) -> Result<Answer, String> {
    let raw = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            raw.windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        })
        .ok_or_else(|| {
            format!(
                "{} is not an HTTP response (no blank line after the head)",
                path.display()
            )
        })?;
    let head = String::from_utf8_lossy(&raw[..split.0]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| {
            format!(
                "{} does not start with a status line such as `HTTP/1.1 503 Service Unavailable`",
                path.display()
            )
        })?;
    let mut headers = HeaderMap::new();
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (Ok(k), Ok(v)) = (
            HeaderName::try_from(k.trim()),
            HeaderValue::from_str(v.trim()),
        ) else {
            continue;
        };
        // The proxy frames the body itself.
        if k != header::CONTENT_LENGTH && k != header::CONNECTION && k != header::TRANSFER_ENCODING
        {
            headers.append(k, v);
        }
    }
    Ok(Answer {
        status,
        headers,
        body: Bytes::copy_from_slice(&raw[split.1..]),
    })
}

const REQUEST_ACTIONS: &str = "\"deny\", \"return\", \"redirect\", \"auth\", \"set-header\", \"add-header\", \"del-header\", \"replace-header\", \"replace-value\", \"set-path\", \"replace-path\", \"set-query\", \"track-sc0\", \"track-sc1\", \"track-sc2\", \"sc-inc-gpc0\" or \"sc-inc-gpc1\"";
const RESPONSE_ACTIONS: &str = "\"deny\", \"return\", \"set-header\", \"add-header\", \"del-header\", \"replace-header\" or \"replace-value\"";

pub(super) fn rule(
    c: &mut ConfigCheck,
    key: &str,
    r: RawRule,
    response: bool,
    n: &mut Names,
) -> Option<Rule> {
    let accepted = if response {
        RESPONSE_ACTIONS
    } else {
        REQUEST_ACTIONS
    };
    let Some(action) = r.action.clone() else {
        c.add(
            format!("{key}.action"),
            format!("missing (expected {accepted})"),
        );
        return None;
    };
    let Some(uses) = fields_used(&action, response) else {
        c.add(
            format!("{key}.action"),
            format!(
                "`{action}` is not a {} action (expected {accepted})",
                if response { "response" } else { "request" }
            ),
        );
        return None;
    };
    let before = c.count();
    unused_fields(c, key, &r, &action, uses);
    let condition = condition(c, key, r.if_.as_ref(), r.unless.as_ref(), n);
    if !response
        && condition
            .as_ref()
            .is_some_and(|cond| cond.needs_response(&n.acls))
    {
        c.add(
            format!("{key}.if"),
            "tests a response fetch (status, response_header) in a request rule",
        );
    }
    let fields = Fields {
        key,
        action: &action,
        r: &r,
    };
    let action = fields.action(c, condition.as_ref(), n)?;
    let listeners = listener_names(c, key, r.listeners.as_deref(), &n.listeners);
    (c.count() == before).then_some(Rule {
        condition,
        action,
        listeners,
    })
}

/// The fields `action` takes, `None` when it is no action of a request
/// rule (or of a response rule, `response`).
fn fields_used(action: &str, response: bool) -> Option<&'static [&'static str]> {
    Some(match action {
        "deny" => &["status", "retry_after"],
        "track-sc0" | "track-sc1" | "track-sc2" if !response => &["key", "table"],
        "sc-inc-gpc0" | "sc-inc-gpc1" if !response => &["counter"],
        "return" => &["status", "content_type", "body", "body_file", "headers"],
        "redirect" if !response => &[
            "location",
            "prefix",
            "scheme",
            "code",
            "drop_query",
            "append_slash",
        ],
        "auth" if !response => &["realm", "userlist"],
        "set-header" | "add-header" => &["name", "value"],
        "del-header" => &["name"],
        "replace-header" | "replace-value" => &["name", "regex", "replacement"],
        "set-path" | "set-query" if !response => &["value"],
        "replace-path" if !response => &["regex", "replacement"],
        _ => return None,
    })
}

/// Reports every field set that `action` does not use.
fn unused_fields(c: &mut ConfigCheck, key: &str, r: &RawRule, action: &str, uses: &[&str]) {
    let fields: [(&str, bool); 21] = [
        ("status", r.status.is_some()),
        ("content_type", r.content_type.is_some()),
        ("body", r.body.is_some()),
        ("body_file", r.body_file.is_some()),
        ("headers", r.headers.is_some()),
        ("location", r.location.is_some()),
        ("prefix", r.prefix.is_some()),
        ("scheme", r.scheme.is_some()),
        ("code", r.code.is_some()),
        ("drop_query", r.drop_query.is_some()),
        ("append_slash", r.append_slash.is_some()),
        ("name", r.name.is_some()),
        ("value", r.value.is_some()),
        ("regex", r.regex.is_some()),
        ("replacement", r.replacement.is_some()),
        ("realm", r.realm.is_some()),
        ("userlist", r.userlist.is_some()),
        ("key", r.key.is_some()),
        ("table", r.table.is_some()),
        ("counter", r.counter.is_some()),
        ("retry_after", r.retry_after.is_some()),
    ];
    for (f, set) in fields {
        if set && !uses.contains(&f) {
            c.add(
                format!("{key}.{f}"),
                format!(
                    "not used by action \"{action}\" (it uses: {})",
                    uses.join(", ")
                ),
            );
        }
    }
}

/// A rule's fields as written, read for its action (named `action`, one
/// [`fields_used`] knows).
struct Fields<'a> {
    key: &'a str,
    action: &'a str,
    r: &'a RawRule,
}

impl Fields<'_> {
    /// The action, its fields read.
    fn action(
        &self,
        c: &mut ConfigCheck,
        condition: Option<&Condition>,
        n: &mut Names,
    ) -> Option<Action> {
        let (key, r) = (self.key, self.r);
        Some(match self.action {
            "deny" => self.deny(c, condition, n)?,
            a @ ("track-sc0" | "track-sc1" | "track-sc2") => self.track(c, a, n)?,
            a @ ("sc-inc-gpc0" | "sc-inc-gpc1") => {
                let slot = c.int(&format!("{key}.counter"), r.counter, 0, 0, 2) as usize;
                Action::IncGpc {
                    idx: usize::from(a.ends_with('1')),
                    slot,
                }
            }
            "return" => {
                let s = status(c, &format!("{key}.status"), r.status, Some(200))?;
                Action::Return(answer(
                    c,
                    key,
                    s,
                    r.content_type.as_deref(),
                    r.body.as_deref(),
                    r.body_file.as_deref(),
                    r.headers.as_ref(),
                )?)
            }
            "redirect" => self.redirect(c, n)?,
            "auth" => self.auth(c, n)?,
            "set-header" => Action::SetHeader(
                self.header_name(c)?,
                self.template(c, "value", r.value.as_ref(), n)?,
            ),
            "add-header" => Action::AddHeader(
                self.header_name(c)?,
                self.template(c, "value", r.value.as_ref(), n)?,
            ),
            "del-header" => Action::DelHeader(self.header_name(c)?),
            "replace-header" => {
                let h = self.header_name(c)?;
                let (re, with) = self.regex(c)?;
                Action::ReplaceHeader(h, re, with)
            }
            "replace-value" => {
                let h = self.header_name(c)?;
                let (re, with) = self.regex(c)?;
                Action::ReplaceValue(h, re, with)
            }
            "set-path" => Action::SetPath(self.template(c, "value", r.value.as_ref(), n)?),
            "set-query" => Action::SetQuery(self.template(c, "value", r.value.as_ref(), n)?),
            "replace-path" => {
                let (re, with) = self.regex(c)?;
                Action::ReplacePath(re, with)
            }
            _ => return None,
        })
    }

    /// `deny`: its status, and a 429's `Retry-After` (the window of the
    /// limit its condition tests, unless `retry_after` is set).
    fn deny(
        &self,
        c: &mut ConfigCheck,
        condition: Option<&Condition>,
        n: &Names,
    ) -> Option<Action> {
        let (key, r) = (self.key, self.r);
        let s = status(c, &format!("{key}.status"), r.status, Some(403))?;
        let retry = match r.retry_after {
            Some(v) => Some(c.int(&format!("{key}.retry_after"), Some(v), 1, 0, 86_400) as u32),
            // A 429 says when to come back: the window of the limit.
            None if s == StatusCode::TOO_MANY_REQUESTS => {
                condition.and_then(|cond| retry_after(cond, n))
            }
            None => None,
        };
        Some(Action::Deny(s, retry))
    }

    /// `track-scN`: the table and the key; remembers the slot's table for
    /// the rules after.
    fn track(&self, c: &mut ConfigCheck, a: &str, n: &mut Names) -> Option<Action> {
        let key = self.key;
        let slot = usize::from(a.as_bytes()[8] - b'0');
        let table = stick_table(c, key, self.r.table.as_deref(), n)?;
        let Some(k) = self.r.key.as_deref() else {
            c.add(format!("{key}.key"), "missing: what the entry is keyed by (\"src\", \"hdr(NAME)\", \"cook(NAME)\", \"url_param(NAME)\", \"path\" or \"base\")");
            return None;
        };
        let Some(k) = KeyFetch::parse(k) else {
            c.add(format!("{key}.key"), format!("`{k}` is not a key (expected \"src\", \"hdr(NAME)\", \"cook(NAME)\", \"url_param(NAME)\", \"path\" or \"base\")"));
            return None;
        };
        n.slot_tables[slot] = Some(table);
        Some(Action::Track {
            slot,
            table,
            key: k,
        })
    }

    /// `redirect`: exactly one of location, prefix and scheme, and a
    /// redirect code.
    fn redirect(&self, c: &mut ConfigCheck, n: &Names) -> Option<Action> {
        let (key, r) = (self.key, self.r);
        let to = match (&r.location, &r.prefix, &r.scheme) {
            (Some(l), None, None) => {
                RedirectTo::Location(self.template(c, "location", Some(l), n)?)
            }
            (None, Some(p), None) => RedirectTo::Prefix(self.template(c, "prefix", Some(p), n)?),
            (None, None, Some(s))
                if !s.is_empty()
                    && s.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '+' | '-' | '.')) =>
            {
                RedirectTo::Scheme(s.clone())
            }
            (None, None, Some(s)) => {
                c.add(
                    format!("{key}.scheme"),
                    format!("`{s}` is not a scheme (expected e.g. \"https\")"),
                );
                return None;
            }
            _ => {
                c.add(
                    format!("{key}.location"),
                    "expected exactly one of location, prefix and scheme",
                );
                return None;
            }
        };
        let code = match r.code {
            None => StatusCode::FOUND,
            Some(v @ (301 | 302 | 303 | 307 | 308)) => StatusCode::from_u16(v as u16).ok()?,
            Some(v) => {
                c.add(
                    format!("{key}.code"),
                    format!("{v} is not a redirect code (expected 301, 302, 303, 307 or 308)"),
                );
                return None;
            }
        };
        Some(Action::Redirect(Redirect {
            to,
            code,
            drop_query: r.drop_query.unwrap_or(false),
            append_slash: r.append_slash.unwrap_or(false),
        }))
    }

    /// `auth`: the `[[userlist]]` it checks, and its realm.
    fn auth(&self, c: &mut ConfigCheck, n: &Names) -> Option<Action> {
        let key = self.key;
        let Some(l) = self.r.userlist.as_deref() else {
            c.add(
                format!("{key}.userlist"),
                "missing: action \"auth\" needs the [[userlist]] to check",
            );
            return None;
        };
        let Some(&i) = n.userlist_index.get(l) else {
            c.add(
                format!("{key}.userlist"),
                format!("no [[userlist]] named `{l}`"),
            );
            return None;
        };
        Some(Action::Auth {
            realm: self.r.realm.clone().unwrap_or_else(|| "rdmalb".into()),
            userlist: i,
        })
    }

    /// The template in `field` (`v`), its maps looked up in `n`.
    fn template(
        &self,
        c: &mut ConfigCheck,
        field: &str,
        v: Option<&String>,
        n: &Names,
    ) -> Option<Template> {
        let (key, action) = (self.key, self.action);
        let Some(v) = v else {
            c.add(
                format!("{key}.{field}"),
                format!("missing: action \"{action}\" needs it"),
            );
            return None;
        };
        Template::parse(v, |m| n.map_index.get(m).copied())
            .map_err(|e| c.add(format!("{key}.{field}"), e))
            .ok()
    }

    /// The header `name` names.
    fn header_name(&self, c: &mut ConfigCheck) -> Option<HeaderName> {
        let (key, action, r) = (self.key, self.action, self.r);
        match r.name.as_deref().map(HeaderName::try_from) {
            Some(Ok(h)) => Some(h),
            Some(Err(_)) => {
                c.add(
                    format!("{key}.name"),
                    format!("`{}` is not a header name", r.name.as_deref().unwrap_or("")),
                );
                None
            }
            None => {
                c.add(
                    format!("{key}.name"),
                    format!("missing: action \"{action}\" needs the header's name"),
                );
                None
            }
        }
    }

    /// `regex` compiled (at most 1 MiB of program) and `replacement`.
    fn regex(&self, c: &mut ConfigCheck) -> Option<(Regex, String)> {
        let (key, action, r) = (self.key, self.action, self.r);
        let Some(re) = r.regex.as_deref() else {
            c.add(
                format!("{key}.regex"),
                format!("missing: action \"{action}\" needs a regular expression"),
            );
            return None;
        };
        let re = regex::RegexBuilder::new(re)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                c.add(
                    format!("{key}.regex"),
                    format!(
                        "`{re}` is not a regular expression: {}",
                        e.to_string().lines().last().unwrap_or("")
                    ),
                )
            })
            .ok()?;
        Some((re, r.replacement.clone().unwrap_or_default()))
    }
}

/// The table a `track-scN` rule names (the only one when it names none).
fn stick_table(c: &mut ConfigCheck, key: &str, t: Option<&str>, n: &Names) -> Option<usize> {
    match t {
        Some(t) => match n.table_index.get(t) {
            Some(&i) => Some(i),
            None => {
                c.add(
                    format!("{key}.table"),
                    format!("no [[stick_table]] named `{t}`"),
                );
                None
            }
        },
        None if n.tables.len() == 1 => Some(0),
        None => {
            c.add(
                format!("{key}.table"),
                "missing: the [[stick_table]] to track in (needed unless there is exactly one)",
            );
            None
        }
    }
}

/// The `Retry-After` of a 429 deny: the longest window (a rate's period,
/// else the table's expiry for a count) among the stick fetches its
/// condition tests, in whole seconds rounded up.
fn retry_after(cond: &Condition, n: &Names) -> Option<u32> {
    cond.branches
        .iter()
        .flatten()
        .filter_map(|&(_, i)| n.acls.get(i))
        .flat_map(|a| a.tests.iter())
        .filter_map(|t| match &t.fetch {
            Fetch::Stick(s) => {
                let slot_table = n.slot_tables.get(s.slot()?).copied().flatten();
                s.window(&n.tables, slot_table)
            }
            _ => None,
        })
        .max()
        .map(|ms| ms.div_ceil(1000).max(1))
}
