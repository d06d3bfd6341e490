//! Model servers over the real binary: `heron acp` spawned against the loopback mock of each
//! server people run (`support::servers`), each refusing what that server refuses; and the
//! per-server config examples of `docs/configuration.md`, loaded with Heron's own config
//! loader and each run through a tool-calling turn against its server's mock, so that they
//! cannot rot.

use heron_core::config::flavor::Flavor;
use heron_core::config::{Config, ProviderKind};
use serde_json::{Value, json};

use crate::support::server_mock::{Answer, MockServer};
use crate::support::servers::{self, ANSWER, BEE, KEY, NOTES, Played};
use crate::support::{Dirs, Process};

/// A home with `config` as its `config.toml`, `KEY` under `key_name` in its `.env`, and
/// `a.txt` and `b.txt` in the workspace.
fn home_of(config: &str, key_name: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home("config.toml", config);
    dirs.write_home(".env", &format!("{key_name}={KEY}\n"));
    let ws = std::path::Path::new(&dirs.ws()).to_owned();
    std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
    std::fs::write(ws.join("b.txt"), BEE).expect("b.txt");
    dirs
}

/// A home whose default model `net/m` is the provider described by `table` (the keys
/// beside `models`, `api_key_env` and `max_retries`), with `a.txt` and `b.txt` in the
/// workspace.
fn home(table: &str) -> std::sync::Arc<Dirs> {
    home_of(
        &format!(
            "default_model = \"net/m\"\n[providers.net]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{table}"
        ),
        "NET_KEY",
    )
}

/// How one prompt over the binary went.
struct Prompted {
    /// The streamed agent text.
    text: String,
    /// The prompt's answer.
    answer: Value,
    /// The last `usage_update` of the turn, if any.
    usage: Option<Value>,
}

/// A `heron acp` with `args` on `dirs` and a session in its workspace.
fn session(dirs: &Dirs, args: &[&str]) -> (Process, String) {
    let mut heron = Process::spawn(&dirs.home(), args);
    let session = heron.new_session(&dirs.ws());
    (heron, session)
}

/// Sets the session's config option `option` to `value`, which must be accepted.
fn set(heron: &mut Process, session: &str, option: &str, value: &str) {
    let params = json!({ "sessionId": session, "configId": option, "value": value });
    let answer = heron.request(json!(format!("set-{option}")), "session/set_config_option", params);
    assert!(answer.get("error").is_none(), "{option} = {value} was refused: {answer}");
}

/// Prompts once in `session` as request `id`, allowing any permission the agent asks for.
fn prompt_in(heron: &mut Process, session: &str, id: &str) -> Prompted {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "read a.txt" }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params }));
    let (mut text, mut usage) = (String::new(), None);
    loop {
        let message = heron.next();
        if message["id"] == id && message.get("method").is_none() {
            return Prompted { text, answer: message, usage };
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
        if update["sessionUpdate"] == "usage_update" {
            usage = Some(update.clone());
        }
    }
}

/// Prompts once and returns (the streamed agent text, the prompt's answer).
fn prompt(dirs: &Dirs) -> (String, Value) {
    let (mut heron, session) = session(dirs, &[]);
    let Prompted { text, answer, .. } = prompt_in(&mut heron, &session, "p");
    (text, answer)
}

