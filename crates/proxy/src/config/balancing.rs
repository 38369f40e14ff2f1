//! A site's own balancing (raw → typed): `[[site]] balance` (a policy of
//! `global.balance`'s list, which it overrides for the site, or a hash key:
//! HAProxy's per-backend `balance`), `[site.hash]` (HAProxy's `hash-type`,
//! the key's options and `hash-balance-factor`) and `[site.sticky]`
//! (HAProxy's `cookie` directive, plus rdmalb's load bound). Which setting
//! wins: the site's `balance`, else `global.balance`. Documented in
//! docs/balancing.md.

use std::time::Duration;

use serde::Deserialize;

use rdmalb_base::problems::ConfigCheck;

use super::Balance;

/// `[site.hash]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHash {
    /// `"map-based"` (as HAProxy's default) or `"consistent"`.
    ///
    /// Default: `"map-based"`. Example: `"consistent"`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `"sdbm"`, `"djb2"`, `"wt6"` or `"crc32"`. Writing one, even `"sdbm"`,
    /// turns `avalanche`'s default off for `type = "consistent"`, as in
    /// HAProxy.
    ///
    /// Default: sdbm. Example: `"crc32"`.
    pub function: Option<String>,
    /// Mix the hash before use (HAProxy's `avalanche`).
    ///
    /// Default: on for `type = "consistent"` without a `function`, as HAProxy. Example: `true`.
    pub avalanche: Option<bool>,
    /// HAProxy's `hash-balance-factor` (consistent only): 0 (off) or at least
    /// 100; a node above this percent of the mean load is skipped.
    ///
    /// Default: `0`. Example: `150`.
    pub balance_factor: Option<i64>,
    /// What `balance_factor` counts: `"own"` (this proxy's requests, as HAProxy)
    /// or `"published"` (the nodes' published work).
    ///
    /// Default: `"own"`. Example: `"published"`.
    pub bound_load: Option<String>,
    /// `balance = "uri"`: hash the query string too (HAProxy's `whole`).
    ///
    /// Default: `false`. Example: `true`.
    pub whole: Option<bool>,
    /// `balance = "uri"`: the path only, never the authority (`path-only`).
    ///
    /// Default: `false`. Example: `true`.
    pub path_only: Option<bool>,
    /// `balance = "uri"`: at most this many characters (`len`). Accepted: 1 to
    /// 1048576.
    ///
    /// Default: none (all). Example: `64`.
    pub len: Option<i64>,
    /// `balance = "uri"`: at most this many directories (`depth`). Accepted: 1 to
    /// 1024.
    ///
    /// Default: none (all). Example: `2`.
    pub depth: Option<i64>,
    /// `balance = "hdr"`: the header hashed.
    ///
    /// Default: none (required with `"hdr"`). Example: `"host"`.
    pub header: Option<String>,
    /// `balance = "hdr"`: only the domain name between the last two dots.
    ///
    /// Default: `false`. Example: `true`.
    pub use_domain_only: Option<bool>,
    /// `balance = "url_param"`: the query parameter hashed.
    ///
    /// Default: none (required with `"url_param"`). Example: `"userid"`.
    pub param: Option<String>,
    /// `balance = "cookie"`: the cookie hashed.
    ///
    /// Default: none (required with `"cookie"`). Example: `"session"`.
    pub cookie: Option<String>,
}

