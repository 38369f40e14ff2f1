//! The proxy-wide admission queue of `[qos]`: at most `qos.max_inflight`
//! requests are forwarded to nodes at once, all sites together; beyond
//! that, each site queues on its own and a freed slot goes to the queued
//! request with the smallest VirtualClock tag (docs/reconfiguration.md "QoS").
//!
//! # Tags
//! Seed 004 (section 3) stamps each arrival with
//! `auxVC = max(now, auxVC) + Vtick` and serves in stamp order, `Vtick`
//! being the ideal spacing of the flow's reserved rate. Here a site's
//! `Vtick = 1/guarantee`, or `1/qos.best_effort_floor` for a site without a
//! guarantee: a best-effort site is never starved (the seed warns that
//! plain VirtualClock starves best-effort channels), it gets at least its
//! floor's proportion of the slots while every site is backlogged, and all
//! the slots the guaranteed sites leave.
//!
//! `now` is replaced by the tag of the request dispatched last (the
//! self-clocked variant, SCFQ). With real time, a site that kept its queue
//! full for a minute carries tags a minute ahead of a site that just became
//! busy, and is then starved for that minute (VirtualClock's "punishment"
//! of past use); with the dispatched tag as the clock, backlogged sites
//! share slots in proportion to their rates, a newly busy site starts level
//! with them, and no clock is read on this path. Only queued requests get
//! tags: while the proxy is below its limit nothing is scheduled, and a
//! site is not charged later for spare capacity it used then. A request
//! that leaves the queue unserved (timeout, client gone) gives its tag back:
//! the site's later requests move up, so shed requests do not eat into the
//! site's share.
//!
//! # Fast path
//! Below the limit with nobody queued, a request takes a slot with one
//! compare-and-swap on a shared counter and no lock. The waiter registers
//! (counts itself in `queued`) before it looks for a slot, and a release
//! frees its slot before it looks at `queued`: so either the waiter sees
//! the freed slot or the releaser sees the waiter and dispatches under the
//! lock. A slot handed to a waiter is passed on without ever being freed.
//!
//! The state outlives config reloads: the snapshot of a reload reuses this
//! object ([`Admission::configure`]), requests in flight keep their slots,
//! and sites keep their queues by name.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use metrics::Gauge;
use tokio::sync::oneshot;

use crate::config::{Config, Dispatch};

/// `rdmalb_qos_queued{site}` gauge: requests waiting in the admission queue.
pub const QUEUED: &str = "rdmalb_qos_queued";
/// `rdmalb_qos_admitted_total{site,path}` counter (counted by the request
/// path); path = direct (a free slot) or queued (waited for one).
pub const ADMITTED: &str = "rdmalb_qos_admitted_total";
/// `rdmalb_qos_rejected_total{site,reason}` counter (counted by the request
/// path); reason = queue_full, queue_timeout.
pub const REJECTED: &str = "rdmalb_qos_rejected_total";
/// `rdmalb_qos_inflight` gauge: requests holding an admission slot.
pub const INFLIGHT: &str = "rdmalb_qos_inflight";

/// Virtual-time units per second of a site's reserved rate (nanoseconds).
const UNITS_PER_SECOND: f64 = 1e9;

/// The admission queue in `/status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AdmissionStatus {
    /// `qos.max_inflight` (0 = no limit, no queue).
    pub max_inflight: usize,
    /// `qos.dispatch`.
    pub dispatch: &'static str,
    /// Slots taken now.
    pub inflight: usize,
    /// Requests waiting now, by site name (every site configured since
    /// start-up).
    pub queued: std::collections::BTreeMap<String, usize>,
}

/// Why a request was not admitted. Both are answered 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The site already had `qos.max_queue` requests waiting.
    #[error("the site's admission queue is full (qos.max_queue = {0})")]
    QueueFull(usize),
    /// No slot was freed for this request within `timeouts.queue`.
    #[error("no admission slot within timeouts.queue ({0:?}; qos.max_inflight reached)")]
    Timeout(Duration),
}

/// One admission slot, released when dropped (the response has ended).
/// Without a limit configured it holds nothing.
#[derive(Debug)]
#[must_use = "the slot is released when the permit is dropped"]
pub struct Permit {
    admission: Option<Arc<Admission>>,
    queued: bool,
}

impl Permit {
    /// Whether this permit holds a slot (a limit is configured).
    pub fn holds_slot(&self) -> bool {
        self.admission.is_some()
    }

    /// Whether the request waited in the queue for its slot.
    pub fn was_queued(&self) -> bool {
        self.queued
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(a) = self.admission.take() {
            a.release();
        }
    }
}

/// The admission state of a proxy; see the module doc.
#[derive(Debug)]
pub struct Admission {
    /// `qos.max_inflight`; 0 = no limit.
    limit: AtomicUsize,
    /// Slots taken (may exceed `limit` for a while after a reload lowers it).
    inflight: AtomicUsize,
    /// Requests waiting in every site queue together.
    queued: AtomicUsize,
    queues: Mutex<Queues>,
    inflight_gauge: Gauge,
}

