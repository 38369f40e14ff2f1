//! What a rule does when its condition holds: answer the request itself
//! (deny, return, redirect, ask for credentials) or change it (headers,
//! path, query) before it goes on.

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode, Uri};
use regex::Regex;

use super::condition::Facts;
use super::map::Map;
use super::stick::track::KeyFetch;
use super::template::Template;
use super::userlist::Userlist;

/// A response the proxy makes itself.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// HAProxy's built-in page for `status` (the same text its `deny`,
    /// `return` without a body and `errorfile`-less errors send).
    pub fn builtin(status: StatusCode) -> Answer {
        let reason = status.canonical_reason().unwrap_or("Error");
        let detail = match status.as_u16() {
            400 => "Your browser sent an invalid request.",
            401 => "You need a valid user and password to access this content.",
            403 => "Request forbidden by administrative rules.",
            404 => "The requested URL was not found on this server.",
            405 => "A request was made of a resource using a request method not supported by that resource",
            408 => "Your browser didn't send a complete request in time.",
            429 => "You have sent too many requests in a given amount of time.",
            500 => "An internal server error occurred.",
            502 => "The server returned an invalid or incomplete response.",
            503 => "No server is available to handle this request.",
            504 => "The server didn't respond in time.",
            _ => reason,
        };
        let body = format!(
            "<html><body><h1>{} {reason}</h1>\n{detail}\n</body></html>\n",
            status.as_u16()
        );
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Answer {
            status,
            headers,
            body: Bytes::from(body),
        }
    }
}

/// Where a redirect points.
#[derive(Debug, Clone)]
pub enum RedirectTo {
    /// The whole Location.
    Location(Template),
    /// A prefix put before the request's path (`/` adds nothing).
    Prefix(Template),
    /// The same host and target on another scheme.
    Scheme(String),
}

#[derive(Debug, Clone)]
pub struct Redirect {
    pub to: RedirectTo,
    pub code: StatusCode,
    pub drop_query: bool,
    pub append_slash: bool,
}

/// One rule's action.
#[derive(Debug, Clone)]
pub enum Action {
    /// Refuse with `status` (the status's error page), with a
    /// `Retry-After` of this many seconds when set.
    Deny(StatusCode, Option<u32>),
    /// Answer with this response.
    Return(Answer),
    Redirect(Redirect),
    /// Ask for Basic credentials unless the request carries a user of the
    /// list (index in the rule set's user lists).
    Auth {
        realm: String,
        userlist: usize,
    },
    SetHeader(HeaderName, Template),
    AddHeader(HeaderName, Template),
    DelHeader(HeaderName),
    /// Rewrites each whole value of the header matching the regex.
    ReplaceHeader(HeaderName, Regex, String),
    /// Rewrites each comma-separated value matching the regex.
    ReplaceValue(HeaderName, Regex, String),
    SetPath(Template),
    ReplacePath(Regex, String),
    SetQuery(Template),
    /// `track-scN`: slot N tracks the entry of the request's key in a
    /// stick table (index in the rule set's tables).
    Track {
        slot: usize,
        table: usize,
        key: KeyFetch,
    },
    /// `sc-inc-gpc0(N)` / `sc-inc-gpc1(N)`: increments a general purpose
    /// counter of the entry slot N tracks.
    IncGpc {
        idx: usize,
        slot: usize,
    },
}

impl Action {
    /// Whether the action answers the request (the rules after it are not
    /// evaluated).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Action::Deny(..) | Action::Return(_) | Action::Redirect(_)
        )
    }
}

/// The Location of `r` for the request in `f`, as HAProxy builds it.
pub fn location(r: &Redirect, f: &Facts<'_>, maps: &[Map]) -> String {
    let mut out = String::new();
    let target = |out: &mut String| {
        let start = out.len();
        out.push_str(f.path());
        if out.len() == start {
            out.push('/');
        }
        if let (false, Some(q)) = (r.drop_query, f.query()) {
            out.push('?');
            out.push_str(q);
        }
    };
    match &r.to {
        RedirectTo::Location(t) => {
            t.render(f, maps, &mut out);
            return out;
        }
        RedirectTo::Prefix(t) => {
            if t.as_text() != Some("/") {
                t.render(f, maps, &mut out);
            }
            target(&mut out);
        }
        RedirectTo::Scheme(s) => {
            out.push_str(s);
            if let Some(h) = f.host().filter(|h| !h.is_empty()) {
                out.push_str("://");
                // The Host as sent, port included, as HAProxy writes it.
                out.push_str(h);
            }
            target(&mut out);
        }
    }
    if r.append_slash && !out.ends_with('/') {
        out.push('/');
    }
    out
}

/// A redirect response.
pub fn redirect_answer(code: StatusCode, location: &str) -> Answer {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Answer {
        status: code,
        headers,
        body: Bytes::new(),
    }
}

/// The answer to a request without valid credentials.
pub fn auth_answer(realm: &str) -> Answer {
    let mut a = Answer::builtin(StatusCode::UNAUTHORIZED);
    if let Ok(v) = HeaderValue::from_str(&format!("Basic realm=\"{realm}\"")) {
        a.headers.insert(header::WWW_AUTHENTICATE, v);
    }
    a
}

/// Whether the request's Basic credentials name a user of `list`.
pub fn authorized(list: &Userlist, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, cred) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then_some(cred.trim())
        })
        .is_some_and(|cred| list.check_basic(cred))
}

/// Applies a header action to `headers` (the value computed beforehand).
pub fn edit_headers(action: &Action, value: Option<HeaderValue>, headers: &mut HeaderMap) {
    match (action, value) {
        (Action::SetHeader(n, _), Some(v)) => {
            headers.insert(n.clone(), v);
        }
        (Action::AddHeader(n, _), Some(v)) => {
            headers.append(n.clone(), v);
        }
        (Action::DelHeader(n), _) => {
            headers.remove(n);
        }
        (Action::ReplaceHeader(n, re, with), _) => replace(headers, n, |v| {
            re.replace_all(v, with.as_str()).into_owned()
        }),
        (Action::ReplaceValue(n, re, with), _) => replace(headers, n, |v| {
            v.split(',')
                .map(|p| re.replace_all(p.trim(), with.as_str()).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        }),
        _ => {}
    }
}

fn replace(headers: &mut HeaderMap, name: &HeaderName, f: impl Fn(&str) -> String) {
    let old: Vec<HeaderValue> = headers.get_all(name).iter().cloned().collect();
    if old.is_empty() {
        return;
    }
    headers.remove(name);
    for v in old {
        let new = v
            .to_str()
            .ok()
            .and_then(|s| HeaderValue::from_str(&f(s)).ok())
            .unwrap_or(v);
        headers.append(name.clone(), new);
    }
}

/// `uri` with a new path (and its query kept) or a new query.
pub fn rewrite_uri(uri: &Uri, path: Option<&str>, query: Option<Option<&str>>) -> Option<Uri> {
    let p = path.unwrap_or(uri.path());
    let q = match query {
        Some(q) => q,
        None => uri.query(),
    };
    let pq = match q {
        Some(q) => format!("{p}?{q}"),
        None => p.to_string(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(pq.parse().ok()?);
    Uri::from_parts(parts).ok()
}
