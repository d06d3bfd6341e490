//! What real local servers (llama.cpp's llama-server, llama-cpp-python's server) do that a
//! mock written from documentation missed, each played by a loopback mock: a 200 whose
//! stream ends with no event, a conversation kept well-formed after a failed turn, dense
//! text sized high enough, and request sizes counted by the server's own tokenizer. The
//! same behaviours against the real llama-cpp-python server are `tests/providers_live.rs`
//! in the binary's tests.

use std::time::Duration;

use futures_util::StreamExt;
use heron_core::llm::http::HttpConfig;
use heron_core::llm::openai::OpenAiProvider;
use heron_core::llm::{ChatMessage, ModelEvent, ModelRequest, Provider, ProviderError, UserPart};
use heron_core::secret::Secret;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use heron_core::session::event::Event;
use heron_core::types::StopReason;

use crate::support::served::Served;
use crate::support::server_mock::{Answer, MockServer, Seen, sse};
use crate::support::servers::{self, ANSWER, KEY};

/// A provider for `server` with the key and two retries.
fn provider(server: &MockServer) -> OpenAiProvider {
    let config = HttpConfig {
        api_key: Some(Secret::new(KEY)),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        ..HttpConfig::new(format!("{}/v1", server.origin))
    };
    OpenAiProvider::new(config).expect("valid config")
}

fn hello() -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        messages: vec![ChatMessage::User { parts: vec![UserPart::Text { text: "Hi".into() }] }],
        tools: Vec::new(),
        effort: None,
        max_tokens: None,
    }
}

/// The error a request to `server` ends with, and whether any answer finished.
async fn failure(server: &MockServer) -> (Option<ProviderError>, bool) {
    let mut stream = provider(server).stream(hello(), CancellationToken::new());
    let (mut error, mut finished) = (None, false);
    while let Some(item) = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("ends") {
        match item {
            Ok(ModelEvent::Finish { .. }) => finished = true,
            Ok(_) => {}
            Err(err) => error = Some(err),
        }
    }
    (error, finished)
}

#[tokio::test]
async fn a_200_stream_with_no_event_is_the_servers_answer_and_is_not_retried() {
    // llama-cpp-python's answer to a prompt past its window while streaming: 200, perhaps a
    // keep-alive, and the body ends.
    let empty = MockServer::start(|_, _| Answer::Stream(": ping - 2025-01-01\n\n".to_owned()));
    let (error, finished) = failure(&empty).await;
    let Some(ProviderError::Status { status: 200, message }) = &error else { panic!("{error:?}") };
    assert!(message.contains("empty stream"), "{message}");
    assert!(
        !error.as_ref().is_some_and(ProviderError::is_context_overflow),
        "nothing said it was the window"
    );
    assert!(!finished, "never taken as an answer");
    assert_eq!(empty.seen().len(), 1, "the same request would end the same way");

    // An error written as plain JSON in a 200 body: its message is the error's, keyless.
    let plain = MockServer::start(|_, _| {
        let said = format!("the option `seed` is not supported; key {KEY}");
        Answer::Stream(json!({ "error": { "message": said } }).to_string())
    });
    let (error, _) = failure(&plain).await;
    let Some(ProviderError::Status { status: 200, message }) = &error else { panic!("{error:?}") };
    assert!(message.contains("the option `seed` is not supported"), "{message}");
    assert!(!message.contains(KEY), "the key never shows: {message}");
    assert_eq!(plain.seen().len(), 1);
}

/// Whether two messages of one role follow each other, which strict chat templates refuse.
fn repeats_a_role(request: &Seen) -> bool {
    request.messages().windows(2).any(|pair| pair[0]["role"] == "user" && pair[1]["role"] == "user")
}

