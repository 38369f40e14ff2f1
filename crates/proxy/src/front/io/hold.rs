//! HTTP/2 write coalescing. hyper's HTTP/2 connection writes and flushes
//! whatever frames are ready each time its task runs, and the responses of
//! concurrent streams become ready one by one, as each node answers; h2 also
//! flushes before it queues the next frame after every DATA frame of more
//! than 256 bytes (it writes those from the body's own buffer). Without help
//! every response becomes its own TLS record and its own system call. On an
//! HTTP/2 connection this wrapper therefore keeps written bytes, and a flush
//! only marks them as waiting for the end of the worker's current hold
//! epoch: the flush reports success at once (so h2 goes on queueing the
//! frames of other streams), and the epoch ends when the worker has no task
//! left to run, just before its runtime would wait for I/O ([`flush_held`],
//! the runtime's `on_thread_park` hook), or, on a worker that never runs out
//! of work, once the epoch is `MAX_HOLD` old. Then every waiting connection
//! is woken, and its next flush writes everything it holds in one write.
//! An idle worker ends the epoch right after the task that wrote: no delay.

use std::cell::RefCell;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// The longest a held write waits on a worker that stays busy. Checked
/// whenever a client connection of the worker reads or flushes.
pub(super) const MAX_HOLD: Duration = Duration::from_millis(1);

/// The worker's hold epoch: the connections with held writes (their
/// tasks' wakers), when the first of them came, and the epoch's number.
struct Held {
    /// This thread's runtime calls [`flush_held`] before it parks.
    enabled: bool,
    epoch: u64,
    since: Option<Instant>,
    wakers: Vec<Waker>,
}

thread_local! {
    static HELD: RefCell<Held> = const {
        RefCell::new(Held {
            enabled: false,
            epoch: 0,
            since: None,
            wakers: Vec::new(),
        })
    };
}

/// Marks the current thread as one whose runtime calls [`flush_held`]
/// before it parks (the workers: see `front::run`); on any other thread
/// an HTTP/2 connection writes at every flush.
pub fn hold_writes_until_park() {
    HELD.with(|h| h.borrow_mut().enabled = true);
}

/// Ends the worker's hold epoch: wakes every connection that holds writes
/// for it. The workers' runtimes call it when they run out of tasks, before
/// they wait for I/O (`on_thread_park`); woken tasks make the runtime poll
/// for I/O without blocking and run them first.
pub fn flush_held() {
    let wakers = HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.wakers.is_empty() {
            return Vec::new();
        }
        h.epoch = h.epoch.wrapping_add(1);
        h.since = None;
        std::mem::take(&mut h.wakers)
    });
    for w in wakers {
        w.wake();
    }
}

/// Ends an epoch older than [`MAX_HOLD`].
pub(super) fn expire_held() {
    let due = HELD.with(|h| {
        let h = h.borrow();
        h.since.is_some_and(|s| s.elapsed() >= MAX_HOLD)
    });
    if due {
        flush_held();
    }
}

/// Whether a flush with held bytes writes now (true) or waits for the end
/// of the worker's hold epoch, registering the task once per epoch.
/// `held`: the epoch the connection's bytes wait for.
pub(super) fn flush_now(held: &mut Option<u64>, cx: &Context<'_>) -> bool {
    let expired = HELD.with(|h| {
        let mut h = h.borrow_mut();
        if !h.enabled {
            return None;
        }
        match *held {
            Some(e) if e != h.epoch => None,
            Some(_) => Some(h.since.is_some_and(|s| s.elapsed() >= MAX_HOLD)),
            None => {
                h.wakers.push(cx.waker().clone());
                if h.since.is_none() {
                    h.since = Some(Instant::now());
                }
                *held = Some(h.epoch);
                Some(false)
            }
        }
    });
    match expired {
        None => true,
        Some(false) => false,
        Some(true) => {
            flush_held();
            true
        }
    }
}
