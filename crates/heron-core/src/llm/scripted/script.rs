//! The script format of the scripted provider: JSONL, one model turn per line, blank and
//! `#` lines ignored. Parsing is strict (unknown fields are errors) and every error names
//! its line, because scripts are written by hand. The format is described in
//! `docs/scripted-provider.md`.

use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::llm::{FinishReason, Usage};

/// A parsed script: the turns the scripted model plays, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    turns: Vec<Turn>,
}

/// One model turn: what it streams, then why it stops.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// What the turn does, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Why the turn stops; by default `refusal` after a `refuse` step, `tool_calls` when
    /// the turn made tool calls, else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishReason>,
}

/// One step of a turn. On the wire, an object with exactly one key.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Reasoning, streamed as deltas.
    Thought(Deltas),
    /// Visible text, streamed as deltas.
    Text(Deltas),
    /// A tool call.
    ToolCall(ScriptedCall),
    /// Token usage to report.
    Usage(ScriptedUsage),
    /// A pause, in milliseconds (cancellable).
    DelayMs(u64),
    /// Fails the stream here with this message.
    Error(String),
    /// Marks the turn as refused: its finish defaults to `refusal`.
    Refuse(bool),
    /// Says, as streamed text, what working context the request gave the model: its
    /// working directory and the instruction files it was given (`AGENTS.md` and the like).
    Context(bool),
}

/// Streamed text: a string split into word-sized deltas, or the exact deltas (what a
/// recording keeps, so the editor sees the chunks the real model sent).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Deltas {
    /// Split on word boundaries.
    Words(String),
    /// Sent as these deltas, one by one.
    Exact(Vec<String>),
}

impl Deltas {
    /// The deltas to stream, in order.
    pub fn pieces(&self) -> Vec<&str> {
        match self {
            Deltas::Words(text) => word_deltas(text),
            Deltas::Exact(pieces) => pieces.iter().map(String::as_str).collect(),
        }
    }
}

impl From<&str> for Deltas {
    fn from(text: &str) -> Self {
        Deltas::Words(text.to_owned())
    }
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments: a JSON value, sent as its JSON text, or a string, sent as it is
    /// (which lets a script send arguments that are not valid JSON). `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The call's id; `call_<turn>_<n>` when absent (both counted from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl ScriptedCall {
    /// The arguments as the text a model would have produced.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            None => "{}".to_owned(),
            Some(Value::String(raw)) => raw.clone(),
            Some(value) => value.to_string(),
        }
    }
}

/// Scripted token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    /// Input tokens.
    #[serde(default)]
    pub input: u64,
    /// Output tokens.
    #[serde(default)]
    pub output: u64,
    /// Cached input tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning: u64,
    /// Input tokens written to a cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl From<Usage> for ScriptedUsage {
    fn from(usage: Usage) -> Self {
        ScriptedUsage {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cached: usage.cached_input_tokens,
            reasoning: usage.reasoning_tokens,
            cache_write: usage.cache_write_input_tokens,
        }
    }
}

impl From<ScriptedUsage> for Usage {
    fn from(usage: ScriptedUsage) -> Self {
        Usage {
            input_tokens: usage.input,
            output_tokens: usage.output,
            cached_input_tokens: usage.cached,
            reasoning_tokens: usage.reasoning,
            cache_write_input_tokens: usage.cache_write,
        }
    }
}

/// Why a script could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read the script {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A line is not a valid turn.
    #[error("script line {line}: {reason}")]
    Parse {
        /// The line, counted from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// The largest script file read, in bytes: a script is written by hand or by a test, and
/// every turn of it is held for the session.
pub(super) const MAX_SCRIPT_BYTES: u64 = 16 * 1024 * 1024;

impl Script {
    /// Parses JSONL text: one turn per line; blank lines and lines starting with `#` are
    /// skipped.
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        let mut turns = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let turn = serde_json::from_str(trimmed)
                .map_err(|error| ScriptError::Parse { line: index + 1, reason: error.to_string() })?;
            turns.push(turn);
        }
        Ok(Self { turns })
    }

    /// Reads and parses a script file of at most [`MAX_SCRIPT_BYTES`].
    pub fn from_path(path: &Path) -> Result<Self, ScriptError> {
        let text = crate::whole_file::read_text(path, MAX_SCRIPT_BYTES).map_err(|error| {
            ScriptError::Read { path: path.display().to_string(), reason: error.to_string() }
        })?;
        Self::parse(&text)
    }

    /// The script of turns given in code.
    pub fn from_turns(turns: Vec<Turn>) -> Self {
        Self { turns }
    }

    /// The turns, in order.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }
}

impl FromStr for Script {
    type Err = ScriptError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Splits text into word-sized deltas: each piece is a word with the whitespace after it
/// (leading whitespace stays with the first piece), so the pieces concatenate to `text`.
pub fn word_deltas(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut previous_was_space = false;
    for (at, ch) in text.char_indices() {
        let is_space = ch.is_whitespace();
        if previous_was_space && !is_space && at > start && !text[start..at].trim().is_empty() {
            pieces.push(&text[start..at]);
            start = at;
        }
        previous_was_space = is_space;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_deltas_keep_whitespace_with_the_word_before_it() {
        assert_eq!(word_deltas("  Hello,  world!\nBye "), ["  Hello,  ", "world!\n", "Bye "]);
        assert!(word_deltas("").is_empty());
    }

    #[test]
    fn a_step_with_two_keys_is_refused() {
        let refused = Script::parse(r#"{"steps": [{"text": "a", "thought": "b"}]}"#);
        assert!(matches!(refused, Err(ScriptError::Parse { line: 1, .. })), "{refused:?}");
    }

    #[test]
    fn an_unknown_turn_field_is_refused() {
        let refused = Script::parse("\n{\"steps\": [], \"finsh\": \"stop\"}");
        assert!(matches!(refused, Err(ScriptError::Parse { line: 2, .. })), "{refused:?}");
    }

    #[test]
    fn a_script_file_past_its_bound_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("script.ndjson");
        std::fs::File::create(&path).expect("create").set_len(MAX_SCRIPT_BYTES + 1).expect("grow");
        let Err(ScriptError::Read { reason, .. }) = Script::from_path(&path) else { panic!("refused") };
        assert!(reason.contains(&format!("larger than {MAX_SCRIPT_BYTES} bytes")), "{reason}");
    }
}
