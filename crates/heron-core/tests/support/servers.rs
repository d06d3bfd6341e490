//! One mock per model server people run, each playing that server's own stream and error
//! format and refusing what that server refuses (with its error body), so a request of the
//! wrong shape fails the turn. Every mock plays the same tool-calling turn: the model asks
//! for `read_file` of `a.txt`, and answers [`ANSWER`] once the result carrying [`NOTES`]
//! came back. Shared by the engine's tests and the binary's.

use serde_json::{Value, json};

use super::server_mock::{Answer, MockServer, Seen, sse, tool_result};

// Anthropic's and the Responses API's mocks, whose streams are typed events.
#[path = "servers_native.rs"]
pub mod native;
pub use native::{anthropic, responses};

/// The key every mock expects.
pub const KEY: &str = "sk-servers-test-5150";
/// What `a.txt` holds in the workspace.
pub const NOTES: &str = "hello from notes";
/// What `b.txt` holds.
pub const BEE: &str = "bee";
/// The final answer of every mock.
pub const ANSWER: &str = "The notes say hello.";

/// A running mock and the keys of its `[providers.NAME]` table (everything but `models`,
/// `api_key_env` and `max_retries`).
pub struct Played {
    /// The mock.
    pub server: MockServer,
    /// `kind`, `base_url`, `flavor`, ...
    pub table: String,
    /// How many requests the turn takes.
    pub requests: usize,
}

/// The error body OpenAI-style servers send.
pub fn openai_error(status: u16, message: &str) -> Answer {
    Answer::Status(
        status,
        json!({ "error": { "message": message, "type": "invalid_request_error" } }).to_string(),
    )
}

/// A chunk carrying `delta` for choice 0.
pub fn delta(delta: Value) -> Value {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
}

/// A chunk ending choice 0 with `reason`.
pub fn finish(reason: &str) -> Value {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": {}, "finish_reason": reason }] })
}

/// A chunk with a `read_file` call piece.
pub fn call(index: u32, id: &str, arguments: Value) -> Value {
    delta(json!({ "tool_calls": [{ "index": index, "id": id, "type": "function",
        "function": { "name": "read_file", "arguments": arguments } }] }))
}

/// The final answer's stream, once the tool result `call_id` came back with the notes.
pub fn final_answer(request: &Seen, call_id: &str) -> Answer {
    match tool_result(request, call_id) {
        Some(result) if result.contains(NOTES) => {
            Answer::Stream(sse(&[delta(json!({ "content": ANSWER })), finish("stop")]))
        }
        other => openai_error(400, &format!("no tool result for {call_id}: {other:?}")),
    }
}

