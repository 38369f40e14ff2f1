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
    /// The published load fields, as the node published them.
    pub published: Option<LoadSample>,
    pub normalised: Option<Normalised>,
    /// Load index the last decision computed (in-flight term included).
    pub index: Option<f64>,
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
                published: o.load.block().map(|b| b.sample),
                normalised: o.load.block().map(|b| Normalised::of(&b.sample)),
                index: o.index,
            }),
        }
    }
}
