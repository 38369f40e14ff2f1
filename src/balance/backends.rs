//! The immutable per-snapshot view of the backend set: which nodes serve
//! which site, the selection policy, and what the health checker needs
//! (thresholds, per-site check path and Host).
//!
//! Built from a [`Config`] on start and on every reload, then swapped in with
//! `ArcSwap` (pingora-load-balancing builds its selector the same way).
//! Node runtime state ([`NodeState`]: health, in-flight) is carried over for
//! nodes whose name and address did not change, so a reload neither resets a
//! down node to up nor loses the in-flight counts of running requests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use super::node::Thresholds;
use super::selector::{self, Selector};
use super::{NodeState, Pick};
use crate::config::{Config, HealthCheck, HostPattern};

/// Why no node could be picked for a site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoNode {
    /// The site has no nodes at all (or the site index is unknown).
    #[error("site has no nodes")]
    Empty,
    /// The site has nodes but none is up.
    #[error("no node of the site is up")]
    AllDown,
    /// Some nodes are up but every one of them was already tried by this
    /// request.
    #[error("every up node of the site was already tried")]
    Exhausted,
}

/// One site as the balancer sees it.
#[derive(Debug)]
pub struct SiteBackends {
    pub index: usize,
    pub name: String,
    /// Path the active checks GET on this site's nodes.
    pub health_path: String,
    /// `Host` header of the checks: the site's first exact host name, or
    /// `None` to use the node's address.
    pub check_host: Option<String>,
    nodes: Vec<Arc<NodeState>>,
}

impl SiteBackends {
    /// This site's nodes in config order (up or down).
    pub fn nodes(&self) -> &[Arc<NodeState>] {
        &self.nodes
    }
}

/// Immutable snapshot: nodes per site plus the selector. Selecting is cheap
/// and takes no locks.
#[derive(Debug)]
pub struct Backends {
    nodes: Vec<Arc<NodeState>>,
    sites: Vec<SiteBackends>,
    selector: Arc<dyn Selector>,
    health: HealthCheck,
    built_at: SystemTime,
}

impl Backends {
    /// Builds the snapshot for `config` with the selector its `balance`
    /// setting names, reusing the runtime state of `previous` for nodes
    /// whose (name, address) are unchanged.
    pub fn build(config: &Config, previous: Option<&Backends>) -> Backends {
        let selector = selector::from_config(config.global.balance, config.sites.len());
        Self::with_selector(config, previous, selector)
    }

    /// Like [`build`](Self::build) with an explicit selection policy (the
    /// load-aware policy, tests).
    pub fn with_selector(
        config: &Config,
        previous: Option<&Backends>,
        selector: Arc<dyn Selector>,
    ) -> Backends {
        let thresholds = Thresholds::from_config(&config.health);
        let old: HashMap<(&str, SocketAddr), &Arc<NodeState>> = previous
            .map(|p| {
                p.nodes
                    .iter()
                    .map(|n| ((n.name.as_str(), n.address), n))
                    .collect()
            })
            .unwrap_or_default();

        let nodes: Vec<Arc<NodeState>> = config
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let site = n.site.and_then(|s| {
                    config.sites.get(s).map(|site| (s, site.name.clone()))
                });
                let node = match old.get(&(n.name.as_str(), n.address)) {
                    Some(prev) if prev.index == i && prev.site == site.as_ref().map(|s| s.0) => {
                        Arc::clone(prev)
                    }
                    Some(prev) => Arc::new(prev.relocated(i, site)),
                    None => Arc::new(NodeState::new(i, n.name.clone(), n.address, site, thresholds)),
                };
                node.set_thresholds(thresholds);
                node
            })
            .collect();

        let sites = config
            .sites
            .iter()
            .enumerate()
            .map(|(s, site)| SiteBackends {
                index: s,
                name: site.name.clone(),
                health_path: site.health_path.clone(),
                check_host: site.hosts.iter().find_map(|h| match h {
                    HostPattern::Exact(name) => Some(name.clone()),
                    HostPattern::Wildcard(_) => None,
                }),
                nodes: nodes
                    .iter()
                    .filter(|n| n.site == Some(s))
                    .cloned()
                    .collect(),
            })
            .collect();

        Backends {
            nodes,
            sites,
            selector,
            health: config.health.clone(),
            built_at: SystemTime::now(),
        }
    }

    /// Picks an up node of `site` that is not in `exclude` (indices of nodes
    /// this request already tried) and takes an in-flight slot on it.
    pub fn pick(&self, site: usize, exclude: &[usize]) -> Result<Pick, NoNode> {
        let all = self.nodes_of(site);
        if all.is_empty() {
            return Err(NoNode::Empty);
        }
        let usable = |n: &Arc<NodeState>| n.is_up() && !exclude.contains(&n.index);
        // Common case: every node usable, so hand the snapshot's slice over
        // without allocating.
        let chosen = if all.iter().all(usable) {
            self.selector.select(site, all)
        } else {
            let candidates: Vec<Arc<NodeState>> = all.iter().filter(|n| usable(n)).cloned().collect();
            if candidates.is_empty() {
                return Err(if all.iter().any(|n| n.is_up()) {
                    NoNode::Exhausted
                } else {
                    NoNode::AllDown
                });
            }
            self.selector.select(site, &candidates)
        };
        // A selector returns None only for no candidates; treat a misbehaving
        // custom policy as "nothing available" rather than panicking.
        chosen.map(Pick::acquire).ok_or(NoNode::AllDown)
    }

    /// Every node of the snapshot in config order (including idle-pool ones).
    pub fn nodes(&self) -> &[Arc<NodeState>] {
        &self.nodes
    }

    /// The nodes serving `site` in config order (empty for an unknown site).
    pub fn nodes_of(&self, site: usize) -> &[Arc<NodeState>] {
        self.sites.get(site).map(|s| &s.nodes[..]).unwrap_or(&[])
    }

    /// The sites in config order.
    pub fn sites(&self) -> &[SiteBackends] {
        &self.sites
    }

    /// The site a node serves, if any.
    pub fn site_of(&self, node: &NodeState) -> Option<&SiteBackends> {
        node.site.and_then(|s| self.sites.get(s))
    }

    /// Selection policy name (`roundrobin`, `leastconn`, `random`, …).
    pub fn balance(&self) -> &'static str {
        self.selector.name()
    }

    /// The selection policy in force.
    pub fn selector(&self) -> &Arc<dyn Selector> {
        &self.selector
    }

    /// `[health]` settings of this snapshot.
    pub fn health(&self) -> &HealthCheck {
        &self.health
    }

    /// When this snapshot was built (config load time).
    pub fn built_at(&self) -> SystemTime {
        self.built_at
    }

    /// The node of this snapshot that is the same node as `node` (shares its
    /// runtime state), if it is still configured.
    pub fn find_same(&self, node: &NodeState) -> Option<&Arc<NodeState>> {
        self.nodes.iter().find(|n| n.same_node(node))
    }
}

#[cfg(test)]
#[path = "backends_tests.rs"]
mod tests;
