//! The core's own vocabulary, below both the session and the tools: what the user sent,
//! what a tool call is and shows, plan entries, why a turn ended and what it cost. The
//! adapter maps these to the protocol's shapes; nothing here knows that protocol.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// A prompt as received, before attachments are saved.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptInput {
    /// Content kept as it is.
    Content(UserContent),
    /// Binary data to save under `<cwd>/.heron/attachments/` first.
    Attachment {
        /// Image or blob.
        image: bool,
        /// The MIME type.
        mime_type: String,
        /// The decoded bytes.
        data: Vec<u8>,
        /// The URI the client gave, if any.
        uri: Option<String>,
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
    /// Failed or refused.
    Failed,
    /// Stopped by a cancel (the call's own or its turn's) before it finished. A protocol
    /// with no such status shows it as failed.
    Cancelled,
}

/// A file (or folder) a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// Absolute path.
    pub path: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A folder (a listing's, a search's, a command's cwd): it scopes what the user allows,
    /// but an editor opens locations as files, so it is not shown as one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub folder: bool,
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
    /// How much it matters.
    pub priority: PlanPriority,
    /// Where it stands.
    pub status: PlanStatus,
}

/// The state of a plan entry: `pending` (not started), `in_progress` (being worked on;
/// keep one at a time) or `completed`. The variants carry no doc comments of their own so
/// that the schema the model sees lists them as a plain `enum`, which models follow best.
#[allow(missing_docs, reason = "variant docs would turn the schema's plain enum into a oneOf")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// How much a plan entry matters: `high`, `medium` (the default) or `low`. No variant doc
/// comments, for the same reason as [`PlanStatus`].
#[allow(missing_docs, reason = "variant docs would turn the schema's plain enum into a oneOf")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    #[default]
    Medium,
    Low,
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

impl StopReason {
    /// The name it is stored and shown under (`end_turn`, `max_tokens`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// Context window use and cost, for the editor's meter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Tokens in the context now.
    pub used: u64,
    /// The context window, when the model's is known (`context_window`). Without it the
    /// report still carries the tokens and the cost; only the meter has nothing to fill.
    pub size: Option<u64>,
    /// Cost so far, with its currency, when the model has a price.
    pub cost: Option<(f64, String)>,
    /// Tokens the session's requests took so far, by kind.
    #[serde(default)]
    pub tokens: TokenTotals,
    /// Whether every request so far had a price (false: `cost` leaves some out).
    #[serde(default = "every_request_priced")]
    pub cost_complete: bool,
}

/// Reports stored before Heron tracked unpriced requests priced all they counted.
fn every_request_priced() -> bool {
    true
}

/// Token counts of one model request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached and cache-written ones included (Anthropic counts them apart;
    /// its provider adds them in).
    pub input_tokens: u64,
    /// Completion tokens (reasoning included).
    pub output_tokens: u64,
    /// Prompt tokens served from a cache, when reported.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to a cache (Anthropic bills them above plain input).
    #[serde(default)]
    pub cache_write_input_tokens: u64,
    /// Reasoning tokens, when reported.
    pub reasoning_tokens: u64,
}

/// Tokens a session's model requests took so far, by kind: what shows whether the
/// provider's prompt cache is hitting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenTotals {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Completion tokens, reasoning included.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cached_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
    /// Reasoning tokens.
    pub thought: u64,
}

impl TokenTotals {
    /// These totals with one request's `usage` added.
    pub fn plus(self, usage: &Usage) -> Self {
        TokenTotals {
            input: self.input.saturating_add(usage.input_tokens),
            output: self.output.saturating_add(usage.output_tokens),
            cached_read: self.cached_read.saturating_add(usage.cached_input_tokens),
            cache_write: self.cache_write.saturating_add(usage.cache_write_input_tokens),
            thought: self.thought.saturating_add(usage.reasoning_tokens),
        }
    }
}

/// How a turn that ended on its own (`end_turn`) ended, for the editor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// It did what it set out to.
    Completed,
    /// It changed files it did not verify afterwards (`delivery` preset): the user should
    /// check before relying on it.
    Paused {
        /// Why, in a sentence.
        reason: String,
    },
}

/// Something the user should know that no tool call or message carries: an MCP server
/// that failed, a model request being retried, commands running without the OS sandbox.
/// Live information, not history: it is shown once and never replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// How serious it is.
    pub severity: NoticeSeverity,
    /// A plain-text sentence that stands alone.
    pub title: String,
    /// More detail or what to do, when there is any.
    pub description: Option<String>,
}

/// How serious a [`Notice`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeSeverity {
    /// For information.
    Info,
    /// Something works less well than it should.
    Warning,
    /// Something failed.
    Error,
}
