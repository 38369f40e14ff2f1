//! `rdmalb-testbed chaos`: the seeded fault-injection campaign (docs/reliability.md).
//!
//! In the style of Jepsen and of FoundationDB's simulation tests, with real
//! processes: 3 `rdmalb proxy` (proxy 1 is the lock home), 9 testsrv nodes
//! (3:3:2 over three sites, one idle) each with a real `rdmalb sidecar`
//! applying roles (render, SIGHUP, verify), over shm or over tcp (each
//! sidecar's responder behind a fault-injecting relay, [`relay`]). Client
//! traffic through every proxy makes one site at a time hot, rotating, so
//! the agents keep claiming, while faults from a schedule drawn from the
//! seed ([`plan`]) hit the processes and the links: SIGKILL and
//! SIGSTOP/SIGCONT of proxies (the lock home included) and sidecars
//! (mid-apply when a node is switching), restarts, failing app reloads, a
//! dead app, link delay, drop, cut and half-open, and a proxy restarted with
//! its clock skewed within the allowance.
//!
//! Checked all along, from the windows ([`watch`]) and from the traffic:
//! - every node's role epoch never decreases;
//! - a claim record (node, epoch) never names two proxies;
//! - no request is answered by a node serving another site (421, or an
//!   `X-Site` other than the request's site);
//!
//! Every request is counted by the state of the proxy it went to, and every
//! failed one by cause ([`tally`]): the live-proxy 5xx share is reported.
//!
//! and once the faults stop and everything is restarted:
//! - no node is lost: within `settle` every node is ACTIVE with its status
//!   OK (none SWITCHING or FAILED);
//! - each proxy's claim counter agrees with the claim records naming it.
//!
//! A violation prints the seed and the fault history; the same seed replays
//! the same schedule. Outputs: `<out>/chaos.json`, `<out>/faults.txt`, the
//! components' logs in `<out>/logs`.

mod cluster;
mod managed;
pub mod plan;
pub mod relay;
pub mod tally;
mod traffic;
pub mod watch;

use cluster::{start, Cluster};
use managed::Managed;
use tally::{AppsDown, Cause, Classified, Conditions, ProxyState, StateWord, Tally};
use traffic::{proxy_claims, traffic};

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch as channel;

use crate::cluster::gen::{self, NodePlan, IDLE};
use crate::cluster::procs::{
    free_addr, io, write, write_node, write_proxy, write_sidecar, write_templates, Setup,
};
use crate::cluster::{parse_spec, ClusterError, Spec, WindowTransport};
use plan::{Fault, Kind, Shape};
use relay::{LinkFault, Relay};

/// The sites and the initial split (3:3:2 and one idle node).
const SITES: [&str; 3] = ["a", "b", "c"];
/// How long one site stays hot before the next one.
const HOT_FOR: Duration = Duration::from_secs(6);
/// Concurrent client loops for the hot site, per proxy.
const HOT_LOOPS: usize = 6;
/// The proxies' `lock_skew` (ms); skews stay one op timeout below it.
const LOCK_SKEW_MS: i64 = 1000;
/// Largest clock offset a restarted proxy gets.
const MAX_SKEW_MS: i64 = LOCK_SKEW_MS - 500 - 100;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    pub transport: WindowTransport,
    /// Mean gap between fault starts.
    pub gap: Duration,
    /// Bound for the cluster to settle once the faults stop.
    pub settle: Duration,
    /// The proxies' `global.retry_on` (`None`: conn-failure and
    /// empty-response).
    pub retry_on: Option<Vec<String>>,
    pub out: PathBuf,
}

/// What a run found.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub transport: &'static str,
    /// The proxies' `global.retry_on` when not the campaign's (both).
    pub retry_on: Option<Vec<String>>,
    pub fault_seconds: f64,
    pub faults: usize,
    pub faults_by_kind: BTreeMap<&'static str, usize>,
    pub requests: u64,
    pub ok: u64,
    /// 5xx and transport errors seen by clients (allowed under faults).
    pub errors: u64,
    /// The errors by proxy state and cause, and the live-proxy 5xx share.
    #[serde(flatten)]
    pub classified: Classified,
    pub claims: usize,
    pub moves: u64,
    pub sidecar_restarts: u64,
    pub settled_after_s: Option<f64>,
    pub violations: Vec<String>,
    /// Per proxy: claims counted by its current run, claim records of that
    /// run seen in the windows, and claims without a record.
    pub proxy_claims: Vec<(u64, u64, u64)>,
    /// Every claim record seen: (node, epoch, proxy, claim time unix ms).
    pub claim_records: Vec<(usize, u64, u64, u64)>,
}

