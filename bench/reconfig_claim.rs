//! Cost of one claim through the agent's protocol (seed 001 section 3.2),
//! proxy side: `Agent::move_node` = read the node, CAS the site lock on the
//! lock home (a peer proxy), read the node again under the lock, CAS its
//! role word, write the claim record, FAA the site's update counter on the
//! two other proxies and our own, release the lock. Over shm (one-sided,
//! shared memory) and over tcp on loopback (two-sided, authenticated).
//!
//! What it does not include: the sidecar's switch (render, reload, verify;
//! see `bench/role_switch.rs`), which this program answers at once by
//! writing `ROLE_APPLIED` itself so the next move can start.
//!
//! Run: `cargo bench --bench reconfig_claim` (add `-- --quick` for a short
//! run). Prints a markdown table and writes it to
//! `bench/results/reconfig_claim.md`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmalb_proxy::config::{PeerProxy, Reconfig, ReconfigMode, WindowEndpoint};
use rdmalb_proxy::reconfig::donor::SiteLimits;
use rdmalb_proxy::reconfig::{
    Agent, AgentNode, AgentSettings, AgentSite, ClaimOutcome, PeerLinks, WindowSource,
};
use rdmalb_window::layout::word;
use rdmalb_window::memory::DEFAULT_MODE;
use rdmalb_window::tcp::{self, Psk, TcpServerHandle};
use rdmalb_window::{
    publish, Expect, LoadSample, ReadPolicy, RemoteWindow, RoleState, RoleWord, ShmWindow,
    SiteSlot, TcpWindow, WindowMemory,
};
use tokio::sync::watch;

/// A key for this bench only, in the text form `rdmalb psk` prints.
const PSK: &str = "rdmalb-psk-v1:3944676e7d97fc0db32b7bd6aa983607ccdf2212a76576d9a32a52e9432c3e36";
const SITES: [&str; 2] = ["a", "b"];

struct Source {
    node: Arc<dyn RemoteWindow>,
    peers: Arc<PeerLinks>,
}

impl WindowSource for Source {
    fn node(&self, index: usize) -> Option<Arc<dyn RemoteWindow>> {
        (index == 0).then(|| self.node.clone())
    }
    fn proxy(&self, id: u16) -> Option<Arc<dyn RemoteWindow>> {
        self.peers.get(id)
    }
}

/// Windows of one run: the node and proxies 2 and 3 (proxy 1 is the agent).
struct Cluster {
    node: Arc<WindowMemory>,
    peers: Vec<PeerProxy>,
    node_window: Arc<dyn RemoteWindow>,
    _mems: Vec<Arc<WindowMemory>>,
    _servers: Vec<TcpServerHandle>,
    _stop: watch::Sender<bool>,
}

async fn cluster(tcp: bool) -> Cluster {
    let hash = rdmalb_window::site_table_hash(&SITES);
    let psk = Psk::new(PSK).expect("psk");
    let (stop, stop_rx) = watch::channel(false);
    let dir = format!("/dev/shm/rdmalb-bench-claim-{}", std::process::id());
    let mut mems = Vec::new();
    let mut endpoints = Vec::new();
    let mut servers = Vec::new();
    // Window 0 is the node, 2 and 3 the peer proxies.
    for id in [0u64, 2, 3] {
        let mem = if tcp {
            Arc::new(WindowMemory::anonymous(id, hash).expect("memory"))
        } else {
            let path = format!("{dir}-{id}");
            Arc::new(WindowMemory::create_shm(&path, DEFAULT_MODE, id, hash).expect("shm"))
        };
        endpoints.push(if tcp {
            let h = tcp::serve(
                mem.clone(),
                "127.0.0.1:0".parse().unwrap(),
                psk.clone(),
                stop_rx.clone(),
            )
            .expect("serve");
            let addr = h.local_addr();
            servers.push(h);
            WindowEndpoint::Tcp { addr }
        } else {
            WindowEndpoint::Shm {
                path: mem.path().unwrap().to_path_buf(),
            }
        });
        mems.push(mem);
    }
    let node = mems[0].clone();
    let role = RoleWord {
        site: SiteSlot::Site(0),
        state: RoleState::Active,
        epoch: 1,
    };
    node.compare_swap(word::ROLE, 0, role.encode());
    node.words()[word::ROLE_APPLIED].store(1, Ordering::Release);
    publish(&node, &LoadSample::default());
    let expect = Expect {
        node_id: Some(0),
        site_hash: Some(hash),
    };
    let node_window: Arc<dyn RemoteWindow> = match &endpoints[0] {
        WindowEndpoint::Tcp { addr } => Arc::new(
            TcpWindow::connect(*addr, &psk, 1, &expect)
                .await
                .expect("connect"),
        ),
        WindowEndpoint::Shm { path } => Arc::new(ShmWindow::open(path, &expect).expect("open")),
        WindowEndpoint::Verbs { .. } => unreachable!(),
    };
    let peers = [2u16, 3]
        .iter()
        .zip(&endpoints[1..])
        .map(|(id, e)| PeerProxy {
            id: *id,
            window: e.clone(),
        })
        .collect();
    Cluster {
        node,
        peers,
        node_window,
        _mems: mems,
        _servers: servers,
        _stop: stop,
    }
}

