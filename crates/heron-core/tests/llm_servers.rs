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

use crate::support::server_mock::{Answer, MockServer, sse};
use crate::support::servers::{self, ANSWER, BEE, KEY, NOTES, Played, delta};

/// Runs one prompt against the provider whose table has the keys `provider` (beside
/// `models`, `api_key_env` and `max_retries`); returns what streamed and how the prompt ended.
async fn turn(provider: &str) -> (String, Result<StopReason, PromptError>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = Home::at(dir.path().join("home"));
    std::fs::create_dir_all(home.root()).expect("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
    std::fs::write(ws.join("b.txt"), BEE).expect("b.txt");
    let config = format!(
        "default_model = \"net/m\"\n[providers.net]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{provider}"
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

/// Plays one server's turn and checks it completed with the answer.
async fn completes(play: fn() -> Played) {
    let Played { server, table, requests } = play();
    let (text, result) = turn(&table).await;
    assert_eq!(result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn));
    assert_eq!(text, ANSWER);
    assert_eq!(server.seen().len(), requests);
}

#[tokio::test]
async fn openai_gets_bearer_auth_usage_options_and_the_tool_result() {
    completes(servers::openai).await;
}

#[tokio::test]
async fn azure_gets_its_api_key_header_and_keeps_api_version_on_the_deployment_path() {
    completes(servers::azure).await;
}

#[tokio::test]
async fn mistral_gets_no_fields_it_forbids_and_its_short_call_ids_come_back_as_they_came() {
    completes(servers::mistral).await;
}

#[tokio::test]
async fn deepseek_gets_every_tool_calling_message_back_with_reasoning_content_even_an_empty_one() {
    completes(servers::deepseek).await;
}

#[tokio::test]
async fn openrouter_gets_its_reasoning_details_back_and_keep_alive_comments_are_skipped() {
    completes(servers::openrouter).await;
}

#[tokio::test]
async fn ollama_parallel_calls_at_index_zero_run_as_separate_calls() {
    completes(servers::ollama).await;
}

#[tokio::test]
async fn llamacpp_object_arguments_crlf_lines_and_pings_make_one_call() {
    completes(servers::llamacpp).await;
}

#[tokio::test]
async fn a_llamacpp_error_field_at_status_200_fails_the_turn_with_its_reason() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(
            "error: {\"code\":500,\"message\":\"the request exceeds the available context size\",\"type\":\"exceed_context_size_error\"}\n\n"
                .to_owned(),
        )
    });
    let (_, result) =
        turn(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\nflavor = \"llamacpp\"\n", server.origin))
            .await;
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
    let (_, result) = turn(&format!(
        "kind = \"openai\"\nbase_url = \"{}/api/v1\"\nflavor = \"openrouter\"\n",
        server.origin
    ))
    .await;
    let error = result.expect_err("the turn fails").to_string();
    assert!(error.contains("Provider returned error: upstream overloaded"), "{error}");
    assert!(!error.contains(KEY), "the key is redacted: {error}");
}
