//! `[[acl]]`, `[[map]]`, `[[userlist]]`, `[[request_rule]]`,
//! `[[site_rule]]`, `[[response_rule]]` and `[[error_page]]` as written
//! (raw serde structs) and their validation into [`Rules`]. Every problem
//! names its key (`request_rule[2].location`) and what would be accepted.
//! A condition's test (its fetch word and match) is read in [`fetch`], a
//! rule's action in [`action`].

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use super::condition::{parse_expression, Acl, Condition};
use super::map::Map;
use super::pattern::MatchKind;
use super::stick::{config as stick_config, StickTable};
use super::template::Template;
use super::userlist::{Password, Userlist};
use super::{Rules, SiteChoice, SiteRule};
use rdmalb_base::problems::ConfigCheck;

mod action;
mod fetch;
use action::{answer, raw_response, rule, status};
use fetch::test;

/// The top-level keys this module reads.
pub const KEYS: &[&str] = &[
    "acl",
    "map",
    "userlist",
    "request_rule",
    "site_rule",
    "response_rule",
    "error_page",
    "stick_table",
    "stick_share",
];

/// A rule's `if` / `unless` as the reference shows it (the validator reads
/// the `toml::Value`): an expression of `[[acl]]` names, or one anonymous
/// test written as a table.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only its schema is used
enum RawCondition {
    Expression(String),
    Test(Box<RawTest>),
}

