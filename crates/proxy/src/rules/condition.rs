//! Conditions: what a test fetches from a request (HAProxy's sample
//! fetches), how it matches ([`super::pattern`]), named tests (`acl`), and
//! the `if`/`unless` expressions over them: an OR (`||`, `or`) of ANDs
//! (names side by side) of names, each possibly negated with `!`.
//! A name defined by several `[[acl]]` entries matches when any does, as in
//! HAProxy.

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, Method, Uri};

use super::pattern::{MatchKind, Patterns};
use super::stick::track::{StickFetch, StickView};

/// What the client's certificate looked like (mTLS listeners).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientCert {
    /// The client sent a certificate (`ssl_c_used`).
    pub present: bool,
    /// The verify result (`ssl_c_verify`): 0 when it verified (or none was
    /// sent), else an X509 error code.
    pub verify: i64,
}

/// Everything a condition may look at.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub client: IpAddr,
    /// The name of the listener the request came in on.
    pub listener: &'a str,
    pub tls: bool,
    pub sni: Option<&'a str>,
    pub cert: ClientCert,
    /// The response status, in response rules.
    pub status: Option<u16>,
    /// The response headers, in response rules.
    pub response: Option<&'a HeaderMap>,
    /// The stick tables and the request's stick counters.
    pub stick: StickView<'a>,
}

impl<'a> Facts<'a> {
    /// The Host as HAProxy's `hdr(host)` sees it: the target's authority
    /// when the request has one (HTTP/2, absolute form), else the Host
    /// header, port included.
    pub fn host(&self) -> Option<&'a str> {
        match self.uri.authority() {
            Some(a) => Some(a.as_str().rsplit_once('@').map_or(a.as_str(), |(_, h)| h)),
            None => self.headers.get(http::header::HOST)?.to_str().ok(),
        }
    }

    pub fn path(&self) -> &'a str {
        self.uri.path()
    }

    pub fn query(&self) -> Option<&'a str> {
        self.uri.query()
    }

    /// The target as the node gets it (path and query).
    pub fn url(&self) -> &'a str {
        self.uri.path_and_query().map_or("/", |p| p.as_str())
    }

    /// The first value of query parameter `name` (`url_param`):
    /// parameters start after `?` or `&`, a value ends at `&` or `;`.
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.query()?.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name).then(|| v.split(';').next().unwrap_or(""))
        })
    }

    /// The value of cookie `name` in the request (`req.cook`), the first;
    /// a value ends at `;` or `,`, as HAProxy reads it.
    pub fn cookie(&self, name: &str) -> Option<&'a str> {
        self.headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split([';', ',']))
            .find_map(|kv| {
                let (k, v) = kv.trim().split_once('=')?;
                (k.trim() == name).then(|| v.trim())
            })
    }
}

/// A sample fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetch {
    /// `hdr(host)`: the Host, port included.
    Host,
    /// `hdr(NAME)`: every comma-separated value of request header NAME.
    Header(HeaderName),
    /// `res.hdr(NAME)`: every comma-separated value of response header NAME.
    ResponseHeader(HeaderName),
    Path,
    Query,
    Url,
    /// `url_param(NAME)`.
    Param(String),
    Method,
    /// `src`: the client's address.
    Src,
    /// `ssl_fc`: the connection is TLS.
    Tls,
    /// `ssl_fc_sni`.
    Sni,
    /// `req.cook(NAME)`.
    Cookie(String),
    /// `ssl_c_used`: the client sent a certificate.
    ClientCert,
    /// `ssl_c_verify`: its verify result (0 = verified).
    ClientCertVerify,
    /// `status`: the response status (response rules).
    Status,
    /// The listener's name (HAProxy's `fe_name`, for rules of one
    /// frontend among several).
    Listener,
    /// A stick counter or table (`sc0_http_req_rate`, `src_conn_cur`).
    Stick(StickFetch),
}

impl Fetch {
    /// The match method a test of this fetch uses without `match`.
    pub fn default_match(&self) -> MatchKind {
        match self {
            Fetch::Src => MatchKind::Ip,
            Fetch::Tls | Fetch::ClientCert => MatchKind::Bool,
            Fetch::ClientCertVerify | Fetch::Status | Fetch::Stick(_) => MatchKind::Int,
            _ => MatchKind::Exact,
        }
    }

    /// Whether the fetch is only known on the response.
    pub fn response_only(&self) -> bool {
        matches!(self, Fetch::Status | Fetch::ResponseHeader(_))
    }
}

/// One test: a fetch and the values it is matched against.
#[derive(Debug, Clone)]
pub struct Test {
    pub fetch: Fetch,
    pub kind: MatchKind,
    pub patterns: Patterns,
}