/// `[site.sticky]` as written.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSticky {
    /// The sticky cookie's name.
    ///
    /// Default: none (required). Example: `"SRV"`.
    pub cookie: Option<String>,
    /// `"insert"` (the proxy sets the cookie), `"rewrite"` (the app sets it; the
    /// proxy writes the node's value into it), `"prefix"` (the node's value is
    /// prefixed to the app's cookie) or `"passive"` (read, never written).
    ///
    /// Default: `"insert"`. Example: `"prefix"`.
    pub mode: Option<String>,
    /// Do not pass the cookie to the node (HAProxy's `indirect`).
    ///
    /// Default: `false`. Example: `true`.
    pub indirect: Option<bool>,
    /// Mark responses that set the cookie uncacheable (HAProxy's `nocache`).
    ///
    /// Default: `false`. Example: `true`.
    pub nocache: Option<bool>,
    /// Set the cookie's `HttpOnly` attribute.
    ///
    /// Default: `false`. Example: `true`.
    pub httponly: Option<bool>,
    /// Set the cookie's `Secure` attribute.
    ///
    /// Default: `false`. Example: `true`.
    pub secure: Option<bool>,
    /// `mode = "insert"` only: a session idle longer than this is dropped.
    ///
    /// Default: none. Example: `"30m"`.
    pub maxidle: Option<String>,
    /// `mode = "insert"` only: a session older than this is dropped.
    ///
    /// Default: none. Example: `"8h"`.
    pub maxlife: Option<String>,
    /// The cookie's `Domain` attributes.
    ///
    /// Default: `[]`. Example: `[".shops.example.com"]`.
    #[serde(default)]
    pub domain: Vec<String>,
    /// A load index (above 0, at most 1) above which a session leaves its node,
    /// once it stays there for `max_load_for`.
    ///
    /// Default: none (sessions stay). Example: `0.9`.
    pub max_load: Option<f64>,
    /// How long the load must stay above `max_load` (1ms to 1h). The
    /// default is the measured winner against co-tenants busy for about a
    /// second at a time; a longer hold moves fewer sessions.
    ///
    /// Default: `"250ms"`. Example: `"1s"`.
    pub max_load_for: Option<String>,
}

/// The request part a hash balance hashes (HAProxy's `balance` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The client's address (`balance source`).
    Source,
    /// The request target (`balance uri`): up to `?` unless `whole`, at
    /// most `len` characters and `depth` directories (0 = no limit).
    Uri {
        whole: bool,
        path_only: bool,
        len: usize,
        depth: usize,
    },
    /// A header's first value (`balance hdr(name)`).
    Header {
        name: http::HeaderName,
        domain_only: bool,
    },
    /// A query parameter (`balance url_param`).
    UrlParam(String),
    /// A cookie (`balance hash req.cook(name)`).
    Cookie(String),
}

impl HashKey {
    /// The `balance` names of the hash keys.
    pub const NAMES: &'static [&'static str] = &["source", "uri", "hdr", "url_param", "cookie"];

    /// Name shown in `/status` and `show stat`.
    pub fn name(&self) -> &'static str {
        match self {
            HashKey::Source => "source",
            HashKey::Uri { .. } => "uri",
            HashKey::Header { .. } => "hdr",
            HashKey::UrlParam(_) => "url_param",
            HashKey::Cookie(_) => "cookie",
        }
    }
}

/// HAProxy's hash functions (`hash-type ... <function>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashFunction {
    #[default]
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
}

impl HashFunction {
    pub const ACCEPTED: &'static str = "\"sdbm\", \"djb2\", \"wt6\" or \"crc32\"";

    pub fn parse(s: &str) -> Option<HashFunction> {
        match s {
            "sdbm" => Some(HashFunction::Sdbm),
            "djb2" => Some(HashFunction::Djb2),
            "wt6" => Some(HashFunction::Wt6),
            "crc32" => Some(HashFunction::Crc32),
            _ => None,
        }
    }
}

/// A site's hash balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashBalance {
    pub key: HashKey,
    /// `hash-type consistent` (else map-based).
    pub consistent: bool,
    pub function: HashFunction,
    pub avalanche: bool,
    /// `hash-balance-factor` (consistent only; `None` = off).
    pub balance_factor: Option<u32>,
    /// The loads the bound compares (`bound_load`).
    pub bound_load: BoundLoad,
}

/// What a bounded-load hash counts as a node's load (`[site.hash]
/// bound_load`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BoundLoad {
    /// The work the node's window publishes (busy workers plus queue, from
    /// every proxy), or this proxy's in-flight requests when more: N
    /// proxies count each other's requests (docs/benchmarks.md, "Bounded-load
    /// hashing with 4 proxies": with 4 proxies it let queues build, so it
    /// is not the default).
    Published,
    /// This proxy's in-flight requests only: HAProxy's semantics, where
    /// each proxy bounds its own share. The default: with 4 proxies it
    /// kept the busiest node as close to the mean as 4 HAProxy did, with
    /// a p99 far below the published count's.
    #[default]
    Own,
}

