//! The node window: a 4 KiB block of shared state in a node's memory, and the
//! transports that let peers read and update it.
//!
//! Every participant (each sidecar, each proxy) owns one window with the same
//! layout ([`layout`]): a header, a seqlock-guarded load block ([`seqlock`])
//! written only by the owner, and a control area (role word, claim record,
//! site locks, update counters; [`role`]) that peers change with remote
//! compare-and-swap and fetch-and-add.
//!
//! Peers reach a window through one object-safe trait,
//! [`transport::RemoteWindow`], made from an [`Endpoint`] by
//! [`Link::connect`]; the owner serves it with a [`WindowServer`] made from
//! a [`Listen`] ([`serve`]). Three transports implement them:
//!
//! | transport | module | one-sided? |
//! |---|---|---|
//! | shared memory on one host | [`shm`] | yes: plain CPU loads and atomics on a `/dev/shm` mapping |
//! | TCP anywhere | [`tcp`] | no: a responder thread in the owner serves pipelined frames |
//! | RDMA verbs | [`verbs`] | yes: the NIC serves READ / CAS / FAA |
//!
//! The owner side lives in [`memory::WindowMemory`]. The layout and protocol
//! are documented in `docs/window.md`; the design reasoning comes from seed 001
//! section 3 (shared state read by RDMA, remote CAS locking, FAA counters) and
//! seed 002 section 3 (one-sided load monitoring).
//!
//! Comments cite the research papers as "seed 000" … "seed 004" (with a
//! section or figure); `docs/references.md` lists them by title, authors and
//! venue.
#![deny(unsafe_code)]

pub mod layout;
pub mod link;
pub mod load;
pub mod memory;
pub mod role;
pub mod seqlock;
pub mod serve;
pub mod shm;
pub mod tcp;
pub mod transport;
#[cfg(feature = "verbs")]
pub mod verbs;

pub use layout::site_table_hash;
pub use link::{Endpoint, Link, TransportKind};
pub use load::Field;
pub use memory::WindowMemory;
pub use role::{PinWord, RoleState, RoleStatus, RoleStatusCode, RoleWord, SiteLock, SiteSlot};
pub use seqlock::{
    decode_block, publish, read_consistent, read_load, LoadBlock, LoadRead, LoadSample, ReadPolicy,
    Torn, UnknownReason,
};
pub use serve::{Listen, WindowServer};
pub use shm::ShmWindow;
pub use tcp::{auth::DatagramKey, Psk, TcpServerHandle, TcpWindow};
pub use transport::{Expect, RemoteWindow, WindowFuture};

/// Errors from creating, serving or reaching a window.
///
/// `peer` fields name the other side as a transport shows it in logs: a file
/// path for shm, a socket address for tcp and verbs.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The peer's window does not start with the `RDMALBW1` magic: it is not
    /// an rdmalb window, or its owner has not finished initialising it.
    #[error("window at {peer} has bad magic {found:#018x} (expected \"RDMALBW1\"); not an rdmalb window or not initialised yet")]
    BadMagic {
        /// Where the window was read from.
        peer: String,
        /// The magic word found.
        found: u64,
    },
    /// The peer speaks another window layout version.
    #[error(
        "window at {peer} has layout version {found}, this build understands version {}",
        layout::LAYOUT_VERSION
    )]
    BadVersion {
        /// Where the window was read from.
        peer: String,
        /// The version word found.
        found: u64,
    },
    /// The peer's window size word is not 4096.
    #[error(
        "window at {peer} declares size {found} bytes, expected {}",
        layout::WINDOW_BYTES
    )]
    BadSize {
        /// Where the window was read from.
        peer: String,
        /// The size word found.
        found: u64,
    },
    /// The peer was built from a different site table (sites differ or are in
    /// another order), so site indices would be misread.
    #[error("window at {peer} uses site-table hash {theirs:#018x} but ours is {ours:#018x}: the proxy and the sidecar must list the same sites in the same order")]
    SiteTableMismatch {
        /// Where the window was read from.
        peer: String,
        /// Our site-table hash.
        ours: u64,
        /// The peer's site-table hash.
        theirs: u64,
    },
    /// The peer's node id is not the one configured for it.
    #[error("window at {peer} belongs to node {found}, expected node {expected}")]
    NodeIdMismatch {
        /// Where the window was read from.
        peer: String,
        /// The node id configured for this peer.
        expected: u64,
        /// The node id in the peer's header.
        found: u64,
    },
    /// An atomic operation or word read outside the remote-atomic area
    /// (words 32..192), or any other operation the window's owner forbids.
    #[error("operation on word {word} of window at {peer} refused: {reason}")]
    Refused {
        /// Where the operation was aimed.
        peer: String,
        /// The word index requested.
        word: usize,
        /// Why it was refused.
        reason: String,
    },
    /// Authentication with the peer failed (wrong pre-shared key, bad
    /// handshake, or a tampered frame).
    #[error("authentication with {peer} failed: {reason}")]
    Auth {
        /// The peer's address.
        peer: String,
        /// What went wrong.
        reason: String,
    },
    /// The peer sent bytes that do not follow the protocol.
    #[error("protocol error from {peer}: {detail}")]
    Protocol {
        /// The peer's address.
        peer: String,
        /// What was wrong.
        detail: String,
    },
    /// The connection to the peer is closed; reconnect to continue.
    #[error("connection to window at {peer} is closed")]
    Closed {
        /// The peer's address.
        peer: String,
    },
    /// An operation did not complete in time.
    #[error("operation on window at {peer} timed out after {after:?}")]
    Timeout {
        /// The peer's address.
        peer: String,
        /// How long we waited.
        after: std::time::Duration,
    },
    /// A system call on a file, mapping or socket failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing, including the path or address.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Another live process owns the window file.
    #[error("window file {path} is in use by another live process (it holds the file lock); stop it or choose another path")]
    InUse {
        /// The window file.
        path: String,
    },
    /// The pre-shared key file is unusable.
    #[error("pre-shared key file {path}: {reason}")]
    Psk {
        /// The key file.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
    /// No usable RDMA device (used by the verbs transport).
    #[error(
        "RDMA verbs unavailable: {detail}; use transport = \"shm\" (same host) or \"tcp\" instead"
    )]
    NoDevice {
        /// What is missing: the library, a device, a port.
        detail: String,
    },
}

impl WindowError {
    /// The error for a config that asks for verbs in a binary built without
    /// the `verbs` feature: start-up stops with it, naming the alternatives.
    pub fn verbs_not_compiled() -> Self {
        WindowError::NoDevice {
            detail: "the verbs transport is not compiled into this binary (it was built without the `verbs` Cargo feature; rebuild with default features)".to_string(),
        }
    }

    /// Build an [`WindowError::Io`] with context.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        WindowError::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether retrying the same operation on a fresh connection may succeed
    /// (transient transport trouble) as opposed to a configuration or
    /// protocol mismatch that will fail again.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            WindowError::Closed { .. } | WindowError::Timeout { .. } | WindowError::Io { .. }
        )
    }
}
