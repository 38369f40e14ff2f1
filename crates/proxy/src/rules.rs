//! Request and response rules: the conditions and actions hosting
//! operators write in HAProxy (`acl`, `http-request`, `use_backend`,
//! `http-response`, maps, user lists, error pages), configured natively in
//! `rdmalb.toml` (`docs/rules.md`).
//!
//! Everything is compiled once when the configuration is loaded (or
//! reloaded): names resolved to indices, values to hash sets, regular
//! expressions built (the `regex` crate: linear time, so no pattern can be
//! used for ReDoS). A rule whose condition does not hold costs its tests
//! and allocates nothing.
//!
//! Where the rules run (`front::forward::handle`): the [`Rules::request`]
//! list after the head is read and checked, before a site is chosen; the
//! [`Rules::site_rules`] choose the site (else the sites' hosts and path
//! prefixes do); the chosen site's own request rules then run before the
//! request is sent to a node; on the response head, the site's response
//! rules, then the global ones (HAProxy's backend, then frontend order).

pub mod action;
pub mod condition;
pub mod config;
pub mod map;
pub mod pattern;
pub mod stick;
pub mod template;
pub mod userlist;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use http::header::HeaderValue;
use http::{HeaderMap, Method, StatusCode, Uri};

pub use action::{Action, Answer};
pub use condition::{Acl, ClientCert, Condition, Facts};
pub use map::{Map, MapEdit};
use stick::track::{self, StickView};
use stick::{StickTable, Tracking};
use template::Template;
pub use userlist::Userlist;

/// One rule: an optional condition and what it does.
#[derive(Debug, Clone)]
pub struct Rule {
    pub condition: Option<Condition>,
    pub action: Action,
    /// Only for requests that came in on these listeners (empty: all);
    /// HAProxy's rules of one frontend among several.
    pub listeners: Vec<String>,
}

impl Rule {
    /// Whether the rule applies to a request on `conn`.
    #[inline]
    fn applies(&self, acls: &[Acl], conn: &Conn<'_>, f: &Facts<'_>) -> bool {
        on_listener(&self.listeners, conn)
            && self.condition.as_ref().is_none_or(|c| c.holds(acls, f))
    }
}

fn on_listener(listeners: &[String], conn: &Conn<'_>) -> bool {
    listeners.is_empty() || listeners.iter().any(|l| l == conn.listener)
}

/// Which site a site rule chooses.
#[derive(Debug, Clone)]
pub enum SiteChoice {
    Site(usize),
    /// A site name computed per request (from a map, usually).
    Dynamic(Template),
    /// No site: the request is answered with this status (HAProxy's 503
    /// when a frontend has no backend for a request).
    Answer(StatusCode),
}

/// `[[site_rule]]`: choose a site when the condition holds.
#[derive(Debug, Clone)]
pub struct SiteRule {
    pub condition: Option<Condition>,
    pub choice: SiteChoice,
    pub listeners: Vec<String>,
}

/// What the site rules decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen {
    /// No rule matched: the sites' hosts and prefixes decide.
    NoRule,
    Site(usize),
    /// A dynamic name named no site: `global.default_site` (HAProxy's
    /// `default_backend`) serves it; without one, 503 (HAProxy's answer
    /// when no backend takes a request).
    Default,
    /// A rule answers with this status.
    Answer(StatusCode),
}

/// The compiled rule set of one configuration.
#[derive(Debug, Default)]
pub struct Rules {
    pub acls: Vec<Acl>,
    pub maps: Vec<Map>,
    pub userlists: Vec<Userlist>,
    /// Before the site is chosen.
    pub request: Vec<Rule>,
    pub site_rules: Vec<SiteRule>,
    /// By site index: after the site is chosen.
    pub site_request: Vec<Vec<Rule>>,
    /// On every response head, after the site's own.
    pub response: Vec<Rule>,
    /// By site index.
    pub site_response: Vec<Vec<Rule>>,
    /// Pages for statuses the proxy answers itself (deny, errors).
    pub error_pages: HashMap<u16, Answer>,
    /// Site names for dynamic choices.
    pub site_names: HashMap<String, usize>,
    /// `[[stick_table]]`s, by index.
    pub tables: Vec<Arc<StickTable>>,
    /// `[stick_share]`: the proxies the `shared` tables count with.
    pub share: Option<Arc<stick::share::Share>>,
}

