//! One model response, streamed: text and thought go to the editor as they come, redacted
//! of the user's keys even when a key is split across deltas, within the reply's byte cap
//! and the turn's chunk budget; the finished thought and message are recorded as the
//! editor saw them, and the tool calls handed back to the turn.

use futures_util::StreamExt;

use super::event::Event;
use super::turn::{Response, Turn, TurnError};
use super::update::TurnUpdate;
use crate::llm::{FinishReason, ModelEvent, ModelRequest, ProviderError, ToolCallRequest};
use crate::secret::StreamRedactor;
use crate::types::StopReason;

/// A message or thought being streamed.
struct Draft {
    id: String,
    text: String,
    redactor: StreamRedactor,
}

impl Draft {
    fn new(turn: &Turn) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            text: String::new(),
            redactor: StreamRedactor::new(turn.env.secrets.iter()),
        }
    }
}

/// Which draft a delta belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Message,
    Thought,
}

/// The longest start of `text` within `room` bytes, on a character boundary.
fn fit(text: &str, room: usize) -> &str {
    if text.len() <= room {
        return text;
    }
    let mut end = room;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl Turn {
    /// Shows `text` as a chunk of `part`, within the reply cap. Returns `false` once the cap
    /// is reached (what fitted was shown).
    async fn show(&mut self, part: Part, message: &mut Draft, thought: &mut Draft, text: &str) -> bool {
        let room = self.limits.max_reply_bytes.saturating_sub(message.text.len() + thought.text.len());
        let shown = fit(text, room);
        let whole = shown.len() == text.len();
        if !shown.is_empty() {
            let draft = if part == Part::Message { &mut *message } else { &mut *thought };
            draft.text.push_str(shown);
            // A turn whose editor is gone streams to nobody and waits for no one.
            let held = if self.updates.is_closed() {
                Default::default()
            } else {
                match self.budget.hold(shown.len(), &self.env.cancel).await {
                    Some(held) => held,
                    None => return whole,
                }
            };
            let (message_id, text) = (draft.id.clone(), shown.to_owned());
            self.live(match part {
                Part::Message => TurnUpdate::MessageChunk { message_id, text, held },
                Part::Thought => TurnUpdate::ThoughtChunk { message_id, text, held },
            });
        }
        whole
    }

    /// Streams one model response, recording its finished thought, message and tool calls.
    pub(super) async fn stream_response(&mut self, request: ModelRequest) -> Result<Response, TurnError> {
        let mut stream = self.provider.provider.stream(request, self.cancel().child_token());
        let mut message = Draft::new(self);
        let mut thought = Draft::new(self);
        let mut calls: Vec<ToolCallRequest> = Vec::new();
        let mut finish = None;
        let mut cancelled = false;
        let mut capped = false;
        let mut usage_seen = false;
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                // What streamed before a cancel was seen by the user: keep it.
                Err(ProviderError::Cancelled) => {
                    cancelled = true;
                    break;
                }
                Err(other) => return Err(other.into()),
            };
            match event {
                ModelEvent::Attempt { number } if number > 1 => {
                    // A retry voids what the failed attempt streamed: new message ids.
                    message = Draft::new(self);
                    thought = Draft::new(self);
                    calls.clear();
                }
                ModelEvent::Attempt { .. } => {}
                ModelEvent::TextDelta { text } => {
                    let shown = message.redactor.push(&text);
                    if !self.show(Part::Message, &mut message, &mut thought, &shown).await {
                        capped = true;
                        break;
                    }
                }
                ModelEvent::ThoughtDelta { text } => {
                    let shown = thought.redactor.push(&text);
                    if !self.show(Part::Thought, &mut message, &mut thought, &shown).await {
                        capped = true;
                        break;
                    }
                }
                ModelEvent::ToolCall { call } => calls.push(call),
                ModelEvent::Usage { usage } => {
                    usage_seen = true;
                    self.report_usage(usage);
                }
                ModelEvent::Finish { reason } => finish = Some(reason),
            }
        }
        // Ending the stream early drops the request, which stops the model.
        drop(stream);
        if !capped {
            // What each redactor held back (a possible start of a key) is shown last.
            let (rest_thought, rest_message) = (thought.redactor.finish(), message.redactor.finish());
            capped = !self.show(Part::Thought, &mut message, &mut thought, &rest_thought).await
                || !self.show(Part::Message, &mut message, &mut thought, &rest_message).await;
        }
        // Without a context window there is no report to keep.
        if usage_seen && self.provider.context_window.is_some() {
            self.status
                .save(&self.store, &self.session_id)
                .await
                .map_err(|e| TurnError::Store(e.to_string()))?;
        }
        if !thought.text.is_empty() {
            self.record(Event::AgentThought { message_id: thought.id, text: thought.text }).await?;
        }
        if !message.text.is_empty() {
            self.record(Event::AgentMessage { message_id: message.id, text: message.text }).await?;
        }
        let stop = match finish.unwrap_or(FinishReason::Stop) {
            _ if cancelled || self.cancel().is_cancelled() => Some(StopReason::Cancelled),
            // The calls of a reply cut short are not run: they may be cut too.
            _ if capped => Some(StopReason::MaxTokens),
            FinishReason::Length => Some(StopReason::MaxTokens),
            FinishReason::Refusal => Some(StopReason::Refusal),
            FinishReason::Stop | FinishReason::ToolCalls if calls.is_empty() => Some(StopReason::EndTurn),
            FinishReason::Stop | FinishReason::ToolCalls => None,
        };
        Ok(Response { stop, tool_calls: calls })
    }
}
