//! The OpenAI Chat Completions request body built from a [`ModelRequest`], shaped for the
//! server by a [`RequestShape`]. Pure data handling; the stream's side is `chunks`.

use serde_json::{Map, Value, json};

use super::flavor::{DropField, MaxTokensField, ReasoningField, RequestShape};
use crate::llm::{ChatMessage, ModelRequest, Reasoning, UserPart};

/// The JSON body of a streamed chat completion request.
pub(crate) fn request_body(request: &ModelRequest, shape: &RequestShape) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let messages = request.messages.iter().map(|m| message(m, shape.reasoning_field));
    body.insert("messages".into(), messages.collect());
    body.insert("stream".into(), json!(true));
    if shape.stream_options {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        });
        body.insert("tools".into(), tools.collect());
    }
    if let Some(effort) = &request.effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(max_tokens) = request.max_tokens {
        let field = match shape.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), json!(max_tokens));
    }
    drop_fields(&mut body, &shape.drop_fields);
    Value::Object(body)
}

/// Removes the configured fields: last, so that they go whichever part of the body (or
/// preset) added them.
fn drop_fields(body: &mut Map<String, Value>, fields: &[DropField]) {
    for field in fields {
        match field {
            DropField::Body(key) => {
                body.remove(key);
            }
            DropField::Message(key) => {
                let messages = body.get_mut("messages").and_then(Value::as_array_mut);
                for message in messages.into_iter().flatten() {
                    if let Value::Object(message) = message {
                        message.remove(key);
                    }
                }
            }
        }
    }
}

fn message(message: &ChatMessage, reasoning_field: ReasoningField) -> Value {
    match message {
        ChatMessage::System { text } => json!({ "role": "system", "content": text }),
        ChatMessage::User { parts } => json!({ "role": "user", "content": user_content(parts) }),
        ChatMessage::Assistant { text, tool_calls, reasoning } => {
            let mut value = assistant(text, tool_calls);
            if let Value::Object(fields) = &mut value {
                add_reasoning(fields, reasoning.as_ref(), !tool_calls.is_empty(), reasoning_field);
            }
            value
        }
        ChatMessage::Tool { call_id, content } => {
            json!({ "role": "tool", "tool_call_id": call_id, "content": content })
        }
    }
}

/// Passes an assistant message's reasoning back the way the server wants it, if at all.
/// DeepSeek's thinking mode refuses (400 "Missing reasoning_content") a message with tool
/// calls that lacks the field, even when the model thought nothing before them, so such a
/// message always carries it, empty if need be.
fn add_reasoning(
    fields: &mut Map<String, Value>,
    reasoning: Option<&Reasoning>,
    has_calls: bool,
    field: ReasoningField,
) {
    match field {
        ReasoningField::None => {}
        ReasoningField::ReasoningContent => {
            let text = reasoning.map_or("", |r| r.text.as_str());
            if has_calls || !text.is_empty() {
                fields.insert("reasoning_content".into(), json!(text));
            }
        }
        ReasoningField::ReasoningDetails => {
            if let Some(details) = reasoning.and_then(|r| r.details.as_ref()).filter(|d| !d.is_null()) {
                fields.insert("reasoning_details".into(), details.clone());
            }
        }
    }
}

fn assistant(text: &str, tool_calls: &[crate::llm::ToolCallRequest]) -> Value {
    match tool_calls {
        [] => json!({ "role": "assistant", "content": text }),
        _ => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            // Several servers reject an empty string next to tool calls; null is the norm.
            let content = if text.is_empty() { Value::Null } else { json!(text) };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
    }
}

