//! The index of the `shortest-wait` policy: each candidate's **expected
//! wait**, from its window, in seconds.
//!
//! A new request on a node starts at once when a worker is free; otherwise
//! it waits until the requests ahead of it and itself have drained:
//!
//! ```text
//! waiting = max(0, busy + queue + 1 − capacity)   (busy + queue + 1 without a capacity)
//! wait    = waiting / drain rate
//! ```
//!
//! `busy`, `queue` and `capacity` are the window's app words. The **drain
//! rate** is what makes this differ from the app index `(busy + queue) /
//! capacity`: it is measured from the window itself, as the rise of the
//! `requests total` counter over the rise of `updated_at` between two reads
//! of the same node ([`DrainRate`]), so a node whose workers are slowed or
//! taken by a co-tenant (a CPU hog, a cron job, a noisy neighbour holding
//! worker slots) drains its queue slower and says so within a few
//! milliseconds, whatever the cause; no collector has to know about the
//! co-tenant. Real collectors publish the counter (nginx `stub_status`
//! requests, Apache `Total Accesses`, the push protocol's `requests_total`).
//!
//! A completion count measures the node's *capacity* only while the node is
//! saturated (no free worker: `busy >= capacity`, or a queue): an idle node
//! completes little because it is asked little. So an interval between two
//! reads is folded into the estimate when the node was saturated at both
//! ends, or when its rate is above the estimate (a node that served that
//! fast can serve at least that fast). The estimate is a ratio of
//! exponentially decayed sums (completions / seconds, time constant
//! `routing.drain_window`), which weighs irregular read intervals correctly.
//!
//! Fall-backs, each of which still gives an ordering that does not herd:
//! - no estimate yet, or its data is older than a few windows (the node was
//!   not saturated for a while, or not read): rate = `capacity / latency`
//!   from the app's latency word (word 21), when both are published;
//! - neither: the node is scored like an unknown one (the mean of the fresh
//!   candidates of the decision, told apart by in-flight counts:
//!   [`super::load::rank_with`]);
//! - `requests total` going backwards (the app or the node restarted) or
//!   `updated_at` jumping back: the estimate starts over;
//! - a stale or unreadable block is never folded in.
//!
//! Ties (every candidate has a free worker: no wait) go to the lower app
//! index, so a node with more free workers is preferred, as with the app
//! index of `weighted-least-load`.
//!
//! **A full queue** (`routing.full_queue = "avoid"`, the default): a node
//! that publishes its queue limit (word 22) refuses a request that finds
//! no free worker and a full queue (a 503), whatever its expected wait.
//! Equal waits put the longer queues on the faster nodes (a node draining
//! 4x faster holds 4x the queue for the same wait), so when the cluster is
//! over capacity for a while it is the *fast* nodes' queues that fill
//! first. A node is [`nearly_full`] when its queue has no room for this
//! request plus the requests the node may have taken since its block was
//! published (its drain rate times the block's age: in a steady state it
//! admits as many as it completes); its score gets [`FULL`] added, so it
//! is chosen only when every candidate is nearly full (then by the lowest
//! wait, as before).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rdmalb_window::{LoadBlock, LoadSample};

use super::load::{rank_with, Normalised, WAIT_TIE};
use super::load_aware::{Decision, LoadRule};
use crate::config::{Balance, FullQueue};

/// An estimate needs at least this share of one window of folded time.
const MIN_SHARE: f64 = 0.2;
/// Completions assumed at least, so a saturated node that completed nothing
/// yet has a finite (long) wait rather than a division by zero.
const MIN_COMPLETIONS: f64 = 0.5;
/// Weight of the app index in a score, as a tie-break: the score is in
/// milliseconds and the app index at most 4, so this never outweighs a
/// real wait of more than 4 µs.
const APP_TIE: f64 = 1e-3;

/// Added to the score (ms) of a [`nearly_full`] node: larger than any
/// wait, so a node with room always ranks first.
pub const FULL: f64 = 1e9;

/// What one read of a node showed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    at_ns: u64,
    total: u64,
    saturated: bool,
}

