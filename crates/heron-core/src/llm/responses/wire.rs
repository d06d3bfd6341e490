//! The OpenAI Responses request body built from a [`ModelRequest`]: instructions, input
//! items, flat function tools and reasoning options. Pure data handling; the stream's side
//! is `events`.
//!
//! The body is a function of the request alone, and each input item a function of its own
//! message alone. So the same request gives byte-identical JSON, and a request that extends
//! the conversation repeats every earlier item byte for byte: OpenAI's automatic prompt
//! cache matches on the prompt's prefix, and anything that reshapes old items would miss it.

use serde_json::{Map, Value, json};

use crate::llm::{ChatMessage, ModelRequest, Reasoning, ToolCallRequest, ToolSpec, UserPart};

/// What the server must send back so reasoning can be replayed without server-side state.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// The JSON body of a streamed Responses request; `encrypted` asks for the reasoning's
/// encrypted copy.
pub(crate) fn request_body(request: &ModelRequest, encrypted: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("stream".into(), json!(true));
    // Heron keeps the conversation itself and sends it whole every time; letting OpenAI
    // store responses too would keep user data on its servers for nothing.
    body.insert("store".into(), json!(false));
    if let Some(instructions) = instructions(&request.messages) {
        body.insert("instructions".into(), json!(instructions));
    }
    let mut input = Vec::new();
    for message in &request.messages {
        push_items(message, &mut input);
    }
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    if let Some(effort) = &request.effort {
        // No `summary` is asked for: OpenAI refuses it with 400 for organizations it has
        // not verified, and a turn that fails is worse than one whose thoughts are hidden.
        body.insert("reasoning".into(), json!({ "effort": effort }));
    }
    if encrypted {
        // With `store: false` the server forgets its reasoning; the encrypted copy is what
        // lets the next request carry it back. A reasoning model reasons at its default
        // effort too, so this does not wait for an effort to be chosen.
        body.insert("include".into(), json!([ENCRYPTED_REASONING]));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_output_tokens".into(), json!(max_tokens));
    }
    Value::Object(body)
}

/// The system messages' text, joined, or `None` without any.
fn instructions(messages: &[ChatMessage]) -> Option<String> {
    let texts: Vec<&str> = messages
        .iter()
        .filter_map(|message| match message {
            ChatMessage::System { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// Appends the input items of one message: none for a system message (it went into
/// `instructions`), one for a user message or a tool result, and for an assistant message
/// its reasoning, its text and each of its calls, in the order the model produced them.
fn push_items(message: &ChatMessage, input: &mut Vec<Value>) {
    match message {
        ChatMessage::System { .. } => {}
        ChatMessage::User { parts } => {
            input.push(json!({ "role": "user", "content": parts.iter().map(user_part).collect::<Vec<_>>() }))
        }
        ChatMessage::Assistant { text, tool_calls, reasoning } => {
            if let Some(reasoning) = reasoning {
                input.extend(replayable_reasoning(reasoning));
            }
            if !text.is_empty() {
                input.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{ "type": "output_text", "text": text }],
                }));
            }
            input.extend(tool_calls.iter().map(function_call));
        }
        ChatMessage::Tool { call_id, content } => {
            input.push(json!({ "type": "function_call_output", "call_id": call_id, "output": content }))
        }
    }
}

fn user_part(part: &UserPart) -> Value {
    match part {
        UserPart::Text { text } => json!({ "type": "input_text", "text": text }),
        UserPart::Image { mime_type, data } => {
            json!({ "type": "input_image", "image_url": format!("data:{mime_type};base64,{data}") })
        }
    }
}

fn function_call(call: &ToolCallRequest) -> Value {
    json!({ "type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments })
}

/// A tool as the Responses API wants it: flat, not nested under `function`.
fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        // Left out, `strict` means true here: the server rewrites the schema so that every
        // property is required, which would force the model to fill optional arguments.
        "strict": false,
    })
}

