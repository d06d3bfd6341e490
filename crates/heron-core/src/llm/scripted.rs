//! The scripted provider: a deterministic, offline model that plays a [`Script`]. By
//! default it is stateless: the turn it plays is the number of assistant messages in the
//! request, so the same conversation always gets the same answer. A recorded session plays
//! its turns in request order instead (`playback = "sequential"`). Used by tests, demos,
//! recordings and editor developers testing their clients; the format is in
//! `docs/scripted-provider.md`.

mod script;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use self::script::{Deltas, Script, ScriptError, ScriptedCall, ScriptedUsage, Step, Turn, word_deltas};
use super::driven::{Emitter, drive};
use super::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError,
    ToolCallRequest,
};

/// The built-in demo script, played by `ScriptedProvider::demo()`: it looks around, writes
/// a note and sums up. It doubles as the format's example.
pub const DEMO_SCRIPT: &str = r##"# Heron's built-in demo: one model turn per line.
# Turn 0: say what it was told of its surroundings, and look around.
{"steps": [{"thought": "The user wants a look at the project. Listing the files is a good start."}, {"context": true}, {"text": "I'll look around the project first."}, {"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
# Turn 1: leave a note.
{"steps": [{"text": "Now I'll leave a short note in NOTES.md."}, {"tool_call": {"name": "write_file", "arguments": {"path": "NOTES.md", "content": "# Notes\n\nHeron was here.\n"}}}]}
# Turn 2: sum up.
{"steps": [{"text": "Done. I listed the project's files and wrote NOTES.md with a short note. This was the scripted demo model; configure a real model to do real work."}, {"usage": {"input": 1200, "output": 80}}], "finish": "stop"}
"##;

/// A [`crate::llm::Provider`] that plays a script.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    script: Script,
    /// The next turn, when turns play in request order rather than by conversation.
    next: Option<Arc<AtomicUsize>>,
}

impl ScriptedProvider {
    /// A provider playing `script`.
    pub fn new(script: Script) -> Self {
        Self { script, next: None }
    }

    /// The same script played in request order: the first request plays turn 0, the
    /// second turn 1, whatever the conversation holds. Clones share the position.
    pub fn sequential(self) -> Self {
        Self { next: Some(Arc::new(AtomicUsize::new(0))), ..self }
    }

    /// A provider playing the built-in [`DEMO_SCRIPT`].
    pub fn demo() -> Self {
        // The demo is a constant checked by the tests, so it always parses; an empty script
        // is still a working model should that ever break.
        let script = Script::parse(DEMO_SCRIPT).unwrap_or_else(|_| Script::from_turns(Vec::new()));
        Self::new(script)
    }

    /// A provider playing the script in the file at `path`.
    pub fn from_path(path: &Path) -> Result<Self, ScriptError> {
        Ok(Self::new(Script::from_path(path)?))
    }

    /// The script it plays.
    pub fn script(&self) -> &Script {
        &self.script
    }
}

impl From<ScriptError> for ProviderError {
    fn from(error: ScriptError) -> Self {
        ProviderError::Scripted(error.to_string())
    }
}

impl Provider for ScriptedProvider {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let index = match &self.next {
            Some(next) => next.fetch_add(1, Ordering::Relaxed),
            None => request.messages.iter().filter(|m| matches!(m, ChatMessage::Assistant { .. })).count(),
        };
        let turn = self.script.turns().get(index).cloned();
        let total = self.script.turns().len();
        let context = context_said(&request.messages);
        drive(cancel, move |emit| async move {
            emit.emit(ModelEvent::Attempt { number: 1 }).await;
            match turn {
                Some(turn) => play(index, turn, &context, &emit).await,
                None => {
                    let text = format!("The script has no more turns (it has {total}); nothing more to say.");
                    stream_text(&Deltas::Words(text), &emit, |text| ModelEvent::TextDelta { text }).await;
                    emit.emit(ModelEvent::Finish { reason: FinishReason::Stop }).await;
                    Ok(())
                }
            }
        })
    }
}

/// What a `context` step says of the request's `messages`: the working directory of its
/// working context and the instruction files it was given, in the order given, and the
/// skills its system prompt lists, when it lists any.
fn context_said(messages: &[ChatMessage]) -> String {
    let mut said = context_files(messages);
    let skills = skills_listed(messages);
    if !skills.is_empty() {
        said.push_str(&format!("Skills I was offered: {}. ", skills.join("; ")));
    }
    said
}

/// The `- name: description` lines of the `<skills>` block of the system prompt.
fn skills_listed(messages: &[ChatMessage]) -> Vec<String> {
    let system = messages.iter().find_map(|message| match message {
        ChatMessage::System { text } => Some(text.as_str()),
        _ => None,
    });
    let Some(block) =
        system.and_then(|s| s.split("<skills>").nth(1)).and_then(|s| s.split("</skills>").next())
    else {
        return Vec::new();
    };
    block.lines().filter_map(|line| line.strip_prefix("- ")).map(str::to_owned).collect()
}

/// The working directory and instruction files a `context` step says.
fn context_files(messages: &[ChatMessage]) -> String {
    let texts = messages.iter().flat_map(|message| match message {
        ChatMessage::User { parts } => parts
            .iter()
            .filter_map(|part| match part {
                crate::llm::UserPart::Text { text } => Some(text.as_str()),
                crate::llm::UserPart::Image { .. } => None,
            })
            .collect::<Vec<_>>(),
        ChatMessage::Tool { content, .. } => vec![content.as_str()],
        _ => Vec::new(),
    });
    let mut cwd = None;
    let mut files: Vec<&str> = Vec::new();
    for text in texts {
        let mut in_instructions = false;
        for line in text.lines() {
            if let Some(dir) = line.strip_prefix("Working directory: ") {
                cwd.get_or_insert(dir);
            }
            match line {
                "<project-instructions>" => in_instructions = true,
                "</project-instructions>" => in_instructions = false,
                _ => {
                    if let Some(path) = line.strip_prefix("## ").filter(|_| in_instructions)
                        && !files.contains(&path)
                    {
                        files.push(path);
                    }
                }
            }
        }
    }
    let files = if files.is_empty() { "none".to_owned() } else { files.join(", ") };
    match cwd {
        Some(cwd) => format!("My working directory is {cwd}. Instruction files I was given: {files}. "),
        None => format!("I was given no working context. Instruction files I was given: {files}. "),
    }
}

/// Plays turn `index`; a `context` step says `context`.
async fn play(index: usize, turn: Turn, context: &str, emit: &Emitter) -> Result<(), ProviderError> {
    let mut calls = 0;
    let mut refused = false;
    for step in turn.steps {
        match step {
            Step::Thought(text) => stream_text(&text, emit, |text| ModelEvent::ThoughtDelta { text }).await,
            Step::Text(text) => stream_text(&text, emit, |text| ModelEvent::TextDelta { text }).await,
            Step::ToolCall(call) => {
                let id = call.id.clone().unwrap_or_else(|| format!("call_{index}_{calls}"));
                let call = ToolCallRequest { id, name: call.name.clone(), arguments: call.arguments_text() };
                emit.emit(ModelEvent::ToolCall { call }).await;
                calls += 1;
            }
            Step::Usage(usage) => emit.emit(ModelEvent::Usage { usage: usage.into() }).await,
            Step::DelayMs(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Step::Error(message) => return Err(ProviderError::Scripted(message)),
            Step::Refuse(refuse) => refused |= refuse,
            Step::Context(false) => {}
            Step::Context(true) => {
                stream_text(&Deltas::Words(context.to_owned()), emit, |text| ModelEvent::TextDelta { text })
                    .await
            }
        }
    }
    let reason = turn.finish.unwrap_or(if refused {
        FinishReason::Refusal
    } else if calls > 0 {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    });
    emit.emit(ModelEvent::Finish { reason }).await;
    Ok(())
}

async fn stream_text(text: &Deltas, emit: &Emitter, event: impl Fn(String) -> ModelEvent) {
    for piece in text.pieces() {
        emit.emit(event(piece.to_owned())).await;
    }
}
