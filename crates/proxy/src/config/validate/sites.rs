//! `[[site]]`: each site's name, the hosts and path prefixes routed to it
//! (no host and prefix routed to two sites), its reconfiguration bounds,
//! and the settings where a site's own wins over the global one
//! ([`Defaults`]).

use std::collections::HashMap;

use super::{host_pattern, http_path, pattern_text, valid_name, weights};
use crate::config::raw::RawSite;
use crate::config::types::*;
use rdmalb_base::problems::ConfigCheck;

/// Most sites: the window has 64 site slots.
const MAX_SITES: usize = 64;

/// What a site takes from the rest of the file unless it sets its own.
pub(super) struct Defaults<'a> {
    /// `[weights]`.
    pub weights: LoadWeights,
    /// `[health] path`.
    pub health_path: &'a str,
    /// The file has an `[acme]` section.
    pub acme: bool,
}

/// Validates every `[[site]]`: the sites, and their index by name.
pub(super) fn sites(
    c: &mut ConfigCheck,
    table: &toml::Table,
    raw: Vec<Option<RawSite>>,
    defaults: &Defaults,
) -> (Vec<Site>, HashMap<String, usize>) {
    let mut sites: Vec<Site> = Vec::new();
    let mut site_index: HashMap<String, usize> = HashMap::new();
    let mut host_routes: HashMap<(HostPattern, String), String> = HashMap::new();
    if raw.is_empty() && !table.contains_key("site") {
        c.add(
            "site",
            "no site (add at least one [[site]] with a name and hosts)",
        );
    }
    // A site only `[[site_rule]]`s route to needs no hosts.
    let hosts_needed = !table.contains_key("site_rule");
    for (i, s) in raw.into_iter().enumerate() {
        let Some(s) = s else { continue };
        let Some(name) = name(c, i, s.name.clone(), &site_index) else {
            continue;
        };
        let key = format!("site[{i}] ({name})");
        let (hosts, path_prefixes) = routes(c, &key, &s, hosts_needed);
        for (host, prefix) in route_keys(&hosts, &path_prefixes) {
            if let Some(other) = host_routes.insert((host.clone(), prefix.clone()), name.clone()) {
                c.add(
                    format!("{key}.hosts"),
                    format!(
                        "host {} with path prefix `{}` is already routed to site `{other}`",
                        pattern_text(&host),
                        if prefix.is_empty() { "/" } else { &prefix }
                    ),
                );
            }
        }
        let site = site(c, &key, name, s, hosts, path_prefixes, defaults);
        if sites.len() >= MAX_SITES {
            c.add(
                key.clone(),
                "too many sites (at most 64: the window has 64 site slots)",
            );
            continue;
        }
        site_index.insert(site.name.clone(), sites.len());
        sites.push(Site {
            index: sites.len(),
            ..site
        });
    }
    (sites, site_index)
}

/// The site's name: set, valid, not the idle pool's, not taken.
fn name(
    c: &mut ConfigCheck,
    i: usize,
    name: Option<String>,
    site_index: &HashMap<String, usize>,
) -> Option<String> {
    let key = format!("site[{i}].name");
    let name = match name {
        Some(n) if rdmalb_window::role::is_reserved_site_name(&n) => {
            c.add(
                key,
                format!("`{n}` is reserved: it names the idle pool (nodes no site uses); choose another name, e.g. `{n}-site`"),
            );
            return None;
        }
        Some(n) if valid_name(&n) => n,
        Some(n) => {
            c.add(
                key,
                format!("`{n}` is not a valid name (expected 1-64 characters from a-z, A-Z, 0-9, '-', '_', '.')"),
            );
            return None;
        }
        None => {
            c.add(key, "missing (every site needs a name)");
            return None;
        }
    };
    if site_index.contains_key(&name) {
        c.add(key, format!("site `{name}` is defined twice"));
        return None;
    }
    Some(name)
}

