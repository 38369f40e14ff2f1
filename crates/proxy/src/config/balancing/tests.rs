//! `[[site]] balance`, `[site.hash]`, `[site.sticky]` and `[[node]] cookie`:
//! what each setting becomes, and one test per rejected value.

use super::*;
use crate::fixtures::{config as ok, rejects};

const BASE: &str = r#"
[global]
balance = "roundrobin"

[[listener]]
listen = "127.0.0.1:8080"

[[site]]
name = "shop"
hosts = ["shop.example.com"]
"#;

const NODE: &str = r#"
[[node]]
name = "n1"
address = "127.0.0.1:9001"
site = "shop"
"#;

fn site(extra: &str) -> String {
    format!("{BASE}{extra}\n{NODE}")
}

#[test]
fn a_site_without_balance_uses_the_global_one() {
    let c = ok(&site(""));
    assert_eq!(c.sites[0].balance, SiteBalance::default());
    assert!(c.sites[0].sticky.is_none());
    assert!(c.nodes[0].cookie.is_none());
}

#[test]
fn a_site_policy_overrides_the_global_one() {
    let c = ok(&site("balance = \"leastconn\""));
    assert_eq!(c.sites[0].balance.policy, Some(Balance::LeastConn));
    assert!(c.sites[0].balance.hash.is_none());
}

#[test]
fn hash_keys_and_their_options() {
    let c = ok(&site(
        "balance = \"uri\"\n[site.hash]\nwhole = true\nlen = 24\ndepth = 2\ntype = \"consistent\"\nfunction = \"wt6\"\nbalance_factor = 150",
    ));
    let h = c.sites[0].balance.hash.clone().unwrap();
    assert_eq!(
        h.key,
        HashKey::Uri {
            whole: true,
            path_only: false,
            len: 24,
            depth: 2
        }
    );
    assert!(h.consistent);
    assert_eq!(h.function, HashFunction::Wt6);
    assert!(!h.avalanche, "an explicit function has no avalanche");
    assert_eq!(h.balance_factor, Some(150));
    assert_eq!(h.bound_load, BoundLoad::Own, "the default");
    let c = ok(&site(
        "balance = \"uri\"\n[site.hash]\ntype = \"consistent\"\nbalance_factor = 125\nbound_load = \"published\"",
    ));
    assert_eq!(
        c.sites[0].balance.hash.clone().unwrap().bound_load,
        BoundLoad::Published
    );

    let c = ok(&site(
        "balance = \"hdr\"\n[site.hash]\nheader = \"X-Tenant\"\nuse_domain_only = true",
    ));
    let h = c.sites[0].balance.hash.clone().unwrap();
    assert_eq!(
        h.key,
        HashKey::Header {
            name: http::HeaderName::from_static("x-tenant"),
            domain_only: true
        }
    );
    assert!(!h.consistent, "map-based is HAProxy's default");

    let c = ok(&site(
        "balance = \"source\"\n[site.hash]\ntype = \"consistent\"",
    ));
    assert!(
        c.sites[0].balance.hash.as_ref().unwrap().avalanche,
        "consistent without a function: sdbm with avalanche, as HAProxy"
    );
    let c = ok(&site(
        "balance = \"url_param\"\n[site.hash]\nparam = \"uid\"",
    ));
    assert_eq!(
        c.sites[0].balance.hash.as_ref().unwrap().key,
        HashKey::UrlParam("uid".into())
    );
    let c = ok(&site(
        "balance = \"cookie\"\n[site.hash]\ncookie = \"session\"",
    ));
    assert_eq!(
        c.sites[0].balance.hash.as_ref().unwrap().key,
        HashKey::Cookie("session".into())
    );
}

#[test]
fn rejects_an_unknown_balance_naming_policies_and_keys() {
    rejects(
        &site("balance = \"sticky\""),
        "(shop).balance",
        "\"url_param\"",
    );
    rejects(
        &site("balance = \"sticky\""),
        "(shop).balance",
        "\"leastconn\"",
    );
}

#[test]
fn rejects_hash_options_without_a_hash_balance() {
    rejects(
        &site("[site.hash]\ntype = \"consistent\""),
        "(shop).hash",
        "without a hash balance",
    );
    rejects(
        &site("balance = \"random\"\n[site.hash]\ntype = \"consistent\""),
        "(shop).hash",
        "does not hash",
    );
}

#[test]
fn rejects_options_of_another_key() {
    rejects(
        &site("balance = \"source\"\n[site.hash]\nheader = \"host\""),
        "(shop).hash.header",
        "only applies to balance = \"hdr\"",
    );
    rejects(
        &site("balance = \"hdr\"\n[site.hash]\nheader = \"host\"\ndepth = 2"),
        "(shop).hash.depth",
        "balance = \"uri\"",
    );
}

