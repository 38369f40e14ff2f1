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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use super::control::Configured;
use super::hash::HashTable;
use super::node::{Slots, Thresholds, HEALTH_EPOCH};
use super::policy::Policy;
use super::sticky::{self, LoadBound, Pinned};
use super::{NodeState, NodeWindows, Pick};
use crate::config::{
    AgentCheck, Balance, Config, HashBalance, HealthCheck, HostPattern, LoadWeights, SendProxy,
    Sticky,
};

/// What a request brings to its pick beyond the site: its hash key (sites
/// with a hash `balance`) and the node its persistence cookie names
/// (sites with `[site.sticky]`). The default (nothing) is the plain pick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PickKey {
    /// The key's hash; `None`: the request has no key (round robin over
    /// the hash table, as HAProxy).
    pub hash: Option<u32>,
    /// Index of the node the request's cookie names.
    pub pinned: Option<usize>,
}

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

/// Why [`Backends::pick_queued`] found no node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    #[error(transparent)]
    NoNode(#[from] NoNode),
    /// Every usable node stayed at `limits.max_inflight_per_node` for
    /// `timeouts.queue`.
    #[error("every node of the site stayed busy for {}", rdmalb_base::duration::format(*.0))]
    QueueTimeout(Duration),
}

/// Waiters re-check at least this often even without a release notice, so a
/// node coming back up (which releases nothing) is noticed.
const QUEUE_RECHECK: Duration = Duration::from_millis(50);

/// Tries before a pick that keeps losing the race for a node's last slot
/// reports "full" and waits.
const RACE_RETRIES: usize = 4;

/// A pick's candidates: the site's cached up-list, or a filtered copy when
/// the request excluded some of its nodes.
enum Candidates {
    Cached(arc_swap::Guard<Arc<UpList>>),
    Filtered(Vec<Arc<NodeState>>),
}

impl Candidates {
    fn nodes(&self) -> &[Arc<NodeState>] {
        match self {
            Candidates::Cached(up) => &up.nodes,
            Candidates::Filtered(v) => v,
        }
    }
}

/// Outcome of one non-waiting attempt under the in-flight limit.
enum Limited {
    Got(Pick),
    Full,
    None(NoNode),
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
    /// Requests waiting for a slot; carried across reloads by site name so
    /// releases of picks made on an older snapshot still wake them.
    slots: Arc<Slots>,
    /// The site's up nodes as of a health epoch, rebuilt on the first pick
    /// after any up/down change, so a pick neither scans every node's health
    /// nor allocates while some node is down.
    up: ArcSwap<UpList>,
    /// The site's own policy (its `balance`, else `global.balance`).
    policy: Policy,
    /// `balance` by hash key, with HAProxy's server id of each of `nodes`
    /// and the gcd of their configured weights (the map's divisor).
    hash: Option<(HashBalance, Vec<u32>, u32)>,
    /// `[site.sticky]`, with each of `nodes`' cookie value.
    sticky: Option<(Sticky, Vec<Option<Box<str>>>)>,
    weights: LoadWeights,
}

/// Up nodes of one site (config order) and the health epoch they reflect.
#[derive(Debug)]
struct UpList {
    epoch: u64,
    nodes: Vec<Arc<NodeState>>,
    /// The same nodes laid out for a hash balance.
    hash: Option<HashTable>,
}

impl SiteBackends {
    /// The nodes that may serve this site, in config order (up or down):
    /// its configured nodes plus every node with a sidecar window (those
    /// follow their role word, see [`NodeState::serves`]).
    pub fn nodes(&self) -> &[Arc<NodeState>] {
        &self.nodes
    }

    /// The site's up nodes, rebuilt when a node changed state since the
    /// cached list was made. A change racing with a pick may be seen one
    /// pick late, exactly as if the pick had read that node's state a moment
    /// earlier.
    fn up_list(&self) -> arc_swap::Guard<Arc<UpList>> {
        // Read the epoch before the states: a change after this read bumps
        // the epoch again, so a list built now is never mistaken for newer.
        let epoch = HEALTH_EPOCH.load(Ordering::Acquire);
        let cached = self.up.load();
        if cached.epoch == epoch {
            return cached;
        }
        let usable = || {
            self.nodes
                .iter()
                .filter(|n| n.admits() && n.serves(self.index))
        };
        // Backups only while no other node can take requests.
        let mut nodes: Vec<Arc<NodeState>> = usable().filter(|n| !n.is_backup()).cloned().collect();
        if nodes.is_empty() {
            nodes = usable().cloned().collect();
        }
        let hash = self.hash.as_ref().map(|(conf, ids, gcd)| {
            let id = |i: usize| {
                let pos = self.nodes.iter().position(|n| Arc::ptr_eq(n, &nodes[i]));
                pos.map_or(0, |p| ids[p])
            };
            HashTable::build(conf, &nodes, id, *gcd)
        });
        let fresh = Arc::new(UpList { epoch, nodes, hash });
        self.up.store(Arc::clone(&fresh));
        arc_swap::Guard::from_inner(fresh)
    }
}

