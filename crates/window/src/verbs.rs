//! RDMA verbs transport: one-sided READ, compare-and-swap and fetch-and-add
//! on a peer's window, served by the peer's NIC.
//!
//! - [`VerbsServer`] (sidecar): registers the window's two memory regions —
//!   bytes 0..256 REMOTE_READ only, bytes 256..1536 REMOTE_READ |
//!   REMOTE_ATOMIC ([`crate::layout::READ_ONLY_BYTES`],
//!   [`crate::layout::ATOMIC_BYTES`]) — and pairs an RC queue pair
//!   with every proxy that passes the pre-shared-key handshake on its TCP
//!   control port. No remote peer can ever write words 0..32: that region
//!   has no write or atomic permission, and the sidecar's queue pairs allow
//!   only remote READ and atomics.
//! - [`VerbsWindow`] (proxy): implements
//!   [`RemoteWindow`](crate::RemoteWindow) with many operations in
//!   flight on one queue pair, bounded waits, and a clear error when the
//!   pairing breaks (reconnect with a new `VerbsWindow`).
//!
//! The `sideway` crate loads libibverbs at run time, so this builds and runs
//! on machines without RDMA; there, both sides fail at start-up with
//! [`WindowError::NoDevice`](crate::WindowError::NoDevice), whose
//! message says to use `transport = "shm"` or `"tcp"` instead.
//!
//! Submodules: `device` (device, port and GID selection, queue-pair state
//! transitions), `wire` (the control messages), `engine` (one window's
//! posting and completion handling), `poller` (the one completion thread
//! every window of the process shares), `server` and `client`. The transport is tested
//! for real inside a Soft-RoCE QEMU guest by `scripts/rxe-test.sh`.

mod client;
mod device;
mod engine;
mod poller;
mod server;
mod wire;

pub use client::{VerbsOptions, VerbsWindow};
pub use server::{VerbsPeer, VerbsServer};

/// Whether this process can use RDMA verbs: `Ok(device name)` for the device
/// that [`VerbsServer::start`] / [`VerbsWindow::connect`] would open, or the
/// [`WindowError::NoDevice`](crate::WindowError::NoDevice) they would
/// fail with. Meant for start-up checks and `--check-config` style output.
pub fn probe(device: Option<&str>) -> Result<String, crate::WindowError> {
    device::open(device)
        .map(|d| d.name.clone())
        .map_err(|e| match e {
            device::DeviceError::Missing(detail) | device::DeviceError::Failed(detail) => {
                crate::WindowError::NoDevice { detail }
            }
        })
}

/// Locks `m`, poisoned or not: a panic while holding the verbs transport's
/// locks leaves consistent data (plain pushes and takes), so the lock is
/// still usable.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
