//! The proxy side's queue-pair engine: posting work requests, matching
//! completions to waiting futures, timeouts, and failure, for one window.
//!
//! Every operation owns one *slot* of a registered local buffer (256 bytes,
//! enough for a whole `read_raw`): the NIC writes the READ data or the
//! atomic's old value there. The work request id is the slot index. The
//! process's shared completion thread ([`super::poller`]) polls this
//! window's completion queue and, per completion, copies the result out of
//! the slot, frees the slot and wakes the waiting future through a oneshot
//! channel.
//!
//! Why slots are freed only by the completion thread: a future may time out
//! or be dropped while its request is still in the NIC; the slot must not be
//! reused until the NIC is done with it. The number of slots bounds the
//! operations in flight (a semaphore; waiters queue fairly).
//!
//! A closed control connection, an error completion or a request stuck far
//! beyond its timeout marks the window *broken*: its queue pair is moved to
//! ERROR (the NIC flushes everything outstanding into this window's own
//! queue), its waiters get an error, and its new operations fail at once.
//! Other windows on the same poller are not touched. The caller reconnects
//! with a new `VerbsWindow`.
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::io::Read;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sideway::ibverbs::completion::{
    BasicCompletionQueue, CompletionQueue, PollCompletionQueueError,
};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, PostSendGuard, QueuePair, SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;
use tokio::sync::{oneshot, Semaphore};

use super::device;
use super::lock;
use super::poller::{Polled, Poller, PollerError};
use crate::layout::READ_WORDS;

/// Bytes of one slot: a whole `read_raw` (32 words).
pub(crate) const SLOT_BYTES: usize = READ_WORDS * 8;
/// `IBV_WC_SUCCESS` and `IBV_WC_WR_FLUSH_ERR`.
const WC_SUCCESS: u32 = 0;
const WC_FLUSH: u32 = 5;

/// What an operation produced.
// Boxing the block would cost an allocation per READ on the hot path; the
// value lives only between the completion thread and one waiter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Words 0..32 from a READ.
    Block([u64; READ_WORDS]),
    /// The old value from an atomic.
    Word(u64),
}

/// Why an operation failed (mapped to `WindowError` by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpError {
    /// No completion within the operation timeout.
    Timeout(Duration),
    /// The queue pair is unusable; the reason names the first failure.
    Broken(String),
    /// The NIC reported an error for this request.
    Completion(String),
}

/// The remote work request to post.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Request {
    /// RDMA READ of `len` bytes at `addr`.
    Read { rkey: u32, addr: u64, len: u32 },
    /// ATOMIC_CMP_AND_SWP on the 8 bytes at `addr`.
    CompareSwap {
        rkey: u32,
        addr: u64,
        expected: u64,
        new: u64,
    },
    /// ATOMIC_FETCH_AND_ADD on the 8 bytes at `addr`.
    FetchAdd { rkey: u32, addr: u64, delta: u64 },
}

/// Page-aligned, zeroed memory the NIC writes into; only touched through
/// raw pointers (the NIC is a concurrent writer Rust knows nothing about).
struct SlotMemory {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl SlotMemory {
    fn new(slots: usize) -> Option<Self> {
        let layout =
            Layout::from_size_align(slots.checked_mul(SLOT_BYTES)?.max(4096), 4096).ok()?;
        // SAFETY: the layout has a non-zero size (at least 4096 bytes).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(SlotMemory {
            ptr: NonNull::new(ptr)?,
            layout,
        })
    }

    fn addr(&self, slot: usize) -> u64 {
        self.ptr.as_ptr() as u64 + (slot * SLOT_BYTES) as u64
    }

    /// Reads `n` words of slot `slot`. Called only after the slot's
    /// completion was polled, i.e. after the NIC finished writing.
    fn words<const N: usize>(&self, slot: usize) -> [u64; N] {
        let mut out = [0u64; N];
        let base = self.ptr.as_ptr().wrapping_add(slot * SLOT_BYTES) as *const u64;
        for (i, w) in out.iter_mut().enumerate() {
            // SAFETY: slot < slot count and N * 8 <= SLOT_BYTES (checked by the
            // callers' constants), so the address is inside the allocation and
            // 8-byte aligned (page-aligned base, 256-byte slots). Volatile: the
            // NIC wrote this memory behind the compiler's back.
            *w = u64::from_le(unsafe { std::ptr::read_volatile(base.add(i)) });
        }
        out
    }
}

impl Drop for SlotMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout. The memory region and
        // the queue pair are dropped before (field order in `Engine`).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the memory is plain bytes; all access is through raw pointers and
