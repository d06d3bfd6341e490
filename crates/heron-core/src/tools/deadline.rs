//! How long one tool call may take: a deadline per kind of tool (from `config.toml`), and
//! the one place a call is run under it. Invariant: no call outlives its deadline or the
//! turn's cancel; past either it fails with a message the model reads, and its own cancel
//! token fires, so work it left on other threads (a directory walk, an editor request)
//! stops too.

use std::time::Duration;

use super::{Outcome, Prepared, Tool, ToolEnv};

/// What a tool waits on, which decides its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Files and the session's own state: seconds (`tool_timeout_s`).
    Quick,
    /// A shell command, which kills itself at its own timeout (at most
    /// `command_timeout_s`); the deadline is a backstop a little past that.
    Command,
    /// Another program's tool (MCP): `mcp_timeout_s`.
    External,
    /// The user's answer to a question: no deadline; the user or the editor cancels.
    Person,
}

/// The deadlines of a session's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Built-in tools over files and the session (default 30 s).
    pub quick: Duration,
    /// The longest a command may run (default 600 s); a command that asks for no timeout
    /// gets the smaller of 120 s and this.
    pub command: Duration,
    /// MCP tool calls (default 300 s).
    pub external: Duration,
}

/// How long past its own timeout a command's call may take to kill it and collect the rest
/// of its output (or to have the editor kill and release its terminal).
pub const COMMAND_GRACE: Duration = Duration::from_secs(15);

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            quick: Duration::from_secs(30),
            command: Duration::from_secs(600),
            external: Duration::from_secs(300),
        }
    }
}

impl Deadlines {
    /// The deadline of a call at `pace`; `None` for a wait only a cancel ends.
    pub fn of(&self, pace: Pace) -> Option<Duration> {
        match pace {
            Pace::Quick => Some(self.quick),
            Pace::Command => Some(self.command + COMMAND_GRACE),
            Pace::External => Some(self.external),
            Pace::Person => None,
        }
    }

    /// The setting a user raises when `pace` runs out.
    fn setting(pace: Pace) -> &'static str {
        match pace {
            Pace::Quick => "tool_timeout_s",
            Pace::Command => "command_timeout_s",
            Pace::External => "mcp_timeout_s",
            Pace::Person => "",
        }
    }
}

/// Runs `prepared` on `tool` until it finishes, its deadline passes or the turn is
/// cancelled. The call gets a cancel token of its own, a child of the turn's, fired when it
/// is given up on.
pub async fn run_within(tool: &dyn Tool, prepared: Prepared, env: ToolEnv) -> Outcome {
    let turn = env.cancel.clone();
    let call = turn.child_token();
    // Whatever ends this function, work the call left behind is told to stop.
    let _stop = call.clone().drop_guard();
    let pace = tool.pace();
    let deadline = env.deadlines.of(pace);
    let name = tool.spec().name;
    let running = tool.run(prepared, ToolEnv { cancel: call, ..env });
    let expired = async {
        match deadline {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        outcome = running => outcome,
        () = turn.cancelled() => Outcome::failed("The turn was cancelled while this tool ran."),
        () = expired => Outcome::failed(expired_message(&name, pace, deadline.unwrap_or_default())),
    }
}

fn expired_message(name: &str, pace: Pace, after: Duration) -> String {
    let setting = Deadlines::setting(pace);
    let mut text = format!("`{name}` did not finish within {} s and was stopped", after.as_secs());
    if pace == Pace::Quick {
        // A write is atomic: the file is the old one or the new one, never a mix.
        text.push_str("; a file it was writing is either unchanged or fully written");
    }
    text.push_str(&format!(" (`{setting}` in config.toml sets the limit)."));
    text
}
