//! `heron run "prompt"`: its command line, and the agent it drives. The headless ACP client
//! that runs the turn is `heron-client`; this module hands it the options and, unless
//! `--agent` names another agent, this executable as Heron's.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use heron_client::{Agent, Options};

/// How permission questions are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Approve {
    /// Ask: a line read from stdin, a terminal or a pipe (end of input: reject).
    Ask,
    /// Allow everything once.
    All,
    /// Reject everything.
    None,
}

impl From<Approve> for heron_client::Approve {
    fn from(approve: Approve) -> Self {
        match approve {
            Approve::Ask => heron_client::Approve::Ask,
            Approve::All => heron_client::Approve::All,
            Approve::None => heron_client::Approve::None,
        }
    }
}

/// Options of `heron run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// What to ask the agent.
    pub prompt: String,
    /// An agent command to drive instead of Heron itself, e.g. "other-agent --acp".
    #[arg(long, value_name = "CMD")]
    pub agent: Option<String>,
    /// The session's working directory (default: the current one); the agent's file and
    /// terminal requests are confined to it.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Continue this stored session (`session/load`, else `session/resume`) instead of
    /// opening a new one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// How permission questions are answered.
    #[arg(long, value_enum, default_value_t = Approve::Ask)]
    pub approve: Approve,
    /// Print every session update and the result as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The model, for Heron's own agent (default: the configured one, else demo/demo).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
}

/// Runs `heron run` and returns its exit status; the client says its own errors, then how
/// to continue the session.
pub async fn run(args: RunArgs) -> u8 {
    let agent = match args.agent {
        Some(line) => Agent::Shell(line),
        None => match std::env::current_exe() {
            Ok(exe) => Agent::Heron(exe),
            Err(e) => {
                eprintln!("heron: cannot find the heron binary: {e}");
                return 1;
            }
        },
    };
    let options = Options {
        prompt: args.prompt,
        agent,
        cwd: args.cwd,
        session: args.session,
        approve: args.approve.into(),
        json: args.json,
        model: args.model,
    };
    heron_client::run(options).await
}
