//! The capacity model of a testbed node: W worker slots a request holds
//! for its service time, a queue of Q beyond them, and the counters the
//! publisher pushes to the sidecar (docs/testbed.md, "Capacity model").

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};

use super::config::{Antagonist, Model};

/// The modelled capacity: W slots and a queue of Q, plus counters the
/// publisher pushes to the sidecar.
#[derive(Debug)]
pub struct Capacity {
    model: Model,
    slots: Semaphore,
    /// Requests admitted and not yet finished (busy + queued).
    in_system: AtomicU32,
    /// Slots the antagonist holds now.
    held: AtomicU32,
    requests_total: AtomicU64,
    /// Requests refused because the W + Q places were taken (503s).
    rejected_total: AtomicU64,
    /// Microseconds requests held a worker slot, summed over the served
    /// ones: the service time the node actually gave, which a contended
    /// machine stretches beyond the configured cost (late timers).
    service_us_total: AtomicU64,
    /// See [`Usage::latency_us`].
    latency_us: AtomicU64,
    /// Signalled on every change of busy/queue/requests_total.
    pub changed: Notify,
}

/// A snapshot of the capacity counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub busy: u64,
    pub queue: u64,
    pub capacity: u64,
    pub requests_total: u64,
    /// Moving average of the time requests spent in the node (queue and
    /// service), microseconds; 0 before the first one.
    pub latency_us: u64,
    /// Q: requests the queue holds beyond the busy slots.
    pub queue_limit: u64,
}

/// Held from admission to the end of service; gives back the place.
struct Admission<'a> {
    cap: &'a Capacity,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.cap.in_system.fetch_sub(1, Ordering::AcqRel);
        self.cap.changed.notify_one();
    }
}

impl Capacity {
    pub fn new(model: Model) -> Capacity {
        Capacity {
            slots: Semaphore::new(model.slots as usize),
            in_system: AtomicU32::new(0),
            held: AtomicU32::new(0),
            requests_total: AtomicU64::new(0),
            rejected_total: AtomicU64::new(0),
            service_us_total: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            changed: Notify::new(),
            model,
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn usage(&self) -> Usage {
        let busy =
            (self.model.slots as usize).saturating_sub(self.slots.available_permits()) as u64;
        let in_system = u64::from(self.in_system.load(Ordering::Acquire));
        let held = u64::from(self.held.load(Ordering::Acquire));
        Usage {
            // The antagonist's slots count as busy: the node's own load
            // shows the co-tenant at once.
            busy,
            queue: in_system.saturating_sub(busy.saturating_sub(held)),
            capacity: u64::from(self.model.slots),
            requests_total: self.requests_total.load(Ordering::Acquire),
            latency_us: self.latency_us.load(Ordering::Acquire),
            queue_limit: u64::from(self.model.queue),
        }
    }

    /// Slots the co-tenant holds now (0 when it is off).
    pub fn held(&self) -> u64 {
        u64::from(self.held.load(Ordering::Acquire))
    }

    /// Requests refused so far because the node was full (its 503s).
    pub fn rejected_total(&self) -> u64 {
        self.rejected_total.load(Ordering::Acquire)
    }

    /// Microseconds served requests held a worker slot, in all.
    pub fn service_us_total(&self) -> u64 {
        self.service_us_total.load(Ordering::Acquire)
    }

    /// Takes a place among the W + Q, or `None` (→ 503).
    fn admit(&self) -> Option<Admission<'_>> {
        let limit = self.model.slots + self.model.queue;
        self.in_system
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        self.changed.notify_one();
        Some(Admission { cap: self })
    }

    /// Admits, waits for a slot, holds it for `service`; `false` when the
    /// node is full (nothing was held).
    pub async fn serve(&self, service: Service) -> bool {
        let arrived = tokio::time::Instant::now();
        let Some(_admitted) = self.admit() else {
            self.rejected_total.fetch_add(1, Ordering::AcqRel);
            return false;
        };
        let Ok(_slot) = self.slots.acquire().await else {
            return false; // the semaphore is never closed
        };
        self.changed.notify_one();
        let started = tokio::time::Instant::now();
        service.run().await;
        let held = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.service_us_total.fetch_add(held, Ordering::AcqRel);
        self.record_latency(arrived.elapsed());
        self.requests_total.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Folds one request's time in the node into the moving average
    /// (weight 1/8 per request, as TCP's SRTT): recent, so a node that
    /// slows down (a co-tenant, a long queue) says so within a few
    /// requests. A race between two requests loses one sample.
    fn record_latency(&self, t: Duration) {
        let sample = u64::try_from(t.as_micros()).unwrap_or(u64::MAX).max(1);
        let prev = self.latency_us.load(Ordering::Relaxed);
        let next = if prev == 0 {
            sample
        } else {
            prev - prev / 8 + sample / 8
        };
        self.latency_us.store(next.max(1), Ordering::Relaxed);
    }
}

impl Capacity {
    /// Runs the co-tenant until `shutdown`: off for an exponential time
    /// (mean `a.off`), then holding `a.slots` slots for an exponential time
    /// (mean `a.on`), again and again. Taking the slots waits for them, in
    /// turn with the requests (the semaphore is fair).
    pub async fn run_antagonist(
        self: std::sync::Arc<Self>,
        a: Antagonist,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
        let mut exp = |mean: Duration| {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            mean.mul_f64(-u.ln()).min(mean * 20)
        };
        loop {
            let off = exp(a.off);
            tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                _ = tokio::time::sleep(off) => {}
            }
            let permits = tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
                p = self.slots.acquire_many(a.slots) => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            self.held.store(a.slots, Ordering::Release);
            self.changed.notify_one();
            tracing::debug!(slots = a.slots, "antagonist on");
            let on = exp(a.on);
            let stop = tokio::select! {
                _ = rdmalb_base::shutdown::requested(&mut shutdown) => true,
                _ = tokio::time::sleep(on) => false,
            };
            self.held.store(0, Ordering::Release);
            drop(permits);
            self.changed.notify_one();
            tracing::debug!("antagonist off");
            if stop {
                return;
            }
        }
    }
}

/// How a slot is held: some CPU spin, then a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    pub spin: Duration,
    pub sleep: Duration,
}

impl Service {
    async fn run(self) {
        if !self.spin.is_zero() {
            // On the blocking pool so the event loop keeps accepting. The
            // spin is bounded by wall time, so service times stay the
            // configured ones on a loaded machine (repeatable runs) while
            // the CPU use still shows in /proc for the system collector.
            let spin = self.spin;
            let _ = tokio::task::spawn_blocking(move || {
                let end = Instant::now() + spin;
                let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
                while Instant::now() < end {
                    for _ in 0..256 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                    }
                    std::hint::black_box(x);
                }
            })
            .await;
        }
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
    }
}

#[cfg(test)]
mod tests;
