//! The one place a tool call is run under its deadline (one per kind of tool, [`Pace`]; the
//! deadlines themselves are settings, [`crate::config::Deadlines`]). Invariant: no call
//! outlives its deadline or the turn's cancel; past either it fails with a message the model
//! reads, and its own cancel token fires, so work it left on other threads (a directory
//! walk, an editor request) stops too.

use std::time::Duration;

use super::{Outcome, Prepared, Tool, ToolEnv};
// Named here too, where a tool says what it waits on (`Tool::pace`).
pub use crate::config::{Deadlines, Pace};

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