async fn measure(tcp: bool, iterations: usize, max_time: Duration) -> Vec<f64> {
    let c = cluster(tcp).await;
    let hash = rdmalb_window::site_table_hash(&SITES);
    let links = Arc::new(PeerLinks::new(
        1,
        hash,
        Some(Psk::new(PSK).unwrap()),
        &c.peers,
    ));
    links.connect_missing().await;
    let settings = AgentSettings {
        proxy_id: 1,
        reconfig: Reconfig {
            mode: ReconfigMode::Reconfigure,
            lock_home: 2,
            peers: c.peers.clone(),
            ..Reconfig::default()
        },
        sites: SITES
            .iter()
            .map(|s| {
                let limits = SiteLimits {
                    min_nodes: 0,
                    max_nodes: 10,
                };
                AgentSite {
                    name: s.to_string(),
                    limits,
                }
            })
            .collect(),
        nodes: vec![AgentNode {
            name: "n0".into(),
            has_window: true,
            configured_site: None,
        }],
        read_policy: ReadPolicy::default(),
    };
    let own = Arc::new(WindowMemory::anonymous(1, hash).expect("own window"));
    let agent = Agent::new(
        settings,
        own,
        Arc::new(Source {
            node: c.node_window.clone(),
            peers: links,
        }),
        None,
    );
    let mut samples = Vec::with_capacity(iterations);
    let started = Instant::now();
    for i in 0..iterations {
        if started.elapsed() > max_time {
            break;
        }
        let to = SITES[(i + 1) % 2];
        let t = Instant::now();
        let outcome = agent.move_node("n0", to).await.expect("move");
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        let ClaimOutcome::Claimed { epoch, .. } = outcome else {
            panic!("claim {i} not made: {outcome:?}");
        };
        // The sidecar's answer, at once, and a fresh load block.
        c.node.words()[word::ROLE_APPLIED].store(epoch, Ordering::Release);
        publish(&c.node, &LoadSample::default());
    }
    samples
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (iterations, max_time) = if quick {
        (300, Duration::from_secs(1))
    } else {
        (3000, Duration::from_secs(5))
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut table = String::from(
        "One claim through the agent (move_node: read node, lock on a peer, re-read, role CAS, claim record, FAA on 2 peers + own, unlock)\n\n\
         | transport | claims | median µs | p10 µs | p90 µs | p99 µs | claims/s |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, tcp) in [
        ("shm (one-sided, shared memory)", false),
        ("tcp (two-sided, loopback)", true),
    ] {
        let mut s = rt.block_on(measure(tcp, iterations, max_time));
        s.sort_by(f64::total_cmp);
        let median = percentile(&s, 0.5);
        let row = format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} |\n",
            s.len(),
            median,
            percentile(&s, 0.1),
            percentile(&s, 0.9),
            percentile(&s, 0.99),
            1e6 / median
        );
        eprint!("{row}");
        table.push_str(&row);
    }
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    match std::fs::create_dir_all(&out)
        .and_then(|()| std::fs::write(out.join("reconfig_claim.md"), &table))
    {
        Ok(()) => eprintln!("wrote {}", out.join("reconfig_claim.md").display()),
        Err(e) => eprintln!("could not write bench/results/reconfig_claim.md: {e}"),
    }
}