/// Checks that a prompt ended `end_turn` with the mocks' answer.
fn answered(prompted: &Prompted) {
    assert_eq!(prompted.answer["result"]["stopReason"], "end_turn", "{}", prompted.answer);
    assert_eq!(prompted.text, ANSWER);
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
fn a_mistral_turn_with_a_token_limit_and_an_effort_sends_only_fields_mistral_documents() {
    let Played { server, table, requests } = servers::mistral();
    let dirs = home(&format!("{table}efforts = [\"low\", \"high\"]\n"));
    let (mut heron, session) = session(&dirs, &["--max-tokens", "512"]);
    set(&mut heron, &session, "effort", "high");
    answered(&prompt_in(&mut heron, &session, "p"));
    let seen = server.seen();
    assert_eq!(seen.len(), requests);
    assert_eq!(seen[0].body["max_tokens"], 512, "the limit goes in the field Mistral reads");
}

#[test]
fn a_session_switched_to_mistral_sends_it_only_call_ids_it_accepts() {
    let (openai, mistral) = (servers::openai(), servers::mistral());
    let config = format!(
        "default_model = \"first/m\"\n[providers.first]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{}\
         [providers.second]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{}",
        openai.table, mistral.table
    );
    let dirs = home_of(&config, "NET_KEY");
    let (mut heron, session) = session(&dirs, &[]);
    answered(&prompt_in(&mut heron, &session, "p1"));
    set(&mut heron, &session, "model", "second/m");
    answered(&prompt_in(&mut heron, &session, "p2"));
    let seen = mistral.server.seen();
    assert_eq!(seen.len(), 2);
    // OpenAI's `call_abc` reached Mistral as an id of its own shape, alike in the call and
    // its result (the mock refuses any other).
    let earlier = &seen[0].messages()[2];
    let id = earlier["tool_calls"][0]["id"].as_str().expect("the earlier call");
    assert_ne!(id, "call_abc");
    assert_eq!(seen[0].messages()[3]["tool_call_id"], id);
}

#[test]
fn a_deepseek_turn_over_the_binary_passes_every_thought_back() {
    completes(servers::deepseek);
}

#[test]
fn a_deepseek_turn_over_the_binary_counts_its_cache_hits_as_cached_read_tokens() {
    let Played { table, .. } = servers::deepseek();
    let dirs = home(&format!("{table}context_window = 64000\n"));
    let (mut heron, session) = session(&dirs, &[]);
    let prompted = prompt_in(&mut heron, &session, "p");
    answered(&prompted);
    let usage = prompted.usage.expect("a usage update");
    let tokens = &usage["_meta"]["heron"]["tokens"];
    assert_eq!(tokens["cachedReadTokens"], 2 * servers::DEEPSEEK_CACHE_HITS, "{usage}");
    assert_eq!(tokens["inputTokens"], 3 * servers::DEEPSEEK_PROMPT_TOKENS, "{usage}");
}

#[test]
fn an_openrouter_turn_over_the_binary_passes_reasoning_details_back() {
    completes(servers::openrouter);
}

#[test]
fn an_openrouter_gemini_turn_over_the_binary_passes_its_encrypted_reasoning_back() {
    completes(servers::openrouter_gemini);
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
fn an_anthropic_turn_with_an_effort_passes_its_signed_thinking_back_under_a_cache_breakpoint() {
    let Played { server, table, requests } = servers::anthropic();
    let dirs = home(&format!("{table}efforts = [\"low\", \"medium\", \"high\"]\n"));
    let (mut heron, session) = session(&dirs, &[]);
    set(&mut heron, &session, "effort", "low");
    answered(&prompt_in(&mut heron, &session, "p"));
    let seen = server.seen();
    assert_eq!(seen.len(), requests);
    assert_eq!(seen[0].body["thinking"]["type"], "enabled", "the effort asks for thinking");
    let assistant = &seen[1].messages()[1];
    assert_eq!(assistant["content"][0]["type"], "thinking", "{assistant}");
    assert!(assistant["content"][0]["signature"].as_str().is_some_and(|s| !s.is_empty()), "{assistant}");
    let system = seen[1].body["system"].as_array().and_then(|blocks| blocks.last()).cloned();
    assert!(system.is_some_and(|block| block.get("cache_control").is_some()), "the system prompt is cached");
    let tools = seen[1].body["tools"].as_array().and_then(|tools| tools.last()).cloned();
    assert!(tools.is_some_and(|tool| tool.get("cache_control").is_some()), "the tools are cached");
}

#[test]
fn an_openai_responses_turn_over_the_binary_completes() {
    completes(servers::responses);
}

#[test]
fn an_openai_responses_turn_replays_its_encrypted_reasoning_at_the_default_effort() {
    let Played { server, table, requests } = servers::responses();
    let dirs = home(&table);
    let (mut heron, session) = session(&dirs, &[]);
    answered(&prompt_in(&mut heron, &session, "p"));
    let seen = server.seen();
    assert_eq!(seen.len(), requests);
    assert!(seen[0].body.get("reasoning").is_none(), "no effort was chosen");
    let input = seen[1].body["input"].as_array().cloned().unwrap_or_default();
    let reasoning = input.iter().find(|item| item["type"] == "reasoning").expect("the reasoning came back");
    assert_eq!(reasoning["encrypted_content"], servers::native::ENCRYPTED_REASONING);
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
    assert_eq!(answer["error"]["data"]["code"], "turn_failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed to load model"), "{answer}");
    assert!(!answer.to_string().contains(KEY), "the key never reaches the editor: {answer}");
}

#[test]
fn a_llamacpp_bare_error_field_at_status_200_fails_the_prompt_as_turn_failed_with_its_reason() {
    let server = MockServer::start(|_, _| {
        let error = json!({ "code": 500, "message": format!("the request exceeds the available context size; key {KEY}"),
            "type": "exceed_context_size_error" });
        Answer::Stream(format!("data: {}\n\nerror: {error}\n\n", servers::delta(json!({ "content": "Par" }))))
    });
    let dirs =
        home(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin));
    let (_, answer) = prompt(&dirs);
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "turn_failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exceeds the available context size"), "{answer}");
    assert!(!answer.to_string().contains(KEY), "the key never reaches the editor: {answer}");
}

