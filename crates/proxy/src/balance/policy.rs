//! The policy a [`Backends`](super::Backends) snapshot picks with, built
//! from `global.balance` or a site's `balance`: a [`Selector`] deciding
//! from what the proxy holds (in-flight counts, cursors), or a
//! [`LoadAware`] one, which reads the candidates' windows on the request
//! path (and so may await) before its [`LoadRule`] chooses.
//!
//! [`Policy::of`] is the registry from config name ([`Balance`], whose
//! `parse` and `as_str` hold the names) to implementation: the one place
//! that tells them apart, so neither the traits nor the snapshot name an
//! implementation. Adding a policy: CONTRIBUTING.md.

use std::sync::Arc;

use super::drain::ShortestWait;
use super::hot_cold::HotCold;
use super::least_load::LeastLoad;
use super::load_aware::{LoadAware, LoadRule};
use super::prequal::Prequal;
use super::selector::{First, LeastConn, PeakEwma, RandomTwo, RoundRobin, Selector};
use super::{NodeState, NodeWindows};
use crate::config::{Balance, Config};

/// A snapshot's selection policy.
#[derive(Debug, Clone)]
pub enum Policy {
    /// Decides synchronously: roundrobin, leastconn, random(2), first, or any
    /// other [`Selector`].
    Local(Arc<dyn Selector>),
    /// `weighted-least-load`, `hot-cold`, `shortest-wait`: read node
    /// windows per request.
    LoadAware(Arc<LoadAware>),
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
        let load_aware = |rule: Box<dyn LoadRule>| {
            Policy::LoadAware(Arc::new(LoadAware::new(config, Arc::clone(windows), rule)))
        };
        match balance {
            Balance::RoundRobin => Policy::Local(Arc::new(RoundRobin::new(sites))),
            Balance::LeastConn => Policy::Local(Arc::new(LeastConn::new(sites))),
            Balance::Random => Policy::Local(Arc::new(RandomTwo)),
            Balance::PeakEwma => Policy::Local(Arc::new(PeakEwma)),
            Balance::First => Policy::Local(Arc::new(First)),
            Balance::Prequal => Policy::Local(Arc::new(Prequal::new(sites, Arc::clone(windows)))),
            Balance::WeightedLeastLoad => load_aware(Box::new(LeastLoad)),
            Balance::HotCold => load_aware(Box::new(HotCold::new(sites))),
            Balance::ShortestWait => load_aware(Box::new(ShortestWait {
                drain_window: config.routing.drain_window,
            })),
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
