//! What happens in a session, in core terms: the events the store keeps (and `session/load`
//! replays) and the live-only updates a turn streams on the way.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Content the user sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserContent {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image saved under `<cwd>/.heron/attachments/`.
    Image {
        /// Its MIME type.
        mime_type: String,
        /// The absolute path of the saved file.
        path: String,
        /// The URI the client gave, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
    /// An embedded text resource.
    Resource {
        /// Its URI.
        uri: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its text.
        text: String,
    },
    /// An embedded binary resource, saved under `<cwd>/.heron/attachments/`.
    Blob {
        /// Its URI.
        uri: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The absolute path of the saved file.
        path: String,
    },
    /// A link to a resource the agent may read.
    Link {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// A title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// A description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its size in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<i64>,
    },
}

/// What a tool call does, for the editor's icons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Changes files.
    Edit,
    /// Deletes files.
    Delete,
    /// Moves files.
    Move,
    /// Searches.
    Search,
    /// Runs a command.
    Execute,
    /// Thinks or plans.
    Think,
    /// Fetches from the network.
    Fetch,
    /// Anything else.
    Other,
}

/// The state of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Waiting for input or approval.
    Pending,
    /// Running.
    InProgress,
    /// Finished.
    Completed,
    /// Failed, refused or cancelled.
    Failed,
}

/// A file a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// Absolute path.
    pub path: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// What a tool call shows the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolOutput {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A file change.
    Diff {
        /// Absolute path.
        path: String,
        /// The old text; `None` for a new file.
        old_text: Option<String>,
        /// The new text.
        new_text: String,
    },
    /// Live output of an editor terminal.
    Terminal {
        /// The editor's terminal id.
        terminal_id: String,
    },
}

/// One plan entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    /// What to do.
    pub content: String,
    /// `high`, `medium` or `low`.
    pub priority: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished.
    EndTurn,
    /// The model hit its token limit.
    MaxTokens,
    /// The turn used up its model requests.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The user cancelled.
    Cancelled,
}

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

/// Context window use and cost, for the editor's meter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Tokens in the context now.
    pub used: u64,
    /// The context window.
    pub size: u64,
    /// Cost so far, with its currency, when the model has a price.
    pub cost: Option<(f64, String)>,
}

/// What a turn streams to the editor, in order.
#[derive(Debug)]
pub enum TurnUpdate {
    /// A durable event, already stored.
    Event(Event),
    /// A piece of an agent message still streaming.
    MessageChunk {
        /// Message id (one per attempt).
        message_id: String,
        /// The text.
        text: String,
    },
    /// A piece of reasoning still streaming.
    ThoughtChunk {
        /// Message id.
        message_id: String,
        /// The text.
        text: String,
    },
    /// A tool call changed state without finishing.
    ToolProgress {
        /// The call id.
        call_id: String,
        /// The new status.
        status: ToolStatus,
        /// Output to show so far (replaces earlier output when not empty).
        output: Vec<ToolOutput>,
    },
    /// Usage changed.
    Usage(UsageReport),
    /// The session's status changed: its sequence number and the new snapshot.
    Status(u64, Box<super::status::Snapshot>),
    /// Answered once everything sent before it has been handed to the editor's connection,
    /// so a request to the editor (a permission question, a terminal release) never
    /// overtakes the updates it refers to.
    Flushed(tokio::sync::oneshot::Sender<()>),
}
