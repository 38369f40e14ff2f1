//! Cost of node selection on the request path: `Backends::pick` plus the
//! release of its in-flight slot, per policy, for 4, 16 and 64 nodes in one
//! site, with every node usable (no allocation), with one node down (the
//! candidates are filtered into a new list) and, for leastconn, from two
//! threads at once (contention on the shared cursor and counters).
//!
//! Run: `cargo bench --bench balance_select` (add `-- --quick` for a short
//! run). Prints a markdown table and writes it to
//! `bench/results/balance_select.md`. Numbers are for comparing policies and
//! cases within one run on one machine, not absolute claims.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rdmalb::balance::{Backends, Outcome};

const SIZES: [usize; 3] = [4, 16, 64];
const POLICIES: [&str; 3] = ["roundrobin", "leastconn", "random"];

fn config(balance: &str, nodes: usize) -> rdmalb::config::Config {
    let mut text = format!(
        "[global]\nbalance = \"{balance}\"\n[health]\npassive_failures = 1\n\
         [[listener]]\nlisten = \"127.0.0.1:8080\"\n\
         [[site]]\nname = \"s\"\nhosts = [\"s.test\"]\n"
    );
    for i in 0..nodes {
        text.push_str(&format!(
            "[[node]]\nname = \"n{i}\"\naddress = \"127.0.0.1:{}\"\nsite = \"s\"\n",
            20_000 + i
        ));
    }
    rdmalb::config::parse(&text, Path::new("bench.toml")).expect("bench config")
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
    let quick = std::env::args().any(|a| a == "--quick");
    let (iters, rounds) = if quick { (200_000, 3) } else { (2_000_000, 5) };
    let started = Instant::now();
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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let footer = format!(
        "\n{iters} picks per case, best of {rounds} rounds (threads: mean per thread), \
         {cpus} CPUs, {:.1} s total. Command: `cargo bench --bench balance_select{}`.\n",
        started.elapsed().as_secs_f64(),
        if quick { " -- --quick" } else { "" }
    );
    print!("{footer}");
    out.push_str(&footer);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    let written = std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(dir.join("balance_select.md"), &out));
    if let Err(e) = written {
        eprintln!("cannot write bench/results/balance_select.md: {e}");
    }
}