/// What the connection tells about a request.
#[derive(Debug, Clone, Copy)]
pub struct Conn<'a> {
    pub client: IpAddr,
    pub listener: &'a str,
    pub tls: bool,
    pub sni: Option<&'a str>,
    pub cert: ClientCert,
    /// The request's time on the stick tables' clock ([`stick::ms_at`] of
    /// its start): the rules read the clock once per request.
    pub now: u32,
    /// The entries the connection's earlier requests tracked (none in a
    /// test without a connection).
    pub recent: Option<&'a stick::track::Recent>,
}

impl Conn<'_> {
    fn facts<'a>(
        &'a self,
        method: &'a Method,
        uri: &'a Uri,
        headers: &'a HeaderMap,
        stick: StickView<'a>,
    ) -> Facts<'a> {
        Facts {
            method,
            uri,
            headers,
            client: self.client,
            listener: self.listener,
            tls: self.tls,
            sni: self.sni,
            cert: self.cert,
            status: None,
            response: None,
            stick,
        }
    }
}

impl Rules {
    /// Whether no rule of any kind is configured (the request path then
    /// skips them all).
    pub fn is_empty(&self) -> bool {
        self.request.is_empty()
            && self.site_rules.is_empty()
            && self.site_request.iter().all(Vec::is_empty)
            && self.response.is_empty()
            && self.site_response.iter().all(Vec::is_empty)
            && self.error_pages.is_empty()
            && self.tables.is_empty()
    }

    /// The request rules of `site` (empty when it has none).
    pub fn of_site(&self, site: usize) -> &[Rule] {
        self.site_request.get(site).map_or(&[], Vec::as_slice)
    }

    /// The response rules of `site`.
    pub fn response_of_site(&self, site: usize) -> &[Rule] {
        self.site_response.get(site).map_or(&[], Vec::as_slice)
    }

    /// Whether response rules may run for requests of `site` (their
    /// conditions may test the request's path).
    pub fn wants_response_uri(&self, site: usize) -> bool {
        !self.response.is_empty() || !self.response_of_site(site).is_empty()
    }

    /// The map named `name`.
    pub fn map(&self, name: &str) -> Option<&Map> {
        self.maps.iter().find(|m| m.name == name)
    }

