//! What one node served, counted by the data path in plain atomics that the
//! runtime API (`show stat`), `/status` and the stats page read: requests by
//! status class, upstream errors, bytes sent to clients, the highest
//! in-flight count seen, and the request rate over the last second.
//!
//! The Prometheus counters (`front::stats`) carry the same events with
//! labels; these exist because a Prometheus handle cannot be read back.
//! Shared across reloads with the rest of the node's runtime state.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Status classes, as `front::stats::CODE_CLASSES`: 1xx..5xx and "err"
/// (cut exchanges).
pub const CLASSES: usize = 6;

/// Upstream error kinds, as `front::stats::UPSTREAM_ERROR_KINDS`: connect,
/// timeout, protocol, 5xx.
pub const ERROR_KINDS: usize = 4;

/// Requests per second, HAProxy's `rate`, measured by the reader, not the
/// request path: each read compares the request count with the one kept
/// from at least [`RATE_PERIOD`] earlier, so a request pays no clock read.
/// Between reads less than a period apart the last figure stands.
#[derive(Debug)]
pub struct Rate {
    /// (when, requests started then, the rate computed then).
    last: std::sync::Mutex<(Instant, u64, u64)>,
}

/// The shortest span a rate is measured over.
const RATE_PERIOD: Duration = Duration::from_secs(1);

impl Default for Rate {
    fn default() -> Self {
        Rate {
            last: std::sync::Mutex::new((Instant::now(), 0, 0)),
        }
    }
}

impl Rate {
    /// The rate, given the requests (or connections) started so far.
    pub fn per_second(&self, started: u64) -> u64 {
        self.at(started, Instant::now())
    }

    fn at(&self, started: u64, now: Instant) -> u64 {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let span = now.saturating_duration_since(last.0);
        if span >= RATE_PERIOD {
            let rate = (started.saturating_sub(last.1) as f64 / span.as_secs_f64()).round() as u64;
            *last = (now, started, rate);
        }
        last.2
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
    started: AtomicU64,
    rate: Rate,
    /// The highest `rate` measured.
    rate_max: AtomicU64,
    /// Exchanges cut by the client, by the node.
    aborts: [AtomicU64; 2],
    /// HAProxy's averages of queue, connect, response and total time over
    /// the last [`TIME_SAMPLES`] requests: sliding sums (`swrate`), ms.
    times: [AtomicU64; 4],
    timed: AtomicU64,
    /// Requests sent again after failing here (each to another node).
    retries: AtomicU64,
}

/// Requests the time averages cover (HAProxy's `TIME_STATS_SAMPLES`).
pub const TIME_SAMPLES: u64 = 1024;

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
    /// Requests started per second, measured between reads at least a
    /// second apart (the last such figure).
    pub rate: u64,
    /// The highest `rate` measured so far.
    pub rate_max: u64,
    /// Exchanges cut by the client (HAProxy's `cli_abrt`), by the node
    /// (`srv_abrt`).
    pub aborts: [u64; 2],
    /// Average queue, connect, response and total time (ms) over the last
    /// 1024 requests, as HAProxy's `qtime`, `ctime`, `rtime`, `ttime`.
    pub times_ms: [u64; 4],
    /// Requests that failed here and were sent again to another node
    /// (HAProxy's `wretr` and `wredis`).
    pub retries: u64,
}

impl Traffic {
    /// A request took a slot with `inflight` now in flight.
    pub(crate) fn started(&self, inflight: usize) {
        self.inflight_max.fetch_max(inflight, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn finished(&self, class: usize, bytes_out: u64) {
        self.responses[class.min(CLASSES - 1)].fetch_add(1, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }

    /// An exchange cut by the client (`by_client`) or by the node.
    pub(crate) fn aborted(&self, by_client: bool) {
        self.aborts[usize::from(!by_client)].fetch_add(1, Ordering::Relaxed);
    }

    /// One request's queue, connect, response and total times (ms; a
    /// negative time, not reached, counts as 0 as in HAProxy).
    pub(crate) fn timed(&self, times: [i64; 4]) {
        let n = (self.timed.fetch_add(1, Ordering::Relaxed) + 1).min(TIME_SAMPLES);
        for (sum, v) in self.times.iter().zip(times) {
            let v = v.max(0) as u64;
            let _ = sum.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(s - s / n + v)
            });
        }
    }

    pub(crate) fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn upstream_error(&self, kind: usize) {
        self.upstream_errors[kind.min(ERROR_KINDS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> TrafficSnapshot {
        let responses: [u64; CLASSES] =
            std::array::from_fn(|i| self.responses[i].load(Ordering::Relaxed));
        let rate = self.rate.per_second(self.started.load(Ordering::Relaxed));
        TrafficSnapshot {
            requests_total: responses.iter().sum(),
            responses,
            upstream_errors: std::array::from_fn(|i| {
                self.upstream_errors[i].load(Ordering::Relaxed)
            }),
            bytes_out_total: self.bytes_out.load(Ordering::Relaxed),
            inflight_max: self.inflight_max.load(Ordering::Relaxed),
            rate,
            rate_max: self.rate_max.fetch_max(rate, Ordering::Relaxed).max(rate),
            aborts: std::array::from_fn(|i| self.aborts[i].load(Ordering::Relaxed)),
            retries: self.retries.load(Ordering::Relaxed),
            times_ms: std::array::from_fn(|i| {
                let n = self.timed.load(Ordering::Relaxed).min(TIME_SAMPLES);
                self.times[i]
                    .load(Ordering::Relaxed)
                    .checked_div(n)
                    .unwrap_or(0)
            }),
        }
    }
}

#[cfg(test)]
mod tests;
