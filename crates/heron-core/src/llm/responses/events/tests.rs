//! The Responses event fold against each event it reads, the errors it reports and the
//! bounds it keeps.

use serde_json::json;

use super::*;
use crate::llm::MAX_TOOL_ARGUMENT_BYTES;

fn run(events: &[Value]) -> Vec<ModelEvent> {
    let mut assembler = EventAssembler::default();
    let mut out = Vec::new();
    for event in events {
        let payload = Payload::Data(event.to_string());
        if assembler.push_payload(&payload, &mut out).expect("valid event") == Progress::Done {
            break;
        }
    }
    assembler.finish(&mut out);
    out
}

fn failure(events: &[Value]) -> ProviderError {
    let mut assembler = EventAssembler::default();
    let mut out = Vec::new();
    for event in events {
        if let Err(error) = assembler.push_payload(&Payload::Data(event.to_string()), &mut out) {
            return error;
        }
    }
    panic!("the stream did not fail: {out:?}")
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

fn completed() -> Value {
    json!({ "type": "response.completed", "response": { "status": "completed" } })
}

fn text(delta: &str) -> Value {
    json!({ "type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": delta })
}

fn call_added(index: u64, item_id: &str, call_id: &str, name: &str) -> Value {
    json!({
        "type": "response.output_item.added",
        "output_index": index,
        "item": { "type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": "" },
    })
}

fn arguments(item_id: &str, delta: &str) -> Value {
    json!({ "type": "response.function_call_arguments.delta", "item_id": item_id, "delta": delta })
}

fn call_done(index: u64, item_id: &str, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({
        "type": "response.output_item.done",
        "output_index": index,
        "item": { "type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments },
    })
}

#[test]
fn text_deltas_stream_and_completed_finishes_with_stop() {
    let events = run(&[
        json!({ "type": "response.created", "response": { "id": "resp_1" } }),
        json!({ "type": "response.in_progress", "response": { "id": "resp_1" } }),
        text("Hel"),
        text("lo"),
        json!({ "type": "response.output_text.done", "text": "Hello" }),
        completed(),
    ]);
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta { text: "Hel".into() },
            ModelEvent::TextDelta { text: "lo".into() },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[test]
fn completed_usage_reads_cached_and_reasoning_tokens() {
    let events = run(&[json!({
        "type": "response.completed",
        "response": { "usage": {
            "input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
            "input_tokens_details": { "cached_tokens": 64 },
            "output_tokens_details": { "reasoning_tokens": 7 },
        } },
    })]);
    assert_eq!(
        events,
        [
            ModelEvent::Usage {
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 20,
                    cached_input_tokens: 64,
                    cache_write_input_tokens: 0,
                    reasoning_tokens: 7,
                }
            },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[test]
fn a_call_assembled_from_deltas_goes_out_with_its_call_id_when_done() {
    let events = run(&[
        call_added(0, "fc_1", "call_1", "read_file"),
        arguments("fc_1", "{\"pa"),
        arguments("fc_1", "th\":"),
        arguments("fc_1", "\"a.txt\"}"),
        call_done(0, "fc_1", "call_1", "read_file", ""),
        completed(),
    ]);
    assert_eq!(calls(&events), [("call_1".into(), "read_file".into(), r#"{"path":"a.txt"}"#.into())]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn whole_arguments_of_a_done_event_replace_the_deltas() {
    let events = run(&[
        call_added(0, "fc_1", "call_1", "f"),
        arguments("fc_1", "{\"a\":"),
        json!({ "type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": "{\"a\":1}" }),
        call_done(0, "fc_1", "call_1", "f", "{\"a\":1}"),
        completed(),
    ]);
    assert_eq!(calls(&events), [("call_1".into(), "f".into(), r#"{"a":1}"#.into())]);
}

#[test]
fn parallel_calls_interleaved_stay_apart_by_item_id() {
    let events = run(&[
        call_added(0, "fc_a", "call_a", "read_file"),
        call_added(1, "fc_b", "call_b", "list_files"),
        arguments("fc_b", "{\"path\":"),
        arguments("fc_a", "{\"path\":\"a\"}"),
        arguments("fc_b", "\".\"}"),
        call_done(0, "fc_a", "call_a", "read_file", ""),
        call_done(1, "fc_b", "call_b", "list_files", ""),
        completed(),
    ]);
    assert_eq!(
        calls(&events),
        [
            ("call_a".into(), "read_file".into(), r#"{"path":"a"}"#.into()),
            ("call_b".into(), "list_files".into(), r#"{"path":"."}"#.into()),
        ]
    );
}

#[test]
fn deltas_without_an_item_id_find_their_call_by_output_index() {
    let events = run(&[
        call_added(3, "fc_1", "call_1", "f"),
        json!({ "type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{}" }),
        json!({ "type": "response.output_item.done", "output_index": 3, "item": { "type": "function_call", "call_id": "call_1", "name": "f" } }),
        completed(),
    ]);
    assert_eq!(calls(&events), [("call_1".into(), "f".into(), "{}".into())]);
}

#[test]
fn a_call_whose_item_never_finished_still_goes_out_at_the_end() {
    let events = run(&[call_added(0, "fc_1", "call_1", "f"), arguments("fc_1", "{\"x\":2}"), completed()]);
    assert_eq!(calls(&events), [("call_1".into(), "f".into(), r#"{"x":2}"#.into())]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn a_refusal_is_shown_and_finishes_as_refusal() {
    let events = run(&[json!({ "type": "response.refusal.delta", "delta": "I can't help." }), completed()]);
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta { text: "I can't help.".into() },
            ModelEvent::Finish { reason: FinishReason::Refusal }
        ]
    );
}

#[test]
fn summary_parts_become_thoughts_a_paragraph_apart() {
    let summary = |index: u64, delta: &str| json!({ "type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": index, "delta": delta });
    let events = run(&[
        summary(0, "**Plan**"),
        summary(0, " read it"),
        summary(1, "**Check**"),
        json!({ "type": "response.reasoning_text.delta", "item_id": "rs_2", "content_index": 0, "delta": "raw" }),
        completed(),
    ]);
    assert_eq!(
        events[..4],
        [
            ModelEvent::ThoughtDelta { text: "**Plan**".into() },
            ModelEvent::ThoughtDelta { text: " read it".into() },
            ModelEvent::ThoughtDelta { text: "\n\n**Check**".into() },
            ModelEvent::ThoughtDelta { text: "\n\nraw".into() },
        ]
    );
}

#[test]
fn done_reasoning_items_go_out_whole_before_usage_and_finish() {
    let item = json!({
        "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA-secret",
        "summary": [{ "type": "summary_text", "text": "Plan" }],
    });
    let events = run(&[
        json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "reasoning", "id": "rs_1", "summary": [] } }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
        text("ok"),
        json!({ "type": "response.completed", "response": { "usage": { "input_tokens": 1, "output_tokens": 2 } } }),
    ]);
    assert_eq!(events[1], ModelEvent::ReasoningDetails { details: json!([item]) });
    assert!(matches!(events[2], ModelEvent::Usage { .. }));
    assert_eq!(events[3], ModelEvent::Finish { reason: FinishReason::Stop });
}

#[test]
fn incomplete_for_tokens_is_length_and_for_the_filter_a_refusal() {
    let incomplete = |reason: &str| json!({ "type": "response.incomplete", "response": { "status": "incomplete", "incomplete_details": { "reason": reason } } });
    let cut = run(&[text("par"), incomplete("max_output_tokens")]);
    assert_eq!(cut.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
    let filtered = run(&[incomplete("content_filter")]);
    assert_eq!(filtered.last(), Some(&ModelEvent::Finish { reason: FinishReason::Refusal }));
}

#[test]
fn a_failed_response_gives_the_servers_message_and_the_status_its_code_means() {
    let failed = |code: &str, message: &str| json!({ "type": "response.failed", "response": { "status": "failed", "error": { "code": code, "message": message } } });
    assert_eq!(
        failure(&[text("a"), failed("server_error", "The server had an error")]),
        ProviderError::Status { status: 500, message: "The server had an error".into() }
    );
    assert_eq!(
        failure(&[failed("rate_limit_exceeded", "Slow down")]),
        ProviderError::Status { status: 429, message: "Slow down".into() }
    );
    assert_eq!(
        failure(&[failed("invalid_prompt", "Flagged")]),
        ProviderError::Status { status: 502, message: "Flagged".into() }
    );
    let bare = failure(&[json!({ "type": "response.failed", "response": { "error": null } })]);
    assert!(matches!(bare, ProviderError::Status { status: 502, .. }), "{bare:?}");
}

#[test]
fn error_events_fail_with_the_servers_message_as_data_or_as_error_events() {
    let flat = json!({ "type": "error", "code": "rate_limit_exceeded", "message": "Too many requests", "param": null });
    assert_eq!(failure(&[flat]), ProviderError::Status { status: 429, message: "Too many requests".into() });
    let mut assembler = EventAssembler::default();
    let wrapped = Payload::Error(
        json!({ "type": "error", "error": { "code": "server_error", "message": "boom" } }).to_string(),
    );
    assert_eq!(
        assembler.push_payload(&wrapped, &mut Vec::new()),
        Err(ProviderError::Status { status: 500, message: "boom".into() })
    );
    let no_message =
        Payload::Error(json!({ "type": "error", "code": "context_length_exceeded" }).to_string());
    assert_eq!(
        assembler.push_payload(&no_message, &mut Vec::new()),
        Err(ProviderError::Status { status: 502, message: "context_length_exceeded".into() })
    );
    let text = Payload::Error("upstream went away".into());
    assert_eq!(
        assembler.push_payload(&text, &mut Vec::new()),
        Err(ProviderError::Status { status: 502, message: "upstream went away".into() })
    );
}

#[test]
fn unknown_event_types_are_ignored() {
    let events = run(&[
        json!({ "type": "response.future_thing.delta", "delta": { "nested": [1, 2] } }),
        json!({ "type": "response.output_text.annotation.added", "annotation": {} }),
        text("still here"),
        completed(),
    ]);
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta { text: "still here".into() },
            ModelEvent::Finish { reason: FinishReason::Stop }
        ]
    );
}

#[test]
fn malformed_events_are_protocol_errors() {
    let mut assembler = EventAssembler::default();
    for bad in ["{not json", r#"{"delta":"no type"}"#, r#"{"type":"response.output_text.delta","delta":5}"#] {
        let result = assembler.push_payload(&Payload::Data(bad.into()), &mut Vec::new());
        assert!(matches!(result, Err(ProviderError::Protocol(_))), "{bad}: {result:?}");
    }
    let bad_item =
        json!({ "type": "response.output_item.done", "item": { "type": "function_call", "name": 7 } });
    assert!(matches!(failure(&[bad_item]), ProviderError::Protocol(_)));
}

#[test]
fn too_many_calls_fail_the_stream() {
    let events: Vec<Value> = (0..=MAX_TOOL_CALLS as u64)
        .map(|i| call_added(i, &format!("fc_{i}"), &format!("c{i}"), "f"))
        .collect();
    assert!(matches!(failure(&events), ProviderError::Protocol(_)));
}

#[test]
fn arguments_past_the_cap_keep_one_byte_more() {
    let mut assembler = EventAssembler::default();
    let mut out = Vec::new();
    let piece = "x".repeat(1024 * 1024);
    assembler
        .push_payload(&Payload::Data(call_added(0, "fc", "c", "f").to_string()), &mut out)
        .expect("valid");
    for _ in 0..=MAX_TOOL_ARGUMENT_BYTES / piece.len() {
        let delta = Payload::Data(arguments("fc", &piece).to_string());
        assembler.push_payload(&delta, &mut out).expect("valid");
    }
    assembler.finish(&mut out);
    let [(_, _, arguments)] = &calls(&out)[..] else { panic!("one call: {out:?}") };
    assert_eq!(arguments.len(), MAX_TOOL_ARGUMENT_BYTES + 1);
}

#[test]
fn reasoning_past_its_budget_is_dropped_whole() {
    let big = "y".repeat(MAX_REASONING_BYTES / 2);
    let item = |id: &str| json!({ "type": "response.output_item.done", "item": { "type": "reasoning", "id": id, "encrypted_content": big } });
    let events = run(&[item("rs_1"), item("rs_2"), item("rs_3"), completed()]);
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::ReasoningDetails { .. })), "{}", events.len());
}

#[test]
fn a_done_marker_or_a_clean_end_without_a_terminal_event_still_finishes() {
    let mut assembler = EventAssembler::default();
    let mut out = Vec::new();
    assert_eq!(assembler.push_payload(&Payload::Data(text("a").to_string()), &mut out), Ok(Progress::More));
    assert!(!assembler.has_finished());
    assert_eq!(assembler.push_payload(&Payload::Data("[DONE]".into()), &mut out), Ok(Progress::Done));
    assembler.finish(&mut out);
    assert_eq!(out.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

#[test]
fn a_call_name_or_id_past_its_bound_fails_the_stream() {
    use crate::llm::MAX_TOOL_IDENTITY_BYTES;
    let past = "n".repeat(MAX_TOOL_IDENTITY_BYTES + 1);
    for event in
        [call_added(0, "fc", &past, "f"), call_added(0, "fc", "c", &past), call_added(0, &past, "c", "f")]
    {
        assert!(matches!(failure(&[event]), ProviderError::Protocol(m) if m.contains("1024 bytes")));
    }
    let at_bound = "n".repeat(MAX_TOOL_IDENTITY_BYTES);
    let mut assembler = EventAssembler::default();
    let added = Payload::Data(call_added(0, "fc", "c", &at_bound).to_string());
    assert!(assembler.push_payload(&added, &mut Vec::new()).is_ok());
}
