//! One tool-calling turn against each model server people run, through the session API:
//! a loopback mock plays the server's own stream and error format and refuses a request
//! that server would refuse (with that server's error body), so a wrong shape fails the
//! turn. Each turn asks for `read_file`, runs it, and the second request must carry the
//! result before the final answer.

use heron_core::types::StopReason;
use serde_json::json;

use crate::support::served::turn;
use crate::support::server_mock::{Answer, MockServer, sse};
use crate::support::servers::{self, ANSWER, KEY, Played, delta};

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
async fn openrouter_gemini_gets_its_encrypted_reasoning_details_back() {
    completes(servers::openrouter_gemini).await;
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
async fn anthropic_gets_its_headers_and_the_tool_result_as_a_block() {
    completes(servers::anthropic).await;
}

#[tokio::test]
async fn openai_responses_gets_flat_tools_and_the_call_output_as_an_input_item() {
    completes(servers::responses).await;
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

#[tokio::test]
async fn a_field_the_server_refuses_is_dropped_when_the_config_names_it() {
    // A compatible server that refuses `stream_options`, which no preset says of it.
    let server = MockServer::start(|_, request| {
        if request.body.get("stream_options").is_some() {
            return servers::openai_error(422, "Extra inputs are not permitted");
        }
        Answer::Stream(sse(&[delta(json!({ "content": ANSWER })), servers::finish("stop")]))
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin);
    let (_, refused) = turn(&table).await;
    assert!(refused.expect_err("refused").to_string().contains("Extra inputs"));
    let (text, result) = turn(&format!("{table}drop_fields = [\"stream_options\"]\n")).await;
    assert_eq!(result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn));
    assert_eq!(text, ANSWER);
}
