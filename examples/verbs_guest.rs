//! Verbs transport test driver, run inside the Soft-RoCE guest by
//! `scripts/rxe-test.sh` (it needs a real RDMA device; there is none on the
//! build machines).
//!
//! Modes:
//! - `serve`: a sidecar equivalent — a [`WindowMemory`] whose load block a
//!   publisher thread rewrites continuously, served by a [`VerbsServer`].
//! - `client`: one proxy — header checks, refusals, live seqlock-valid READs,
//!   a compare-and-swap race (several client processes run at once),
//!   fetch-and-adds, and a claim race through the reconfiguration agent's
//!   own protocol (`rdmalb_proxy::reconfig::protocol`: site lock by CAS with a
//!   lease, fresh re-read under the lock, role-word CAS, update-counter FAA,
//!   unlock); writes what it won and the FAA results to `--out`.
//! - `verify`: checks the clients' outputs against the window: exactly one
//!   winner per CAS round, FAA total and distinct old values, exactly one
//!   claim per hot event (role epoch), counters and site locks consistent.
//! - `solo`: all of the above in one process (server + several clients).
//! - `nodevice`: asserts the clean `NoDevice` error (for hosts without RDMA).
//!
//! Every check prints `CHECK <name> ok|FAIL …`; the exit status is non-zero
//! if any check failed. The publisher encodes a checksum into the block so a
//! torn block accepted as valid would be caught.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use futures_util::future::join_all;
use rdmalb_window::layout::{site_table_hash, word};
use rdmalb_window::verbs::{self, VerbsServer, VerbsWindow};
use rdmalb_window::{
    publish, read_load, Expect, LoadRead, LoadSample, Psk, ReadPolicy, RemoteWindow, UnknownReason,
    WindowError, WindowMemory,
};

#[path = "verbs_guest/claim.rs"]
mod claim;
use claim::{claim_race, verify_claims};

#[derive(Parser)]
#[command(about = "rdmalb verbs transport test driver (Soft-RoCE guest)")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Serve a live window over verbs until SIGTERM or --max-secs.
    Serve(ServeArgs),
    /// One proxy's checks and its share of the CAS race / FAA.
    Client(ClientArgs),
    /// Check the clients' outputs against the window.
    Verify(VerifyArgs),
    /// Server and several clients in one process.
    Solo(SoloArgs),
    /// Expect the clean no-device error.
    Nodevice,
}

#[derive(Args, Clone)]
struct Common {
    /// Pre-shared key file (mode 0600).
    #[arg(long)]
    psk_file: PathBuf,
    /// Site names, comma separated (the header carries their hash).
    #[arg(long, default_value = "alpha.example,beta.example,gamma.example")]
    sites: String,
    /// Node id of the served window.
    #[arg(long, default_value_t = 7)]
    node_id: u64,
    /// RDMA device (default: the first).
    #[arg(long)]
    device: Option<String>,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value = "127.0.0.1:18700")]
    listen: SocketAddr,
    /// Stop after this many seconds even without a signal.
    #[arg(long, default_value_t = 300)]
    max_secs: u64,
}

#[derive(Args, Clone)]
struct ClientArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value = "127.0.0.1:18700")]
    connect: SocketAddr,
    /// Proxy id (distinct per client).
    #[arg(long)]
    id: u16,
    /// CAS race rounds.
    #[arg(long, default_value_t = 200)]
    rounds: u64,
    /// FAA operations by this client.
    #[arg(long, default_value_t = 400)]
    faa_ops: u64,
    /// Hot events of the claim race (role epochs to claim, shared by all clients).
    #[arg(long, default_value_t = 60)]
    claims: u64,
    /// Result file (won rounds and FAA old values).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value = "127.0.0.1:18700")]
    connect: SocketAddr,
    #[arg(long, default_value_t = 200)]
    rounds: u64,
    /// Sum of all clients' FAA operations.
    #[arg(long)]
    faa_total: u64,
    /// Hot events of the claim race (as given to the clients).
    #[arg(long, default_value_t = 60)]
    claims: u64,
    /// Client result files.
    #[arg(long, num_args = 1.., required = true)]
    outs: Vec<PathBuf>,
}

#[derive(Args)]
struct SoloArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value_t = 3)]
    clients: u16,
    #[arg(long, default_value_t = 150)]
    rounds: u64,
    #[arg(long, default_value_t = 300)]
    faa_ops: u64,
    #[arg(long, default_value_t = 60)]
    claims: u64,
}