/// Immutable snapshot: nodes per site plus the selector. Selecting is cheap
/// and takes no locks.
#[derive(Debug)]
pub struct Backends {
    nodes: Vec<Arc<NodeState>>,
    sites: Vec<SiteBackends>,
    policy: Policy,
    health: HealthCheck,
    /// `[[node]] send_proxy` by node index: the header health checks send.
    send_proxy: Vec<Option<SendProxy>>,
    /// `[[node]] agent_port` … by node index: the agent-checks to run.
    agents: Vec<Option<AgentCheck>>,
    /// `limits.max_inflight_per_node` (0 = unlimited).
    max_inflight: usize,
    /// Whether some node may have a cap of its own (`[[node]]
    /// max_inflight`, or an agent-check that may send `maxconn:`).
    own_limits: bool,
    /// `timeouts.queue`.
    queue: Duration,
    built_at: SystemTime,
    /// What hash bounds and sticky load bounds read.
    windows: Arc<NodeWindows>,
    bound: LoadBound,
}

impl Backends {
    /// Builds the snapshot for `config` with the selector its `balance`
    /// setting names, reusing the runtime state of `previous` for nodes
    /// whose (name, address) are unchanged.
    pub fn build(config: &Config, previous: Option<&Backends>) -> Backends {
        Self::build_with_windows(config, previous, &NodeWindows::none())
    }

    /// Like [`build`](Self::build); the `weighted-least-load` policy reads
    /// node loads through `windows` (with [`build`](Self::build) it has no
    /// windows and scores every node from its in-flight count).
    pub fn build_with_windows(
        config: &Config,
        previous: Option<&Backends>,
        windows: &Arc<NodeWindows>,
    ) -> Backends {
        let policy = Policy::from_config(config, windows);
        let mut b = Self::with_policy(config, previous, policy);
        b.windows = Arc::clone(windows);
        // One policy per algorithm the sites name (their state is sized
        // for every site), shared by those sites.
        let mut built: Vec<(Balance, Policy)> = vec![(config.global.balance, b.policy.clone())];
        for (sb, site) in b.sites.iter_mut().zip(&config.sites) {
            let Some(balance) = site.balance.policy else {
                continue;
            };
            let policy = match built.iter().find(|(x, _)| *x == balance) {
                Some((_, p)) => p.clone(),
                None => {
                    let p = Policy::of(balance, config, windows);
                    built.push((balance, p.clone()));
                    p
                }
            };
            sb.policy = policy;
        }
        b
    }

    /// Like [`build`](Self::build) with an explicit selection policy
    /// (tests, benchmarks; a [`Selector`](super::Selector) converts with
    /// `.into()`).
    pub fn with_policy(config: &Config, previous: Option<&Backends>, policy: Policy) -> Backends {
        let slots = site_slots(config, previous);
        let nodes = node_states(config, previous, &slots);
        let sites = site_backends(config, &nodes, &slots, &policy);
        Backends {
            bound: LoadBound::new(nodes.len()),
            windows: NodeWindows::none(),
            nodes,
            sites,
            policy,
            health: config.health.clone(),
            send_proxy: config.nodes.iter().map(|n| n.send_proxy).collect(),
            agents: config.nodes.iter().map(|n| n.agent).collect(),
            max_inflight: config.limits.max_inflight_per_node,
            own_limits: config
                .nodes
                .iter()
                .any(|n| n.max_inflight.is_some() || n.agent.is_some()),
            queue: config.timeouts.queue,
            built_at: SystemTime::now(),
        }
    }

