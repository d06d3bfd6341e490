//! The persisted event model of a session: what the store keeps, in order, and
//! `session/load` replays. Live-only updates are [`super::update`]'s.

use std::mem::MaybeUninit;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::working::WorkingContext;
use crate::types::{Location, PlanItem, StopReason, ToolKind, ToolOutput, ToolStatus, UserContent};

/// A durable event: what the store keeps and `session/load` replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The user's prompt.
    UserMessage {
        /// Message id.
        message_id: String,
        /// The content: what the model reads.
        content: Vec<UserContent>,
        /// The custom command line the user typed (`/review src`), when `content` is its
        /// expansion: what the conversation shows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
    },
    /// A finished agent message.
    AgentMessage {
        /// Message id.
        message_id: String,
        /// The text.
        text: String,
    },
    /// Finished reasoning.
    AgentThought {
        /// Message id.
        message_id: String,
        /// The text.
        text: String,
        /// Structured reasoning the server wants back verbatim (OpenRouter's
        /// `reasoning_details`), on the first piece of the thought only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Value>,
    },
    /// A tool call as the model asked for it.
    ToolCall {
        /// The call id (unique in the session).
        call_id: String,
        /// The tool's name.
        name: String,
        /// A human title.
        title: String,
        /// What it does.
        tool_kind: ToolKind,
        /// The arguments as the model wrote them.
        arguments: String,
        /// The arguments parsed, for the editor.
        raw_input: Value,
        /// Files it touches.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<Location>,
    },
    /// How a tool call ended.
    ToolResult {
        /// The call id.
        call_id: String,
        /// `completed` or `failed`.
        status: ToolStatus,
        /// What the user sees.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        output: Vec<ToolOutput>,
        /// The raw result, for the editor.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_output: Option<Value>,
        /// What the model is told.
        for_model: String,
        /// Instruction files of folders below the cwd that this result gave the model (in
        /// `for_model`), the first time it worked there.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        instructions: Vec<String>,
    },
    /// The whole plan, as it now stands.
    Plan {
        /// The entries.
        entries: Vec<PlanItem>,
    },
    /// Heron asked the model to go on toward the session's goal (a user message it wrote).
    GoalContinuation {
        /// Message id.
        message_id: String,
        /// What the model is told.
        text: String,
        /// Which continuation of the goal this is, from 1.
        count: u32,
    },
    /// What the turn's commands changed in the workspace besides Heron's own file changes
    /// (see `session::side_effects`), stored just before the end of a turn that ran one.
    CommandChanges {
        /// The files (absolute), at most `side_effects::MAX_LISTED`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
        /// How many more changed than are listed.
        #[serde(default)]
        more: u64,
        /// Why the workspace was not checked, when it was not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
    },
    /// A turn ended.
    TurnEnded {
        /// Why.
        stop_reason: StopReason,
    },
    /// The conversation was compacted to fit the model's context window. Every event stays
    /// stored; from here on requests send what this says instead of the whole history.
    Compacted(Compaction),
    /// The working context the model was given at a turn's start, before its prompt: at
    /// the session's first turn, and at a later one when any of it changed.
    Context(WorkingContext),
}

/// What a compaction changed in what is sent (see `session::context`). Counts reach back
/// from the event itself, so an unreadable event earlier in the history moves nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// The id of the thought that shows it, live and replayed.
    pub message_id: String,
    /// Whether older tool outputs were clipped, or earlier turns summarized too.
    pub stage: CompactionStage,
    /// How many events just before this one are still sent as they are (the latest
    /// turns); every earlier one is sent as `summary`.
    pub kept: u64,
    /// How many events just before this one have their tool outputs sent whole; outputs of
    /// earlier events are clipped.
    pub unclipped: u64,
    /// How many events from the session's start the summary stands for.
    pub replaced: u64,
    /// How many tool outputs are sent clipped.
    pub clipped: u64,
    /// The summary in effect: written by this compaction, or kept from the one before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The plan as it stood, when the event that set it is among the replaced ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanItem>,
    /// The session's goal, sent with the summary so it is never summarized away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// What the user asked the summary to focus on (`/compact focus on the parser`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Runs of events that are not sent at all, each `[from, to]` counted back from this
    /// event like `kept` (the run is the events from `from` back up to, not including, `to`
    /// back): prompts no request could hold, which the model never read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsent: Vec<[u64; 2]>,
    /// The estimated tokens of the request before compacting.
    pub tokens_before: u64,
    /// The estimated tokens of the request after.
    pub tokens_after: u64,
}

