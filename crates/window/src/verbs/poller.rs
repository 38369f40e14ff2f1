//! The completion poller shared by every [`VerbsWindow`](super::VerbsWindow)
//! of a process on one RDMA device: one completion channel, one thread.
//!
//! Each window keeps its own queue pair and its own completion queue (so a
//! queue pair that fails flushes only into its own queue, and no queue can
//! overflow because of another window's traffic), but every queue is
//! attached to the poller's one completion channel, and one thread polls
//! them all: a proxy with a thousand verbs windows has one completion
//! thread, not a thousand.
//!
//! The thread spins for a short while after activity (a READ on real
//! hardware completes in a few microseconds) polling the queues of the
//! windows with operations outstanding, then arms every queue and sleeps in
//! `poll(2)` on the channel, an eventfd (new windows, closed windows) and
//! every window's control connection (a closed one breaks that window). An
//! event names the queue it is for; that queue is re-armed before the next
//! sleep. Per window, the engine ([`super::engine`]) matches completions to
//! waiting operations, enforces timeouts and fails only itself when its
//! queue pair breaks.
//!
//! The thread starts with the first window and exits when the last one is
//! closed; a later window starts it again. The poller itself (channel,
//! eventfd) lives as long as a window holds it.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use sideway::ibverbs::completion::CompletionChannel;

use super::device::Device;
use super::lock;

/// What the completion thread needs of a window: its queue's state, and
/// the hooks it calls as completions, deadlines and closes come (the
/// window's engine, [`super::engine`], implements it).
pub(crate) trait Polled: Send + Sync {
    /// The window was closed: the thread finishes it and lets it go.
    fn stopping(&self) -> bool;
    /// Fails what still waits and releases the window's resources.
    fn finish(&self);
    /// Operations posted and not yet completed.
    fn outstanding(&self) -> usize;
    /// Fails operations past their deadline (and breaks a stuck window).
    fn scan_deadlines(&self, now: Instant);
    /// Asks for an event on the window's next completion.
    fn arm(&self);
    /// The window's completion queue received its event.
    fn disarmed(&self);
    /// Why the window is broken, if it is.
    fn broken(&self) -> Option<&str>;
    /// The window's control connection, watched for its close.
    fn control_fd(&self) -> std::os::fd::RawFd;
    /// The control connection is readable (closed, usually).
    fn control_activity(&self);
    /// The window's completion queue, as the channel names it in events.
    fn cq_ptr(&self) -> *mut rdma_mummy_sys::ibv_cq;
    /// Handles every completion waiting on the queue; returns how many.
    fn drain(&self) -> usize;
}

/// Why the shared completion channel or its thread could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollerError {
    #[error("{0}")]
    CreateChannel(String),
    #[error("completion channel: {0}")]
    ChannelMode(#[source] std::io::Error),
    #[error("cannot start the completion thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Spin this long after the last completion before sleeping on the channel.
const SPIN: Duration = Duration::from_micros(50);
/// Longest sleep in `poll(2)` with operations outstanding: bounds how late
/// a timeout is reported.
const TICK_MS: i32 = 5;
/// Longest sleep when idle (a new operation wakes the thread through the
/// channel, a new or closed window through the eventfd).
const IDLE_TICK_MS: i32 = 100;
/// How often outstanding operations are checked against their deadlines.
const SCAN: Duration = Duration::from_millis(1);

/// Windows handed to the thread, and whether it runs.
#[derive(Default)]
struct Registry {
    added: Vec<Arc<dyn Polled>>,
    running: bool,
}

/// One device's completion channel and the thread polling every window's
/// completion queue on it.
pub(crate) struct Poller {
    /// The completion channel every window's queue reports to.
    pub(crate) channel: Arc<CompletionChannel>,
    /// Wakes the thread: a window was added or closed.
    wake: OwnedFd,
    registry: Mutex<Registry>,
    /// Set with `added`, so the spinning thread looks at the registry only
    /// when there is something new.
    news: AtomicBool,
    pub(crate) device: Arc<Device>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("device", &self.device.name)
            .field("running", &lock(&self.registry).running)
            .finish()
    }
}

