//! The one trait every window transport implements, [`RemoteWindow`], and
//! the checks every transport makes when it connects ([`Expect`]) and before
//! it sends an atomic ([`check_atomic_word`]).
//!
//! It is the reader side of a transport; the owner side is
//! [`crate::serve::WindowServer`], and [`crate::Endpoint`] /
//! [`crate::serve::Listen`] are the config variants that construct them.
//!
//! The trait is object-safe (`Arc<dyn RemoteWindow>`) so the proxy can hold
//! windows of mixed transports in one table. Operations return boxed futures
//! so many reads can be in flight at once from one task (`join_all`).

use std::future::Future;
use std::pin::Pin;

use super::layout::{self, word};
use super::{TransportKind, WindowError};

/// The future every [`RemoteWindow`] operation returns.
pub type WindowFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, WindowError>> + Send + 'a>>;

/// Operations against a peer's window, whatever carries them.
///
/// Word indices are window word numbers ([`layout::word`]). Atomic operations
/// and `read_word` are only allowed on the remote-atomic area (words 32..192,
/// [`layout::REMOTE_ATOMIC`]); anything else fails with
/// [`WindowError::Refused`] before leaving the process, and the serving side
/// of two-sided transports enforces the same rule again.
pub trait RemoteWindow: Send + Sync + 'static {
    /// The transport carrying this window.
    fn kind(&self) -> TransportKind;

    /// The peer for logs and metrics: a path or an address.
    fn peer(&self) -> &str;

    /// One read of words 0..32 (header + load block), no retry, no
    /// validation. Use [`crate::read_load`] for a validated block.
    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]>;

    /// Atomic read of one word in the remote-atomic area (32..192).
    fn read_word(&self, word: usize) -> WindowFuture<'_, u64>;

    /// Compare-and-swap one word in the remote-atomic area; returns the old
    /// value (the swap happened iff it equals `expected`).
    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64>;

    /// Wrapping fetch-and-add on one word in the remote-atomic area; returns
    /// the old value.
    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64>;

    /// False once this connection can serve no more operations and a new one
    /// must be made ([`crate::Link::connect`]): the shm file was replaced or
    /// removed (its owner restarted or stopped), the tcp connection closed,
    /// the verbs queue pair failed. Asked by the supervisors of links, not on
    /// every read; may make a system call.
    fn is_alive(&self) -> bool;
}

/// What a client expects to find in a peer's header. Magic, layout version
/// and window size are always checked; node id and site-table hash only when
/// given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expect {
    /// The node id configured for the peer.
    pub node_id: Option<u64>,
    /// Our site-table hash ([`layout::site_table_hash`]).
    pub site_hash: Option<u64>,
}

impl Expect {
    /// Expect nothing beyond a valid rdmalb window.
    pub const ANY: Expect = Expect {
        node_id: None,
        site_hash: None,
    };

    /// Check a header (the first words of a `read_raw`) against these
    /// expectations; the error names `peer`.
    pub fn check(&self, peer: &str, header: &[u64]) -> Result<(), WindowError> {
        let get = |i: usize| header.get(i).copied().unwrap_or(0);
        let magic = get(word::MAGIC);
        if magic != layout::MAGIC {
            return Err(WindowError::BadMagic {
                peer: peer.to_string(),
                found: magic,
            });
        }
        let version = get(word::VERSION);
        if version != layout::LAYOUT_VERSION {
            return Err(WindowError::BadVersion {
                peer: peer.to_string(),
                found: version,
            });
        }
        let size = get(word::SIZE);
        if size != layout::WINDOW_BYTES as u64 {
            return Err(WindowError::BadSize {
                peer: peer.to_string(),
                found: size,
            });
        }
        if let Some(ours) = self.site_hash {
            let theirs = get(word::SITE_HASH);
            if theirs != ours {
                return Err(WindowError::SiteTableMismatch {
                    peer: peer.to_string(),
                    ours,
                    theirs,
                });
            }
        }
        if let Some(expected) = self.node_id {
            let found = get(word::NODE_ID);
            if found != expected {
                return Err(WindowError::NodeIdMismatch {
                    peer: peer.to_string(),
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }
}

/// Refuse a `read_word` / CAS / FAA outside the remote-atomic area.
pub fn check_atomic_word(peer: &str, word: usize) -> Result<(), WindowError> {
    if layout::is_remote_atomic(word) {
        Ok(())
    } else {
        Err(WindowError::Refused {
            peer: peer.to_string(),
            word,
            reason: format!(
                "only words {}..{} (control, site locks, update counters) accept remote atomics",
                layout::REMOTE_ATOMIC.start,
                layout::REMOTE_ATOMIC.end
            ),
        })
    }
}

#[cfg(test)]
mod tests;
