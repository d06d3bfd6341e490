//! One model response, streamed: text and thought go to the editor as they come, redacted
//! of the user's keys even when a key is split across deltas, within the reply's byte cap
//! and the turn's chunk budget; the finished thought and message are recorded as the
//! editor saw them, and the tool calls handed back to the turn, within the bounds of
//! `reply_calls` (how many, how large: their arguments count toward the reply cap).
//!
//! A long message is kept, and stored, as consecutive pieces of at most [`PIECE_BYTES`](super::limits::PIECE_BYTES)
//! under the same message id: encoding it for the store and SQLite's own copies then cost a
//! piece, not the whole message again (a 20 MiB reply took five times its size at the end).
//! History and replay join the pieces back.

use futures_util::StreamExt;

use super::limits::PIECE_BYTES;
use super::reply_calls::{Refused, admit};
use super::{Response, Turn, TurnError};
use crate::llm::{FinishReason, ModelEvent, ModelRequest, ProviderError, ToolCallRequest};
use crate::secret::StreamRedactor;
use crate::session::event::Event;
use crate::session::update::TurnUpdate;
use crate::types::{Notice, NoticeSeverity, StopReason};

/// The id a call of the model keeps: its own, unless it is empty or another call of this
/// response or of the session already has it (local servers number each response's calls
/// from `call_0`, and a hostile model may repeat one). An editor shows one card per id,
/// and results are matched to calls by id, so a repeat gets `-2`, `-3`, ... appended; the
/// model sees the new id with the call and its result from then on.
fn unique_call_id(id: String, calls: &[ToolCallRequest], history: &[Event]) -> String {
    let taken = |candidate: &str| {
        calls.iter().any(|call| call.id == candidate)
            || history
                .iter()
                .any(|event| matches!(event, Event::ToolCall { call_id, .. } if call_id == candidate))
    };
    if !id.is_empty() && !taken(&id) {
        return id;
    }
    let base = if id.is_empty() { "call".to_owned() } else { id };
    (2_u64..).map(|n| format!("{base}-{n}")).find(|candidate| !taken(candidate)).unwrap_or(base)
}

/// A message or thought being streamed.
struct Draft {
    id: String,
    /// The text so far, in pieces of at most [`PIECE_BYTES`].
    pieces: Vec<String>,
    len: usize,
    redactor: StreamRedactor,
}

