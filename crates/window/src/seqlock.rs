//! The load block's seqlock: the owner's writer ([`publish`]), the validator
//! every transport's reader goes through ([`decode_block`]) and the reader
//! policy ([`read_load`]: bounded retries, staleness, deadline).
//!
//! Protocol (seed 001 section 3.1 reads the whole block with one RDMA READ;
//! the two sequence words make that read checkable):
//!
//! * writer: set `seq_begin` and `seq_end` to the same odd value, Release
//!   fence, write the fields, then store the next even value to `seq_end`
//!   and then to `seq_begin` (both Release);
//! * reader: accept a snapshot only when `seq_begin == seq_end`, even and
//!   non-zero.
//!
//! Marking *both* ends odd before touching the fields makes the check sound
//! whichever end a reader happens to fetch first: an ascending reader
//! (`seq_begin`, fields, `seq_end`; what a NIC DMA normally does) sees a
//! changed `seq_end` after any field it read from a newer write, and a
//! descending reader sees a changed `seq_begin`. Local readers
//! ([`snapshot`]) read ascending with an Acquire load of `seq_begin` and an
//! Acquire fence before `seq_end`.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::layout::{self, word, READ_WORDS};
use super::load::Field;
pub use super::load::LoadSample;
use super::memory::WindowMemory;
use super::transport::{Expect, RemoteWindow};
use super::WindowError;

/// A validated load block as read from a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBlock {
    /// Node id from the window header.
    pub node_id: u64,
    /// The even sequence number of the write this block came from.
    pub seq: u64,
    /// When the owner published it, unix nanoseconds (CLOCK_REALTIME).
    pub updated_at_ns: u64,
    /// The published fields.
    pub sample: LoadSample,
}

impl LoadBlock {
    /// Age of the block at `now` (zero if the owner's clock is ahead).
    pub fn age(&self, now: SystemTime) -> Duration {
        let now_ns = rdmalb_base::time::unix_ns(now);
        Duration::from_nanos(now_ns.saturating_sub(self.updated_at_ns))
    }
}

/// Why a raw read did not yield a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Torn {
    /// The owner was mid-write (odd sequence number).
    #[error("load block write in progress (seq {seq})")]
    InProgress {
        /// The odd sequence value seen.
        seq: u64,
    },
    /// The two sequence words differ: the read overlapped a write.
    #[error("load block torn (seq_begin {begin} != seq_end {end})")]
    Mismatch {
        /// `seq_begin` as read.
        begin: u64,
        /// `seq_end` as read.
        end: u64,
    },
    /// The owner has not published yet (both sequence words zero).
    #[error("no load block published yet")]
    NeverPublished,
    /// Not an rdmalb window of our layout version: retrying will not help.
    #[error("bad window header (magic {magic:#018x}, version {version})")]
    BadHeader {
        /// Magic word seen.
        magic: u64,
        /// Version word seen.
        version: u64,
    },
}

impl Torn {
    /// Whether another read may succeed (the owner was writing).
    pub fn is_retryable(self) -> bool {
        matches!(self, Torn::InProgress { .. } | Torn::Mismatch { .. })
    }
}

/// Publish `sample` into the owner's window, stamped with the current time.
///
/// Only the window's owner may call this, from one thread at a time (the
/// seqlock has a single writer).
pub fn publish(mem: &WindowMemory, sample: &LoadSample) {
    publish_words(mem.words(), sample, rdmalb_base::time::unix_now_ns());
}

/// Publish with an explicit timestamp (tests and replay).
pub fn publish_at(mem: &WindowMemory, sample: &LoadSample, updated_at_ns: u64) {
    publish_words(mem.words(), sample, updated_at_ns);
}

/// Number of stores one publish makes.
const PLAN_LEN: usize = 5 + Field::ALL.len();
/// Stores `0..MARK_ODD` set the odd markers; a Release fence follows them.
const MARK_ODD: usize = 2;

/// The stores one publish makes, in program order: both odd markers, the
/// fields, then `seq_end` and `seq_begin` even. Kept as data so the unit
/// tests can check every interleaving a reader may observe against exactly
/// what the writer does.
fn write_plan(cur_seq: u64, s: &LoadSample, at: u64) -> [(usize, u64); PLAN_LEN] {
    // From an even value go to +1 (odd) then +2; an odd value left by a
    // writer that died mid-write is reused as the odd marker.
    let odd = cur_seq | 1;
    let even = odd.wrapping_add(1);
    let mut plan = [(0, 0); PLAN_LEN];
    plan[0] = (word::SEQ_BEGIN, odd);
    plan[1] = (word::SEQ_END, odd);
    plan[2] = (word::UPDATED_AT, at);
    for (i, f) in Field::ALL.into_iter().enumerate() {
        plan[3 + i] = (f.word(), f.get(s));
    }
    plan[PLAN_LEN - 2] = (word::SEQ_END, even);
    plan[PLAN_LEN - 1] = (word::SEQ_BEGIN, even);
    plan
}