/// The Responses reasoning items among an assistant message's reasoning details, verbatim.
/// Only items with encrypted content are replayed: with `store: false` the server looks an
/// item without it up by id and fails, since it kept nothing. Details of another API (an
/// earlier model of the session behind OpenRouter) are not this server's and are skipped.
fn replayable_reasoning(reasoning: &Reasoning) -> Vec<Value> {
    let items = match &reasoning.details {
        Some(Value::Array(items)) => items.as_slice(),
        Some(item @ Value::Object(_)) => std::slice::from_ref(item),
        _ => &[],
    };
    items
        .iter()
        .filter(|item| {
            item.get("type").and_then(Value::as_str) == Some("reasoning")
                && item.get("encrypted_content").and_then(Value::as_str).is_some_and(|c| !c.is_empty())
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_file() -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
        }
    }

    fn first_request() -> ModelRequest {
        ModelRequest {
            model: "gpt-test".into(),
            messages: vec![
                ChatMessage::System { text: "Be brief.".into() },
                ChatMessage::User { parts: vec![UserPart::Text { text: "Read a.txt".into() }] },
            ],
            tools: vec![read_file()],
            effort: Some("medium".into()),
            max_tokens: None,
        }
    }

    fn encode(value: &Value) -> String {
        serde_json::to_string(value).expect("JSON encodes")
    }

    #[test]
    fn the_same_request_gives_byte_identical_bodies() {
        let request = first_request();
        assert_eq!(encode(&request_body(&request, true)), encode(&request_body(&request.clone(), true)));
    }

    #[test]
    fn a_follow_up_request_repeats_the_earlier_prefix_byte_for_byte() {
        let first = first_request();
        let mut second = first.clone();
        let reasoning = Reasoning {
            text: String::new(),
            details: Some(
                json!([{ "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": [] }]),
            ),
        };
        second.messages.push(ChatMessage::Assistant {
            text: "Reading it.".into(),
            tool_calls: vec![ToolCallRequest {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a.txt"}"#.into(),
            }],
            reasoning: Some(reasoning),
        });
        second.messages.push(ChatMessage::Tool { call_id: "call_1".into(), content: "hello".into() });
        let (before, after) = (request_body(&first, true), request_body(&second, true));
        for field in ["instructions", "tools", "reasoning", "include"] {
            assert_eq!(encode(&before[field]), encode(&after[field]), "{field} changed");
        }
        let (old, new) =
            (before["input"].as_array().expect("items"), after["input"].as_array().expect("items"));
        assert_eq!(new.len(), old.len() + 4, "reasoning, text, call and result were added");
        for (at, item) in old.iter().enumerate() {
            assert_eq!(encode(item), encode(&new[at]), "input item {at} changed");
        }
    }

    #[test]
    fn assistant_items_come_as_reasoning_then_text_then_calls() {
        let mut items = Vec::new();
        let reasoning = Reasoning {
            text: "thought".into(),
            details: Some(json!([
                { "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": [{ "type": "summary_text", "text": "s" }] },
                { "type": "reasoning", "id": "rs_2", "summary": [] },
                { "type": "reasoning.text", "text": "from OpenRouter" },
            ])),
        };
        let message = ChatMessage::Assistant {
            text: "ok".into(),
            tool_calls: vec![ToolCallRequest { id: "c".into(), name: "f".into(), arguments: "{}".into() }],
            reasoning: Some(reasoning),
        };
        push_items(&message, &mut items);
        assert_eq!(
            items,
            [
                json!({ "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": [{ "type": "summary_text", "text": "s" }] }),
                json!({ "type": "message", "role": "assistant", "content": [{ "type": "output_text", "text": "ok" }] }),
                json!({ "type": "function_call", "call_id": "c", "name": "f", "arguments": "{}" }),
            ]
        );
    }

    #[test]
    fn reasoning_without_details_is_not_sent() {
        let mut items = Vec::new();
        let message = ChatMessage::Assistant {
            text: String::new(),
            tool_calls: Vec::new(),
            reasoning: Some(Reasoning { text: "plain thought".into(), details: None }),
        };
        push_items(&message, &mut items);
        assert!(items.is_empty(), "{items:?}");
    }

    #[test]
    fn options_are_sent_only_when_set() {
        let mut request = first_request();
        request.effort = None;
        request.tools.clear();
        request.messages.remove(0);
        let body = request_body(&request, false);
        for absent in ["instructions", "tools", "reasoning", "include", "max_output_tokens"] {
            assert!(body.get(absent).is_none(), "{absent} is sent");
        }
        request.max_tokens = Some(64);
        request.effort = Some("high".into());
        let body = request_body(&request, false);
        assert_eq!(body["max_output_tokens"], 64);
        assert_eq!(body["reasoning"], json!({ "effort": "high" }));
        assert!(body.get("include").is_none(), "encrypted reasoning was not asked for");
        assert_eq!(request_body(&request, true)["include"], json!([ENCRYPTED_REASONING]));
    }

    #[test]
    fn encrypted_reasoning_is_asked_for_at_the_default_effort_too() {
        let request = ModelRequest { effort: None, ..first_request() };
        let body = request_body(&request, true);
        assert_eq!(body["include"], json!([ENCRYPTED_REASONING]));
        assert!(body.get("reasoning").is_none(), "no effort is chosen for the model");
    }
}
