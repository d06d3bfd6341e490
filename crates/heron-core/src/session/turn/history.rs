//! Rebuilds the model's view of a conversation from the durable events.
//!
//! A model response is stored as its thought, its message and its tool calls, then the
//! tool results; tool calls that follow a message (with no result between) belong to it.
//! A call whose result never came (a crash, a cancel) gets a synthetic result, since
//! providers reject a tool call left unanswered. A thought belongs to the assistant message
//! that follows it, so that servers which want reasoning back (DeepSeek, OpenRouter) get
//! it with that message; the provider decides whether to send it.
//!
//! Images live on disk (`.heron/attachments`); [`Images`] reads each once, off the async
//! threads, and keeps it for the session's later requests.
//!
//! The working context a turn starts with (a `context` event) opens that turn's user
//! message: the whole of it the first time, what changed after that (`working::text`).

use std::collections::HashMap;

use base64::Engine as _;

use crate::llm::{ChatMessage, Reasoning, ToolCallRequest, UserPart};
use crate::session::event::{Event, WorkingContext};
use crate::session::working;
use crate::types::UserContent;

/// The images a session's history refers to, base64-encoded, read once each. An image that
/// could not be read is remembered as missing, with why.
#[derive(Debug, Default)]
pub(in crate::session) struct Images(HashMap<String, Result<String, String>>);

