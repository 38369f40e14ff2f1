//! Test fixtures shared by the unit tests of every room of the proxy:
//! config text in, a validated [`Config`] out, and the tables test configs
//! are built from.

use std::fmt::Display;
use std::path::Path;

use crate::config::Config;

/// Validates test config `text`, panicking with every problem found (the
/// messages name the key and what would be accepted).
pub fn config(text: &str) -> Config {
    crate::config::parse(text, Path::new("test.toml")).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts that validating `text` fails with a problem whose key contains
/// `key` and whose message contains `needle`, and that the messages name
/// the file.
pub fn rejects(text: &str, key: &str, needle: &str) {
    rejects_where(text, key, needle, |k| k.contains(key));
}

/// [`rejects`] with the key matched exactly.
pub fn rejects_at(text: &str, key: &str, needle: &str) {
    rejects_where(text, key, needle, |k| k == key);
}

fn rejects_where(text: &str, key: &str, needle: &str, key_matches: impl Fn(&str) -> bool) {
    let err =
        crate::config::parse(text, Path::new("test.toml")).expect_err("config should be rejected");
    assert!(
        err.problems
            .iter()
            .any(|p| key_matches(&p.key) && p.message.contains(needle)),
        "expected a problem at `{key}` mentioning `{needle}`, got:\n{err}"
    );
    assert!(
        err.to_string().contains("test.toml"),
        "message names the file"
    );
}

/// A `[[node]]` table: `name` at `address`, configured for `site`.
pub fn node(name: &str, address: impl Display, site: &str) -> String {
    format!("\n[[node]]\nname = \"{name}\"\naddress = \"{address}\"\nsite = \"{site}\"\n")
}

/// A `[[site]]` table answering for `hosts`.
pub fn site(name: &str, hosts: &[&str]) -> String {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    format!(
        "\n[[site]]\nname = \"{name}\"\nhosts = [{}]\n",
        hosts.join(", ")
    )
}

/// Polls `cond` every 10 ms for up to 20 s (a bound on how long a broken
/// test may hang, not a timing claim), then fails naming `what`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// `[site.sticky]` with cookie `SRV` in `mode` and every option off.
pub fn sticky(mode: crate::config::CookieMode) -> crate::config::Sticky {
    crate::config::Sticky {
        cookie: "SRV".into(),
        mode,
        indirect: false,
        nocache: false,
        httponly: false,
        secure: false,
        maxidle: None,
        maxlife: None,
        domains: Vec::new(),
        max_load: None,
        max_load_for: std::time::Duration::from_secs(2),
    }
}