/// Whether a node had no free worker when it published `s`.
pub fn saturated(s: &LoadSample) -> bool {
    s.app_queue_len > 0 || (s.app_capacity > 0 && s.app_busy >= s.app_capacity)
}

/// A node's drain-rate estimate from the reads of its window (module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainRate {
    prev: Option<Mark>,
    /// Decayed completions and seconds of the folded intervals.
    completions: f64,
    seconds: f64,
    /// `updated_at` of the last folded interval's end.
    folded_at_ns: u64,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl DrainRate {
    /// Takes one read of the node (a consistent, fresh block) and returns
    /// the estimate after it, completions per second; `window` is the time
    /// constant.
    pub fn observe(&mut self, block: &LoadBlock, window: Duration) -> Option<f64> {
        let cur = Mark {
            at_ns: block.updated_at_ns,
            total: block.sample.requests_total,
            saturated: saturated(&block.sample),
        };
        let Some(prev) = self.prev else {
            self.prev = Some(cur);
            return self.estimate(cur.at_ns, window);
        };
        if cur.at_ns == prev.at_ns {
            // The same block again: nothing new.
            return self.estimate(cur.at_ns, window);
        }
        let older = cur.at_ns < prev.at_ns;
        if older && prev.at_ns - cur.at_ns <= window.as_nanos() as u64 && cur.total <= prev.total {
            // An older block read by a slower concurrent reader: ignore.
            return self.estimate(prev.at_ns, window);
        }
        if older || cur.total < prev.total {
            // The counter went back (the app restarted) or the clock
            // jumped: start over.
            *self = DrainRate {
                prev: Some(cur),
                ..DrainRate::default()
            };
            return None;
        }
        let dt = secs(cur.at_ns - prev.at_ns);
        let done = (cur.total - prev.total) as f64;
        let current = self.estimate(cur.at_ns, window);
        let fold = (prev.saturated && cur.saturated) || current.is_some_and(|r| done / dt > r);
        if fold {
            let decay = self.decay(cur.at_ns, window);
            self.completions = self.completions * decay + done;
            self.seconds = self.seconds * decay + dt;
            self.folded_at_ns = cur.at_ns;
        }
        self.prev = Some(cur);
        self.estimate(cur.at_ns, window)
    }

    fn decay(&self, now_ns: u64, window: Duration) -> f64 {
        let tau = window.as_secs_f64();
        if self.seconds <= 0.0 || tau <= 0.0 {
            return 0.0;
        }
        (-secs(now_ns.saturating_sub(self.folded_at_ns)) / tau).exp()
    }

    /// The estimate at `now_ns` (the node's clock), completions per second:
    /// `None` until at least a fifth of a window was folded, and again once
    /// the folded data has decayed below that.
    pub fn estimate(&self, now_ns: u64, window: Duration) -> Option<f64> {
        let weight = self.seconds * self.decay(now_ns, window);
        if weight < window.as_secs_f64() * MIN_SHARE || self.seconds <= 0.0 {
            return None;
        }
        Some(self.completions.max(MIN_COMPLETIONS) / self.seconds)
    }
}

/// [`DrainRate`] shared by the decisions of one proxy: a decision that finds
/// it locked by another uses the last estimate instead of waiting.
#[derive(Debug, Default)]
pub struct Drain {
    state: Mutex<DrainRate>,
    /// The last estimate, `f64` bits; NaN for none.
    last: AtomicU64,
}

impl Drain {
    pub fn new() -> Drain {
        Drain {
            state: Mutex::new(DrainRate::default()),
            last: AtomicU64::new(f64::NAN.to_bits()),
        }
    }

    /// Folds a fresh read in (unless another decision is folding one right
    /// now) and returns the estimate.
    pub fn observe(&self, block: &LoadBlock, window: Duration) -> Option<f64> {
        let Ok(mut s) = self.state.try_lock() else {
            return self.last();
        };
        let r = s.observe(block, window);
        self.last
            .store(r.unwrap_or(f64::NAN).to_bits(), Ordering::Relaxed);
        r
    }

    /// The last estimate, without reading.
    pub fn last(&self) -> Option<f64> {
        let r = f64::from_bits(self.last.load(Ordering::Relaxed));
        (r.is_finite() && r > 0.0).then_some(r)
    }
}

