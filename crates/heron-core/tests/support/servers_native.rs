//! The mocks of the servers whose streams are typed events: Anthropic's Messages API and
//! OpenAI's Responses API, each playing the same tool-calling turn as the others in
//! `servers.rs`.

use serde_json::{Value, json};

use super::super::server_mock::{Answer, MockServer, Seen};
use super::{ANSWER, KEY, NOTES, Played, openai_error};

/// An SSE body of named events, as Anthropic and the Responses API send them: each
/// event's `type` is also its `event:` name.
pub fn typed_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("message")))
        .collect()
}

/// Anthropic's error body.
fn anthropic_error(status: u16, kind: &str, message: &str) -> Answer {
    let body = json!({ "type": "error", "error": { "type": kind, "message": message } });
    Answer::Status(status, body.to_string())
}

/// The `tool_result` block answering `id` in an Anthropic request, as text.
fn anthropic_result(request: &Seen, id: &str) -> Option<String> {
    request.messages().iter().filter(|m| m["role"] == "user").find_map(|m| {
        m["content"].as_array()?.iter().find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id).map(
            |b| match &b["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
        )
    })
}

/// The signed thinking block the Anthropic mock thinks when asked to.
fn anthropic_thinking() -> Value {
    json!({ "type": "thinking", "thinking": "The notes are in a.txt.", "signature": "EqQBCkYIBRgCKkDmock==" })
}

/// Whether the last block of the request's last message carries a `cache_control`
/// breakpoint, so that the next request reads what this one wrote.
fn ends_with_breakpoint(request: &Seen) -> bool {
    let last = request.messages().last().and_then(|m| m["content"].as_array()).and_then(|c| c.last());
    last.is_some_and(|block| block.get("cache_control").is_some())
}

/// Anthropic's Messages API: the key in `x-api-key` with an `anthropic-version`, a
/// required `max_tokens`, the call's input streamed as partial JSON, and the result back
/// as a `tool_result` block of a user message ending on a cache breakpoint. With thinking
/// asked for, the model thinks first, and Anthropic refuses the follow-up unless the
/// signed thinking block opens the assistant message again, unchanged.
pub fn anthropic() -> Played {
    let server = MockServer::start(|n, request| {
        if request.target() != "/v1/messages" {
            return anthropic_error(404, "not_found_error", "Not found");
        }
        if request.header("x-api-key") != Some(KEY) || request.header("authorization").is_some() {
            return anthropic_error(401, "authentication_error", "invalid x-api-key");
        }
        if request.header("anthropic-version").is_none() || !request.body["max_tokens"].is_u64() {
            return anthropic_error(
                400,
                "invalid_request_error",
                "anthropic-version and max_tokens are required",
            );
        }
        let thinks = request.body["thinking"]["type"] == "enabled";
        let start = json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "usage": { "input_tokens": 40, "output_tokens": 1 } } });
        match n {
            0 => {
                let mut events = vec![start];
                let mut at = 0;
                if thinks {
                    events.extend([
                        json!({ "type": "content_block_start", "index": 0, "content_block":
                            { "type": "thinking", "thinking": "", "signature": "" } }),
                        json!({ "type": "content_block_delta", "index": 0, "delta":
                            { "type": "thinking_delta", "thinking": anthropic_thinking()["thinking"] } }),
                        json!({ "type": "content_block_delta", "index": 0, "delta":
                            { "type": "signature_delta", "signature": anthropic_thinking()["signature"] } }),
                        json!({ "type": "content_block_stop", "index": 0 }),
                    ]);
                    at = 1;
                }
                events.extend([
                    json!({ "type": "content_block_start", "index": at, "content_block":
                        { "type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {} } }),
                    json!({ "type": "content_block_delta", "index": at, "delta":
                        { "type": "input_json_delta", "partial_json": "{\"path\": \"a" } }),
                    json!({ "type": "ping" }),
                    json!({ "type": "content_block_delta", "index": at, "delta":
                        { "type": "input_json_delta", "partial_json": ".txt\"}" } }),
                    json!({ "type": "content_block_stop", "index": at }),
                    json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 9 } }),
                    json!({ "type": "message_stop" }),
                ]);
                Answer::Stream(typed_sse(&events))
            }
            _ => {
                let assistant = request.messages().iter().find(|m| m["role"] == "assistant");
                let opening = assistant.map(|m| m["content"][0].clone());
                if thinks && opening != Some(anthropic_thinking()) {
                    return anthropic_error(
                        400,
                        "invalid_request_error",
                        &format!("messages.1.content.0: expected `thinking`, found {opening:?}"),
                    );
                }
                if !ends_with_breakpoint(request) {
                    return anthropic_error(
                        400,
                        "invalid_request_error",
                        "expected a cache breakpoint at the end",
                    );
                }
                match anthropic_result(request, "toolu_01A") {
                    Some(result) if result.contains(NOTES) => Answer::Stream(typed_sse(&[
                        start,
                        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
                        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": ANSWER } }),
                        json!({ "type": "content_block_stop", "index": 0 }),
                        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn" }, "usage": { "output_tokens": 5 } }),
                        json!({ "type": "message_stop" }),
                    ])),
                    other => {
                        anthropic_error(400, "invalid_request_error", &format!("no tool_result: {other:?}"))
                    }
                }
            }
        }
    });
    let table = format!("kind = \"anthropic\"\nbase_url = \"{}/v1\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// The `function_call_output` answering `call_id` in a Responses request.
fn responses_result<'a>(request: &'a Seen, call_id: &str) -> Option<&'a str> {
    request.body["input"]
        .as_array()?
        .iter()
        .find(|item| item["type"] == "function_call_output" && item["call_id"] == call_id)
        .and_then(|item| item["output"].as_str())
}

