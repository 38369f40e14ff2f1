//! Shared by the reconfiguration tests: node windows the test owns, served
//! over shm files or tcp (with a PSK), and the sidecar's side of the role
//! contract played faithfully by a thread (publish load every millisecond;
//! on a SWITCHING role: status APPLYING, then after a delay status OK and
//! ROLE_APPLIED = epoch, or a failure status with the old site kept).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdmalb_proxy::config::Reconfig;
use rdmalb_proxy::reconfig::donor::SiteLimits;
use rdmalb_proxy::reconfig::{AgentNode, AgentSettings, AgentSite, PeerLinks, WindowSource};
use rdmalb_window::layout::word;
use rdmalb_window::memory::DEFAULT_MODE;
use rdmalb_window::tcp::{self, TcpServerHandle};
use rdmalb_window::{
    publish, Expect, LoadSample, Psk, ReadPolicy, RemoteWindow, RoleState, RoleStatus,
    RoleStatusCode, RoleWord, ShmWindow, SiteSlot, TcpWindow, WindowMemory,
};
use tokio::sync::watch;

pub const SITES: [&str; 2] = ["hot", "cold"];

/// The sites the reconfiguration tests' nodes start in: n0 serves
/// `SITES[0]`, n1–n3 `SITES[1]`, n4 and n5 are idle.
pub const INITIAL: [Option<u16>; 6] = [Some(0), Some(1), Some(1), Some(1), None, None];

/// An agent's settings over `SITES` (each 1–100 nodes) and the nodes of
/// `INITIAL`, none with a configured site.
pub fn agent_settings(proxy_id: u16, reconfig: Reconfig) -> AgentSettings {
    AgentSettings {
        proxy_id,
        reconfig,
        sites: SITES
            .iter()
            .map(|s| AgentSite {
                name: s.to_string(),
                limits: SiteLimits {
                    min_nodes: 1,
                    max_nodes: 100,
                },
            })
            .collect(),
        nodes: (0..INITIAL.len())
            .map(|n| AgentNode {
                name: format!("n{n}"),
                has_window: true,
                configured_site: None,
            })
            .collect(),
        read_policy: ReadPolicy::default(),
    }
}

pub fn site_hash() -> u64 {
    rdmalb_window::site_table_hash(&SITES)
}

/// The key every test of a run shares (a fixed key: processes started
/// separately must agree on it).
pub fn psk() -> Psk {
    Psk::new(TEST_PSK).expect("psk")
}

/// A key for tests only, in the text form `rdmalb psk` prints.
pub const TEST_PSK: &str =
    "rdmalb-psk-v1:ad4f963edfbac5c1fe650062eafcb10eb67a390a6c1f9a3af47dc728b0d94731";

/// A unique /dev/shm path for this test process.
pub fn shm_path(tag: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/rdmalb-test-{}-{tag}", std::process::id()))
}

/// Where a node window is served.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Shm(PathBuf),
    Tcp(SocketAddr),
}

/// What the sidecar thread does with roles.
#[derive(Default)]
pub struct Behaviour {
    /// Target load per node (1.0 = fully used).
    pub loads: Vec<f64>,
    /// Nodes whose next application fails (VERIFY_FAILED, old site kept).
    pub fail_next: HashSet<usize>,
    /// Delay between seeing a role and finishing it, per node.
    pub apply_delay: Vec<Duration>,
    /// Nodes whose sidecar is stalled: no publishing, no applying.
    pub frozen: HashSet<usize>,
}

/// The node windows and the thread playing their sidecars.
pub struct Nodes {
    pub mems: Vec<Arc<WindowMemory>>,
    pub endpoints: Vec<Endpoint>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    tcp: Vec<TcpServerHandle>,
    _stop_tx: watch::Sender<bool>,
}