    /// Picks an up node of `site` that is not in `exclude` (indices of nodes
    /// this request already tried) and takes an in-flight slot on it,
    /// ignoring `limits.max_inflight_per_node` (see [`pick_queued`](Self::pick_queued)).
    pub fn pick(&self, site: usize, exclude: &[usize]) -> Result<Pick, NoNode> {
        self.pick_keyed(site, exclude, &PickKey::default(), None)
    }

    /// The policy of `site` (the global one for an unknown index).
    fn site_policy(&self, site: usize) -> &Policy {
        self.sites.get(site).map_or(&self.policy, |s| &s.policy)
    }

    /// The choice a hash balance or a session leaving its node makes
    /// (`Some`), or `None` when the site's policy decides.
    fn choose_keyed(
        &self,
        site: usize,
        candidates: &[Arc<NodeState>],
        key: &PickKey,
        left: Option<(usize, Pinned)>,
    ) -> Option<Option<Arc<NodeState>>> {
        let sb = self.sites.get(site)?;
        if let Some((node, Pinned::Left(why))) = left {
            if why != sticky::Move::Down {
                // The load bound: to the least-loaded node.
                return Some(sticky::least_loaded(
                    candidates,
                    node,
                    &self.windows,
                    &sb.weights,
                ));
            }
        }
        sb.hash.as_ref()?;
        let up = sb.up_list();
        let table = up.hash.as_ref()?;
        let allowed = |n: &NodeState| candidates.iter().any(|c| c.index == n.index);
        Some(table.pick(key.hash, allowed, &self.windows))
    }

    /// The node of `site` whose sticky cookie value is `value`.
    pub fn cookie_node(&self, site: usize, value: &[u8]) -> Option<usize> {
        let (_, cookies) = self.sites.get(site)?.sticky.as_ref()?;
        let sb = &self.sites[site];
        cookies
            .iter()
            .position(|c| c.as_deref().is_some_and(|c| c.as_bytes() == value))
            .map(|i| sb.nodes[i].index)
    }

    /// The sticky cookie value of `node` in `site` (what an inserted
    /// cookie carries), `None` when it has none.
    pub fn node_cookie(&self, site: usize, node: usize) -> Option<&str> {
        let sb = self.sites.get(site)?;
        let (_, cookies) = sb.sticky.as_ref()?;
        let i = sb.nodes.iter().position(|n| n.index == node)?;
        cookies[i].as_deref()
    }

    /// `[site.sticky]` of `site`.
    pub fn sticky(&self, site: usize) -> Option<&Sticky> {
        self.sites.get(site)?.sticky.as_ref().map(|(s, _)| s)
    }

    /// Whether `site` balances by hash key.
    pub fn hashes(&self, site: usize) -> Option<&HashBalance> {
        self.sites.get(site)?.hash.as_ref().map(|(h, _, _)| h)
    }

    /// The node a request's cookie named, if it keeps the request: a slot
    /// taken on it (`Ok`), or why the session leaves it (`Err`). `None`:
    /// the node was already tried by this request (a retry balances).
    fn pinned(&self, site: usize, node: usize, exclude: &[usize]) -> Option<Result<Pick, Pinned>> {
        if exclude.contains(&node) {
            return None;
        }
        let sb = self.sites.get(site)?;
        let (conf, _) = sb.sticky.as_ref()?;
        let n = self.nodes.get(node)?;
        match sticky::keep(n, site, conf, &self.bound, &self.windows, &sb.weights) {
            // HAProxy sends a persistent request to its server even when
            // the server is at its maxconn (it queues there): no limit.
            Pinned::Kept => Some(Ok(Pick::acquire(Arc::clone(n)))),
            left => Some(Err(left)),
        }
    }

    /// The up nodes of `site` serving it now, less `exclude`. Common case:
    /// nothing excluded (or only nodes already down), so the cached list is
    /// handed out as it is: no scan, no allocation.
    fn candidates(&self, site: usize, exclude: &[usize]) -> Result<Candidates, NoNode> {
        let Some(sb) = self.sites.get(site).filter(|s| !s.nodes.is_empty()) else {
            return Err(NoNode::Empty);
        };
        let up = sb.up_list();
        if up.nodes.is_empty() {
            return Err(NoNode::AllDown);
        }
        if exclude.is_empty() || !up.nodes.iter().any(|n| exclude.contains(&n.index)) {
            return Ok(Candidates::Cached(up));
        }
        let left: Vec<Arc<NodeState>> = up
            .nodes
            .iter()
            .filter(|n| !exclude.contains(&n.index))
            .cloned()
            .collect();
        if left.is_empty() {
            return Err(NoNode::Exhausted);
        }
        Ok(Candidates::Filtered(left))
    }

