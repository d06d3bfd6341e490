//! Model servers that misbehave along the bounds of docs/bounds.md's model server table,
//! played by the shared mock (`support::server_mock`): each test crosses one bound and
//! checks what the turn is told.

use std::time::Duration;

use tokio::net::TcpListener;

use futures_util::StreamExt;
use heron_core::llm::http::HttpConfig;
use heron_core::llm::openai::OpenAiProvider;
use heron_core::llm::{ChatMessage, ModelEvent, ModelRequest, Provider, ProviderError, UserPart};
use tokio_util::sync::CancellationToken;

use crate::support::server_mock::{Answer, MockServer};

fn request() -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        messages: vec![ChatMessage::User { parts: vec![UserPart::Text { text: "Hi".into() }] }],
        tools: Vec::new(),
        effort: None,
        max_tokens: None,
    }
}

/// The stream's events, and the error it ended with.
async fn run(config: HttpConfig) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let provider = OpenAiProvider::new(config).expect("valid config");
    let mut stream = provider.stream(request(), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

/// L2: a server that keeps the connection alive with comments but never answers is
/// within the idle timeout forever; the response's own deadline ends it, not retried.
#[tokio::test]
async fn a_server_that_only_keeps_alive_is_ended_by_the_response_deadline() {
    let server = MockServer::start(|_, _| Answer::KeepAlive(Duration::from_millis(50)));
    let config = HttpConfig {
        request_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(1500),
        max_retries: 2,
        ..HttpConfig::new(format!("{}/v1", server.origin))
    };
    let (events, error) = run(config).await;
    assert_eq!(error, Some(ProviderError::Timeout(2)), "{events:?}");
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::TextDelta { .. })), "{events:?}");
    assert_eq!(server.seen().len(), 1, "a deadline is not retried");
}

/// L4: a server that asks to be tried again in an hour is waited on for at most 30 s; the
/// wait is announced before it starts.
#[tokio::test]
async fn a_retry_after_past_the_cap_is_waited_on_for_thirty_seconds() {
    let busy = serde_json::json!({ "error": { "message": "slow down" } }).to_string();
    let server = MockServer::start(move |_, _| {
        Answer::StatusWith(429, vec![("Retry-After", "3600".into())], busy.clone())
    });
    let config = HttpConfig { max_retries: 1, ..HttpConfig::new(format!("{}/v1", server.origin)) };
    let provider = OpenAiProvider::new(config).expect("valid config");
    let mut stream = provider.stream(request(), CancellationToken::new());
    // The stream is dropped once the wait is announced: nobody sits through it here.
    let waited = loop {
        match stream.next().await {
            Some(Ok(ModelEvent::Retrying { wait_ms, .. })) => break wait_ms,
            Some(Ok(_)) => {}
            other => panic!("no retry announced: {other:?}"),
        }
    };
    assert_eq!(waited, 30_000);
}

/// L3: an endpoint nobody listens on is tried `max_retries` more times, each retry
/// announced with its wait, then reported as unreachable.
#[tokio::test]
async fn an_unreachable_endpoint_is_retried_then_reported() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr");
    drop(listener);
    let config = HttpConfig {
        base_url: format!("http://{address}/v1"),
        api_key: None,
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        response_timeout: Duration::from_secs(60),
        max_retries: 1,
        retry_base_delay: Duration::from_millis(10),
        shape: Default::default(),
    };
    let (events, error) = run(config).await;
    assert!(matches!(error, Some(ProviderError::Unreachable(_))), "{error:?}");
    assert!(
        matches!(
            &events[..],
            [
                ModelEvent::Attempt { number: 1 },
                ModelEvent::Retrying { next: 2, of: 2, wait_ms: 0..=40, .. },
                ModelEvent::Attempt { number: 2 },
            ]
        ),
        "{events:?}"
    );
}

/// L20: a model list is read within its bounds: 10,000 ids kept of a longer list, ten
/// pages of a list that never ends, and no more than 4 MiB of body in all.
#[tokio::test]
async fn a_model_list_is_held_to_its_count_pages_and_bytes() {
    use heron_core::config::ProviderKind;
    use heron_core::llm::models::list_models;
    let wait = Duration::from_secs(30);
    let ids: Vec<serde_json::Value> =
        (0..10_001).map(|i| serde_json::json!({ "id": format!("m{i}") })).collect();
    let long = serde_json::json!({ "object": "list", "data": ids }).to_string();
    let server = MockServer::start(move |_, _| Answer::Stream(long.clone()));
    let config = HttpConfig::new(format!("{}/v1", server.origin));
    let listed = list_models(ProviderKind::Openai, &config, wait).await.expect("a list");
    assert_eq!((listed.len(), listed.last().map(String::as_str)), (10_000, Some("m9999")));

    // Anthropic's cursor moves on every page and always says there is more.
    let endless = MockServer::start(|n, _| {
        let page = serde_json::json!({ "data": [{ "id": format!("p{n}") }], "has_more": true, "last_id": format!("p{n}") });
        Answer::Stream(page.to_string())
    });
    let config = HttpConfig::new(format!("{}/v1", endless.origin));
    let listed = list_models(ProviderKind::Anthropic, &config, wait).await.expect("a list");
    assert_eq!((listed.len(), endless.seen().len()), (10, 10), "ten pages, then it stops");

    let huge = format!(r#"{{"data": [{{"id": "{}"}}]}}"#, "x".repeat(5 * 1024 * 1024));
    let server = MockServer::start(move |_, _| Answer::Stream(huge.clone()));
    let config = HttpConfig::new(format!("{}/v1", server.origin));
    let refused = list_models(ProviderKind::Openai, &config, wait).await;
    assert!(matches!(refused, Err(ProviderError::Protocol(_))), "{refused:?}");
}

/// L5: an error response's body is read up to 64 KiB and no further: a body that never
/// ends does not hold the turn until the request timeout, and the message kept is clipped.
#[tokio::test]
async fn an_endless_error_body_is_read_to_its_cap_and_no_further() {
    let start = format!(r#"{{"error": {{"message": "{}"#, "x".repeat(70 * 1024));
    let server = MockServer::start(move |_, _| Answer::StatusEndless(400, start.clone()));
    // Long enough that waiting for the rest of the body would fail the test.
    let wait = Duration::from_secs(30);
    let config = HttpConfig {
        request_timeout: wait,
        response_timeout: wait,
        ..HttpConfig::new(format!("{}/v1", server.origin))
    };
    let (_, error) = tokio::time::timeout(Duration::from_secs(5), run(config)).await.expect("not held open");
    let Some(ProviderError::Status { status: 400, message }) = error else { panic!("{error:?}") };
    assert!(message.len() <= 2048 && message.starts_with(r#"{"error""#), "{} bytes", message.len());
}