impl Draft {
    fn new(turn: &Turn) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            pieces: Vec::new(),
            len: 0,
            redactor: StreamRedactor::new(turn.io.env.secrets.iter()),
        }
    }

    /// A new piece: the first grows as needed (most replies are short); once a reply has
    /// filled one, the next is allocated whole, so a long reply is never reallocated on
    /// the way and leaves no trail of freed buffers behind.
    fn next_piece(&self) -> String {
        if self.pieces.is_empty() { String::new() } else { String::with_capacity(PIECE_BYTES) }
    }

    fn push(&mut self, mut text: &str) {
        self.len += text.len();
        while !text.is_empty() {
            let room = match self.pieces.last() {
                Some(last) if last.len() < PIECE_BYTES => PIECE_BYTES - last.len(),
                _ => {
                    self.pieces.push(self.next_piece());
                    PIECE_BYTES
                }
            };
            // A character longer than the room left starts the next piece.
            let taken = match fit(text, room) {
                "" if room < PIECE_BYTES => {
                    self.pieces.push(self.next_piece());
                    fit(text, PIECE_BYTES)
                }
                taken => taken,
            };
            if let Some(last) = self.pieces.last_mut() {
                last.push_str(taken);
            }
            text = &text[taken.len()..];
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
/// What the user is told while a model request waits to be tried again.
pub(in crate::session) fn retry_notice(next: u32, of: u32, wait_ms: u64, reason: &str) -> Notice {
    // Tenths of a second: enough to tell a backoff from a long Retry-After.
    let wait = format!("{}.{}", wait_ms / 1000, (wait_ms % 1000) / 100);
    Notice {
        severity: NoticeSeverity::Warning,
        title: format!("The model request failed; trying again in {wait} s (attempt {next} of {of})"),
        description: Some(crate::secret::clip(reason, 512)),
    }
}

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

/// The reply as it streams: its message and thought, its tool calls, the calls refused,
/// the bytes their arguments hold (which count toward the reply cap) and the structured
/// reasoning to send back. A retry starts a new one.
struct Reply {
    message: Draft,
    thought: Draft,
    calls: Vec<ToolCallRequest>,
    refused: Refused,
    arguments: usize,
    details: Option<serde_json::Value>,
    /// Whether the server reported usage, in this attempt or an earlier one.
    usage_seen: bool,
}

impl Reply {
    fn new(turn: &Turn) -> Self {
        Self {
            message: Draft::new(turn),
            thought: Draft::new(turn),
            calls: Vec::new(),
            refused: Refused::default(),
            arguments: 0,
            details: None,
            usage_seen: false,
        }
    }

    /// The bytes the reply holds, toward its cap.
    fn len(&self) -> usize {
        self.message.len + self.thought.len + self.arguments
    }
}

/// How the model's stream ended.
enum Ended {
    /// It ran to its end, with the model's finish reason if it gave one; or the reply
    /// passed its call count, the call past it kept to fail and the reply read no further.
    Finished(Option<FinishReason>),
    /// The turn was cancelled; what streamed before was seen by the user and is kept.
    Cancelled,
    /// The reply passed its byte cap: what fitted is kept, and its calls do not run (they
    /// may be cut too).
    Capped,
    /// The stream failed; what streamed before is kept, and the failure reported after it.
    Failed(ProviderError),
}

impl Turn {
    /// Shows `text` as a chunk of `part` of `reply`, within the reply cap. Returns `false`
    /// once the cap is reached (what fitted was shown).
    async fn show(&mut self, part: Part, reply: &mut Reply, text: &str) -> bool {
        let room = self.policy.limits.max_reply_bytes.saturating_sub(reply.len());
        let shown = fit(text, room);
        let whole = shown.len() == text.len();
        if !shown.is_empty() {
            let draft = if part == Part::Message { &mut reply.message } else { &mut reply.thought };
            draft.push(shown);
            // A turn whose editor is gone streams to nobody and waits for no one.
            let held = if self.io.updates.is_closed() {
                Default::default()
            } else {
                match self.io.budget.hold(shown.len(), &self.io.env.cancel).await {
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

    /// Reads the model's stream into `reply` until it ends, one way or another.
    async fn read_stream(&mut self, request: ModelRequest, reply: &mut Reply) -> Ended {
        let mut stream = self.policy.provider.provider.stream(request, self.cancel().child_token());
        let mut finish = None;
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(event) => event,
                Err(ProviderError::Cancelled) => return Ended::Cancelled,
                Err(other) => return Ended::Failed(other),
            };
            match event {
                // A retry voids what the failed attempt streamed: new message ids.
                ModelEvent::Attempt { number } if number > 1 => {
                    *reply = Reply { usage_seen: reply.usage_seen, ..Reply::new(self) };
                }
                ModelEvent::Attempt { .. } => {}
                ModelEvent::Retrying { next, of, wait_ms, reason } => {
                    self.live(TurnUpdate::Notice(retry_notice(next, of, wait_ms, &reason)));
                }
                ModelEvent::TextDelta { text } => {
                    let shown = reply.message.redactor.push(&text);
                    if !self.show(Part::Message, reply, &shown).await {
                        return Ended::Capped;
                    }
                }
                ModelEvent::ThoughtDelta { text } => {
                    let shown = reply.thought.redactor.push(&text);
                    if !self.show(Part::Thought, reply, &shown).await {
                        return Ended::Capped;
                    }
                }
                ModelEvent::ToolCall { mut call } => {
                    // The model's calls are its output too: a key in a name or an argument
                    // is masked before anything shows, stores or runs it, so what the user
                    // is asked to approve (`***`) is what runs.
                    call.name = crate::secret::redact(&call.name, self.io.env.secrets.iter());
                    call.arguments = crate::secret::redact_json_text(&call.arguments, &self.io.env.secrets);
                    call.id = unique_call_id(call.id, &reply.calls, &self.carried.history);
                    reply.arguments +=
                        admit(&mut call, reply.calls.len(), &self.policy.limits, &mut reply.refused);
                    reply.calls.push(call);
                    // The call past the cap is kept to fail, and the reply read no further.
                    if reply.calls.len() > self.policy.limits.max_tool_calls {
                        return Ended::Finished(None);
                    }
                    if reply.len() > self.policy.limits.max_reply_bytes {
                        return Ended::Capped;
                    }
                }
                ModelEvent::ReasoningDetails { details } => reply.details = Some(details),
                ModelEvent::Usage { usage } => {
                    self.report_usage(usage);
                    reply.usage_seen = true;
                }
                ModelEvent::Finish { reason } => finish = Some(reason),
            }
        }
        Ended::Finished(finish)
    }

    /// Streams one model response, recording its finished thought, message and tool calls.
    pub(in crate::session) async fn stream_response(
        &mut self,
        request: ModelRequest,
    ) -> Result<Response, TurnError> {
        let mut reply = Reply::new(self);
        // Ending the stream early drops the request, which stops the model.
        let mut ended = self.read_stream(request, &mut reply).await;
        if !matches!(ended, Ended::Capped) {
            // What each redactor held back (a possible start of a key) is shown last.
            let (rest_thought, rest_message) =
                (reply.thought.redactor.finish(), reply.message.redactor.finish());
            let fits = self.show(Part::Thought, &mut reply, &rest_thought).await
                && self.show(Part::Message, &mut reply, &rest_message).await;
            if !fits && !matches!(ended, Ended::Failed(_)) {
                ended = match ended {
                    Ended::Cancelled => Ended::Cancelled,
                    _ => Ended::Capped,
                };
            }
        }
        // The report (tokens and cost, with or without a window) is kept with the session.
        if reply.usage_seen {
            self.shared
                .status
                .save(&self.shared.store, &self.shared.session_id)
                .await
                .map_err(|e| TurnError::Store(e.to_string()))?;
        }
        let Reply { message, mut thought, calls, refused, mut details, .. } = reply;
        // Structured reasoning rides on the thought's first piece, or on a thought of its
        // own when the server sent no reasoning text (encrypted reasoning).
        if thought.pieces.is_empty() && details.is_some() {
            thought.pieces.push(String::new());
        }
        // Stored with the event after them (a tool call, the turn's end): the editor has
        // seen them already, and nothing is answered before they are stored.
        for text in thought.pieces {
            let details = details.take();
            self.record_with_next(Event::AgentThought { message_id: thought.id.clone(), text, details })
                .await?;
        }
        for text in message.pieces {
            self.record_with_next(Event::AgentMessage { message_id: message.id.clone(), text }).await?;
        }
        let stop = match ended {
            Ended::Failed(failure) => return Err(failure.into()),
            Ended::Cancelled => Some(StopReason::Cancelled),
            _ if self.cancel().is_cancelled() => Some(StopReason::Cancelled),
            Ended::Capped | Ended::Finished(Some(FinishReason::Length)) => Some(StopReason::MaxTokens),
            Ended::Finished(Some(FinishReason::Refusal)) => Some(StopReason::Refusal),
            Ended::Finished(_) if calls.is_empty() => Some(StopReason::EndTurn),
            Ended::Finished(_) => None,
        };
        Ok(Response { stop, tool_calls: calls, refused })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> Draft {
        Draft {
            id: "m".into(),
            pieces: Vec::new(),
            len: 0,
            redactor: StreamRedactor::new(std::iter::empty()),
        }
    }

    #[test]
    fn a_long_message_is_kept_in_pieces_that_join_back_exactly() {
        let mut draft = draft();
        let mut whole = String::new();
        // Deltas of odd sizes with multi-byte characters, so pieces end mid-delta and a
        // character straddles a piece boundary.
        for i in 0..40_000 {
            let delta = format!("{i}é漢🦀-{}", "x".repeat(i % 97));
            draft.push(&delta);
            whole.push_str(&delta);
        }
        assert!(draft.pieces.len() > 2, "{} pieces", draft.pieces.len());
        assert!(draft.pieces.iter().all(|p| p.len() <= PIECE_BYTES && !p.is_empty()));
        assert!(
            draft.pieces[..draft.pieces.len() - 1].iter().all(|p| p.len() + 4 > PIECE_BYTES),
            "pieces are full"
        );
        assert_eq!(draft.len, whole.len());
        assert_eq!(draft.pieces.concat(), whole);
    }
}
