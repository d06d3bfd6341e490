//! One tool-calling turn against each model server people run, through the session API:
//! a loopback mock plays the server's own stream and error format and refuses a request
//! that server would refuse (with that server's error body), so a wrong shape fails the
//! turn. Each turn asks for `read_file`, runs it, and the second request must carry the
//! result before the final answer.

use std::sync::Arc;
use std::time::Duration;

use heron_core::config::Home;
use heron_core::session::update::TurnUpdate;
use heron_core::session::{ManagerOptions, OpenOptions, PromptError};
use heron_core::tools::editor::NoEditor;
use heron_core::types::{PromptInput, StopReason, UserContent};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::server_mock::{Answer, MockServer, Seen, sse, tool_result};

const KEY: &str = "sk-servers-test-5150";
const NOTES: &str = "hello from notes";

/// Runs one prompt against `server` configured by `provider` (the keys of its table after
/// `kind`, `models` and `api_key_env`); returns what streamed and how the prompt ended.
async fn turn(provider: &str) -> (String, Result<StopReason, PromptError>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home::at(dir.path().join("home"));
    std::fs::create_dir_all(home.root()).expect("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
    std::fs::write(ws.join("b.txt"), "bee").expect("b.txt");
    let config = format!(
        "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{provider}"
    );
    std::fs::write(home.config_path(), config).expect("config");
    std::fs::write(home.env_path(), format!("NET_KEY={KEY}\n")).expect(".env");
    let manager = crate::support::manager_for(&home, ManagerOptions::default()).await;
    let options = OpenOptions {
        cwd: ws,
        additional_directories: Vec::new(),
        editor: Arc::new(NoEditor),
        mcp_servers: Vec::new(),
    };
    let session = manager.create(options).await.expect("a session");
    let (updates, mut stream) = mpsc::unbounded_channel();
    let input = vec![PromptInput::Content(UserContent::Text { text: "read the notes".into() })];
    let queued = session.prompt(input, updates);
    let mut text = String::new();
    while let Some(update) =
        tokio::time::timeout(Duration::from_secs(10), stream.recv()).await.expect("the turn streams")
    {
        match update {
            TurnUpdate::Flushed(done) => {
                let _ = done.send(());
            }
            TurnUpdate::MessageChunk { text: piece, .. } => text.push_str(&piece),
            _ => {}
        }
    }
    let result = queued.result.await.expect("answered");
    queued.delivered.done();
    (text, result)
}

/// The error body OpenAI-style servers send.
fn openai_error(status: u16, message: &str) -> Answer {
    Answer::Status(
        status,
        json!({ "error": { "message": message, "type": "invalid_request_error" } }).to_string(),
    )
}

fn delta(delta: Value) -> Value {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
}

fn finish(reason: &str) -> Value {
    json!({ "id": "c", "object": "chat.completion.chunk", "choices": [{ "index": 0, "delta": {}, "finish_reason": reason }] })
}

fn call(index: u32, id: &str, arguments: Value) -> Value {
    delta(json!({ "tool_calls": [{ "index": index, "id": id, "type": "function",
        "function": { "name": "read_file", "arguments": arguments } }] }))
}

/// The final answer's stream, once the tool result `call_id` came back with the notes.
fn final_answer(request: &Seen, call_id: &str) -> Answer {
    match tool_result(request, call_id) {
        Some(result) if result.contains(NOTES) => {
            Answer::Stream(sse(&[delta(json!({ "content": "The notes say hello." })), finish("stop")]))
        }
        other => openai_error(400, &format!("no tool result for {call_id}: {other:?}")),
    }
}

fn assert_completed(outcome: (String, Result<StopReason, PromptError>), server: &MockServer) {
    let (text, result) = outcome;
    assert_eq!(result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn));
    assert_eq!(text, "The notes say hello.");
    assert_eq!(server.seen().len(), 2, "a tool request and the answer");
}

#[tokio::test]
async fn openai_gets_bearer_auth_usage_options_and_the_tool_result() {
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
    let outcome = turn(&format!("base_url = \"{}/v1\"\nflavor = \"openai\"\n", server.origin)).await;
    assert_completed(outcome, &server);
}

#[tokio::test]
async fn azure_gets_its_api_key_header_and_keeps_api_version_on_the_deployment_path() {
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
    let outcome = turn(&format!("base_url = \"{base_url}\"\nflavor = \"azure\"\n")).await;
    assert_completed(outcome, &server);
}

/// Mistral's 422 for a field it does not know.
fn extra_forbidden(field: &str) -> Answer {
    let body = json!({ "object": "error", "message": { "detail": [{ "type": "extra_forbidden",
        "loc": ["body", field], "msg": "Extra inputs are not permitted" }] }, "type": "invalid_request_message_error" });
    Answer::Status(422, body.to_string())
}

