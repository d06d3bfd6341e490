//! Prompt caching: every request of a session must repeat the one before it byte for byte
//! (system prompt, tool definitions, earlier messages) and only add to its end, across tool
//! steps, a steer that arrives mid-turn, the next prompt, and the turns after a compaction
//! (which sends a stored summary, not one worked out per request). A provider's prompt cache
//! hits only on an identical prefix, so anything per-request in it (a timestamp, a
//! reordered tool, a re-rendered message) multiplies what a session costs.

use std::sync::{Arc, OnceLock};

use heron_core::session::Session;
use heron_core::types::{PromptInput, StopReason, TokenTotals, UserContent};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::support::served::Served;
use crate::support::server_mock::{Answer, MockServer, Seen, sse};
use crate::support::servers::{ANSWER, call, delta, final_answer, finish};

const STEER: &str = "and keep it short";

/// The parts of a Chat Completions body a prompt cache keys on, as the bytes sent.
#[derive(Deserialize)]
struct Prefix<'a> {
    #[serde(borrow)]
    model: &'a RawValue,
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
    #[serde(borrow)]
    tools: &'a RawValue,
}

fn prefix(seen: &Seen) -> Prefix<'_> {
    serde_json::from_str(&seen.raw).expect("a chat completions body")
}

/// `later` repeats `earlier` byte for byte and only adds messages after it.
fn extends(earlier: &Seen, later: &Seen) {
    let (a, b) = (prefix(earlier), prefix(later));
    assert_eq!(a.model.get(), b.model.get());
    assert_eq!(a.tools.get(), b.tools.get(), "the tool definitions are sent identically");
    assert!(b.messages.len() > a.messages.len(), "the later request adds messages");
    for (at, (x, y)) in a.messages.iter().zip(&b.messages).enumerate() {
        assert_eq!(x.get(), y.get(), "message {at} is sent identically");
    }
}

#[tokio::test]
async fn consecutive_requests_repeat_the_one_before_byte_for_byte() {
    let session: Arc<OnceLock<Arc<Session>>> = Arc::new(OnceLock::new());
    let steering = Arc::clone(&session);
    let runtime = tokio::runtime::Handle::current();
    let server = MockServer::start(move |n, request| match n {
        0 => {
            // The user steers while the model's tool call is on its way; the steer is
            // committed before the server answers.
            let steer = vec![PromptInput::Content(UserContent::Text { text: STEER.into() })];
            let session = steering.get().expect("the session is open");
            runtime.block_on(session.steer(steer)).expect("steered");
            Answer::Stream(sse(&[call(0, "call_1", json!("{\"path\":\"a.txt\"}")), finish("tool_calls")]))
        }
        1 => final_answer(request, "call_1"),
        _ => Answer::Stream(sse(&[delta(json!({ "content": "Done." })), finish("stop")])),
    });
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin);
    let served = Served::open(&table).await;
    assert!(session.set(Arc::clone(&served.session)).is_ok());

    let (text, result) = served.prompt("read the notes").await;
    assert_eq!((text.as_str(), result.map_err(|e| e.to_string())), (ANSWER, Ok(StopReason::EndTurn)));
    let (text, result) = served.prompt("thanks").await;
    assert_eq!((text.as_str(), result.map_err(|e| e.to_string())), ("Done.", Ok(StopReason::EndTurn)));

    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    let steered = seen[1].messages().last().expect("messages");
    assert_eq!((steered["role"].as_str(), steered["content"].as_str()), (Some("user"), Some(STEER)));
    extends(&seen[0], &seen[1]);
    extends(&seen[1], &seen[2]);
}

#[tokio::test]
async fn cached_tokens_reach_the_usage_report_and_cost_their_own_price() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(sse(&[
            delta(json!({ "content": "Hi." })),
            finish("stop"),
            json!({ "choices": [], "usage": { "prompt_tokens": 1000, "completion_tokens": 100,
                "prompt_tokens_details": { "cached_tokens": 800 } } }),
        ]))
    });
    let table = format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\ncontext_window = 4000\n\
         [providers.net.prices.m]\ninput = 2.0\noutput = 8.0\ncached_input = 0.5\n",
        server.origin
    );
    let served = Served::open(&table).await;
    served.run("hello").await;
    let ended = served.run("again").await;
    let report = ended.usage.last().expect("a usage report");
    assert_eq!((report.used, report.size), (1100, Some(4000)));
    assert_eq!(
        report.tokens,
        TokenTotals { input: 2000, output: 200, cached_read: 1600, cache_write: 0, thought: 0 },
        "the totals add up over the session"
    );
    // Per request: 200 plain input at 2.0, 800 cached at 0.5, 100 output at 8.0 per million.
    let (cost, currency) = report.cost.clone().expect("a cost");
    assert!((cost - 2.0 * 0.0016).abs() < 1e-12, "{cost}");
    assert_eq!(currency, "USD");
}

#[tokio::test]
async fn deepseek_cache_hits_reach_the_usage_report_and_cost_the_cached_price() {
    use crate::support::servers::{self, DEEPSEEK_CACHE_HITS as HITS, DEEPSEEK_PROMPT_TOKENS as PROMPT};
    let played = servers::deepseek();
    let table = format!(
        "{}context_window = 64000\n[providers.net.prices.m]\ninput = 0.56\noutput = 1.68\ncached_input = 0.07\n",
        played.table
    );
    let ended = Served::open(&table).await.run("read the notes").await;
    assert_eq!(ended.result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn));
    let report = ended.usage.last().expect("a usage report");
    // Three requests: the first finds the cache empty, the next two hit it.
    assert_eq!(
        report.tokens,
        TokenTotals { input: 3 * PROMPT, output: 60, cached_read: 2 * HITS, cache_write: 0, thought: 15 },
    );
    let (cost, _) = report.cost.clone().expect("a cost");
    let plain = 3 * PROMPT - 2 * HITS;
    let expected = (plain as f64 * 0.56 + (2 * HITS) as f64 * 0.07 + 60.0 * 1.68) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
}

#[tokio::test]
async fn requests_after_a_compaction_repeat_each_other_byte_for_byte() {
    use crate::support::served::big_file;
    use crate::support::windowed::{self, is_summary_request};
    let server = windowed::start(48_000, None);
    let table = format!("kind = \"openai\"\nbase_url = \"{}/v1\"\ncontext_window = 12000\n", server.origin);
    let served = Served::open(&table).await;
    for n in 1..=13 {
        std::fs::write(served.ws.join(format!("big{n}.txt")), big_file(100)).expect("file");
        let (_, result) = served.prompt(&format!("please read big{n}.txt")).await;
        assert_eq!(result.map_err(|e| e.to_string()), Ok(StopReason::EndTurn), "turn {n}");
    }
    let seen = server.seen();
    // The first summary, and the requests after it until the next compaction clips more.
    let summary = seen.iter().position(is_summary_request).expect("a summary was written");
    let after = seen.get(summary + 1..summary + 5).unwrap_or_default();
    assert_eq!(after.len(), 4, "{} requests after the summary", seen.len() - summary - 1);
    for pair in after.windows(2) {
        extends(&pair[0], &pair[1]);
    }
}
