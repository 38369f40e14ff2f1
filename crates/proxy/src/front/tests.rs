//! What a reload cannot apply: named in its warning.

use super::*;

fn text(acme: &str, site_acme: bool) -> String {
    let mut text = String::from("[[listener]]\nname = \"web\"\nlisten = \"127.0.0.1:0\"\n");
    text.push_str(acme);
    text.push_str(&crate::fixtures::site("shop", &["shop.test"]));
    text.push_str(&format!("acme = {site_acme}\n"));
    text.push_str(&crate::fixtures::node("a", "127.0.0.1:1", "shop"));
    text
}

fn config(acme: &str, site_acme: bool) -> Config {
    crate::fixtures::config(&text(acme, site_acme))
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

#[test]
fn a_reload_that_adds_a_site_without_acme_needs_no_restart() {
    let before = config("", false);
    let mut file = text("", false);
    file.push_str(&crate::fixtures::site("blog", &["blog.test"]));
    file.push_str(&crate::fixtures::node("b", "127.0.0.1:2", "blog"));
    assert!(restart_only_changes(&before, &crate::fixtures::config(&file)).is_empty());
}
