//! Proxy windows over verbs: the lock home's site locks and every proxy's
//! update counters, served by `OwnWindow` over verbs, reached by the peers
//! through `PeerLinks` and by the owner itself through its loopback queue
//! pair (`OwnWindow::local`), so every read-modify-write on the window is a
//! NIC atomic. Two proxies race for the same site lock every round: exactly
//! one wins, bumps both proxies' counters and releases the lock.

use std::sync::Arc;
use std::time::Duration;

use rdmalb_proxy::config::{PeerProxy, ProxyWindow, WindowEndpoint};
use rdmalb_proxy::reconfig::protocol::{self, LockAttempt};
use rdmalb_proxy::reconfig::{LocalWindow, OwnWindow, PeerLinks};
use rdmalb_window::layout::{self, site_lock_word, update_counter_word};
use rdmalb_window::{Psk, RemoteWindow, TransportKind};

struct Proxy {
    id: u16,
    own: OwnWindow,
    local: LocalWindow,
    peers: Arc<PeerLinks>,
}

fn site_hash() -> u64 {
    layout::site_table_hash(&["shop", "blog"])
}

async fn proxies(psk: &Psk) -> Vec<Proxy> {
    let device = std::env::var("RDMALB_VERBS_DEVICE").ok();
    let cfg = ProxyWindow {
        verbs: Some("127.0.0.1:0".parse().unwrap()),
        device: device.clone(),
        ..ProxyWindow::default()
    };
    let owns: Vec<(u16, OwnWindow)> = [1u16, 2]
        .into_iter()
        .map(|id| {
            let own = OwnWindow::serve(&cfg, id, site_hash(), Some(psk))
                .expect("a verbs proxy window (this test needs an RDMA device)");
            (id, own)
        })
        .collect();
    let addrs: Vec<(u16, std::net::SocketAddr)> = owns
        .iter()
        .map(|(id, o)| {
            (
                *id,
                o.local_addr(TransportKind::Verbs)
                    .expect("served over verbs"),
            )
        })
        .collect();
    let mut out = Vec::new();
    for (id, own) in owns {
        let local = own
            .local(id, site_hash(), Some(psk))
            .await
            .expect("loopback link to the own window");
        assert_eq!(
            local.kind(),
            TransportKind::Verbs,
            "own atomics go through the NIC"
        );
        let others: Vec<PeerProxy> = addrs
            .iter()
            .filter(|(p, _)| *p != id)
            .map(|(p, addr)| PeerProxy {
                id: *p,
                window: WindowEndpoint::Verbs {
                    control: *addr,
                    device: device.clone(),
                },
            })
            .collect();
        let peers = Arc::new(PeerLinks::new(id, site_hash(), Some(psk.clone()), &others));
        peers.connect_missing().await;
        for p in &others {
            let w = peers
                .get(p.id)
                .unwrap_or_else(|| panic!("proxy {id} linked to proxy {} over verbs", p.id));
            assert_eq!(w.kind(), TransportKind::Verbs);
        }
        out.push(Proxy {
            id,
            own,
            local,
            peers,
        });
    }
    out
}

/// `rounds` lock races between proxies 1 (the lock home, through its own
/// loopback queue pair) and 2 (through its link to proxy 1).
pub async fn lock_home_and_counters(rounds: u64) {
    let psk = Psk::generate();
    let ps = proxies(&psk).await;
    let home_of = |p: &Proxy| -> Arc<dyn RemoteWindow> {
        if p.id == 1 {
            Arc::new(p.local.clone())
        } else {
            p.peers.get(1).expect("link to the lock home")
        }
    };
    let homes: Vec<Arc<dyn RemoteWindow>> = ps.iter().map(home_of).collect();
    let lease = Duration::from_secs(10);
    let skew = Duration::from_millis(500);
    let mut bumps: Vec<Vec<u64>> = vec![Vec::new(); ps.len()];
    for r in 0..rounds {
        let tries = ps
            .iter()
            .zip(&homes)
            .map(|(p, h)| protocol::try_lock(h.as_ref(), 0, p.id, lease, skew));
        let results = futures_util::future::join_all(tries).await;
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Ok(LockAttempt::Acquired(_))))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "round {r}: exactly one lock winner: {results:?}"
        );
        let w = winners[0];
        let Ok(LockAttempt::Acquired(held)) = results[w] else {
            unreachable!()
        };
        // The winner bumps every proxy's counter: the others' over their
        // links, its own through its loopback queue pair.
        for (i, p) in ps.iter().enumerate() {
            let target: Arc<dyn RemoteWindow> = if i == w {
                Arc::new(ps[w].local.clone())
            } else {
                ps[w].peers.get(p.id).expect("link")
            };
            let now = protocol::bump_counter(target.as_ref(), 0)
                .await
                .unwrap_or_else(|e| panic!("round {r}: bump on proxy {}: {e}", p.id));
            bumps[i].push(now);
        }
        let fence = protocol::fence(homes[w].as_ref(), &held)
            .await
            .expect("fence");
        assert_eq!(
            fence,
            protocol::Fence::Held,
            "round {r}: the winner still holds the lock"
        );
        assert!(
            protocol::unlock(homes[w].as_ref(), held)
                .await
                .expect("unlock"),
            "round {r}: the lock word still held our value"
        );
    }
    let lock = site_lock_word(0).unwrap();
    let counter = update_counter_word(0).unwrap();
    assert_eq!(
        ps[0].own.memory().load(lock),
        Some(0),
        "the lock is free at the end"
    );
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(
            p.own.memory().load(counter),
            Some(rounds),
            "proxy {}'s counter got every bump",
            p.id
        );
        let expected: Vec<u64> = (1..=rounds).collect();
        assert_eq!(
            bumps[i], expected,
            "proxy {}'s FAAs returned every value once, in order",
            p.id
        );
    }
    println!(
        "CHECK proxy-windows-over-verbs: {rounds} lock races, one winner each; {} counter FAAs ok",
        rounds * ps.len() as u64
    );
}