fn publish_words(w: &[AtomicU64; layout::WINDOW_WORDS], s: &LoadSample, at: u64) {
    let plan = write_plan(w[word::SEQ_BEGIN].load(Ordering::Relaxed), s, at);
    let (marks, rest) = plan.split_at(MARK_ODD);
    let (fields, evens) = rest.split_at(PLAN_LEN - MARK_ODD - 2);
    for &(i, v) in marks {
        w[i].store(v, Ordering::Relaxed);
    }
    // Orders both odd markers before every field store below: a reader that
    // sees any new field and then fences sees the odd markers (or later).
    fence(Ordering::Release);
    for &(i, v) in fields {
        w[i].store(v, Ordering::Relaxed);
    }
    // Release: the fields happen-before each even marker.
    for &(i, v) in evens {
        w[i].store(v, Ordering::Release);
    }
}

/// Read words 0..32 of a local window in ascending order with the ordering
/// the seqlock needs. This is what the shm transport and the tcp responder
/// return for a READ.
pub fn snapshot(mem: &WindowMemory) -> [u64; READ_WORDS] {
    let w = mem.words();
    let mut out = [0u64; READ_WORDS];
    for (i, o) in out.iter_mut().enumerate().take(word::SEQ_BEGIN) {
        *o = w[i].load(Ordering::Relaxed);
    }
    out[word::SEQ_BEGIN] = w[word::SEQ_BEGIN].load(Ordering::Acquire);
    for (i, o) in out
        .iter_mut()
        .enumerate()
        .take(word::SEQ_END)
        .skip(word::SEQ_BEGIN + 1)
    {
        *o = w[i].load(Ordering::Relaxed);
    }
    // Pairs with the writer's Release fence: if any field above came from a
    // newer write, the load of seq_end below sees that write's odd marker.
    fence(Ordering::Acquire);
    out[word::SEQ_END] = w[word::SEQ_END].load(Ordering::Relaxed);
    out
}

/// Read and validate the load block of a local window straight from its
/// words: the same result as `decode_block(&snapshot(mem))`, same ordering
/// (ascending, Acquire on `seq_begin`, Acquire fence before `seq_end`), but
/// without copying words 0..32 into an array first. Only the words the
/// block's fields come from are loaded: magic, version, node id, both
/// sequence words, the time and the fields (not the site hash, size,
/// generation or the unused words before `seq_end`). The shm transport's
/// request path reads through this ([`crate::ShmWindow::read_block`]).
///
/// The fields are loaded one by one by name rather than in a loop over
/// [`Field::ALL`]: the loop compiled to a jump per field (a third of a
/// routing decision's read), the literal to thirteen plain loads. The
/// tests check it against [`decode_block`] for every field.
#[inline]
pub fn read_block(mem: &WindowMemory) -> Result<LoadBlock, Torn> {
    let w = mem.words();
    let magic = w[word::MAGIC].load(Ordering::Relaxed);
    let version = w[word::VERSION].load(Ordering::Relaxed);
    let node_id = w[word::NODE_ID].load(Ordering::Relaxed);
    let begin = w[word::SEQ_BEGIN].load(Ordering::Acquire);
    let updated_at_ns = w[word::UPDATED_AT].load(Ordering::Relaxed);
    let field = |f: Field| w[f.word()].load(Ordering::Relaxed);
    let sample = LoadSample {
        cpu_util_ppm: field(Field::Cpu),
        run_queue_milli: field(Field::RunQueue),
        mem_used_ppm: field(Field::Mem),
        net_rx_bps: field(Field::NetRx),
        net_tx_bps: field(Field::NetTx),
        active_connections: field(Field::Connections),
        irq_rate: field(Field::IrqRate),
        app_busy: field(Field::AppBusy),
        app_capacity: field(Field::AppCapacity),
        requests_total: field(Field::RequestsTotal),
        app_queue_len: field(Field::AppQueue),
        app_latency_us: field(Field::AppLatency),
        app_queue_limit: field(Field::AppQueueLimit),
    };
    // As in `snapshot`: pairs with the writer's Release fence.
    fence(Ordering::Acquire);
    let end = w[word::SEQ_END].load(Ordering::Relaxed);
    check_block(magic, version, begin, end)?;
    Ok(LoadBlock {
        node_id,
        seq: begin,
        updated_at_ns,
        sample,
    })
}