/// The fenced TOML blocks between the config-examples markers of `docs/configuration.md`.
fn documented_examples() -> Vec<String> {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .expect("docs/configuration.md");
    let start = page.find("<!-- config-examples -->").expect("the start marker");
    let end = page.find("<!-- /config-examples -->").expect("the end marker");
    page[start..end]
        .split("```toml\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(str::to_owned)
        .collect()
}

/// The mock of the server a documented example is for, by the example's provider name.
fn mock_for(name: &str) -> fn() -> Played {
    match name {
        "openai" => servers::openai,
        "azure" => servers::azure,
        "mistral" => servers::mistral,
        "deepseek" => servers::deepseek,
        "openrouter" => servers::openrouter,
        "ollama" => servers::ollama,
        "llamacpp" => servers::llamacpp,
        "anthropic" => servers::anthropic,
        "responses" => servers::responses,
        other => panic!("an example for no known server: {other}"),
    }
}

/// `example` pointed at the mock at `origin`: its `base_url` keeps its path and query but
/// names the mock's host (the kind's default, when it has none); a flavor it left to the
/// host is written out, since the mock's host names none.
fn pointed_at(
    example: &str,
    origin: &str,
    provider: &heron_core::config::ProviderConfig,
    name: &str,
) -> String {
    let endpoint = provider.endpoint().expect("an endpoint");
    let host_on = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest);
    let path_on = host_on.find(['/', '?']).map_or("", |at| &host_on[at..]);
    let base_url = format!("base_url = \"{origin}{path_on}\"");
    let mut lines: Vec<String> =
        example.lines().filter(|line| !line.starts_with("base_url")).map(str::to_owned).collect();
    let at = lines.iter().position(|line| line.starts_with("kind")).expect("a kind") + 1;
    lines.insert(at, base_url);
    if provider.effective_flavor().is_some() && provider.flavor.is_none() {
        lines.insert(at, format!("flavor = \"{name}\""));
    }
    lines.join("\n") + "\n"
}

#[test]
fn every_documented_server_example_loads_names_its_flavor_and_completes_a_turn_against_its_mock() {
    let examples = documented_examples();
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
        } else {
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

        // The example as a user would write it, against the mock of its server.
        let Played { server, requests, .. } = mock_for(name)();
        let model = provider.models.first().unwrap_or_else(|| panic!("the example for {name} names a model"));
        let config = format!(
            "default_model = \"{name}/{model}\"\n{}",
            pointed_at(&example, &server.origin, provider, name)
        );
        let key_name = provider.api_key_env.clone().unwrap_or_else(|| "UNUSED_KEY".to_owned());
        let dirs = home_of(&config, &key_name);
        let (text, answer) = prompt(&dirs);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "the example for {name}:\n{config}\n{answer}");
        assert_eq!(text, ANSWER, "{name}");
        assert_eq!(server.seen().len(), requests, "{name}");
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

/// A server that answers 200 and then only keep-alive comments: the configured response
/// deadline ends the turn with a message saying so, and the session goes on serving.
#[test]
fn a_server_that_never_answers_past_keep_alives_fails_the_turn_at_the_response_deadline() {
    let server = MockServer::start(|_, _| Answer::KeepAlive(std::time::Duration::from_millis(100)));
    let dirs = Dirs::new();
    let config = format!(
        "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\n\
         timeout_s = 1\nresponse_timeout_s = 2\n",
        server.origin
    );
    dirs.write_home("config.toml", &config);
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
    let answer = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    heron.send_prompt(json!("p"), &session, "Hello");
    let answer = loop {
        let message = heron.next();
        if message["id"] == "p" && message.get("method").is_none() {
            break message;
        }
    };
    let text = answer.to_string();
    assert!(text.contains("timed out after 2 s"), "{answer}");
    assert_eq!(server.seen().len(), 1, "a deadline is not retried: {answer}");
    let listed = heron.request(json!(2), "session/list", json!({}));
    assert!(listed["result"]["sessions"].is_array(), "the connection serves on: {listed}");
}
