//! RDMA verbs transport: one-sided READ, compare-and-swap and fetch-and-add
//! on a peer's window, served by the peer's NIC.
//!
//! - [`VerbsServer`] (sidecar): registers the window's two memory regions —
//!   bytes 0..256 REMOTE_READ only, bytes 256..1536 REMOTE_READ |
//!   REMOTE_ATOMIC ([`crate::window::layout::READ_ONLY_BYTES`],
//!   [`crate::window::layout::ATOMIC_BYTES`]) — and pairs an RC queue pair
//!   with every proxy that passes the pre-shared-key handshake on its TCP
//!   control port. No remote peer can ever write words 0..32: that region
//!   has no write or atomic permission, and the sidecar's queue pairs allow
//!   only remote READ and atomics.
//! - [`VerbsWindow`] (proxy): implements
//!   [`RemoteWindow`](crate::window::RemoteWindow) with many operations in
//!   flight on one queue pair, bounded waits, and a clear error when the
//!   pairing breaks (reconnect with a new `VerbsWindow`).
//!
//! The `sideway` crate loads libibverbs at run time, so this builds and runs
//! on machines without RDMA; there, both sides fail at start-up with
//! [`WindowError::NoDevice`](crate::window::WindowError::NoDevice), whose
//! message says to use `transport = "shm"` or `"tcp"` instead.
//!
//! Submodules: `device` (device, port and GID selection, queue-pair state
//! transitions), `wire` (the control messages), `engine` (posting and
//! completion handling), `server` and `client`. The transport is tested
//! for real inside a Soft-RoCE QEMU guest by `scripts/rxe-test.sh`.

mod client;
mod device;
mod engine;
mod server;
mod wire;

pub use client::{VerbsOptions, VerbsWindow};
pub use server::{VerbsPeer, VerbsServer};

/// Whether this process can use RDMA verbs: `Ok(device name)` for the device
/// that [`VerbsServer::start`] / [`VerbsWindow::connect`] would open, or the
/// [`WindowError::NoDevice`](crate::window::WindowError::NoDevice) they would
/// fail with. Meant for start-up checks and `--check-config` style output.
pub fn probe(device: Option<&str>) -> Result<String, crate::window::WindowError> {
    device::open(device)
        .map(|d| d.name.clone())
        .map_err(|e| match e {
            device::DeviceError::Missing(detail) | device::DeviceError::Failed(detail) => {
                crate::window::WindowError::NoDevice { detail }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::WindowError;

    /// True when this machine has an RDMA device (then the no-device checks
    /// below do not apply). Reads sysfs, independently of libibverbs.
    fn host_has_rdma() -> bool {
        std::fs::read_dir("/sys/class/infiniband")
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    }

    #[test]
    fn no_device_is_a_clear_error_not_a_panic() {
        if host_has_rdma() {
            eprintln!("skipped: this host has an RDMA device");
            return;
        }
        let err = probe(None).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
        assert!(
            text.contains("no RDMA device") || text.contains("libibverbs"),
            "{text}"
        );
        assert!(
            text.contains("transport = \"shm\"") && text.contains("\"tcp\""),
            "{text}"
        );

        let named = probe(Some("mlx5_0")).unwrap_err();
        assert!(matches!(named, WindowError::NoDevice { .. }), "{named:?}");
    }

    #[test]
    fn server_start_without_device_fails_cleanly() {
        if host_has_rdma() {
            eprintln!("skipped: this host has an RDMA device");
            return;
        }
        let mem = std::sync::Arc::new(crate::window::WindowMemory::anonymous(1, 2).unwrap());
        let psk = crate::window::Psk::new("0123456789abcdef0123").unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let err =
            VerbsServer::start(mem, "127.0.0.1:0".parse().unwrap(), psk, None, rx).unwrap_err();
        assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
        assert!(err.to_string().contains("use transport = \"shm\""), "{err}");
    }

    #[tokio::test]
    async fn client_connect_without_device_fails_cleanly() {
        if host_has_rdma() {
            eprintln!("skipped: this host has an RDMA device");
            return;
        }
        // The device is opened before any connection attempt, so no listener
        // is needed: the error must name the device problem, not the network.
        let psk = crate::window::Psk::new("0123456789abcdef0123").unwrap();
        let addr = "127.0.0.1:9".parse().unwrap();
        let err = VerbsWindow::connect(addr, &psk, 1, &crate::window::Expect::ANY, Some("rxe0"))
            .await
            .unwrap_err();
        assert!(matches!(err, WindowError::NoDevice { .. }), "{err:?}");
        assert!(err.to_string().contains("\"tcp\""), "{err}");
    }
}
