//! Load-read latency under server load (seed 002 Fig. 3, seed 001 Fig. 6):
//! median and p99 of `read_load` over shm (one-sided) and tcp (two-sided)
//! with 0, 1, 2, 4 and 8 busy threads burning CPU in the responder's process,
//! plus the reads per second one client thread sustains.
//!
//! Run: `cargo bench --bench window_latency` (add `-- --quick` for a short
//! run). Prints a markdown table and writes it to
//! `bench/results/window_latency.md`.
//!
//! The responder is this same program re-executed with
//! `RDMALB_BENCH_RESPONDER` set: it owns a window file under /dev/shm,
//! serves the same memory over the tcp responder, publishes a load sample
//! every millisecond (as the sidecar does) and runs the busy threads. The
//! parent is the client, on a single-threaded Tokio runtime.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmalb_window::seqlock::publish;
use rdmalb_window::tcp::{self, Psk};
use rdmalb_window::{
    read_load, Expect, LoadRead, LoadSample, ReadPolicy, RemoteWindow, ShmWindow, TcpWindow,
    WindowMemory,
};

const RESPONDER_ENV: &str = "RDMALB_BENCH_RESPONDER";
/// A key for this bench only, in the text form `rdmalb psk` prints.
const PSK: &str = "rdmalb-psk-v1:3944676e7d97fc0db32b7bd6aa983607ccdf2212a76576d9a32a52e9432c3e36";
const BUSY_LEVELS: [usize; 5] = [0, 1, 2, 4, 8];

fn main() {
    if let Ok(spec) = std::env::var(RESPONDER_ENV) {
        responder(&spec);
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (max_samples, max_time) = if quick {
        (1_000, Duration::from_millis(500))
    } else {
        (20_000, Duration::from_secs(3))
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    for busy in BUSY_LEVELS {
        let child = Responder::start(busy);
        rt.block_on(async {
            let shm = ShmWindow::open(&child.path, &Expect::ANY).expect("open shm window");
            let psk = Psk::new(PSK).expect("psk");
            let tcp = TcpWindow::connect(child.addr, &psk, 1, &Expect::ANY)
                .await
                .expect("connect tcp window");
            let windows: [(&str, &dyn RemoteWindow); 2] = [
                ("shm (one-sided, shared memory)", &shm),
                ("tcp (two-sided)", &tcp),
            ];
            for (name, w) in windows {
                let row = measure(name, busy, w, max_samples, max_time).await;
                eprintln!("{}", row.markdown());
                rows.push(row);
            }
        });
        drop(child);
    }
    let mut table = String::new();
    table.push_str(&format!(
        "Load-read latency under server load ({cpus} CPUs visible; busy threads run in the responder's process)\n\n"
    ));
    table.push_str(
        "| transport | busy threads | median µs | p99 µs | reads/s (1 client thread) | unknown |\n",
    );
    table.push_str("|---|---:|---:|---:|---:|---:|\n");
    for r in &rows {
        table.push_str(&r.markdown());
        table.push('\n');
    }
    println!("{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    if let Err(e) = std::fs::create_dir_all(&out)
        .and_then(|()| std::fs::write(out.join("window_latency.md"), &table))
    {
        eprintln!("could not write bench/results/window_latency.md: {e}");
    } else {
        eprintln!("wrote {}", out.join("window_latency.md").display());
    }
}

struct Row {
    transport: &'static str,
    busy: usize,
    median_us: f64,
    p99_us: f64,
    reads_per_s: f64,
    unknown: usize,
}

impl Row {
    fn markdown(&self) -> String {
        format!(
            "| {} | {} | {:.1} | {:.1} | {:.0} | {} |",
            self.transport, self.busy, self.median_us, self.p99_us, self.reads_per_s, self.unknown
        )
    }
}

async fn measure(
    transport: &'static str,
    busy: usize,
    w: &dyn RemoteWindow,
    max_samples: usize,
    max_time: Duration,
) -> Row {
    let policy = ReadPolicy {
        retries: 3,
        staleness: Duration::from_secs(1),
        deadline: Duration::from_secs(1),
    };
    for _ in 0..100 {
        let _ = read_load(w, &policy).await;
    }
    // Latency: one read at a time, each timed.
    let mut lat = Vec::with_capacity(max_samples);
    let mut unknown = 0;
    let start = Instant::now();
    while lat.len() < max_samples && start.elapsed() < max_time {
        let t = Instant::now();
        let r = read_load(w, &policy).await;
        lat.push(t.elapsed());
        if matches!(r, LoadRead::Unknown(_)) {
            unknown += 1;
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
        lat[i].as_secs_f64() * 1e6
    };
    // Throughput: back-to-back reads from this one thread, untimed each.
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < max_time / 2 {
        for _ in 0..64 {
            let _ = read_load(w, &policy).await;
        }
        n += 64;
    }
    Row {
        transport,
        busy,
        median_us: pct(0.5),
        p99_us: pct(0.99),
        reads_per_s: n as f64 / start.elapsed().as_secs_f64(),
        unknown,
    }
}

/// The responder child process; killed on drop.
struct Responder {
    child: Child,
    path: std::path::PathBuf,
    addr: SocketAddr,
}

impl Responder {
    fn start(busy: usize) -> Responder {
        let path = std::path::PathBuf::from(format!(
            "/dev/shm/rdmalb-bench-{}-{busy}.window",
            std::process::id()
        ));
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .env(RESPONDER_ENV, format!("{busy}:{}", path.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn responder");
        let stdout = child.stdout.take().expect("responder stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("responder ready line");
        let addr = line
            .trim()
            .strip_prefix("READY ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("responder did not start: {line:?}")
            });
        Responder { child, path, addr }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        // Closing stdin asks it to exit; kill in case it does not.
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn responder(spec: &str) {
    let (busy, path) = spec.split_once(':').expect("responder spec busy:path");
    let busy: usize = busy.parse().expect("busy thread count");
    let mem = Arc::new(WindowMemory::create_shm(path, 0o600, 1, 0).expect("create window"));
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tcp::serve(
        mem.clone(),
        "127.0.0.1:0".parse().expect("addr"),
        Psk::new(PSK).expect("psk"),
        stop_rx,
    )
    .expect("serve tcp");
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        // Publisher: one sample per millisecond, like the sidecar's default.
        let (mem, stop) = (mem.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                publish(
                    &mem,
                    &LoadSample {
                        cpu_util_ppm: k % 1_000_000,
                        requests_total: k,
                        ..Default::default()
                    },
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    for _ in 0..busy {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..10_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                std::hint::black_box(x);
            }
        }));
    }
    println!("READY {}", server.local_addr());
    let _ = std::io::stdout().flush();
    // Run until the parent closes our stdin.
    let mut sink = String::new();
    while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {
        sink.clear();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    server.stop();
}
