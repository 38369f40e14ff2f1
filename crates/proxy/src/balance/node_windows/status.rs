//! What `/status` shows of a node's window: transport, read mode,
//! connection state and the last load read with its normalised indices and
//! index ([`LoadStatus`]).

use std::time::{Duration, SystemTime};

use super::{LinkState, NodeWindow};
use crate::balance::load::{Normalised, Unknown};
use rdmalb_window::LoadSample;

/// A node's window in /status.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadStatus {
    pub transport: &'static str,
    /// `per-request` or `interval:<d>`.
    pub mode: String,
    pub connection: LinkState,
    /// The last load read a decision (or the interval reader) saw.
    pub last: Option<LastRead>,
}

/// One load read in /status.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LastRead {
    /// How long ago the read completed, ms.
    pub read_age_ms: f64,
    /// `fresh`, or why the node was scored locally (`stale`, `torn`, …).
    pub result: &'static str,
    /// Age of the block when it was read, ms.
    pub block_age_ms: Option<f64>,
    pub seq: Option<u64>,
    pub published: Option<Published>,
    pub normalised: Option<Normalised>,
    /// Load index the last decision computed (in-flight term included).
    pub index: Option<f64>,
}

/// The published load fields, as /status shows them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Published {
    pub cpu_util_ppm: u64,
    pub run_queue_milli: u64,
    pub mem_used_ppm: u64,
    pub net_rx_bps: u64,
    pub net_tx_bps: u64,
    pub active_connections: u64,
    pub irq_rate: u64,
    pub app_busy: u64,
    pub app_capacity: u64,
    pub app_queue_len: u64,
    pub requests_total: u64,
}

impl From<&LoadSample> for Published {
    fn from(s: &LoadSample) -> Self {
        Published {
            cpu_util_ppm: s.cpu_util_ppm,
            run_queue_milli: s.run_queue_milli,
            mem_used_ppm: s.mem_used_ppm,
            net_rx_bps: s.net_rx_bps,
            net_tx_bps: s.net_tx_bps,
            active_connections: s.active_connections,
            irq_rate: s.irq_rate,
            app_busy: s.app_busy,
            app_capacity: s.app_capacity,
            app_queue_len: s.app_queue_len,
            requests_total: s.requests_total,
        }
    }
}

impl NodeWindow {
    /// What /status shows for this node.
    pub fn status(&self) -> LoadStatus {
        let now = SystemTime::now();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        LoadStatus {
            transport: self.transport(),
            mode: self.settings().mode.to_string(),
            connection: self.state(),
            last: self.last().map(|o| LastRead {
                read_age_ms: ms(now.duration_since(o.at).unwrap_or_default()),
                result: o.load.unknown().map_or("fresh", Unknown::label),
                block_age_ms: o.load.block().map(|b| ms(b.age(o.at))),
                seq: o.load.block().map(|b| b.seq),
                published: o.load.block().map(|b| Published::from(&b.sample)),
                normalised: o.load.block().map(|b| Normalised::of(&b.sample)),
                index: o.index,
            }),
        }
    }
}