/// The site's host patterns and path prefixes.
fn routes(
    c: &mut ConfigCheck,
    key: &str,
    s: &RawSite,
    hosts_needed: bool,
) -> (Vec<HostPattern>, Vec<String>) {
    let mut hosts = Vec::new();
    if s.hosts.is_empty() && hosts_needed {
        c.add(
            format!("{key}.hosts"),
            "empty (expected host names such as [\"www.example.com\", \"*.example.com\"])",
        );
    }
    for (j, h) in s.hosts.iter().enumerate() {
        match host_pattern(h) {
            Ok(p) => hosts.push(p),
            Err(e) => c.add(format!("{key}.hosts[{j}]"), e),
        }
    }
    let mut path_prefixes = Vec::new();
    for (j, p) in s.path_prefixes.iter().enumerate() {
        if !p.starts_with('/') || p.contains(char::is_whitespace) {
            c.add(
                format!("{key}.path_prefixes[{j}]"),
                format!(
                    "`{p}` is not a path prefix (expected it to start with '/', e.g. \"/api/\")"
                ),
            );
        } else {
            path_prefixes.push(p.clone());
        }
    }
    (hosts, path_prefixes)
}

/// Every (host, prefix) the site is routed by; no prefix is `""`.
fn route_keys(hosts: &[HostPattern], prefixes: &[String]) -> Vec<(HostPattern, String)> {
    let prefixes = if prefixes.is_empty() {
        vec![String::new()]
    } else {
        prefixes.to_vec()
    };
    hosts
        .iter()
        .flat_map(|h| prefixes.iter().map(move |p| (h.clone(), p.clone())))
        .collect()
}

/// The rest of a site (its `index` set by the caller).
fn site(
    c: &mut ConfigCheck,
    key: &str,
    name: String,
    s: RawSite,
    hosts: Vec<HostPattern>,
    path_prefixes: Vec<String>,
    defaults: &Defaults,
) -> Site {
    let priority = c.int(&format!("{key}.priority"), s.priority, 0, 0, 1000) as u32;
    let guarantee = match s.guarantee {
        None => 0.0,
        Some(g) if g.is_finite() && g >= 0.0 => g,
        Some(g) => {
            c.add(
                format!("{key}.guarantee"),
                format!("{g} is not a rate (expected requests per second >= 0)"),
            );
            0.0
        }
    };
    let min_nodes = c.int(&format!("{key}.min_nodes"), s.min_nodes, 1, 0, 10_000) as usize;
    let max_nodes = c.int(&format!("{key}.max_nodes"), s.max_nodes, 10_000, 0, 10_000) as usize;
    if max_nodes < min_nodes {
        c.add(
            format!("{key}.max_nodes"),
            format!(
                "{max_nodes} is below min_nodes = {min_nodes} (expected max_nodes >= min_nodes)"
            ),
        );
    }
    let weights = match &s.weights {
        Some(w) => weights(c, &format!("{key}.weights"), w, defaults.weights),
        None => defaults.weights,
    };
    let health_path = match &s.health_path {
        Some(p) => http_path(c, &format!("{key}.health_path"), Some(p), "/"),
        None => defaults.health_path.to_string(),
    };
    let compression = s
        .compression
        .map(|raw| crate::config::compression::validate(c, &format!("{key}.compression"), raw));
    let balance = crate::config::balancing::site_balance(c, key, s.balance.as_deref(), s.hash);
    let sticky = s
        .sticky
        .map(|raw| crate::config::balancing::sticky(c, &format!("{key}.sticky"), raw));
    let acme_names = crate::config::acme::site_names(c, key, &hosts, s.acme.unwrap_or(false));
    if !acme_names.is_empty() && !defaults.acme {
        c.add(
            format!("{key}.acme"),
            "needs an [acme] section (expected [acme] with storage = \"/var/lib/rdmalb/acme\")",
        );
    }
    Site {
        index: 0,
        name,
        hosts,
        path_prefixes,
        priority,
        guarantee,
        min_nodes,
        max_nodes,
        weights,
        health_path,
        compression,
        balance,
        sticky,
        acme_names,
    }
}
