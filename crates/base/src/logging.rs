//! Logging of every rdmalb binary: `tracing` events, one per line on
//! stderr, filtered by `RDMALB_LOG` (tracing's filter syntax; default
//! `info`), coloured only on a terminal.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber; call once, first thing in `main`.
pub fn init() {
    let filter = EnvFilter::try_from_env("RDMALB_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}
