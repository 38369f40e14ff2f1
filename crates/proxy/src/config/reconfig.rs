//! Validation of `[reconfig]` (raw → typed [`Reconfig`]): the agent's mode,
//! timing (S and T, seed 001 section 3.1.3-3.1.4), watermarks, the site-lock
//! lease, this proxy's own window and its peers.
//!
//! Every problem is reported with its key path, like the rest of the file.
//! Defaults are those of [`Reconfig::default`] and are documented in
//! `conf/rdmalb.toml`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use super::raw::{RawPeerProxy, RawProxyWindow, RawReconfig};
use super::types::*;
use super::validate::{window_endpoint, WindowAt};
use rdmalb_base::duration;
use rdmalb_base::problems::ConfigCheck;
use rdmalb_window::TransportKind;

/// Largest watermark accepted: site load counts queued work too, so it can
/// exceed 1.0, but not by orders of magnitude.
const MAX_WATERMARK: f64 = 100.0;

/// Validates `[reconfig]` against the rest of the file (`global.proxy_id`,
/// `cluster.psk_file`, the nodes' windows).
pub(super) fn validate(
    c: &mut ConfigCheck,
    raw: RawReconfig,
    global: &Global,
    cluster: &Cluster,
    nodes: &[Node],
) -> Reconfig {
    let mode = mode(c, raw.mode.as_deref());
    let mut r = Reconfig {
        mode,
        ..Reconfig::default()
    };
    timing(c, &raw, &mut r);
    watermarks_and_lock(c, &raw, &mut r);
    holds(c, &raw, &mut r);
    r.window = raw.window.map(|w| window(c, w)).unwrap_or_default();
    (r.peers, r.lock_home) = peers(c, raw.peer, raw.lock_home, global.proxy_id);
    keys_and_mode(c, &r, cluster, nodes);
    r
}

/// `mode`: rigid or reconfigure.
fn mode(c: &mut ConfigCheck, mode: Option<&str>) -> ReconfigMode {
    match mode {
        None | Some("rigid") => ReconfigMode::Rigid,
        Some("reconfigure") => ReconfigMode::Reconfigure,
        Some(m) => {
            c.add(
                "reconfig.mode",
                format!("`{m}` is not a mode (expected {})", ReconfigMode::ACCEPTED),
            );
            ReconfigMode::Rigid
        }
    }
}

/// The rounds (S, seed 001 section 3.1.3), the role poll and the history
/// (T, section 3.1.4) with its longest stretch.
fn timing(c: &mut ConfigCheck, raw: &RawReconfig, r: &mut Reconfig) {
    let d = Reconfig::default();
    let sensitivity = c.duration(
        "reconfig.sensitivity",
        raw.sensitivity.as_deref(),
        d.sensitivity,
    );
    let history = c.duration("reconfig.history", raw.history.as_deref(), d.history);
    // Unset, it is 10 ms or S if that is shorter; set, it must not exceed S.
    let role_poll = match raw.role_poll {
        None => d.role_poll.min(sensitivity),
        Some(_) => c.duration("reconfig.role_poll", raw.role_poll.as_deref(), d.role_poll),
    };
    if raw.role_poll.is_some() && role_poll > sensitivity {
        c.add(
            "reconfig.role_poll",
            format!(
                "{} is longer than reconfig.sensitivity = {} (expected role_poll <= sensitivity: routing must notice a moved node at least as soon as the agent)",
                duration::format(role_poll),
                duration::format(sensitivity)
            ),
        );
    }
    not_shorter(
        c,
        ("reconfig.history", history),
        ("reconfig.sensitivity", sensitivity),
        "a site must be seen hot in at least one round",
    );
    let history_max = c.duration(
        "reconfig.history_max",
        raw.history_max.as_deref(),
        history * 4,
    );
    not_shorter(
        c,
        ("reconfig.history_max", history_max),
        ("reconfig.history", history),
        "equal fixes T",
    );
    r.sensitivity = sensitivity;
    r.role_poll = role_poll;
    r.history = history;
    r.history_max = history_max;
}

