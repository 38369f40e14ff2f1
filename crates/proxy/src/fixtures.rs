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