/// Word of the CAS race (a site lock) and of the FAA counter (an update counter).
const CAS_WORD: usize = 64 + 5;
const FAA_WORD: usize = 128 + 9;
/// Added by every FAA; a non-trivial value so sums cannot collide by luck.
const FAA_DELTA: u64 = 3;

static FAILED: AtomicUsize = AtomicUsize::new(0);

fn check(name: &str, ok: bool, detail: impl std::fmt::Display) {
    if ok {
        println!("CHECK {name} ok {detail}");
    } else {
        FAILED.fetch_add(1, Ordering::Relaxed);
        println!("CHECK {name} FAIL {detail}");
    }
}

fn sites(c: &Common) -> Vec<String> {
    c.sites.split(',').map(str::to_string).collect()
}

fn expect(c: &Common) -> Expect {
    Expect {
        node_id: Some(c.node_id),
        site_hash: Some(site_table_hash(&sites(c))),
    }
}

fn psk(c: &Common) -> Result<Psk> {
    Psk::from_file(&c.psk_file).with_context(|| format!("loading {}", c.psk_file.display()))
}

/// The publisher's block for counter `n`: every field is a function of `n`,
/// so a reader can tell a torn block from a consistent one.
fn sample(n: u64) -> LoadSample {
    LoadSample {
        cpu_util_ppm: n.wrapping_mul(7919) % 1_000_000,
        run_queue_milli: n,
        mem_used_ppm: n ^ 0x5a5a,
        net_rx_bps: n.wrapping_mul(3),
        net_tx_bps: n.wrapping_mul(5),
        active_connections: n % 1000,
        irq_rate: n.rotate_left(7),
        app_busy: n % 64,
        app_capacity: 64,
        requests_total: n,
        app_queue_len: n.wrapping_mul(11),
        app_latency_us: n.wrapping_mul(13),
        app_queue_limit: n.wrapping_mul(17),
    }
}

fn consistent(s: &LoadSample) -> bool {
    *s == sample(s.requests_total)
}

/// Starts the window and its publisher; returns the stop flag.
fn live_window(
    c: &Common,
) -> Result<(
    Arc<WindowMemory>,
    Arc<AtomicBool>,
    std::thread::JoinHandle<u64>,
)> {
    let mem = Arc::new(WindowMemory::anonymous(
        c.node_id,
        site_table_hash(&sites(c)),
    )?);
    let stop = Arc::new(AtomicBool::new(false));
    let (m2, s2) = (Arc::clone(&mem), Arc::clone(&stop));
    let publisher = std::thread::spawn(move || {
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            n += 1;
            publish(&m2, &sample(n));
            std::thread::sleep(Duration::from_micros(200));
        }
        n
    });
    Ok((mem, stop, publisher))
}

async fn serve(a: ServeArgs) -> Result<()> {
    let (mem, stop, publisher) = live_window(&a.common)?;
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut server = VerbsServer::start(
        Arc::clone(&mem),
        a.listen,
        psk(&a.common)?,
        a.common.device.clone(),
        stop_rx,
    )?;
    println!(
        "READY {} device {}",
        server.local_addr(),
        server.device_name()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = tokio::time::sleep(Duration::from_secs(a.max_secs)) => println!("serve: --max-secs reached"),
    }
    let peers = server.peers().len();
    server.shutdown();
    stop.store(true, Ordering::Relaxed);
    let published = publisher.join().unwrap_or(0);
    println!("serve: stopped; {published} blocks published, {peers} peer(s) paired at the end");
    Ok(())
}

async fn connect(a: &ClientArgs) -> Result<VerbsWindow> {
    Ok(VerbsWindow::connect(
        a.connect,
        &psk(&a.common)?,
        a.id,
        &expect(&a.common),
        a.common.device.as_deref(),
    )
    .await?)
}

