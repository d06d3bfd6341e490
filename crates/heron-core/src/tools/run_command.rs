//! `run_command`: runs a shell line in the workspace, in an editor terminal when the editor
//! offers them, locally otherwise. Invariants: the command never outlives its timeout or a
//! cancel, and an editor terminal is always released, last, even when the call's future is
//! dropped.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::editor::{EditorIo, ExitStatus, TerminalCommand};
use super::local_process::{self, Ending};
use super::{Outcome, Prepared, Tool, ToolEnv, call};
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{ToolKind, ToolOutput, ToolStatus};

const NAME: &str = "run_command";

/// The timeout when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most output bytes kept.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// The shell command line, run with `sh -c`.
    pub command: String,
    /// The directory to run it in, inside the workspace (default: the working directory).
    #[serde(default)]
    pub cwd: Option<String>,
    /// How long it may run, in milliseconds (default 120000; at most the user's limit,
    /// 600000 unless configured); it is killed after that.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The `run_command` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCommand;

/// A parsed, checked call.
#[derive(Clone)]
struct Checked {
    command: String,
    cwd: PathBuf,
    timeout: Duration,
}

fn check(args: RunCommandArgs, env: &ToolEnv) -> Result<Checked, String> {
    if args.command.trim().is_empty() {
        return Err("command must not be empty".to_owned());
    }
    let longest = env.deadlines.command;
    let timeout = match args.timeout_ms {
        Some(0) => return Err("timeout_ms must be at least 1".to_owned()),
        Some(ms) => Duration::from_millis(ms).min(longest),
        None => DEFAULT_TIMEOUT.min(longest),
    };
    let cwd = call::resolve(env, args.cwd.as_deref().unwrap_or("."));
    if let Some(refusal) = env.roots.protected().refusal(&cwd, args.cwd.as_deref().unwrap_or(".")) {
        return Err(refusal);
    }
    if !env.roots.is_inside(&cwd) {
        return Err(format!(
            "cwd {} is outside the workspace roots; commands run only inside them",
            cwd.display()
        ));
    }
    Ok(Checked { command: args.command, cwd, timeout })
}

impl Tool for RunCommand {
    fn spec(&self) -> ToolSpec {
        call::spec::<RunCommandArgs>(
            NAME,
            "Run a shell command (sh -c) in the workspace and return its exit code and output (stdout and \
             stderr together). The command is killed, with everything it started, when it times out.",
        )
    }

