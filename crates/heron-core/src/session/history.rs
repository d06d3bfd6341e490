//! Rebuilds the model's view of a conversation from the durable events.
//!
//! A model response is stored as its thought, its message and its tool calls, then the
//! tool results; tool calls that follow a message (with no result between) belong to it.
//! A call whose result never came (a crash, a cancel) gets a synthetic result, since
//! providers reject a tool call left unanswered.

use base64::Engine as _;

use super::event::Event;
use crate::llm::{ChatMessage, ToolCallRequest, UserPart};
use crate::types::UserContent;

/// What the model is told about an interrupted call.
pub const INTERRUPTED: &str = "The tool call was interrupted before it finished; it may not have run.";

fn user_parts(content: &[UserContent]) -> Vec<UserPart> {
    content
        .iter()
        .map(|block| match block {
            UserContent::Text { text } => UserPart::Text { text: text.clone() },
            UserContent::Image { mime_type, path, .. } => match std::fs::read(path) {
                Ok(bytes) => UserPart::Image {
                    mime_type: mime_type.clone(),
                    data: base64::engine::general_purpose::STANDARD.encode(bytes),
                },
                Err(_) => UserPart::Text { text: format!("[an image that is no longer at {path}]") },
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

/// The chat messages for `events`, after `system`.
pub fn chat_messages(system: &str, events: &[Event]) -> Vec<ChatMessage> {
    let mut out = vec![ChatMessage::System { text: system.to_owned() }];
    // Calls of the open assistant message still waiting for a result.
    let mut open_calls: Vec<String> = Vec::new();
    let mut assistant_open = false;

    let close = |out: &mut Vec<ChatMessage>, open_calls: &mut Vec<String>| {
        for call_id in open_calls.drain(..) {
            out.push(ChatMessage::Tool { call_id, content: INTERRUPTED.to_owned() });
        }
    };

    for event in events {
        match event {
            Event::UserMessage { content, .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
                out.push(ChatMessage::User { parts: user_parts(content) });
            }
            Event::GoalContinuation { text, .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
                out.push(ChatMessage::User { parts: vec![UserPart::Text { text: text.clone() }] });
            }
            Event::AgentMessage { text, .. } => {
                close(&mut out, &mut open_calls);
                out.push(ChatMessage::Assistant { text: text.clone(), tool_calls: Vec::new() });
                assistant_open = true;
            }
            Event::ToolCall { call_id, name, arguments, .. } => {
                if !assistant_open {
                    close(&mut out, &mut open_calls);
                    out.push(ChatMessage::Assistant { text: String::new(), tool_calls: Vec::new() });
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
                if let Some(at) = open_calls.iter().position(|c| c == call_id) {
                    open_calls.remove(at);
                    out.push(ChatMessage::Tool { call_id: call_id.clone(), content: for_model.clone() });
                }
            }
            Event::AgentThought { .. } | Event::Plan { .. } => {}
            Event::TurnEnded { .. } => {
                close(&mut out, &mut open_calls);
                assistant_open = false;
            }
        }
    }
    close(&mut out, &mut open_calls);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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
        }
    }

    #[test]
    fn tool_calls_after_a_message_belong_to_it_and_results_follow() {
        let events = vec![
            Event::UserMessage {
                message_id: "u".into(),
                content: vec![UserContent::Text { text: "hi".into() }],
            },
            Event::AgentMessage { message_id: "a".into(), text: "looking".into() },
            call("1"),
            call("2"),
            result("1"),
            result("2"),
        ];
        let messages = chat_messages("sys", &events);
        assert_eq!(messages.len(), 5);
        let ChatMessage::Assistant { tool_calls, .. } = &messages[2] else { panic!("{messages:?}") };
        assert_eq!(tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(messages[4], ChatMessage::Tool { call_id: "2".into(), content: "result 2".into() });
    }

    #[test]
    fn an_unanswered_call_gets_a_synthetic_result_before_the_next_user_message() {
        let events = vec![
            call("1"),
            Event::TurnEnded { stop_reason: crate::types::StopReason::Cancelled },
            Event::UserMessage { message_id: "u".into(), content: vec![] },
        ];
        let messages = chat_messages("sys", &events);
        assert_eq!(messages[2], ChatMessage::Tool { call_id: "1".into(), content: INTERRUPTED.into() });
        assert!(matches!(messages[3], ChatMessage::User { .. }));
    }
}