/// Header, refusal and READ checks, then this client's part of the race and FAA.
async fn client(a: ClientArgs) -> Result<()> {
    let w = connect(&a).await?;
    check(
        "connect",
        true,
        format!("proxy {} on {} via {}", a.id, w.peer(), w.device_name()),
    );
    header_checks(&a).await?;
    refusal_checks(&w).await;
    read_checks(&w, a.common.node_id).await;
    nic_protection_check(&a).await?;
    let won = cas_race(&w, a.rounds).await?;
    let olds = faa(&w, a.faa_ops).await?;
    let claimed = claim_race(&w, a.id, a.claims, sites(&a.common).len()).await?;
    let mut text = String::new();
    for r in &won {
        text.push_str(&format!("won {r}\n"));
    }
    for e in &claimed {
        text.push_str(&format!("claim {e}\n"));
    }
    for o in &olds {
        text.push_str(&format!("faa {o}\n"));
    }
    std::fs::write(&a.out, text)?;
    println!(
        "client {}: won {} of {} rounds, {} FAA done, {} of {} claims",
        a.id,
        won.len(),
        a.rounds,
        olds.len(),
        claimed.len(),
        a.claims
    );
    Ok(())
}

async fn header_checks(a: &ClientArgs) -> Result<()> {
    let wrong_sites = Expect {
        node_id: None,
        site_hash: Some(site_table_hash(&["other.example"])),
    };
    let r = VerbsWindow::connect(
        a.connect,
        &psk(&a.common)?,
        a.id,
        &wrong_sites,
        a.common.device.as_deref(),
    )
    .await;
    check(
        "header-site-table-mismatch",
        matches!(r, Err(WindowError::SiteTableMismatch { .. })),
        r.as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "connected".into()),
    );
    let wrong_node = Expect {
        node_id: Some(a.common.node_id + 1),
        site_hash: None,
    };
    let r = VerbsWindow::connect(
        a.connect,
        &psk(&a.common)?,
        a.id,
        &wrong_node,
        a.common.device.as_deref(),
    )
    .await;
    check(
        "header-node-id-mismatch",
        matches!(r, Err(WindowError::NodeIdMismatch { .. })),
        r.as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "connected".into()),
    );
    let bad_key = Psk::generate();
    let r = VerbsWindow::connect(
        a.connect,
        &bad_key,
        a.id,
        &Expect::ANY,
        a.common.device.as_deref(),
    )
    .await;
    check(
        "wrong-psk-refused",
        matches!(
            r,
            Err(WindowError::Auth { .. })
                | Err(WindowError::Io { .. })
                | Err(WindowError::Closed { .. })
        ),
        r.as_ref()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "connected".into()),
    );
    Ok(())
}

async fn refusal_checks(w: &VerbsWindow) {
    for (name, r) in [
        (
            "refuse-cas-load-block-word",
            w.compare_swap(word::CPU_UTIL, 0, 1).await,
        ),
        ("refuse-faa-word-192", w.fetch_add(192, 1).await),
        ("refuse-read-word-31", w.read_word(word::SEQ_END).await),
    ] {
        check(
            name,
            matches!(r, Err(WindowError::Refused { .. })),
            format!("{r:?}"),
        );
    }
}

/// Reads of [`read_checks`]' 300 whose every retry may be torn.
const TORN_ALLOWED: usize = 3;

