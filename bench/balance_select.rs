//! Cost of node selection on the request path: `Backends::pick` plus the
//! release of its in-flight slot, per policy, for 4, 16 and 64 nodes in one
//! site, with every node usable (no allocation), with one node down (the
//! candidates are filtered into a new list) and, for leastconn, from two
//! threads at once (contention on the shared cursor and counters).
//!
//!
//! A second table times the request path's pick, `Backends::pick_queued`
//! awaited on a current-thread Tokio runtime as a data-path worker does, for
//! roundrobin and for `weighted-least-load` reading real shm windows per
//! request (d = 2 and all), while a publisher thread rewrites every window's
//! load block each millisecond like a sidecar: one routing decision,
//! window reads included. Transport: shm (not RDMA).
//!
//! Run: `cargo bench --bench balance_select` (add `-- --quick` for a short
//! run). Prints a markdown table and writes it to
//! `bench/results/balance_select.md`. `-- --request-path` runs the second
//! table only and writes `bench/results/balance_select-request-path.md`;
//! `--case TEXT` keeps the request-path rows whose label contains TEXT (for
//! profiling one case). Numbers are for comparing policies and
//! cases within one run on one machine, not absolute claims.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rdmalb_proxy::balance::{Backends, Outcome};

const SIZES: [usize; 3] = [4, 16, 64];
const POLICIES: [&str; 4] = ["roundrobin", "leastconn", "random", "first"];

fn config(balance: &str, nodes: usize) -> rdmalb_proxy::config::Config {
    windowed_config(balance, nodes, "", None)
}

/// A config of `nodes` nodes in one site; with `shm_dir`, every node has an
/// shm window file there.
fn windowed_config(
    balance: &str,
    nodes: usize,
    routing: &str,
    shm_dir: Option<&Path>,
) -> rdmalb_proxy::config::Config {
    let mut text = format!(
        "[global]\nbalance = \"{balance}\"\n[health]\npassive_failures = 1\n[routing]\n{routing}\n\
         [[listener]]\nlisten = \"127.0.0.1:8080\"\n\
         [[site]]\nname = \"s\"\nhosts = [\"s.test\"]\n"
    );
    for i in 0..nodes {
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"s\"\n",
            20_000 + i
        ));
        if let Some(dir) = shm_dir {
            text.push_str(&format!(
                "transport = \"shm\"\nsidecar = \"{}\"\n",
                dir.join(format!("w{i}")).display()
            ));
        }
    }
    rdmalb_proxy::config::parse(&text, Path::new("bench.toml")).expect("bench config")
}

/// ns per pick+release over `iters` picks, best of `rounds`.
fn measure(backends: &Backends, exclude: &[usize], iters: u64, rounds: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iters {
            let p = backends.pick(0, exclude).expect("a node");
            black_box(&p.node);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// ns per pick+release per thread with `threads` threads picking at once.
fn measure_threads(backends: Arc<Backends>, threads: usize, iters: u64) -> f64 {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let b = Arc::clone(&backends);
            std::thread::spawn(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    // Hold a few slots so in-flight counts vary as in real use.
                    let p = b.pick(0, &[]).expect("a node");
                    let q = b.pick(0, &[]).expect("a node");
                    black_box((&p.node, &q.node));
                }
                start.elapsed().as_nanos() as f64 / (2 * iters) as f64
            })
        })
        .collect();
    let per: Vec<f64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    per.iter().sum::<f64>() / per.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only_request_path = args.iter().any(|a| a == "--request-path");
    let case = args
        .iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let (iters, rounds) = if quick { (200_000, 3) } else { (2_000_000, 5) };
    let started = Instant::now();
    let mut out = String::new();
    if !only_request_path {
        out.push_str(&selection_table(iters, rounds));
    }
    out.push_str(&request_path(iters, rounds, &case));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let footer = format!(
        "\n{iters} picks per case, best of {rounds} rounds (threads: mean per thread), \
         {cpus} CPUs, {:.1} s total. Command: `cargo bench --bench balance_select -- {}`.\n",
        started.elapsed().as_secs_f64(),
        args[1..]
            .iter()
            .filter(|a| !a.starts_with("--bench"))
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    );
    print!("{footer}");
    out.push_str(&footer);
    let name = if only_request_path {
        "balance_select-request-path.md"
    } else {
        "balance_select.md"
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    let written = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(dir.join(name), &out));
    if let Err(e) = written {
        eprintln!("cannot write bench/results/{name}: {e}");
    }
}

