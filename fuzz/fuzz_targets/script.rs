//! Fuzzes the scripted model's script: any text through `Script::parse`, and every script
//! that parses played through `ScriptedProvider`, by conversation and in request order,
//! and once more cancelled half way. Parsing and playing must never panic; a script
//! written back as a recording writes it must parse to the same script; each turn must
//! stream exactly what it scripts (deltas that concatenate to its text and thoughts, its
//! tool calls with their ids, its usage, its finish reason or its error, then nothing);
//! word deltas must be word-sized; a cancel must end the stream at once.
//!
//! The runtime's clock is paused, so `delay_ms` steps (up to `u64::MAX`) cost no real
//! time: the clock jumps to each deadline as soon as nothing else can run.

#![no_main]

use std::time::Duration;

use futures_util::StreamExt;
use heron_core::llm::scripted::{Deltas, Script, ScriptedProvider, Step, Turn, word_deltas};
use heron_core::llm::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, Provider, ProviderError, ToolCallRequest, UserPart,
};
use libfuzzer_sys::fuzz_target;
use tokio_util::sync::CancellationToken;

/// What a `context` step says of a request with no working context.
const NO_CONTEXT: &str = "I was given no working context. Instruction files I was given: none. ";

/// Turns played per input, so a script of a thousand `{}` lines stays cheap.
const MAX_TURNS: usize = 8;

/// A request after `turns` model turns, which the stateless provider answers with turn `turns`.
fn request_after(turns: usize) -> ModelRequest {
    let mut messages = vec![ChatMessage::User { parts: vec![UserPart::Text { text: "go".into() }] }];
    for _ in 0..turns {
        messages.push(ChatMessage::Assistant {
            text: "earlier".into(),
            tool_calls: Vec::new(),
            reasoning: None,
        });
        messages.push(ChatMessage::User { parts: vec![UserPart::Text { text: "more".into() }] });
    }
    ModelRequest { model: "m".into(), messages, tools: Vec::new(), effort: None, max_tokens: None }
}

/// What playing turn `index` must yield, worked out from the documented format, and the
/// delays it sleeps on the way.
struct Expected {
    events: Vec<ModelEvent>,
    error: Option<ProviderError>,
    /// The text and thoughts as scripted, whole.
    text: String,
    thought: String,
    delay: Duration,
}

fn whole(deltas: &Deltas) -> String {
    match deltas {
        Deltas::Words(text) => text.clone(),
        Deltas::Exact(pieces) => pieces.concat(),
    }
}

fn expected(index: usize, turn: &Turn) -> Expected {
    let mut out = Expected {
        events: vec![ModelEvent::Attempt { number: 1 }],
        error: None,
        text: String::new(),
        thought: String::new(),
        delay: Duration::ZERO,
    };
    let mut calls = 0;
    let mut refused = false;
    for step in &turn.steps {
        match step {
            Step::Thought(deltas) => {
                out.thought.push_str(&whole(deltas));
                let pieces = deltas.pieces().into_iter();
                out.events.extend(pieces.map(|text| ModelEvent::ThoughtDelta { text: text.to_owned() }));
            }
            Step::Text(deltas) => {
                out.text.push_str(&whole(deltas));
                let pieces = deltas.pieces().into_iter();
                out.events.extend(pieces.map(|text| ModelEvent::TextDelta { text: text.to_owned() }));
            }
            Step::ToolCall(call) => {
                let id = call.id.clone().unwrap_or_else(|| format!("call_{index}_{calls}"));
                let call = ToolCallRequest { id, name: call.name.clone(), arguments: call.arguments_text() };
                out.events.push(ModelEvent::ToolCall { call });
                calls += 1;
            }
            Step::Usage(usage) => out.events.push(ModelEvent::Usage { usage: (*usage).into() }),
            Step::DelayMs(ms) => out.delay = out.delay.saturating_add(Duration::from_millis(*ms)),
            Step::Error(message) => {
                out.error = Some(ProviderError::Scripted(message.clone()));
                return out;
            }
            Step::Refuse(refuse) => refused |= refuse,
            Step::Context(false) => {}
            Step::Context(true) => {
                // The fuzz's requests carry no working context and no instruction files.
                let said = Deltas::Words(NO_CONTEXT.to_owned());
                out.text.push_str(NO_CONTEXT);
                let pieces = said.pieces().into_iter();
                out.events.extend(pieces.map(|text| ModelEvent::TextDelta { text: text.to_owned() }));
            }
        }
    }
    let reason = turn.finish.unwrap_or(if refused {
        FinishReason::Refusal
    } else if calls > 0 {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    });
    out.events.push(ModelEvent::Finish { reason });
    out
}