/// The watermarks a site's load is judged by, and the site lock's lease
/// and clock skew.
fn watermarks_and_lock(c: &mut ConfigCheck, raw: &RawReconfig, r: &mut Reconfig) {
    let d = Reconfig::default();
    let high = watermark(
        c,
        "reconfig.high_watermark",
        raw.high_watermark,
        d.high_watermark,
    );
    let low = watermark(
        c,
        "reconfig.low_watermark",
        raw.low_watermark,
        d.low_watermark,
    );
    if low >= high {
        c.add(
            "reconfig.low_watermark",
            format!("{low} is not below high_watermark = {high} (expected low_watermark < high_watermark)"),
        );
    }
    let lock_lease = c.duration(
        "reconfig.lock_lease",
        raw.lock_lease.as_deref(),
        d.lock_lease,
    );
    let lock_skew = duration_or_zero(c, "reconfig.lock_skew", &raw.lock_skew, d.lock_skew);
    // Fencing (docs/reconfiguration.md, "Faults"): writes under a lock are
    // made only with one op timeout of lease left, and a lock is taken over
    // only after lease + skew, so skew must cover a write that lands late.
    if raw.lock_skew.is_some() && lock_skew < MIN_LOCK_SKEW {
        c.add(
            "reconfig.lock_skew",
            format!(
                "{} is shorter than one window operation timeout ({}): a write its holder started before the lease ran out could land after another proxy took the lock over (accepted: at least {}, plus the clock skew between proxies)",
                duration::format(lock_skew),
                duration::format(WINDOW_OP_TIMEOUT),
                duration::format(MIN_LOCK_SKEW)
            ),
        );
    }
    if raw.lock_lease.is_some() && lock_lease < MIN_LOCK_LEASE {
        c.add(
            "reconfig.lock_lease",
            format!(
                "{} leaves no room for a claim: under the lock the agent reads every node, then makes two writes that each need {} of lease left (accepted: at least {})",
                duration::format(lock_lease),
                duration::format(WINDOW_OP_TIMEOUT),
                duration::format(MIN_LOCK_LEASE)
            ),
        );
    }
    r.high_watermark = high;
    r.low_watermark = low;
    r.lock_lease = lock_lease;
    r.lock_skew = lock_skew;
}

/// How long moved nodes stay, return, are held for guarantees, and how
/// claims and switches are paced (each at least one round, S).
fn holds(c: &mut ConfigCheck, raw: &RawReconfig, r: &mut Reconfig) {
    let d = Reconfig::default();
    let sensitivity = r.sensitivity;
    let cooldown = duration_or_zero(c, "reconfig.cooldown", &raw.cooldown, d.cooldown);
    let manual_pin = match raw.manual_pin.as_deref() {
        Some("off") => Duration::ZERO,
        text => {
            let pin = c.duration("reconfig.manual_pin", text, d.manual_pin);
            if pin > Reconfig::MAX_MANUAL_PIN {
                c.add(
                    "reconfig.manual_pin",
                    format!(
                        "{} is longer than {} (release a node by hand with `release node`)",
                        duration::format(pin),
                        duration::format(Reconfig::MAX_MANUAL_PIN)
                    ),
                );
            }
            pin
        }
    };
    // Both are acted on once per round, so neither is shorter than S.
    let per_round = |c: &mut ConfigCheck, key: &str, text: Option<&str>, default: Duration| {
        let v = c.duration(key, text, default);
        not_shorter(
            c,
            (key, v),
            ("reconfig.sensitivity", sensitivity),
            "it is acted on once per round",
        );
        v
    };
    let loan_return = per_round_delay(
        c,
        "reconfig.loan_return",
        raw.loan_return.as_deref(),
        sensitivity,
        "since a site's coolness is seen once per round, or \"off\" to keep claimed nodes where they are",
    );
    let guarantee_hold = per_round_delay(
        c,
        "reconfig.guarantee_hold",
        raw.guarantee_hold.as_deref(),
        sensitivity,
        "since a site's need is seen once per round, or \"off\" for no reserve",
    );
    let guarantee_history = per_round_delay(
        c,
        "reconfig.guarantee_history",
        raw.guarantee_history.as_deref(),
        sensitivity,
        "since a site's guarantee is judged once per round, or \"off\" for a short site to wait for reconfig.history",
    );
    let claim_batch = c.int(
        "reconfig.claim_batch",
        raw.claim_batch,
        d.claim_batch as u64,
        1,
        64,
    ) as usize;
    let claim_horizon = match raw.claim_horizon.as_deref() {
        None => Delay::Default,
        Some("off") => Delay::Off,
        Some(text) => match duration::parse(text) {
            Ok(v) => Delay::Set(v),
            Err(e) => {
                c.add(
                    "reconfig.claim_horizon",
                    format!("{e} (expected a duration such as \"5s\", or \"off\" to claim whenever a site is hot)"),
                );
                Delay::Default
            }
        },
    };
    let switch_timeout = per_round(
        c,
        "reconfig.switch_timeout",
        raw.switch_timeout.as_deref(),
        d.switch_timeout,
    );
    let rollback_backoff_max = per_round(
        c,
        "reconfig.rollback_backoff_max",
        raw.rollback_backoff_max.as_deref(),
        d.rollback_backoff_max,
    );
    r.cooldown = cooldown;
    r.manual_pin = manual_pin;
    r.loan_return = loan_return;
    r.claim_horizon = claim_horizon;
    r.claim_batch = claim_batch;
    r.guarantee_hold = guarantee_hold;
    r.guarantee_history = guarantee_history;
    r.switch_timeout = switch_timeout;
    r.rollback_backoff_max = rollback_backoff_max;
}