#[test]
fn rejects_a_missing_key_name() {
    rejects(&site("balance = \"hdr\""), "(shop).hash.header", "missing");
    rejects(
        &site("balance = \"url_param\"\n[site.hash]\nparam = \"\""),
        "(shop).hash.param",
        "missing or empty",
    );
    rejects(
        &site("balance = \"cookie\""),
        "(shop).hash.cookie",
        "missing",
    );
    rejects(
        &site("balance = \"hdr\"\n[site.hash]\nheader = \"a:b\""),
        "(shop).hash.header",
        "not a header name",
    );
}

#[test]
fn rejects_bad_hash_type_function_and_factor() {
    rejects(
        &site("balance = \"source\"\n[site.hash]\ntype = \"ring\""),
        "(shop).hash.type",
        "\"consistent\"",
    );
    rejects(
        &site("balance = \"source\"\n[site.hash]\nfunction = \"md5\""),
        "(shop).hash.function",
        "\"crc32\"",
    );
    rejects(
        &site("balance = \"source\"\n[site.hash]\ntype = \"consistent\"\nbalance_factor = 50"),
        "(shop).hash.balance_factor",
        "from 100",
    );
    rejects(
        &site("balance = \"source\"\n[site.hash]\nbalance_factor = 150"),
        "(shop).hash.balance_factor",
        "type = \"consistent\"",
    );
    rejects(
        &site("balance = \"source\"\n[site.hash]\ntype = \"consistent\"\nbalance_factor = 125\nbound_load = \"mine\""),
        "(shop).hash.bound_load",
        "\"own\"",
    );
    rejects(
        &site("balance = \"source\"\n[site.hash]\ntype = \"consistent\"\nbound_load = \"own\""),
        "(shop).hash.bound_load",
        "balance_factor",
    );
    rejects(
        &site("balance = \"uri\"\n[site.hash]\nlen = 0"),
        "(shop).hash.len",
        "out of range",
    );
}

#[test]
fn sticky_settings() {
    let c = ok(&format!(
        "{BASE}[site.sticky]\ncookie = \"SRV\"\nindirect = true\nnocache = true\nhttponly = true\nsecure = true\nmaxidle = \"30m\"\nmaxlife = \"8h\"\ndomain = [\".example.com\"]\nmax_load = 0.9\nmax_load_for = \"5s\"\n{NODE}cookie = \"s1\"\n"
    ));
    let s = c.sites[0].sticky.clone().unwrap();
    assert_eq!(s.cookie, "SRV");
    assert_eq!(s.mode, CookieMode::Insert);
    assert!(s.indirect && s.nocache && s.httponly && s.secure);
    assert_eq!(s.maxidle, Some(Duration::from_secs(1800)));
    assert_eq!(s.maxlife, Some(Duration::from_secs(8 * 3600)));
    assert_eq!(s.domains, vec![".example.com".to_string()]);
    assert_eq!(s.max_load, Some(0.9));
    assert_eq!(s.max_load_for, Duration::from_secs(5));
    assert_eq!(c.nodes[0].cookie.as_deref(), Some("s1"));
}

#[test]
fn rejects_bad_sticky_values() {
    let sticky = |body: &str| format!("{BASE}[site.sticky]\n{body}\n{NODE}");
    rejects(
        &sticky("mode = \"insert\""),
        "(shop).sticky.cookie",
        "missing",
    );
    rejects(
        &sticky("cookie = \"a;b\""),
        "(shop).sticky.cookie",
        "not a cookie name",
    );
    rejects(
        &sticky("cookie = \"S\"\nmode = \"append\""),
        "(shop).sticky.mode",
        "\"prefix\"",
    );
    rejects(
        &sticky("cookie = \"S\"\nmode = \"prefix\"\nmaxidle = \"1m\""),
        "(shop).sticky.maxidle",
        "mode = \"insert\"",
    );
    rejects(
        &sticky("cookie = \"S\"\nmax_load = 1.5"),
        "(shop).sticky.max_load",
        "at most 1",
    );
    rejects(
        &sticky("cookie = \"S\"\nmax_load_for = \"2s\""),
        "(shop).sticky.max_load_for",
        "without max_load",
    );
    rejects(
        &sticky("cookie = \"S\"\ndomain = [\"a b\"]"),
        "(shop).sticky.domain",
        "not a domain",
    );
    rejects(
        &format!("{BASE}{NODE}cookie = \"a|b\"\n"),
        "(n1).cookie",
        "not a cookie value",
    );
}
