//! This proxy's requests a node's window cannot show yet.
//!
//! A window block describes the node as of its `updated_at` (at best: the
//! app's numbers may be older still). Requests this proxy sent the node
//! after that are in the node, or on their way, but not in the block; a
//! proxy that picks by the block alone keeps choosing the node that looked
//! least loaded until the node publishes again, and the requests it sends
//! meanwhile pile up there. `leastconn` never has that blind spot for its
//! own requests (its count moves at once) but sees nothing of the other
//! proxies'. The window policies combine both: the node's exact published
//! state, plus this proxy's own requests dispatched to it after the block's
//! `updated_at`, counted at most up to this proxy's in-flight count to the
//! node (a request already answered is not load any more), added to the
//! block's busy workers (up to the capacity) and then its queue
//! ([`with_unseen`]).
//!
//! Each node's window keeps the times of this proxy's last [`RING`]
//! dispatches to it ([`Dispatches`]); a decision counts those after the
//! block's `updated_at`, newest first, stopping at the first older one.
//! The comparison uses the proxy's clock against the publisher's (as the
//! staleness bound does): keep hosts NTP-synchronised. A proxy clock
//! behind the node's sees fewer unseen requests (down to none: the
//! behaviour without this count), one ahead sees more, never more than its
//! in-flight requests to the node.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rdmalb_window::LoadSample;

/// Dispatch times kept per node: more requests than this sent to one node
/// within one block's age count as this many (the in-flight count bounds
/// the sum anyway).
pub const RING: usize = 32;

/// The times (ns since the Unix epoch, proxy clock) of this proxy's last
/// [`RING`] dispatches to one node.
#[derive(Debug)]
pub struct Dispatches {
    at: [AtomicU64; RING],
    next: AtomicUsize,
}

impl Default for Dispatches {
    fn default() -> Self {
        Dispatches {
            at: std::array::from_fn(|_| AtomicU64::new(0)),
            next: AtomicUsize::new(0),
        }
    }
}

impl Dispatches {
    /// Records one dispatch decided at `at_ns`.
    pub fn record(&self, at_ns: u64) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % RING;
        self.at[i].store(at_ns, Ordering::Relaxed);
    }

    /// Dispatches recorded after `after_ns`, newest first, stopping at the
    /// first one at or before it (concurrent decisions may land a few
    /// microseconds out of order; the count is a lower bound then).
    pub fn since(&self, after_ns: u64) -> usize {
        self.since_at_most(after_ns, RING)
    }

    /// [`Dispatches::since`], at most `most`: the scan stops there, so a
    /// node with few requests in flight costs a decision few loads (a
    /// block is a millisecond old, and the ring's newest entries are
    /// usually all after it).
    pub fn since_at_most(&self, after_ns: u64, most: usize) -> usize {
        let newest = self.next.load(Ordering::Relaxed);
        let most = most.min(RING).min(newest);
        let mut n = 0;
        while n < most {
            let i = (newest - 1 - n) % RING;
            if self.at[i].load(Ordering::Relaxed) <= after_ns {
                break;
            }
            n += 1;
        }
        n
    }
}

/// This proxy's requests to a node that a block published at `updated_ns`
/// cannot show: those dispatched after it, at most `inflight`.
pub fn unseen(d: &Dispatches, updated_ns: u64, inflight: usize) -> u64 {
    d.since_at_most(updated_ns, inflight) as u64
}

/// `s` with `unseen` more requests: on free workers first (up to the
/// capacity), then in the queue; without a capacity, busy.
pub fn with_unseen(s: &LoadSample, unseen: u64) -> LoadSample {
    if unseen == 0 {
        return *s;
    }
    let mut out = *s;
    let free = if s.app_capacity > 0 {
        s.app_capacity.saturating_sub(s.app_busy)
    } else {
        u64::MAX
    };
    let on_workers = unseen.min(free);
    out.app_busy = s.app_busy.saturating_add(on_workers);
    out.app_queue_len = s.app_queue_len.saturating_add(unseen - on_workers);
    out
}

#[cfg(test)]
mod tests;