/// The rate assumed without a measurement: `capacity` workers each taking
/// the app's recent latency per request; `None` without both.
pub fn nominal_rate(s: &LoadSample) -> Option<f64> {
    (s.app_capacity > 0 && s.app_latency_us > 0)
        .then(|| s.app_capacity as f64 / (s.app_latency_us as f64 / 1e6))
}

/// Requests a new request would wait for on a node publishing `s`.
pub fn waiting(s: &LoadSample) -> u64 {
    let ahead = s.app_busy.saturating_add(s.app_queue_len).saturating_add(1);
    if s.app_capacity > 0 {
        ahead.saturating_sub(s.app_capacity)
    } else {
        ahead
    }
}

/// The expected wait of a new request on a node publishing `s` whose drain
/// rate is `rate` (else [`nominal_rate`]), in seconds; `None` when neither
/// rate is known.
pub fn expected_wait(s: &LoadSample, rate: Option<f64>) -> Option<f64> {
    let waiting = waiting(s);
    if waiting == 0 {
        return Some(0.0);
    }
    let rate = rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .or_else(|| nominal_rate(s))?;
    Some(waiting as f64 / rate)
}

/// Whether a node publishing `s` (a block `age_s` seconds old when it was
/// read, draining `rate` requests/s) would probably refuse a new request:
/// no free worker and fewer free queue places than this request plus
/// `rate × age` requests others may have sent since. `false` when the node
/// publishes no queue limit (word 22 is 0) or has a free worker.
pub fn nearly_full(s: &LoadSample, rate: Option<f64>, age_s: f64) -> bool {
    if s.app_queue_limit == 0 || waiting(s) == 0 {
        return false;
    }
    let room = s.app_queue_limit.saturating_sub(s.app_queue_len) as f64;
    let since = match rate {
        Some(r) if r.is_finite() && r > 0.0 && age_s.is_finite() && age_s > 0.0 => r * age_s,
        _ => 0.0,
    };
    room < 1.0 + since
}

/// The score a decision ranks by: the expected wait in milliseconds plus
/// the app index as a tie-break (module docs); `None` when the wait is not
/// known.
pub fn score(s: &LoadSample, rate: Option<f64>) -> Option<f64> {
    let wait = expected_wait(s, rate)?;
    Some(wait * 1e3 + APP_TIE * Normalised::of(s).app)
}

/// The `shortest-wait` policy's rule: the lowest expected wait
/// ([`score`]), drain rates measured from the reads with a time constant
/// (`routing.drain_window`), per unit of the node's weight when weights
/// differ.
#[derive(Debug)]
pub struct ShortestWait {
    pub drain_window: Duration,
}

impl LoadRule for ShortestWait {
    fn balance(&self) -> Balance {
        Balance::ShortestWait
    }

    fn choose(&self, d: &Decision<'_, '_>, scores: &mut [f64]) -> usize {
        let now_ns = rdmalb_base::time::unix_ns(d.now);
        // A fresh decision folds its reads into the drain rates; a
        // synchronous one only looks at them. `rank_with` asks for each
        // candidate's part once, so each read is folded once.
        let part = |i: usize| {
            let s = &d.slots[i];
            // The rate from the block as published; the wait from it with
            // this proxy's unseen requests.
            let block = s.load.fresh()?;
            let rate = s.window.as_ref().and_then(|w| {
                if d.fresh {
                    w.drain().observe(block, self.drain_window)
                } else {
                    w.drain().last()
                }
            });
            let scored = &s.scored().fresh()?.sample;
            let wait = score(scored, rate)?;
            let age_s = now_ns.saturating_sub(block.updated_at_ns) as f64 / 1e9;
            let full = d.full_queue == FullQueue::Avoid
                && nearly_full(scored, rate.or_else(|| nominal_rate(scored)), age_s);
            Some(if full { wait + FULL } else { wait })
        };
        let inflight = |i: usize| d.slots[i].inflight;
        let best = rank_with(part, |_| 0.0, inflight, WAIT_TIE, d.start, scores).unwrap_or(0);
        d.per_weight(scores, best)
    }
}

#[cfg(test)]
mod tests;
