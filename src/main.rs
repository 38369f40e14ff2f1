//! The `rdmalb` command: parses the command line and starts one component.
//! Everything else lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod config_reference;

/// mimalloc instead of the C library's malloc: per-request buffers, header
/// maps and task frames come and go on every request (docs/benchmarks-history.md,
/// "Where rdmalb's time goes").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "rdmalb",
    version,
    about = "RDMA-aware layer-7 load balancer",
    long_about = "RDMA-aware layer-7 load balancer: an HTTP front end (`rdmalb proxy`) that \
reads its backend nodes' load per request from windows their sidecars (`rdmalb sidecar`) \
publish, and moves idle nodes to hot sites. README.md has a minimal config; \
docs/configuration.md every key.",
    after_help = "Example:\n  rdmalb check -c rdmalb.toml && rdmalb proxy -c rdmalb.toml"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP front end (proxy, health checks, metrics).
    ///
    /// Reloads the config on SIGHUP, restarts without dropping connections on
    /// SIGUSR2, drains on SIGTERM (docs/operations.md).
    #[command(after_help = "Example:\n  rdmalb proxy -c /etc/rdmalb/rdmalb.toml")]
    Proxy {
        /// Proxy config file (TOML); see conf/rdmalb.toml.
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Run the sidecar beside a backend app: publish its load into the node window.
    ///
    /// It also applies the roles proxies write into the window (renders the
    /// site's template, reloads the app; docs/sidecar.md).
    #[command(after_help = "Example:\n  rdmalb sidecar -c /etc/rdmalb/sidecar.toml")]
    Sidecar {
        /// Sidecar config file (TOML); see conf/sidecar.toml.
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Validate a config file and print every problem found.
    ///
    /// Exit status 2 when the file has problems, each named with its key.
    #[command(after_help = "Example:\n  rdmalb check --sidecar -c conf/sidecar.toml")]
    Check {
        /// The config file (TOML).
        #[arg(short, long)]
        config: PathBuf,
        /// The file is a sidecar config (default: a proxy config).
        #[arg(long)]
        sidecar: bool,
    },
    /// Send runtime commands to a running proxy through its admin listener
    /// (the commands are listed below).
    #[command(after_help = ctl_help())]
    Ctl {
        /// The proxy's config file: its [admin] listen and token_file.
        #[arg(short, long, conflicts_with = "admin")]
        config: Option<PathBuf>,
        /// The admin listener's address (with --token-file).
        #[arg(long, env = "RDMALB_ADMIN", requires = "token_file")]
        admin: Option<std::net::SocketAddr>,
        /// The file holding the admin token.
        #[arg(long, env = "RDMALB_TOKEN_FILE")]
        token_file: Option<PathBuf>,
        /// The command, as words (`show stat`); several separated by `;`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Convert an HAProxy configuration to a proxy config: the TOML is
    /// printed (or written), every directive not mapped exactly is named on
    /// stderr; exit status 3 when one changes which backend a request reaches.
    #[command(after_help = "Example:\n  rdmalb import /etc/haproxy/haproxy.cfg -o rdmalb.toml")]
    Import {
        /// The HAProxy configuration file.
        haproxy_cfg: PathBuf,
        /// Write the TOML to this file instead of printing it.
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Exit 0 even when a routing directive could not be mapped.
        #[arg(long)]
        allow_partial: bool,
    },
    /// Print the configuration reference (docs/configuration.md), generated
    /// from the config types and their doc comments; with --check and the
    /// --*-conf options, check the committed file and example configs
    /// instead (exit 1 naming each problem).
    #[command(after_help = "Example:\n  rdmalb config-reference > docs/configuration.md")]
    ConfigReference {
        /// Compare this file with what the code generates.
        #[arg(long)]
        check: Option<PathBuf>,
        /// Proxy config files whose keys must all be in the reference.
        #[arg(long, num_args = 1..)]
        proxy_conf: Vec<PathBuf>,
        /// Sidecar config files whose keys must all be in the reference.
        #[arg(long, num_args = 1..)]
        sidecar_conf: Vec<PathBuf>,
    },
    /// Generate a pre-shared key for the tcp and verbs windows (256 random
    /// bits as `rdmalb-psk-v1:` and hex): printed, or written to a new file.
    #[command(after_help = "Example:\n  rdmalb psk --out /etc/rdmalb/cluster.psk")]
    Psk {
        /// Write the key to this new file (mode 0600; never overwrites)
        /// instead of printing it.
        #[arg(short, long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    rdmalb_base::logging::init();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rdmalb: {}", rdmalb_base::error::chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Exit status 2 for an invalid config, 1 for any other failure.
const CONFIG_INVALID: u8 = 2;

/// Exit status of `rdmalb import` when routing could not be kept.
const IMPORT_PARTIAL: u8 = 3;

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Psk { out } => {
            let key = rdmalb_window::Psk::generate();
            match out {
                Some(path) => key.write_new_file(&path)?,
                None => println!("{}", key.to_text()),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ConfigReference {
            check,
            proxy_conf,
            sidecar_conf,
        } => Ok(config_reference(check, &proxy_conf, &sidecar_conf)),
        Command::Ctl {
            config,
            admin,
            token_file,
            command,
        } => ctl(config, admin, token_file, &command),
        Command::Import {
            haproxy_cfg,
            out,
            allow_partial,
        } => import(&haproxy_cfg, out, allow_partial),
        Command::Check { config, sidecar } => Ok(check(&config, sidecar)),
        Command::Proxy { config } => proxy(&config),
        Command::Sidecar { config } => sidecar(config),
    }
}

/// `rdmalb config-reference`: the reference, or the check of it and of
/// example configs against the schemas.
fn config_reference(
    check: Option<PathBuf>,
    proxy_conf: &[PathBuf],
    sidecar_conf: &[PathBuf],
) -> ExitCode {
    let files = config_reference::Files::new();
    if check.is_none() && proxy_conf.is_empty() && sidecar_conf.is_empty() {
        println!("{}", files.markdown());
        return ExitCode::SUCCESS;
    }
    let problems = files.check(check.as_deref(), proxy_conf, sidecar_conf);
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `rdmalb ctl`: sends runtime commands to a proxy's admin listener.
fn ctl(
    config: Option<PathBuf>,
    admin: Option<std::net::SocketAddr>,
    token_file: Option<PathBuf>,
    command: &[String],
) -> anyhow::Result<ExitCode> {
    use rdmalb_proxy::front::admin::ctl;
    let target = match (config, admin, token_file) {
        (Some(c), _, _) => ctl::Target::from_config(&c),
        (None, Some(a), Some(t)) => ctl::Target::new(a, &t),
        _ => Err("say where the proxy is: -c CONFIG, or --admin ADDR --token-file FILE".into()),
    }
    .map_err(anyhow::Error::msg)?;
    let answer = ctl::send(&target, &command.join(" ")).map_err(anyhow::Error::msg)?;
    if answer.status == 200 {
        print!("{}", answer.body);
        Ok(ExitCode::SUCCESS)
    } else {
        eprint!("rdmalb ctl: {} {}", answer.status, answer.body);
        Ok(ExitCode::FAILURE)
    }
}

/// `rdmalb import`: an HAProxy configuration converted, its notes on
/// stderr; [`IMPORT_PARTIAL`] when routing would change.
fn import(
    haproxy_cfg: &std::path::Path,
    out: Option<PathBuf>,
    allow_partial: bool,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(haproxy_cfg)
        .with_context(|| format!("cannot read {}", haproxy_cfg.display()))?;
    let dir = haproxy_cfg.parent().unwrap_or(std::path::Path::new("."));
    let imported = rdmalb_proxy::import::import(&text, dir);
    for note in &imported.notes {
        eprintln!("{}", note.render(&haproxy_cfg.display().to_string()));
    }
    match out {
        Some(path) => std::fs::write(&path, &imported.toml)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{}", imported.toml),
    }
    Ok(if imported.changes_routing() && !allow_partial {
        ExitCode::from(IMPORT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// `rdmalb check [--sidecar]`: every problem of a config, or `ok`.
fn check(config: &std::path::Path, sidecar: bool) -> ExitCode {
    let result = if sidecar {
        rdmalb_sidecar::check(config)
            .map(|_| ())
            .map_err(|e| e.to_string())
    } else {
        rdmalb_proxy::config::load(config)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    match result {
        Ok(()) => {
            println!("{}: ok", config.display());
            ExitCode::SUCCESS
        }
        Err(problems) => {
            eprintln!("{problems}");
            ExitCode::from(CONFIG_INVALID)
        }
    }
}

/// `rdmalb proxy`: runs the proxy until it is stopped.
fn proxy(config: &std::path::Path) -> anyhow::Result<ExitCode> {
    let config = match rdmalb_proxy::config::load(config) {
        Ok(c) => c,
        Err(problems) => {
            eprintln!("{problems}");
            return Ok(ExitCode::from(CONFIG_INVALID));
        }
    };
    // The control plane (signals, reloads, health checks, admin)
    // runs here; the data path starts its own `global.workers`
    // threads with one current-thread runtime each (proxy::run).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rdmalb-control")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(rdmalb_proxy::front::run(config))?;
    Ok(ExitCode::SUCCESS)
}

/// `rdmalb sidecar`: runs the sidecar until SIGTERM or SIGINT.
fn sidecar(config: PathBuf) -> anyhow::Result<ExitCode> {
    if let Err(problems) = rdmalb_sidecar::check(&config) {
        eprintln!("{problems}");
        return Ok(ExitCode::from(CONFIG_INVALID));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rdmalb-sidecar")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            rdmalb_base::shutdown::termination().await;
            tracing::info!("sidecar: shutting down");
            let _ = tx.send(true);
        });
        rdmalb_sidecar::run(config, rx).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `rdmalb ctl --help`'s text after the options: the runtime commands (from
/// their one table) and an example.
fn ctl_help() -> String {
    format!(
        "{}\nExample:\n  rdmalb ctl -c /etc/rdmalb/rdmalb.toml set node web1 state drain",
        rdmalb_proxy::front::admin::runtime::command::help_text().trim_end()
    )
}