impl Outcome {
    /// Human summary.
    pub fn text(&self) -> String {
        let kinds: Vec<String> = self
            .faults_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let mut s = format!(
            "chaos seed={} transport={}{} faults={} in {:.0}s ({})\n\
             requests={} ok={} errors={} claims={} moves={} sidecar restarts={} settled={}\n",
            self.seed,
            self.transport,
            self.retry_on
                .as_ref()
                .map_or(String::new(), |r| format!(" retry_on={}", r.join(","))),
            self.faults,
            self.fault_seconds,
            kinds.join(", "),
            self.requests,
            self.ok,
            self.errors,
            self.claims,
            self.moves,
            self.sidecar_restarts,
            self.settled_after_s
                .map_or("no".to_string(), |s| format!("after {s:.1}s")),
        );
        s.push_str(&self.classified.text());
        if self.violations.is_empty() {
            s.push_str("invariants: 0 violations\n");
        } else {
            s.push_str(&format!(
                "invariants: {} VIOLATIONS\n",
                self.violations.len()
            ));
            for v in &self.violations {
                s.push_str(&format!("  {v}\n"));
            }
        }
        s
    }
}

/// A fault in force, undone at `until`.
struct Active {
    fault: Fault,
    until: Instant,
}

/// Runs one campaign; `stop` ends it early (Ctrl-C).
pub async fn run(
    opts: &Options,
    mut stop: channel::Receiver<bool>,
) -> Result<Outcome, ClusterError> {
    let out = &std::path::absolute(&opts.out).map_err(|e| io(&opts.out, e))?;
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let tcp = opts.transport == WindowTransport::Tcp;
    let shape = Shape {
        proxies: 3,
        nodes: 9,
        tcp,
        span: opts.duration,
        gap: opts.gap,
        max_skew_ms: MAX_SKEW_MS,
    };
    let schedule = plan::schedule(opts.seed, &shape);
    let mut c = start(opts, out).await?;
    tracing::info!(
        seed = opts.seed,
        faults = schedule.len(),
        "chaos: cluster up; faults start"
    );

    let t0 = Instant::now();
    let findings = Arc::new(Mutex::new(watch::Findings::default()));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let tally = Arc::new(Tally::default());
    let (stop_tx, stop_rx) = channel::channel(false);
    let (watch_tx, watch_rx) = channel::channel(false);
    let watcher = tokio::spawn(watch::run(
        c.nodes.iter().map(|n| n.shm.clone()).collect(),
        Duration::from_millis(10),
        t0,
        findings.clone(),
        watch_rx,
    ));
    let clients = traffic(
        &c,
        t0,
        tally.clone(),
        findings.clone(),
        violations.clone(),
        stop_rx.clone(),
    );
    let faults = inject(&mut c, opts, &schedule, t0, &findings, &mut stop).await?;
    let settle_from = Instant::now();
    let settled = if faults.interrupted {
        None
    } else {
        settle(&mut c, &findings, settle_from, opts.settle).await
    };
    // Let traffic run on the settled cluster a little, then stop it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop_tx.send(true);
    for t in clients {
        let _ = t.await;
    }
    // Without traffic no site stays hot, so the claims stop: read the
    // proxies' counters, then give the checker time to see the last
    // records.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut counted = Vec::new();
    for &(_, admin) in &c.proxy_addrs {
        counted.push(proxy_claims(admin).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = watch_tx.send(true);
    let _ = watcher.await;

    let mut all = violations.lock().map(|v| v.clone()).unwrap_or_default();
    let f = findings
        .lock()
        .map(|g| g.clone())
        .map_err(|_| ClusterError::NotReady("checker poisoned".into()))?;
    all.extend(f.violations.iter().cloned());
    if settled.is_none() && !faults.interrupted {
        all.push(node_lost(&f, settle_from, opts.settle));
    }
    // Counters and claim records agree, per proxy run.
    let proxy_counts = if faults.interrupted {
        Vec::new()
    } else {
        claim_counts(&f, &faults.baseline, &counted, &mut all)
    };
    let outcome = outcome(opts, &faults, settled, &tally, &f, all, proxy_counts);
    write_outcome(opts, out, &faults.history, &outcome)?;
    drop(c);
    Ok(outcome)
}

/// What the fault phase left: the faults injected (one line each), the
/// claim records each proxy run had already seen, how long it lasted, and
/// whether Ctrl-C cut it short.
struct Faults {
    history: Vec<String>,
    baseline: BTreeMap<u64, BTreeSet<(usize, u64)>>,
    fault_seconds: f64,
    interrupted: bool,
}

/// Injects the `schedule`'s faults at their times and heals each when it
/// ends, until the campaign's duration passed and none is in force (or
/// `stop`); then heals what is left.
async fn inject(
    c: &mut Cluster,
    opts: &Options,
    schedule: &[Fault],
    t0: Instant,
    findings: &Mutex<watch::Findings>,
    stop: &mut channel::Receiver<bool>,
) -> Result<Faults, ClusterError> {
    // Claims each proxy's current run had already seen (claim records are
    // attributed to the proxy's run that made them).
    let mut baseline: BTreeMap<u64, BTreeSet<(usize, u64)>> = BTreeMap::new();
    let mut history = Vec::new();
    let mut active: Vec<Active> = Vec::new();
    let mut next = 0;
    let mut interrupted = false;
    while t0.elapsed() < opts.duration || !active.is_empty() {
        if *stop.borrow() {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        let mut i = 0;
        while i < active.len() {
            if active[i].until <= now {
                let a = active.remove(i);
                if c.heal(&a.fault)? {
                    note_start(&mut baseline, a.fault.target, findings);
                }
            } else {
                i += 1;
            }
        }
        while next < schedule.len() && t0 + schedule[next].at <= now {
            let f = schedule[next].clone();
            next += 1;
            let line = {
                let snapshot = findings.lock().map(|g| watch::Findings {
                    nodes: g.nodes.clone(),
                    ..Default::default()
                });
                let snapshot = snapshot.unwrap_or_default();
                c.inject(&f, &snapshot)?
            };
            if f.kind == Kind::SkewProxy {
                note_start(&mut baseline, f.target, findings);
            }
            tracing::info!(fault = %line, "chaos: inject");
            history.push(line);
            active.push(Active {
                until: now + f.lasts,
                fault: f,
            });
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.changed() => {}
        }
    }
    let fault_seconds = t0.elapsed().as_secs_f64();
    for p in c.heal_all()? {
        note_start(&mut baseline, p, findings);
    }
    Ok(Faults {
        history,
        baseline,
        fault_seconds,
        interrupted,
    })
}

/// Waits until every node is ACTIVE and OK, read after the healing
/// (`from`), and every process alive, for a whole second, within `bound`;
/// returns when that began, in seconds after `from`.
async fn settle(
    c: &mut Cluster,
    findings: &Mutex<watch::Findings>,
    from: Instant,
    bound: Duration,
) -> Option<f64> {
    let mut steady_since: Option<Instant> = None;
    while from.elapsed() < bound {
        let left = findings
            .lock()
            .map(|f| watch::unsettled(&f, from))
            .unwrap_or_default();
        let alive = c.proxies.iter_mut().all(Managed::alive)
            && c.sidecars.iter_mut().all(Managed::alive)
            && c.apps.iter_mut().all(Managed::alive);
        if left.is_empty() && alive {
            let since = *steady_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(1) {
                return Some(since.duration_since(from).as_secs_f64());
            }
        } else {
            steady_since = None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The violation of nodes that did not settle within `bound`.
fn node_lost(f: &watch::Findings, from: Instant, bound: Duration) -> String {
    let left: Vec<String> = watch::unsettled(f, from)
        .into_iter()
        .map(|i| {
            let s = &f.nodes[i];
            format!(
                "n{} (role {}, applied {}, status {})",
                i + 1,
                s.role.map_or("?".into(), |r| r.to_string()),
                s.applied,
                s.status.map_or("?".into(), |st| st.to_string())
            )
        })
        .collect();
    format!(
        "node lost: not ACTIVE and OK {:.0}s after the faults stopped: {}",
        bound.as_secs_f64(),
        left.join(", ")
    )
}

/// Per proxy: the claims it counted (and those without a record) against
/// the claim records of its run in the windows; a mismatch, or a proxy
/// that did not answer, goes into `all`.
fn claim_counts(
    f: &watch::Findings,
    baseline: &BTreeMap<u64, BTreeSet<(usize, u64)>>,
    counted: &[Option<(u64, u64)>],
    all: &mut Vec<String>,
) -> Vec<(u64, u64, u64)> {
    let mut proxy_counts = Vec::new();
    for (i, got) in counted.iter().enumerate() {
        let id = i as u64 + 1;
        let seen = f
            .claims
            .iter()
            .filter(|((n, e), (p, _))| {
                *p == id && !baseline.get(&id).is_some_and(|b| b.contains(&(*n, *e)))
            })
            .count() as u64;
        if let Some((claims, unrecorded)) = *got {
            proxy_counts.push((claims, seen, unrecorded));
        }
        match *got {
            Some((claims, unrecorded)) if claims == seen + unrecorded => {}
            Some((claims, unrecorded)) => all.push(format!(
                "proxy{id}: counted {claims} claims ({unrecorded} without a claim record), the windows hold {seen} claim records of its run"
            )),
            None => all.push(format!("proxy{id}: /status did not answer after the faults")),
        }
    }
    proxy_counts
}

/// The campaign's outcome from what it measured.
fn outcome(
    opts: &Options,
    faults: &Faults,
    settled: Option<f64>,
    tally: &Tally,
    f: &watch::Findings,
    violations: Vec<String>,
    proxy_claims: Vec<(u64, u64, u64)>,
) -> Outcome {
    let mut by_kind = BTreeMap::new();
    for line in &faults.history {
        if let Some(k) = Kind::ALL.iter().find(|k| line.contains(k.name())) {
            *by_kind.entry(k.name()).or_insert(0) += 1;
        }
    }
    let classified = tally.report();
    Outcome {
        seed: opts.seed,
        transport: opts.transport.as_str(),
        retry_on: opts.retry_on.clone(),
        fault_seconds: faults.fault_seconds,
        faults: faults.history.len(),
        faults_by_kind: by_kind,
        requests: classified.by_proxy_state.values().map(|r| r.requests).sum(),
        ok: classified.by_proxy_state.values().map(|r| r.ok).sum(),
        errors: classified.by_proxy_state.values().map(|r| r.errors).sum(),
        classified,
        claims: f.claims.len(),
        moves: f.moves.iter().sum(),
        sidecar_restarts: f.reopened.iter().sum(),
        settled_after_s: settled,
        violations,
        proxy_claims,
        claim_records: f
            .claims
            .iter()
            .map(|((n, e), (p, t))| (*n + 1, *e, *p, *t))
            .collect(),
    }
}

/// `faults.txt` (the fault history) and `chaos.json`; the history on
/// stderr when an invariant was violated, to replay with the same seed.
fn write_outcome(
    opts: &Options,
    out: &Path,
    history: &[String],
    outcome: &Outcome,
) -> Result<(), ClusterError> {
    let mut faults_text = format!(
        "# rdmalb-testbed chaos --seed {} --transport {} --duration {}s\n",
        opts.seed,
        opts.transport.as_str(),
        opts.duration.as_secs()
    );
    for l in history {
        faults_text.push_str(l);
        faults_text.push('\n');
    }
    write(&out.join("faults.txt"), &faults_text)?;
    write(
        &out.join("chaos.json"),
        &serde_json::to_string_pretty(&outcome).unwrap_or_default(),
    )?;
    if !outcome.violations.is_empty() {
        eprintln!(
            "chaos: {} invariant violation(s) with seed {} ({}); replay with the same seed; fault history:\n{faults_text}",
            outcome.violations.len(),
            opts.seed,
            opts.transport.as_str()
        );
    }
    Ok(())
}

/// Marks proxy `p`'s run as starting now: the claim records it sees already
/// belong to earlier runs.
fn note_start(
    baseline: &mut BTreeMap<u64, BTreeSet<(usize, u64)>>,
    p: usize,
    findings: &Mutex<watch::Findings>,
) {
    if let Ok(f) = findings.lock() {
        baseline.insert(p as u64 + 1, f.claims.keys().copied().collect());
    }
}
