//! The stream chunk decoder against each server quirk it accepts.

use super::*;

fn run(payloads: &[&str]) -> Vec<ModelEvent> {
    let mut assembler = ChunkAssembler::default();
    let mut out = Vec::new();
    for payload in payloads {
        if assembler.push(payload, &mut out).expect("valid payload") == Progress::Done {
            break;
        }
    }
    assembler.finish(&mut out);
    out
}

fn calls(events: &[ModelEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::ToolCall { call } => {
                Some((call.id.clone(), call.name.clone(), call.arguments.clone()))
            }
            _ => None,
        })
        .collect()
}

fn failure(payloads: &[&str]) -> ProviderError {
    let mut assembler = ChunkAssembler::default();
    let mut out = Vec::new();
    for payload in payloads {
        if let Err(error) = assembler.push(payload, &mut out) {
            return error;
        }
    }
    panic!("the stream did not fail: {out:?}")
}

#[test]
fn stop_with_tool_calls_counts_as_tool_calls() {
    let events = run(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn reasoning_under_both_names_is_emitted_once() {
    let events = run(&[r#"{"choices":[{"delta":{"reasoning_content":"hm","reasoning":"hm"}}]}"#]);
    assert_eq!(
        events,
        [ModelEvent::ThoughtDelta { text: "hm".into() }, ModelEvent::Finish { reason: FinishReason::Stop }]
    );
}

#[test]
fn a_refusal_delta_finishes_as_refusal() {
    let events = run(&[
        r#"{"choices":[{"delta":{"refusal":"I can't."}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
    ]);
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta { text: "I can't.".into() },
            ModelEvent::Finish { reason: FinishReason::Refusal }
        ]
    );
}

#[test]
fn content_filter_is_a_refusal_and_length_is_length() {
    let filtered = run(&[r#"{"choices":[{"delta":{},"finish_reason":"content_filter"}]}"#]);
    assert_eq!(filtered.last(), Some(&ModelEvent::Finish { reason: FinishReason::Refusal }));
    let cut = run(&[r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]}"#]);
    assert_eq!(cut.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
}

#[test]
fn nulls_are_read_as_absent() {
    let events = run(&[
        r#"{"choices":null,"usage":null}"#,
        r#"{"choices":[{"delta":{"content":null,"tool_calls":null},"finish_reason":null}]}"#,
    ]);
    assert_eq!(events, [ModelEvent::Finish { reason: FinishReason::Stop }]);
}

#[test]
fn an_error_chunk_fails_with_its_message() {
    let mut assembler = ChunkAssembler::default();
    let failure = assembler.push(r#"{"error":{"message":"upstream died","code":503}}"#, &mut Vec::new());
    assert_eq!(failure, Err(ProviderError::Status { status: 503, message: "upstream died".into() }));
}

#[test]
fn a_stream_without_finish_reason_finishes_by_its_tool_calls() {
    let with_calls =
        run(&[r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]}}]}"#]);
    assert_eq!(
        with_calls,
        [
            ModelEvent::ToolCall {
                call: ToolCallRequest { id: "a".into(), name: "f".into(), arguments: "{}".into() }
            },
            ModelEvent::Finish { reason: FinishReason::ToolCalls }
        ]
    );
    let without = run(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
    assert_eq!(without.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[test]
fn arguments_sent_as_an_object_become_its_json_text() {
    let events = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":{"path":"a.txt"}}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(calls(&events), [("c1".into(), "read_file".into(), r#"{"path":"a.txt"}"#.into())]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn parallel_calls_all_at_index_zero_stay_apart_by_id() {
    let events = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"read_file","arguments":"{\"path\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"b.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(
        calls(&events),
        [
            ("call_a".into(), "read_file".into(), r#"{"path":"a.txt"}"#.into()),
            ("call_b".into(), "read_file".into(), r#"{"path":"b.txt"}"#.into()),
        ]
    );
}

#[test]
fn an_id_repeated_in_every_delta_continues_its_call() {
    let events = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"arguments":":1}"}}]}}]}"#,
    ]);
    assert_eq!(calls(&events), [("x".into(), "f".into(), r#"{"a":1}"#.into())]);
}

#[test]
fn eos_and_stop_with_calls_finish_by_the_calls() {
    let eos = run(&[r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"eos"}]}"#]);
    assert_eq!(eos.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    let with_calls = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"eos"}]}"#,
    ]);
    assert_eq!(with_calls.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn finish_reason_error_fails_with_the_upstream_reason() {
    let error = failure(&[
        r#"{"choices":[{"delta":{"content":"par"}}]}"#,
        r#"{"error":{"code":502,"message":"Provider returned error","metadata":{"raw":"upstream overloaded"}},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}"#,
    ]);
    assert_eq!(
        error,
        ProviderError::Status { status: 502, message: "Provider returned error: upstream overloaded".into() }
    );
    let bare = failure(&[r#"{"choices":[{"delta":{},"finish_reason":"error"}]}"#]);
    assert!(matches!(bare, ProviderError::Status { message, .. } if message.contains("error")));
}

#[test]
fn error_events_fail_with_the_servers_reason() {
    let mut assembler = ChunkAssembler::default();
    let wrapped = Payload::Error(r#"{"error":{"code":500,"message":"context full"}}"#.into());
    assert_eq!(
        assembler.push_payload(&wrapped, &mut Vec::new()),
        Err(ProviderError::Status { status: 500, message: "context full".into() })
    );
    let bare = Payload::Error(r#"{"code":500,"message":"slot unavailable","type":"server_error"}"#.into());
    assert_eq!(
        assembler.push_payload(&bare, &mut Vec::new()),
        Err(ProviderError::Status { status: 500, message: "slot unavailable".into() })
    );
    let text = Payload::Error("out of memory".into());
    assert_eq!(
        assembler.push_payload(&text, &mut Vec::new()),
        Err(ProviderError::Status { status: 502, message: "out of memory".into() })
    );
}

#[test]
fn too_many_tool_calls_fail_the_stream() {
    let mut assembler = ChunkAssembler::default();
    let mut result = Ok(Progress::More);
    for i in 0..=MAX_TOOL_CALLS {
        let chunk = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"id":"c{i}","function":{{"name":"f"}}}}]}}}}]}}"#
        );
        result = assembler.push(&chunk, &mut Vec::new());
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(result, Err(ProviderError::Protocol(_))), "{result:?}");
}

