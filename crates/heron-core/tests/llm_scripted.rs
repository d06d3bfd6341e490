//! The scripted provider: turn selection, exact deltas, tool calls, failures, delays and
//! cancellation, the end of the script, parse errors and the built-in demo.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use heron_core::llm::scripted::{DEMO_SCRIPT, Script, ScriptError, ScriptedProvider};
use heron_core::llm::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError,
    ToolCallRequest, Usage, UserPart,
};
use tokio_util::sync::CancellationToken;

fn provider(script: &str) -> ScriptedProvider {
    ScriptedProvider::new(Script::parse(script).expect("valid script"))
}

/// A request after `turns` earlier model turns.
fn request_after(turns: usize) -> ModelRequest {
    let mut messages = vec![ChatMessage::User { parts: vec![UserPart::Text { text: "Go".into() }] }];
    for _ in 0..turns {
        messages.push(ChatMessage::Assistant {
            text: "earlier".into(),
            tool_calls: Vec::new(),
            reasoning: None,
        });
        messages.push(ChatMessage::User { parts: vec![UserPart::Text { text: "more".into() }] });
    }
    ModelRequest { model: "scripted".into(), messages, tools: Vec::new(), effort: None, max_tokens: None }
}

async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing follows an error");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

async fn play(provider: &ScriptedProvider, turns_before: usize) -> (Vec<ModelEvent>, Option<ProviderError>) {
    collect(provider.stream(request_after(turns_before), CancellationToken::new())).await
}

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn tool_calls(events: &[ModelEvent]) -> Vec<ToolCallRequest> {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

const TWO_TURNS: &str = r#"
# A comment, then two turns.
{"steps": [{"text": "first"}]}

{"steps": [{"text": "second"}]}
"#;

#[tokio::test]
async fn the_turn_played_is_the_number_of_assistant_messages() {
    let provider = provider(TWO_TURNS);
    assert_eq!(text_of(&play(&provider, 0).await.0), "first");
    assert_eq!(text_of(&play(&provider, 1).await.0), "second");
    // Stateless: asking again gives the same answer.
    assert_eq!(text_of(&play(&provider, 0).await.0), "first");
}

#[tokio::test]
async fn text_and_thought_stream_as_several_deltas_that_concatenate_exactly() {
    let text = "  Hello,  world!\nThis is\tHeron. ";
    let script = serde_json::json!({ "steps": [{ "thought": "Some careful thought." }, { "text": text }] });
    let (events, error) = play(&provider(&script.to_string()), 0).await;
    assert_eq!(error, None);
    let deltas = events.iter().filter(|e| matches!(e, ModelEvent::TextDelta { .. })).count();
    assert!(deltas > 1, "{deltas} text deltas");
    assert_eq!(text_of(&events), text);
    let thought: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ThoughtDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought, "Some careful thought.");
    assert_eq!(events[0], ModelEvent::Attempt { number: 1 });
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[tokio::test]
async fn tool_calls_get_default_ids_and_finish_as_tool_calls() {
    let script = r#"{"steps": [{"tool_call": {"name": "a", "arguments": {"x": 1}}}, {"tool_call": {"name": "b", "id": "mine"}}, {"tool_call": {"name": "c", "arguments": "{not json"}}]}"#;
    let (events, error) = play(&provider(&format!("{{}}\n{script}")), 1).await;
    assert_eq!(error, None);
    assert_eq!(
        tool_calls(&events),
        [
            ToolCallRequest { id: "call_1_0".into(), name: "a".into(), arguments: "{\"x\":1}".into() },
            ToolCallRequest { id: "mine".into(), name: "b".into(), arguments: "{}".into() },
            ToolCallRequest { id: "call_1_2".into(), name: "c".into(), arguments: "{not json".into() },
        ]
    );
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[tokio::test]
async fn an_explicit_finish_and_refuse_set_the_finish_reason() {
    let script = "{\"steps\": [{\"text\": \"cut\"}], \"finish\": \"length\"}\n\
                  {\"steps\": [{\"text\": \"No.\"}, {\"refuse\": true}]}";
    let provider = provider(script);
    assert_eq!(play(&provider, 0).await.0.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
    assert_eq!(
        play(&provider, 1).await.0.last(),
        Some(&ModelEvent::Finish { reason: FinishReason::Refusal })
    );
}

#[tokio::test]
async fn usage_steps_report_usage() {
    let (events, _) = play(&provider(r#"{"steps": [{"usage": {"input": 10, "output": 5}}]}"#), 0).await;
    assert_eq!(
        events[1],
        ModelEvent::Usage {
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cached_input_tokens: 0,
                reasoning_tokens: 0,
                cache_write_input_tokens: 0
            }
        }
    );
}

#[tokio::test]
async fn an_error_step_fails_the_stream_at_that_point() {
    let script = r#"{"steps": [{"text": "before"}, {"error": "the model fell over"}, {"text": "after"}]}"#;
    let (events, error) = play(&provider(script), 0).await;
    assert_eq!(error, Some(ProviderError::Scripted("the model fell over".into())));
    assert_eq!(text_of(&events), "before");
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Finish { .. })));
}

#[tokio::test]
async fn a_delay_is_cut_short_by_cancellation() {
    let provider = provider(r#"{"steps": [{"text": "wait"}, {"delay_ms": 10000}, {"text": "never"}]}"#);
    let cancel = CancellationToken::new();
    let mut stream = provider.stream(request_after(0), cancel.clone());
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::Attempt { number: 1 })));
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::TextDelta { text: "wait".into() })));
    let started = Instant::now();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    assert_eq!(stream.next().await, Some(Err(ProviderError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(stream.next().await, None);
}

#[tokio::test]
async fn a_delay_without_cancellation_waits_then_goes_on() {
    let provider = provider(r#"{"steps": [{"delay_ms": 50}, {"text": "later"}]}"#);
    let started = Instant::now();
    let (events, error) = play(&provider, 0).await;
    assert_eq!(error, None);
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(text_of(&events), "later");
}

#[tokio::test]
async fn past_the_end_the_model_says_so_and_stops() {
    let (events, error) = play(&provider(TWO_TURNS), 2).await;
    assert_eq!(error, None);
    assert!(text_of(&events).contains("no more turns"), "{}", text_of(&events));
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[test]
fn a_parse_error_names_its_line() {
    let script = "# comment\n{\"steps\": []}\n\n{\"steps\": [{\"txt\": \"typo\"}]}\n";
    let error = Script::parse(script).expect_err("a typo");
    assert!(matches!(error, ScriptError::Parse { line: 4, .. }), "{error:?}");
    assert!(error.to_string().starts_with("script line 4:"), "{error}");
}

#[test]
fn from_path_reads_a_file_and_names_a_missing_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("turns.jsonl");
    std::fs::write(&path, TWO_TURNS).expect("write");
    let provider = ScriptedProvider::from_path(&path).expect("valid file");
    assert_eq!(provider.script().turns().len(), 2);
    let missing = ScriptedProvider::from_path(&dir.path().join("missing.jsonl")).expect_err("no file");
    assert!(matches!(missing, ScriptError::Read { .. }), "{missing:?}");
}

#[tokio::test]
async fn a_context_step_says_the_working_directory_and_the_instruction_files_given() {
    use heron_core::llm::{ChatMessage, ModelRequest, UserPart};
    let script = Script::parse(r#"{"steps": [{"context": true}]}"#).expect("parses");
    let provider = ScriptedProvider::new(script);
    let context = "<environment>\nWorking directory: /work/app\n</environment>\n\n<project-instructions>\nRead these.\n\n## /work/AGENTS.md\nUse tabs.\n</project-instructions>\n\nHello";
    let nested = "listing\n\n<project-instructions>\nThis folder has instructions.\n\n## /work/app/lib/CLAUDE.md\nTabs.\n</project-instructions>";
    let request = ModelRequest {
        model: "m".into(),
        messages: vec![
            ChatMessage::System { text: "system".into() },
            ChatMessage::User { parts: vec![UserPart::Text { text: context.into() }] },
            ChatMessage::Tool { call_id: "c".into(), content: nested.into() },
        ],
        tools: Vec::new(),
        effort: None,
        max_tokens: None,
    };
    let (events, _) = collect(provider.stream(request, CancellationToken::new())).await;
    assert_eq!(
        text_of(&events),
        "My working directory is /work/app. Instruction files I was given: /work/AGENTS.md, /work/app/lib/CLAUDE.md. "
    );
}

#[tokio::test]
async fn the_demo_script_parses_and_plays_its_three_turns() {
    let script = Script::parse(DEMO_SCRIPT).expect("the demo parses");
    assert_eq!(script.turns().len(), 3);
    let demo = ScriptedProvider::demo();

    let (first, _) = play(&demo, 0).await;
    assert!(first.iter().any(|e| matches!(e, ModelEvent::ThoughtDelta { .. })));
    // It first says what it was told of its surroundings: here, nothing.
    assert_eq!(
        text_of(&first),
        "I was given no working context. Instruction files I was given: none. I'll look around the project first."
    );
    assert_eq!(
        tool_calls(&first),
        [ToolCallRequest {
            id: "call_0_0".into(),
            name: "list_files".into(),
            arguments: r#"{"path":"."}"#.into()
        }]
    );

    let (second, _) = play(&demo, 1).await;
    let write = &tool_calls(&second)[0];
    assert_eq!(write.name, "write_file");
    let arguments: serde_json::Value = serde_json::from_str(&write.arguments).expect("JSON arguments");
    assert_eq!(
        arguments,
        serde_json::json!({ "path": "NOTES.md", "content": "# Notes\n\nHeron was here.\n" })
    );

    let (third, _) = play(&demo, 2).await;
    assert!(third.iter().any(|e| matches!(e, ModelEvent::Usage { .. })));
    assert_eq!(third.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[tokio::test]
async fn text_given_as_a_list_streams_exactly_those_deltas() {
    let provider = provider(r#"{"steps": [{"text": ["Hel", "lo wor", "ld"]}, {"thought": ["a b"]}]}"#);
    let (events, error) = play(&provider, 0).await;
    assert_eq!(error, None);
    let deltas: Vec<&ModelEvent> = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::TextDelta { .. } | ModelEvent::ThoughtDelta { .. }))
        .collect();
    assert_eq!(
        deltas,
        [
            &ModelEvent::TextDelta { text: "Hel".into() },
            &ModelEvent::TextDelta { text: "lo wor".into() },
            &ModelEvent::TextDelta { text: "ld".into() },
            &ModelEvent::ThoughtDelta { text: "a b".into() },
        ]
    );
}

#[tokio::test]
async fn sequential_playback_plays_turns_in_request_order_across_clones() {
    let provider = provider("{\"steps\": [{\"text\": \"first\"}]}\n{\"steps\": [{\"text\": \"second\"}]}\n")
        .sequential();
    let clone = provider.clone();
    // The conversation says "turn 5"; request order wins, and a clone shares the place.
    assert_eq!(text_of(&play(&provider, 5).await.0), "first");
    assert_eq!(text_of(&play(&clone, 0).await.0), "second");
    assert!(text_of(&play(&provider, 0).await.0).contains("no more turns"));
}
