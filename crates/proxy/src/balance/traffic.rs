//! What one node served, counted by the data path in plain atomics that the
//! runtime API (`show stat`), `/status` and the stats page read: requests by
//! status class, upstream errors, bytes sent to clients, the highest
//! in-flight count seen, and the request rate over the last second.
//!
//! The Prometheus counters (`front::stats`) carry the same events with
//! labels; these exist because a Prometheus handle cannot be read back.
//! Shared across reloads with the rest of the node's runtime state.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Status classes, as `front::stats::CODE_CLASSES`: 1xx..5xx and "err"
/// (cut exchanges).
pub const CLASSES: usize = 6;

/// Upstream error kinds, as `front::stats::UPSTREAM_ERROR_KINDS`: connect,
/// timeout, protocol, 5xx.
pub const ERROR_KINDS: usize = 4;

/// Requests per second over the last complete second, HAProxy's `rate`: a
/// count for the current second and one for the second before.
#[derive(Debug, Default)]
struct Rate {
    /// Unix second the `current` count belongs to.
    second: AtomicU64,
    current: AtomicU64,
    previous: AtomicU64,
}

impl Rate {
    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    fn tick(&self) {
        let now = Self::now();
        self.roll(now);
        self.current.fetch_add(1, Ordering::Relaxed);
    }

    /// Moves the window to second `now`. Racing threads may each move it;
    /// a count landing in the wrong second by a race is within the
    /// figure's meaning (a rate over about one second).
    fn roll(&self, now: u64) {
        let seen = self.second.load(Ordering::Relaxed);
        if seen == now {
            return;
        }
        if self
            .second
            .compare_exchange(seen, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let last = self.current.swap(0, Ordering::AcqRel);
            self.previous
                .store(if now == seen + 1 { last } else { 0 }, Ordering::Release);
        }
    }

    /// Requests in the last complete second.
    fn per_second(&self) -> u64 {
        self.roll(Self::now());
        self.previous.load(Ordering::Acquire)
    }
}

/// The counters of one node.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    responses: [AtomicU64; CLASSES],
    /// By kind, as `front::stats::UPSTREAM_ERROR_KINDS`.
    upstream_errors: [AtomicU64; ERROR_KINDS],
    bytes_out: AtomicU64,
    inflight_max: AtomicUsize,
    rate: Rate,
}

/// A point-in-time view for `/status` and `show stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrafficSnapshot {
    /// Requests finished on the node (every class).
    pub requests_total: u64,
    /// By class: 1xx, 2xx, 3xx, 4xx, 5xx, cut (`err`).
    pub responses: [u64; CLASSES],
    /// Failed attempts by kind: connect, timeout, protocol, 5xx.
    pub upstream_errors: [u64; ERROR_KINDS],
    /// Response bytes sent to clients.
    pub bytes_out_total: u64,
    /// The most requests in flight at once since start.
    pub inflight_max: usize,
    /// Requests started in the last complete second.
    pub rate: u64,
}

impl Traffic {
    /// A request took a slot with `inflight` now in flight.
    pub(crate) fn started(&self, inflight: usize) {
        self.inflight_max.fetch_max(inflight, Ordering::Relaxed);
        self.rate.tick();
    }

    pub(crate) fn finished(&self, class: usize, bytes_out: u64) {
        self.responses[class.min(CLASSES - 1)].fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }

    pub(crate) fn upstream_error(&self, kind: usize) {
        self.upstream_errors[kind.min(ERROR_KINDS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> TrafficSnapshot {
        let responses: [u64; CLASSES] =
            std::array::from_fn(|i| self.responses[i].load(Ordering::Relaxed));
        TrafficSnapshot {
            requests_total: responses.iter().sum(),
            responses,
            upstream_errors: std::array::from_fn(|i| {
                self.upstream_errors[i].load(Ordering::Relaxed)
            }),
            bytes_out_total: self.bytes_out.load(Ordering::Relaxed),
            inflight_max: self.inflight_max.load(Ordering::Relaxed),
            rate: self.rate.per_second(),
        }
    }
}

#[cfg(test)]
mod tests;
