//! What a reload cannot apply: named in its warning.

use super::*;

fn config(acme: &str, site_acme: bool) -> Config {
    let mut text = String::from("[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n");
    text.push_str(acme);
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&format!("acme = {site_acme}\n"));
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:1", "shop"));
    crate::fixtures::config(&text)
}

#[test]
fn a_reload_that_changes_acme_says_it_needs_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let acme = |retry: &str| {
        format!(
            "[acme]\nstorage = \"{}\"\nretry_min = \"{retry}\"\n",
            dir.path().display()
        )
    };
    let before = config(&acme("1m"), true);
    assert!(restart_only_changes(&before, &config(&acme("1m"), true)).is_empty());
    let named = ["acme (the [acme] section or a site's acme)"];
    // The section's settings, a site's `acme`, the section removed.
    assert_eq!(
        restart_only_changes(&before, &config(&acme("5m"), true)),
        named
    );
    assert_eq!(
        restart_only_changes(&before, &config(&acme("1m"), false)),
        named
    );
    assert_eq!(restart_only_changes(&before, &config("", false)), named);
}