/// The poller of `device`, shared by every window of this process on it.
pub(crate) fn shared(device: &Arc<Device>) -> Result<Arc<Poller>, PollerError> {
    type Cache = Mutex<Vec<(Weak<Device>, Weak<Poller>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = lock(CACHE.get_or_init(Cache::default));
    cache.retain(|(d, p)| d.strong_count() > 0 && p.strong_count() > 0);
    if let Some(p) = cache
        .iter()
        .find(|(d, _)| std::ptr::eq(d.as_ptr(), Arc::as_ptr(device)))
        .and_then(|(_, p)| p.upgrade())
    {
        return Ok(p);
    }
    let p = Arc::new(Poller::new(Arc::clone(device))?);
    cache.push((Arc::downgrade(device), Arc::downgrade(&p)));
    Ok(p)
}

impl Poller {
    fn new(device: Arc<Device>) -> Result<Poller, PollerError> {
        let channel = device
            .ctx
            .create_comp_channel()
            .map_err(|e| PollerError::CreateChannel(rdmalb_base::error::chain(&e)))?;
        channel
            .set_nonblocking(true)
            .map_err(PollerError::ChannelMode)?;
        // SAFETY: plain syscall; the returned descriptor is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(PollerError::ChannelMode(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Poller {
            channel,
            wake,
            registry: Mutex::new(Registry::default()),
            news: AtomicBool::new(false),
            device,
        })
    }

    /// Hands `engine` to the thread (starting it if it is not running).
    pub(crate) fn register(self: &Arc<Self>, engine: Arc<dyn Polled>) -> Result<(), PollerError> {
        let mut r = lock(&self.registry);
        r.added.push(engine);
        self.news.store(true, Ordering::Release);
        if !r.running {
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name("rdmalb-verbs-cq".into())
                .spawn(move || me.run())
                .map_err(|e| {
                    r.added.pop();
                    PollerError::Thread(e)
                })?;
            r.running = true;
        }
        drop(r);
        self.wake();
        Ok(())
    }

    /// Wakes the thread from its sleep (a window was added or closed).
    pub(crate) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd. A full
        // counter (EAGAIN) means a wake-up is pending anyway.
        let _ = unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// The thread: polls every window until the last one is closed.
    fn run(self: Arc<Self>) {
        let mut windows: Vec<Arc<dyn Polled>> = Vec::new();
        let mut spin_until = Instant::now();
        let mut last_scan = Instant::now();
        loop {
            if self.news.swap(false, Ordering::AcqRel) {
                windows.append(&mut lock(&self.registry).added);
            }
            // Closed windows: fail what still waits, release our reference
            // (the last one, usually: the queue pair and queue go with it).
            windows.retain(|e| {
                if e.stopping() {
                    e.finish();
                    false
                } else {
                    true
                }
            });
            if windows.is_empty() {
                let mut r = lock(&self.registry);
                if r.added.is_empty() {
                    r.running = false;
                    return;
                }
                windows.append(&mut r.added);
                continue;
            }
            let now = Instant::now();
            if now.duration_since(last_scan) >= SCAN {
                for e in windows.iter().filter(|e| e.outstanding() > 0) {
                    e.scan_deadlines(now);
                }
                last_scan = now;
            }
            if drain(&windows, false) > 0 {
                spin_until = Instant::now() + SPIN;
                continue;
            }
            if now < spin_until && windows.iter().any(|e| e.outstanding() > 0) {
                std::hint::spin_loop();
                continue;
            }
            // Arm every queue not armed since its last event; a completion
            // that arrived before arming raises no event, so look again.
            for e in &windows {
                e.arm();
            }
            if drain(&windows, true) > 0 {
                spin_until = Instant::now() + SPIN;
                continue;
            }
            self.wait(&windows);
        }
    }

    /// Sleeps until a completion event, a wake-up, control-connection
    /// activity or a tick.
    fn wait(&self, windows: &[Arc<dyn Polled>]) {
        let mut fds = Vec::with_capacity(windows.len() + 2);
        for fd in [self.channel.as_raw_fd(), self.wake.as_raw_fd()] {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // Windows whose control connection is watched, by position in `fds`.
        let watched: Vec<&Arc<dyn Polled>> =
            windows.iter().filter(|e| e.broken().is_none()).collect();
        for e in &watched {
            fds.push(libc::pollfd {
                fd: e.control_fd(),
                events: libc::POLLIN | libc::POLLRDHUP,
                revents: 0,
            });
        }
        let busy = windows.iter().any(|e| e.outstanding() > 0);
        let tick = if busy { TICK_MS } else { IDLE_TICK_MS };
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, tick) };
        if n <= 0 {
            return;
        }
        if fds[0].revents != 0 {
            self.take_events(windows);
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live buffer from our eventfd.
            let _ =
                unsafe { libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        }
        for (e, fd) in watched.iter().zip(&fds[2..]) {
            if fd.revents != 0 {
                e.control_activity();
            }
        }
    }

    /// Reads and acknowledges every pending completion event; the queue an
    /// event is for must be armed again before the next sleep.
    fn take_events(&self, windows: &[Arc<dyn Polled>]) {
        let by_cq: HashMap<usize, &Arc<dyn Polled>> =
            windows.iter().map(|e| (e.cq_ptr() as usize, e)).collect();
        // Bounded: at most one pending event per queue, plus slack.
        for _ in 0..windows.len() + 16 {
            let mut ev_cq: *mut rdma_mummy_sys::ibv_cq = std::ptr::null_mut();
            let mut ctx: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: the channel is alive and non-blocking; out-pointers are valid.
            let rc = unsafe {
                rdma_mummy_sys::ibv_get_cq_event(
                    self.channel.comp_channel().as_ptr(),
                    &mut ev_cq,
                    &mut ctx,
                )
            };
            if rc != 0 {
                break;
            }
            if ev_cq.is_null() {
                continue;
            }
            // SAFETY: every event must be acknowledged before its queue is
            // destroyed; `ev_cq` is the live queue of a window we hold (a
            // queue is destroyed only after its window left `windows`, and
            // its events were all read and acknowledged here before).
            unsafe { rdma_mummy_sys::ibv_ack_cq_events(ev_cq, 1) };
            if let Some(e) = by_cq.get(&(ev_cq as usize)) {
                e.disarmed();
            }
        }
    }
}

/// Polls the queue of every window that has operations outstanding (`all`:
/// every window, after arming); returns how many completions there were.
fn drain(windows: &[Arc<dyn Polled>], all: bool) -> usize {
    windows
        .iter()
        .filter(|e| all || e.outstanding() > 0)
        .map(|e| e.drain())
        .sum()
}