#[test]
fn reasoning_details_merge_across_deltas_and_go_out_before_finish() {
    let events = run(&[
        r#"{"choices":[{"delta":{"reasoning":"Let ","reasoning_details":[{"type":"reasoning.text","text":"Let ","index":0,"format":"anthropic-claude-v1"}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"me","reasoning_details":[{"type":"reasoning.text","text":"me","index":0,"signature":null}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"","index":0,"signature":"sig"}]}}]}"#,
        r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
    ]);
    let details = events.iter().find_map(|event| match event {
        ModelEvent::ReasoningDetails { details } => Some(details.clone()),
        _ => None,
    });
    assert_eq!(
        details,
        Some(serde_json::json!([{
            "type": "reasoning.text", "text": "Let me", "index": 0,
            "format": "anthropic-claude-v1", "signature": "sig"
        }]))
    );
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[test]
fn deepseek_cache_hits_count_as_cached_input() {
    let events = run(&[
        r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":10,"prompt_cache_hit_tokens":768,"prompt_cache_miss_tokens":232}}"#,
    ]);
    let usage = Usage { input_tokens: 1000, output_tokens: 10, cached_input_tokens: 768, ..Usage::default() };
    assert!(events.contains(&ModelEvent::Usage { usage }), "{events:?}");
    // Without `prompt_tokens`, the hits and misses are the prompt.
    let split =
        run(&[r#"{"choices":[],"usage":{"prompt_cache_hit_tokens":5,"prompt_cache_miss_tokens":7}}"#]);
    let usage = Usage { input_tokens: 12, cached_input_tokens: 5, ..Usage::default() };
    assert!(split.contains(&ModelEvent::Usage { usage }), "{split:?}");
}

#[test]
fn mistral_content_parts_split_into_thoughts_and_text_in_order() {
    let events = run(&[
        r#"{"choices":[{"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me "},{"type":"text","text":"look."}]}]}}]}"#,
        r#"{"choices":[{"delta":{"content":[{"type":"text","text":"It "},{"type":"reference","reference_ids":[1]},{"type":"text","text":"is."}]}}]}"#,
        r#"{"choices":[{"delta":{"content":"Done."},"finish_reason":"stop"}]}"#,
    ]);
    assert_eq!(
        events,
        [
            ModelEvent::ThoughtDelta { text: "Let me look.".into() },
            ModelEvent::TextDelta { text: "It ".into() },
            ModelEvent::TextDelta { text: "is.".into() },
            ModelEvent::TextDelta { text: "Done.".into() },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[test]
fn a_tool_call_name_or_id_past_its_bound_fails_the_stream() {
    use crate::llm::MAX_TOOL_IDENTITY_BYTES;
    let at_bound = "n".repeat(MAX_TOOL_IDENTITY_BYTES);
    let chunk = |id: &str, name: &str| {
        serde_json::json!({ "choices": [{ "delta": { "tool_calls": [
            { "index": 0, "id": id, "function": { "name": name, "arguments": "{}" } }
        ] } }] })
        .to_string()
    };
    let events =
        run(&[&chunk(&at_bound, &at_bound), r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#]);
    assert_eq!(calls(&events), [(at_bound.clone(), at_bound.clone(), "{}".to_owned())]);
    let past = format!("{at_bound}n");
    for (id, name) in [(past.as_str(), "f"), ("c", past.as_str())] {
        let result = ChunkAssembler::default().push(&chunk(id, name), &mut Vec::new());
        assert!(matches!(&result, Err(ProviderError::Protocol(m)) if m.contains("1024 bytes")), "{result:?}");
    }
}

#[test]
fn reasoning_details_past_their_bound_are_dropped_whole_and_the_text_still_streams() {
    let piece = "r".repeat(1024 * 1024);
    let chunk = serde_json::json!({ "choices": [{ "delta": {
        "reasoning": "x",
        "reasoning_details": [{ "type": "reasoning.text", "text": piece, "index": 0 }]
    } }] })
    .to_string();
    let mut payloads: Vec<&str> = vec![chunk.as_str(); MAX_REASONING_DETAILS_BYTES / piece.len() + 1];
    let finish = r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#;
    payloads.push(finish);
    let events = run(&payloads);
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::ReasoningDetails { .. })), "none is kept");
    assert!(events.iter().any(|e| matches!(e, ModelEvent::TextDelta { text } if text == "ok")));
    let thoughts = events.iter().filter(|e| matches!(e, ModelEvent::ThoughtDelta { .. })).count();
    assert_eq!(thoughts, payloads.len() - 1, "the thought streams on");
}