/// OpenAI: bearer auth, `stream_options` for usage, the tool result on the follow-up.
pub fn openai() -> Played {
    let server = MockServer::start(|n, request| {
        if request.header("authorization") != Some(&format!("Bearer {KEY}")) {
            return openai_error(401, "Incorrect API key provided");
        }
        if request.body["stream_options"]["include_usage"] != true
            || request.target() != "/v1/chat/completions"
        {
            return openai_error(400, "expected stream_options on /v1/chat/completions");
        }
        match n {
            0 => Answer::Stream(sse(&[
                call(0, "call_abc", json!("")),
                call(0, "call_abc", json!("{\"path\":\"a.txt\"}")),
                finish("tool_calls"),
                json!({ "choices": [], "usage": { "prompt_tokens": 5, "completion_tokens": 2 } }),
            ])),
            _ => final_answer(request, "call_abc"),
        }
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"openai\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// Azure: the key in `api-key`, and `api-version` kept on the deployment path.
pub fn azure() -> Played {
    let server = MockServer::start(|n, request| {
        if request.target() != "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21" {
            return Answer::Status(
                404,
                json!({ "error": { "code": "404", "message": "Resource not found" } }).to_string(),
            );
        }
        if request.header("api-key") != Some(KEY) || request.header("authorization").is_some() {
            return Answer::Status(
                401,
                json!({ "error": { "code": "401", "message": "Access denied due to invalid subscription key" } })
                    .to_string(),
            );
        }
        match n {
            // Azure's first chunk carries prompt filter results and no choices.
            0 => Answer::Stream(sse(&[
                json!({ "choices": [], "prompt_filter_results": [{ "prompt_index": 0 }] }),
                call(0, "call_az", json!("{\"path\":\"a.txt\"}")),
                finish("tool_calls"),
            ])),
            _ => final_answer(request, "call_az"),
        }
    });
    let base_url = format!("{}/openai/deployments/gpt-4o?api-version=2024-10-21", server.origin);
    let table = format!("kind = \"openai\"\nbase_url = \"{base_url}\"\nflavor = \"azure\"\n");
    Played { server, table, requests: 2 }
}

/// Mistral's 422 for a field it does not know.
fn extra_forbidden(field: &str) -> Answer {
    let body = json!({ "object": "error", "message": { "detail": [{ "type": "extra_forbidden",
        "loc": ["body", field], "msg": "Extra inputs are not permitted" }] }, "type": "invalid_request_message_error" });
    Answer::Status(422, body.to_string())
}

/// The request fields Mistral's chat completions endpoint documents; it refuses any other
/// with 422 `extra_forbidden`.
const MISTRAL_FIELDS: [&str; 18] = [
    "model",
    "messages",
    "temperature",
    "top_p",
    "max_tokens",
    "stream",
    "stop",
    "random_seed",
    "response_format",
    "tools",
    "tool_choice",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "prediction",
    "parallel_tool_calls",
    "safe_prompt",
    "prompt_mode",
];

/// The keys a Mistral message may have, whatever its role.
const MISTRAL_MESSAGE_FIELDS: [&str; 6] = ["role", "content", "tool_calls", "tool_call_id", "name", "prefix"];

/// Mistral's own call ids, 9 letters and digits: the only ones it takes back.
pub const MISTRAL_CALL_ID: &str = "aB3dE5fG7";

/// What Mistral refuses in a request: a field it does not document, a message key it does
/// not know (`reasoning_content`), or a tool-call id that is not 9 letters and digits.
fn mistral_refusal(request: &Seen) -> Option<Answer> {
    let fields = request.body.as_object().map(|body| body.keys().cloned().collect::<Vec<_>>());
    if let Some(field) =
        fields.unwrap_or_default().into_iter().find(|f| !MISTRAL_FIELDS.contains(&f.as_str()))
    {
        return Some(extra_forbidden(&field));
    }
    for (at, message) in request.messages().iter().enumerate() {
        let keys = message.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        if let Some(key) = keys.iter().find(|k| !MISTRAL_MESSAGE_FIELDS.contains(&k.as_str())) {
            return Some(extra_forbidden(&format!("messages.{at}.{key}")));
        }
        let calls = message["tool_calls"].as_array().into_iter().flatten().map(|call| &call["id"]);
        for id in calls.chain(message.get("tool_call_id")) {
            let id = id.as_str().unwrap_or_default();
            if id.len() != 9 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                let text = format!("Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9.");
                return Some(Answer::Status(
                    400,
                    json!({ "object": "error", "message": text, "type": "invalid_request_message_error",
                        "param": null, "code": "3280" })
                    .to_string(),
                ));
            }
        }
    }
    None
}

/// Mistral: 422 for any field it does not document (`stream_options`,
/// `max_completion_tokens`, `reasoning_effort`, `reasoning_content` in a message), 400 for a
/// tool-call id not its own shape; its own 9-character ids must come back as they came.
pub fn mistral() -> Played {
    let server = MockServer::start(|n, request| {
        if let Some(refused) = mistral_refusal(request) {
            return refused;
        }
        match n {
            0 => Answer::Stream(sse(&[
                delta(json!({ "role": "assistant", "content": "" })),
                // Mistral sends whole calls with 9-character ids.
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "id": MISTRAL_CALL_ID, "function":
                    { "name": "read_file", "arguments": "{\"path\": \"a.txt\"}" }, "index": 0 }] },
                    "finish_reason": "tool_calls" }], "usage": { "prompt_tokens": 9, "completion_tokens": 3 } }),
            ])),
            _ => {
                // The last assistant message is the call this turn made; a session that
                // came from another model has older ones before it.
                let assistant = request.messages().iter().rfind(|m| m["role"] == "assistant");
                let id = assistant.and_then(|m| m["tool_calls"][0]["id"].as_str());
                if id != Some(MISTRAL_CALL_ID) {
                    return Answer::Status(
                        400,
                        json!({ "message": format!("bad tool call id {id:?}") }).to_string(),
                    );
                }
                final_answer(request, MISTRAL_CALL_ID)
            }
        }
    });
    // The flavor comes from the host in real use; the loopback mock says it.
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"mistral\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// The prompt tokens every request of the DeepSeek mock takes.
pub const DEEPSEEK_PROMPT_TOKENS: u64 = 1000;
/// The prompt tokens DeepSeek serves from its cache on the mock's second and third request
/// (its cache works in units of 64 tokens; the first request finds it empty).
pub const DEEPSEEK_CACHE_HITS: u64 = 768;