/// `[reconfig.window]`: the window this proxy serves to its peers.
fn window(c: &mut ConfigCheck, w: RawProxyWindow) -> ProxyWindow {
    let shm = w.shm.as_deref().and_then(|p| {
        if p.starts_with('/') {
            Some(PathBuf::from(p))
        } else {
            c.add(
                "reconfig.window.shm",
                format!("`{p}` is not an absolute path (expected the window file, e.g. \"/dev/shm/rdmalb-proxy-1\")"),
            );
            None
        }
    });
    let tcp = w
        .tcp
        .is_some()
        .then(|| c.socket_addr("reconfig.window.tcp", w.tcp.as_deref()))
        .flatten();
    let verbs = w
        .verbs
        .is_some()
        .then(|| c.socket_addr("reconfig.window.verbs", w.verbs.as_deref()))
        .flatten();
    if w.shm.is_none() && w.tcp.is_none() && w.verbs.is_none() {
        c.add(
            "reconfig.window",
            "empty (expected `shm = \"/dev/shm/rdmalb-proxy-1\"` and/or `tcp = \"127.0.0.1:7101\"`, or `verbs = \"10.0.0.1:7102\"`)",
        );
    }
    if w.verbs.is_some() && (w.shm.is_some() || w.tcp.is_some()) {
        c.add(
            "reconfig.window.verbs",
            "set together with shm or tcp (expected verbs alone: peers over verbs change the window with the NIC's atomics, which are not atomic with the CPU atomics shm and tcp peers use)",
        );
    }
    if w.device.is_some() && w.verbs.is_none() {
        c.add(
            "reconfig.window.device",
            "set without `verbs` (expected it only with `verbs = \"host:port\"`)",
        );
    }
    ProxyWindow {
        shm,
        tcp,
        verbs,
        device: w.device,
    }
}

/// `[[reconfig.peer]]` and `lock_home`: the other proxies, and which
/// one's window holds the site locks.
fn peers(
    c: &mut ConfigCheck,
    raw: Vec<RawPeerProxy>,
    lock_home: Option<i64>,
    own: u16,
) -> (Vec<PeerProxy>, u16) {
    let mut ids = HashSet::from([own]);
    let mut peers = Vec::new();
    for (i, p) in raw.into_iter().enumerate() {
        if let Some(peer) = peer(c, &format!("reconfig.peer[{i}]"), p, &mut ids) {
            peers.push(peer);
        }
    }

    let lock_home = match lock_home {
        // The lowest id of the cluster, so every proxy agrees without
        // configuring it.
        None => ids.iter().copied().min().unwrap_or(own),
        Some(h) => match u16::try_from(h) {
            Ok(h) if ids.contains(&h) => h,
            _ => {
                let mut known: Vec<u16> = ids.iter().copied().collect();
                known.sort_unstable();
                c.add(
                    "reconfig.lock_home",
                    format!(
                        "{h} is not a proxy of this cluster (expected global.proxy_id or a reconfig.peer id: {})",
                        known.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
                    ),
                );
                own
            }
        },
    };
    (peers, lock_home)
}

/// Keyed transports need `cluster.psk_file`; "reconfigure" needs a
/// window to serve (with peers) and nodes it can move.
fn keys_and_mode(c: &mut ConfigCheck, r: &Reconfig, cluster: &Cluster, nodes: &[Node]) {
    let (window, peers, mode) = (&r.window, &r.peers, r.mode);
    let keyed = window.listeners().iter().any(|l| l.transport().needs_key())
        || peers.iter().any(|p| p.window.needs_key());
    if keyed && cluster.psk_file.is_none() {
        c.add(
            "cluster.psk_file",
            "missing: proxy windows use the tcp or verbs transport, which require authentication (expected the path of a pre-shared key file made by `rdmalb psk --out FILE`)",
        );
    }
    if mode == ReconfigMode::Reconfigure {
        if !peers.is_empty() && !window.is_served() {
            c.add(
                "reconfig.window",
                "missing: with peers, this proxy must serve a window (they take site locks on it and bump its update counters); set `shm` and/or `tcp`, or `verbs`",
            );
        }
        if !nodes.iter().any(|n| n.window.is_some()) {
            c.add(
                "reconfig.mode",
                "\"reconfigure\" needs nodes with a sidecar window (set `transport` and `sidecar` on the [[node]]s it may move), or use \"rigid\"",
            );
        }
    }
}

