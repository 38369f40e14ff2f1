//! `[global]`: the proxy's id, the default balancing, the default site,
//! workers, shutdown grace, the access log, the forwarding headers and
//! retries.

use std::collections::HashMap;
use std::time::Duration;

use super::networks;
use crate::config::raw::RawGlobal;
use crate::config::types::*;
use rdmalb_base::problems::ConfigCheck;

/// Validates `[global]`; `default_site` must name one of `site_index`.
pub(super) fn global(
    c: &mut ConfigCheck,
    raw: RawGlobal,
    site_index: &HashMap<String, usize>,
) -> Global {
    let balance = match raw.balance.as_deref() {
        None => Balance::RoundRobin,
        Some(b) => Balance::parse(b).unwrap_or_else(|| {
            c.add(
                "global.balance",
                format!(
                    "`{b}` is not a balancing algorithm (expected {})",
                    Balance::ACCEPTED
                ),
            );
            Balance::RoundRobin
        }),
    };
    let default_site = raw.default_site.as_deref().and_then(|s| {
        let idx = site_index.get(s).copied();
        if idx.is_none() {
            c.add(
                "global.default_site",
                format!("no site named `{s}` (expected the name of a [[site]])"),
            );
        }
        idx
    });
    let (forwarded_for, trusted_proxies) = forwarding(c, &raw);
    let retry_on = retry_on(c, raw.retry_on.as_deref());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Global {
        proxy_id: c.int("global.proxy_id", raw.proxy_id, 1, 1, 65535) as u16,
        balance,
        default_site,
        workers: c.int("global.workers", raw.workers, cpus as u64, 1, 1024) as usize,
        shutdown_grace: c.duration(
            "global.shutdown_grace",
            raw.shutdown_grace.as_deref(),
            Duration::from_secs(10),
        ),
        access_log: match raw.access_log.as_deref() {
            None | Some("stdout") => AccessLog::Stdout,
            Some("off") => AccessLog::Off,
            Some("") => {
                c.add(
                    "global.access_log",
                    "empty (expected \"off\", \"stdout\" or a file path)",
                );
                AccessLog::Off
            }
            Some(p) => AccessLog::File(c.path(p)),
        },
        via_name: raw.via_name.unwrap_or_else(|| "rdmalb".to_string()),
        forwarded_for,
        trusted_proxies,
        retries: c.int("global.retries", raw.retries, 3, 0, MAX_RETRIES) as u8,
        retry_on,
        compression_max_cpu: c.int(
            "global.compression_max_cpu",
            raw.compression_max_cpu,
            90,
            1,
            100,
        ) as u32,
    }
}

/// `forwarded_for` and the `trusted_proxies` it reads.
fn forwarding(c: &mut ConfigCheck, raw: &RawGlobal) -> (ForwardedFor, Vec<IpNetwork>) {
    let forwarded_for = match raw.forwarded_for.as_deref() {
        None => ForwardedFor::Replace,
        Some(f) => ForwardedFor::parse(f).unwrap_or_else(|| {
            c.add(
                "global.forwarded_for",
                format!(
                    "`{f}` is not a choice (expected {})",
                    ForwardedFor::ACCEPTED
                ),
            );
            ForwardedFor::Replace
        }),
    };
    let trusted_proxies = networks(c, "global.trusted_proxies", raw.trusted_proxies.as_deref());
    if forwarded_for == ForwardedFor::Append && !trusted_proxies.is_empty() {
        c.add(
            "global.trusted_proxies",
            "has no effect with global.forwarded_for = \"append\", which keeps every client's X-Forwarded-For (expected no trusted_proxies, or forwarded_for = \"replace\")",
        );
    }
    (forwarded_for, trusted_proxies)
}

/// `retry_on`: HAProxy's `retry-on` keywords.
fn retry_on(c: &mut ConfigCheck, list: Option<&[String]>) -> RetryOn {
    let Some(list) = list else {
        return RetryOn::DEFAULT;
    };
    let mut on = RetryOn {
        conn_failure: false,
        empty_response: false,
    };
    for (i, k) in list.iter().enumerate() {
        if !on.set(k) {
            c.add(
                format!("global.retry_on[{i}]"),
                format!(
                    "`{k}` is not a retry condition (expected {}; [] retries nothing)",
                    RetryOn::ACCEPTED
                ),
            );
        }
    }
    on
}
