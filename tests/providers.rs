//! Model servers over the real binary: `heron acp` spawned against the loopback mock of each
//! server people run (`support::servers`), each refusing what that server refuses; and the
//! README's per-server config examples, loaded with Heron's own config loader so that they
//! cannot rot.

use heron_core::config::{Config, ProviderKind};
use heron_core::llm::openai::flavor::Flavor;
use serde_json::{Value, json};

use crate::support::server_mock::{Answer, MockServer};
use crate::support::servers::{self, ANSWER, BEE, KEY, NOTES, Played};
use crate::support::{Dirs, Process};

/// A home whose default model `net/m` is the provider described by `table` (the keys
/// beside `models`, `api_key_env` and `max_retries`), with `a.txt` and `b.txt` in the
/// workspace.
fn home(table: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home(
        "config.toml",
        &format!(
            "default_model = \"net/m\"\n[providers.net]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{table}"
        ),
    );
    dirs.write_home(".env", &format!("NET_KEY={KEY}\n"));
    let ws = std::path::Path::new(&dirs.ws()).to_owned();
    std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
    std::fs::write(ws.join("b.txt"), BEE).expect("b.txt");
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

/// Plays one server's turn over the binary and checks it completed with the answer.
fn completes(play: fn() -> Played) {
    let Played { server, table, requests } = play();
    let dirs = home(&table);
    let (text, answer) = prompt(&dirs);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(text, ANSWER);
    assert_eq!(server.seen().len(), requests);
}

#[test]
fn an_openai_turn_over_the_binary_completes() {
    completes(servers::openai);
}

#[test]
fn an_azure_turn_over_the_binary_reaches_the_deployment_with_its_api_key() {
    completes(servers::azure);
}

#[test]
fn a_mistral_turn_over_the_binary_sends_nothing_mistral_forbids() {
    completes(servers::mistral);
}

#[test]
fn a_deepseek_turn_over_the_binary_passes_every_thought_back() {
    completes(servers::deepseek);
}

#[test]
fn an_openrouter_turn_over_the_binary_passes_reasoning_details_back() {
    completes(servers::openrouter);
}

#[test]
fn an_ollama_turn_over_the_binary_runs_parallel_calls_apart() {
    completes(servers::ollama);
}

#[test]
fn a_llamacpp_turn_over_the_binary_reads_object_arguments() {
    completes(servers::llamacpp);
}

#[test]
fn an_anthropic_turn_over_the_binary_completes() {
    completes(servers::anthropic);
}

#[test]
fn an_openai_responses_turn_over_the_binary_completes() {
    completes(servers::responses);
}

#[test]
fn a_llamacpp_error_event_fails_the_prompt_as_turn_failed_with_its_reason() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(format!(
            "event: error\ndata: {}\n\n",
            json!({ "error": { "code": 500, "message": format!("failed to load model; key {KEY}") } })
        ))
    });
    let dirs =
        home(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin));
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
    assert_eq!(examples.len(), 9, "one example per server and native kind");
    for example in examples {
        let config = Config::parse(&example).unwrap_or_else(|e| panic!("{e}\n{example}"));
        let (name, provider) = config.providers.iter().next().expect("a provider");
        let native = match name.as_str() {
            "anthropic" => Some(ProviderKind::Anthropic),
            "responses" => Some(ProviderKind::OpenaiResponses),
            _ => None,
        };
        if let Some(kind) = native {
            assert_eq!(provider.kind, kind, "the example for {name} is its kind");
            assert!(provider.endpoint().is_some_and(|url| url.starts_with("https://")), "{name}");
            continue;
        }
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

#[test]
fn flags_shape_every_request_the_appended_system_prompt_and_the_token_limit() {
    let server = MockServer::start(|_, request| {
        let system = request.messages().first().and_then(|m| m["content"].as_str()).unwrap_or("");
        if !system.ends_with("Answer in French.") || request.body["max_tokens"] != 77 {
            return Answer::Status(
                400,
                json!({ "message": format!("unshaped: {}", request.body) }).to_string(),
            );
        }
        Answer::Stream(crate::support::server_mock::sse(&[
            servers::delta(json!({ "content": "Bonjour." })),
            servers::finish("stop"),
        ]))
    });
    let dirs = home(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin));
    let ws = dirs.ws();
    let args =
        ["-m", "net/m", "--append-system-prompt", "Answer in French.", "--max-tokens", "77", "-cwd", &ws];
    let mut heron = Process::spawn(&dirs.home(), &args);
    let session = heron.new_session(&ws);
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "hi" }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": params }));
    let answer = loop {
        let message = heron.next();
        if message["id"] == "p" {
            break message;
        }
    };
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(server.seen().len(), 1);
}
