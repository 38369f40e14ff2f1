//! Proxy windows over verbs on a host without an RDMA device: a real
//! `rdmalb proxy` stops at start-up with the error naming the alternatives
//! (exit status not 0, no panic), whether its own window or a peer's is over
//! verbs. Over a real device they are tested in the Soft-RoCE guest
//! (`tests/verbs_guest/peers.rs`, `scripts/rxe-test.sh`).

use std::os::unix::fs::PermissionsExt;

use crate::support::reconfig::{Endpoint, Nodes, SITES};

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

/// A proxy config with one shm node (so the agent starts) and `reconfig`
/// as its `[reconfig]` tables.
fn config(dir: &std::path::Path, nodes: &Nodes, reconfig: &str) -> String {
    let psk = dir.join("cluster.psk");
    std::fs::write(&psk, rdmalb_window::Psk::generate().to_text()).unwrap();
    std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (listener, _, _) = crate::support::listener_toml();
    let mut text = format!(
        "[global]\nproxy_id = 2\n\n[cluster]\npsk_file = \"{}\"\n\n{listener}",
        psk.display()
    );
    for s in SITES {
        text.push_str(&format!(
            "[[site]]\nname = \"{s}\"\nhosts = [\"{s}.test\"]\n\n"
        ));
    }
    let Endpoint::Shm(path) = &nodes.endpoints[0] else {
        unreachable!("shm nodes")
    };
    text.push_str(&format!(
        "[[node]]\nname = \"n0\"\naddress = \"{}\"\nsite = \"{}\"\ntransport = \"shm\"\nsidecar = \"{}\"\n\n{reconfig}",
        crate::support::free_addr(),
        SITES[0],
        path.display()
    ));
    text
}

fn fails_at_start_up(tag: &str, reconfig: &str) {
    let dir = tempfile::tempdir().unwrap();
    let nodes = Nodes::start(tag, &[Some(0)], false);
    let mut proxy = crate::support::Proxy::start(&config(dir.path(), &nodes, reconfig), &[]);
    let status = proxy.wait_exit().expect("the proxy exits");
    assert!(!status.success());
    let err = proxy.stderr_text();
    assert!(err.contains("RDMA verbs unavailable"), "{err}");
    assert!(err.contains("transport = \"shm\""), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn own_window_over_verbs_without_rdma_fails_start_up() {
    if has_rdma_device() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    fails_at_start_up("verbs-own", &format!(
        "[reconfig]\nmode = \"reconfigure\"\nwindow = {{ verbs = \"{}\" }}\n\n[[reconfig.peer]]\nid = 1\ntransport = \"verbs\"\nwindow = \"127.0.0.1:9\"\n",
        crate::support::free_addr()
    ));
}

#[test]
fn peer_window_over_verbs_without_rdma_fails_start_up() {
    if has_rdma_device() {
        eprintln!("skipped: this host has an RDMA device");
        return;
    }
    fails_at_start_up("verbs-peer", &format!(
        "[reconfig]\nmode = \"reconfigure\"\nwindow = {{ shm = \"{}\" }}\n\n[[reconfig.peer]]\nid = 1\ntransport = \"verbs\"\nwindow = \"127.0.0.1:9\"\n",
        crate::support::reconfig::shm_path("verbs-window-p2").display()
    ));
}