impl Images {
    /// Reads every image of `events` not read yet.
    pub(in crate::session) async fn load(&mut self, events: &[Event]) {
        let missing: Vec<String> = events
            .iter()
            .flat_map(|event| match event {
                Event::UserMessage { content, .. } => content.as_slice(),
                _ => &[],
            })
            .filter_map(|content| match content {
                UserContent::Image { path, .. } if !self.0.contains_key(path) => Some(path.clone()),
                _ => None,
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        let read = tokio::task::spawn_blocking(move || {
            missing
                .into_iter()
                .map(|path| {
                    let data = read_image(&path);
                    (path, data)
                })
                .collect::<Vec<_>>()
        })
        .await;
        match read {
            Ok(read) => self.0.extend(read),
            Err(err) => tracing::warn!(%err, "reading images stopped"),
        }
    }

    fn get(&self, path: &str) -> Result<&str, String> {
        match self.0.get(path) {
            Some(Ok(data)) => Ok(data),
            Some(Err(reason)) => Err(reason.clone()),
            None => Err("it was not read".to_owned()),
        }
    }
}

fn read_image(path: &str) -> Result<String, String> {
    crate::session::attachments::read(path)
        .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// What the model is told about an interrupted call.
pub(in crate::session) const INTERRUPTED: &str =
    "The tool call was interrupted before it finished; it may not have run.";

fn user_parts(content: &[UserContent], images: &Images) -> Vec<UserPart> {
    content
        .iter()
        .map(|block| match block {
            UserContent::Text { text } => UserPart::Text { text: text.clone() },
            UserContent::Image { mime_type, path, .. } => match images.get(path) {
                Ok(data) => UserPart::Image { mime_type: mime_type.clone(), data: data.to_owned() },
                Err(reason) => {
                    UserPart::Text { text: format!("[an image at {path} cannot be sent: {reason}]") }
                }
            },
            UserContent::Resource { uri, text, .. } => {
                UserPart::Text { text: format!("<resource uri=\"{uri}\">\n{text}\n</resource>") }
            }
            UserContent::Blob { uri, mime_type, path } => UserPart::Text {
                text: format!(
                    "[binary resource {uri} ({}) saved at {path}]",
                    mime_type.as_deref().unwrap_or("application/octet-stream")
                ),
            },
            UserContent::Link { uri, name, .. } => {
                UserPart::Text { text: format!("[resource link: {name} <{uri}>]") }
            }
        })
        .collect()
}

/// The chat messages for `events`, after `system`, with their images from `images`.
#[cfg(test)]
fn chat_messages(system: &str, events: &[Event], images: &Images) -> Vec<ChatMessage> {
    shaped_messages(system, events, images, &Shaping::default())
}

/// How a compacted history is rendered (see `context`).
#[derive(Debug, Default)]
pub(in crate::session) struct Shaping<'a> {
    /// Tool outputs of the first this many events are sent clipped.
    pub(in crate::session) clip_before: usize,
    /// What opens the first user message (a compaction's summary).
    pub(in crate::session) preamble: Option<&'a str>,
    /// A user message sent before the events: the prompt of the turn they start inside.
    pub(in crate::session) anchor: Option<&'a Event>,
    /// The events, by index, that are not sent at all.
    pub(in crate::session) unsent: &'a [std::ops::Range<usize>],
    /// The working context in effect before the events (a compaction cut the event that
    /// gave it): sent whole at the start, and what later contexts are compared with.
    pub(in crate::session) context: Option<&'a WorkingContext>,
}

/// [`chat_messages`], shaped by a compaction.
pub(in crate::session) fn shaped_messages(
    system: &str,
    events: &[Event],
    images: &Images,
    shaping: &Shaping<'_>,
) -> Vec<ChatMessage> {
    let sent = events.iter().enumerate().filter(|(at, _)| !shaping.unsent.iter().any(|run| run.contains(at)));
    // The anchor is a user message: no output of it is clipped, whatever its index.
    let mut out = rendered(
        system,
        shaping.anchor.map(|e| (usize::MAX, e)).into_iter().chain(sent),
        images,
        shaping.clip_before,
        shaping.context,
    );
    let context = shaping.context.map(|context| working::text(context, None));
    let opening = match (context, shaping.preamble) {
        (Some(context), Some(preamble)) => Some(format!("{context}\n\n{preamble}")),
        (context, preamble) => context.or(preamble.map(str::to_owned)),
    };
    if let Some(opening) = opening {
        let part = UserPart::Text { text: opening };
        match out.get_mut(1) {
            Some(ChatMessage::User { parts }) => parts.insert(0, part),
            // Nothing follows the summary yet (it stands for everything): it goes alone.
            _ => out.insert(1.min(out.len()), ChatMessage::User { parts: vec![part] }),
        }
    }
    out
}

fn rendered<'e>(
    system: &str,
    events: impl Iterator<Item = (usize, &'e Event)>,
    images: &Images,
    clip_before: usize,
    context: Option<&'e WorkingContext>,
) -> Vec<ChatMessage> {
    let mut out = vec![ChatMessage::System { text: system.to_owned() }];
    // The context last given, and the text of one that waits for the user message it opens.
    let mut last_context = context;
    let mut waiting: Option<String> = None;
    // Calls of the open assistant message still waiting for a result.
    let mut open_calls: Vec<String> = Vec::new();
    let mut assistant_open = false;
    // The id of the message the last event was a piece of: a long message is stored in pieces.
    let mut last_piece: Option<&str> = None;
    // The thought waiting for the assistant message it precedes.
    let mut thought: Option<Reasoning> = None;

    let close = |out: &mut Vec<ChatMessage>, open_calls: &mut Vec<String>| {
        for call_id in open_calls.drain(..) {
            out.push(ChatMessage::Tool { call_id, content: INTERRUPTED.to_owned() });
        }
    };

    for (at, event) in events {
        let piece_of = last_piece.take();
        // A context with no user message after it (a turn that stopped in between) still
        // reaches the model, on its own.
        if !matches!(event, Event::UserMessage { .. } | Event::GoalContinuation { .. } | Event::Context(..))
            && let Some(text) = waiting.take()
        {
            close(&mut out, &mut open_calls);
            assistant_open = false;
            out.push(ChatMessage::User { parts: vec![UserPart::Text { text }] });
        }
        match event {
            Event::Context(context) => {
                let text = working::text(context, last_context);
                waiting = Some(match waiting.take() {
                    Some(before) => format!("{before}\n\n{text}"),
                    None => text,
                });
                last_context = Some(context);
            }
            Event::UserMessage { content, .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
                thought = None;
                let opening = waiting.take().map(|text| UserPart::Text { text });
                out.push(ChatMessage::User {
                    parts: opening.into_iter().chain(user_parts(content, images)).collect(),
                });
            }
            Event::GoalContinuation { text, .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
                thought = None;
                let opening = waiting.take().map(|text| UserPart::Text { text });
                let parts = opening.into_iter().chain([UserPart::Text { text: text.clone() }]).collect();
                out.push(ChatMessage::User { parts });
            }
            Event::AgentMessage { message_id, text } => {
                last_piece = Some(message_id);
                if piece_of == Some(message_id.as_str())
                    && let Some(ChatMessage::Assistant { text: joined, .. }) = out.last_mut()
                {
                    joined.push_str(text);
                    continue;
                }
                close(&mut out, &mut open_calls);
                out.push(ChatMessage::Assistant {
                    text: text.clone(),
                    tool_calls: Vec::new(),
                    reasoning: thought.take(),
                });
                assistant_open = true;
            }
            Event::ToolCall { call_id, name, arguments, .. } => {
                if !assistant_open {
                    close(&mut out, &mut open_calls);
                    out.push(ChatMessage::Assistant {
                        text: String::new(),
                        tool_calls: Vec::new(),
                        reasoning: thought.take(),
                    });
                    assistant_open = true;
                }
                if let Some(ChatMessage::Assistant { tool_calls, .. }) = out.last_mut() {
                    tool_calls.push(ToolCallRequest {
                        id: call_id.clone(),
                        name: name.clone(),
                        arguments: arguments.clone(),
                    });
                }
                open_calls.push(call_id.clone());
            }
            Event::ToolResult { call_id, for_model, .. } => {
                assistant_open = false;
                if let Some(open) = open_calls.iter().position(|c| c == call_id) {
                    open_calls.remove(open);
                    let content = if at < clip_before {
                        super::clip::clip_output(for_model).into_owned()
                    } else {
                        for_model.clone()
                    };
                    out.push(ChatMessage::Tool { call_id: call_id.clone(), content });
                }
            }
            Event::AgentThought { message_id, text, details } => {
                last_piece = Some(message_id);
                match &mut thought {
                    Some(joined) if piece_of == Some(message_id.as_str()) => joined.text.push_str(text),
                    _ => thought = Some(Reasoning { text: text.clone(), details: details.clone() }),
                }
            }
            // The plan reaches the model as the todo tool's result; a compaction is a marker
            // whose view the caller applied already.
            Event::Plan { .. } | Event::Compacted(..) | Event::CommandChanges { .. } => {}
            Event::TurnEnded { .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
                thought = None;
            }
        }
    }
    close(&mut out, &mut open_calls);
    if let Some(text) = waiting {
        out.push(ChatMessage::User { parts: vec![UserPart::Text { text }] });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pieces_of_one_long_message_are_one_assistant_message() {
        let piece = |id: &str, text: &str| Event::AgentMessage { message_id: id.into(), text: text.into() };
        let events = [piece("a", "one "), piece("a", "two"), piece("b", "three")];
        let messages = chat_messages("system", &events, &Images::default());
        let texts: Vec<_> = messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Assistant { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["one two", "three"]);
    }

    fn image_message(path: &str) -> Event {
        Event::UserMessage {
            message_id: "m".into(),
            content: vec![UserContent::Image { mime_type: "image/png".into(), path: path.into(), uri: None }],
            command: None,
        }
    }

    #[tokio::test]
    async fn an_image_is_read_once_and_kept_for_later_requests() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.png");
        std::fs::write(&path, [0x89, b'P', b'N', b'G']).expect("image");
        let events = vec![image_message(&path.display().to_string())];
        let mut images = Images::default();
        images.load(&events).await;
        std::fs::remove_file(&path).expect("removed");
        images.load(&events).await;
        let messages = chat_messages("sys", &events, &images);
        let ChatMessage::User { parts } = &messages[1] else { panic!("{messages:?}") };
        assert!(matches!(&parts[0], UserPart::Image { data, .. } if data == "iVBORw=="), "{parts:?}");
    }

    #[tokio::test]
    async fn a_missing_image_is_told_to_the_model_as_text() {
        let events = vec![image_message("/nowhere/a.png")];
        let mut images = Images::default();
        images.load(&events).await;
        let messages = chat_messages("sys", &events, &images);
        let ChatMessage::User { parts } = &messages[1] else { panic!("{messages:?}") };
        assert!(matches!(&parts[0], UserPart::Text { text } if text.contains("/nowhere/a.png")), "{parts:?}");
    }
    use crate::types::{ToolKind, ToolStatus};

    fn call(id: &str) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            name: "read_file".into(),
            title: "Read".into(),
            tool_kind: ToolKind::Read,
            arguments: "{}".into(),
            raw_input: serde_json::json!({}),
            locations: vec![],
        }
    }

