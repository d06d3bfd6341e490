//! The session's answer to its MCP servers' sampling requests: the user approves each one
//! (a permission request naming the server and showing every message it would send, so
//! what is approved is what is sent), unless they said "always" for that server in this
//! session; the session's model then writes the answer, without tools, within the
//! request's token cap. What it costs is owed to the session's totals and counted at the
//! next model request of a turn (`Board::owe`). A posture that never asks the user
//! (`readOnly`, `dontAsk`) refuses; `yolo` runs without asking, as it does tool calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures_util::StreamExt;

use super::Session;
use super::settings::Posture;
use super::watched::WatchedEditor;
use crate::BoxFuture;
use crate::llm::{ChatMessage, FinishReason, ModelEvent, ModelRequest, UserPart};
use crate::tools::editor::{EditorIo, PermissionAnswer, PermissionAsk};
use crate::tools::mcp::sampling::{Sampled, SampledRole, Sampler, SamplingAsk};
use crate::types::{ToolKind, ToolOutput};

/// The sampler of one session.
pub(super) struct SessionSampler {
    session: Weak<Session>,
    /// What the user said "always" to, by server: true for allow, false for reject.
    always: Always,
}

/// What the user said "always" to, by server: true for allow, false for reject.
type Always = Arc<Mutex<HashMap<String, bool>>>;

impl SessionSampler {
    pub(super) fn new(session: &Arc<Session>) -> Self {
        Self { session: Arc::downgrade(session), always: Always::default() }
    }
}

/// Whether the user lets `ask` go to the model.
async fn approved(always: &Always, session: &Session, ask: &SamplingAsk) -> Result<(), String> {
    let remembered = always.lock().unwrap_or_else(PoisonError::into_inner).get(&ask.server).copied();
    match remembered {
        Some(true) => return Ok(()),
        Some(false) => return Err(declined(&ask.server, "always")),
        None => {}
    }
    let editor = WatchedEditor::new(session.editor(), session.status.clone());
    let timeout = session.runtime().providers().config().permission_timeout();
    let request = PermissionAsk {
        call_id: format!("sampling-{}", uuid::Uuid::new_v4()),
        name: "sampling".into(),
        title: format!(
            "MCP server `{}` asks the model to write a message (up to {} tokens)",
            ask.server, ask.max_tokens
        ),
        kind: ToolKind::Other,
        locations: Vec::new(),
        raw_input: serde_json::json!({
            "server": ask.server,
            "systemPrompt": ask.system,
            "messages": ask.messages.iter().map(|m| serde_json::json!({ "role": role(m.role), "text": m.text })).collect::<Vec<_>>(),
            "maxTokens": ask.max_tokens,
        }),
        content: vec![ToolOutput::Text { text: shown(ask) }],
        subagent_call_id: None,
    };
    let remember = |allow: bool| {
        always.lock().unwrap_or_else(PoisonError::into_inner).insert(ask.server.clone(), allow);
    };
    match editor.request_permission(&request, timeout).await {
        PermissionAnswer::AllowOnce => Ok(()),
        PermissionAnswer::AllowAlways => {
            remember(true);
            Ok(())
        }
        PermissionAnswer::RejectAlways => {
            remember(false);
            Err(declined(&ask.server, "now"))
        }
        PermissionAnswer::RejectOnce | PermissionAnswer::Cancelled => Err(declined(&ask.server, "now")),
        PermissionAnswer::Unanswered(_) => {
            Err(format!("the user did not answer the request of `{}` to use the model", ask.server))
        }
    }
}

fn declined(server: &str, when: &str) -> String {
    let when = if when == "always" { " for the rest of the session" } else { "" };
    format!("the user declined the request of `{server}` to use the model{when}")
}

fn role(role: SampledRole) -> &'static str {
    match role {
        SampledRole::User => "user",
        SampledRole::Assistant => "assistant",
    }
}

