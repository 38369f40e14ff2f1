//! Command-line front ends of the testbed subcommands (`testsrv`, `trace`,
//! `load`, `cluster`, `chaos`, `abuse`, `abuse-report`). `main.rs` flattens these argument structs and
//! calls [`run`]; everything here returns [`CliError`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use tokio::sync::watch;

use super::load::{LoadOptions, Mode};
use super::trace::{export, BurstMode, Generator, HostMap, Trace};
use rdmalb_base::duration;

/// Exit status for an invalid config or spec.
const CONFIG_INVALID: u8 = 2;

/// Why a testbed command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Server(#[from] super::server::ServerError),
    #[error(transparent)]
    Trace(#[from] super::trace::TraceError),
    #[error(transparent)]
    Load(#[from] super::load::LoadError),
    #[error(transparent)]
    Cluster(#[from] super::cluster::ClusterError),
    #[error(transparent)]
    Plot(#[from] super::plot::PlotError),
    #[error(transparent)]
    Abuse(#[from] super::abuse::AbuseError),
    #[error(transparent)]
    AbuseReport(#[from] super::abuse::report::ReportError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
    let what = what.into();
    move |source| CliError::Io { what, source }
}

/// A testbed subcommand.
#[derive(Debug, Subcommand)]
pub enum TestbedCommand {
    /// Run a capacity-modelled backend node (docs/testbed.md).
    Testsrv(TestsrvArgs),
    /// Generate a request trace, or export one for httperf / wrk.
    Trace(TraceArgs),
    /// Replay a trace against a URL and report per-site time series.
    Load(LoadArgs),
    /// Run an emulated cluster (nodes, sidecars, proxies) and replay a trace through it.
    Cluster(ClusterArgs),
    /// Run the seeded fault-injection campaign against a cluster of real
    /// proxies, sidecars and nodes (docs/reliability.md).
    Chaos(ChaosArgs),
    /// Attack one loopback listener (slow clients, floods, HTTP/2 abuse,
    /// TLS handshakes), bounded in time and count; prints what happened
    /// as JSON (docs/reliability.md, "Service under attack").
    Abuse(AbuseArgs),
    /// The side-by-side table of bench/abuse/run.sh's measurements.
    AbuseReport(AbuseReportArgs),
}

#[derive(Debug, Args)]
pub struct AbuseArgs {
    /// Listener to attack (loopback only), e.g. 127.0.0.1:8080.
    #[arg(long)]
    pub target: std::net::SocketAddr,
    /// slowloris, slow-post, slow-read, conn-flood, tls-flood, rapid-reset,
    /// continuation, hpack-bomb, ping-flood, settings-flood, tiny-data,
    /// window-stall; comma-separated to run several one after the other.
    #[arg(long, value_delimiter = ',', required = true)]
    pub attack: Vec<String>,
    /// How long each attack runs.
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Concurrent connections.
    #[arg(short, long, default_value_t = 100)]
    pub connections: usize,
    /// Connections opened per second at the start.
    #[arg(long, default_value_t = 1000)]
    pub ramp: u64,
    /// Slow attacks: gap between two bytes (or pipelined requests).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Floods: operations per second over all connections (0: unpaced).
    #[arg(long, default_value_t = 20_000)]
    pub rate: u64,
    /// Stop each attack after this many operations.
    #[arg(long, default_value_t = 10_000_000)]
    pub max_ops: u64,
    /// TLS with ALPN (h2 for the HTTP/2 attacks); tls-flood always is.
    #[arg(long)]
    pub tls: bool,
    /// Connect from this loopback address (e.g. 127.0.0.2).
    #[arg(long)]
    pub source: Option<std::net::IpAddr>,
    /// Host header / :authority / SNI.
    #[arg(long, default_value = "bench.localhost")]
    pub host: String,
    /// Path of a large response (slow-read, window-stall).
    #[arg(long, default_value = "/files/1m.bin")]
    pub large_path: String,
    /// Path a POST goes to (slow-post, tiny-data).
    #[arg(long, default_value = "/post")]
    pub post_path: String,
    /// Also write the results (a JSON array) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AbuseReportArgs {
    /// The runs file bench/abuse/run.sh writes.
    #[arg(long)]
    pub runs: PathBuf,
    /// Output directory (abuse.json, abuse.txt).
    #[arg(short, long)]
    pub output: PathBuf,
    /// First line of the text table (what ran, where).
    #[arg(
        long,
        default_value = "rdmalb-testbed abuse: service under attack (tcp loopback)"
    )]
    pub title: String,
}

#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Seed of the fault schedule (the same seed replays the same schedule).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long faults are injected (then everything is healed and the
    /// cluster must settle).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How the proxies reach the node windows: shm, or tcp (through
    /// fault-injecting relays).
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Mean gap between fault starts.
    #[arg(long, default_value = "1500ms", value_parser = parse_duration)]
    pub gap: Duration,
    /// Bound for every node to be ACTIVE and OK after the faults stop.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub settle: Duration,
    /// The proxies' `global.retry_on`, comma-separated (e.g.
    /// `conn-failure` to compare without retries of broken connections);
    /// default: `conn-failure,empty-response`.
    #[arg(long)]
    pub retry_on: Option<String>,
    /// Output directory (configs, logs, faults.txt, chaos.json).
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct TestsrvArgs {
    /// Node config file (TOML); see conf/testsrv.toml.
    #[arg(short, long)]
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub what: TraceCommand,
}

/// Parameters every generator shares.
#[derive(Debug, Args)]
pub struct GenCommon {
    /// Sites, comma-separated, in the cluster's site order.
    #[arg(long, value_delimiter = ',', default_value = "shop,blog,news")]
    pub sites: Vec<String>,
    /// Number of requests.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    pub requests: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output trace file.
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// One URL per site (seed 001: a 1 KiB file).
    SingleFile {
        #[command(flatten)]
        common: GenCommon,
        #[arg(long, default_value = "1k")]
        size: String,
    },
    /// Zipf popularity over a file set (seed 002: α 0.25 .. 0.9).
    Zipf {
        #[command(flatten)]
        common: GenCommon,
        #[arg(long)]
        alpha: f64,
        #[arg(long, default_value_t = 1000)]
        files: u32,
        #[arg(long, default_value = "512")]
        min_size: String,
        #[arg(long, default_value = "64k")]
        max_size: String,
        /// Share of the files that are dynamic (0..1).
        #[arg(long, default_value_t = 0.0)]
        dynamic_share: f64,
        #[arg(long, default_value = "10ms")]
        cost: String,
    },
    /// Bursts of exactly L requests alternating between sites or content classes.
    Bursty {
        #[command(flatten)]
        common: GenCommon,
        /// Burst length L (the seeds use 512 .. 65536).
        #[arg(long)]
        burst: u64,
        #[arg(long, value_enum, default_value = "sites")]
        mode: BurstMode,
        #[arg(long, default_value = "1k")]
        size: String,
        #[arg(long, default_value = "10ms")]
        cost: String,
    },
    /// Synthetic world-cup-like trace: ~2/3 dynamic in long bursts, static between.
    WorldCup {
        #[command(flatten)]
        common: GenCommon,
        #[arg(long, default_value_t = 2.0 / 3.0)]
        dynamic_share: f64,
        /// Mean length of a dynamic burst.
        #[arg(long, default_value_t = 4096)]
        mean_burst: u64,
        #[arg(long, default_value_t = 1000)]
        files: u32,
        #[arg(long, default_value = "10ms")]
        cost: String,
    },
    /// Export a trace as an httperf --wlog file or a wrk Lua script.
    Export {
        #[arg(long)]
        trace: PathBuf,
        #[arg(long, value_parser = ["httperf", "wrk"])]
        format: String,
        /// httperf: only this site's requests (httperf sends one Host per run).
        #[arg(long)]
        site: Option<String>,
        /// wrk: site=host pairs (default host: <site>.localhost).
        #[arg(long, default_value = "")]
        host_map: String,
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    #[arg(long)]
    pub trace: PathBuf,
    /// Target, e.g. http://127.0.0.1:8080; repeat to spread requests over several proxies.
    #[arg(long, required = true)]
    pub url: Vec<String>,
    /// site=host pairs; other sites use <site>.localhost.
    #[arg(long, default_value = "")]
    pub host_map: String,
    /// Closed loop with this many connections (default 16 unless --rate).
    #[arg(short, long, conflicts_with = "rate")]
    pub connections: Option<u32>,
    /// Open loop at this many requests/s.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: most requests outstanding; beyond, requests count as `backlog`.
    #[arg(long, default_value_t = 1000)]
    pub max_inflight: u32,
    /// Stop after this long.
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many requests (default: the trace length; the trace repeats).
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Reporting interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Per-request timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Per-interval, per-site CSV.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Full report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// PNG of per-site throughput (needs gnuplot); writes <png>.csv beside it.
    #[arg(long)]
    pub png: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Cluster spec (TOML); see bench/cluster-332.toml and docs/testbed.md.
    #[arg(short, long)]
    pub config: PathBuf,
    /// Output directory (configs, logs, trace, CSV, JSON, PNG).
    #[arg(short, long)]
    pub output: PathBuf,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s)
}

/// Runs a testbed subcommand to completion.
pub fn run(cmd: TestbedCommand) -> Result<ExitCode, CliError> {
    match cmd {
        TestbedCommand::Testsrv(a) => {
            let cfg = match super::config::load_node(&a.config) {
                Ok(c) => c,
                Err(problems) => {
                    eprintln!("{problems}");
                    return Ok(ExitCode::from(CONFIG_INVALID));
                }
            };
            let rt = runtime(1)?;
            rt.block_on(async {
                let (tx, rx) = watch::channel(false);
                tokio::spawn(async move {
                    rdmalb_base::shutdown::termination().await;
                    let _ = tx.send(true);
                });
                super::server::run(cfg, rx).await
            })?;
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Trace(a) => trace(a.what),
        TestbedCommand::Abuse(a) => abuse(a),
        TestbedCommand::AbuseReport(a) => {
            let text = super::abuse::report::write(&a.runs, &a.output, &a.title)?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        TestbedCommand::Load(a) => load(a),
        TestbedCommand::Chaos(a) => {
            let transport = match a.transport.as_str() {
                "shm" => super::cluster::WindowTransport::Shm,
                "tcp" => super::cluster::WindowTransport::Tcp,
                other => {
                    return Err(CliError::Usage(format!(
                        "--transport {other}: expected shm or tcp"
                    )))
                }
            };
            let opts = super::chaos::Options {
                seed: a.seed,
                duration: a.duration,
                transport,
                gap: a.gap,
                settle: a.settle,
                retry_on: a.retry_on.map(|l| {
                    l.split(',')
                        .map(|k| k.trim().to_string())
                        .filter(|k| !k.is_empty())
                        .collect()
                }),
                out: a.output,
            };
            let rt = runtime(2)?;
            let outcome = rt.block_on(async {
                let (tx, rx) = watch::channel(false);
                tokio::spawn(async move {
                    rdmalb_base::shutdown::termination().await;
                    tracing::info!("chaos: interrupted; healing and tearing down");
                    let _ = tx.send(true);
                });
                super::chaos::run(&opts, rx).await
            })?;
            print!("{}", outcome.text());
            Ok(if outcome.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        TestbedCommand::Cluster(a) => {
            let spec = match super::cluster::load_spec(&a.config) {
                Ok(s) => s,
                Err(problems) => {
                    eprintln!("{problems}");
                    return Ok(ExitCode::from(CONFIG_INVALID));
                }
            };
            let rt = runtime(2)?;
            let report = rt.block_on(async {
                let (tx, rx) = watch::channel(false);
                tokio::spawn(async move {
                    rdmalb_base::shutdown::termination().await;
                    tracing::info!("cluster: interrupted; tearing down");
                    let _ = tx.send(true);
                });
                super::cluster::run(&spec, &a.output, rx).await
            })?;
            print!("{}", report.table());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime(workers: usize) -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(io("cannot start the async runtime"))
}

fn trace(cmd: TraceCommand) -> Result<ExitCode, CliError> {
    let (common, generator) = match cmd {
        TraceCommand::Export {
            trace,
            format,
            site,
            host_map,
            output,
        } => {
            let t = Trace::load(&trace)?;
            let bytes = if format == "httperf" {
                if let Some(s) = &site {
                    if !t.sites.contains(s) {
                        return Err(CliError::Usage(format!(
                            "site {s} does not occur in {}",
                            trace.display()
                        )));
                    }
                }
                export::httperf_wlog(&t, site.as_deref())
            } else {
                let hosts = HostMap::parse(&host_map)
                    .map_err(|e| CliError::Usage(format!("--host-map: {e}")))?;
                export::wrk_lua(&t, &hosts).into_bytes()
            };
            std::fs::write(&output, bytes)
                .map_err(io(format!("cannot write {}", output.display())))?;
            return Ok(ExitCode::SUCCESS);
        }
        TraceCommand::SingleFile { common, size } => (common, Generator::SingleFile { size }),
        TraceCommand::Zipf {
            common,
            alpha,
            files,
            min_size,
            max_size,
            dynamic_share,
            cost,
        } => (
            common,
            Generator::Zipf {
                alpha,
                files,
                min_size,
                max_size,
                dynamic_share,
                cost,
            },
        ),
        TraceCommand::Bursty {
            common,
            burst,
            mode,
            size,
            cost,
        } => (
            common,
            Generator::Bursty {
                burst,
                mode,
                size,
                cost,
            },
        ),
        TraceCommand::WorldCup {
            common,
            dynamic_share,
            mean_burst,
            files,
            cost,
        } => (
            common,
            Generator::WorldCup {
                dynamic_share,
                mean_burst,
                files,
                cost,
            },
        ),
    };
    let t = generator.generate(&common.sites, common.requests, common.seed)?;
    let header = format!(
        "rdmalb trace: {} requests={} seed={}\nformat: <site><TAB><path>",
        generator.describe(),
        common.requests,
        common.seed
    );
    t.write(&common.output, &header)?;
    Ok(ExitCode::SUCCESS)
}

fn load(a: LoadArgs) -> Result<ExitCode, CliError> {
    let trace = Trace::load(&a.trace)?;
    let hosts =
        HostMap::parse(&a.host_map).map_err(|e| CliError::Usage(format!("--host-map: {e}")))?;
    let mode = match a.rate {
        Some(rate) => Mode::Open {
            rate,
            max_inflight: a.max_inflight,
        },
        None => Mode::Closed {
            connections: a.connections.unwrap_or(16),
        },
    };
    let opts = LoadOptions {
        urls: a.url,
        hosts,
        mode,
        duration: a.duration,
        requests: a.requests,
        interval: a.interval,
        timeout: a.timeout,
    };
    let rt = runtime(2)?;
    let report = rt.block_on(async {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            rdmalb_base::shutdown::termination().await;
            let _ = tx.send(true);
        });
        super::load::run(trace, opts, rx).await
    })?;
    super::cluster::write_outputs(
        &report,
        a.csv.as_deref(),
        a.json.as_deref(),
        a.png.as_deref(),
        "rdmalb load",
    )?;
    print!("{}", report.table());
    Ok(ExitCode::SUCCESS)
}

fn abuse(a: AbuseArgs) -> Result<ExitCode, CliError> {
    use super::abuse::{Attack, Options};
    let attacks = a
        .attack
        .iter()
        .map(|s| Attack::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let rt = runtime(2)?;
    let mut outcomes = Vec::new();
    for attack in attacks {
        let opts = Options {
            target: a.target,
            source: a.source,
            attack,
            duration: a.duration,
            connections: a.connections,
            ramp: a.ramp,
            interval: a.interval,
            rate: a.rate,
            max_ops: a.max_ops,
            tls: a.tls,
            host: a.host.clone(),
            large_path: a.large_path.clone(),
            post_path: a.post_path.clone(),
        };
        let outcome = rt.block_on(super::abuse::run(opts))?;
        print!("{}", outcome.text());
        outcomes.push(outcome);
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&outcomes).unwrap_or_default() + "\n";
        std::fs::write(path, text).map_err(io(format!("cannot write {}", path.display())))?;
    }
    Ok(ExitCode::SUCCESS)
}