    /// What stick fetches see for a request tracking `slots`.
    pub fn stick<'a>(&'a self, slots: &'a Tracking, now: u32) -> StickView<'a> {
        StickView {
            tables: &self.tables,
            slots: slots.as_deref(),
            now,
        }
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<StickTable>> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The answer of a deny: the status's page, with `Retry-After`.
    fn deny(&self, status: StatusCode, retry_after: Option<u32>) -> Answer {
        let mut a = self.page(status);
        if let Some(s) = retry_after {
            a.headers
                .insert(http::header::RETRY_AFTER, HeaderValue::from(s));
        }
        a
    }

    /// The page for `status`: the configured one, else the built-in.
    pub fn page(&self, status: StatusCode) -> Answer {
        self.error_pages
            .get(&status.as_u16())
            .cloned()
            .unwrap_or_else(|| Answer::builtin(status))
    }

    /// Runs request rules `list` in order on the request head: header,
    /// path and query changes apply at once (later conditions see them);
    /// the first answering rule ends the list with its answer. `track`
    /// holds the request's stick counters (`track-sc` rules fill it).
    pub fn run_request<B>(
        &self,
        list: &[Rule],
        conn: &Conn<'_>,
        req: &mut http::Request<B>,
        track: &mut Tracking,
    ) -> Option<Answer> {
        for rule in list {
            let f = conn.facts(
                req.method(),
                req.uri(),
                req.headers(),
                self.stick(track, conn.now),
            );
            if !rule.applies(&self.acls, conn, &f) {
                continue;
            }
            match &rule.action {
                Action::Track { slot, table, key } => {
                    let Some(t) = self.tables.get(*table) else {
                        continue;
                    };
                    if let Some(k) = track::key(key, t, &f) {
                        track::start(track, *slot, (*table, t), k, conn.recent, conn.now);
                    }
                }
                Action::IncGpc { idx, slot } => {
                    if let Some(tr) = track.as_deref().and_then(|s| s.get(*slot)?.as_ref()) {
                        if let Some(t) = self.tables.get(tr.table) {
                            track::inc_gpc(t, tr, *idx, conn.now);
                        }
                    }
                }
                Action::Deny(status, retry) => {
                    track::error(track, &self.tables, conn.now);
                    return Some(self.deny(*status, *retry));
                }
                Action::Return(a) => return Some(a.clone()),
                Action::Redirect(r) => {
                    let loc = action::location(r, &f, &self.maps);
                    return Some(action::redirect_answer(r.code, &loc));
                }
                Action::Auth { realm, userlist } => {
                    let ok = self
                        .userlists
                        .get(*userlist)
                        .is_some_and(|l| action::authorized(l, req.headers()));
                    if !ok {
                        track::error(track, &self.tables, conn.now);
                        return Some(action::auth_answer(realm));
                    }
                }
                Action::SetPath(t) => {
                    let p = t.string(&f, &self.maps);
                    if let Some(u) = action::rewrite_uri(req.uri(), Some(&p), None) {
                        *req.uri_mut() = u;
                    }
                }
                Action::ReplacePath(re, with) => {
                    let p = re.replace_all(req.uri().path(), with.as_str()).into_owned();
                    if let Some(u) = action::rewrite_uri(req.uri(), Some(&p), None) {
                        *req.uri_mut() = u;
                    }
                }
                Action::SetQuery(t) => {
                    let q = t.string(&f, &self.maps);
                    let q = (!q.is_empty()).then_some(q.as_str());
                    if let Some(u) = action::rewrite_uri(req.uri(), None, Some(q)) {
                        *req.uri_mut() = u;
                    }
                }
                a => {
                    let value = self.header_value(a, &f);
                    action::edit_headers(a, value, req.headers_mut());
                }
            }
        }
        None
    }

    /// The value a set-header or add-header action writes.
    fn header_value(&self, a: &Action, f: &Facts<'_>) -> Option<HeaderValue> {
        match a {
            Action::SetHeader(_, t) | Action::AddHeader(_, t) => match t.as_text() {
                Some(text) => HeaderValue::from_str(text).ok(),
                None => HeaderValue::from_str(&t.string(f, &self.maps)).ok(),
            },
            _ => None,
        }
    }

    /// The site the site rules choose for a request.
    pub fn choose_site(
        &self,
        conn: &Conn<'_>,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        track: &Tracking,
    ) -> Chosen {
        let f = conn.facts(method, uri, headers, self.stick(track, conn.now));
        for rule in &self.site_rules {
            if !on_listener(&rule.listeners, conn)
                || !rule
                    .condition
                    .as_ref()
                    .is_none_or(|c| c.holds(&self.acls, &f))
            {
                continue;
            }
            return match &rule.choice {
                SiteChoice::Site(i) => Chosen::Site(*i),
                SiteChoice::Answer(s) => Chosen::Answer(*s),
                SiteChoice::Dynamic(t) => template::render_all(t, &f, &self.maps)
                    .and_then(|name| self.site_names.get(&name).copied())
                    .map_or(Chosen::Default, Chosen::Site),
            };
        }
        Chosen::NoRule
    }

    /// Runs response rules `list` on a response head; the first answering
    /// rule replaces the response.
    #[allow(clippy::too_many_arguments)]
    pub fn run_response(
        &self,
        list: &[Rule],
        conn: &Conn<'_>,
        method: &Method,
        uri: &Uri,
        status: StatusCode,
        headers: &mut HeaderMap,
        track: &Tracking,
    ) -> Option<Answer> {
        static NO_HEADERS: std::sync::OnceLock<HeaderMap> = std::sync::OnceLock::new();
        let req_headers = NO_HEADERS.get_or_init(HeaderMap::new);
        for rule in list {
            let mut f = conn.facts(method, uri, req_headers, self.stick(track, conn.now));
            f.status = Some(status.as_u16());
            f.response = Some(headers);
            if !rule.applies(&self.acls, conn, &f) {
                continue;
            }
            match &rule.action {
                Action::Deny(s, retry) => return Some(self.deny(*s, *retry)),
                Action::Return(a) => return Some(a.clone()),
                a => {
                    let value = self.header_value(a, &f);
                    action::edit_headers(a, value, headers);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