/// How far a compaction went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStage {
    /// Only older tool outputs were clipped.
    Clipped,
    /// Earlier turns were replaced by a summary the model wrote.
    Summarized,
    /// A prompt that did not fit the window even alone (its turn failed before the model
    /// read it) is no longer sent, so it does not fail the prompts after it too.
    Dropped,
}

impl Event {
    /// The event as JSON text, held once however often it is passed on (to the store, the
    /// transcript). Its length is measured first and the text written straight into one
    /// shared buffer of that size: `serde_json::to_string` grows a `String` up to twice the
    /// text, which `Arc<str>::from` then copies again, so each 1 MiB piece of a long
    /// message cost up to three times its size while it was encoded.
    pub fn to_shared_json(&self) -> serde_json::Result<Arc<str>> {
        let mut count = Counted(0);
        serde_json::to_writer(&mut count, self)?;
        let mut shared: Arc<[MaybeUninit<u8>]> = Arc::new_uninit_slice(count.0);
        let Some(buffer) = Arc::get_mut(&mut shared) else {
            return Err(serde_json::Error::io(std::io::Error::other("a new buffer is shared")));
        };
        let mut filling = Filling { buffer, at: 0 };
        serde_json::to_writer(&mut filling, self)?;
        if filling.at != count.0 {
            return Err(serde_json::Error::io(std::io::Error::other("the event encoded to another length")));
        }
        // SAFETY: `filling` wrote every byte of the buffer (its length was checked above).
        let bytes: Arc<[u8]> = unsafe { shared.assume_init() };
        if let Err(err) = std::str::from_utf8(&bytes) {
            return Err(serde_json::Error::io(std::io::Error::other(err)));
        }
        // SAFETY: `str` has the layout of `[u8]`, and the bytes were just checked to be UTF-8.
        Ok(unsafe { Arc::from_raw(Arc::into_raw(bytes) as *const str) })
    }

    /// The store's `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::UserMessage { .. } => "user_message",
            Event::AgentMessage { .. } => "agent_message",
            Event::AgentThought { .. } => "agent_thought",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolResult { .. } => "tool_result",
            Event::Plan { .. } => "plan",
            Event::GoalContinuation { .. } => "goal_continuation",
            Event::CommandChanges { .. } => "command_changes",
            Event::TurnEnded { .. } => "turn_ended",
            Event::Compacted(..) => "compacted",
            Event::Context(..) => "context",
        }
    }
}

/// A writer that only counts what it is given.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer into a buffer of a known size, refusing anything past it.
struct Filling<'a> {
    buffer: &'a mut [MaybeUninit<u8>],
    at: usize,
}

impl std::io::Write for Filling<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let Some(room) = self.buffer.get_mut(self.at..self.at + bytes.len()) else {
            return Err(std::io::Error::other("the event encoded past its measured length"));
        };
        for (slot, byte) in room.iter_mut().zip(bytes) {
            slot.write(*byte);
        }
        self.at += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod shared_json_tests {
    use super::*;

    #[test]
    fn an_event_encoded_into_one_shared_buffer_is_its_json_exactly() {
        for text in ["", "plain", "é漢🦀 \"quoted\" \n\u{7} line", "x".repeat(1 << 20).as_str()] {
            let event = Event::AgentMessage { message_id: "m".into(), text: text.to_owned() };
            let shared = event.to_shared_json().expect("encodes");
            assert_eq!(&*shared, serde_json::to_string(&event).expect("json").as_str());
        }
    }
}
