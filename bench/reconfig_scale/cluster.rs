//! The emulated nodes of the scale bench: one shm window per node, and one
//! thread that plays every node's sidecar (publish the load the trace gives
//! it; apply a claimed role after a delay: status OK, then `ROLE_APPLIED` =
//! epoch, as `docs/sidecar.md` "Role application" has it) and the traffic
//! (the synthetic trace of bursts and calm phases per site).
//!
//! The load model makes every hot event need exactly one node: a site has a
//! demand `want` (in nodes). Its ACTIVE nodes read 0.95 while it has fewer
//! than `want` of them, 0.5 with exactly `want`, and 0.1 (idle, a donor)
//! with more. A **burst** sets `want` to the nodes assigned to the site plus
//! one: the site is hot until one more node has landed, then it is not. A
//! **calm** phase halves `want`: the site's nodes go idle and other sites may
//! take them. Idle-pool nodes read 0.05. After a burst is served, or a calm
//! phase starts, the site is left alone for a quiet period, so a second claim
//! for the same burst lands inside that burst's window and is caught.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdmalb_window::layout::word;
use rdmalb_window::memory::DEFAULT_MODE;
use rdmalb_window::{
    publish, LoadSample, RoleState, RoleStatus, RoleStatusCode, RoleWord, SiteSlot, WindowMemory,
};

/// How often the emulator thread passes over every node (publish, apply,
/// trace). Well inside the 250 ms staleness bound even on a loaded machine.
pub const TICK: Duration = Duration::from_millis(10);

/// The trace's settings.
#[derive(Debug, Clone, Copy)]
pub struct Trace {
    /// A new burst or calm phase starts on some site this often.
    pub every: Duration,
    /// A site is left alone this long after its burst is served or its calm
    /// phase starts.
    pub quiet: Duration,
    /// The sidecar's switch time (render, reload, verify), per claim.
    pub apply_delay: Duration,
    /// Fraction of new phases that are bursts (the rest are calm phases).
    pub burst_share: f64,
    pub seed: u64,
}

/// What started on a site, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    /// The site needs one more node.
    Burst,
    /// The site needs half its nodes.
    Calm,
}

/// One phase of one site.
#[derive(Debug, Clone, Copy)]
pub struct Phase {
    pub site: usize,
    pub kind: PhaseKind,
    pub start: Instant,
    /// When a burst had its node (assigned nodes reached `want`).
    pub served: Option<Instant>,
}

