//! The `heron` command line: argument parsing and the commands it runs.

pub mod acp;
pub mod conformance;
pub mod run;
pub mod setup;

use clap::{Parser, Subcommand};

/// Heron, a coding agent for editors that speak the Agent Client Protocol.
#[derive(Debug, Parser)]
#[command(name = "heron", version, about)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Heron's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve ACP on stdin/stdout: what an editor launches.
    Acp(acp::AcpArgs),
    /// Run one prompt headless and print the turn (drives Heron, or any agent with --agent).
    Run(run::RunArgs),
    /// Add a model provider to HERON_HOME (config.toml and .env).
    Setup(setup::SetupArgs),
    /// Replay ACP conformance transcripts against Heron or another agent.
    Conformance(conformance::ConformanceArgs),
}

/// Sends logs to stderr, filtered by `HERON_LOG` (default `warn`). Stdout is the protocol's.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HERON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