    fn pace(&self) -> crate::tools::deadline::Pace {
        crate::tools::deadline::Pace::Command
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (RunCommandArgs, _) = call::parse(NAME, arguments)?;
        let checked = check(args, env)?;
        // The whole command line and where it runs: what the user approves is what runs.
        let shown = format!("{}\n(in {})", checked.command, checked.cwd.display());
        Ok(Prepared {
            title: call::scrub_text(env, &format!("Run {}", call::one_line(&checked.command, 80))),
            kind: ToolKind::Execute,
            locations: vec![call::folder(&checked.cwd)],
            raw_input,
            outside_roots: false,
            always_ask: None,
            content: vec![ToolOutput::Text { text: call::scrub_text(env, &shown) }],
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        Box::pin(async move {
            let checked = call::reparse(NAME, &prepared.raw_input)
                .and_then(|args| check(args, &env).map_err(Outcome::failed));
            let outcome = match checked {
                Err(failed) => failed,
                Ok(checked) if env.editor.has_terminals() => match in_editor(&env, &checked).await {
                    Routed::Ran(outcome) => outcome,
                    Routed::NoLauncher(why) => {
                        let mut outcome = locally(&env, checked).await;
                        outcome.for_model = format!("[{why}]\n{}", outcome.for_model);
                        outcome.output = vec![ToolOutput::Text { text: outcome.for_model.clone() }];
                        outcome
                    }
                },
                Ok(checked) => locally(&env, checked).await,
            };
            call::scrub(&env, outcome)
        })
    }
}

async fn locally(env: &ToolEnv, checked: Checked) -> Outcome {
    let limits = local_process::Limits {
        cwd: &checked.cwd,
        timeout: checked.timeout,
        cap: OUTPUT_CAP,
        secrets: &env.secrets,
        progress: &env.progress,
    };
    let finished = match local_process::run(&checked.command, limits, &env.cancel, &env.sandbox).await {
        Ok(finished) => finished,
        Err(message) => return Outcome::failed(message),
    };
    let mut outcome = report(&finished.ending, &finished.output, checked.timeout);
    outcome.output = vec![ToolOutput::Text { text: outcome.for_model.clone() }];
    outcome
}

/// How a command sent to the editor's terminal went.
enum Routed {
    /// It ran there (or failed there); the outcome says how.
    Ran(Outcome),
    /// The editor could not run Heron's launcher (it may run commands on another machine),
    /// so nothing ran: run it here instead, saying why.
    NoLauncher(String),
}

/// Runs the command in an editor terminal, through Heron's launcher when there is one, so
/// the walls of a local command stand there too. The terminal is driven by a task of its
/// own, so that a dropped call still kills and releases it: dropping the guard cancels
/// `stop`.
async fn in_editor(env: &ToolEnv, checked: &Checked) -> Routed {
    let stop = env.cancel.child_token();
    let _guard = stop.clone().drop_guard();
    let launcher = crate::sandbox::launcher::get().filter(|_| !env.editor.confines_terminals());
    let (program, args) = match launcher {
        Some(launcher) => crate::sandbox::launcher::wrap(launcher, &env.sandbox, &checked.command),
        None => ("sh".to_owned(), vec!["-c".to_owned(), checked.command.clone()]),
    };
    let command = TerminalCommand {
        command: program,
        args,
        cwd: checked.cwd.display().to_string(),
        output_byte_limit: OUTPUT_CAP as u64,
    };
    let task = tokio::spawn(drive_terminal(
        Arc::clone(&env.editor),
        (command, checked.clone(), launcher.is_some()),
        stop,
        env.progress.clone(),
        Arc::clone(&env.secrets),
    ));
    task.await.unwrap_or_else(|_| Routed::Ran(Outcome::failed("the terminal task stopped unexpectedly")))
}

/// The exit code of a program a shell could not find or run (`sh: heron: not found`).
const NOT_RUN: u32 = 127;

/// How waiting for an editor terminal ended.
enum Waited {
    Exited(ExitStatus),
    Failed(String),
    TimedOut,
    Cancelled,
}

async fn drive_terminal(
    editor: Arc<dyn EditorIo>,
    (command, checked, launched): (TerminalCommand, Checked, bool),
    stop: CancellationToken,
    progress: crate::tools::Progress,
    secrets: Arc<Vec<crate::secret::Secret>>,
) -> Routed {
    let launcher = command.command.clone();
    let id = match editor.terminal_create(command).await {
        Ok(id) => id,
        Err(e) if launched => {
            return Routed::NoLauncher(format!(
                "the editor could not start Heron's sandbox launcher ({e}), so the command ran \
                 in Heron's own process, behind the same walls"
            ));
        }
        Err(e) => {
            return Routed::Ran(Outcome::failed(format!("the editor could not start the command: {e}")));
        }
    };
    // The editor shows the live output in the tool call while the command runs.
    progress.show(vec![ToolOutput::Terminal { terminal_id: id.clone() }]);
    let waited = tokio::select! {
        exit = editor.terminal_wait_for_exit(&id) => match exit {
            Ok(status) => Waited::Exited(status),
            Err(e) => Waited::Failed(e.to_string()),
        },
        () = tokio::time::sleep(checked.timeout) => Waited::TimedOut,
        () = stop.cancelled() => Waited::Cancelled,
    };
    if !matches!(waited, Waited::Exited(_))
        && let Err(e) = editor.terminal_kill(&id).await
    {
        tracing::debug!(terminal = %id, error = %e, "killing the editor terminal failed");
    }
    let (output, truncated) = match editor.terminal_output(&id).await {
        Ok(out) => held_to_limit(out.output, out.truncated),
        Err(e) => (format!("[the editor could not give the output: {e}]"), false),
    };
    // A launcher the editor's shell could not find ran nothing: the editor runs commands
    // elsewhere (a remote machine, a container) where this path does not exist.
    if launched
        && matches!(waited, Waited::Exited(ExitStatus { code: Some(NOT_RUN), .. }))
        && output.contains(&launcher)
    {
        release(editor.as_ref(), &id).await;
        return Routed::NoLauncher(
            "the editor's terminal could not run Heron's sandbox launcher (it may run commands on \
             another machine), so the command ran in Heron's own process, behind the same walls"
                .to_owned(),
        );
    }
    // The editor kept the end; where it cut, the end of a key may start the text.
    let output = if truncated {
        let kept = crate::secret::drop_cut_start(&output, secrets.iter());
        format!("[truncated: the start of the output was cut]\n{kept}")
    } else {
        output
    };
    let ending = match waited {
        Waited::Exited(ExitStatus { code: Some(code), .. }) => {
            Ok(Ending::Exited(i32::try_from(code).unwrap_or(-1)))
        }
        Waited::Exited(ExitStatus { signal: Some(signal), .. }) => Ok(Ending::Signalled(signal)),
        Waited::Exited(_) => Ok(Ending::Exited(-1)),
        Waited::TimedOut => Ok(Ending::TimedOut),
        Waited::Cancelled => Ok(Ending::Cancelled),
        Waited::Failed(message) => Err(message),
    };
    let mut outcome = match ending {
        Ok(ending) => report(&ending, &output, checked.timeout),
        Err(message) => Outcome::failed(format!("waiting for the command failed: {message}\n{output}")),
    };
    // The final update keeps the terminal, which shows the output, and adds what ran and
    // how it ended (not the output again); the terminal is released only once that update
    // has reached the editor.
    let ended = outcome.for_model.lines().next().unwrap_or_default();
    let summary = format!("$ {}\n{ended}", checked.command);
    outcome.output =
        vec![ToolOutput::Terminal { terminal_id: id.clone() }, ToolOutput::Text { text: summary }];
    let releasing = Arc::clone(&editor);
    progress.after_result(Box::pin(async move { release(releasing.as_ref(), &id).await })).await;
    Routed::Ran(outcome)
}

async fn release(editor: &dyn EditorIo, id: &str) {
    if let Err(e) = editor.terminal_release(id).await {
        tracing::debug!(terminal = %id, error = %e, "releasing the editor terminal failed");
    }
}

/// What the model and the editor are told about a finished command.
fn report(ending: &Ending, output: &str, timeout: Duration) -> Outcome {
    let (status_line, status, raw) = match ending {
        Ending::Exited(code) => (
            format!("Exit code: {code}"),
            if *code == 0 { ToolStatus::Completed } else { ToolStatus::Failed },
            json!({ "exitCode": code }),
        ),
        Ending::Signalled(signal) => {
            (format!("Killed by {signal}"), ToolStatus::Failed, json!({ "signal": signal }))
        }
        Ending::TimedOut => (
            format!("Timed out after {} ms; the command was killed", timeout.as_millis()),
            ToolStatus::Failed,
            json!({ "timedOut": true }),
        ),
        Ending::Cancelled => {
            ("Cancelled; the command was killed".to_owned(), ToolStatus::Failed, json!({ "cancelled": true }))
        }
    };
    let body = if output.trim().is_empty() { "(no output)" } else { output.trim_end() };
    Outcome {
        status,
        output: Vec::new(),
        raw_output: Some(raw),
        for_model: format!("{status_line}\nOutput:\n{body}"),
        plan: None,
    }
}

/// The terminal's output held to the `outputByteLimit` Heron asked for ([`OUTPUT_CAP`]):
/// an editor that sends more is cut the way the limit says an editor should cut, keeping
/// the end, at a character boundary, and the output marked truncated.
fn held_to_limit(mut output: String, truncated: bool) -> (String, bool) {
    if output.len() <= OUTPUT_CAP {
        return (output, truncated);
    }
    let mut start = output.len() - OUTPUT_CAP;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    output.drain(..start);
    (output, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_editor_that_sends_more_output_than_asked_is_held_to_the_limit() {
        let sent = format!("{}é{}", "a".repeat(10), "b".repeat(OUTPUT_CAP));
        let (kept, truncated) = held_to_limit(sent.clone(), false);
        assert!(truncated, "marked truncated");
        assert!(kept.len() <= OUTPUT_CAP && sent.ends_with(&kept), "the end is kept");
        assert_eq!(held_to_limit("short".into(), false), ("short".to_owned(), false));
    }
}
