//! The agent `heron run` drives: a child process in a process group of its own (Heron's
//! `heron acp`, or the `--agent` command through `sh -c`), its stdio piped to the client
//! connection and its stderr relayed line by line through the screen. Invariant: when
//! [`AgentProcess::stop`] returns, the whole group is gone and the leader reaped, however
//! the agent behaved; dropping it without `stop` still kills the leader.
//!
//! Being a group of its own keeps the terminal's Ctrl-C away from the agent: the client
//! decides what an interrupt means (`session/cancel` first), and then ends the group.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::RunError;
use super::group::Group;
use super::lines::BoundedLines;
use super::screen::{Paint, Screen, Stream};

/// The longest line of the agent's stderr shown whole.
const MAX_LOG_LINE: usize = 8 * 1024;
/// After stdin closed, how long the agent may take to exit on its own.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM, how long before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);

/// What to start.
#[derive(Debug, Clone)]
pub enum AgentCommand {
    /// Heron's `EXE acp --model MODEL`.
    Heron {
        /// Heron's executable.
        exe: std::path::PathBuf,
        /// The model new sessions use.
        model: String,
    },
    /// A shell command line.
    Shell(String),
}

/// How the agent is asked to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its stdin is closed; it gets time to exit, then SIGTERM, then SIGKILL.
    Gently,
    /// SIGTERM now (its turn was interrupted), then SIGKILL.
    Promptly,
    /// SIGKILL now.
    AtOnce,
}

/// A running agent process.
pub struct AgentProcess {
    child: Child,
    group: Option<Group>,
    relay: tokio::task::JoinHandle<()>,
}

/// A started agent and the ends of its stdio that the connection takes.
pub struct Spawned {
    pub process: AgentProcess,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// Starts the agent in its own process group.
pub fn spawn(command: &AgentCommand, screen: &Screen) -> Result<Spawned, RunError> {
    let (mut cmd, shown) = match command {
        AgentCommand::Heron { exe, model } => {
            let mut cmd = tokio::process::Command::new(exe);
            cmd.arg("acp").arg("--model").arg(model);
            (cmd, "heron acp".to_owned())
        }
        AgentCommand::Shell(line) => {
            let mut cmd = tokio::process::Command::new("sh");
            cmd.arg("-c").arg(line);
            (cmd, line.clone())
        }
    };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| RunError::Agent(format!("cannot start `{shown}`: {e}")))?;
    let group = Group::led_by(child.id());
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(RunError::Agent("the agent's stdio is not piped".into()));
    };
    let relay = tokio::spawn(relay(stderr, screen.clone()));
    Ok(Spawned { process: AgentProcess { child, group, relay }, stdin, stdout })
}

/// Shows the agent's stderr, a bounded line at a time, so that its log never lands in the
/// middle of a line of the turn.
async fn relay(mut stderr: tokio::process::ChildStderr, screen: Screen) {
    let mut lines = BoundedLines::new(MAX_LOG_LINE);
    let mut buffer = vec![0u8; 8 * 1024];
    while let Ok(n) = stderr.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        for line in lines.push(&buffer[..n]) {
            screen.line(Stream::Err, Paint::Dim, &line);
        }
    }
    if let Some(line) = lines.finish() {
        screen.line(Stream::Err, Paint::Dim, &line);
    }
}

impl AgentProcess {
    /// Ends the agent as `how` says and reaps it; the connection must be closed first, so
    /// that its stdin is. Returns once the group is gone.
    pub async fn stop(mut self, how: Ending) {
        if let Some(group) = &self.group {
            let exited = match how {
                Ending::Gently => group.exited_within(EXIT_GRACE).await,
                Ending::Promptly | Ending::AtOnce => false,
            };
            if !exited && how != Ending::AtOnce {
                group.signal(libc::SIGTERM);
                if !group.exited_within(TERM_GRACE).await {
                    tracing::info!("the agent ignored SIGTERM; killing its process group");
                }
            }
            // Whatever is left of the group (the leader included) goes now, before the
            // leader is reaped and its id could be reused.
            group.sweep();
        } else {
            let _ = self.child.start_kill();
        }
        let _ = self.child.wait().await;
        // The stderr pipe closes with the group; a process that left the group could keep
        // it open, so the relay gets a moment and is then dropped.
        let abort = self.relay.abort_handle();
        if tokio::time::timeout(Duration::from_millis(200), &mut self.relay).await.is_err() {
            abort.abort();
        }
    }
}