    fn result(id: &str) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            status: ToolStatus::Completed,
            output: vec![],
            raw_output: None,
            for_model: format!("result {id}"),
            instructions: Vec::new(),
        }
    }

    #[test]
    fn tool_calls_after_a_message_belong_to_it_and_results_follow() {
        let events = vec![
            Event::UserMessage {
                message_id: "u".into(),
                content: vec![UserContent::Text { text: "hi".into() }],
                command: None,
            },
            Event::AgentMessage { message_id: "a".into(), text: "looking".into() },
            call("1"),
            call("2"),
            result("1"),
            result("2"),
        ];
        let messages = chat_messages("sys", &events, &Images::default());
        assert_eq!(messages.len(), 5);
        let ChatMessage::Assistant { tool_calls, .. } = &messages[2] else { panic!("{messages:?}") };
        assert_eq!(tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(messages[4], ChatMessage::Tool { call_id: "2".into(), content: "result 2".into() });
    }

    #[test]
    fn a_thought_in_pieces_goes_with_the_calls_that_follow_it() {
        let thought =
            |text: &str, details| Event::AgentThought { message_id: "t".into(), text: text.into(), details };
        let events = vec![
            Event::UserMessage { message_id: "u".into(), content: vec![], command: None },
            thought("I should ", Some(serde_json::json!([{ "type": "reasoning.text" }]))),
            thought("read it.", None),
            call("1"),
            result("1"),
            Event::AgentMessage { message_id: "a".into(), text: "done".into() },
        ];
        let messages = chat_messages("sys", &events, &Images::default());
        let ChatMessage::Assistant { reasoning: Some(reasoning), tool_calls, .. } = &messages[2] else {
            panic!("{messages:?}")
        };
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(reasoning.text, "I should read it.");
        assert_eq!(reasoning.details, Some(serde_json::json!([{ "type": "reasoning.text" }])));
        assert!(matches!(&messages[4], ChatMessage::Assistant { reasoning: None, .. }), "{messages:?}");
    }

    #[test]
    fn an_unanswered_call_gets_a_synthetic_result_before_the_next_user_message() {
        let events = vec![
            call("1"),
            Event::TurnEnded { stop_reason: crate::types::StopReason::Cancelled },
            Event::UserMessage { message_id: "u".into(), content: vec![], command: None },
        ];
        let messages = chat_messages("sys", &events, &Images::default());
        assert_eq!(messages[2], ChatMessage::Tool { call_id: "1".into(), content: INTERRUPTED.into() });
        assert!(matches!(messages[3], ChatMessage::User { .. }));
    }
}
