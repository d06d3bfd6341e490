//! `/undo` and `/rewind N` as a turn: the files Heron's tools changed after turn N go back
//! as they were, one `restore_file` call each, through the same gate as any file change
//! (the user sees each restore's diff and approves it; a file someone changed since is
//! asked about in every posture). The turn's message says what went back, what did not,
//! and what commands did that no rewind undoes; it is stored, so the model reads it with
//! the conversation, and a replay shows the calls as they ran.

use std::sync::Arc;

use super::{Asking, Carried, Turn, TurnError};
use crate::llm::ToolCallRequest;
use crate::session::checkpoints::{self, RewindPlan, Target};
use crate::session::event::Event;
use crate::session::update::TurnUpdate;
use crate::tools::restore_file::{NAME, RestoreFile, current_text};
use crate::types::{StopReason, ToolStatus};

impl Turn {
    /// Rewinds the files to `target`; says how it ended.
    pub(in crate::session) async fn rewind(
        mut self,
        target: Target,
    ) -> (Result<StopReason, TurnError>, Carried) {
        let outcome = match self.rewind_to(target).await {
            _ if self.cancel().is_cancelled() => Ok(Some(StopReason::Cancelled)),
            other => other,
        };
        // A rewind that could not start is no turn: nothing of it is stored.
        if let Ok(Some(stop_reason)) = outcome {
            let _ = self.record(Event::TurnEnded { stop_reason }).await;
        }
        let outcome = outcome.map(|ended| ended.unwrap_or(StopReason::EndTurn));
        if let Err(err) = self.store_unstored().await {
            tracing::warn!(session = %self.shared.session_id, %err, "cannot store the rewind's message");
        }
        (outcome, self.carried)
    }

    /// The rewind; `None` when it could not start (said, not stored).
    async fn rewind_to(&mut self, target: Target) -> Result<Option<StopReason>, TurnError> {
        let plan = match checkpoints::plan(&self.carried.history, target) {
            Ok(plan) => plan,
            Err(why) => {
                self.live(TurnUpdate::MessageChunk {
                    message_id: uuid::Uuid::new_v4().to_string(),
                    text: format!("Nothing was rewound: {why}."),
                    held: Default::default(),
                });
                return Ok(None);
            }
        };
        let calls = self.restore_calls(&plan).await;
        let first = self.carried.history.len();
        if !calls.is_empty() {
            let mut tools = (*self.policy.tools).clone();
            tools.add(Arc::new(RestoreFile));
            self.policy.tools = Arc::new(tools);
            let asking = Asking::of(&self.policy.settings, None, None);
            self.run_tools(calls, &Default::default(), &asking).await?;
        }
        let summary = summary(&plan, &self.carried.history[first..]);
        self.say(&summary).await?;
        Ok(Some(StopReason::EndTurn))
    }

    /// One `restore_file` call per file that goes back, each saying whether the file
    /// changed since Heron's last write of it (then it is asked about whatever the posture).
    async fn restore_calls(&self, plan: &RewindPlan) -> Vec<ToolCallRequest> {
        let mut calls = Vec::new();
        for (n, file) in plan.files.iter().enumerate() {
            let path = std::path::Path::new(&file.path);
            let now = current_text(&self.io.env, path).await;
            let changed_since = now.as_deref() != Some(file.after.as_str());
            let arguments = serde_json::json!({
                "path": file.path,
                "content": file.before,
                "turn": plan.to,
                "changed_since": changed_since,
            });
            calls.push(ToolCallRequest {
                // Unique in the session: no other rewind starts at this point of the history.
                id: format!("restore_{}_{n}", self.carried.history.len()),
                name: NAME.to_owned(),
                arguments: arguments.to_string(),
            });
        }
        calls
    }

    /// Shows and stores `text` as the turn's message.
    async fn say(&mut self, text: &str) -> Result<(), TurnError> {
        let message_id = uuid::Uuid::new_v4().to_string();
        self.live(TurnUpdate::MessageChunk {
            message_id: message_id.clone(),
            text: text.to_owned(),
            held: Default::default(),
        });
        self.record_with_next(Event::AgentMessage { message_id, text: text.to_owned() }).await
    }
}

/// What the rewind did, for the user and for the model: the files put back, those left as
/// they are (refused, failed, cancelled) and those that could not be, and the commands.
fn summary(plan: &RewindPlan, events: &[Event]) -> String {
    let (mut restored, mut kept) = (Vec::new(), Vec::new());
    for event in events {
        if let Event::ToolResult { status, for_model, .. } = event {
            match status {
                ToolStatus::Completed => restored.push(for_model.clone()),
                _ => kept.push(for_model.lines().next().unwrap_or_default().to_owned()),
            }
        }
    }
    let mut text = if plan.to == 0 {
        "Rewound the files to before the session's first turn".to_owned()
    } else {
        format!("Rewound the files to the end of turn {}", plan.to)
    };
    text.push_str(&format!(" (of {}).", plan.turns));
    if plan.files.is_empty() {
        text.push_str(" No file Heron changed after it needed to go back.");
    }
    for line in restored {
        text.push_str(&format!("\n- {line}"));
    }
    for line in kept {
        text.push_str(&format!("\n- Not restored: {line}"));
    }
    for (path, why) in &plan.lost {
        text.push_str(&format!("\n- Cannot be restored: {path}: {why}"));
    }
    if !plan.commands.is_empty() {
        text.push_str("\nCommands ran after that turn, and what they changed is not undone:");
        for title in &plan.commands {
            text.push_str(&format!("\n- {title}"));
        }
    }
    for path in &plan.command_files {
        text.push_str(&format!("\n- Changed by a command, cannot undo: {path}"));
    }
    if plan.command_files_more > 0 {
        text.push_str(&format!(
            "\n- {} more files changed by commands, cannot undo",
            plan.command_files_more
        ));
    }
    for why in &plan.unchecked {
        text.push_str(&format!("\n- The files commands changed were not checked: {why}"));
    }
    text.push_str(
        "\nThe conversation is kept as it was; to go on from the earlier conversation too, fork the session.",
    );
    text
}
