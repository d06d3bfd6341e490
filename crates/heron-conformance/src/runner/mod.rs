//! Runs a transcript against an agent: checks what the transcript asks for (`confine`),
//! prepares its sandbox (`sandbox`), starts the agent (`transport`), replays the exchange
//! (`replay`, answering as the client in the acp profile: `client`) and, in refresh mode,
//! rewrites the expectations that no longer hold (`refresh`), then replays once more to
//! prove them.

mod agent_files;
mod agent_line;
mod client;
mod confine;
mod kit;
mod refresh;
mod replay;
mod sandbox;
mod transport;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::format::{FormatError, Scenario};

pub use agent_line::resolve_paths;
use confine::CheckedArgs;
pub use replay::{Replayed, replay};
pub use sandbox::Sandbox;
pub use transport::{ProcessTransport, Received, Transport};

/// How long to wait for each expected message unless the header says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an agent that has sent nothing yet may take to send its first message (unless
/// the header allows longer). That wait holds the agent's start-up, which is not what a
/// timeout between messages bounds and grows with the machine's load far more than a
/// reply: the TypeScript echo agent answers `initialize` 0.4 s after it is started on an
/// idle machine and over 4 s on a busy one, and then each request in a hundredth of that.
pub(super) const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a run of repeated messages may pause before it counts as finished, when no
/// expectation follows it.
pub(super) const GRACE: Duration = Duration::from_millis(300);
/// How long the agent may take to end its output once its input is closed.
pub(super) const EOF_WAIT: Duration = Duration::from_secs(3);

/// Why a replay failed: the transcript line, a one-line summary and the details.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The 1-based transcript line (0 when it is not about one line).
    pub line: usize,
    /// What went wrong, in a sentence.
    pub summary: String,
    /// Expected and actual side by side, or other context.
    pub detail: String,
    /// The end of the agent's stderr.
    pub stderr: String,
}

impl Failure {
    pub(super) fn new(line: usize, summary: impl Into<String>, detail: impl Into<String>) -> Failure {
        Failure { line, summary: summary.into(), detail: detail.into(), stderr: String::new() }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "line {}: {}", self.line, self.summary)?;
        if !self.detail.is_empty() {
            writeln!(f, "{}", self.detail.trim_end())?;
        }
        if !self.stderr.is_empty() {
            writeln!(f, "--- the agent's stderr (last lines) ---\n{}", self.stderr.trim_end())?;
        }
        Ok(())
    }
}

impl From<FormatError> for Failure {
    fn from(err: FormatError) -> Failure {
        Failure::new(err.line, format!("the transcript does not parse: {}", err.reason), "")
    }
}

/// Which agent a replay runs against.
#[derive(Debug, Clone)]
pub enum AgentCommand {
    /// `EXE acp --validate ARGS...`, with the scenario's arguments.
    Heron(PathBuf),
    /// A shell command line (`sh -c`), run as it is.
    Shell(String),
    /// A known agent started by its recipe, beside the kit's model server.
    Recipe(std::sync::Arc<crate::recipe::Recipe>),
}

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario's name.
    pub name: String,
    /// How long it took.
    pub elapsed: Duration,
    /// Pass (or skipped), or why not.
    pub result: Result<(), Failure>,
    /// Whether refresh rewrote the file.
    pub rewritten: bool,
    /// Why the scenario did not run to the end: the agent does not advertise what its
    /// header `requires`.
    pub skipped: Option<String>,
    /// What the scenario enforces (its header's `spec`).
    pub spec: Option<String>,
    /// Whether it checks a recommendation: a failure is advice, not a failure.
    pub recommendation: bool,
}

/// Starts the agent for one scenario; `script` is the scenario's own model turns, which a
/// recipe's model server plays too.
fn start(
    agent: &AgentCommand,
    args: &CheckedArgs,
    sandbox: &Sandbox,
    script: &[serde_json::Value],
) -> Result<ProcessTransport, Failure> {
    let command = match agent {
        AgentCommand::Heron(exe) => {
            let mut line = vec!["acp".to_owned()];
            line.extend(args.command_line(&sandbox.paths));
            confine::agent_command(exe, &line, vec![exe.clone()], sandbox, None)
        }
        AgentCommand::Shell(line) => confine::agent_command(
            Path::new("sh"),
            &["-c".to_owned(), line.clone()],
            agent_files::of_line(line),
            sandbox,
            None,
        ),
        AgentCommand::Recipe(recipe) => kit::agent_command(recipe, sandbox, script),
    };
    let command = command.map_err(|e| Failure::new(0, format!("cannot confine the agent: {e}"), ""))?;
    ProcessTransport::spawn(command).map_err(|e| Failure::new(0, format!("cannot start the agent: {e}"), ""))
}

fn run_once(scenario: &Scenario, agent: &AgentCommand, refresh: bool) -> Result<Replayed, Failure> {
    // A transcript is someone else's: what it asks for is checked before anything exists.
    let args = confine::check(scenario)?;
    let sandbox = Sandbox::create(&scenario.header)
        .map_err(|e| Failure::new(0, format!("cannot prepare the sandbox: {e}"), ""))?;
    let mut transport = start(agent, &args, &sandbox, &scenario.header.script)?;
    replay(scenario, &mut transport, &sandbox.paths, refresh)
}

/// Replays the transcript at `path` against `agent`. With `refresh`, a transcript whose
/// expectations no longer hold is rewritten from the agent's messages, then replayed again
/// to prove the new text passes.
pub fn run_file(path: &Path, agent: &AgentCommand, refresh: bool) -> Outcome {
    let started = Instant::now();
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut rewritten = false;
    let mut skipped = None;
    let mut traced = (None, false);
    let result = (|| {
        let scenario = Scenario::load(path)?;
        traced = (scenario.header.spec.clone(), scenario.header.recommendation);
        match run_once(&scenario, agent, refresh)? {
            Replayed::Passed => {}
            Replayed::Skipped(reason) => skipped = Some(reason),
            Replayed::Rewritten(text) => {
                std::fs::write(path, &text)
                    .map_err(|e| Failure::new(0, format!("cannot rewrite {}: {e}", path.display()), ""))?;
                rewritten = true;
                let scenario = Scenario::parse(&scenario.name, &text)?;
                run_once(&scenario, agent, false)?;
            }
        }
        Ok(())
    })();
    let (spec, recommendation) = traced;
    Outcome { name, elapsed: started.elapsed(), result, rewritten, skipped, spec, recommendation }
}

/// Replays the transcript `text` (one built into the binary) against `agent`; there is no
/// file to refresh.
pub fn run_text(name: &str, text: &str, agent: &AgentCommand) -> Outcome {
    let started = Instant::now();
    let mut skipped = None;
    let mut traced = (None, false);
    let result = Scenario::parse(name, text).map_err(Failure::from).and_then(|scenario| {
        traced = (scenario.header.spec.clone(), scenario.header.recommendation);
        if let Replayed::Skipped(reason) = run_once(&scenario, agent, false)? {
            skipped = Some(reason);
        }
        Ok(())
    });
    let (spec, recommendation) = traced;
    Outcome {
        name: name.to_owned(),
        elapsed: started.elapsed(),
        result,
        rewritten: false,
        skipped,
        spec,
        recommendation,
    }
}
