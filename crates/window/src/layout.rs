//! The one definition of the window layout: word indices, areas and the
//! site-table hash. Every transport and every owner uses these constants; the
//! tests at the bottom pin each offset so a change is deliberate.
//!
//! A window is 4096 bytes = 512 little-endian `u64` words, 8-byte aligned.
//!
//! | words | area | remote access |
//! |---|---|---|
//! | 0..8 | header | read |
//! | 8..32 | load block (seqlock) | read |
//! | 32..64 | control | atomic |
//! | 64..128 | site locks | atomic |
//! | 128..192 | update counters | atomic |
//! | 192..512 | reserved | none |

use std::ops::Range;

/// Window size in bytes.
pub const WINDOW_BYTES: usize = 4096;
/// Window size in 64-bit words.
pub const WINDOW_WORDS: usize = WINDOW_BYTES / 8;
/// Magic word: the bytes `RDMALBW1` read as a little-endian `u64`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RDMALBW1");
/// Layout version this build reads and writes.
pub const LAYOUT_VERSION: u64 = 1;
/// Most sites one site table may hold (one lock and one counter word each).
pub const MAX_SITES: usize = 64;

/// Header words 0..8.
pub const HEADER: Range<usize> = 0..8;
/// Load block words 8..32, guarded by the seqlock words at both ends.
pub const LOAD_BLOCK: Range<usize> = 8..32;
/// Control words 32..64.
pub const CONTROL: Range<usize> = 32..64;
/// Site lock words 64..128, one per site index.
pub const SITE_LOCKS: Range<usize> = 64..128;
/// Update counter words 128..192, one per site index.
pub const UPDATE_COUNTERS: Range<usize> = 128..192;
/// Words a remote peer may read with `read_word` and change with CAS / FAA.
pub const REMOTE_ATOMIC: Range<usize> = 32..192;
/// Words a remote peer reads in one `read_raw` (header + load block).
pub const READ_WORDS: usize = 32;
/// Byte range of the remote-read-only region (header + load block); on verbs
/// this is memory region 1, registered REMOTE_READ only.
pub const READ_ONLY_BYTES: Range<usize> = 0..READ_WORDS * 8;
/// Byte range of the remote-atomic region; on verbs this is memory region 2,
/// registered REMOTE_READ | REMOTE_ATOMIC.
pub const ATOMIC_BYTES: Range<usize> = REMOTE_ATOMIC.start * 8..REMOTE_ATOMIC.end * 8;

/// Word indices. Names follow `docs/window.md`.
pub mod word {
    /// Magic (`RDMALBW1`).
    pub const MAGIC: usize = 0;
    /// Layout version (1).
    pub const VERSION: usize = 1;
    /// Node id of the window's owner.
    pub const NODE_ID: usize = 2;
    /// FNV-1a 64 hash of the site table, see [`super::site_table_hash`].
    pub const SITE_HASH: usize = 3;
    /// Window size in bytes (4096).
    pub const SIZE: usize = 4;
    /// Generation: a random non-zero value drawn each time the window is
    /// created. A proxy holding a site lock on a lock home checks it is
    /// unchanged before each write under the lock: a restarted lock home
    /// (fresh, free locks) has another generation.
    pub const GENERATION: usize = 5;

    /// Seqlock word written first (odd while a write is in progress).
    pub const SEQ_BEGIN: usize = 8;
    /// Time of the last publish, unix nanoseconds (CLOCK_REALTIME).
    pub const UPDATED_AT: usize = 9;
    /// CPU utilisation, parts per million.
    pub const CPU_UTIL: usize = 10;
    /// Run queue length, milli-tasks.
    pub const RUN_QUEUE: usize = 11;
    /// Memory used, parts per million.
    pub const MEM_USED: usize = 12;
    /// Network receive rate, bytes per second.
    pub const NET_RX: usize = 13;
    /// Network transmit rate, bytes per second.
    pub const NET_TX: usize = 14;
    /// Active connections to the application.
    pub const ACTIVE_CONNS: usize = 15;
    /// Pending interrupt rate, per second.
    pub const IRQ_RATE: usize = 16;
    /// Application workers busy.
    pub const APP_BUSY: usize = 17;
    /// Application worker capacity.
    pub const APP_CAPACITY: usize = 18;
    /// Requests served in total.
    pub const REQUESTS_TOTAL: usize = 19;
    /// Application queue length.
    pub const APP_QUEUE: usize = 20;
    /// The app's recent response time, microseconds (0: not reported).
    pub const APP_LATENCY: usize = 21;
    /// Requests the app's queue holds at most beyond its busy workers
    /// (0: not reported).
    pub const APP_QUEUE_LIMIT: usize = 22;
    /// Seqlock word written last.
    pub const SEQ_END: usize = 31;

    /// Role word, see [`crate::role::RoleWord`].
    pub const ROLE: usize = 32;
    /// Epoch of the role the sidecar has applied.
    pub const ROLE_APPLIED: usize = 33;
    /// Claim record: id of the proxy that claimed the node.
    pub const CLAIM_PROXY: usize = 34;
    /// Claim record: claim time, unix milliseconds.
    pub const CLAIM_TIME: usize = 35;
    /// Claim record: the role epoch the claim installed.
    pub const CLAIM_EPOCH: usize = 36;
    /// Role status code: 0 ok, else the sidecar's failure reason.
    pub const ROLE_STATUS: usize = 37;
    /// Manual pin, see [`crate::role::PinWord`]: no reconfiguration agent
    /// moves the node before the deadline (proxies only, by CAS).
    pub const PIN: usize = 38;
}

/// Word holding the lock of site `site`, or `None` past [`MAX_SITES`].
pub fn site_lock_word(site: usize) -> Option<usize> {
    (site < MAX_SITES).then(|| SITE_LOCKS.start + site)
}

/// Word holding the update counter of site `site`, or `None` past [`MAX_SITES`].
pub fn update_counter_word(site: usize) -> Option<usize> {
    (site < MAX_SITES).then(|| UPDATE_COUNTERS.start + site)
}

/// Whether a remote peer may read (`read_word`) or CAS / FAA word `word`.
pub fn is_remote_atomic(word: usize) -> bool {
    REMOTE_ATOMIC.contains(&word)
}

/// FNV-1a 64 over the site names in config order, each followed by a 0 byte.
///
/// Site indices are positions in the config's site list, so every proxy and
/// sidecar must agree on the list; comparing this hash catches a mismatch.
pub fn site_table_hash<S: AsRef<str>>(sites: &[S]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for site in sites {
        for &b in site.as_ref().as_bytes().iter().chain(std::iter::once(&0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h
}

#[cfg(test)]
mod tests;
