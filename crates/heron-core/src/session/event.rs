//! The persisted event model of a session: what the store keeps, in order, and
//! `session/load` replays. Live-only updates are [`super::update`]'s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// A turn ended.
    TurnEnded {
        /// Why.
        stop_reason: StopReason,
    },
    /// The conversation was compacted to fit the model's context window. Every event stays
    /// stored; from here on requests send what this says instead of the whole history.
    Compacted(Compaction),
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
            Event::TurnEnded { .. } => "turn_ended",
            Event::Compacted(..) => "compacted",
        }
    }
}