/// Everything the model would be sent, as the user is shown it.
fn shown(ask: &SamplingAsk) -> String {
    let mut text = String::new();
    if let Some(system) = &ask.system {
        text.push_str(&format!("system: {system}\n\n"));
    }
    for message in &ask.messages {
        text.push_str(&format!("{}: {}\n\n", role(message.role), message.text));
    }
    text.trim_end().to_owned()
}

/// The most text of the model's answer a server is given, in bytes: four times what the
/// largest answer Heron asks for (4,096 tokens) holds at four bytes a token, so only a model
/// that ignores `max_tokens` reaches it.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Appends `piece` to `text` within [`MAX_ANSWER_BYTES`], never cutting a character; true
/// once the answer is full.
fn gather(text: &mut String, piece: &str) -> bool {
    crate::llm::push_capped(text, piece, MAX_ANSWER_BYTES) || text.len() >= MAX_ANSWER_BYTES
}

impl Sampler for SessionSampler {
    fn sample(&self, ask: SamplingAsk) -> BoxFuture<Result<Sampled, String>> {
        let (session, always) = (self.session.upgrade(), self.always.clone());
        Box::pin(async move {
            let session = session.ok_or("the session was closed")?;
            let settings = session.state().settings;
            match settings.posture {
                Posture::ReadOnly | Posture::DontAsk => {
                    return Err(format!(
                        "sampling needs the user's approval, and the session's permission mode `{}` does not ask",
                        settings.posture.id()
                    ));
                }
                Posture::Yolo => {}
                Posture::Ask | Posture::Auto => approved(&always, &session, &ask).await?,
            }
            let providers = session.runtime().providers().clone();
            let resolved = providers.resolve(&settings.model).map_err(|e| e.to_string())?;
            let mut messages: Vec<ChatMessage> =
                ask.system.iter().map(|text| ChatMessage::System { text: text.clone() }).collect();
            messages.extend(ask.messages.iter().map(|m| match m.role {
                SampledRole::User => {
                    ChatMessage::User { parts: vec![UserPart::Text { text: m.text.clone() }] }
                }
                SampledRole::Assistant => {
                    ChatMessage::Assistant { text: m.text.clone(), tool_calls: Vec::new(), reasoning: None }
                }
            }));
            let request = ModelRequest {
                model: resolved.model.clone(),
                messages,
                tools: Vec::new(),
                effort: None,
                max_tokens: Some(ask.max_tokens),
            };
            // The request ends with the session, or when the server stops waiting.
            let cancel = session.closed.child_token();
            let _abandon = cancel.clone().drop_guard();
            let mut stream = resolved.provider.stream(request, cancel);
            let (mut text, mut cut, mut full) = (String::new(), false, false);
            while let Some(event) = stream.next().await {
                match event.map_err(|e| format!("the model failed: {e}"))? {
                    // A retry starts the answer over.
                    ModelEvent::Attempt { .. } => text.clear(),
                    ModelEvent::TextDelta { text: piece } => full = gather(&mut text, &piece),
                    ModelEvent::Usage { usage } => session.status.owe(usage, resolved.price.clone()),
                    ModelEvent::Finish { reason } => cut = reason == FinishReason::Length,
                    _ => {}
                }
                if full {
                    // A model that ignores `max_tokens` is not read further; what it would
                    // still report of its usage is lost with the stream.
                    cut = true;
                    break;
                }
            }
            let text = crate::secret::redact(&text, providers.keys().all());
            Ok(Sampled { text, model: settings.model, cut })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_gathered_within_its_bound_on_a_character_boundary() {
        let mut text = String::new();
        assert!(!gather(&mut text, "hello "), "room is left");
        let long = "é".repeat(MAX_ANSWER_BYTES);
        assert!(gather(&mut text, &long), "full");
        assert!(text.len() <= MAX_ANSWER_BYTES && text.len() > MAX_ANSWER_BYTES - 2, "{}", text.len());
        assert!(text.starts_with("hello é"));
        assert!(gather(&mut text, "more"), "a full answer takes nothing");
        assert!(text.len() <= MAX_ANSWER_BYTES);
    }
}