#[tokio::test]
async fn mistral_gets_no_fields_it_forbids_and_its_short_call_ids_come_back_as_they_came() {
    let server = MockServer::start(|n, request| {
        for field in ["stream_options", "max_completion_tokens"] {
            if request.body.get(field).is_some() {
                return extra_forbidden(field);
            }
        }
        if request.messages().iter().any(|m| m.get("reasoning_content").is_some()) {
            return extra_forbidden("messages.2.assistant.reasoning_content");
        }
        match n {
            0 => Answer::Stream(sse(&[
                delta(json!({ "role": "assistant", "content": "" })),
                // Mistral sends whole calls with 9-character ids.
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "id": "aB3dE5fG7", "function":
                    { "name": "read_file", "arguments": "{\"path\": \"a.txt\"}" }, "index": 0 }] },
                    "finish_reason": "tool_calls" }], "usage": { "prompt_tokens": 9, "completion_tokens": 3 } }),
            ])),
            _ => {
                let assistant = request.messages().iter().find(|m| m["role"] == "assistant");
                let id = assistant.and_then(|m| m["tool_calls"][0]["id"].as_str());
                if id != Some("aB3dE5fG7") {
                    return Answer::Status(
                        400,
                        json!({ "message": format!("bad tool call id {id:?}") }).to_string(),
                    );
                }
                final_answer(request, "aB3dE5fG7")
            }
        }
    });
    // The flavor comes from the host in real use; the loopback mock says it.
    let outcome = turn(&format!("base_url = \"{}/v1\"\nflavor = \"mistral\"\n", server.origin)).await;
    assert_completed(outcome, &server);
}

#[tokio::test]
async fn deepseek_gets_every_tool_calling_message_back_with_reasoning_content_even_an_empty_one() {
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
            ])),
            1 => Answer::Stream(sse(&[
                delta(json!({ "role": "assistant", "content": null, "reasoning_content": "" })),
                call(0, "call_01_ds", json!("{\"path\":\"b.txt\"}")),
                finish("tool_calls"),
            ])),
            _ => final_answer(request, "call_00_ds"),
        }
    });
    let (text, result) = turn(&format!("base_url = \"{}\"\nflavor = \"deepseek\"\n", server.origin)).await;
    assert_eq!(result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn));
    assert_eq!(text, "The notes say hello.");
    assert_eq!(server.seen().len(), 3, "two tool requests and the answer");
}

#[tokio::test]
async fn openrouter_gets_its_reasoning_details_back_and_keep_alive_comments_are_skipped() {
    let server = MockServer::start(|n, request| match n {
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
    let outcome = turn(&format!("base_url = \"{}/api/v1\"\nflavor = \"openrouter\"\n", server.origin)).await;
    assert_completed(outcome, &server);
}

#[tokio::test]
async fn ollama_parallel_calls_at_index_zero_run_as_separate_calls() {
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
    let outcome = turn(&format!("base_url = \"{}/v1\"\nflavor = \"ollama\"\n", server.origin)).await;
    assert_completed(outcome, &server);
}

#[tokio::test]
async fn llamacpp_object_arguments_crlf_lines_and_pings_make_one_call() {
    let server = MockServer::start(|n, request| match n {
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
    let outcome = turn(&format!("base_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin)).await;
    assert_completed(outcome, &server);
}

#[tokio::test]
async fn a_llamacpp_error_field_at_status_200_fails_the_turn_with_its_reason() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(
            "error: {\"code\":500,\"message\":\"the request exceeds the available context size\",\"type\":\"exceed_context_size_error\"}\n\n"
                .to_owned(),
        )
    });
    let (_, result) = turn(&format!("base_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin)).await;
    let error = result.expect_err("the turn fails").to_string();
    assert!(error.contains("exceeds the available context size"), "{error}");
}

#[tokio::test]
async fn an_openrouter_finish_reason_error_fails_with_the_upstream_reason_not_an_empty_end() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(sse(&[
            delta(json!({ "content": "Par" })),
            json!({ "error": { "code": 502, "message": "Provider returned error",
                "metadata": { "raw": format!("upstream overloaded; key {KEY}"), "provider_name": "X" } },
                "choices": [{ "index": 0, "delta": { "content": "" }, "finish_reason": "error" }] }),
        ]))
    });
    let (_, result) =
        turn(&format!("base_url = \"{}/api/v1\"\nflavor = \"openrouter\"\n", server.origin)).await;
    let error = result.expect_err("the turn fails").to_string();
    assert!(error.contains("Provider returned error: upstream overloaded"), "{error}");
    assert!(!error.contains(KEY), "the key is redacted: {error}");
}
