//! The reference against the validator: the same top-level keys, a text and
//! an example for every key, and every literal default really the default.

use std::collections::BTreeSet;
use std::path::Path;

use rdmalb_base::reference::{self, Reference};

use super::schema;
use crate::config::raw::TOP_LEVEL_KEYS;

fn built() -> Reference {
    reference::build(&schema())
}

#[test]
fn top_level_keys_are_the_sections_the_validator_reads() {
    let validator: BTreeSet<String> = TOP_LEVEL_KEYS
        .iter()
        .chain(crate::rules::config::KEYS)
        .map(|k| k.to_string())
        .collect();
    assert_eq!(reference::top_level_names(&built()), validator);
}

#[test]
fn every_key_has_a_text_and_an_example() {
    let r = built();
    let bare: Vec<&str> = r
        .keys()
        .filter(|k| k.doc.is_empty() || (k.example.is_none() && k.literal_default().is_none()))
        .map(|k| k.path.as_str())
        .collect();
    assert!(
        bare.is_empty(),
        "keys without a doc comment or an example: {bare:?}"
    );
    // Examples are TOML values (the reference writes `key = example`).
    for k in r.keys() {
        if let Some(e) = &k.example {
            assert!(
                reference::parse_value(e).is_some(),
                "{}: example `{e}` is not TOML",
                k.path
            );
        }
    }
}

/// A config that sets every table the reference has, with the fewest keys
/// that make each valid, so that each documented default can be written
/// into it.
fn base(dir: &Path) -> toml::Table {
    let psk = dir.join("cluster.psk");
    rdmalb_window::Psk::generate().write_new_file(&psk).unwrap();
    std::fs::write(dir.join("hosts.map"), "www.example.com www\n").unwrap();
    std::fs::write(dir.join("office.lst"), "192.0.2.0/24\n").unwrap();
    let text = format!(
        r#"
[global]
[timeouts]
[limits]
[health]
[admin]
listen = "127.0.0.1:9100"
[cluster]
psk_file = "{psk}"
[weights]
[routing]
[reconfig]
[qos]
[acme]
storage = "{dir}/acme"
[acme.on_demand]
ask = "http://127.0.0.1:9000/allowed"

[[listener]]
listen = "127.0.0.1:8080"
monitor_uri = "/up"
monitor_fail = {{ site = "www" }}
[[listener]]
listen = "127.0.0.1:8443"
tls = {{}}

[[site]]
name = "www"
hosts = ["www.example.com"]
acme = true
weights = {{}}
compression = {{}}
[[site]]
name = "shop"
hosts = ["shop.example.com"]
balance = "uri"
hash = {{ type = "consistent", balance_factor = 150 }}
[[site]]
name = "blog"
hosts = ["blog.example.com"]
sticky = {{ cookie = "SRV", max_load = 0.9 }}
[[site]]
name = "api"
hosts = ["api.example.com"]
balance = "hdr"
hash = {{ header = "x-user" }}
[[site]]
name = "ruled"
[[site_rule]]
site = "ruled"
if = "admin_path"

[[node]]
name = "n1"
address = "127.0.0.1:9001"
site = "www"
agent_port = 9999
[[node]]
name = "n2"
address = "127.0.0.1:9002"
[[node]]
name = "n3"
address = "127.0.0.1:9003"
site = "shop"
[[node]]
name = "n4"
address = "127.0.0.1:9004"
site = "blog"
cookie = "n4"

[[stats_socket]]
path = "{dir}/admin.sock"

[[acl]]
name = "admin_path"
fetch = "path"
values = ["/admin"]
[[acl]]
name = "office"
fetch = "src"
file = "{dir}/office.lst"
[[map]]
name = "hosts"
file = "{dir}/hosts.map"
[[userlist]]
name = "admins"
users = [{{ name = "ann", insecure_password = "secret" }}]
[[request_rule]]
action = "redirect"
location = "/"
if = "admin_path"
[[response_rule]]
action = "set-header"
name = "x-served"
value = "rdmalb"
[[stick_table]]
name = "per_ip"
key = "string"
size = 1000
expire = "1m"
[stick_share]
listen = "127.0.0.1:7400"
peers = ["127.0.0.1:7401"]
key_file = "{psk}"
"#,
        psk = psk.display(),
        dir = dir.display(),
    );
    text.parse().unwrap()
}