/// Each piece is one word with the whitespace after it (leading whitespace rides with the
/// first), and the pieces put back together are the text.
fn assert_word_sized(text: &str) {
    let pieces = word_deltas(text);
    assert_eq!(pieces.concat(), text, "word deltas lose text");
    for piece in &pieces {
        assert!(!piece.is_empty(), "an empty word delta of {text:?}");
        let word = piece.trim_start();
        let after = word.trim_end();
        assert!(!after.contains(char::is_whitespace), "delta {piece:?} of {text:?} holds two words");
    }
}

/// Everything a stream yields: its events, then its error if it failed; nothing may follow.
async fn collect(
    provider: &ScriptedProvider,
    request: ModelRequest,
) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let mut stream = provider.stream(request, CancellationToken::new());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "the stream goes on after {error:?}");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

fn deltas(events: &[ModelEvent], thought: bool) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::TextDelta { text } if !thought => Some(text.as_str()),
            ModelEvent::ThoughtDelta { text } if thought => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Plays turn `index` and checks it against the script.
async fn play_turn(provider: &ScriptedProvider, index: usize, turn: &Turn) {
    let want = expected(index, turn);
    let started = tokio::time::Instant::now();
    let (events, error) = collect(provider, request_after(index)).await;
    let slept = started.elapsed();
    assert_eq!(deltas(&events, false), want.text, "turn {index}: text deltas do not make its text");
    assert_eq!(deltas(&events, true), want.thought, "turn {index}: thought deltas do not make its thought");
    assert_eq!(events, want.events, "turn {index} streamed something else");
    assert_eq!(error, want.error, "turn {index} ended otherwise");
    // Tokio caps a far deadline at about 30 years, so only check delays below that.
    if want.delay < Duration::from_secs(86_400 * 365) {
        assert!(slept >= want.delay, "turn {index} slept {slept:?} of its {:?}", want.delay);
    }
}

/// Cancels a stream of turn `index` after half its events: it must yield `Cancelled` at
/// once, after a prefix of what the uncancelled turn yields, then end.
async fn cancel_turn(provider: &ScriptedProvider, index: usize, turn: &Turn) {
    let full = expected(index, turn).events;
    let cancel = CancellationToken::new();
    let mut stream = provider.stream(request_after(index), cancel.clone());
    let mut seen = Vec::new();
    while seen.len() < full.len() / 2 {
        match stream.next().await {
            Some(Ok(event)) => seen.push(event),
            other => panic!("turn {index} stopped early with {other:?}"),
        }
    }
    cancel.cancel();
    assert_eq!(seen[..], full[..seen.len()], "turn {index}: the cancelled stream strayed");
    assert_eq!(stream.next().await, Some(Err(ProviderError::Cancelled)), "turn {index} ignored the cancel");
    assert_eq!(stream.next().await, None, "turn {index} goes on after its cancel");
}

fuzz_target!(|text: &str| {
    let Ok(script) = Script::parse(text) else { return };

    // A recording writes turns with serde; reading them back must give the same script.
    let written: String = script
        .turns()
        .iter()
        .map(|turn| serde_json::to_string(turn).expect("a turn encodes") + "\n")
        .collect();
    assert_eq!(
        Script::parse(&written).as_ref(),
        Ok(&script),
        "the script does not survive writing: {written}"
    );

    for turn in script.turns() {
        for step in &turn.steps {
            if let Step::Text(Deltas::Words(text)) | Step::Thought(Deltas::Words(text)) = step {
                assert_word_sized(text);
            }
        }
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let turns = script.turns();
        let by_conversation = ScriptedProvider::new(script.clone());
        let in_order = ScriptedProvider::new(script.clone()).sequential();
        for (index, turn) in turns.iter().enumerate().take(MAX_TURNS) {
            play_turn(&by_conversation, index, turn).await;
            // In request order, the n-th request plays turn n whatever the conversation.
            play_turn(&in_order, index, turn).await;
            cancel_turn(&by_conversation, index, turn).await;
        }
        // Past the end, the model says so and stops.
        let (events, error) = collect(&by_conversation, request_after(turns.len())).await;
        assert_eq!(error, None);
        let said = format!("The script has no more turns (it has {}); nothing more to say.", turns.len());
        assert_eq!(deltas(&events, false), said);
        assert_eq!(events.first(), Some(&ModelEvent::Attempt { number: 1 }));
        assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    });
});