    /// Like [`pick`](Self::pick) but honours `limits.max_inflight_per_node`:
    /// a node with that many requests in flight is not a candidate, and when
    /// every usable node is at the limit the request waits (FIFO-ish, woken
    /// by released slots) up to `timeouts.queue`, then gets
    /// [`PickError::QueueTimeout`]. With no limit configured this is `pick`.
    ///
    /// This is the request path's pick: with the `weighted-least-load`
    /// policy it reads the candidates' windows (asynchronously, bounded by
    /// `routing.read_deadline`); the other policies decide synchronously
    /// exactly as [`pick`](Self::pick).
    pub async fn pick_queued(&self, site: usize, exclude: &[usize]) -> Result<Pick, PickError> {
        Ok(self.pick_for(site, exclude, &PickKey::default()).await?.0)
    }

    /// [`pick_queued`](Self::pick_queued) for a request with a hash key or
    /// a persistence cookie (`key`); also says how a cookie's node fared.
    pub async fn pick_for(
        &self,
        site: usize,
        exclude: &[usize],
        key: &PickKey,
    ) -> Result<(Pick, Option<Pinned>), PickError> {
        let mut left = None;
        if let Some(node) = key.pinned {
            match self.pinned(site, node, exclude) {
                Some(Ok(pick)) => return Ok((pick, Some(Pinned::Kept))),
                Some(Err(why)) => left = Some((node, why)),
                None => {}
            }
        }
        let how = left.map(|(_, why)| why);
        if self.max_inflight == 0 && !self.own_limits {
            // The baselines decide synchronously: no future to drive.
            let pick = match self.site_policy(site) {
                Policy::LoadAware(_) if key.hash.is_none() && left.is_none() => {
                    self.pick_loaded(site, exclude, key, left).await?
                }
                _ => self.pick_keyed(site, exclude, key, left)?,
            };
            return Ok((pick, how));
        }
        let Some(slots) = self.sites.get(site).map(|s| &s.slots) else {
            return Err(NoNode::Empty.into());
        };
        let deadline = tokio::time::Instant::now() + self.queue;
        loop {
            // Register before looking, so a release between the look and the
            // wait is not missed (the release reads `waiting` after freeing).
            slots.waiting.fetch_add(1, Ordering::SeqCst);
            let _registered = Registered(slots);
            let notified = slots.freed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            match self.try_limited(site, exclude, key, left).await {
                Limited::Got(p) => return Ok((p, how)),
                Limited::None(no) => return Err(no.into()),
                Limited::Full => {}
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(PickError::QueueTimeout(self.queue));
            }
            let wait = (deadline - now).min(QUEUE_RECHECK);
            let _ = tokio::time::timeout(wait, notified).await;
        }
    }

    /// [`pick`](Self::pick) on the request path: same candidates, and the
    /// load-aware policy reads their windows.
    async fn pick_loaded(
        &self,
        site: usize,
        exclude: &[usize],
        key: &PickKey,
        left: Option<(usize, Pinned)>,
    ) -> Result<Pick, NoNode> {
        let candidates = self.candidates(site, exclude)?;
        let node = match self.choose_keyed(site, candidates.nodes(), key, left) {
            Some(chosen) => chosen,
            None => {
                self.site_policy(site)
                    .select(site, candidates.nodes())
                    .await
            }
        }
        .ok_or(NoNode::AllDown)?;
        node.inflight_inc();
        Ok(Pick::taken(node))
    }

    /// [`pick`](Self::pick) with a request's key (synchronous policies).
    fn pick_keyed(
        &self,
        site: usize,
        exclude: &[usize],
        key: &PickKey,
        left: Option<(usize, Pinned)>,
    ) -> Result<Pick, NoNode> {
        let candidates = self.candidates(site, exclude)?;
        let node = match self.choose_keyed(site, candidates.nodes(), key, left) {
            Some(chosen) => chosen,
            None => self
                .site_policy(site)
                .selector()
                .select(site, candidates.nodes()),
        }
        .ok_or(NoNode::AllDown)?;
        node.inflight_inc();
        Ok(Pick::taken(node))
    }

