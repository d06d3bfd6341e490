//! Context management against a server with a small window (`support::windowed`): without a
//! `context_window` a long session runs into the server's refusal; with one, older tool
//! outputs are clipped, then earlier turns summarized, and every turn completes while the
//! store keeps the whole history. One long turn of many tool calls is compacted between its
//! own steps the same way. A turn that cannot fit fails naming the window, and its prompt
//! does not fail the next one; a server that counts more tokens than the estimate is retried
//! once compacted, `/compact` summarizes on demand, and a summary is redacted and bounded
//! like any model reply.

use heron_core::session::event::{CompactionStage, Event};
use heron_core::session::{PromptError, TurnError};
use heron_core::types::StopReason;

use crate::support::served::{Ended, Served, big_file};
use crate::support::server_mock::MockServer;
use crate::support::windowed::{
    self, ASKS_FOR_SUMMARY, READ, READ_ALL, READ_ALL_OF, SUMMARY, is_summary_request, text_of,
};

/// The server's limit: a body over it is refused.
const LIMIT: usize = 48_000;
/// The window the config names: the limit at four bytes a token.
const WINDOW: &str = "context_window = 12000\n";
/// What a clipped output says.
const CLIPPED: &str = "bytes of this output were clipped";

async fn open(server: &MockServer, keys: &str) -> Served {
    Served::open(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n{keys}", server.origin)).await
}

/// Prompts the model to read `big<n>.txt` (about 6 KiB) for each n in `turns`.
async fn read_big_files(served: &Served, turns: std::ops::RangeInclusive<usize>) -> Vec<Ended> {
    let mut ended = Vec::new();
    for n in turns {
        std::fs::write(served.ws.join(format!("big{n}.txt")), big_file(100)).expect("file");
        ended.push(served.run(&format!("please read big{n}.txt")).await);
    }
    ended
}

fn stopped(ended: &Ended) -> Result<StopReason, String> {
    ended.result.as_ref().map(|s| *s).map_err(|e| e.to_string())
}

fn compactions(history: &[Event]) -> Vec<CompactionStage> {
    history
        .iter()
        .filter_map(|e| match e {
            Event::Compacted(c) => Some(c.stage),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn without_a_context_window_a_long_session_runs_into_the_servers_limit() {
    let server = windowed::start(LIMIT, None);
    let served = open(&server, "").await;
    let ended = read_big_files(&served, 1..=10).await;
    let failed = ended.iter().find_map(|e| stopped(e).err()).expect("a turn fails");
    assert!(failed.contains("maximum context length"), "{failed}");
}

#[tokio::test]
async fn a_long_session_clips_old_outputs_then_summarizes_and_every_turn_completes() {
    let server = windowed::start(LIMIT, None);
    let served = open(&server, WINDOW).await;
    let ended = read_big_files(&served, 1..=10).await;
    for (n, turn) in ended.iter().enumerate() {
        assert_eq!((stopped(turn), turn.text.as_str()), (Ok(StopReason::EndTurn), READ), "turn {n}");
    }
    let seen = server.seen();
    let clipped = seen.iter().position(|s| s.raw.contains(CLIPPED)).expect("an output was clipped");
    let summary = seen.iter().position(is_summary_request).expect("a summary was asked for");
    assert!(clipped < summary, "outputs are clipped before anything is summarized");
    assert_eq!(seen.iter().filter(|s| is_summary_request(s)).count(), 1, "one summary was enough");
    // Every request after the summary opens with it, and no longer carries the first turn.
    for later in &seen[summary + 1..] {
        let first = text_of(&later.messages()[1]);
        assert!(first.contains(SUMMARY), "{first}");
        assert!(!later.raw.contains("big1.txt"), "the first turn is summarized away");
    }
    // The summary streamed as a thought of the turn that needed it.
    assert!(ended.iter().any(|e| e.thought.contains(SUMMARY)));

    // The store keeps every prompt and every output whole.
    let history = served.history().await;
    let prompts = history.iter().filter(|e| matches!(e, Event::UserMessage { .. })).count();
    let whole = history
        .iter()
        .filter(|e| matches!(e, Event::ToolResult { for_model, .. } if for_model.contains("line 0099")))
        .count();
    assert_eq!((prompts, whole), (10, 10));
    let stages = compactions(&history);
    assert_eq!(stages.first(), Some(&CompactionStage::Clipped), "{stages:?}");
    assert!(stages.contains(&CompactionStage::Summarized), "{stages:?}");
}

#[tokio::test]
async fn a_turn_too_big_for_the_window_fails_naming_the_window_and_sends_nothing() {
    let server = windowed::start(LIMIT, None);
    let served = open(&server, WINDOW).await;
    assert_eq!(stopped(&served.run("hello").await), Ok(StopReason::EndTurn));
    let huge = format!("look at this: {}", "x".repeat(LIMIT));
    let ended = served.run(&huge).await;
    match &ended.result {
        Err(PromptError::Turn(TurnError::ContextFull { window: 12_000, limit: 9_600, needed })) => {
            assert!(*needed > 9_600, "{needed}");
        }
        other => panic!("expected the turn to fail for the window: {other:?}"),
    }
    let message = ended.result.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("12000") && message.contains("context window"), "{message}");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "only the first prompt was sent: no summary, no refused request");
    assert!(!seen.iter().any(|s| s.raw.contains(ASKS_FOR_SUMMARY)));
}

/// Whether every tool result `request` sends answers a call of an assistant message before
/// it, and every call is answered: what a provider insists on.
fn calls_and_results_pair(request: &crate::support::server_mock::Seen) -> bool {
    let mut open: Vec<String> = Vec::new();
    for message in request.messages() {
        if message["role"] == "tool" {
            let Some(id) = message["tool_call_id"].as_str() else { return false };
            let Some(at) = open.iter().position(|c| c == id) else { return false };
            open.remove(at);
        } else if !open.is_empty() {
            return false;
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            open.extend(call["id"].as_str().map(str::to_owned));
        }
    }
    open.is_empty()
}

#[tokio::test]
async fn one_long_turn_of_many_tool_calls_is_compacted_between_its_own_steps_and_completes() {
    // Twenty files of about 6 KiB read in one turn: 120 KiB of outputs for a window of
    // 40,000 bytes, far past what clipping alone can make fit.
    let server = windowed::start_reading_in_one_turn(LIMIT);
    let served = open(&server, WINDOW).await;
    let files: Vec<String> = (1..=20).map(|n| format!("big{n}.txt")).collect();
    for file in &files {
        std::fs::write(served.ws.join(file), big_file(100)).expect("file");
    }
    let prompt = format!("please {READ_ALL_OF}{}", files.join(" "));
    let ended = served.run(&prompt).await;
    assert_eq!((stopped(&ended), ended.text.as_str()), (Ok(StopReason::EndTurn), READ_ALL));

    let seen = server.seen();
    assert!(seen.iter().all(|s| s.raw.len() <= LIMIT), "no request was refused");
    let clipped = seen.iter().position(|s| s.raw.contains(CLIPPED)).expect("an output was clipped");
    let summary = seen.iter().position(is_summary_request).expect("a summary was asked for");
    assert!(clipped < summary, "outputs are clipped before anything is summarized");
    for (n, request) in seen.iter().enumerate().filter(|(_, s)| !is_summary_request(s)) {
        assert!(
            calls_and_results_pair(request),
            "request {n} breaks a call from its result: {}",
            request.raw
        );
    }
    // After a summary, every request opens with it and the turn's own prompt, verbatim.
    for later in seen[summary + 1..].iter().filter(|s| !is_summary_request(s)) {
        let first = text_of(&later.messages()[1]);
        assert!(first.contains(SUMMARY) && first.ends_with(&prompt), "{first}");
    }
    // The last request still carries the latest step whole: its call and its output.
    let last = seen.last().expect("requests");
    assert!(last.raw.contains("big20.txt") && last.raw.contains("line 0099"), "the latest step is kept");
    assert!(!last.raw.contains(r#"big1.txt"}"#), "the first steps are summarized away");

    // The store keeps the one prompt and every output whole; the summary cut into the turn.
    let history = served.history().await;
    let prompts = history.iter().filter(|e| matches!(e, Event::UserMessage { .. })).count();
    let whole = history
        .iter()
        .filter(|e| matches!(e, Event::ToolResult { for_model, .. } if for_model.contains("line 0099")))
        .count();
    assert_eq!((prompts, whole), (1, 20));
    let stages = compactions(&history);
    assert_eq!(stages.first(), Some(&CompactionStage::Clipped), "{stages:?}");
    assert!(stages.contains(&CompactionStage::Summarized), "{stages:?}");
    assert!(ended.thought.contains(SUMMARY), "the summary streamed as a thought of the turn");
}

#[tokio::test]
async fn a_prompt_too_big_for_the_window_does_not_fail_the_prompts_after_it() {
    let server = windowed::start(LIMIT, None);
    let served = open(&server, WINDOW).await;
    assert_eq!(stopped(&served.run("hello").await), Ok(StopReason::EndTurn));
    let huge = format!("look at this: {}", "x".repeat(LIMIT));
    let failed = served.run(&huge).await;
    assert!(
        matches!(failed.result, Err(PromptError::Turn(TurnError::ContextFull { .. }))),
        "{:?}",
        failed.result
    );
    // The failure says the prompt is left out, as a marked compaction the editor is shown.
    let dropped =
        failed.events.iter().any(|e| matches!(e, Event::Compacted(c) if c.stage == CompactionStage::Dropped));
    assert!(dropped, "{:?}", failed.events);

    // The next small prompt is answered, and its request no longer carries the big one.
    let next = served.run("hello again").await;
    assert_eq!(stopped(&next), Ok(StopReason::EndTurn));
    let sent = server.seen().last().cloned().expect("a request");
    assert!(text_of(sent.messages().last().expect("a message")).contains("hello again"));
    assert!(!sent.raw.contains("xxxxxxxx"), "the failed prompt is not sent again");
    assert!(sent.raw.contains("hello"), "what came before it still is");
    assert_eq!(stopped(&served.run("and once more").await), Ok(StopReason::EndTurn));

    // The store keeps the failed prompt.
    let history = served.history().await;
    assert!(history.iter().any(|e| matches!(e, Event::UserMessage { content, .. }
        if matches!(content.first(), Some(heron_core::types::UserContent::Text { text }) if text == &huge))));
}

#[tokio::test]
async fn a_server_counting_more_than_the_estimate_is_asked_again_once_compacted() {
    // The server refuses past 30,000 bytes; the config's window lets the estimate go to
    // 32,000, so one request is refused before Heron learns the server's count.
    let server = windowed::start(30_000, None);
    let served = open(&server, WINDOW).await;
    let ended = read_big_files(&served, 1..=8).await;
    for (n, turn) in ended.iter().enumerate() {
        assert_eq!(stopped(turn), Ok(StopReason::EndTurn), "turn {n}");
    }
    let refused: Vec<bool> = server.seen().iter().map(|s| s.raw.len() > 30_000).collect();
    assert!(refused.contains(&true), "the server refused one request");
    assert!(!refused.windows(2).any(|pair| pair == [true, true]), "a refusal is retried once, compacted");
}

#[tokio::test]
async fn reported_prompt_tokens_make_compaction_start_earlier() {
    // The server counts a token for every two bytes: the window fills twice as fast as
    // four bytes a token would say.
    let server = windowed::start(1 << 30, Some(2));
    let served = open(&server, WINDOW).await;
    let ended = read_big_files(&served, 1..=3).await;
    for (n, turn) in ended.iter().enumerate() {
        assert_eq!(stopped(turn), Ok(StopReason::EndTurn), "turn {n}");
    }
    let largest = server.seen().iter().map(|s| s.raw.len()).max().unwrap_or(0);
    assert!(largest / 4 < 9_600, "by bytes alone nothing would be compacted ({largest} bytes)");
    assert!(!compactions(&served.history().await).is_empty(), "the server's count compacted it");
}

#[tokio::test]
async fn compact_on_demand_summarizes_with_the_users_instructions() {
    let server = windowed::start(LIMIT, None);
    let served = open(&server, "").await;
    let empty = served.compact("").await;
    assert_eq!(stopped(&empty), Ok(StopReason::EndTurn));
    assert!(empty.text.contains("nothing to compact"), "{}", empty.text);
    assert!(server.seen().is_empty(), "nothing was asked of the model");

    assert_eq!(stopped(&served.run("please read a.txt").await), Ok(StopReason::EndTurn));
    let compacted = served.compact("focus on the parser").await;
    assert_eq!(stopped(&compacted), Ok(StopReason::EndTurn));
    assert!(compacted.thought.contains(SUMMARY), "{}", compacted.thought);
    assert!(compacted.text.starts_with("Compacted the conversation"), "{}", compacted.text);
    let asked = server.seen().last().cloned().expect("a summary request");
    assert!(is_summary_request(&asked));
    assert!(text_of(asked.messages().last().expect("a message")).contains("focus on the parser"));
    let marked = compacted.events.iter().any(
        |e| matches!(e, Event::Compacted(c) if c.instructions.as_deref() == Some("focus on the parser")),
    );
    assert!(marked, "{:?}", compacted.events);

    assert_eq!(stopped(&served.run("please read b.txt").await), Ok(StopReason::EndTurn));
    let next = &server.seen()[3];
    assert!(text_of(&next.messages()[1]).contains(SUMMARY), "the next request starts from the summary");
    assert!(!next.raw.contains("hello from notes"), "the summarized turn is not sent");
    let history = served.history().await;
    assert!(
        history.iter().any(
            |e| matches!(e, Event::ToolResult { for_model, .. } if for_model.contains("hello from notes"))
        ),
        "the store keeps it"
    );
}

#[tokio::test]
async fn a_summary_is_redacted_and_cut_at_its_cap() {
    use crate::support::server_mock::{Answer, sse};
    use crate::support::servers::{KEY, delta, finish};
    // A model that answers a summary request with a key and far more than any summary needs.
    let server = MockServer::start(|_, request| {
        let text = if is_summary_request(request) {
            format!("{KEY} {}", "word ".repeat(40_000))
        } else {
            "Hi.".into()
        };
        Answer::Stream(sse(&[delta(serde_json::json!({ "content": text })), finish("stop")]))
    });
    let served = open(&server, "").await;
    assert_eq!(stopped(&served.run("hello").await), Ok(StopReason::EndTurn));
    let compacted = served.compact("").await;
    assert_eq!(stopped(&compacted), Ok(StopReason::EndTurn));
    let history = served.history().await;
    let summary = history
        .iter()
        .find_map(|e| match e {
            Event::Compacted(c) => c.summary.clone(),
            _ => None,
        })
        .expect("a stored summary");
    assert!(summary.len() <= 32 * 1024, "{} bytes", summary.len());
    assert!(!summary.contains(KEY) && summary.starts_with("***"), "{}", &summary[..40]);
    assert!(!compacted.thought.contains(KEY) && compacted.thought.len() < 33 * 1024);
}