/// How the persistence cookie is carried (HAProxy's `cookie` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieMode {
    /// The proxy sets the cookie on responses from a node it chose.
    Insert,
    /// The node sets the cookie; the proxy replaces its value.
    Rewrite,
    /// The node sets the cookie; the proxy prefixes its value with
    /// `NODE~` and strips it on the way in.
    Prefix,
    /// The node sets the cookie with its own value; the proxy only reads
    /// it (HAProxy's `cookie NAME` without a mode).
    Passive,
}

/// A site's sticky sessions (`[site.sticky]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sticky {
    pub cookie: String,
    pub mode: CookieMode,
    pub indirect: bool,
    pub nocache: bool,
    pub httponly: bool,
    pub secure: bool,
    pub maxidle: Option<Duration>,
    pub maxlife: Option<Duration>,
    pub domains: Vec<String>,
    /// The load bound (beyond HAProxy): a session leaves its node when the
    /// node's load index stays above this for `max_load_for`, or the node
    /// drains. `None`: HAProxy's stickiness.
    pub max_load: Option<f64>,
    /// How long the load index must stay above `max_load` (default
    /// 250 ms).
    pub max_load_for: Duration,
}

/// What `[[site]] balance` and `[site.hash]` say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SiteBalance {
    /// A policy of `global.balance`'s list; `None`: the global one.
    pub policy: Option<Balance>,
    /// A hash key instead of a policy.
    pub hash: Option<HashBalance>,
}

/// Validates a site's `balance` and `[site.hash]` under `key` (`site[N]`).
pub fn site_balance(
    c: &mut ConfigCheck,
    key: &str,
    balance: Option<&str>,
    raw: Option<RawHash>,
) -> SiteBalance {
    let Some(name) = balance else {
        if raw.is_some() {
            c.add(
                format!("{key}.hash"),
                format!(
                    "set without a hash balance (expected {key}.balance = one of {})",
                    hash_names()
                ),
            );
        }
        return SiteBalance::default();
    };
    if let Some(b) = Balance::parse(name) {
        if raw.is_some() {
            c.add(
                format!("{key}.hash"),
                format!("set with balance = \"{name}\", which does not hash (expected balance = one of {})", hash_names()),
            );
        }
        return SiteBalance {
            policy: Some(b),
            hash: None,
        };
    }
    if !HashKey::NAMES.contains(&name) {
        c.add(
            format!("{key}.balance"),
            format!(
                "`{name}` is not a balancing algorithm (expected {} or a hash key: {})",
                Balance::ACCEPTED,
                hash_names()
            ),
        );
        return SiteBalance::default();
    }
    let raw = raw.unwrap_or_default();
    SiteBalance {
        policy: None,
        hash: Some(hash_balance(c, &format!("{key}.hash"), name, raw)),
    }
}

