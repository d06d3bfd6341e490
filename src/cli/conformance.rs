//! `heron conformance FILES...`: replays ACP transcripts against Heron (this executable's
//! `acp --validate` with each scenario's arguments) or any agent command, prints a pass/fail
//! table and the failures, and exits non-zero when any scenario fails.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::conformance::{AgentCommand, Outcome, run_file, transcript_files};

/// Options of `heron conformance`.
#[derive(Debug, Clone, Args)]
pub struct ConformanceArgs {
    /// Transcript files (`*.ndjson`) or directories of them.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// An agent command line to test instead of Heron, e.g. "other-agent --acp" (run with
    /// `sh -c`; the scenarios' Heron arguments are not passed).
    #[arg(long, value_name = "CMD")]
    pub agent: Option<String>,
    /// Rewrite the expectations of failing transcripts from what the agent sent
    /// (also `UPDATE_TRANSCRIPTS=1`).
    #[arg(long, env = "UPDATE_TRANSCRIPTS", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub update: bool,
}

/// The pass/fail table for `outcomes`, then each failure in full.
pub fn report(outcomes: &[Outcome]) -> String {
    let width = outcomes.iter().map(|o| o.name.len()).max().unwrap_or(8).max(8);
    let mut out = format!("{:<6} {:<width$} {:>8}\n", "result", "scenario", "time");
    for outcome in outcomes {
        let verdict = match (&outcome.result, outcome.rewritten, &outcome.skipped) {
            (Err(_), _, _) => "FAIL",
            (Ok(()), _, Some(_)) => "skip",
            (Ok(()), true, None) => "update",
            (Ok(()), false, None) => "pass",
        };
        out.push_str(&format!(
            "{verdict:<6} {:<width$} {:>7.2}s\n",
            outcome.name,
            outcome.elapsed.as_secs_f64()
        ));
    }
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    out.push_str(&format!("\n{} passed, {failed} failed\n", outcomes.len() - failed));
    for outcome in outcomes {
        if let Err(failure) = &outcome.result {
            out.push_str(&format!("\n=== {} ===\n{failure}", outcome.name));
        }
    }
    out
}

/// Runs `heron conformance`.
pub fn run(args: ConformanceArgs) -> ExitCode {
    let agent = match (&args.agent, std::env::current_exe()) {
        (Some(command), _) => AgentCommand::Shell(command.clone()),
        (None, Ok(exe)) => AgentCommand::Heron(exe),
        (None, Err(err)) => {
            eprintln!("heron: cannot find this executable to test it: {err}");
            return ExitCode::FAILURE;
        }
    };
    let files = match transcript_files(&args.files) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("heron: cannot list the transcripts: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcomes: Vec<Outcome> = files.iter().map(|file| run_file(file, &agent, args.update)).collect();
    print!("{}", report(&outcomes));
    if outcomes.iter().all(|o| o.result.is_ok()) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
