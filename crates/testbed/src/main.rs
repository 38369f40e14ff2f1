//! The `rdmalb-testbed` command: the testbed's own binary, apart from the
//! appliance (`rdmalb`). Parses the command line and runs one subcommand
//! of [`rdmalb_testbed::cli`]; `docs/testbed.md` describes them.

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "rdmalb-testbed",
    version,
    about = "rdmalb testbed: capacity-model nodes, traces, replay client, emulated cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: rdmalb_testbed::cli::TestbedCommand,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    rdmalb_base::logging::init();
    match rdmalb_testbed::cli::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rdmalb-testbed: {e}");
            ExitCode::FAILURE
        }
    }
}