#[derive(Debug)]
struct Queues {
    dispatch: Dispatch,
    max_queue: usize,
    timeout: Duration,
    /// Tag of the request dispatched last: the virtual clock.
    clock: u64,
    /// Arrival counter: FIFO order and ties between equal tags.
    seq: u64,
    /// Append-only, one per site name ever configured.
    sites: Vec<SiteQueue>,
}

#[derive(Debug)]
struct SiteQueue {
    name: String,
    /// Virtual time per request: 1/rate.
    vtick: u64,
    /// Tag given to this site's latest queued request.
    last_tag: u64,
    waiting: VecDeque<Waiter>,
    queued_gauge: Gauge,
}

#[derive(Debug)]
struct Waiter {
    tag: u64,
    seq: u64,
    grant: oneshot::Sender<()>,
}

/// Which slot of the admission state a site of one config snapshot uses
/// (see [`Admission::configure`]).
pub type SiteSlots = Vec<usize>;

impl Admission {
    /// Admission state for `config` (no request in flight yet) and the
    /// slot of each of its sites.
    pub fn new(config: &Config) -> (Arc<Admission>, SiteSlots) {
        let admission = Arc::new(Admission {
            limit: AtomicUsize::new(0),
            inflight: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            queues: Mutex::new(Queues {
                dispatch: config.qos.dispatch,
                max_queue: config.qos.max_queue,
                timeout: config.timeouts.queue,
                clock: 0,
                seq: 0,
                sites: Vec::new(),
            }),
            inflight_gauge: metrics::gauge!(INFLIGHT),
        });
        let slots = admission.configure(config);
        (admission, slots)
    }

    /// Applies `config` (a reload): limit, dispatch order, queue bounds and
    /// each site's rate. Sites are matched by name; a new name gets a new
    /// queue. Returns the slot of each config site, in config order. Queued
    /// requests are dispatched at once if the new limit allows.
    pub fn configure(&self, config: &Config) -> SiteSlots {
        let qos = &config.qos;
        let mut q = self.lock();
        q.dispatch = qos.dispatch;
        q.max_queue = qos.max_queue;
        q.timeout = config.timeouts.queue;
        let slots = config
            .sites
            .iter()
            .map(|site| {
                let vtick = vtick(qos.rate_of(site));
                match q.sites.iter().position(|s| s.name == site.name) {
                    Some(i) => {
                        q.sites[i].vtick = vtick;
                        i
                    }
                    None => {
                        q.sites.push(SiteQueue::new(&site.name, vtick));
                        q.sites.len() - 1
                    }
                }
            })
            .collect();
        self.limit.store(qos.max_inflight, Ordering::SeqCst);
        self.dispatch(&mut q);
        slots
    }

    /// Takes a slot for a request of the site in `slot` (from
    /// [`configure`](Self::configure)), waiting in the site's queue up to
    /// `timeouts.queue` when the proxy is at `qos.max_inflight`. Dropping
    /// the future (the client left) gives the place up; a slot granted in
    /// the meantime is released.
    pub async fn admit(self: &Arc<Self>, slot: usize) -> Result<Permit, Refused> {
        if self.limit.load(Ordering::Relaxed) == 0 {
            return Ok(Permit {
                admission: None,
                queued: false,
            });
        }
        if self.queued.load(Ordering::SeqCst) == 0 && self.try_take() {
            return Ok(self.permit(false));
        }
        let (seq, timeout, granted) = {
            let mut q = self.lock();
            let q = &mut *q;
            let Some(site) = q.sites.get_mut(slot) else {
                // Not a slot of this state: nothing to schedule it by.
                return Ok(Permit {
                    admission: None,
                    queued: false,
                });
            };
            if site.waiting.len() >= q.max_queue {
                return Err(Refused::QueueFull(q.max_queue));
            }
            q.seq += 1;
            let seq = q.seq;
            let tag = q.clock.max(site.last_tag).saturating_add(site.vtick);
            site.last_tag = tag;
            let (grant, granted) = oneshot::channel();
            site.waiting.push_back(Waiter { tag, seq, grant });
            site.queued_gauge.increment(1.0);
            // Registered before looking for a slot (see the module doc).
            self.queued.fetch_add(1, Ordering::SeqCst);
            let timeout = q.timeout;
            self.dispatch(q);
            (seq, timeout, granted)
        };
        let mut place = Place {
            admission: self,
            slot,
            seq,
            granted: Some(granted),
        };
        let wait = place
            .granted
            .as_mut()
            .map(|g| tokio::time::timeout(timeout, g));
        match wait {
            Some(w) => match w.await {
                Ok(Ok(())) => {
                    place.granted = None;
                    Ok(self.permit(true))
                }
                // The sender is only dropped with the state itself.
                Ok(Err(_)) => Err(Refused::Timeout(timeout)),
                Err(_) => match place.leave() {
                    true => Ok(self.permit(true)),
                    false => Err(Refused::Timeout(timeout)),
                },
            },
            None => Err(Refused::Timeout(timeout)),
        }
    }