/// The encrypted copy of the Responses mock's reasoning, sent only to a request that asks.
pub const ENCRYPTED_REASONING: &str = "gAAAAABmock-encrypted-reasoning";

/// OpenAI's Responses API, as a reasoning model: bearer auth, flat tools, the call's
/// arguments streamed in deltas, and the call and its output sent back as input items. The
/// model reasons before its call at any effort; with `store: false` the server keeps none
/// of it, so it wants the reasoning item back with the call, which only the encrypted copy
/// (asked for with `include`) makes possible.
pub fn responses() -> Played {
    let server = MockServer::start(|n, request| {
        if request.target() != "/v1/responses"
            || request.header("authorization") != Some(&format!("Bearer {KEY}"))
        {
            return openai_error(401, "Incorrect API key provided");
        }
        if request.body["tools"][0].get("function").is_some() || request.body.get("messages").is_some() {
            return openai_error(
                400,
                "Unsupported parameter: tools must be flat and `input` replaces `messages`",
            );
        }
        let done = |output: Value| {
            json!({ "type": "response.completed", "response": { "id": "resp_1", "status": "completed",
                "output": output, "usage": { "input_tokens": 30, "output_tokens": 7,
                "input_tokens_details": { "cached_tokens": 0 } } } })
        };
        let encrypted = request.body["include"]
            .as_array()
            .is_some_and(|i| i.contains(&json!("reasoning.encrypted_content")));
        let mut reasoning = json!({ "type": "reasoning", "id": "rs_1", "summary": [] });
        if encrypted {
            reasoning["encrypted_content"] = json!(ENCRYPTED_REASONING);
        }
        let item = json!({ "type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "read_file", "arguments": "" });
        match n {
            0 => Answer::Stream(typed_sse(&[
                json!({ "type": "response.created", "response": { "id": "resp_1", "status": "in_progress" } }),
                json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "reasoning", "id": "rs_1", "summary": [] } }),
                json!({ "type": "response.output_item.done", "output_index": 0, "item": reasoning }),
                json!({ "type": "response.output_item.added", "output_index": 1, "item": item }),
                json!({ "type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": "{\"path\":" }),
                json!({ "type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": "\"a.txt\"}" }),
                json!({ "type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 1, "arguments": "{\"path\":\"a.txt\"}" }),
                json!({ "type": "response.output_item.done", "output_index": 1, "item":
                    { "type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "read_file", "arguments": "{\"path\":\"a.txt\"}", "status": "completed" } }),
                done(json!([])),
            ])),
            _ => {
                let input = request.body["input"].as_array().cloned().unwrap_or_default();
                let at = |kind: &str| input.iter().position(|i| i["type"] == kind);
                let replayed = at("reasoning").is_some_and(|r| {
                    input[r]["encrypted_content"] == ENCRYPTED_REASONING
                        && at("function_call").is_some_and(|c| r < c)
                });
                if !replayed {
                    return openai_error(
                        400,
                        "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'.",
                    );
                }
                match responses_result(request, "call_r1") {
                    Some(result) if result.contains(NOTES) => Answer::Stream(typed_sse(&[
                        json!({ "type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": ANSWER }),
                        done(json!([])),
                    ])),
                    other => openai_error(
                        400,
                        &format!("No tool output found for function call call_r1: {other:?}"),
                    ),
                }
            }
        }
    });
    let table = format!("kind = \"openai-responses\"\nbase_url = \"{}/v1\"\n", server.origin);
    Played { server, table, requests: 2 }
}