/// The node windows and the emulator thread.
pub struct Cluster {
    pub paths: Vec<PathBuf>,
    pub mems: Vec<Arc<WindowMemory>>,
    pub initial: Vec<SiteSlot>,
    pub phases: Arc<Mutex<Vec<Phase>>>,
    /// New phases stop when this turns true (open bursts still complete).
    pub calm_down: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// `nodes` nodes: the first eighth in the idle pool, the rest spread over
/// `sites` sites in turn.
pub fn initial_sites(nodes: usize, sites: usize) -> Vec<SiteSlot> {
    let pool = nodes / 8;
    (0..nodes)
        .map(|i| {
            if i < pool {
                SiteSlot::Idle
            } else {
                SiteSlot::Site(((i - pool) % sites) as u16)
            }
        })
        .collect()
}

impl Cluster {
    /// Creates the windows (`/dev/shm/<tag>-n<i>`) and starts the emulator.
    pub fn start(tag: &str, nodes: usize, sites: usize, hash: u64, trace: Trace) -> Cluster {
        let initial = initial_sites(nodes, sites);
        let mut paths = Vec::new();
        let mut mems = Vec::new();
        for (i, site) in initial.iter().enumerate() {
            let path = PathBuf::from(format!("/dev/shm/{tag}-n{i}"));
            let mem = WindowMemory::create_shm(&path, DEFAULT_MODE, i as u64, hash)
                .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
            // The sidecar's start-up: the role word once, before serving.
            let role = RoleWord {
                site: *site,
                state: RoleState::Active,
                epoch: 1,
            };
            mem.compare_swap(word::ROLE, 0, role.encode());
            store(&mem, word::ROLE_STATUS, status(1, *site));
            store(&mem, word::ROLE_APPLIED, 1);
            publish(&mem, &sample(0.05));
            paths.push(path);
            mems.push(Arc::new(mem));
        }
        let phases = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let calm_down = Arc::new(AtomicBool::new(false));
        let thread = {
            let emu = Emulator {
                mems: mems.clone(),
                sites,
                trace,
                phases: phases.clone(),
                stop: stop.clone(),
                calm_down: calm_down.clone(),
            };
            std::thread::Builder::new()
                .name("scale-sidecars".into())
                .spawn(move || emu.run())
                .expect("emulator thread")
        };
        Cluster {
            paths,
            mems,
            initial,
            phases,
            calm_down,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the emulator thread (the windows stay until drop).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Node `i`'s role word and applied epoch now.
    pub fn role(&self, i: usize) -> (Option<RoleWord>, u64) {
        let m = &self.mems[i];
        (
            RoleWord::decode(m.load(word::ROLE).unwrap_or(0)).ok(),
            m.load(word::ROLE_APPLIED).unwrap_or(0),
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        // The windows are unlinked when their memory is dropped (the proxies
        // have stopped by then).
    }
}

fn store(m: &WindowMemory, w: usize, v: u64) {
    m.words()[w].store(v, Ordering::Release);
}

fn status(epoch: u64, serving: SiteSlot) -> u64 {
    RoleStatus {
        epoch,
        serving,
        code: RoleStatusCode::Ok,
    }
    .encode()
}

fn sample(load: f64) -> LoadSample {
    LoadSample {
        app_busy: (load * 1000.0) as u64,
        app_capacity: 1000,
        ..LoadSample::default()
    }
}

struct Emulator {
    mems: Vec<Arc<WindowMemory>>,
    sites: usize,
    trace: Trace,
    phases: Arc<Mutex<Vec<Phase>>>,
    stop: Arc<AtomicBool>,
    calm_down: Arc<AtomicBool>,
}

impl Emulator {
    fn run(self) {
        let n = self.mems.len();
        let mut rng = StdRng::seed_from_u64(self.trace.seed);
        // Per node: the epoch being applied and when it is done.
        let mut applying: Vec<Option<(u64, Instant)>> = vec![None; n];
        // Per site: nodes wanted (start: exactly what it has, load 0.5).
        let mut assigned = vec![0usize; self.sites];
        for m in &self.mems {
            if let Some(s) = role_of(m).and_then(|r| r.site.index()) {
                assigned[s] += 1;
            }
        }
        let mut want = assigned.clone();
        // Per site: the open burst's phase index, and when it may change again.
        let mut open: Vec<Option<usize>> = vec![None; self.sites];
        let mut quiet_until: Vec<Instant> = vec![Instant::now(); self.sites];
        let mut next_phase = Instant::now() + self.trace.every;
        while !self.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            // Sidecars: apply claimed roles after the switch delay.
            let mut roles = Vec::with_capacity(n);
            for (i, m) in self.mems.iter().enumerate() {
                let role = role_of(m);
                let applied = m.load(word::ROLE_APPLIED).unwrap_or(0);
                if let Some(r) = role.filter(|r| r.epoch > applied) {
                    match applying[i] {
                        Some((e, at)) if e == r.epoch => {
                            if now >= at {
                                store(m, word::ROLE_STATUS, status(r.epoch, r.site));
                                store(m, word::ROLE_APPLIED, r.epoch);
                                applying[i] = None;
                            }
                        }
                        _ => applying[i] = Some((r.epoch, now + self.trace.apply_delay)),
                    }
                }
                let applied = m.load(word::ROLE_APPLIED).unwrap_or(0);
                roles.push(role.map(|r| (r, r.epoch == applied)));
            }
            // Who is where: assigned (any state) and active per site.
            assigned.iter_mut().for_each(|a| *a = 0);
            let mut active = vec![0usize; self.sites];
            for (r, applied) in roles.iter().flatten() {
                if let Some(s) = r.site.index() {
                    assigned[s] += 1;
                    if *applied {
                        active[s] += 1;
                    }
                }
            }
            // Traffic: the load each node shows.
            for (m, role) in self.mems.iter().zip(&roles) {
                let load = match role {
                    Some((r, true)) => match r.site.index() {
                        None => 0.05,
                        Some(s) if active[s] < want[s] => 0.95,
                        Some(s) if active[s] == want[s] => 0.5,
                        Some(_) => 0.1,
                    },
                    _ => 0.0,
                };
                publish(m, &sample(load));
            }
            // Bursts that got their node.
            {
                let mut phases = self.phases.lock().unwrap_or_else(|p| p.into_inner());
                for s in 0..self.sites {
                    if let Some(p) = open[s] {
                        if assigned[s] >= want[s] {
                            phases[p].served = Some(now);
                            open[s] = None;
                            quiet_until[s] = now + self.trace.quiet;
                        }
                    }
                }
                // The trace: a new phase on a site that is free to change.
                if now >= next_phase && !self.calm_down.load(Ordering::Acquire) {
                    next_phase = now + self.trace.every;
                    let free: Vec<usize> = (0..self.sites)
                        .filter(|&s| open[s].is_none() && now >= quiet_until[s])
                        .collect();
                    if !free.is_empty() {
                        let s = free[rng.gen_range(0..free.len())];
                        let kind = if rng.gen_bool(self.trace.burst_share) {
                            PhaseKind::Burst
                        } else {
                            PhaseKind::Calm
                        };
                        match kind {
                            PhaseKind::Burst => {
                                want[s] = assigned[s] + 1;
                                open[s] = Some(phases.len());
                            }
                            PhaseKind::Calm => {
                                want[s] = (assigned[s] / 2).max(1);
                                quiet_until[s] = now + self.trace.quiet;
                            }
                        }
                        phases.push(Phase {
                            site: s,
                            kind,
                            start: now,
                            served: None,
                        });
                    }
                }
            }
            std::thread::sleep(TICK.saturating_sub(now.elapsed()));
        }
    }
}

fn role_of(m: &WindowMemory) -> Option<RoleWord> {
    RoleWord::decode(m.load(word::ROLE).unwrap_or(0)).ok()
}