    /// Slots taken now.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// Requests waiting now, all sites together.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// `qos.max_inflight` in force (0 = no limit).
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::SeqCst)
    }

    /// The `/status` view: limit, order, slots in use, waiting per site.
    pub fn status(&self) -> AdmissionStatus {
        let q = self.lock();
        AdmissionStatus {
            max_inflight: self.limit(),
            dispatch: q.dispatch.as_str(),
            inflight: self.inflight(),
            queued: q
                .sites
                .iter()
                .map(|s| (s.name.clone(), s.waiting.len()))
                .collect(),
        }
    }

    fn permit(self: &Arc<Self>, queued: bool) -> Permit {
        self.inflight_gauge.set(self.inflight() as f64);
        Permit {
            admission: Some(Arc::clone(self)),
            queued,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while holding the lock leaves consistent data (every
        // update is a push or pop); keep serving.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot if one is free.
    fn try_take(&self) -> bool {
        self.inflight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                let limit = self.limit.load(Ordering::SeqCst);
                (limit == 0 || n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        self.inflight.fetch_sub(1, Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) > 0 {
            let mut q = self.lock();
            self.dispatch(&mut q);
        }
        self.inflight_gauge.set(self.inflight() as f64);
    }

    /// Hands free slots to queued requests, best tag first, under the lock.
    fn dispatch(&self, q: &mut Queues) {
        while self.queued.load(Ordering::SeqCst) > 0 {
            let next = match q.dispatch {
                Dispatch::VirtualClock => q.best_by(|w| (w.tag, w.seq)),
                Dispatch::Fifo => q.best_by(|w| (w.seq, 0)),
            };
            let Some(site) = next else {
                return;
            };
            if !self.try_take() {
                return;
            }
            let s = &mut q.sites[site];
            let Some(w) = s.waiting.pop_front() else {
                self.inflight.fetch_sub(1, Ordering::SeqCst);
                return;
            };
            s.queued_gauge.decrement(1.0);
            self.queued.fetch_sub(1, Ordering::SeqCst);
            q.clock = q.clock.max(w.tag);
            if w.grant.send(()).is_err() {
                // The waiter is gone (its removal is waiting for this lock):
                // the slot stays free for the next one.
                self.inflight.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

impl Queues {
    /// The site whose head waiter has the smallest `key`.
    fn best_by(&self, key: impl Fn(&Waiter) -> (u64, u64)) -> Option<usize> {
        self.sites
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.waiting.front().map(|w| (key(w), i)))
            .min()
            .map(|(_, i)| i)
    }
}

impl SiteQueue {
    fn new(name: &str, vtick: u64) -> SiteQueue {
        SiteQueue {
            name: name.to_string(),
            vtick,
            last_tag: 0,
            waiting: VecDeque::new(),
            queued_gauge: metrics::gauge!(QUEUED, "site" => name.to_string()),
        }
    }
}

/// Virtual time between two requests of a site scheduled at `rate`/s.
fn vtick(rate: f64) -> u64 {
    // Config validation keeps rates positive and finite; clamp anyway.
    (UNITS_PER_SECOND / rate.max(1e-6)).clamp(1.0, u64::MAX as f64 / 4.0) as u64
}

/// A queued request's place; leaving it (timeout or the future dropped)
/// removes the waiter, or releases a slot granted at the last moment.
struct Place<'a> {
    admission: &'a Arc<Admission>,
    slot: usize,
    seq: u64,
    /// `None` once the grant was received (the caller owns the slot).
    granted: Option<oneshot::Receiver<()>>,
}

impl Place<'_> {
    /// Leaves the queue. Returns true when a slot had been granted after
    /// all: the caller now holds it.
    fn leave(&mut self) -> bool {
        let Some(mut granted) = self.granted.take() else {
            return false;
        };
        let mut q = self.admission.lock();
        if let Some(site) = q.sites.get_mut(self.slot) {
            if let Some(i) = site.waiting.iter().position(|w| w.seq == self.seq) {
                site.waiting.remove(i);
                // A request that gave up does not use up its site's share:
                // the site's later requests move up into its tag.
                let vtick = site.vtick;
                for w in site.waiting.iter_mut().skip(i) {
                    w.tag = w.tag.saturating_sub(vtick);
                }
                site.last_tag = site.last_tag.saturating_sub(vtick);
                site.queued_gauge.decrement(1.0);
                self.admission.queued.fetch_sub(1, Ordering::SeqCst);
                return false;
            }
        }
        // Not queued any more: dispatch granted it (under this lock, so
        // the grant is already in the channel).
        granted.try_recv().is_ok()
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.leave() {
            // Granted to a request that is gone: pass it on.
            self.admission.release();
        }
    }
}

#[cfg(test)]
mod tests;