/// `base` with `value` written at `path`, once for every entry of an array
/// of tables where the key's table exists and the key is not set (the
/// first such place only for plain tables).
fn places(base: &toml::Table, path: &str, value: &toml::Value) -> Vec<toml::Table> {
    let mut out = Vec::new();
    let mut masked = base.clone();
    // Mask the entries already tried so `with_key` moves on to the next.
    while let Some(with) = reference::with_key(&masked, path, value.clone()) {
        assert!(
            out.len() < 64,
            "{path}: more places than the base config has tables"
        );
        let (first, _) = path.split_once('.').unwrap_or((path, ""));
        let index = match (masked.get(first), with.get(first)) {
            (Some(toml::Value::Array(a)), Some(toml::Value::Array(b))) => {
                a.iter().zip(b).position(|(x, y)| x != y)
            }
            _ => None,
        };
        // The same write, on the real base.
        let mut real = base.clone();
        match index {
            Some(i) => {
                if let (Some(toml::Value::Array(r)), Some(toml::Value::Array(w))) =
                    (real.get_mut(first), with.get(first))
                {
                    r[i] = w[i].clone();
                }
                out.push(real);
                if let Some(toml::Value::Array(m)) = masked.get_mut(first) {
                    // Not a table: `with_key` skips it.
                    m[i] = toml::Value::Integer(0);
                }
            }
            None => {
                out.push(with);
                break;
            }
        }
    }
    out
}

/// Writing a key's documented default changes nothing: the validated
/// config is the same as without it.
#[test]
fn every_literal_default_is_the_validators_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rdmalb.toml");
    let base = base(dir.path());
    let validate = |t: &toml::Table| crate::config::parse(&toml::to_string(t).unwrap(), &file);
    let without = match validate(&base) {
        Ok(c) => reference::sorted_debug(&c),
        Err(e) => panic!("the base config is not valid: {e}"),
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for key in built().keys() {
        let Some(default) = key.literal_default() else {
            continue;
        };
        let value = reference::parse_value(default).unwrap();
        let places = places(&base, &key.path, &value);
        if places.is_empty() {
            problems.push(format!("{}: the base config has no place for it", key.path));
            continue;
        }
        // Some place where the key applies (a hash key's option under its
        // own `balance`): there, writing the default changes nothing.
        let mut outcomes = Vec::new();
        for with in &places {
            match validate(with) {
                Ok(c) if reference::sorted_debug(&c) == without => {
                    outcomes.clear();
                    break;
                }
                Ok(_) => outcomes.push(format!("{} = {default} is not the default", key.path)),
                Err(e) => outcomes.push(format!("{} = {default} is refused: {e}", key.path)),
            }
        }
        match outcomes.first() {
            None => checked += 1,
            Some(first) => problems.push(first.clone()),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 80, "only {checked} defaults checked");
}

/// The example file's keys are all in the reference (scripts/docs-check.sh
/// checks every conf/ file; this keeps the check itself honest).
#[test]
fn a_misspelt_key_is_reported_and_a_valid_file_is_not() {
    let s = schema();
    let r = built();
    let conf = include_str!("../../../../../conf/rdmalb.toml");
    assert_eq!(r.unknown_keys(&s, conf).unwrap(), Vec::<String>::new());
    let bad = conf.replacen("passive_failures = 3", "passive_failure = 3", 1);
    assert_eq!(
        r.unknown_keys(&s, &bad).unwrap(),
        ["health.passive_failure"]
    );
}