impl Nodes {
    /// `sites[i]`: node i's initial site (None = idle). Over tcp when `tcp`.
    pub fn start(tag: &str, sites: &[Option<u16>], tcp: bool) -> Nodes {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut mems = Vec::new();
        let mut endpoints = Vec::new();
        let mut handles = Vec::new();
        for (i, s) in sites.iter().enumerate() {
            let mem = if tcp {
                Arc::new(WindowMemory::anonymous(i as u64, site_hash()).expect("memory"))
            } else {
                let path = shm_path(&format!("{tag}-n{i}"));
                let m = WindowMemory::create_shm(&path, DEFAULT_MODE, i as u64, site_hash())
                    .expect("create shm window");
                endpoints.push(Endpoint::Shm(path));
                Arc::new(m)
            };
            // The sidecar's start-up: the role word once, before serving.
            let role = RoleWord {
                site: s.map_or(SiteSlot::Idle, SiteSlot::Site),
                state: RoleState::Active,
                epoch: 1,
            };
            mem.compare_swap(word::ROLE, 0, role.encode());
            store(
                &mem,
                word::ROLE_STATUS,
                status(1, role.site, RoleStatusCode::Ok),
            );
            store(&mem, word::ROLE_APPLIED, 1);
            publish(&mem, &sample(0.0));
            if tcp {
                let h = tcp::serve(
                    mem.clone(),
                    "127.0.0.1:0".parse().unwrap(),
                    psk(),
                    stop_rx.clone(),
                )
                .expect("serve tcp");
                endpoints.push(Endpoint::Tcp(h.local_addr()));
                handles.push(h);
            }
            mems.push(mem);
        }
        let behaviour = Arc::new(Mutex::new(Behaviour {
            loads: vec![0.0; sites.len()],
            fail_next: HashSet::new(),
            apply_delay: vec![Duration::ZERO; sites.len()],
            frozen: HashSet::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let serving: Vec<SiteSlot> = sites
            .iter()
            .map(|s| s.map_or(SiteSlot::Idle, SiteSlot::Site))
            .collect();
        let thread = {
            let (mems, behaviour, stop) = (mems.clone(), behaviour.clone(), stop.clone());
            std::thread::spawn(move || sidecars(mems, behaviour, stop, serving))
        };
        Nodes {
            mems,
            endpoints,
            behaviour,
            stop,
            thread: Some(thread),
            tcp: handles,
            _stop_tx: stop_tx,
        }
    }

    /// Stalls node `node`'s sidecar after it last published `load`, `age`
    /// ago (its block is old: the sidecar died or stalled back then).
    pub fn stall(&self, node: usize, load: f64, age: Duration) {
        let mut b = self.behaviour.lock().unwrap();
        b.frozen.insert(node);
        b.loads[node] = load;
        let at = rdmalb_base::time::unix_now_ns() - age.as_nanos() as u64;
        rdmalb_window::seqlock::publish_at(&self.mems[node], &sample(load), at);
    }

    pub fn set_load(&self, node: usize, load: f64) {
        self.behaviour.lock().unwrap().loads[node] = load;
    }

    pub fn role(&self, node: usize) -> RoleWord {
        RoleWord::decode(self.mems[node].load(word::ROLE).unwrap()).unwrap()
    }

    pub fn applied(&self, node: usize) -> u64 {
        self.mems[node].load(word::ROLE_APPLIED).unwrap()
    }

    /// Role changes since start, over all nodes.
    pub fn moves(&self) -> u64 {
        (0..self.mems.len()).map(|i| self.role(i).epoch - 1).sum()
    }

    /// Nodes whose role is applied (ACTIVE) for `site`.
    pub fn active_in(&self, site: SiteSlot) -> Vec<usize> {
        (0..self.mems.len())
            .filter(|&i| {
                let r = self.role(i);
                r.site == site && self.applied(i) == r.epoch
            })
            .collect()
    }

    /// Connects to every node window over its real transport.
    pub async fn connect(&self, proxy_id: u16) -> Vec<Arc<dyn RemoteWindow>> {
        let mut out: Vec<Arc<dyn RemoteWindow>> = Vec::new();
        for (i, e) in self.endpoints.iter().enumerate() {
            let expect = Expect {
                node_id: Some(i as u64),
                site_hash: Some(site_hash()),
            };
            out.push(match e {
                Endpoint::Shm(p) => Arc::new(ShmWindow::open(p, &expect).expect("open shm")),
                Endpoint::Tcp(a) => Arc::new(
                    TcpWindow::connect(*a, &psk(), proxy_id, &expect)
                        .await
                        .expect("connect tcp"),
                ),
            });
        }
        out
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for h in self.tcp.drain(..) {
            h.stop();
        }
    }
}

fn store(m: &WindowMemory, w: usize, v: u64) {
    m.words()[w].store(v, Ordering::Release);
}

fn status(epoch: u64, serving: SiteSlot, code: RoleStatusCode) -> u64 {
    RoleStatus {
        epoch,
        serving,
        code,
    }
    .encode()
}

fn sample(load: f64) -> LoadSample {
    LoadSample {
        app_busy: (load * 1000.0) as u64,
        app_capacity: 1000,
        ..LoadSample::default()
    }
}

/// The sidecars' loop: every millisecond publish each node's load and
/// advance its role application (role contract, "Sidecar behaviour").
fn sidecars(
    mems: Vec<Arc<WindowMemory>>,
    behaviour: Arc<Mutex<Behaviour>>,
    stop: Arc<AtomicBool>,
    mut serving: Vec<SiteSlot>,
) {
    // Per node: (epoch being applied, when it is done).
    let mut pending: Vec<Option<(u64, Instant)>> = vec![None; mems.len()];
    let mut failed: Vec<u64> = vec![0; mems.len()];
    while !stop.load(Ordering::Acquire) {
        let mut b = behaviour.lock().unwrap();
        for (i, m) in mems.iter().enumerate() {
            if b.frozen.contains(&i) {
                continue;
            }
            publish(m, &sample(b.loads[i]));
            let Ok(role) = RoleWord::decode(m.load(word::ROLE).unwrap()) else {
                continue;
            };
            let applied = m.load(word::ROLE_APPLIED).unwrap();
            if role.epoch <= applied || role.epoch == failed[i] {
                continue;
            }
            match pending[i] {
                Some((e, _)) if e == role.epoch => {}
                _ => {
                    store(
                        m,
                        word::ROLE_STATUS,
                        status(role.epoch, serving[i], RoleStatusCode::Applying),
                    );
                    pending[i] = Some((role.epoch, Instant::now() + b.apply_delay[i]));
                }
            }
            let Some((epoch, done_at)) = pending[i] else {
                continue;
            };
            if Instant::now() < done_at {
                continue;
            }
            pending[i] = None;
            if b.fail_next.remove(&i) {
                failed[i] = epoch;
                store(
                    m,
                    word::ROLE_STATUS,
                    status(epoch, serving[i], RoleStatusCode::VerifyFailed),
                );
            } else {
                serving[i] = role.site;
                store(
                    m,
                    word::ROLE_STATUS,
                    status(epoch, role.site, RoleStatusCode::Ok),
                );
                store(m, word::ROLE_APPLIED, epoch);
            }
        }
        drop(b);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A window source over node connections and peer links.
pub struct Source {
    pub nodes: Vec<Arc<dyn RemoteWindow>>,
    pub peers: Arc<PeerLinks>,
}

impl WindowSource for Source {
    fn node(&self, index: usize) -> Option<Arc<dyn RemoteWindow>> {
        self.nodes.get(index).cloned()
    }
    fn proxy(&self, id: u16) -> Option<Arc<dyn RemoteWindow>> {
        self.peers.get(id)
    }
}
