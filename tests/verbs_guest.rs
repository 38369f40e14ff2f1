//! The window conformance suite (`tests/window_conformance.rs`) against the
//! verbs transport, and the shared completion poller's own cases
//! (`verbs_guest/poller.rs`: 64 windows through one completion thread, a
//! failed queue pair isolated, the thread stopping with the last window) and
//! proxy windows over verbs (`verbs_guest/peers.rs`: site locks and update
//! counters).
//! It needs a real RDMA device, so its cases are `#[ignore]`d:
//! `scripts/rxe-test.sh` copies this test binary into a Soft-RoCE QEMU guest
//! and runs `verbs_guest --ignored verbs::` there.
//!
//! The suite file is included as a module so every transport runs the same
//! cases; its own shm and tcp instantiations therefore run here too (a
//! duplicate of `window_conformance`, seconds on the host). Once the suite
//! grows a `conformance!(verbs, …)` line with an ignore attribute this file
//! can go.

#[path = "window/conformance.rs"]
mod conformance;
#[path = "verbs_guest/peers.rs"]
mod peers;
#[path = "verbs_guest/poller.rs"]
mod poller;

use std::sync::Arc;

use conformance::Target;
use rdmalb_window::verbs::{VerbsServer, VerbsWindow};
use rdmalb_window::{Psk, RemoteWindow};

/// verbs: a [`VerbsServer`] on the first RDMA device serving the suite's
/// window; clients are [`VerbsWindow`]s on the same device.
pub async fn verbs_target() -> Target {
    // The tcp target builds the owner with the suite's node id and site
    // table; reuse that memory rather than repeating the suite's constants.
    let base = conformance::tcp_target().await;
    let owner = base.owner.clone();
    let psk = Psk::generate();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = VerbsServer::start(
        owner.clone(),
        "127.0.0.1:0".parse().unwrap(),
        psk.clone(),
        std::env::var("RDMALB_VERBS_DEVICE").ok(),
        stop_rx,
    )
    .expect("a verbs server (this test needs an RDMA device)");
    let addr = server.local_addr();
    Target {
        owner,
        connect: Box::new(move |proxy, expect| {
            let psk = psk.clone();
            Box::pin(async move {
                Ok(
                    Arc::new(VerbsWindow::connect(addr, &psk, proxy, &expect, None).await?)
                        as Arc<dyn RemoteWindow>,
                )
            })
        }),
        _keep: Box::new((base, server, stop_tx)),
    }
}

mod verbs {
    macro_rules! case {
        ($name:ident) => {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs an RDMA device; scripts/rxe-test.sh runs it in a Soft-RoCE guest"]
            async fn $name() {
                super::conformance::$name(super::verbs_target().await).await
            }
        };
    }

    case!(read_freshness);
    case!(seqlock_consistency);
    case!(cas_exactly_one_winner);
    case!(faa_totals);
    case!(refuse_outside_control_area);
    case!(header_mismatch_refused);

    // The completion thread every verbs window of the process shares.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs an RDMA device; scripts/rxe-test.sh runs it in a Soft-RoCE guest"]
    async fn shared_poller_64_windows() {
        super::poller::many_windows(64, 20).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs an RDMA device; scripts/rxe-test.sh runs it in a Soft-RoCE guest"]
    async fn shared_poller_failed_qp_is_isolated() {
        super::poller::failed_qp_is_isolated(8).await
    }

    // Proxy windows (site locks, update counters) over verbs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs an RDMA device; scripts/rxe-test.sh runs it in a Soft-RoCE guest"]
    async fn proxy_windows_over_verbs() {
        super::peers::lock_home_and_counters(50).await
    }
}