async fn read_checks(w: &VerbsWindow, node_id: u64) {
    let policy = ReadPolicy {
        retries: 8,
        staleness: Duration::from_secs(5),
        deadline: Duration::from_secs(5),
    };
    // Live: the sequence number must advance while we read.
    let mut seqs = BTreeSet::new();
    let mut bad = 0;
    let mut unknown = 0;
    let mut torn = 0;
    let start = Instant::now();
    for _ in 0..300 {
        match read_load(w, &policy).await {
            LoadRead::Fresh(b) | LoadRead::Stale(b) => {
                seqs.insert(b.seq);
                if !consistent(&b.sample) || b.node_id != node_id {
                    bad += 1;
                }
            }
            // Every retry overlapped a publication (here every 200 µs,
            // five times the sidecar's default; a guest whose vCPU the
            // host preempts mid-read sees it now and then): the proxy
            // scores such a node from its in-flight count. Anything else
            // unknown is a failure.
            LoadRead::Unknown(UnknownReason::Torn { attempts }) => {
                torn += 1;
                println!("read_load torn: {attempts} reads");
            }
            LoadRead::Unknown(r) => {
                unknown += 1;
                println!("read_load unknown: {r}");
            }
        }
        if start.elapsed() > Duration::from_secs(30) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    check(
        "read-live-changes",
        seqs.len() >= 10,
        format!("{} distinct seqs", seqs.len()),
    );
    check(
        "read-consistent",
        bad == 0,
        format!("{bad} inconsistent accepted blocks"),
    );
    check(
        "read-known",
        unknown == 0 && torn <= TORN_ALLOWED,
        format!("{unknown} unknown, {torn} all torn (at most {TORN_ALLOWED} of 300)"),
    );
    // Many in flight: 64 concurrent raw reads on one queue pair.
    let raws = join_all((0..64).map(|_| w.read_raw())).await;
    let ok = raws.iter().filter(|r| r.is_ok()).count();
    let valid = raws
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .filter_map(|raw| rdmalb_window::decode_block(raw).ok())
        .filter(|b| consistent(&b.sample))
        .count();
    check(
        "read-many-in-flight",
        ok == 64,
        format!("{ok}/64 completed, {valid} seqlock-valid"),
    );
}

/// The NIC must refuse an atomic on the read-only region (words 0..32),
/// even when the client skips its own check; the header stays intact.
async fn nic_protection_check(a: &ClientArgs) -> Result<()> {
    let w = connect(a).await?;
    let before = w.read_raw().await?;
    let r = w
        .unchecked_compare_swap_read_only(word::MAGIC, before[word::MAGIC], 0)
        .await;
    check(
        "nic-refuses-atomic-on-read-only-region",
        r.is_err(),
        format!("{r:?}"),
    );
    drop(w);
    let w = connect(a).await?;
    let after = w.read_raw().await?;
    check(
        "read-only-region-unchanged",
        after[..8] == before[..8],
        format!("magic {:#x}", after[word::MAGIC]),
    );
    Ok(())
}

/// Round r is won by whoever swaps the word from r to r+1.
async fn cas_race(w: &VerbsWindow, rounds: u64) -> Result<Vec<u64>> {
    let mut won = Vec::new();
    let mut r = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while r < rounds {
        let old = w.compare_swap(CAS_WORD, r, r + 1).await?;
        if old == r {
            won.push(r);
            r += 1;
        } else if old > r {
            r = old; // lost rounds r..old
        } else {
            bail!("CAS word went backwards: {old} < {r}");
        }
        if Instant::now() > deadline {
            bail!("CAS race did not finish in time (at round {r})");
        }
        tokio::task::yield_now().await;
    }
    Ok(won)
}

/// `ops` FAAs of [`FAA_DELTA`], 16 in flight at a time; returns the old values.
async fn faa(w: &VerbsWindow, ops: u64) -> Result<Vec<u64>> {
    let mut olds = Vec::new();
    let mut left = ops;
    while left > 0 {
        let n = left.min(16);
        for r in join_all((0..n).map(|_| w.fetch_add(FAA_WORD, FAA_DELTA))).await {
            olds.push(r?);
        }
        left -= n;
    }
    Ok(olds)
}

async fn verify(a: VerifyArgs) -> Result<()> {
    let args = ClientArgs {
        common: a.common.clone(),
        connect: a.connect,
        id: 999,
        rounds: a.rounds,
        faa_ops: 0,
        claims: a.claims,
        out: PathBuf::new(),
    };
    let w = connect(&args).await?;
    let sites = sites(&a.common).len();
    verify_results(&w, a.rounds, a.faa_total, a.claims, sites, &a.outs).await
}

async fn verify_results(
    w: &VerbsWindow,
    rounds: u64,
    faa_total: u64,
    claims: u64,
    sites: usize,
    outs: &[PathBuf],
) -> Result<()> {
    let mut winners: Vec<usize> = vec![0; rounds as usize];
    let mut claimers: Vec<usize> = vec![0; claims as usize];
    let mut olds = Vec::new();
    for f in outs {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("won", r)) => {
                    let r: usize = r.parse()?;
                    if let Some(c) = winners.get_mut(r) {
                        *c += 1;
                    } else {
                        bail!("round {r} out of range in {}", f.display());
                    }
                }
                Some(("faa", o)) => olds.push(o.parse::<u64>()?),
                Some(("claim", e)) => {
                    let e: usize = e.parse()?;
                    match claimers.get_mut(e) {
                        Some(c) => *c += 1,
                        None => bail!("claimed epoch {e} out of range in {}", f.display()),
                    }
                }
                _ => bail!("bad line {line:?} in {}", f.display()),
            }
        }
    }
    let multiple = winners.iter().filter(|&&c| c > 1).count();
    let none = winners.iter().filter(|&&c| c == 0).count();
    check(
        "cas-exactly-one-winner",
        multiple == 0 && none == 0,
        format!(
            "{rounds} rounds, {} clients, {multiple} with >1 winner, {none} without",
            outs.len()
        ),
    );
    let cas_final = w.read_word(CAS_WORD).await?;
    check(
        "cas-final-value",
        cas_final == rounds,
        format!("word {CAS_WORD} = {cas_final}"),
    );
    let faa_final = w.read_word(FAA_WORD).await?;
    check(
        "faa-total",
        faa_final == faa_total * FAA_DELTA && olds.len() as u64 == faa_total,
        format!(
            "word {FAA_WORD} = {faa_final}, expected {}; {} results",
            faa_total * FAA_DELTA,
            olds.len()
        ),
    );
    let distinct: BTreeSet<u64> = olds.iter().copied().collect();
    let in_range = olds
        .iter()
        .all(|&o| o % FAA_DELTA == 0 && o < faa_total * FAA_DELTA);
    check(
        "faa-old-values-distinct",
        distinct.len() == olds.len() && in_range,
        format!("{} distinct of {}", distinct.len(), olds.len()),
    );
    verify_claims(w, claims, sites, &claimers).await
}