// each slot has one owner at a time (the pending table).
unsafe impl Send for SlotMemory {}
// SAFETY: as above.
unsafe impl Sync for SlotMemory {}

struct Pending {
    kind: Kind,
    tx: Option<oneshot::Sender<Result<Done, OpError>>>,
    posted: Instant,
    deadline: Instant,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Block,
    Word,
}

struct Table {
    pending: Vec<Option<Pending>>,
    free: Vec<usize>,
}

/// The queue pair, its buffers and the completion bookkeeping of one window.
/// Field order is drop order: queue pair first (no DMA after it is gone),
/// then the local region, then the memory it covers, then the completion
/// queue, and the poller (its channel) last.
pub(crate) struct Engine {
    qp: Mutex<BasicQueuePair>,
    local_mr: Arc<MemoryRegion>,
    mem: SlotMemory,
    cq: Arc<BasicCompletionQueue>,
    /// Whether `cq` is armed for its next completion event (poller thread only).
    armed: AtomicBool,
    control: TcpStream,
    table: Mutex<Table>,
    permits: Semaphore,
    outstanding: AtomicUsize,
    broken: OnceLock<String>,
    shutdown: AtomicBool,
    op_timeout: Duration,
    peer: String,
    poller: Arc<Poller>,
}

/// Why setting up an engine or posting to it failed: the step, and what
/// the verbs library or the OS said.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    #[error(transparent)]
    Poller(#[from] PollerError),
    #[error("{0}")]
    CreateCq(String),
    #[error("{0}")]
    CreateQp(String),
    #[error("cannot allocate the local RDMA buffer")]
    Buffer,
    #[error("registering the local buffer: {0} (locked-memory limit? see `ulimit -l`)")]
    Register(String),
    #[error("control connection: {0}")]
    ControlMode(#[source] std::io::Error),
    #[error("{0}")]
    Post(String),
}

/// Resources created before the queue pair is connected.
pub(crate) struct Parts {
    pub poller: Arc<Poller>,
    pub qp: BasicQueuePair,
    pub cq: Arc<BasicCompletionQueue>,
    pub slots: usize,
}

/// Creates this window's completion queue (on the shared poller's channel)
/// and an RC queue pair (INIT, no remote access: nobody may read or write
/// the proxy's memory) with `slots` send slots.
pub(crate) fn create_parts(poller: Arc<Poller>, slots: usize) -> Result<Parts, EngineError> {
    let device = &poller.device;
    let mut b = device.ctx.create_cq_builder();
    b.setup_cqe(slots as u32 + 8)
        .setup_comp_channel(&poller.channel, 0);
    let cq = b
        .build()
        .map_err(|e| EngineError::CreateCq(rdmalb_base::error::chain(&e)))?;
    let qp = device
        .create_qp(&cq.clone().into(), slots as u32, AccessFlags::none())
        .map_err(|e| EngineError::CreateQp(e.to_string()))?;
    Ok(Parts {
        poller,
        qp,
        cq,
        slots,
    })
}

impl Engine {
    /// Registers the local slots and wraps a connected queue pair. Call
    /// [`Engine::start`] next.
    pub(crate) fn new(
        parts: Parts,
        control: TcpStream,
        op_timeout: Duration,
        peer: String,
    ) -> Result<Arc<Engine>, EngineError> {
        let mem = SlotMemory::new(parts.slots).ok_or(EngineError::Buffer)?;
        // SAFETY: `mem` is a live allocation of `layout.size()` bytes; it is
        // dropped after the region (field order of `Engine`).
        let local_mr = unsafe {
            parts.poller.device.pd.reg_mr(
                mem.ptr.as_ptr() as usize,
                mem.layout.size(),
                AccessFlags::LocalWrite,
            )
        }
        .map_err(|e| EngineError::Register(rdmalb_base::error::chain(&e)))?;
        control
            .set_nonblocking(true)
            .map_err(EngineError::ControlMode)?;
        let table = Table {
            pending: (0..parts.slots).map(|_| None).collect(),
            free: (0..parts.slots).rev().collect(),
        };
        Ok(Arc::new(Engine {
            qp: Mutex::new(parts.qp),
            local_mr,
            mem,
            cq: parts.cq,
            armed: AtomicBool::new(false),
            control,
            table: Mutex::new(table),
            permits: Semaphore::new(parts.slots),
            outstanding: AtomicUsize::new(0),
            broken: OnceLock::new(),
            shutdown: AtomicBool::new(false),
            op_timeout,
            peer,
            poller: parts.poller,
        }))
    }

    /// Hands the window to the shared completion thread; it holds a
    /// reference until [`Engine::stop`].
    pub(crate) fn start(self: &Arc<Self>) -> Result<(), EngineError> {
        let me: Arc<dyn Polled> = Arc::clone(self) as _;
        Ok(Arc::clone(&self.poller).register(me)?)
    }

    /// Closes the window: the completion thread fails what still waits and
    /// releases its reference (the queue pair goes with the last one).
    pub(crate) fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.poller.wake();
    }

    /// The first failure, if the window is unusable.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.get().map(String::as_str)
    }

    /// Posts `req` and waits for its completion (at most the operation timeout).
    pub(crate) async fn execute(&self, req: Request) -> Result<Done, OpError> {
        if let Some(r) = self.broken() {
            return Err(OpError::Broken(r.to_string()));
        }
        let permit =
            self.permits.acquire().await.map_err(|_| {
                OpError::Broken(self.broken().unwrap_or("window closed").to_string())
            })?;
        // The completion thread returns the permit when the slot is free again.
        permit.forget();
        let kind = match req {
            Request::Read { .. } => Kind::Block,
            _ => Kind::Word,
        };
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let slot = {
            let mut t = lock(&self.table);
            let Some(slot) = t.free.pop() else {
                // Cannot happen (permits == free slots); fail rather than panic.
                self.permits.add_permits(1);
                return Err(OpError::Broken("slot accounting error".into()));
            };
            t.pending[slot] = Some(Pending {
                kind,
                tx: Some(tx),
                posted: now,
                deadline: now + self.op_timeout,
            });
            slot
        };
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = self.post(slot, req) {
            self.release(slot);
            return Err(OpError::Broken(format!(
                "posting the work request failed: {e}"
            )));
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(OpError::Broken(
                self.broken()
                    .unwrap_or("completion thread stopped")
                    .to_string(),
            )),
        }
    }

    fn post(&self, slot: usize, req: Request) -> Result<(), EngineError> {
        let laddr = self.mem.addr(slot);
        let lkey = self.local_mr.lkey();
        let mut qp = lock(&self.qp);
        let mut g = qp.start_post_send();
        let wr = g.construct_wr(slot as u64, WorkRequestFlags::Signaled);
        let (h, len) = match req {
            Request::Read { rkey, addr, len } => {
                (wr.setup_read(rkey, addr), len.min(SLOT_BYTES as u32))
            }
            Request::CompareSwap {
                rkey,
                addr,
                expected,
                new,
            } => (wr.setup_atomic_compare_swap(rkey, addr, expected, new), 8),
            Request::FetchAdd { rkey, addr, delta } => {
                (wr.setup_atomic_fetch_add(rkey, addr, delta), 8)
            }
        };
        // SAFETY: the scatter entry is this operation's own slot inside the
        // registered local buffer (lkey of that region); the slot stays
        // reserved until its completion is polled, and the buffer outlives
        // the queue pair.
        unsafe { h.setup_sge(lkey, laddr, len) };
        g.post()
            .map_err(|e| EngineError::Post(rdmalb_base::error::chain(&e)))
    }

    /// Returns a slot (and its permit) to the pool.
    fn release(&self, slot: usize) -> Option<Pending> {
        let entry = {
            let mut t = lock(&self.table);
            let entry = t.pending.get_mut(slot).and_then(Option::take);
            if entry.is_some() {
                t.free.push(slot);
            }
            entry
        };
        if entry.is_some() {
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
            self.permits.add_permits(1);
        }
        entry
    }

    /// Marks the window unusable, fails new and queued operations and flushes
    /// outstanding ones through the ERROR state.
    fn fail(&self, reason: String) {
        if self.broken.set(reason.clone()).is_ok() {
            tracing::warn!(peer = %self.peer, %reason, "verbs window broken");
            self.permits.close();
            if let Err(e) = device::set_error(&mut lock(&self.qp)) {
                tracing::debug!(peer = %self.peer, error = %e, "moving the queue pair to ERROR failed");
            }
        }
    }

    fn complete(&self, wr_id: u64, status: u32, vendor_err: u32) {
        let slot = wr_id as usize;
        let Some(entry) = ({
            let t = lock(&self.table);
            t.pending.get(slot).map(|p| p.as_ref().map(|p| p.kind))
        }) else {
            tracing::warn!(peer = %self.peer, wr_id, "completion for an unknown work request");
            return;
        };
        let result = if status == WC_SUCCESS {
            // The completion orders the NIC's writes before our reads.
            fence(Ordering::Acquire);
            match entry {
                Some(Kind::Block) => Ok(Done::Block(self.mem.words::<READ_WORDS>(slot))),
                Some(Kind::Word) => Ok(Done::Word(self.mem.words::<1>(slot)[0])),
                None => Err(OpError::Broken("completion for a free slot".into())),
            }
        } else {
            let text = format!(
                "work completion status {} ({status}, vendor error {vendor_err:#x})",
                wc_status_text(status)
            );
            if status != WC_FLUSH {
                self.fail(format!("RDMA operation failed: {text}"));
            }
            Err(OpError::Completion(text))
        };
        if let Some(mut p) = self.release(slot) {
            if let Some(tx) = p.tx.take() {
                let _ = tx.send(result);
            }
        }
    }
}