/// Text-only content goes as one string, which every compatible server accepts; content
/// with images goes as the array of typed parts.
fn user_content(parts: &[UserPart]) -> Value {
    let has_image = parts.iter().any(|part| matches!(part, UserPart::Image { .. }));
    if !has_image {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| match part {
                UserPart::Text { text } => Some(text.as_str()),
                UserPart::Image { .. } => None,
            })
            .collect();
        return json!(texts.join("\n\n"));
    }
    parts
        .iter()
        .map(|part| match part {
            UserPart::Text { text } => json!({ "type": "text", "text": text }),
            UserPart::Image { mime_type, data } => json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{mime_type};base64,{data}") },
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_reasoning(field: ReasoningField) -> Value {
        let reasoning =
            Reasoning { text: "think".into(), details: Some(json!([{ "type": "reasoning.text" }])) };
        let message =
            ChatMessage::Assistant { text: "a".into(), tool_calls: Vec::new(), reasoning: Some(reasoning) };
        super::message(&message, field)
    }

    #[test]
    fn reasoning_goes_back_only_in_the_field_the_server_wants() {
        let none = with_reasoning(ReasoningField::None);
        assert!(none.get("reasoning_content").is_none() && none.get("reasoning_details").is_none());
        let content = with_reasoning(ReasoningField::ReasoningContent);
        assert_eq!(content["reasoning_content"], "think");
        assert!(content.get("reasoning_details").is_none());
        let details = with_reasoning(ReasoningField::ReasoningDetails);
        assert_eq!(details["reasoning_details"], json!([{ "type": "reasoning.text" }]));
        assert!(details.get("reasoning_content").is_none());
    }

    #[test]
    fn a_tool_call_without_thoughts_still_carries_reasoning_content_for_deepseek() {
        let call = crate::llm::ToolCallRequest { id: "c".into(), name: "t".into(), arguments: "{}".into() };
        let calls = ChatMessage::Assistant { text: String::new(), tool_calls: vec![call], reasoning: None };
        assert_eq!(super::message(&calls, ReasoningField::ReasoningContent)["reasoning_content"], "");
        assert!(super::message(&calls, ReasoningField::None).get("reasoning_content").is_none());
        let plain = ChatMessage::Assistant { text: "a".into(), tool_calls: Vec::new(), reasoning: None };
        assert!(super::message(&plain, ReasoningField::ReasoningContent).get("reasoning_content").is_none());
    }

    #[test]
    fn stream_options_and_the_token_field_follow_the_shape() {
        let request = ModelRequest {
            model: "m".into(),
            messages: Vec::new(),
            tools: Vec::new(),
            effort: None,
            max_tokens: Some(10),
        };
        let common = request_body(&request, &RequestShape::default());
        assert_eq!(common["max_tokens"], 10);
        assert!(common.get("stream_options").is_some());
        let shape = RequestShape {
            stream_options: false,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            ..RequestShape::default()
        };
        let shaped = request_body(&request, &shape);
        assert_eq!(shaped["max_completion_tokens"], 10);
        assert!(shaped.get("max_tokens").is_none() && shaped.get("stream_options").is_none());
    }

    #[test]
    fn dropped_fields_leave_the_body_and_every_message_whatever_added_them() {
        let request = ModelRequest {
            model: "m".into(),
            messages: vec![ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![crate::llm::ToolCallRequest {
                    id: "c".into(),
                    name: "t".into(),
                    arguments: "{}".into(),
                }],
                reasoning: None,
            }],
            tools: Vec::new(),
            effort: Some("high".into()),
            max_tokens: None,
        };
        let shape = RequestShape {
            reasoning_field: ReasoningField::ReasoningContent,
            drop_fields: vec![
                DropField::Body("reasoning_effort".into()),
                DropField::Body("stream_options".into()),
                DropField::Message("reasoning_content".into()),
            ],
            ..RequestShape::default()
        };
        let body = request_body(&request, &shape);
        for gone in ["reasoning_effort", "stream_options"] {
            assert!(body.get(gone).is_none(), "{gone} was sent: {body}");
        }
        let message = &body["messages"][0];
        assert!(message.get("reasoning_content").is_none(), "{message}");
        assert_eq!(message["tool_calls"][0]["id"], "c", "the rest of the message stays");
        assert_eq!(body["model"], "m");
    }

    #[test]
    fn user_text_parts_join_into_one_string_without_images() {
        let parts = [UserPart::Text { text: "a".into() }, UserPart::Text { text: "b".into() }];
        assert_eq!(user_content(&parts), json!("a\n\nb"));
    }
}