    /// One attempt under the in-flight limit, never queueing (the
    /// load-aware policy may await its window reads).
    async fn try_limited(
        &self,
        site: usize,
        exclude: &[usize],
        key: &PickKey,
        left: Option<(usize, Pinned)>,
    ) -> Limited {
        let Some(sb) = self.sites.get(site).filter(|s| !s.nodes.is_empty()) else {
            return Limited::None(NoNode::Empty);
        };
        let limit = |n: &NodeState| n.own_max_inflight().unwrap_or(self.max_inflight);
        let has_room = |n: &NodeState| {
            let l = limit(n);
            l == 0 || n.inflight() < l
        };
        for _ in 0..RACE_RETRIES {
            let up = sb.up_list();
            let usable = || up.nodes.iter().filter(|n| !exclude.contains(&n.index));
            let candidates: Vec<Arc<NodeState>> =
                usable().filter(|n| has_room(n)).cloned().collect();
            if candidates.is_empty() {
                return if up.nodes.is_empty() {
                    Limited::None(NoNode::AllDown)
                } else if usable().next().is_none() {
                    Limited::None(NoNode::Exhausted)
                } else {
                    Limited::Full
                };
            }
            let chosen = match self.choose_keyed(site, &candidates, key, left) {
                Some(chosen) => chosen,
                None => self.site_policy(site).select(site, &candidates).await,
            };
            let Some(node) = chosen else {
                return Limited::None(NoNode::AllDown);
            };
            // Another request may have taken the last slot since the filter.
            if node.try_inflight_inc(limit(&node)) {
                return Limited::Got(Pick::taken(node));
            }
        }
        Limited::Full
    }

    /// `limits.max_inflight_per_node` of this snapshot (0 = unlimited).
    pub fn max_inflight(&self) -> usize {
        self.max_inflight
    }

    /// Every node of the snapshot in config order (including idle-pool ones).
    pub fn nodes(&self) -> &[Arc<NodeState>] {
        &self.nodes
    }

    /// The nodes that may serve `site` in config order (empty for an unknown
    /// site); see [`SiteBackends::nodes`].
    pub fn nodes_of(&self, site: usize) -> &[Arc<NodeState>] {
        self.sites.get(site).map(|s| &s.nodes[..]).unwrap_or(&[])
    }

    /// The sites in config order.
    pub fn sites(&self) -> &[SiteBackends] {
        &self.sites
    }

    /// The site a node is assigned to now (its role word's site, else its
    /// configured site), if any.
    pub fn site_of(&self, node: &NodeState) -> Option<&SiteBackends> {
        node.assigned_site().and_then(|s| self.sites.get(s))
    }

    /// Selection policy name (`roundrobin`, `leastconn`, `random`, …):
    /// `global.balance`'s.
    pub fn balance(&self) -> &'static str {
        self.policy.name()
    }

    /// The algorithm `site` balances with: its hash key's name (`source`,
    /// `uri`, …) or its policy's.
    pub fn site_balance(&self, site: usize) -> &'static str {
        match self.sites.get(site) {
            Some(sb) => match &sb.hash {
                Some((h, _, _)) => h.key.name(),
                None => sb.policy.name(),
            },
            None => self.policy.name(),
        }
    }

    /// The selection policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// `[[node]] send_proxy` of `node` in this snapshot.
    pub fn send_proxy_of(&self, node: &NodeState) -> Option<SendProxy> {
        self.send_proxy.get(node.index).copied().flatten()
    }

    /// `[[node]] agent_port` … of `node` in this snapshot.
    pub fn agent_of(&self, node: &NodeState) -> Option<AgentCheck> {
        self.agents.get(node.index).copied().flatten()
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

/// Each site's queue of requests waiting for a node slot, carried over
/// from `previous` by site name.
fn site_slots(config: &Config, previous: Option<&Backends>) -> Vec<Arc<Slots>> {
    let old_slots: HashMap<&str, &Arc<Slots>> = previous
        .map(|p| {
            p.sites
                .iter()
                .map(|s| (s.name.as_str(), &s.slots))
                .collect()
        })
        .unwrap_or_default();
    config
        .sites
        .iter()
        .map(|site| {
            old_slots
                .get(site.name.as_str())
                .map(|s| Arc::clone(s))
                .unwrap_or_default()
        })
        .collect()
}

/// Each node's runtime state: the same object as in `previous` for a node
/// at the same place serving the same site, carried over (health, counts)
/// for one that moved, new otherwise; with the config's thresholds, check
/// and control applied.
fn node_states(
    config: &Config,
    previous: Option<&Backends>,
    slots: &[Arc<Slots>],
) -> Vec<Arc<NodeState>> {
    let thresholds = Thresholds::from_config(&config.health);
    let old: HashMap<(&str, SocketAddr), &Arc<NodeState>> = previous
        .map(|p| {
            p.nodes
                .iter()
                .map(|n| ((n.name.as_str(), n.address), n))
                .collect()
        })
        .unwrap_or_default();
    config
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let site = n
                .site
                .and_then(|s| config.sites.get(s).map(|site| (s, site.name.clone())));
            let site_slots = site.as_ref().map(|(s, _)| Arc::clone(&slots[*s]));
            let node = match old.get(&(n.name.as_str(), n.address)) {
                // Same place, same site (by index and name): the very
                // same state object.
                Some(prev)
                    if prev.index == i
                        && prev.site == site.as_ref().map(|s| s.0)
                        && prev.site_name.as_deref() == site.as_ref().map(|s| s.1.as_str()) =>
                {
                    Arc::clone(prev)
                }
                Some(prev) => Arc::new(prev.relocated(i, site, site_slots)),
                None => Arc::new(
                    NodeState::new(i, n.name.clone(), n.address, site, thresholds)
                        .with_slots(site_slots),
                ),
            };
            node.set_thresholds(thresholds);
            node.set_checked(n.check);
            node.apply_configured(Configured::of(n));
            node
        })
        .collect()
}

