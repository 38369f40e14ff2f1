//! Load collectors and how their numbers are combined.
//!
//! Each configured `[[collector]]` runs as its own background task on its own
//! interval and hands its latest [`Reading`] to a [`Slot`]; the publisher
//! (`sidecar::publish`) only merges slots and writes the window, so the
//! 1 ms publish loop never parses /proc or waits on HTTP. A reading is a
//! *partial* sample: each collector fills the fields it knows, and per field
//! the later collector in config order wins ([`merge`]).
//!
//! A collector that fails (status page down, cgroup gone) keeps its last
//! reading in the slot, counts `rdmalb_sidecar_collector_errors_total`, and
//! logs once per state change (ok → failing, failing → ok), never per tick.

pub mod cgroup;
pub mod push;
pub mod status;
pub mod system;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::config::CollectorConfig;

/// A load-block field a collector can fill: the window's one definition.
pub use rdmalb_window::Field;

/// A partial load sample: the fields one collector knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    values: [u64; Field::ALL.len()],
    known: u16,
}

impl Reading {
    /// Sets one field.
    pub fn set(&mut self, f: Field, v: u64) {
        self.values[f.index()] = v;
        self.known |= 1 << f.index();
    }

    /// Sets one field when the value is known.
    pub fn set_opt(&mut self, f: Field, v: Option<u64>) {
        if let Some(v) = v {
            self.set(f, v);
        }
    }

    /// The field's value, when this reading has it.
    pub fn get(&self, f: Field) -> Option<u64> {
        (self.known & (1 << f.index()) != 0).then(|| self.values[f.index()])
    }

    /// The field's value, zero when unknown.
    pub fn value(&self, f: Field) -> u64 {
        self.get(f).unwrap_or(0)
    }

    /// True when no field is known.
    pub fn is_empty(&self) -> bool {
        self.known == 0
    }

    /// Overlays `other`: each field `other` knows replaces ours.
    pub fn overlay(&mut self, other: &Reading) {
        for f in Field::ALL {
            if let Some(v) = other.get(f) {
                self.set(f, v);
            }
        }
    }
}

/// Combines slots in config order: per field, the last slot that knows it wins.
pub fn merge(slots: &[Arc<Slot>]) -> Reading {
    let mut out = Reading::default();
    for s in slots {
        out.overlay(&s.latest.load());
    }
    out
}

/// Health of one collector as shown in /status.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// The current error, while failing.
    pub error: Option<String>,
    /// When the current state (ok or failing) began.
    pub since: Option<SystemTime>,
    /// Failed samples since start.
    pub errors_total: u64,
    /// Successful samples since start.
    pub samples_total: u64,
}

/// Where a collector leaves its latest reading for the publisher.
#[derive(Debug)]
pub struct Slot {
    /// `kind#index`, e.g. `system#0`: names the collector in logs and metrics.
    pub name: String,
    /// The node's name (metrics label).
    pub node: String,
    latest: ArcSwap<Reading>,
    health: Mutex<Health>,
}

impl Slot {
    /// An empty slot.
    pub fn new(name: String, node: String) -> Arc<Slot> {
        Arc::new(Slot {
            name,
            node,
            latest: ArcSwap::from_pointee(Reading::default()),
            health: Mutex::new(Health::default()),
        })
    }

    /// The latest reading.
    pub fn latest(&self) -> Reading {
        **self.latest.load()
    }

    /// A copy of the collector's health.
    pub fn health(&self) -> Health {
        self.health.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Hands over a successful reading.
    pub fn store(&self, r: Reading) {
        self.latest.store(Arc::new(r));
        self.record_ok();
    }

    /// Drops every field (push expiry): other collectors' values show through.
    pub fn clear(&self) {
        self.latest.store(Arc::new(Reading::default()));
    }

    fn record_ok(&self) {
        let Ok(mut h) = self.health.lock() else {
            return;
        };
        h.samples_total += 1;
        if h.error.take().is_some() || h.since.is_none() {
            if h.since.is_some() {
                tracing::info!(node = %self.node, collector = %self.name, "collector recovered");
            }
            h.since = Some(SystemTime::now());
        }
    }

    /// Records a failed sample; the last reading stays in place.
    pub fn record_error(&self, e: &CollectError) {
        metrics::counter!("rdmalb_sidecar_collector_errors_total",
            "node" => self.node.clone(), "collector" => self.name.clone())
        .increment(1);
        let Ok(mut h) = self.health.lock() else {
            return;
        };
        h.errors_total += 1;
        let text = e.to_string();
        if h.error.is_none() {
            tracing::warn!(node = %self.node, collector = %self.name, error = %text,
                "collector failing; its fields keep their last value");
            h.since = Some(SystemTime::now());
        }
        h.error = Some(text);
    }
}

/// Why one sample failed.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {what}")]
    Parse { path: String, what: String },
    #[error("status page {url}: {detail}")]
    Http { url: String, detail: String },
}

impl CollectError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        CollectError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn parse(path: &std::path::Path, what: impl Into<String>) -> Self {
        CollectError::Parse {
            path: path.display().to_string(),
            what: what.into(),
        }
    }
}

/// Reads a small procfs/sysfs file.
pub(crate) fn read_text(path: &std::path::Path) -> Result<String, CollectError> {
    std::fs::read_to_string(path).map_err(|e| CollectError::io(path, e))
}

/// Starts the polling collectors (system, cgroup, status) as background tasks;
/// `push` collectors are started by [`push::Server`] because they listen.
/// Each task stops when `shutdown` turns true.
pub fn spawn_polling(
    cfg: &CollectorConfig,
    slot: Arc<Slot>,
    shutdown: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    match cfg {
        CollectorConfig::System(c) => {
            let mut col = system::SystemCollector::new(c.clone());
            Some(tokio::spawn(poll(c.interval, slot, shutdown, move || {
                // procfs reads are served from kernel memory in microseconds;
                // they do not block like disk I/O, so they run on the runtime.
                let r = col.sample();
                async move { r }
            })))
        }
        CollectorConfig::Cgroup(c) => {
            let mut col = cgroup::CgroupCollector::new(c.clone());
            Some(tokio::spawn(poll(c.interval, slot, shutdown, move || {
                let r = col.sample();
                async move { r }
            })))
        }
        CollectorConfig::Status(c) => {
            let col = Arc::new(status::StatusCollector::new(c.clone()));
            Some(tokio::spawn(poll(c.interval, slot, shutdown, move || {
                let col = col.clone();
                async move { col.sample().await }
            })))
        }
        CollectorConfig::Push(_) => None,
    }
}

async fn poll<F, Fut>(
    every: Duration,
    slot: Arc<Slot>,
    mut shutdown: watch::Receiver<bool>,
    mut sample: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Reading, CollectError>> + Send,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = rdmalb_base::shutdown::requested(&mut shutdown) => return,
        }
        match sample().await {
            Ok(r) => slot.store(r),
            Err(e) => slot.record_error(&e),
        }
    }
}

#[cfg(test)]
mod tests;