#[tokio::test]
async fn after_a_failed_turn_the_next_request_still_alternates_and_keeps_the_unanswered_prompt() {
    let server = MockServer::start(|n, request| match n {
        0 => servers::openai_error(500, "the model crashed"),
        _ if repeats_a_role(request) => {
            servers::openai_error(500, "Conversation roles must alternate user/assistant/user/assistant/...")
        }
        _ => Answer::Stream(sse(&[servers::delta(json!({ "content": ANSWER })), servers::finish("stop")])),
    });
    let served = Served::open(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin)).await;
    let (_, failed) = served.prompt("first try").await;
    assert!(failed.expect_err("the server failed").to_string().contains("the model crashed"));
    let (text, second) = served.prompt("second try").await;
    assert_eq!((text.as_str(), second.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    let sent = &server.seen()[1];
    let last = sent.messages().last().and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned();
    assert!(last.contains("first try") && last.ends_with("second try"), "{last}");
    let prompts = served.history().await.iter().filter(|e| matches!(e, Event::UserMessage { .. })).count();
    assert_eq!(prompts, 2, "the failed turn's prompt is kept for the record");
}

/// A server whose completions answer [`ANSWER`] and whose other routes (a tokenizer's)
/// answer with `tokenizer`, given the path asked and the text sent.
fn counting(tokenizer: impl Fn(&str, &str) -> Answer + Send + Sync + 'static) -> MockServer {
    MockServer::start(move |_, request| {
        let target = request.target().to_owned();
        if target.ends_with("/chat/completions") {
            return Answer::Stream(sse(&[
                servers::delta(json!({ "content": ANSWER })),
                servers::finish("stop"),
            ]));
        }
        let text = request.body["content"].as_str().or(request.body["input"].as_str()).unwrap_or_default();
        tokenizer(&target, text)
    })
}

/// The completions `server` was asked for.
fn completions(server: &MockServer) -> usize {
    server.seen().iter().filter(|seen| seen.target().ends_with("/chat/completions")).count()
}

/// The provider keys of a llamacpp server at `server` with a window of `window` tokens, all
/// of which a request may fill.
fn llamacpp(server: &MockServer, window: u64) -> String {
    format!(
        "kind = \"openai\"\nflavor = \"llamacpp\"\nbase_url = \"{}/v1\"\ncontext_window = {window}\ncompact_at = 1.0\n",
        server.origin
    )
}

#[tokio::test]
async fn dense_text_is_estimated_high_enough_to_be_refused_before_it_is_sent() {
    // 6,500 digits were 6,559 tokens to llama-cpp-python's server; four bytes a token let
    // them through to a window of 4,096. A server with no tokenizer of its own: the
    // estimate alone must refuse them, and the session go on.
    let server = counting(|_, _| Answer::Status(404, "{}".into()));
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\ncontext_window = 4096\n", server.origin);
    let served = Served::open(&table).await;
    let (_, refused) = served.prompt(&"7".repeat(6500)).await;
    let refused = refused.expect_err("too big for the window").to_string();
    assert!(refused.contains("does not fit the model's context window"), "{refused}");
    assert_eq!(completions(&server), 0, "refused before it was sent");
    let (text, next) = served.prompt("hi").await;
    assert_eq!((text.as_str(), next.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
}

#[tokio::test]
async fn a_llamacpp_servers_own_count_decides_what_fits_where_the_estimate_would_not() {
    // llama-cpp-python has no `/tokenize` (llama-server's route) but `/extras/tokenize/count`.
    // This one's tokenizer makes a token of every byte, four times what the estimate takes
    // prose for: 600 kB of prose fits a window of 200,000 by the estimate, not by the count.
    let dense = counting(|target, text| match target {
        "/extras/tokenize/count" => Answer::Status(200, json!({ "count": text.len() }).to_string()),
        _ => Answer::Status(404, json!({ "detail": "Not Found" }).to_string()),
    });
    let served = Served::open(&llamacpp(&dense, 200_000)).await;
    let prose = "the quick brown fox jumps over the lazy dog ".repeat(600_000 / 44);
    let (_, refused) = served.prompt(&prose).await;
    let refused = refused.expect_err("past the window by the server's count").to_string();
    assert!(refused.contains("does not fit the model's context window"), "{refused}");
    assert_eq!(completions(&dense), 0, "refused before it was sent");
    let (text, next) = served.prompt("hi").await;
    assert_eq!((text.as_str(), next.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    let routes: Vec<String> = dense
        .seen()
        .iter()
        .map(|seen| seen.target().to_owned())
        .filter(|t| !t.ends_with("completions"))
        .collect();
    assert_eq!(routes, ["/tokenize", "/extras/tokenize/count"], "an absent route is not asked again");

    // llama-server's `/tokenize` lists the tokens; this one groups digits by three, so
    // 120,000 digits that the estimate takes for 120,000 tokens fit a window of 100,000.
    let grouping = counting(|target, text| match target {
        "/tokenize" => Answer::Status(200, json!({ "tokens": vec![1; text.len() / 3] }).to_string()),
        _ => Answer::Status(404, "{}".into()),
    });
    let served = Served::open(&llamacpp(&grouping, 100_000)).await;
    let (text, sent) = served.prompt(&"7".repeat(120_000)).await;
    assert_eq!((text.as_str(), sent.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    assert_eq!(completions(&grouping), 1);
}

#[tokio::test]
async fn a_tokenizer_that_fails_leaves_the_estimate_and_is_soon_not_asked() {
    let failing = counting(|_, _| Answer::Status(500, json!({ "detail": "tokenizer crashed" }).to_string()));
    let served = Served::open(&llamacpp(&failing, 200_000)).await;
    // Past half the window from the first prompt on, so every request is worth a count.
    let prose = "the quick brown fox jumps over the lazy dog ".repeat(600_000 / 44);
    for prompt in [prose.as_str(), "hi", "hi", "hi"] {
        let (text, sent) = served.prompt(prompt).await;
        assert_eq!((text.as_str(), sent.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    }
    let counts = failing.seen().iter().filter(|seen| seen.target() == "/tokenize").count();
    assert_eq!(counts, 3, "three failures in a row, then the estimate alone");
    assert_eq!(completions(&failing), 4);
}

/// A turn whose request after a tool call fails leaves the session working: the next
/// prompt's request still alternates, carrying the call and its result, and is answered.
#[tokio::test]
async fn after_the_request_following_a_tool_call_fails_the_next_prompt_is_answered() {
    let server = MockServer::start(|n, request| match n {
        0 => Answer::Stream(sse(&[
            servers::call(0, "call_1", json!({ "path": "a.txt" })),
            servers::finish("tool_calls"),
        ])),
        1 => servers::openai_error(500, "the model crashed after the tool"),
        _ if repeats_a_role(request) => {
            servers::openai_error(500, "Conversation roles must alternate user/assistant/user/assistant/...")
        }
        _ => Answer::Stream(sse(&[servers::delta(json!({ "content": ANSWER })), servers::finish("stop")])),
    });
    let config = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin);
    let served = Served::open(&config).await;
    let (_, failed) = served.prompt("read it").await;
    assert!(failed.expect_err("the server failed").to_string().contains("crashed after the tool"));
    let (text, second) = served.prompt("try again").await;
    assert_eq!((text.as_str(), second.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    let sent = &server.seen()[2];
    let roles: Vec<&str> = sent.messages().iter().filter_map(|m| m["role"].as_str()).collect();
    assert!(roles.contains(&"tool") && roles.last() == Some(&"user"), "{roles:?}");
}
