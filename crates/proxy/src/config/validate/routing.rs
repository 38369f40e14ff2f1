//! Validation of the load-aware routing settings: the `[routing]` section,
//! the load-index weights' sanity and each node's `node_id`. Kept apart from
//! the rest of `validate` because it belongs to the `weighted-least-load`
//! policy (`balance::least_load`, docs/routing.md).

use std::collections::HashMap;
use std::time::Duration;

use super::{RawNode, RawRouting};
use crate::config::types::{Candidates, FullQueue, LoadWeights, ReadMode, Routing, Unseen};
use rdmalb_base::duration;
use rdmalb_base::problems::ConfigCheck;

/// Most nodes `routing.candidates` may name (a decision reads that many
/// windows at once).
pub(super) const MAX_CANDIDATES: usize = 64;
/// Bounds of `routing.load_read = "interval:<d>"`.
const INTERVAL_MIN: Duration = Duration::from_millis(1);
const INTERVAL_MAX: Duration = Duration::from_secs(60);
/// `routing.read_deadline` may not exceed this: a read on the request path
/// must stay far below any request timeout.
const DEADLINE_MAX: Duration = Duration::from_secs(1);
const STALENESS_MAX: Duration = Duration::from_secs(3600);
/// Bounds of `routing.drain_window`: below a millisecond a window holds no
/// completion of a typical app; beyond 10 s the rate no longer follows a
/// co-tenant coming and going.
const DRAIN_WINDOW_MIN: Duration = Duration::from_millis(1);
const DRAIN_WINDOW_MAX: Duration = Duration::from_secs(10);

pub(super) fn routing(c: &mut ConfigCheck, raw: &RawRouting) -> Routing {
    let dflt = Routing::default();
    let candidates = match &raw.candidates {
        None => dflt.candidates,
        Some(toml::Value::String(s)) if s == "all" => Candidates::All,
        Some(toml::Value::Integer(n)) if (2..=MAX_CANDIDATES as i64).contains(n) => {
            Candidates::Count(*n as usize)
        }
        Some(v) => {
            c.add(
                "routing.candidates",
                format!("{v} is not accepted (expected an integer from 2 to {MAX_CANDIDATES}, or \"all\")"),
            );
            dflt.candidates
        }
    };
    let load_read = raw.load_read.as_deref().and_then(|text| {
        let mode = read_mode(text);
        if let Err(e) = &mode {
            c.add("routing.load_read", e.clone());
        }
        mode.ok()
    });
    let read_deadline = bounded(
        c,
        "routing.read_deadline",
        &raw.read_deadline,
        dflt.read_deadline,
        DEADLINE_MAX,
    );
    let staleness = bounded(
        c,
        "routing.staleness",
        &raw.staleness,
        dflt.staleness,
        STALENESS_MAX,
    );
    let drain_window = c.duration_within(
        "routing.drain_window",
        raw.drain_window.as_deref(),
        dflt.drain_window,
        DRAIN_WINDOW_MIN,
        DRAIN_WINDOW_MAX,
    );
    let unseen = match raw.unseen.as_deref() {
        None => dflt.unseen,
        Some("count") => Unseen::Count,
        Some("ignore") => Unseen::Ignore,
        Some(v) => {
            c.add(
                "routing.unseen",
                format!("`{v}` is not accepted (expected \"count\" or \"ignore\")"),
            );
            dflt.unseen
        }
    };
    let full_queue = match raw.full_queue.as_deref() {
        None => dflt.full_queue,
        Some("avoid") => FullQueue::Avoid,
        Some("ignore") => FullQueue::Ignore,
        Some(v) => {
            c.add(
                "routing.full_queue",
                format!("`{v}` is not accepted (expected \"avoid\" or \"ignore\")"),
            );
            dflt.full_queue
        }
    };
    Routing {
        candidates,
        load_read,
        read_deadline,
        staleness,
        drain_window,
        unseen,
        full_queue,
    }
}

/// Parses `per-request` or `interval:<duration>`.
pub fn read_mode(text: &str) -> Result<ReadMode, String> {
    const ACCEPTED: &str =
        "expected \"per-request\" or \"interval:<duration>\" such as \"interval:250ms\"";
    if text == "per-request" {
        return Ok(ReadMode::PerRequest);
    }
    let Some(d) = text.strip_prefix("interval:") else {
        return Err(format!("`{text}` is not a read mode ({ACCEPTED})"));
    };
    let d = duration::parse(d).map_err(|e| format!("`{text}`: {e}"))?;
    if d < INTERVAL_MIN || d > INTERVAL_MAX {
        return Err(format!(
            "`{text}`: the interval must be from {} to {} ({ACCEPTED})",
            duration::format(INTERVAL_MIN),
            duration::format(INTERVAL_MAX)
        ));
    }
    Ok(ReadMode::Interval(d))
}

fn bounded(
    c: &mut ConfigCheck,
    key: &str,
    v: &Option<String>,
    default: Duration,
    max: Duration,
) -> Duration {
    let d = c.duration(key, v.as_deref(), default);
    if d > max {
        c.add(
            key,
            format!(
                "{} is too long (expected more than 0 and at most {})",
                duration::format(d),
                duration::format(max)
            ),
        );
        return default;
    }
    d
}

/// With every weight zero each node scores 0 and the policy degenerates to
/// rotation: almost certainly a mistake, so say so.
pub(super) fn weights_not_all_zero(c: &mut ConfigCheck, key: &str, w: &LoadWeights) {
    if w.inflight == 0.0 && w.window.named().iter().all(|(_, x)| *x == 0.0) {
        c.add(
            key,
            "every weight is 0 (expected at least one weight > 0; to ignore load use balance = \"roundrobin\")",
        );
    }
}

/// `node[i].node_id`: 1..65535, unique, and only meaningful with a window.
pub(super) fn node_id(
    c: &mut ConfigCheck,
    key: &str,
    n: &RawNode,
    seen: &mut HashMap<u16, String>,
) -> Option<u16> {
    let v = n.node_id?;
    let k = format!("{key}.node_id");
    let Ok(id) = u16::try_from(v)
        .map_err(|_| ())
        .and_then(|id| if id == 0 { Err(()) } else { Ok(id) })
    else {
        c.add(
            k,
            format!(
                "{v} is out of range (expected the sidecar's node_id, an integer from 1 to 65535)"
            ),
        );
        return None;
    };
    if n.transport.is_none() {
        c.add(
            k.clone(),
            "is set but the node has no window (node_id is checked against the window header; set transport and sidecar, or remove it)",
        );
    }
    let name = n.name.clone().unwrap_or_default();
    if let Some(other) = seen.insert(id, name) {
        c.add(
            k,
            format!("{id} is also the node_id of node `{other}` (expected each sidecar's own, unique node_id)"),
        );
    }
    Some(id)
}

#[cfg(test)]
mod tests;
