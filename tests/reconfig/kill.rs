//! A proxy that dies holding a site lock (issue 6, "Faults"): a real
//! `rdmalb proxy` process (proxy 2) runs its agent against node windows and
//! the lock home (proxy 1, this test's window); the test freezes it with
//! SIGSTOP until it is caught holding the hot site's lock, then SIGKILLs it.
//! Proxy 1's agent must see the lock busy until the lease plus the skew
//! allowance has passed, then take it over and claim the node.

use std::sync::Arc;
use std::time::Duration;

use crate::support::reconfig::{
    agent_settings, shm_path, site_hash, Endpoint, Nodes, Source, INITIAL, SITES,
};
use rand::Rng;
use rdmalb_proxy::config::{Delay, PeerProxy, ProxyWindow, Reconfig, ReconfigMode, WindowEndpoint};
use rdmalb_proxy::reconfig::{Agent, ClaimOutcome, OwnWindow, PeerLinks};
use rdmalb_window::layout::site_lock_word;
use rdmalb_window::{RoleState, SiteLock, SiteSlot};

const LEASE_MS: u64 = 2000;
const SKEW_MS: u64 = 500;

fn proxy_config(nodes: &Nodes, p1: &std::path::Path, p2: &std::path::Path) -> String {
    let (listener, _, _) = crate::support::listener_toml();
    let mut text = format!("[global]\nproxy_id = 2\n\n{listener}");
    for s in SITES {
        text.push_str(&format!(
            "[[site]]\nname = \"{s}\"\nhosts = [\"{s}.test\"]\n\n"
        ));
    }
    for (i, e) in nodes.endpoints.iter().enumerate() {
        let Endpoint::Shm(path) = e else {
            unreachable!("shm nodes")
        };
        let site = match INITIAL[i] {
            Some(s) => SITES[s as usize],
            None => "idle",
        };
        // Nothing listens there: health checks fail, which the agent ignores.
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"{}\"\nsite = \"{site}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n",
            crate::support::free_addr(),
            path.display()
        ));
    }
    text.push_str(&format!(
        "[reconfig]\nmode = \"reconfigure\"\nsensitivity = \"5ms\"\nhistory = \"10ms\"\nclaim_horizon = \"off\"\nlock_lease = \"{LEASE_MS}ms\"\nlock_skew = \"{SKEW_MS}ms\"\nwindow = {{ shm = \"{}\" }}\n\n[[reconfig.peer]]\nid = 1\ntransport = \"shm\"\nwindow = \"{}\"\n",
        p2.display(),
        p1.display()
    ));
    text
}

/// Whether `pid` is stopped (state T in /proc/PID/stat).
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_left_by_a_killed_proxy_is_taken_after_lease_and_skew() {
    let nodes = Nodes::start("kill", &INITIAL, false);
    // Hot site 0; every other node busy, so proxy 2 takes the lock every
    // round and finds no donor (it never claims).
    nodes.behaviour.lock().unwrap().loads = vec![0.95, 0.5, 0.5, 0.5, 0.5, 0.5];
    let p1_path = shm_path("kill-p1");
    let p2_path = shm_path("kill-p2");
    let own = OwnWindow::serve(
        &ProxyWindow {
            shm: Some(p1_path.clone()),
            ..ProxyWindow::default()
        },
        1,
        site_hash(),
        None,
    )
    .expect("proxy 1 window");
    let mut proxy = crate::support::Proxy::start(&proxy_config(&nodes, &p1_path, &p2_path), &[]);
    let pid = proxy.pid();
    let lock_word = site_lock_word(0).unwrap();

    // Freeze proxy 2 at random moments until it is frozen holding the lock.
    let mut rng = rand::thread_rng();
    let mut held = None;
    for _ in 0..20_000 {
        crate::support::signal(pid, 19); // SIGSTOP
        for _ in 0..1000 {
            if is_stopped(pid) {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        assert!(
            is_stopped(pid),
            "proxy 2 did not stop:\n{}",
            proxy.stderr_text()
        );
        match SiteLock::decode(own.memory().load(lock_word).unwrap()).unwrap() {
            SiteLock::Held {
                owner: 2,
                deadline_ms,
            } => {
                held = Some(deadline_ms);
                break;
            }
            _ => {
                crate::support::signal(pid, 18); // SIGCONT
                std::thread::sleep(Duration::from_micros(rng.gen_range(200..3000)));
            }
        }
    }
    let deadline_ms = held.unwrap_or_else(|| {
        panic!(
            "proxy 2 was never caught holding the lock:\n{}",
            proxy.stderr_text()
        )
    });
    crate::support::signal(pid, 9); // SIGKILL, while holding the lock
    assert!(proxy.wait_exit().is_some(), "proxy 2 did not die");

    // Proxy 1 (this test), lock home itself, now gets a donor.
    nodes.set_load(4, 0.01);
    let peers = vec![PeerProxy {
        id: 2,
        window: WindowEndpoint::Shm {
            path: p2_path.clone(),
        },
    }];
    let links = Arc::new(PeerLinks::new(1, site_hash(), None, &peers));
    links.connect_missing().await;
    let settings = agent_settings(
        1,
        Reconfig {
            mode: ReconfigMode::Reconfigure,
            sensitivity: Duration::from_millis(5),
            history: Duration::from_millis(10),
            // This test is about the lock, not the trigger: claim as soon
            // as the site is hot (the burst estimate would wait for the
            // default cool-down's worth of burst).
            claim_horizon: Delay::Off,
            lock_lease: Duration::from_millis(LEASE_MS),
            lock_skew: Duration::from_millis(SKEW_MS),
            lock_home: 1,
            peers,
            ..Reconfig::default()
        },
    );
    let agent = Agent::new(
        settings,
        own.memory().clone(),
        Arc::new(Source {
            nodes: nodes.connect(1).await,
            peers: links,
        }),
        None,
    );
    let free_at = deadline_ms + SKEW_MS;
    let mut busy_rounds = 0;
    let mut claimed = false;
    for _ in 0..2000 {
        let before = rdmalb_base::time::unix_now_ms();
        let (_, outcomes) = agent.round().await;
        let after = rdmalb_base::time::unix_now_ms();
        for (_, o) in outcomes {
            match o.expect("claim attempt") {
                ClaimOutcome::LockBusy { owner } => {
                    assert_eq!(owner, 2);
                    assert!(
                        before <= free_at,
                        "lock still busy at {before} ms, after lease + skew ({free_at} ms)"
                    );
                    busy_rounds += 1;
                }
                ClaimOutcome::Claimed { node, .. } => {
                    assert!(after > free_at, "lock stolen before lease + skew ran out");
                    assert_eq!(node, "n4");
                    claimed = true;
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
        if claimed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(claimed, "proxy 1 never took the lock over");
    assert!(busy_rounds > 0, "the dead proxy's lock was seen held first");
    let c = agent.counters().snapshot();
    assert_eq!((c.lock_steals, c.claims), (1, 1));
    assert_eq!(nodes.role(4).site, SiteSlot::Site(0));
    assert_eq!(nodes.role(4).state, RoleState::Switching);
    // The lock is free again after the claim.
    assert_eq!(own.memory().load(lock_word), Some(0));
    // The dead proxy's window file stays behind (SIGKILL): remove it.
    let _ = std::fs::remove_file(&p2_path);
}
