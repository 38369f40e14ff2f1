//! The policy a [`Backends`](super::Backends) snapshot picks with, built
//! from `global.balance`: a baseline [`Selector`] deciding from what the
//! proxy holds (in-flight counts, cursors), or the load-aware
//! [`WeightedLeastLoad`], which reads the candidates' windows on the request
//! path and so may await. The one place that tells them apart, so neither
//! the trait nor the snapshot names an implementation.

use std::sync::Arc;

use super::least_load::WeightedLeastLoad;
use super::prequal::Prequal;
use super::selector::{LeastConn, PeakEwma, RandomTwo, RoundRobin, Selector};
use super::{NodeState, NodeWindows};
use crate::config::{Balance, Config};

/// A snapshot's selection policy.
#[derive(Debug, Clone)]
pub enum Policy {
    /// Decides synchronously: roundrobin, leastconn, random(2), or any
    /// other [`Selector`].
    Local(Arc<dyn Selector>),
    /// `weighted-least-load`, `hot-cold`, `shortest-wait`: read node
    /// windows per request.
    LoadAware(Arc<WeightedLeastLoad>),
}

impl Policy {
    /// The policy `config.global.balance` names; the load-aware one reads
    /// node loads through `windows`.
    pub fn from_config(config: &Config, windows: &Arc<NodeWindows>) -> Policy {
        Self::of(config.global.balance, config, windows)
    }

    /// The policy `balance` names (`global.balance` or a site's own).
    pub fn of(balance: Balance, config: &Config, windows: &Arc<NodeWindows>) -> Policy {
        let sites = config.sites.len();
        match balance {
            Balance::RoundRobin => Policy::Local(Arc::new(RoundRobin::new(sites))),
            Balance::LeastConn => Policy::Local(Arc::new(LeastConn::new(sites))),
            Balance::Random => Policy::Local(Arc::new(RandomTwo)),
            Balance::PeakEwma => Policy::Local(Arc::new(PeakEwma)),
            Balance::Prequal => Policy::Local(Arc::new(Prequal::new(sites, Arc::clone(windows)))),
            Balance::WeightedLeastLoad | Balance::HotCold | Balance::ShortestWait => {
                Policy::LoadAware(Arc::new(WeightedLeastLoad::for_balance(
                    config,
                    Arc::clone(windows),
                    balance,
                )))
            }
        }
    }

    /// Name shown in `/status` (`roundrobin`, `leastconn`, `random`, …).
    pub fn name(&self) -> &'static str {
        self.selector().name()
    }

    /// The policy as a synchronous [`Selector`] (the load-aware one then
    /// scores interval snapshots or the last read it saw).
    pub fn selector(&self) -> &dyn Selector {
        match self {
            Policy::Local(s) => s.as_ref(),
            Policy::LoadAware(w) => w.as_ref(),
        }
    }

    /// Chooses among `candidates` on the request path: the load-aware
    /// policy reads their windows first, the others decide at once.
    pub async fn select(
        &self,
        site: usize,
        candidates: &[Arc<NodeState>],
    ) -> Option<Arc<NodeState>> {
        match self {
            Policy::Local(s) => s.select(site, candidates),
            Policy::LoadAware(w) => w.select_loaded(site, candidates).await,
        }
    }
}

impl From<Arc<dyn Selector>> for Policy {
    fn from(s: Arc<dyn Selector>) -> Self {
        Policy::Local(s)
    }
}