/// DeepSeek's usage chunk: the prompt's cache hits and misses in fields of its own, not in
/// `prompt_tokens_details`.
fn deepseek_usage(hits: u64) -> Value {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {
        "prompt_tokens": DEEPSEEK_PROMPT_TOKENS, "completion_tokens": 20, "total_tokens": DEEPSEEK_PROMPT_TOKENS + 20,
        "prompt_cache_hit_tokens": hits, "prompt_cache_miss_tokens": DEEPSEEK_PROMPT_TOKENS - hits,
        "completion_tokens_details": { "reasoning_tokens": 5 } } })
}

/// DeepSeek thinking mode: every tool-calling message must come back with its `reasoning_content`, even an empty one.
pub fn deepseek() -> Played {
    let server = MockServer::start(|n, request| {
        let assistants: Vec<&Value> = request
            .messages()
            .iter()
            .filter(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
            .collect();
        for (at, message) in assistants.iter().enumerate() {
            // The first call came after a thought; the second after none, which DeepSeek
            // still wants marked with an empty `reasoning_content`.
            let expected = if at == 0 { "I should read a.txt." } else { "" };
            if message.get("reasoning_content").and_then(Value::as_str) != Some(expected) {
                let text = format!(
                    "Missing `reasoning_content` field in the assistant message at message index {at}. For more \
                     information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                );
                return Answer::Status(
                    400,
                    json!({ "error": { "message": text, "type": "invalid_request_error", "param": null,
                        "code": "invalid_request_error" } })
                    .to_string(),
                );
            }
        }
        match n {
            0 => Answer::Stream(sse(&[
                delta(json!({ "role": "assistant", "content": null, "reasoning_content": "I should " })),
                delta(json!({ "content": null, "reasoning_content": "read a.txt." })),
                call(0, "call_00_ds", json!("{\"path\":")),
                delta(json!({ "tool_calls": [{ "index": 0, "function": { "arguments": "\"a.txt\"}" } }] })),
                finish("tool_calls"),
                deepseek_usage(0),
            ])),
            1 => Answer::Stream(sse(&[
                delta(json!({ "role": "assistant", "content": null, "reasoning_content": "" })),
                call(0, "call_01_ds", json!("{\"path\":\"b.txt\"}")),
                finish("tool_calls"),
                deepseek_usage(DEEPSEEK_CACHE_HITS),
            ])),
            _ => match final_answer(request, "call_00_ds") {
                Answer::Stream(_) => Answer::Stream(sse(&[
                    delta(json!({ "content": ANSWER })),
                    finish("stop"),
                    deepseek_usage(DEEPSEEK_CACHE_HITS),
                ])),
                refused => refused,
            },
        }
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}\"\nflavor = \"deepseek\"\n", server.origin);
    Played { server, table, requests: 3 }
}

/// The `content` of each assistant message in `request` that calls tools without saying
/// anything: `None` where the key is absent.
fn tool_only_contents(request: &Seen) -> Vec<Option<&Value>> {
    let tool_only = |m: &&Value| {
        m["role"] == "assistant"
            && m.get("tool_calls").is_some()
            && m["content"].as_str().is_none_or(str::is_empty)
    };
    request.messages().iter().filter(tool_only).map(|m| m.get("content")).collect()
}

/// OpenRouter: `reasoning_details` must come back merged; keep-alive comments are skipped.
/// An empty string beside tool calls becomes an empty text block, which the Anthropic and
/// Bedrock models behind it refuse.
pub fn openrouter() -> Played {
    let server = MockServer::start(|n, request| match n {
        _ if tool_only_contents(request).contains(&Some(&json!(""))) => {
            openai_error(400, "messages: text content blocks must be non-empty")
        }
        0 => {
            let mut body = ": OPENROUTER PROCESSING\n\n".to_owned();
            body.push_str(&sse(&[
                delta(json!({ "role": "assistant", "content": "", "reasoning": "Read it.",
                    "reasoning_details": [{ "type": "reasoning.text", "text": "Read it.", "format": "anthropic-claude-v1", "index": 0 }] })),
                delta(json!({ "content": "", "reasoning_details": [{ "type": "reasoning.text", "signature": "sig-1", "index": 0 }] })),
                call(0, "toolu_01", json!("{\"path\":\"a.txt\"}")),
                finish("tool_calls"),
            ]));
            Answer::Stream(body)
        }
        _ => {
            let assistant = request.messages().iter().find(|m| m["role"] == "assistant");
            let details = assistant.map(|m| m["reasoning_details"].clone());
            let expected = json!([{ "type": "reasoning.text", "text": "Read it.", "format": "anthropic-claude-v1",
                "index": 0, "signature": "sig-1" }]);
            if details != Some(expected) {
                return openai_error(400, &format!("thinking blocks must come back: {details:?}"));
            }
            final_answer(request, "toolu_01")
        }
    });
    let table =
        format!("kind = \"openai\"\nbase_url = \"{}/api/v1\"\nflavor = \"openrouter\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// OpenRouter in front of Gemini: the thought signature travels as a `reasoning.encrypted`
/// detail beside the summary, and Gemini refuses a function call sent back without it.
pub fn openrouter_gemini() -> Played {
    let server = MockServer::start(|n, request| match n {
        0 => Answer::Stream(sse(&[
            delta(json!({ "role": "assistant", "content": "", "reasoning": "**Reading** the notes",
                "reasoning_details": [{ "type": "reasoning.text", "text": "**Reading** the notes",
                    "format": "google-gemini-v1", "index": 0 }] })),
            delta(json!({ "content": "", "reasoning_details": [{ "type": "reasoning.encrypted",
                "data": "CiQB0e2Kb7gemini-thought-signature==", "id": "tool_read_file_x1",
                "format": "google-gemini-v1", "index": 1 }] })),
            call(0, "tool_read_file_x1", json!("{\"path\":\"a.txt\"}")),
            finish("tool_calls"),
        ])),
        _ => {
            let assistant = request.messages().iter().find(|m| m["role"] == "assistant");
            let details = assistant.map(|m| m["reasoning_details"].clone());
            let expected = json!([
                { "type": "reasoning.text", "text": "**Reading** the notes", "format": "google-gemini-v1", "index": 0 },
                { "type": "reasoning.encrypted", "data": "CiQB0e2Kb7gemini-thought-signature==",
                    "id": "tool_read_file_x1", "format": "google-gemini-v1", "index": 1 },
            ]);
            if details != Some(expected) {
                return openai_error(
                    400,
                    &format!(
                        "Function call is missing a thought_signature in functionCall parts: {details:?}"
                    ),
                );
            }
            final_answer(request, "tool_read_file_x1")
        }
    });
    let table =
        format!("kind = \"openai\"\nbase_url = \"{}/api/v1\"\nflavor = \"openrouter\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// Ollama: parallel calls all at index 0, told apart by id.
pub fn ollama() -> Played {
    let server = MockServer::start(|n, request| match n {
        0 => Answer::Stream(sse(&[
            call(0, "call_one", json!("{\"path\":\"a.txt\"}")),
            call(0, "call_two", json!("{\"path\":\"b.txt\"}")),
            finish("tool_calls"),
        ])),
        _ => match tool_result(request, "call_two") {
            Some(bee) if bee.contains("bee") => final_answer(request, "call_one"),
            other => openai_error(400, &format!("no second result: {other:?}")),
        },
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"ollama\"\n", server.origin);
    Played { server, table, requests: 2 }
}

/// llama.cpp: arguments as an object, CRLF lines and pings. A tool-only message's content
/// must be a string: llama-cpp-python's server answers 500 to `null` or no content (its
/// request model wants a string), so the follow-up of every tool call would fail.
pub fn llamacpp() -> Played {
    let server = MockServer::start(|n, request| match n {
        _ if tool_only_contents(request).iter().any(|content| !content.is_some_and(Value::is_string)) => {
            Answer::Status(
                500,
                json!({ "detail": "messages.1.content: Input should be a valid string" }).to_string(),
            )
        }
        0 => {
            let chunks = [call(0, "llama_1", json!({ "path": "a.txt" })), finish("tool_calls")];
            let mut body = ": ping\r\n\r\n".to_owned();
            for chunk in chunks {
                body.push_str(&format!("data: {chunk}\r\n\r\n"));
            }
            body.push_str("data: [DONE]\r\n\r\n");
            Answer::Stream(body)
        }
        _ => final_answer(request, "llama_1"),
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin);
    Played { server, table, requests: 2 }
}