impl Polled for Engine {
    /// Whether [`Engine::stop`] was called.
    fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Operations posted and not completed yet.
    fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Acquire)
    }

    /// The completion queue, to match completion events to windows.
    fn cq_ptr(&self) -> *mut rdma_mummy_sys::ibv_cq {
        unsafe_cq(&self.cq)
    }

    /// The control connection, watched by the completion thread.
    fn control_fd(&self) -> std::os::fd::RawFd {
        self.control.as_raw_fd()
    }

    /// Arms the queue for its next completion event, unless it is armed.
    fn arm(&self) {
        if self.armed.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: the CQ is alive (held by `self`); arming is the documented
        // way to get one event on the channel for the next completion.
        let rc = unsafe { rdma_mummy_sys::ibv_req_notify_cq(self.cq_ptr(), 0) };
        if rc != 0 {
            self.armed.store(false, Ordering::Release);
            self.fail(format!("ibv_req_notify_cq failed ({rc})"));
        }
    }

    /// The queue's event was taken: it needs arming again.
    fn disarmed(&self) {
        self.armed.store(false, Ordering::Release);
    }

    /// The window was closed: fail whatever still waits. A normal close is
    /// not a warning.
    fn finish(&self) {
        if self.broken.set("window closed".into()).is_ok() {
            self.permits.close();
            tracing::debug!(peer = %self.peer, "verbs window closed");
        }
        let mut t = lock(&self.table);
        for p in t.pending.iter_mut().flatten() {
            if let Some(tx) = p.tx.take() {
                let _ = tx.send(Err(OpError::Broken("window closed".into())));
            }
        }
    }

    /// The control connection is readable: a close breaks the window.
    fn control_activity(&self) {
        let mut buf = [0u8; 64];
        match (&self.control).read(&mut buf) {
            Ok(0) => self.fail("the sidecar closed the verbs control connection".into()),
            Ok(_) => {} // reserved for future notices; ignored
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => self.fail(format!("verbs control connection failed: {e}")),
        }
    }

    /// Polls every available completion; returns how many there were.
    fn drain(&self) -> usize {
        let mut n = 0;
        match self.cq.start_poll() {
            Ok(poller) => {
                for wc in poller {
                    n += 1;
                    self.complete(wc.wr_id(), wc.status(), wc.vendor_err());
                }
            }
            Err(PollCompletionQueueError::CompletionQueueEmpty) => {}
            Err(e) => self.fail(format!(
                "polling the completion queue failed: {}",
                rdmalb_base::error::chain(&e)
            )),
        }
        n
    }

    /// Times out operations past their deadline; breaks the window when one
    /// is stuck far beyond it.
    fn scan_deadlines(&self, now: Instant) {
        let hard = (self.op_timeout * 10).max(Duration::from_secs(5));
        let mut stuck = false;
        {
            let mut t = lock(&self.table);
            for p in t.pending.iter_mut().flatten() {
                if now >= p.deadline {
                    if let Some(tx) = p.tx.take() {
                        let _ = tx.send(Err(OpError::Timeout(self.op_timeout)));
                    }
                }
                stuck |= now.duration_since(p.posted) > hard;
            }
        }
        if stuck {
            self.fail(format!(
                "an RDMA operation has not completed after {hard:?}"
            ));
        }
    }

    fn broken(&self) -> Option<&str> {
        Engine::broken(self)
    }
}

fn unsafe_cq(cq: &BasicCompletionQueue) -> *mut rdma_mummy_sys::ibv_cq {
    // SAFETY: the pointer is only used while the CQ is alive (the poller
    // holds an `Arc` of the engine that owns the CQ).
    unsafe { cq.cq().as_ptr() }
}

fn wc_status_text(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static string (or NULL when
    // libibverbs lacks the symbol).
    let p = unsafe { rdma_mummy_sys::ibv_wc_status_str(status) };
    if p.is_null() {
        return "unknown".into();
    }
    // SAFETY: non-null, NUL-terminated static string from libibverbs.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}
