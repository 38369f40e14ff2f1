//! The publisher: a dedicated OS thread that, every `publish_interval`,
//! merges the collectors' latest readings and writes the load block with the
//! seqlock protocol (`rdmalb_window::seqlock::publish`) and a CLOCK_REALTIME
//! timestamp.
//!
//! Why a thread and not a tokio task: at the default 1 ms interval the loop
//! must not queue behind HTTP scrapes or admin requests on the runtime, and
//! tokio's timer wheel has 1 ms granularity, which would round every tick up
//! to 2 ms. The loop does no I/O and no allocation: a handful of atomic loads
//! (one `ArcSwap` load per collector) and 14 atomic stores. Its CPU cost is
//! measured in `docs/sidecar.md`.
//!
//! Each tick it also compares the role word with the last value it saw and,
//! when a proxy changed it, wakes the role watcher ([`super::role`]): one
//! more atomic load per tick instead of a second 1 ms timer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::collect::{self, Field, Reading, Slot};
use super::{SidecarConfig, SidecarError};
use rdmalb_window::layout::word;
use rdmalb_window::{seqlock, LoadSample, WindowMemory};

/// Counters the admin endpoint reports.
#[derive(Debug, Default)]
pub struct PublishStats {
    /// Load blocks written since start.
    pub publishes: AtomicU64,
    /// Ticks that started more than one interval late (the thread was not
    /// scheduled in time: a sign of CPU starvation on the node).
    pub late_ticks: AtomicU64,
}

/// Maps a merged reading onto the load block's fields (unknown → 0).
pub fn to_load_sample(r: &Reading) -> LoadSample {
    let mut s = LoadSample::default();
    for f in Field::ALL {
        f.set(&mut s, r.value(f));
    }
    s
}

/// The running publisher thread.
#[derive(Debug)]
pub struct Publisher {
    /// Dropping the sender wakes the thread's timed wait immediately.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    stats: Arc<PublishStats>,
}

impl Publisher {
    /// Publishes once right away (so a reader never finds an initialised
    /// header without a valid block), then starts the thread. `role_changed`
    /// is notified on every tick that finds the role word changed.
    pub fn start(
        cfg: &SidecarConfig,
        memory: Arc<WindowMemory>,
        slots: Vec<Arc<Slot>>,
        role_changed: Arc<Notify>,
    ) -> Result<Publisher, SidecarError> {
        let stats = Arc::new(PublishStats::default());
        let (stop, stopped) = mpsc::channel::<()>();
        let interval = cfg.publish_interval;
        seqlock::publish(&memory, &to_load_sample(&collect::merge(&slots)));
        stats.publishes.fetch_add(1, Ordering::Relaxed);
        let st = stats.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rdmalb-publish-{}", cfg.node_id))
            .spawn(move || publish_loop(interval, &memory, &slots, &st, &role_changed, &stopped))
            .map_err(|source| SidecarError::Thread {
                node: cfg.node.clone(),
                source,
            })?;
        Ok(Publisher {
            stop: Some(stop),
            thread: Some(thread),
            stats,
        })
    }

    /// Shared counters.
    pub fn stats(&self) -> Arc<PublishStats> {
        self.stats.clone()
    }

    /// Stops the thread and waits for it (at most one tick of work).
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // Without `stop`, the closed channel still ends the loop; we just do
        // not wait for it.
        self.stop.take();
    }
}

fn publish_loop(
    interval: Duration,
    memory: &WindowMemory,
    slots: &[Arc<Slot>],
    stats: &PublishStats,
    role_changed: &Notify,
    stopped: &mpsc::Receiver<()>,
) {
    let mut next = Instant::now() + interval;
    let mut role = memory.load(word::ROLE);
    loop {
        let now = Instant::now();
        if next > now {
            match stopped.recv_timeout(next - now) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Disconnected (or a message): stop.
                _ => return,
            }
        }
        let sample = to_load_sample(&collect::merge(slots));
        seqlock::publish(memory, &sample);
        stats.publishes.fetch_add(1, Ordering::Relaxed);
        let now_role = memory.load(word::ROLE);
        if now_role != role {
            role = now_role;
            // Stores a permit when the watcher is busy: never lost.
            role_changed.notify_one();
        }
        next += interval;
        let now = Instant::now();
        if now > next + interval {
            // Fell behind (descheduled): skip the missed ticks rather than
            // publishing a burst of identical blocks.
            stats.late_ticks.fetch_add(1, Ordering::Relaxed);
            next = now + interval;
        }
    }
}

#[cfg(test)]
mod tests;