async fn solo(a: SoloArgs) -> Result<()> {
    let (mem, stop, publisher) = live_window(&a.common)?;
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = VerbsServer::start(
        Arc::clone(&mem),
        "127.0.0.1:0".parse()?,
        psk(&a.common)?,
        a.common.device.clone(),
        stop_rx,
    )?;
    let addr = server.local_addr();
    println!("solo: server on {addr} device {}", server.device_name());
    let dir = std::env::temp_dir().join(format!("verbs-solo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut tasks = Vec::new();
    let mut outs = Vec::new();
    for id in 1..=a.clients {
        let out = dir.join(format!("client-{id}.txt"));
        outs.push(out.clone());
        let args = ClientArgs {
            common: a.common.clone(),
            connect: addr,
            id,
            rounds: a.rounds,
            faa_ops: a.faa_ops,
            claims: a.claims,
            out,
        };
        tasks.push(tokio::spawn(client(args)));
    }
    for t in tasks {
        t.await??;
    }
    let args = ClientArgs {
        common: a.common.clone(),
        connect: addr,
        id: 999,
        rounds: a.rounds,
        faa_ops: 0,
        claims: a.claims,
        out: PathBuf::new(),
    };
    let w = connect(&args).await?;
    let sites = sites(&a.common).len();
    verify_results(
        &w,
        a.rounds,
        a.faa_ops * u64::from(a.clients),
        a.claims,
        sites,
        &outs,
    )
    .await?;
    // Closed clients are released asynchronously; only the verifier remains.
    let t0 = Instant::now();
    while server.peers().len() != 1 && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check(
        "server-peers-listed",
        server.peers().len() == 1,
        format!("{} paired", server.peers().len()),
    );
    // The sidecar going away must surface as an error, not a hang.
    drop(server);
    let t0 = Instant::now();
    let mut r = w.read_raw().await.map(|_| ());
    while r.is_ok() && t0.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        r = w.read_raw().await.map(|_| ());
    }
    check(
        "server-gone-detected",
        r.is_err(),
        format!("{r:?} after {:?}", t0.elapsed()),
    );
    stop.store(true, Ordering::Relaxed);
    let _ = publisher.join();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn nodevice() {
    let r = verbs::probe(None);
    let text = r.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
    check(
        "no-device-error",
        matches!(r, Err(WindowError::NoDevice { .. })) && text.contains("\"tcp\""),
        format!("{r:?}"),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let (name, r) = match cli.mode {
        Mode::Serve(a) => ("serve", serve(a).await),
        Mode::Client(a) => ("client", client(a).await),
        Mode::Verify(a) => ("verify", verify(a).await),
        Mode::Solo(a) => ("solo", solo(a).await),
        Mode::Nodevice => {
            nodevice();
            ("nodevice", Ok(()))
        }
    };
    if let Err(e) = &r {
        FAILED.fetch_add(1, Ordering::Relaxed);
        println!("CHECK {name}-run FAIL {e:#}");
    }
    let failed = FAILED.load(Ordering::Relaxed);
    println!(
        "RESULT {name} {}",
        if failed == 0 {
            "PASS".to_string()
        } else {
            format!("FAIL ({failed} failed)")
        }
    );
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
