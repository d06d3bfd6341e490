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
        /// The content.
        content: Vec<UserContent>,
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
        }
    }
}
