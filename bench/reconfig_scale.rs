//! Reconfiguration at scale (docs/benchmarks.md): the real agent of 4 proxies against
//! 256 and 1024 emulated nodes, over shm.
//!
//! Each proxy runs on its own thread and Tokio runtime with the wiring of
//! `Reconfiguration::start` (its own window, the peer links, the node
//! windows, routing following the role words, `watch_roles`), and the
//! bench runs `Agent::round` every S itself so it can time each round.
//! Nodes are shm windows only: one emulator thread publishes the load a
//! synthetic trace gives every node (bursts on some sites while others are
//! calm) and plays the sidecars' part of a switch (`ROLE_APPLIED` for the new
//! epoch after `--apply-delay`); see `reconfig_scale/cluster.rs` for the
//! load model, under which every burst needs exactly one node.
//!
//! Reported per size (medians of `--runs` runs): the round time at S
//! (median and p99 over every round of every proxy), claims per second,
//! lock contention (acquisitions tried, found busy, mean time held), and
//! the correctness checks of `reconfig_scale/check.rs`. Any violation makes
//! the program exit non-zero.
//!
//! Run: `cargo bench --bench reconfig_scale` (`-- --quick` for a short run;
//! `-- --nodes 256,1024 --runs 3 --duration 30s --sensitivity 200ms
//! --history 1s --apply-delay 50ms`). Writes
//! `bench/results/reconfig-scale-<UTC date>.md`.

#[path = "reconfig_scale/check.rs"]
mod check;
#[path = "reconfig_scale/cluster.rs"]
mod cluster;
#[path = "reconfig_scale/proxy.rs"]
mod proxy;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cluster::{Cluster, Trace};
use proxy::{ProxyReport, Scenario};

const SITES: usize = 16;
const PROXIES: u16 = 4;

#[derive(Debug, Clone)]
struct Args {
    nodes: Vec<usize>,
    runs: usize,
    duration: Duration,
    sensitivity: Duration,
    history: Duration,
    apply_delay: Duration,
    every: Duration,
}

fn duration(text: &str) -> Duration {
    rdmalb_base::duration::parse(text).unwrap_or_else(|e| panic!("bad duration `{text}`: {e}"))
}

fn args() -> Args {
    let mut a = Args {
        nodes: vec![256, 1024],
        runs: 3,
        duration: Duration::from_secs(30),
        sensitivity: Duration::from_millis(200),
        history: Duration::from_secs(1),
        apply_delay: Duration::from_millis(50),
        every: Duration::from_millis(150),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--quick" => {
                a.runs = 1;
                a.duration = Duration::from_secs(8);
            }
            "--nodes" => {
                a.nodes = value()
                    .split(',')
                    .map(|n| n.trim().parse().expect("--nodes: numbers"))
                    .collect()
            }
            "--runs" => a.runs = value().parse().expect("--runs: a number"),
            "--duration" => a.duration = duration(&value()),
            "--sensitivity" => a.sensitivity = duration(&value()),
            "--history" => a.history = duration(&value()),
            "--apply-delay" => a.apply_delay = duration(&value()),
            "--every" => a.every = duration(&value()),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    a
}

/// What one run measured.
struct Run {
    rounds: Vec<f64>,
    claim_rounds: Vec<f64>,
    claims: usize,
    elapsed: f64,
    bursts: usize,
    served: usize,
    lock_attempts: u64,
    lock_busy: u64,
    lock_held_us: u64,
    lost_cas: u64,
    skipped: u64,
    errors: usize,
    outcomes: std::collections::BTreeMap<&'static str, u64>,
    violations: Vec<String>,
}

fn one_run(a: &Args, nodes: usize, run: usize) -> Run {
    let tag = format!("rdmalb-scale-{}-{nodes}-{run}", std::process::id());
    let names: Vec<String> = (0..SITES).map(|s| format!("s{s}")).collect();
    let hash = rdmalb_window::site_table_hash(&names);
    let trace = Trace {
        every: a.every,
        quiet: a.history * 3,
        apply_delay: a.apply_delay,
        burst_share: 0.6,
        seed: 0x5ca1e + run as u64,
    };
    let mut cluster = Cluster::start(&tag, nodes, SITES, hash, trace);
    let scenario = Scenario {
        sites: SITES,
        proxies: PROXIES,
        node_paths: cluster.paths.clone(),
        initial: cluster.initial.clone(),
        sensitivity: a.sensitivity,
        history: a.history,
        cooldown: a.history * 2,
        tag: tag.clone(),
    };
    let ready = Arc::new(Barrier::new(usize::from(PROXIES)));
    let stop = Arc::new(AtomicBool::new(false));
    // Bound on a proxy thread: the run, the drain, and some slack.
    let max = a.duration + a.history * 6 + Duration::from_secs(30);
    let started = Instant::now();
    let threads: Vec<_> = (1..=PROXIES)
        .map(|id| {
            let (s, r, st) = (scenario.clone(), ready.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("scale-proxy-{id}"))
                .spawn(move || proxy::run(&s, id, &r, &st, max))
                .expect("proxy thread")
        })
        .collect();
    std::thread::sleep(a.duration);
    // No new phases; let open bursts finish (bounded), then stop the agents.
    cluster.calm_down.store(true, Ordering::Release);
    let drain_until = Instant::now() + a.history * 6;
    while Instant::now() < drain_until && check::open_bursts(&cluster) > 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Release);
    let reports: Vec<ProxyReport> = threads
        .into_iter()
        .map(|t| t.join().expect("proxy thread panicked"))
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    // Let the last switches land before the end-state check.
    std::thread::sleep(a.apply_delay + cluster::TICK * 5);
    cluster.stop();
    let violations = check::violations(&cluster, &reports);
    let phases = cluster.phases.lock().unwrap().clone();
    let bursts = phases
        .iter()
        .filter(|p| p.kind == cluster::PhaseKind::Burst)
        .count();
    let served = phases.iter().filter(|p| p.served.is_some()).count();
    let mut r = Run {
        rounds: Vec::new(),
        claim_rounds: Vec::new(),
        claims: 0,
        elapsed,
        bursts,
        served,
        lock_attempts: 0,
        lock_busy: 0,
        lock_held_us: 0,
        lost_cas: 0,
        skipped: 0,
        errors: 0,
        outcomes: Default::default(),
        violations,
    };
    for p in &reports {
        r.rounds.extend(&p.rounds);
        r.claim_rounds.extend(&p.claim_rounds);
        r.claims += p.claims.len();
        r.lock_attempts += p.counters.lock_attempts;
        r.lock_busy += p.counters.lock_busy;
        r.lock_held_us += p.counters.lock_held_us;
        r.lost_cas += p.counters.lost_cas;
        r.skipped += p.counters.skipped_rounds;
        r.errors += p.errors.len();
        for e in p.errors.iter().take(3) {
            eprintln!("  proxy {} error: {e}", p.id);
        }
        for (k, v) in &p.outcomes {
            *r.outcomes.entry(k).or_default() += v;
        }
    }
    r
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[(((s.len() - 1) as f64) * p).round() as usize]
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