/// A per-round delay: unset is [`Delay::Default`], "off" is [`Delay::Off`],
/// else a duration of at least `sensitivity` (reported with `why`
/// otherwise).
fn per_round_delay(
    c: &mut ConfigCheck,
    key: &str,
    text: Option<&str>,
    sensitivity: Duration,
    why: &str,
) -> Delay {
    match text {
        None => Delay::Default,
        Some("off") => Delay::Off,
        Some(text) => match duration::parse(text) {
            Ok(v) if v >= sensitivity => Delay::Set(v),
            Ok(v) => {
                c.add(
                    key,
                    format!(
                        "{} is shorter than reconfig.sensitivity = {} (expected a duration of at least sensitivity, {why})",
                        duration::format(v),
                        duration::format(sensitivity)
                    ),
                );
                Delay::Default
            }
            Err(e) => {
                c.add(
                    key,
                    format!("{e} (expected a duration such as \"1s\", or \"off\")"),
                );
                Delay::Default
            }
        },
    }
}

/// Reports `key` when its value is shorter than `other`'s, with `why` the
/// bound exists.
fn not_shorter(
    c: &mut ConfigCheck,
    (key, v): (&str, Duration),
    (other, o): (&str, Duration),
    why: &str,
) {
    if v < o {
        let name = |k: &str| k.rsplit('.').next().unwrap_or(k).to_string();
        c.add(
            key,
            format!(
                "{} is shorter than {other} = {} (expected {} >= {}: {why})",
                duration::format(v),
                duration::format(o),
                name(key),
                name(other)
            ),
        );
    }
}

fn watermark(c: &mut ConfigCheck, key: &str, v: Option<f64>, default: f64) -> f64 {
    match v {
        None => default,
        Some(x) if x.is_finite() && x > 0.0 && x <= MAX_WATERMARK => x,
        Some(x) => {
            c.add(
                key,
                format!("{x} is not a load level (expected a number above 0 and at most {MAX_WATERMARK}; 1.0 = fully used)"),
            );
            default
        }
    }
}

/// Like `Check::duration` but accepting zero (no skew allowance, no
/// cool-down).
fn duration_or_zero(
    c: &mut ConfigCheck,
    key: &str,
    v: &Option<String>,
    default: Duration,
) -> Duration {
    match v.as_deref() {
        None => default,
        Some(text) => duration::parse(text).unwrap_or_else(|e| {
            c.add(key, e);
            default
        }),
    }
}

fn peer(
    c: &mut ConfigCheck,
    key: &str,
    p: RawPeerProxy,
    ids: &mut HashSet<u16>,
) -> Option<PeerProxy> {
    let id = match p.id {
        None => {
            c.add(
                format!("{key}.id"),
                "missing (expected the peer's global.proxy_id, 1 to 65535)",
            );
            return None;
        }
        Some(id) => {
            match u16::try_from(id) {
                Ok(id) if id != 0 => id,
                _ => {
                    c.add(
                    format!("{key}.id"),
                    format!("{id} is out of range (expected the peer's global.proxy_id, 1 to 65535)"),
                );
                    return None;
                }
            }
        }
    };
    if !ids.insert(id) {
        c.add(
            format!("{key}.id"),
            format!("proxy id {id} is used twice (this proxy's global.proxy_id or another peer); every proxy needs its own id"),
        );
        return None;
    }
    let window = match (p.transport.as_deref(), p.window.as_deref()) {
        (_, None) => {
            c.add(
                format!("{key}.window"),
                "missing (expected the peer's window: a /dev/shm file path for shm, host:port for tcp, the peer's verbs control host:port for verbs)",
            );
            return None;
        }
        (None, Some(_)) => {
            c.add(
                format!("{key}.transport"),
                format!("missing (expected {})", TransportKind::ACCEPTED),
            );
            return None;
        }
        (Some(t), Some(at)) => {
            let w = WindowAt {
                key,
                at_key: "window",
                example: "/dev/shm/rdmalb-proxy-2",
            };
            window_endpoint(c, w, t, at, p.device.as_ref())?
        }
    };
    if p.device.is_some() && window.transport() != TransportKind::Verbs {
        c.add(
            format!("{key}.device"),
            "set for a peer that is not reached over verbs (expected it only with transport = \"verbs\")",
        );
    }
    Some(PeerProxy { id, window })
}

#[cfg(test)]
mod tests;
