//! `[[listener]]`: the addresses served, their TLS, the PROXY protocol
//! they accept, and HAProxy's `monitor-uri`.

use std::collections::{HashMap, HashSet};

use super::endpoints::tls;
use super::networks;
use crate::config::raw::RawListener;
use crate::config::types::*;
use rdmalb_base::problems::ConfigCheck;

/// Validates every `[[listener]]`; `acme`: the file has an `[acme]`
/// section (a TLS listener may then have no certificate of its own).
pub(super) fn listeners(
    c: &mut ConfigCheck,
    table: &toml::Table,
    raw: Vec<Option<RawListener>>,
    acme: bool,
) -> Vec<Listener> {
    let mut listeners = Vec::new();
    let mut seen_listen = HashSet::new();
    if raw.is_empty() && !table.contains_key("listener") {
        c.add(
            "listener",
            "no listener (add at least one [[listener]] with listen = \"0.0.0.0:80\")",
        );
    }
    for (i, l) in raw.into_iter().enumerate() {
        let Some(l) = l else { continue };
        let key = format!("listener[{i}]");
        let Some(listen) = c.socket_addr(&format!("{key}.listen"), l.listen.as_deref()) else {
            continue;
        };
        if !seen_listen.insert(listen) {
            c.add(
                format!("{key}.listen"),
                format!("{listen} is used by another listener"),
            );
        }
        let tls = l.tls.map(|t| tls(c, &key, t, acme));
        let accept_proxy = l.accept_proxy.unwrap_or(false);
        let accept_proxy_from = accept_proxy_from(c, &key, accept_proxy, l.accept_proxy_from);
        let (monitor_uri, monitor_fail) = monitor(c, &key, l.monitor_uri, l.monitor_fail);
        listeners.push(Listener {
            name: l.name.unwrap_or_else(|| format!("listener{i}")),
            listen,
            tls,
            accept_proxy,
            accept_proxy_from,
            monitor_uri,
            monitor_fail,
        });
    }
    listeners
}

/// `accept_proxy_from`: needed with `accept_proxy`, meaningless without.
fn accept_proxy_from(
    c: &mut ConfigCheck,
    key: &str,
    accept_proxy: bool,
    list: Option<Vec<String>>,
) -> Vec<IpNetwork> {
    match (accept_proxy, &list) {
        (true, None) => {
            c.add(
                format!("{key}.accept_proxy_from"),
                "missing: accept_proxy trusts the client address a PROXY header claims, so name the peers allowed to send one (expected e.g. [\"10.0.0.0/8\"] for the load balancers in front; [\"0.0.0.0/0\", \"::/0\"] trusts any peer, as HAProxy's accept-proxy does)",
            );
            Vec::new()
        }
        (false, Some(_)) => {
            c.add(
                format!("{key}.accept_proxy_from"),
                "has no effect without accept_proxy = true (expected accept_proxy = true, or no accept_proxy_from)",
            );
            Vec::new()
        }
        (_, list) => networks(c, &format!("{key}.accept_proxy_from"), list.as_deref()),
    }
}

/// `monitor_uri` and `monitor_fail` (HAProxy's `monitor-uri`, `monitor
/// fail`); the site `monitor_fail` names is checked once the sites are
/// known ([`monitored_sites`]).
fn monitor(
    c: &mut ConfigCheck,
    key: &str,
    uri: Option<String>,
    fail: Option<crate::config::raw::RawMonitorFail>,
) -> (Option<String>, Option<MonitorFail>) {
    let monitor_uri = uri.filter(|u| {
        let ok = u.starts_with('/') && http::uri::PathAndQuery::try_from(u.as_str()).is_ok();
        if !ok {
            c.add(
                format!("{key}.monitor_uri"),
                format!("`{u}` is not a request path (expected one such as \"/haproxy_test\")"),
            );
        }
        ok
    });
    let monitor_fail = fail.and_then(|f| {
        let key = format!("{key}.monitor_fail");
        if monitor_uri.is_none() {
            c.add(
                &key,
                "has no effect without monitor_uri (expected a monitor_uri, or no monitor_fail)",
            );
        }
        let below = c.int(
            &format!("{key}.serving_below"),
            f.serving_below,
            1,
            1,
            1 << 20,
        );
        match f.site {
            Some(site) => Some(MonitorFail {
                site,
                serving_below: below as usize,
            }),
            None => {
                c.add(
                    key,
                    "missing `site` (expected { site = \"app\", serving_below = 1 })",
                );
                None
            }
        }
    });
    (monitor_uri, monitor_fail)
}

/// Every `monitor_fail.site` names a site.
pub(super) fn monitored_sites(
    c: &mut ConfigCheck,
    listeners: &[Listener],
    site_index: &HashMap<String, usize>,
) {
    for (i, l) in listeners.iter().enumerate() {
        if let Some(f) = l
            .monitor_fail
            .as_ref()
            .filter(|f| !site_index.contains_key(&f.site))
        {
            c.add(
                format!("listener[{i}].monitor_fail.site"),
                format!(
                    "no site named `{}` (expected one of the [[site]] names)",
                    f.site
                ),
            );
        }
    }
}
