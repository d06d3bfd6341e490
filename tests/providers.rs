//! Model servers over the real binary: `heron acp` spawned against loopback mocks that
//! play Mistral, Azure and llama.cpp, each refusing what that server refuses; and the
//! README's per-server config examples, loaded with Heron's own config loader so that they
//! cannot rot.

use heron_core::config::Config;
use heron_core::llm::openai::flavor::Flavor;
use serde_json::{Value, json};

use crate::support::server_mock::{Answer, MockServer, Seen, sse, tool_result};
use crate::support::{Dirs, Process};

const KEY: &str = "sk-binary-servers-7788";

fn delta(delta: Value) -> Value {
    json!({ "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
}

fn finish(reason: &str) -> Value {
    json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": reason }] })
}

/// A home whose default model `net/m` is the provider described by `table` (the keys
/// after `kind`, `models`, `api_key_env`), with `a.txt` in the workspace.
fn home(table: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home(
        "config.toml",
        &format!(
            "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{table}"
        ),
    );
    dirs.write_home(".env", &format!("NET_KEY={KEY}\n"));
    std::fs::write(std::path::Path::new(&dirs.ws()).join("a.txt"), "hello from notes").expect("a.txt");
    dirs
}

/// Prompts once and returns (the streamed agent text, the prompt's answer), allowing any
/// permission the agent asks for.
fn prompt(dirs: &Dirs) -> (String, Value) {
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let session = heron.new_session(&dirs.ws());
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "read a.txt" }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": params }));
    let mut text = String::new();
    loop {
        let message = heron.next();
        if message["id"] == "p" && message.get("method").is_none() {
            return (text, message);
        }
        if message["method"] == "session/request_permission" {
            let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
            let allow = options.iter().find(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("allow")));
            let outcome = json!({ "outcome": { "outcome": "selected", "optionId": allow.map(|o| o["optionId"].clone()) } });
            heron.send(json!({ "jsonrpc": "2.0", "id": message["id"], "result": outcome }));
        }
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            text.push_str(update["content"]["text"].as_str().unwrap_or(""));
        }
    }
}

fn final_answer(request: &Seen, call_id: &str) -> Answer {
    match tool_result(request, call_id) {
        Some(result) if result.contains("hello from notes") => {
            Answer::Stream(sse(&[delta(json!({ "content": "It says hello." })), finish("stop")]))
        }
        other => Answer::Status(400, json!({ "message": format!("no result: {other:?}") }).to_string()),
    }
}

#[test]
fn a_mistral_turn_over_the_binary_sends_nothing_mistral_forbids() {
    let server = MockServer::start(|n, request| {
        let forbidden =
            ["stream_options", "max_completion_tokens"].into_iter().find(|f| request.body.get(*f).is_some());
        if let Some(field) = forbidden {
            let body = json!({ "object": "error", "message": { "detail": [{ "type": "extra_forbidden",
                "loc": ["body", field], "msg": "Extra inputs are not permitted" }] }, "type": "invalid_request_message_error" });
            return Answer::Status(422, body.to_string());
        }
        match n {
            0 => Answer::Stream(sse(&[
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "id": "Xy12Zw34q",
                "function": { "name": "read_file", "arguments": "{\"path\": \"a.txt\"}" }, "index": 0 }] },
                "finish_reason": "tool_calls" }] }),
            ])),
            _ => final_answer(request, "Xy12Zw34q"),
        }
    });
    let dirs = home(&format!("base_url = \"{}/v1\"\nflavor = \"mistral\"\n", server.origin));
    let (text, answer) = prompt(&dirs);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(text, "It says hello.");
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn an_azure_turn_over_the_binary_reaches_the_deployment_with_its_api_key() {
    let server = MockServer::start(|n, request| {
        let right_place =
            request.target() == "/openai/deployments/d1/chat/completions?api-version=2024-10-21";
        if !right_place || request.header("api-key") != Some(KEY) {
            return Answer::Status(
                404,
                json!({ "error": { "code": "404", "message": "Resource not found" } }).to_string(),
            );
        }
        match n {
            0 => Answer::Stream(sse(&[
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "id": "call_z",
                    "type": "function", "function": { "name": "read_file", "arguments": "{\"path\":\"a.txt\"}" } }] } }] }),
                finish("tool_calls"),
            ])),
            _ => final_answer(request, "call_z"),
        }
    });
    let base_url = format!("{}/openai/deployments/d1?api-version=2024-10-21", server.origin);
    let dirs = home(&format!("base_url = \"{base_url}\"\nflavor = \"azure\"\n"));
    let (text, answer) = prompt(&dirs);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(text, "It says hello.");
}

#[test]
fn a_llamacpp_error_event_fails_the_prompt_as_turn_failed_with_its_reason() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(format!(
            "event: error\ndata: {}\n\n",
            json!({ "error": { "code": 500, "message": format!("failed to load model; key {KEY}") } })
        ))
    });
    let dirs = home(&format!("base_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin));
    let (_, answer) = prompt(&dirs);
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "turn.failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed to load model"), "{answer}");
    assert!(!answer.to_string().contains(KEY), "the key never reaches the editor: {answer}");
}

/// The fenced TOML blocks between the README's config-examples markers.
fn readme_examples() -> Vec<String> {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let start = readme.find("<!-- config-examples -->").expect("the start marker");
    let end = readme.find("<!-- /config-examples -->").expect("the end marker");
    readme[start..end]
        .split("```toml\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_readme_server_example_loads_and_names_its_flavor() {
    let examples = readme_examples();
    assert_eq!(examples.len(), 7, "one example per server");
    for example in examples {
        let config = Config::parse(&example).unwrap_or_else(|e| panic!("{e}\n{example}"));
        let (name, provider) = config.providers.iter().next().expect("a provider");
        let expected = match name.as_str() {
            "openai" => Flavor::Openai,
            "azure" => Flavor::Azure,
            "mistral" => Flavor::Mistral,
            "deepseek" => Flavor::Deepseek,
            "openrouter" => Flavor::Openrouter,
            "ollama" => Flavor::Ollama,
            "llamacpp" => Flavor::Llamacpp,
            other => panic!("an example for no known server: {other}"),
        };
        assert_eq!(
            provider.effective_flavor(),
            Some(expected),
            "the example for {name} is read as its server"
        );
    }
}