fn hash_names() -> String {
    HashKey::NAMES
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn hash_balance(c: &mut ConfigCheck, key: &str, name: &str, raw: RawHash) -> HashBalance {
    misplaced_options(c, key, name, &raw);
    let hash_key = hash_key(c, key, name, &raw);
    let consistent = match raw.kind.as_deref() {
        None | Some("map-based") => false,
        Some("consistent") => true,
        Some(other) => {
            c.add(
                format!("{key}.type"),
                format!("`{other}` is not a hash type (expected \"map-based\" or \"consistent\")"),
            );
            false
        }
    };
    let function = match raw.function.as_deref() {
        None => HashFunction::Sdbm,
        Some(f) => HashFunction::parse(f).unwrap_or_else(|| {
            c.add(
                format!("{key}.function"),
                format!(
                    "`{f}` is not a hash function (expected {})",
                    HashFunction::ACCEPTED
                ),
            );
            HashFunction::Sdbm
        }),
    };
    let (balance_factor, bound_load) = bound(c, key, &raw, consistent);
    HashBalance {
        key: hash_key,
        consistent,
        function,
        // HAProxy: `hash-type consistent` without a function is sdbm with
        // avalanche.
        avalanche: raw
            .avalanche
            .unwrap_or(consistent && raw.function.is_none()),
        balance_factor,
        bound_load,
    }
}

/// Options that belong to another key's hash are errors, not silently
/// unused.
fn misplaced_options(c: &mut ConfigCheck, key: &str, name: &str, raw: &RawHash) {
    let owned: [(&str, bool, &str); 8] = [
        ("whole", raw.whole.is_some(), "uri"),
        ("path_only", raw.path_only.is_some(), "uri"),
        ("len", raw.len.is_some(), "uri"),
        ("depth", raw.depth.is_some(), "uri"),
        ("header", raw.header.is_some(), "hdr"),
        ("use_domain_only", raw.use_domain_only.is_some(), "hdr"),
        ("param", raw.param.is_some(), "url_param"),
        ("cookie", raw.cookie.is_some(), "cookie"),
    ];
    for (field, set, owner) in owned {
        if set && owner != name {
            c.add(
                format!("{key}.{field}"),
                format!(
                    "only applies to balance = \"{owner}\" (this site has balance = \"{name}\")"
                ),
            );
        }
    }
}

/// What the hash of `balance = name` reads from a request.
fn hash_key(c: &mut ConfigCheck, key: &str, name: &str, raw: &RawHash) -> HashKey {
    let required = |c: &mut ConfigCheck, field: &str, v: Option<String>, what: &str, e: &str| {
        match v.filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_graphic())) {
            Some(v) => v,
            None => {
                c.add(
                    format!("{key}.{field}"),
                    format!("missing or empty: balance = \"{name}\" hashes {what} (expected e.g. {field} = \"{e}\")"),
                );
                String::new()
            }
        }
    };
    match name {
        "source" => HashKey::Source,
        "uri" => HashKey::Uri {
            whole: raw.whole.unwrap_or(false),
            path_only: raw.path_only.unwrap_or(false),
            len: c.int(&format!("{key}.len"), raw.len, 0, 1, 1 << 20) as usize,
            depth: c.int(&format!("{key}.depth"), raw.depth, 0, 1, 1 << 10) as usize,
        },
        "hdr" => {
            let text = required(
                c,
                "header",
                raw.header.clone(),
                "a request header",
                "x-tenant",
            );
            let name = http::HeaderName::from_bytes(text.as_bytes()).unwrap_or_else(|_| {
                if !text.is_empty() {
                    c.add(
                        format!("{key}.header"),
                        format!("`{text}` is not a header name (expected e.g. \"host\")"),
                    );
                }
                http::header::HOST
            });
            HashKey::Header {
                name,
                domain_only: raw.use_domain_only.unwrap_or(false),
            }
        }
        "url_param" => HashKey::UrlParam(required(
            c,
            "param",
            raw.param.clone(),
            "a query parameter",
            "uid",
        )),
        _ => HashKey::Cookie(required(
            c,
            "cookie",
            raw.cookie.clone(),
            "a cookie",
            "session",
        )),
    }
}

/// The bound of a consistent hash (`balance_factor`, HAProxy's
/// hash-balance-factor) and what it counts (`bound_load`).
fn bound(
    c: &mut ConfigCheck,
    key: &str,
    raw: &RawHash,
    consistent: bool,
) -> (Option<u32>, BoundLoad) {
    let balance_factor = match raw.balance_factor {
        None | Some(0) => None,
        Some(f) if (100..=65535).contains(&f) => {
            if !consistent {
                c.add(
                    format!("{key}.balance_factor"),
                    "only applies to type = \"consistent\" (HAProxy's hash-balance-factor bounds the consistent hash)",
                );
            }
            Some(f as u32)
        }
        Some(f) => {
            c.add(
                format!("{key}.balance_factor"),
                format!(
                    "{f} is out of range (expected 0 for off, or a percentage from 100 to 65535)"
                ),
            );
            None
        }
    };
    let bound_load = match raw.bound_load.as_deref() {
        None | Some("own") => BoundLoad::Own,
        Some("published") => BoundLoad::Published,
        Some(other) => {
            c.add(
                format!("{key}.bound_load"),
                format!("`{other}` is not a bound load (expected \"own\" or \"published\")"),
            );
            BoundLoad::Own
        }
    };
    if raw.bound_load.is_some() && balance_factor.is_none() {
        c.add(
            format!("{key}.bound_load"),
            "only applies with a balance_factor (it says what the bound counts)",
        );
    }
    (balance_factor, bound_load)
}

