//! The one trait every window transport implements, [`RemoteWindow`], and
//! the checks every transport makes when it connects ([`Expect`]) and before
//! it sends an atomic ([`check_atomic_word`]).
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
    /// validation. Use [`crate::window::read_load`] for a validated block.
    fn read_raw(&self) -> WindowFuture<'_, [u64; 32]>;

    /// Atomic read of one word in the remote-atomic area (32..192).
    fn read_word(&self, word: usize) -> WindowFuture<'_, u64>;

    /// Compare-and-swap one word in the remote-atomic area; returns the old
    /// value (the swap happened iff it equals `expected`).
    fn compare_swap(&self, word: usize, expected: u64, new: u64) -> WindowFuture<'_, u64>;

    /// Wrapping fetch-and-add on one word in the remote-atomic area; returns
    /// the old value.
    fn fetch_add(&self, word: usize, delta: u64) -> WindowFuture<'_, u64>;
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
mod tests {
    use super::*;

    fn header() -> [u64; 32] {
        let mut h = [0u64; 32];
        h[0] = layout::MAGIC;
        h[1] = 1;
        h[2] = 5;
        h[3] = 0xABCD;
        h[4] = 4096;
        h
    }

    #[test]
    fn header_checks() {
        let h = header();
        assert!(Expect::ANY.check("p", &h).is_ok());
        let e = Expect {
            node_id: Some(5),
            site_hash: Some(0xABCD),
        };
        assert!(e.check("p", &h).is_ok());

        let mut bad = h;
        bad[0] = 1;
        assert!(matches!(
            e.check("p", &bad),
            Err(WindowError::BadMagic { found: 1, .. })
        ));
        let mut bad = h;
        bad[1] = 2;
        assert!(matches!(
            e.check("p", &bad),
            Err(WindowError::BadVersion { found: 2, .. })
        ));
        let mut bad = h;
        bad[4] = 8192;
        assert!(matches!(
            e.check("p", &bad),
            Err(WindowError::BadSize { found: 8192, .. })
        ));
        let err = Expect {
            node_id: None,
            site_hash: Some(1),
        }
        .check("/dev/shm/x", &h)
        .unwrap_err();
        assert!(matches!(
            err,
            WindowError::SiteTableMismatch {
                ours: 1,
                theirs: 0xABCD,
                ..
            }
        ));
        assert!(err.to_string().contains("/dev/shm/x"));
        assert!(matches!(
            Expect {
                node_id: Some(6),
                site_hash: None
            }
            .check("p", &h),
            Err(WindowError::NodeIdMismatch {
                expected: 6,
                found: 5,
                ..
            })
        ));
        assert!(matches!(
            Expect::ANY.check("p", &[]),
            Err(WindowError::BadMagic { .. })
        ));
    }

    #[test]
    fn atomic_word_bounds() {
        assert!(check_atomic_word("p", 31).is_err());
        assert!(check_atomic_word("p", 32).is_ok());
        assert!(check_atomic_word("p", 191).is_ok());
        assert!(matches!(
            check_atomic_word("p", 192),
            Err(WindowError::Refused { word: 192, .. })
        ));
        assert!(check_atomic_word("p", usize::MAX).is_err());
    }
}