/// The first table: `Backends::pick` per baseline policy (module docs).
fn selection_table(iters: u64, rounds: usize) -> String {
    let mut out = String::new();
    out.push_str("| policy | nodes | all usable ns/pick | one down ns/pick | one excluded ns/pick | 2 threads ns/pick |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|\n");
    for policy in POLICIES {
        for n in SIZES {
            let cfg = config(policy, n);
            let all = Backends::build(&cfg, None);
            let usable = measure(&all, &[], iters, rounds);
            let excluded = measure(&all, &[0], iters, rounds);
            let threads = measure_threads(Arc::new(Backends::build(&cfg, None)), 2, iters / 2);
            let one_down = Backends::build(&cfg, None);
            let _ = one_down.nodes()[n / 2].report(Outcome::ConnectFailed);
            let down = measure(&one_down, &[], iters, rounds);
            let line = format!(
                "| {policy} | {n} | {usable:.1} | {down:.1} | {excluded:.1} | {threads:.1} |\n"
            );
            print!("{line}");
            out.push_str(&line);
        }
    }
    out
}

/// The request-path table (module docs).
fn request_path(iters: u64, rounds: usize, case: &str) -> String {
    use rdmalb_window::{seqlock, site_table_hash, LoadSample, WindowMemory};
    let mut out = String::from(
        "\n| request-path pick (`pick_queued`) | nodes | ns/pick |\n|---|---:|---:|\n",
    );
    print!("{out}");
    let cases: [(&str, &str, &str); 3] = [
        ("roundrobin", "roundrobin", ""),
        (
            "weighted-least-load, shm per-request, d = 2",
            "weighted-least-load",
            "candidates = 2",
        ),
        (
            "weighted-least-load, shm per-request, all",
            "weighted-least-load",
            "candidates = \"all\"",
        ),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for n in SIZES {
        let dir = tempfile::tempdir().expect("tempdir");
        let hash = site_table_hash(&["s"]);
        let mems: Vec<Arc<WindowMemory>> = (0..n)
            .map(|i| {
                let m = WindowMemory::create_shm(
                    dir.path().join(format!("w{i}")),
                    0o600,
                    i as u64 + 1,
                    hash,
                )
                .expect("window");
                Arc::new(m)
            })
            .collect();
        // A sidecar-like publisher: every block rewritten each millisecond.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let publisher = {
            let (mems, stop) = (mems.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut k = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for (i, m) in mems.iter().enumerate() {
                        let s = LoadSample {
                            cpu_util_ppm: (k * 7919 + i as u64 * 104_729) % 1_000_000,
                            app_busy: (k + i as u64) % 8,
                            app_capacity: 8,
                            ..Default::default()
                        };
                        seqlock::publish(m, &s);
                    }
                    k += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            })
        };
        for (label, balance, routing) in cases.into_iter().filter(|c| c.0.contains(case)) {
            let cfg = windowed_config(balance, n, routing, Some(dir.path()));
            let ns = rt.block_on(async {
                let (_tx, rx) = tokio::sync::watch::channel(false);
                let windows = rdmalb_proxy::balance::NodeWindows::start(&cfg, rx)
                    .await
                    .expect("windows");
                let b = Backends::build_with_windows(&cfg, None, &windows);
                let mut best = f64::MAX;
                for _ in 0..rounds {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let p = b.pick_queued(0, &[]).await.expect("a node");
                        black_box(&p.node);
                    }
                    best = best.min(start.elapsed().as_nanos() as f64 / iters as f64);
                }
                best
            });
            let line = format!("| {label} | {n} | {ns:.1} |\n");
            print!("{line}");
            out.push_str(&line);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = publisher.join();
    }
    out
}
