//! The `heron` binary.

use std::process::ExitCode;

use clap::Parser;
use heron::cli::{Cli, Command, init_logging};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("heron: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Acp(args) => heron::cli::acp::run(args).await,
        }
    });
    // Handler tasks still running at EOF are not waited for: stdin is gone.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(%err, "heron stopped");
            eprintln!("heron: {err}");
            ExitCode::FAILURE
        }
    }
}