/// Validates `[site.sticky]` under `key` (`site[N].sticky`).
pub fn sticky(c: &mut ConfigCheck, key: &str, raw: RawSticky) -> Sticky {
    let cookie = match raw.cookie {
        Some(n) if valid_cookie_name(&n) => n,
        Some(n) => {
            c.add(
                format!("{key}.cookie"),
                format!("`{n}` is not a cookie name (expected a token such as \"SRV\")"),
            );
            String::new()
        }
        None => {
            c.add(
                format!("{key}.cookie"),
                "missing: the name of the cookie that pins a client to a node (expected e.g. cookie = \"SRV\")",
            );
            String::new()
        }
    };
    let mode = match raw.mode.as_deref() {
        None | Some("insert") => CookieMode::Insert,
        Some("rewrite") => CookieMode::Rewrite,
        Some("prefix") => CookieMode::Prefix,
        Some("passive") => CookieMode::Passive,
        Some(other) => {
            c.add(
                format!("{key}.mode"),
                format!("`{other}` is not a cookie mode (expected \"insert\", \"rewrite\", \"prefix\" or \"passive\")"),
            );
            CookieMode::Insert
        }
    };
    let dated = |c: &mut ConfigCheck, field: &str, v: Option<String>| {
        let v = v?;
        if mode != CookieMode::Insert {
            c.add(
                format!("{key}.{field}"),
                "only applies to mode = \"insert\" (the dates are kept in the inserted cookie)",
            );
        }
        Some(c.duration(&format!("{key}.{field}"), Some(&v), Duration::from_secs(1)))
    };
    let maxidle = dated(c, "maxidle", raw.maxidle);
    let maxlife = dated(c, "maxlife", raw.maxlife);
    for d in &raw.domain {
        if d.is_empty()
            || !d
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
        {
            c.add(
                format!("{key}.domain"),
                format!("`{d}` is not a domain (expected e.g. \".example.com\")"),
            );
        }
    }
    let max_load = match raw.max_load {
        None => None,
        Some(l) if l.is_finite() && l > 0.0 && l <= 1.0 => Some(l),
        Some(l) => {
            c.add(
                format!("{key}.max_load"),
                format!(
                    "{l} is not a load index (expected a number above 0 and at most 1, e.g. 0.9)"
                ),
            );
            None
        }
    };
    if raw.max_load_for.is_some() && max_load.is_none() {
        c.add(
            format!("{key}.max_load_for"),
            "set without max_load (expected max_load = 0.9, say, for the bound it holds)",
        );
    }
    let max_load_for = c.duration_within(
        &format!("{key}.max_load_for"),
        raw.max_load_for.as_deref(),
        // The measured winner against a co-tenant whose busy periods last
        // about a second (docs/balancing.md, "The load bound").
        Duration::from_millis(250),
        Duration::from_millis(1),
        Duration::from_secs(3600),
    );
    Sticky {
        cookie,
        mode,
        indirect: raw.indirect.unwrap_or(false),
        nocache: raw.nocache.unwrap_or(false),
        httponly: raw.httponly.unwrap_or(false),
        secure: raw.secure.unwrap_or(false),
        maxidle,
        maxlife,
        domains: raw.domain,
        max_load,
        max_load_for,
    }
}

/// A cookie name: an RFC 6265 token.
fn valid_cookie_name(n: &str) -> bool {
    !n.is_empty()
        && n.bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
}

/// Validates a node's `cookie` value (what its sticky cookie carries).
pub fn node_cookie(c: &mut ConfigCheck, key: &str, v: Option<String>) -> Option<String> {
    let v = v?;
    if v.is_empty()
        || !v
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b";,\"\\|~".contains(&b))
    {
        c.add(
            key,
            format!("`{v}` is not a cookie value (expected letters, digits or punctuation other than ; , \" \\ | ~)"),
        );
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests;