/// `[[acl]]`, or an anonymous test in a rule's `if`/`unless`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    /// The test's name, used in rules' `if` / `unless` (letters, digits, `-`,
    /// `_`, `.`).
    ///
    /// Default: none (required in `[[acl]]`). Example: `"admin_path"`.
    pub name: Option<String>,
    /// What is tested: `"host"`, `"header"`, `"path"`, `"query"`, `"url"`,
    /// `"param"`, `"method"`, `"src"`, `"tls"`, `"sni"`, `"cookie"`,
    /// `"client_cert"`, `"client_cert_verify"`, `"status"`, `"response_header"`,
    /// `"listener"` or a stick fetch (`"sc0_http_req_rate"`, `"src_conn_cur"`,
    /// `"table_cnt"`, ...; docs/rules.md).
    ///
    /// Default: none (required). Example: `"path"`.
    pub fetch: Option<String>,
    /// The header of `fetch = "header"` or `"response_header"`.
    ///
    /// Default: none. Example: `"user-agent"`.
    pub header: Option<String>,
    /// The query parameter of `fetch = "param"`.
    ///
    /// Default: none. Example: `"debug"`.
    pub param: Option<String>,
    /// The cookie of `fetch = "cookie"`.
    ///
    /// Default: none. Example: `"session"`.
    pub cookie: Option<String>,
    /// The stick counter of `fetch = "sc_..."`: 0, 1 or 2.
    ///
    /// Default: none. Example: `0`.
    pub counter: Option<i64>,
    /// The `[[stick_table]]` of `fetch = "src_..."` or `"table_cnt"`.
    ///
    /// Default: none. Example: `"per_ip"`.
    pub table: Option<String>,
    /// How values match: `"exact"`, `"prefix"`, `"suffix"`, `"substring"`,
    /// `"domain"`, `"dir"`, `"regex"`, `"found"`, `"int"`, `"ip"` or `"bool"`.
    ///
    /// Default: by fetch: `"ip"` for `src`; `"bool"` for `tls` and
    /// `client_cert`; `"int"` for `client_cert_verify`, `status` and stick
    /// fetches; `"exact"` for the others. Example: `"prefix"`.
    #[serde(rename = "match")]
    pub match_kind: Option<String>,
    /// The values matched; any one matching makes the test true.
    ///
    /// Default: `[]`. Example: `["/admin", "/wp-admin"]`.
    #[serde(default)]
    pub values: Vec<String>,
    /// A file of values, one a line, `#` comments (HAProxy's `-f`).
    ///
    /// Default: none. Example: `"office-networks.lst"`.
    pub file: Option<String>,
    /// Match text without regard to case (HAProxy's `-i`).
    ///
    /// Default: `false`. Example: `true`.
    pub ignore_case: Option<bool>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMap {
    /// The map's name, used as `map:NAME` in values.
    ///
    /// Default: none (required). Example: `"hosts"`.
    pub name: Option<String>,
    /// The map file: one `key value` a line.
    ///
    /// Default: none (required). Example: `"/etc/rdmalb/hosts.map"`.
    pub file: Option<String>,
    /// How keys match: `"exact"`, `"prefix"`, `"suffix"`, `"substring"`,
    /// `"domain"`, `"dir"` or `"regex"`.
    ///
    /// Default: `"exact"`. Example: `"prefix"`.
    #[serde(rename = "match")]
    pub match_kind: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUserlist {
    /// The list's name, used by `auth` rules' `userlist`.
    ///
    /// Default: none (required). Example: `"admins"`.
    pub name: Option<String>,
    /// The users, e.g. `users = [{ name = "ann", password = "$2b$12$..." }]`.
    ///
    /// Default: `[]`.
    #[serde(default)]
    pub users: Vec<RawUser>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawUser {
    /// The user name.
    ///
    /// Default: none (required). Example: `"ann"`.
    pub name: Option<String>,
    /// A crypt(3) hash: bcrypt, SHA-256-crypt or SHA-512-crypt.
    ///
    /// Default: none. Example: `"$2b$12$..."`.
    pub password: Option<String>,
    /// The password in clear text (HAProxy's `insecure-password`).
    ///
    /// Default: none. Example: `"secret"`.
    pub insecure_password: Option<String>,
}

/// `[[request_rule]]` and `[[response_rule]]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// What the rule does. Request rules: `"deny"`, `"return"`, `"redirect"`,
    /// `"auth"`, `"set-header"`, `"add-header"`, `"del-header"`,
    /// `"replace-header"`, `"replace-value"`, `"set-path"`, `"replace-path"`,
    /// `"set-query"`, `"track-sc0"`..`"track-sc2"`, `"sc-inc-gpc0"`,
    /// `"sc-inc-gpc1"`. Response rules: `"deny"`, `"return"`, `"set-header"`,
    /// `"add-header"`, `"del-header"`, `"replace-header"`, `"replace-value"`.
    ///
    /// Default: none (required). Example: `"deny"`.
    pub action: Option<String>,
    /// The condition: an expression of `[[acl]]` names (`"admin_path !office"`;
    /// side by side is and, `||` is or, `!` negates) or one anonymous test as a
    /// table (`{ fetch = "tls" }`).
    ///
    /// Default: none (always). Example: `"admin_path !office"`.
    #[serde(rename = "if")]
    #[schemars(with = "Option<RawCondition>")]
    pub if_: Option<toml::Value>,
    /// The negated condition, as `if`.
    ///
    /// Default: none. Example: `{ fetch = "tls" }`.
    #[schemars(with = "Option<RawCondition>")]
    pub unless: Option<toml::Value>,
    /// Only for requests routed to this site (after the site is chosen).
    ///
    /// Default: none (every site). Example: `"shop"`.
    pub site: Option<String>,
    /// Only for requests on these `[[listener]]`s.
    ///
    /// Default: none (every listener). Example: `["web"]`.
    pub listeners: Option<Vec<String>>,
    /// `deny`, `return`: the status answered.
    ///
    /// Default: 403 for `deny`, 200 for `return`. Example: `429`.
    pub status: Option<i64>,
    /// `return`: the answer's Content-Type.
    ///
    /// Default: none. Example: `"text/plain"`.
    pub content_type: Option<String>,
    /// `return`, `deny`: the answer's body.
    ///
    /// Default: none. Example: `"slow down\n"`.
    pub body: Option<String>,
    /// `return`, `deny`: a file holding the answer's body.
    ///
    /// Default: none. Example: `"pages/maintenance.html"`.
    pub body_file: Option<String>,
    /// `return`, `deny`: headers added to the answer.
    ///
    /// Default: none. Example: `{ "cache-control" = "no-store" }`.
    pub headers: Option<BTreeMap<String, String>>,
    /// `redirect`: the new location (a value: `{path}`, `{host}` ...).
    ///
    /// Default: none. Example: `"https://www.example.com{path}"`.
    pub location: Option<String>,
    /// `redirect`: a prefix put before the request's path.
    ///
    /// Default: none. Example: `"https://www.example.com"`.
    pub prefix: Option<String>,
    /// `redirect`: the new scheme, same host and path.
    ///
    /// Default: none. Example: `"https"`.
    pub scheme: Option<String>,
    /// `redirect` (request rules; response rules do not redirect): 301, 302,
    /// 303, 307 or 308.
    ///
    /// Default: 302 (request rules only). Example: `301`.
    pub code: Option<i64>,
    /// `redirect` (request rules): leave out the query string.
    ///
    /// Default: false. Example: `true`.
    pub drop_query: Option<bool>,
    /// `redirect` (request rules): add a `/` to the path.
    ///
    /// Default: false. Example: `true`.
    pub append_slash: Option<bool>,
    /// Header actions: the header's name.
    ///
    /// Default: none. Example: `"Strict-Transport-Security"`.
    pub name: Option<String>,
    /// `set-header`, `add-header`, `set-path`, `set-query`: the new value (a
    /// value: literal text and `{fetch|converter}` parts).
    ///
    /// Default: none. Example: `"max-age=63072000"`.
    pub value: Option<String>,
    /// `replace-header`, `replace-value`, `replace-path`: what is replaced.
    ///
    /// Default: none. Example: `"^/old/(.*)"`.
    pub regex: Option<String>,
    /// The replacement (`$1` refers to a group of `regex`).
    ///
    /// Default: none. Example: `"/new/$1"`.
    pub replacement: Option<String>,
    /// `auth`: the realm named in the 401 answer.
    ///
    /// Default: none. Example: `"admin"`.
    pub realm: Option<String>,
    /// `auth`: the `[[userlist]]` checked.
    ///
    /// Default: none. Example: `"admins"`.
    pub userlist: Option<String>,
    /// `track-scN`: what the entry is keyed by (`"src"`, `"hdr(NAME)"`, ...).
    ///
    /// Default: none. Example: `"src"`.
    pub key: Option<String>,
    /// `track-scN`: the `[[stick_table]]`.
    ///
    /// Default: none. Example: `"per_ip"`.
    pub table: Option<String>,
    /// `sc-inc-gpc0`, `sc-inc-gpc1`: the stick counter, 0, 1 or 2.
    ///
    /// Default: none. Example: `0`.
    pub counter: Option<i64>,
    /// `deny`: the Retry-After seconds.
    ///
    /// Default: from the condition. Example: `10`.
    pub retry_after: Option<i64>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSiteRule {
    /// The site chosen: a name, or a value such as `"{host|lower|map:hosts}"`.
    ///
    /// Default: none (this or `status`). Example: `"api"`.
    pub site: Option<String>,
    /// Instead of a site: answer with this status.
    ///
    /// Default: none. Example: `503`.
    pub status: Option<i64>,
    /// Only for requests on these `[[listener]]`s.
    ///
    /// Default: none (every listener). Example: `["web"]`.
    pub listeners: Option<Vec<String>>,
    /// The condition, as a request rule's `if`.
    ///
    /// Default: none (always). Example: `"is_api"`.
    #[serde(rename = "if")]
    #[schemars(with = "Option<RawCondition>")]
    pub if_: Option<toml::Value>,
    /// The negated condition.
    ///
    /// Default: none. Example: `"is_api"`.
    #[schemars(with = "Option<RawCondition>")]
    pub unless: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawErrorPage {
    /// The status whose answers this page replaces (400, 403, 404, 408, 429,
    /// 431, 500, 502, 503, 504, ...).
    ///
    /// Default: none (required). Example: `503`.
    pub status: Option<i64>,
    /// The page's Content-Type.
    ///
    /// Default: none. Example: `"text/html"`.
    pub content_type: Option<String>,
    /// The page's body.
    ///
    /// Default: none. Example: `"<h1>Back soon</h1>"`.
    pub body: Option<String>,
    /// A file holding the page's body.
    ///
    /// Default: none. Example: `"pages/503.html"`.
    pub body_file: Option<String>,
    /// A whole HTTP response (HAProxy's `errorfile` format).
    ///
    /// Default: none. Example: `"errors/503.http"`.
    pub file: Option<String>,
}

/// Builder state: names seen so far.
struct Names {
    listeners: Vec<String>,
    acls: Vec<Acl>,
    acl_index: HashMap<String, usize>,
    map_index: HashMap<String, usize>,
    userlist_index: HashMap<String, usize>,
    tables: Vec<std::sync::Arc<StickTable>>,
    table_index: HashMap<String, usize>,
    /// The table each stick counter was last tracked in, in rule order
    /// (for the `Retry-After` of the rules after).
    slot_tables: [Option<usize>; 3],
}

/// Validates the rule sections of `table`; `sites` maps site names to
/// their index, `site_count` sizes the per-site lists, `listeners` are the
/// listeners' names.
pub fn validate(
    c: &mut ConfigCheck,
    table: &toml::Table,
    sites: &HashMap<String, usize>,
    site_count: usize,
    listeners: &[String],
) -> Rules {
    let raw_maps: Vec<Option<RawMap>> = c.entries(table, "map");
    let raw_acls: Vec<Option<RawTest>> = c.entries(table, "acl");
    let raw_users: Vec<Option<RawUserlist>> = c.entries(table, "userlist");
    let raw_req: Vec<Option<RawRule>> = c.entries(table, "request_rule");
    let raw_site: Vec<Option<RawSiteRule>> = c.entries(table, "site_rule");
    let raw_resp: Vec<Option<RawRule>> = c.entries(table, "response_rule");
    let raw_pages: Vec<Option<RawErrorPage>> = c.entries(table, "error_page");
    let raw_tables: Vec<Option<stick_config::RawTable>> = c.entries(table, "stick_table");
    let share = table.contains_key("stick_share").then(|| {
        let raw = c.section(table, "stick_share");
        super::stick::share::config::validate(c, raw)
    });
    let (tables, table_index) = stick_config::tables(c, raw_tables, share.is_some());

    let mut rules = Rules {
        site_request: vec![Vec::new(); site_count],
        site_response: vec![Vec::new(); site_count],
        site_names: sites.clone(),
        ..Rules::default()
    };
    let mut n = Names {
        listeners: listeners.to_vec(),
        acls: Vec::new(),
        acl_index: HashMap::new(),
        map_index: HashMap::new(),
        userlist_index: HashMap::new(),
        tables,
        table_index,
        slot_tables: [None; 3],
    };
    maps(c, raw_maps, &mut n, &mut rules);
    acls(c, raw_acls, &mut n);
    for (i, u) in raw_users.into_iter().enumerate() {
        let Some(u) = u else { continue };
        if let Some(l) = userlist(c, &format!("userlist[{i}]"), u) {
            n.userlist_index
                .insert(l.name.clone(), rules.userlists.len());
            rules.userlists.push(l);
        }
    }
    let (request, site_request) = http_rules(c, raw_req, false, sites, &mut n, site_count);
    (rules.request, rules.site_request) = (request, site_request);
    let (response, site_response) = http_rules(c, raw_resp, true, sites, &mut n, site_count);
    (rules.response, rules.site_response) = (response, site_response);
    for (i, r) in raw_site.into_iter().enumerate() {
        let Some(r) = r else { continue };
        if let Some(rule) = site_rule(c, &format!("site_rule[{i}]"), r, sites, &mut n) {
            rules.site_rules.push(rule);
        }
    }
    for (i, p) in raw_pages.into_iter().enumerate() {
        let Some(p) = p else { continue };
        if let Some((status, answer)) = error_page(c, &format!("error_page[{i}]"), p) {
            rules.error_pages.insert(status, answer);
        }
    }
    rules.acls = n.acls;
    rules.tables = n.tables;
    rules.share = share.flatten().map(std::sync::Arc::new);
    rules
}

/// `[[map]]`s, each name once.
fn maps(c: &mut ConfigCheck, raw: Vec<Option<RawMap>>, n: &mut Names, rules: &mut Rules) {
    for (i, m) in raw.into_iter().enumerate() {
        let Some(m) = m else { continue };
        if let Some(map) = map(c, &format!("map[{i}]"), m) {
            if n.map_index
                .insert(map.name.clone(), rules.maps.len())
                .is_some()
            {
                c.add(
                    format!("map[{i}].name"),
                    format!("map `{}` is defined twice", map.name),
                );
            }
            rules.maps.push(map);
        }
    }
}

/// `[[acl]]`s: the tests of one name make one ACL (any passing).
fn acls(c: &mut ConfigCheck, raw: Vec<Option<RawTest>>, n: &mut Names) {
    for (i, a) in raw.into_iter().enumerate() {
        let Some(a) = a else { continue };
        let key = format!("acl[{i}]");
        let Some(name) = a.name.clone().filter(|s| valid_name(s)) else {
            c.add(format!("{key}.name"), "missing or not a name (expected letters, digits, '-', '_', '.', e.g. \"admin_path\")");
            continue;
        };
        let Some(t) = test(c, &key, &a, &n.table_index) else {
            continue;
        };
        match n.acl_index.get(&name) {
            Some(&j) => n.acls[j].tests.push(t),
            None => {
                n.acl_index.insert(name.clone(), n.acls.len());
                n.acls.push(Acl {
                    name,
                    tests: vec![t],
                });
            }
        }
    }
}

/// `[[request_rule]]`s (or `[[response_rule]]`s, `response`): those of
/// every site, and those of each site.
fn http_rules(
    c: &mut ConfigCheck,
    raw: Vec<Option<RawRule>>,
    response: bool,
    sites: &HashMap<String, usize>,
    n: &mut Names,
    site_count: usize,
) -> (Vec<super::Rule>, Vec<Vec<super::Rule>>) {
    let section = if response {
        "response_rule"
    } else {
        "request_rule"
    };
    let (mut all, mut per_site) = (Vec::new(), vec![Vec::new(); site_count]);
    for (i, r) in raw.into_iter().enumerate() {
        let Some(r) = r else { continue };
        let key = format!("{section}[{i}]");
        let site = r.site.clone();
        if let Some(rule) = rule(c, &key, r, response, n) {
            match site {
                None => all.push(rule),
                Some(s) => match sites.get(&s) {
                    Some(&j) => per_site[j].push(rule),
                    None => c.add(format!("{key}.site"), format!("no site named `{s}`")),
                },
            }
        }
    }
    (all, per_site)
}

/// One `[[site_rule]]`: a site by name, one named by a template, or an
/// answer.
fn site_rule(
    c: &mut ConfigCheck,
    key: &str,
    r: RawSiteRule,
    sites: &HashMap<String, usize>,
    n: &mut Names,
) -> Option<SiteRule> {
    let condition = condition(c, key, r.if_.as_ref(), r.unless.as_ref(), n);
    let listeners = listener_names(c, key, r.listeners.as_deref(), &n.listeners);
    let choice = match (r.site.as_deref(), r.status) {
        (Some(_), Some(_)) => {
            c.add(
                format!("{key}.status"),
                "a site rule has site or status, not both",
            );
            return None;
        }
        (None, Some(_)) => SiteChoice::Answer(status(c, &format!("{key}.status"), r.status, None)?),
        (None, None) => {
            c.add(format!("{key}.site"), "missing (expected a site name, a value such as \"{host|lower|map:hosts}\", or status = 503)");
            return None;
        }
        (Some(s), None) if s.contains('{') => {
            match Template::parse(s, |m| n.map_index.get(m).copied()) {
                Ok(t) => SiteChoice::Dynamic(t),
                Err(e) => {
                    c.add(format!("{key}.site"), e);
                    return None;
                }
            }
        }
        (Some(s), None) => match sites.get(s) {
            Some(&j) => SiteChoice::Site(j),
            None => {
                c.add(format!("{key}.site"), format!("no site named `{s}`"));
                return None;
            }
        },
    };
    Some(SiteRule {
        condition,
        choice,
        listeners,
    })
}

/// One `[[error_page]]`: its status and answer, from a whole HTTP
/// response in `file` or from its parts.
fn error_page(
    c: &mut ConfigCheck,
    key: &str,
    p: RawErrorPage,
) -> Option<(u16, super::action::Answer)> {
    let status = status(c, &format!("{key}.status"), p.status, None)?;
    let answer = if let Some(f) = &p.file {
        for (k, v) in [
            ("body", p.body.is_some()),
            ("body_file", p.body_file.is_some()),
            ("content_type", p.content_type.is_some()),
        ] {
            if v {
                c.add(
                    format!("{key}.{k}"),
                    "not used with `file` (the file is a whole HTTP response)",
                );
            }
        }
        match raw_response(&c.path(f)) {
            Ok(a) => a,
            Err(e) => {
                c.add(format!("{key}.file"), e);
                return None;
            }
        }
    } else {
        answer(
            c,
            key,
            status,
            p.content_type.as_deref(),
            p.body.as_deref(),
            p.body_file.as_deref(),
            None,
        )?
    };
    Some((status.as_u16(), answer))
}

/// A rule's `listeners`, each a listener's name.
fn listener_names(
    c: &mut ConfigCheck,
    key: &str,
    v: Option<&[String]>,
    known: &[String],
) -> Vec<String> {
    let list = v.unwrap_or_default();
    for (i, l) in list.iter().enumerate() {
        if !known.contains(l) {
            c.add(
                format!("{key}.listeners[{i}]"),
                format!(
                    "no [[listener]] named `{l}` (expected one of: {})",
                    known.join(", ")
                ),
            );
        }
    }
    list.to_vec()
}

pub(super) use rdmalb_base::name::is_valid as valid_name;

fn map(c: &mut ConfigCheck, key: &str, m: RawMap) -> Option<Map> {
    let name = match m.name {
        Some(n) if valid_name(&n) => n,
        _ => {
            c.add(
                format!("{key}.name"),
                "missing or not a name (expected letters, digits, '-', '_', '.', e.g. \"hosts\")",
            );
            return None;
        }
    };
    let kind = match m.match_kind.as_deref().map(|k| (k, MatchKind::parse(k))) {
        None => MatchKind::Exact,
        Some((
            _,
            Some(
                k @ (MatchKind::Exact
                | MatchKind::Prefix
                | MatchKind::Suffix
                | MatchKind::Substring
                | MatchKind::Domain
                | MatchKind::Dir
                | MatchKind::Regex),
            ),
        )) => k,
        Some((k, _)) => {
            c.add(format!("{key}.match"), format!("`{k}` is not a map match (expected \"exact\", \"prefix\", \"suffix\", \"substring\", \"domain\", \"dir\" or \"regex\")"));
            return None;
        }
    };
    let Some(file) = m.file else {
        c.add(
            format!("{key}.file"),
            "missing (expected the path of a map file: one `key value` a line)",
        );
        return None;
    };
    match Map::load(&name, &c.path(&file), kind) {
        Ok(m) => Some(m),
        Err(e) => {
            c.add(format!("{key}.file"), e);
            None
        }
    }
}

fn userlist(c: &mut ConfigCheck, key: &str, u: RawUserlist) -> Option<Userlist> {
    let Some(name) = u.name.filter(|n| valid_name(n)) else {
        c.add(
            format!("{key}.name"),
            "missing or not a name (expected e.g. \"admins\")",
        );
        return None;
    };
    let mut list = Userlist {
        name,
        users: HashMap::new(),
    };
    for (i, user) in u.users.into_iter().enumerate() {
        let ukey = format!("{key}.users[{i}]");
        let Some(uname) = user.name.filter(|n| !n.is_empty() && !n.contains(':')) else {
            c.add(
                format!("{ukey}.name"),
                "missing or not a user name (no ':')",
            );
            continue;
        };
        let pw = match (user.password, user.insecure_password) {
            (Some(h), None) => match Password::hash(&h) {
                Ok(p) => p,
                Err(e) => {
                    c.add(format!("{ukey}.password"), e);
                    continue;
                }
            },
            (None, Some(p)) => Password::Clear(p),
            _ => {
                c.add(
                    format!("{ukey}.password"),
                    "expected exactly one of password (a crypt(3) hash) and insecure_password",
                );
                continue;
            }
        };
        list.users.insert(uname, pw);
    }
    Some(list)
}

/// The `if` / `unless` of a rule: an expression of acl names, or an
/// anonymous test (a table).
fn condition(
    c: &mut ConfigCheck,
    key: &str,
    if_: Option<&toml::Value>,
    unless: Option<&toml::Value>,
    n: &mut Names,
) -> Option<Condition> {
    let (field, v, neg) = match (if_, unless) {
        (None, None) => return None,
        (Some(_), Some(_)) => {
            c.add(
                format!("{key}.unless"),
                "a rule has `if` or `unless`, not both (combine the tests in one expression)",
            );
            return None;
        }
        (Some(v), None) => ("if", v, false),
        (None, Some(v)) => ("unless", v, true),
    };
    let key = format!("{key}.{field}");
    match v {
        toml::Value::String(s) => {
            match parse_expression(s, neg, |name| n.acl_index.get(name).copied()) {
                Ok(c) => Some(c),
                Err(e) => {
                    c.add(key, e);
                    None
                }
            }
        }
        toml::Value::Table(_) => {
            let raw: RawTest = c.field(&key, Some(v), "a test table")?;
            if raw.name.is_some() {
                c.add(
                    format!("{key}.name"),
                    "an anonymous test has no name (define a named one with [[acl]])",
                );
            }
            let t = test(c, &key, &raw, &n.table_index)?;
            let i = n.acls.len();
            n.acls.push(Acl {
                name: format!("{{{key}}}"),
                tests: vec![t],
            });
            Some(Condition {
                branches: vec![vec![(false, i)]],
                unless: neg,
            })
        }
        other => {
            c.add(
                key,
                format!(
                    "expected an expression such as \"admin !office\" or a test table, found {}",
                    other.type_str()
                ),
            );
            None
        }
    }
}