/// `YYYYMMDD-HHMM` (UTC) for the results file name.
fn stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

fn main() -> ExitCode {
    let a = args();
    // What to run again (cargo bench adds `--bench` itself).
    let cmd = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect::<Vec<_>>()
        .join(" ");
    let mut table = format!(
        "Reconfiguration at scale: {PROXIES} proxies (one agent each, own thread and runtime), {SITES} sites, \
         transport shm, S = {} ms, T = {} ms, switch (sidecar apply) {} ms, a new burst or calm phase every {} ms, \
         {} s per run, medians of {} runs.\n\n\
         | nodes | round median ms | round p99 ms | round with a claim, median ms | claims/s | bursts served / started | \
         lock attempts | lock busy | busy % | mean lock hold µs | lost CAS | skipped (counter) | errors | violations |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        a.sensitivity.as_millis(),
        a.history.as_millis(),
        a.apply_delay.as_millis(),
        a.every.as_millis(),
        a.duration.as_secs(),
        a.runs
    );
    let mut total_violations = 0usize;
    let mut details = String::new();
    for &n in &a.nodes {
        let mut runs = Vec::new();
        for run in 0..a.runs {
            let r = one_run(&a, n, run);
            eprintln!(
                "nodes {n} run {run}: rounds {} (median {:.2} ms, p99 {:.2} ms), claims {} in {:.1} s, bursts {}/{} served, lock attempts {} busy {} held {} µs, outcomes {:?}, errors {}, violations {}",
                r.rounds.len(),
                median(&r.rounds) * 1e3,
                percentile(&r.rounds, 0.99) * 1e3,
                r.claims,
                r.elapsed,
                r.served,
                r.bursts,
                r.lock_attempts,
                r.lock_busy,
                r.lock_held_us,
                r.outcomes,
                r.errors,
                r.violations.len()
            );
            for v in &r.violations {
                eprintln!("  VIOLATION: {v}");
                details.push_str(&format!("- {n} nodes, run {run}: {v}\n"));
            }
            total_violations += r.violations.len();
            runs.push(r);
        }
        let med = |f: &dyn Fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let held = |r: &Run| {
            let acquired = r.lock_attempts.saturating_sub(r.lock_busy);
            if acquired == 0 {
                0.0
            } else {
                r.lock_held_us as f64 / acquired as f64
            }
        };
        let row = format!(
            "| {n} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} / {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {} |\n",
            med(&|r| median(&r.rounds) * 1e3),
            med(&|r| percentile(&r.rounds, 0.99) * 1e3),
            med(&|r| median(&r.claim_rounds) * 1e3),
            med(&|r| r.claims as f64 / r.elapsed),
            med(&|r| r.served as f64),
            med(&|r| r.bursts as f64),
            med(&|r| r.lock_attempts as f64),
            med(&|r| r.lock_busy as f64),
            med(&|r| 100.0 * r.lock_busy as f64 / r.lock_attempts.max(1) as f64),
            med(&held),
            med(&|r| r.lost_cas as f64),
            med(&|r| r.skipped as f64),
            med(&|r| r.errors as f64),
            runs.iter().map(|r| r.violations.len()).sum::<usize>(),
        );
        eprint!("{row}");
        table.push_str(&row);
    }
    table.push_str(&format!(
        "\nCommand: `cargo bench --bench reconfig_scale{}`. Violations are summed over all runs \
         (a claim outside a burst, a second claim for one burst, one node epoch claimed twice, a role word \
         that does not match the claims made); any makes the bench exit non-zero.\n",
        if cmd.is_empty() {
            String::new()
        } else {
            format!(" -- {cmd}")
        }
    ));
    if !details.is_empty() {
        table.push_str(&format!("\nViolations:\n\n{details}"));
    }
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    let file = out.join(format!("reconfig-scale-{}.md", stamp()));
    match std::fs::create_dir_all(&out).and_then(|()| std::fs::write(&file, &table)) {
        Ok(()) => eprintln!("wrote {}", file.display()),
        Err(e) => eprintln!("could not write {}: {e}", file.display()),
    }
    if total_violations > 0 {
        eprintln!("{total_violations} correctness violations");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