/// The checks of [`decode_block`], in its order.
fn check_block(magic: u64, version: u64, begin: u64, end: u64) -> Result<(), Torn> {
    if magic != layout::MAGIC || version != layout::LAYOUT_VERSION {
        return Err(Torn::BadHeader { magic, version });
    }
    if begin != end {
        return Err(Torn::Mismatch { begin, end });
    }
    if begin & 1 == 1 {
        return Err(Torn::InProgress { seq: begin });
    }
    if begin == 0 {
        return Err(Torn::NeverPublished);
    }
    Ok(())
}

/// Validate one raw read of words 0..32 and decode it. Accepts only a block
/// whose `seq_begin == seq_end`, even and non-zero, under a valid header.
pub fn decode_block(raw: &[u64; READ_WORDS]) -> Result<LoadBlock, Torn> {
    let begin = raw[word::SEQ_BEGIN];
    check_block(
        raw[word::MAGIC],
        raw[word::VERSION],
        begin,
        raw[word::SEQ_END],
    )?;
    let mut sample = LoadSample::default();
    for f in Field::ALL {
        f.set(&mut sample, raw[f.word()]);
    }
    Ok(LoadBlock {
        node_id: raw[word::NODE_ID],
        seq: begin,
        updated_at_ns: raw[word::UPDATED_AT],
        sample,
    })
}

/// How hard a reader tries before calling a node's load unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPolicy {
    /// Extra reads after a torn one (so at most `retries + 1` reads).
    pub retries: u32,
    /// A block older than this is reported [`LoadRead::Stale`].
    pub staleness: Duration,
    /// Bound on the whole call, all retries included.
    pub deadline: Duration,
}

impl Default for ReadPolicy {
    fn default() -> Self {
        ReadPolicy {
            retries: 3,
            staleness: Duration::from_secs(1),
            deadline: Duration::from_millis(50),
        }
    }
}

/// Why a node's load is unknown.
#[derive(Debug, thiserror::Error)]
pub enum UnknownReason {
    /// Every read overlapped a write.
    #[error("{attempts} reads were all torn")]
    Torn {
        /// Reads made.
        attempts: u32,
    },
    /// The owner has not published a block yet.
    #[error("no load published yet")]
    NeverPublished,
    /// The reads did not finish within the policy's deadline.
    #[error("no consistent read within {0:?}")]
    Deadline(Duration),
    /// The transport failed or the header is wrong.
    #[error(transparent)]
    Error(#[from] WindowError),
}

/// Result of a policy-governed load read. Never carries a torn block.
#[derive(Debug)]
pub enum LoadRead {
    /// A consistent block within the staleness bound.
    Fresh(LoadBlock),
    /// A consistent block older than the staleness bound (the owner stopped
    /// publishing, or clocks disagree).
    Stale(LoadBlock),
    /// No consistent block.
    Unknown(UnknownReason),
}

impl LoadRead {
    /// The block if it is fresh.
    pub fn fresh(&self) -> Option<&LoadBlock> {
        match self {
            LoadRead::Fresh(b) => Some(b),
            _ => None,
        }
    }
}

/// Read a peer's load block under `policy`: retry torn reads up to
/// `policy.retries` times, give up at `policy.deadline`, classify the block
/// fresh or stale against `policy.staleness`. Must run inside a Tokio runtime
/// (for the deadline timer).
pub async fn read_load(w: &dyn RemoteWindow, policy: &ReadPolicy) -> LoadRead {
    match tokio::time::timeout(policy.deadline, read_consistent(w, policy.retries)).await {
        Err(_) => LoadRead::Unknown(UnknownReason::Deadline(policy.deadline)),
        Ok(Err(reason)) => LoadRead::Unknown(reason),
        Ok(Ok(block)) => {
            if block.age(SystemTime::now()) > policy.staleness {
                LoadRead::Stale(block)
            } else {
                LoadRead::Fresh(block)
            }
        }
    }
}

/// One consistent block: read, validate, retry a torn read up to `retries`
/// times. No deadline and no staleness check: [`read_load`] adds both; the
/// routing policy applies one deadline to several of these at once.
pub async fn read_consistent(
    w: &dyn RemoteWindow,
    retries: u32,
) -> Result<LoadBlock, UnknownReason> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let raw = w.read_raw().await?;
        match decode_block(&raw) {
            Ok(block) => return Ok(block),
            Err(Torn::NeverPublished) => return Err(UnknownReason::NeverPublished),
            Err(Torn::BadHeader { .. }) => {
                // Let the header check produce the precise error.
                return Err(match Expect::ANY.check(w.peer(), &raw) {
                    Err(e) => UnknownReason::Error(e),
                    Ok(()) => UnknownReason::Torn { attempts },
                });
            }
            Err(torn) => {
                tracing::trace!(peer = w.peer(), %torn, attempts, "torn load read");
                if attempts > retries {
                    return Err(UnknownReason::Torn { attempts });
                }
                // The owner is mid-write for well under a microsecond; let
                // it finish (and other tasks run) before reading again.
                tokio::task::yield_now().await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
