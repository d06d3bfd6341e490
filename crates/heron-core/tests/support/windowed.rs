//! A Chat Completions server with a small context window: a request whose body is over its
//! limit is refused as OpenAI refuses one (400, `context_length_exceeded`); a request for a
//! summary gets [`SUMMARY`]; a prompt naming a file gets a `read_file` call for it, and the
//! call's result gets [`READ`]. Shared by the engine's compaction tests and the binary's.

use serde_json::{Value, json};

use super::server_mock::{Answer, MockServer, Seen, sse};
use super::servers::{delta, finish, openai_error};

/// The summary the server writes when asked for one.
pub const SUMMARY: &str = "Earlier, the user had me read the big files one by one.";
/// What the server says once a file was read.
pub const READ: &str = "Read it.";
/// Words only a summary request carries.
pub const ASKS_FOR_SUMMARY: &str = "must be compacted";

/// The text of a Chat Completions message, whether its content is a string or parts.
pub fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// What the user typed in `message`: what follows the working context Heron may open the
/// message with (its last `</environment>` or `</project-instructions>`), which are not the
/// user's words.
pub fn prompt_of(message: &Value) -> String {
    let text = text_of(message);
    let end = ["</environment>", "</project-instructions>"]
        .iter()
        .filter_map(|tag| text.rfind(tag).map(|at| at + tag.len()))
        .max()
        .unwrap_or(0);
    text[end..].to_owned()
}

/// Whether `request` asks for a summary.
pub fn is_summary_request(request: &Seen) -> bool {
    request.messages().last().is_some_and(|m| m["role"] == "user" && text_of(m).contains(ASKS_FOR_SUMMARY))
}

/// A server refusing bodies over `limit` bytes. With `bytes_per_token`, every answer reports
/// the request's prompt tokens as its body's length over it.
pub fn start(limit: usize, bytes_per_token: Option<usize>) -> MockServer {
    MockServer::start(move |n, request| {
        if request.raw.len() > limit {
            return Answer::Status(
                400,
                json!({ "error": { "message": format!("This model's maximum context length is {} tokens. \
                    However, your messages resulted in {} tokens.", limit / 4, request.raw.len() / 4),
                    "type": "invalid_request_error", "code": "context_length_exceeded" } })
                .to_string(),
            );
        }
        let usage = bytes_per_token.map(|per| {
            json!({ "choices": [], "usage": { "prompt_tokens": request.raw.len() / per, "completion_tokens": 5 } })
        });
        let with_usage = |mut chunks: Vec<Value>| {
            chunks.extend(usage.clone());
            Answer::Stream(sse(&chunks))
        };
        if is_summary_request(request) {
            return with_usage(vec![delta(json!({ "content": SUMMARY })), finish("stop")]);
        }
        let Some(last) = request.messages().last() else { return openai_error(400, "no messages") };
        if last["role"] == "tool" {
            return with_usage(vec![delta(json!({ "content": READ })), finish("stop")]);
        }
        // The file named after the prompt's last "read " (a summary before it may say "read" too).
        let text = prompt_of(last);
        let Some(path) = text.rfind("read ").and_then(|at| text[at + 5..].split_whitespace().next()) else {
            return with_usage(vec![delta(json!({ "content": "Hello." })), finish("stop")]);
        };
        let id = format!("call_{n}");
        let arguments = json!({ "path": path }).to_string();
        with_usage(vec![
            delta(json!({ "tool_calls": [{ "index": 0, "id": id, "type": "function",
                "function": { "name": "read_file", "arguments": arguments } }] })),
            finish("tool_calls"),
        ])
    })
}

/// What the server says once every file a long turn named was read.
pub const READ_ALL: &str = "Read them all.";

/// The words of a prompt that asks for [`start_reading_in_one_turn`]'s long turn.
pub const READ_ALL_OF: &str = "read all of ";

/// A server refusing bodies over `limit` bytes whose model reads every file a prompt names
/// after [`READ_ALL_OF`] in one turn, a `read_file` call per request, and then says
/// [`READ_ALL`]: a long turn of tool calls, as a real coding session makes. It works out the
/// next file from its own latest call, which a compacted request keeps verbatim (the latest
/// step), and the list from the prompt, which a compacted turn keeps too.
pub fn start_reading_in_one_turn(limit: usize) -> MockServer {
    MockServer::start(move |n, request| {
        if request.raw.len() > limit {
            return Answer::Status(
                400,
                json!({ "error": { "message": format!("This model's maximum context length is {} tokens.", limit / 4),
                    "type": "invalid_request_error", "code": "context_length_exceeded" } })
                .to_string(),
            );
        }
        if is_summary_request(request) {
            return Answer::Stream(sse(&[delta(json!({ "content": SUMMARY })), finish("stop")]));
        }
        let messages = request.messages();
        let asked = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| {
                prompt_of(m).rfind(READ_ALL_OF).map(|at| prompt_of(m)[at + READ_ALL_OF.len()..].to_owned())
            })
            .next_back();
        let Some(asked) = asked else {
            return Answer::Stream(sse(&[delta(json!({ "content": "Hello." })), finish("stop")]));
        };
        let files: Vec<&str> = asked.split_whitespace().collect();
        // The file of the model's latest call, when the request ends with its result.
        let last_read = match messages.last() {
            Some(last) if last["role"] == "tool" => messages
                .iter()
                .rev()
                .find_map(|m| m["tool_calls"][0]["function"]["arguments"].as_str())
                .and_then(|arguments| serde_json::from_str::<Value>(arguments).ok())
                .and_then(|arguments| arguments["path"].as_str().map(str::to_owned)),
            _ => None,
        };
        let next = match &last_read {
            Some(path) => files.iter().position(|f| f == path).map_or(files.len(), |at| at + 1),
            None => 0,
        };
        let Some(path) = files.get(next) else {
            return Answer::Stream(sse(&[delta(json!({ "content": READ_ALL })), finish("stop")]));
        };
        let arguments = json!({ "path": path }).to_string();
        Answer::Stream(sse(&[
            delta(json!({ "tool_calls": [{ "index": 0, "id": format!("call_{n}"), "type": "function",
                "function": { "name": "read_file", "arguments": arguments } }] })),
            finish("tool_calls"),
        ]))
    })
}