/// Each site's backends: its candidate nodes, policy, hash table and
/// sticky cookies.
fn site_backends(
    config: &Config,
    nodes: &[Arc<NodeState>],
    slots: &[Arc<Slots>],
    policy: &Policy,
) -> Vec<SiteBackends> {
    let sites = config
        .sites
        .iter()
        .enumerate()
        .map(|(s, site)| SiteBackends {
            slots: Arc::clone(&slots[s]),
            up: ArcSwap::from_pointee(UpList {
                // Never a current epoch: the first pick builds the list.
                epoch: u64::MAX,
                nodes: Vec::new(),
                hash: None,
            }),
            policy: policy.clone(),
            hash: None,
            sticky: None,
            weights: site.weights,
            index: s,
            name: site.name.clone(),
            health_path: site.health_path.clone(),
            check_host: site.hosts.iter().find_map(|h| match h {
                HostPattern::Exact(name) => Some(name.clone()),
                HostPattern::Wildcard(_) => None,
            }),
            // Candidates: the site's configured nodes plus every node
            // with a sidecar window, which may follow a role word here;
            // `up_list` keeps those that serve the site now.
            nodes: nodes
                .iter()
                .zip(&config.nodes)
                .filter(|(n, c)| n.site == Some(s) || c.window.is_some())
                .map(|(n, _)| Arc::clone(n))
                .collect(),
        })
        .collect();
    let mut sites: Vec<SiteBackends> = sites;
    for (sb, site) in sites.iter_mut().zip(&config.sites) {
        sb.hash = site.balance.hash.clone().map(|h| {
            let (ids, gcd) = hash_ids(config, sb);
            (h, ids, gcd)
        });
        sb.sticky = site.sticky.clone().map(|st| {
            let cookies = sb
                .nodes
                .iter()
                .map(|n| config.nodes[n.index].cookie.as_deref().map(Box::from))
                .collect();
            (st, cookies)
        });
    }
    sites
}

/// HAProxy's server ids of `sb`'s nodes (its configured nodes 1, 2, … in
/// config order, then the nodes that may join it), and the gcd of the
/// configured nodes' weights.
fn hash_ids(config: &Config, sb: &SiteBackends) -> (Vec<u32>, u32) {
    let own = |n: &Arc<NodeState>| config.nodes[n.index].site == Some(sb.index);
    let mut ids = vec![0; sb.nodes.len()];
    let mut next = 1;
    for pass in [true, false] {
        for (i, n) in sb.nodes.iter().enumerate() {
            if own(n) == pass {
                ids[i] = next;
                next += 1;
            }
        }
    }
    let gcd = super::hash::weights_gcd(
        sb.nodes
            .iter()
            .filter(|n| own(n))
            .map(|n| config.nodes[n.index].weight),
    );
    (ids, gcd)
}

/// Deregisters a queued waiter however the wait ends (success, error,
/// timeout, or the request being dropped).
struct Registered<'a>(&'a Slots);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests;