impl Test {
    pub fn matches(&self, f: &Facts<'_>) -> bool {
        let p = &self.patterns;
        let found = self.kind == MatchKind::Found;
        let one = |s: Option<&str>| s.is_some_and(|s| found || p.text(s));
        match &self.fetch {
            Fetch::Host => one(f.host()),
            Fetch::Header(name) => values(f.headers, name, |v| found || p.text(v)),
            Fetch::ResponseHeader(name) => f
                .response
                .is_some_and(|h| values(h, name, |v| found || p.text(v))),
            Fetch::Path => one(Some(f.path())),
            Fetch::Query => one(f.query()),
            Fetch::Url => one(Some(f.url())),
            Fetch::Param(name) => one(f.param(name)),
            Fetch::Method => one(Some(f.method.as_str())),
            Fetch::Src => match self.kind {
                MatchKind::Ip => p.ip(f.client),
                MatchKind::Found => true,
                _ => p.text(&f.client.to_canonical().to_string()),
            },
            Fetch::Tls => self.boolean(f.tls),
            Fetch::Sni => one(f.sni),
            Fetch::Cookie(name) => one(f.cookie(name)),
            Fetch::ClientCert => self.boolean(f.cert.present),
            Fetch::ClientCertVerify => self.int(Some(f.cert.verify).filter(|_| f.tls)),
            Fetch::Status => self.int(f.status.map(i64::from)),
            Fetch::Listener => one(Some(f.listener)),
            Fetch::Stick(s) => self.int(f.stick.value(s, f.client)),
        }
    }

    fn boolean(&self, v: bool) -> bool {
        match self.kind {
            MatchKind::Int => self.patterns.int(i64::from(v)),
            MatchKind::Found => true,
            _ => v,
        }
    }

    #[inline]
    fn int(&self, v: Option<i64>) -> bool {
        match (self.kind, v) {
            (_, None) => false,
            (MatchKind::Found, Some(_)) => true,
            (MatchKind::Int, Some(n)) => self.patterns.int(n),
            (_, Some(n)) => self.patterns.text(&n.to_string()),
        }
    }
}

/// Whether some comma-separated value of header `name` passes `test`.
fn values(headers: &HeaderMap, name: &HeaderName, mut test: impl FnMut(&str) -> bool) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| test(v.trim()))
}

/// A named test (`[[acl]]`), the OR of its definitions.
#[derive(Debug, Clone)]
pub struct Acl {
    pub name: String,
    pub tests: Vec<Test>,
}

impl Acl {
    pub fn matches(&self, f: &Facts<'_>) -> bool {
        self.tests.iter().any(|t| t.matches(f))
    }
}

/// An `if` or `unless` expression over named (or anonymous) tests, by
/// their index in the rule set's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// OR of ANDs of (negated, acl index).
    pub branches: Vec<Vec<(bool, usize)>>,
    /// `unless`: the rule applies when the expression is false.
    pub unless: bool,
}

impl Condition {
    pub fn holds(&self, acls: &[Acl], f: &Facts<'_>) -> bool {
        let hit = self.branches.iter().any(|b| {
            b.iter()
                .all(|&(neg, i)| acls.get(i).is_some_and(|a| a.matches(f)) != neg)
        });
        hit != self.unless
    }

    /// Whether a test of the expression is only known on the response.
    pub fn needs_response(&self, acls: &[Acl]) -> bool {
        self.branches.iter().flatten().any(|&(_, i)| {
            acls.get(i)
                .is_some_and(|a| a.tests.iter().any(|t| t.fetch.response_only()))
        })
    }
}

/// Parses an expression such as `admin !office || api`; `lookup` gives the
/// index of a name. The error says what is wrong.
pub fn parse_expression(
    text: &str,
    unless: bool,
    mut lookup: impl FnMut(&str) -> Option<usize>,
) -> Result<Condition, String> {
    let mut branches = vec![Vec::new()];
    for word in text.split_whitespace() {
        if word == "||" || word.eq_ignore_ascii_case("or") {
            if branches.last().is_some_and(Vec::is_empty) {
                return Err(format!("`{word}` without a test before it"));
            }
            branches.push(Vec::new());
            continue;
        }
        let (neg, name) = match word.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, word),
        };
        let Some(i) = lookup(name) else {
            return Err(format!("no [[acl]] named `{name}`"));
        };
        if let Some(b) = branches.last_mut() {
            b.push((neg, i));
        }
    }
    if branches.iter().any(Vec::is_empty) {
        return Err(
            "empty condition (expected acl names, e.g. \"admin !office\", joined by \"||\")".into(),
        );
    }
    Ok(Condition { branches, unless })
}
