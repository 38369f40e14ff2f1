//! The reference against the validator: the same top-level keys, a text and
//! an example for every key, and every literal default really the default.

use std::collections::BTreeSet;

use rdmalb_base::reference::{self, Reference};

use super::schema;
use crate::config::raw::{TOP_LEVEL_KEYS, WINDOW_KEYS};

fn built() -> Reference {
    reference::build(&schema())
}

#[test]
fn top_level_and_window_keys_are_the_validators() {
    let r = built();
    let validator: BTreeSet<String> = TOP_LEVEL_KEYS.iter().map(|k| k.to_string()).collect();
    assert_eq!(reference::top_level_names(&r), validator);
    let window: BTreeSet<String> = r
        .sections
        .iter()
        .filter_map(|s| s.path.strip_prefix("window."))
        .map(str::to_string)
        .collect();
    let expected: BTreeSet<String> = WINDOW_KEYS.iter().map(|k| k.to_string()).collect();
    assert_eq!(window, expected);
}

#[test]
fn every_key_has_a_text_and_an_example() {
    let bare: Vec<String> = built()
        .keys()
        .filter(|k| k.doc.is_empty() || (k.example.is_none() && k.literal_default().is_none()))
        .map(|k| k.path.clone())
        .collect();
    assert!(
        bare.is_empty(),
        "keys without a doc comment or an example: {bare:?}"
    );
}

/// Writing a key's documented default changes nothing.
#[test]
fn every_literal_default_is_the_validators_default() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("site.tpl"), "site {{site}}\n").unwrap();
    std::fs::write(d.join("idle.tpl"), "idle\n").unwrap();
    let file = d.join("sidecar.toml");
    let text = format!(
        r#"
node = "n1"
node_id = 1
sites = ["shop"]
state_file = "{dir}/n1.state"
[window.shm]
path = "/dev/shm/rdmalb-reference-test"
[[collector]]
kind = "system"
[admin]
listen = "127.0.0.1:9201"
[role]
file = "{dir}/app.conf"
reload = ["true"]
verify = "127.0.0.1:8081"
[role.idle]
template = "{dir}/idle.tpl"
[role.site.shop]
template = "{dir}/site.tpl"
hosts = ["shop.example.com"]
"#,
        dir = d.display()
    );
    let base: toml::Table = text.parse().unwrap();
    let validate =
        |t: &toml::Table| crate::config::validate::validate(&toml::to_string(t).unwrap(), &file);
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
        let Some(with) = reference::with_key(&base, &key.path, value) else {
            problems.push(format!("{}: the base config has no place for it", key.path));
            continue;
        };
        match validate(&with) {
            Ok(c) if reference::sorted_debug(&c) == without => checked += 1,
            Ok(_) => problems.push(format!("{} = {default} is not the default", key.path)),
            Err(e) => problems.push(format!("{} = {default} is refused: {e}", key.path)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 10, "only {checked} defaults checked");
}
