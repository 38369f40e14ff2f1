//! A node's response latency as this proxy sees it: a peak-sensitive,
//! exponentially weighted moving average of the time from sending a
//! request to the node's response head (Finagle's and Linkerd's
//! peak-EWMA): a sample above the average replaces it at once, a sample
//! below it is blended in with weight `1 - e^(-Δt/τ)`, so the estimate
//! rises with the first slow answer and decays over about τ when the node
//! recovers. Before the first sample, and after a long quiet spell, the
//! estimate decays towards [`DEFAULT_NS`], not to zero, so an unmeasured
//! node neither attracts every request nor is shunned.
//!
//! Two atomics, written by the request path without locks: a race between
//! two responses loses one sample, which the estimator's meaning allows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Decay time τ (Linkerd's default).
pub const DECAY: Duration = Duration::from_secs(10);
/// The estimate of a node never measured (1 ms).
pub const DEFAULT_NS: f64 = 1_000_000.0;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One node's estimator.
#[derive(Debug)]
pub(crate) struct PeakEwma {
    /// Estimate in ns, as `f64` bits.
    value: AtomicU64,
    /// When it was last updated (ns since [`epoch`]).
    stamp: AtomicU64,
}

impl Default for PeakEwma {
    fn default() -> Self {
        PeakEwma {
            value: AtomicU64::new(DEFAULT_NS.to_bits()),
            stamp: AtomicU64::new(now_ns()),
        }
    }
}

impl PeakEwma {
    /// The estimate decayed to `now` (towards [`DEFAULT_NS`]).
    fn decayed(&self, now: u64) -> f64 {
        let v = f64::from_bits(self.value.load(Ordering::Relaxed));
        let dt = now.saturating_sub(self.stamp.load(Ordering::Relaxed)) as f64;
        let w = (-dt / DECAY.as_nanos() as f64).exp();
        v * w + DEFAULT_NS * (1.0 - w)
    }

    pub(crate) fn observe(&self, rtt: Duration) {
        self.observe_at(rtt, now_ns());
    }

    /// [`observe`](Self::observe) of a sample taken at `at` (a clock read
    /// the caller already made: the request path's end of `rtt`).
    pub(crate) fn observe_taken_at(&self, rtt: Duration, at: Instant) {
        let now =
            u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX);
        self.observe_at(rtt, now);
    }

    fn observe_at(&self, rtt: Duration, now: u64) {
        // Through u64: a 128-bit conversion to f64 is a library call.
        let sample = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX) as f64;
        let prev = f64::from_bits(self.value.load(Ordering::Relaxed));
        let dt = now.saturating_sub(self.stamp.load(Ordering::Relaxed)) as f64;
        let next = if sample > prev {
            // Peak: take it at once.
            sample
        } else {
            let w = (-dt / DECAY.as_nanos() as f64).exp();
            prev * w + sample * (1.0 - w)
        };
        self.value.store(next.to_bits(), Ordering::Relaxed);
        self.stamp.store(now, Ordering::Relaxed);
    }

    /// The estimate now, in nanoseconds.
    pub(crate) fn estimate_ns(&self) -> f64 {
        self.decayed(now_ns())
    }
}

#[cfg(test)]
mod tests;
