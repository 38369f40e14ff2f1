//! What the mapping builds, shared by its parts: the sites made from
//! backends ([`Site`]), HAProxy's rules in order ([`Routed`]), and the
//! names and quoting of the TOML written.

use super::acl::{self, Area};
use super::sections::Proxy;

/// A site being built: its backend, hosts and path prefixes ("" = all).
pub(super) struct Site<'a> {
    pub name: String,
    pub backend: &'a Proxy,
    pub pairs: Vec<(String, String)>,
    pub hosts: Vec<String>,
    pub paths: Vec<String>,
    /// The first rule reaching it (else its section's line), for notes.
    pub line: usize,
}

/// One rule of the merged routing table, in HAProxy's order.
pub(super) struct Routed {
    pub line: usize,
    pub backend: String,
    pub areas: Vec<Area>,
    /// HAProxy's own condition, when made of host and path tests only.
    pub exact: Option<acl::Exact>,
    /// Negations or `unless` left out of `areas`.
    pub left_out: Vec<String>,
}

/// Site and node names: HAProxy allows `:` too, rdmalb does not.
pub(super) fn site_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if rdmalb_base::name::is_name_char(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The site made from backend `name`: [`site_name`], with `-site` added
/// to a name rdmalb reserves (`idle` names the idle pool; a site called
/// that would never be routed to).
pub(super) fn backend_site_name(name: &str) -> String {
    let site = site_name(name);
    if rdmalb_window::role::is_reserved_site_name(&site) {
        format!("{site}-site")
    } else {
        site
    }
}

pub(super) fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
