//! The Messages stream fold against each event and block kind, and each malformed stream.

use super::*;
use crate::llm::MAX_TOOL_ARGUMENT_BYTES;

fn run(payloads: &[&str]) -> Vec<ModelEvent> {
    let mut assembler = MessageAssembler::default();
    let mut out = Vec::new();
    for payload in payloads {
        if assembler.push(payload, &mut out).expect("valid event") == Progress::Done {
            break;
        }
    }
    assembler.finish(&mut out);
    out
}

fn failure(payloads: &[&str]) -> ProviderError {
    let mut assembler = MessageAssembler::default();
    let mut out = Vec::new();
    for payload in payloads {
        if let Err(error) = assembler.push(payload, &mut out) {
            return error;
        }
    }
    panic!("the stream did not fail: {out:?}")
}

fn stop_reason(reason: &str) -> String {
    format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},"usage":{{"output_tokens":3}}}}"#
    )
}

const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}"#;
const STOP: &str = r#"{"type":"message_stop"}"#;

fn text_block(index: usize, text: &str) -> [String; 3] {
    [
        format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#
        ),
        format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":"{text}"}}}}"#
        ),
        format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
    ]
}

#[test]
fn a_text_answer_streams_then_usage_then_stop() {
    let [start, delta, stop] = text_block(0, "Hello");
    let end = stop_reason("end_turn");
    let events = run(&[START, r#"{"type":"ping"}"#, &start, &delta, &stop, &end, STOP]);
    assert_eq!(
        events,
        [
            ModelEvent::TextDelta { text: "Hello".into() },
            ModelEvent::Usage { usage: Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() } },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[test]
fn message_stop_ends_the_stream() {
    let mut assembler = MessageAssembler::default();
    assert_eq!(assembler.push(STOP, &mut Vec::new()), Ok(Progress::Done));
}

#[test]
fn tool_input_accumulates_per_block_and_goes_out_when_the_block_stops() {
    let events = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"read_file","input":{}}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"list","input":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"th\":\"a\"}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        &stop_reason("tool_use"),
        STOP,
    ]);
    let call = |id: &str, name: &str, arguments: &str| ModelEvent::ToolCall {
        call: ToolCallRequest { id: id.into(), name: name.into(), arguments: arguments.into() },
    };
    assert_eq!(events[0], call("toolu_b", "list", "{}"));
    assert_eq!(events[1], call("toolu_a", "read_file", r#"{"path":"a"}"#));
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[test]
fn stop_reasons_map_to_finish_reasons() {
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("pause_turn", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("refusal", FinishReason::Refusal),
        ("something_new", FinishReason::Stop),
    ];
    for (reason, finish) in cases {
        let events = run(&[START, &stop_reason(reason), STOP]);
        assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: finish }), "{reason}");
    }
}

#[test]
fn signed_thinking_streams_as_thought_and_comes_back_whole_before_finish() {
    let events = run(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"see."}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        &stop_reason("end_turn"),
        STOP,
    ]);
    assert_eq!(events[0], ModelEvent::ThoughtDelta { text: "Let me ".into() });
    assert_eq!(events[1], ModelEvent::ThoughtDelta { text: "see.".into() });
    assert_eq!(
        events[2],
        ModelEvent::ReasoningDetails {
            details: json!([
                { "type": "thinking", "thinking": "Let me see.", "signature": "EqQB" },
                { "type": "redacted_thinking", "data": "opaque" },
            ])
        }
    );
}

#[test]
fn thinking_without_a_signature_is_not_kept() {
    let events = run(&[
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"hm"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
    ]);
    assert_eq!(
        events,
        [ModelEvent::ThoughtDelta { text: "hm".into() }, ModelEvent::Finish { reason: FinishReason::Stop }]
    );
}

#[test]
fn usage_counts_cached_and_cache_written_input_in_the_input() {
    let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":1000,"cache_creation_input_tokens":200,"output_tokens":1}}}"#;
    let events = run(&[start, &stop_reason("end_turn"), STOP]);
    assert_eq!(
        events[0],
        ModelEvent::Usage {
            usage: Usage {
                input_tokens: 1205,
                output_tokens: 3,
                cached_input_tokens: 1000,
                cache_write_input_tokens: 200,
                reasoning_tokens: 0,
            }
        }
    );
}

#[test]
fn error_events_fail_with_the_servers_message_under_its_status() {
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(
        failure(&[START, overloaded]),
        ProviderError::Status { status: 529, message: "Overloaded".into() }
    );
    let mut assembler = MessageAssembler::default();
    let api = Payload::Error(r#"{"type":"error","error":{"type":"api_error","message":"Internal"}}"#.into());
    assert_eq!(
        assembler.push_payload(&api, &mut Vec::new()),
        Err(ProviderError::Status { status: 500, message: "Internal".into() })
    );
    let odd = Payload::Error(r#"{"type":"error","error":{"type":"new_error"}}"#.into());
    assert_eq!(
        assembler.push_payload(&odd, &mut Vec::new()),
        Err(ProviderError::Status { status: 502, message: "new_error".into() })
    );
    let text = Payload::Error("upstream gone".into());
    assert_eq!(
        assembler.push_payload(&text, &mut Vec::new()),
        Err(ProviderError::Status { status: 502, message: "upstream gone".into() })
    );
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored() {
    let events = run(&[
        r#"{"type":"future_event","x":1}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"A"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{}}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
    ]);
    assert_eq!(
        events,
        [ModelEvent::TextDelta { text: "A".into() }, ModelEvent::Finish { reason: FinishReason::Stop }]
    );
}

#[test]
fn a_block_never_started_or_already_stopped_is_a_protocol_error() {
    let never =
        failure(&[r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#]);
    assert!(matches!(never, ProviderError::Protocol(ref m) if m.contains("never started")), "{never:?}");
    let [start, _, stop] = text_block(0, "x");
    let twice = failure(&[&start, &stop, &stop]);
    assert!(matches!(twice, ProviderError::Protocol(_)), "{twice:?}");
    let restarted = failure(&[&start, &start]);
    assert!(matches!(restarted, ProviderError::Protocol(_)), "{restarted:?}");
}

#[test]
fn malformed_events_are_protocol_errors() {
    for bad in [
        "not json",
        "[1,2]",
        r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
        r#"{"type":"content_block_start","index":-1,"content_block":{"type":"text"}}"#,
    ] {
        assert!(matches!(failure(&[bad]), ProviderError::Protocol(_)), "{bad}");
    }
    let [start, ..] = text_block(0, "x");
    let wrong = failure(&[
        &start,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
    ]);
    assert!(matches!(wrong, ProviderError::Protocol(ref m) if m.contains("input_json_delta")), "{wrong:?}");
}

#[test]
fn a_call_still_open_when_the_stream_ends_goes_out_before_finish() {
    let events = run(&[
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}"#,
        &stop_reason("tool_use"),
    ]);
    assert_eq!(
        events,
        [
            ModelEvent::ToolCall {
                call: ToolCallRequest { id: "t".into(), name: "f".into(), arguments: r#"{"a":1}"#.into() }
            },
            ModelEvent::Usage { usage: Usage { output_tokens: 3, ..Usage::default() } },
            ModelEvent::Finish { reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn tool_input_past_the_bound_keeps_one_byte_more() {
    let mut assembler = MessageAssembler::default();
    let mut out = Vec::new();
    let start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#;
    assembler.push(start, &mut out).expect("start");
    let piece = "x".repeat(1024 * 1024);
    let delta = json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "input_json_delta", "partial_json": piece } }).to_string();
    for _ in 0..(MAX_TOOL_ARGUMENT_BYTES / piece.len() + 2) {
        assembler.push(&delta, &mut out).expect("delta");
    }
    assembler.push(r#"{"type":"content_block_stop","index":0}"#, &mut out).expect("stop");
    let Some(ModelEvent::ToolCall { call }) = out.first() else { panic!("no call: {out:?}") };
    assert_eq!(call.arguments.len(), MAX_TOOL_ARGUMENT_BYTES + 1);
}

#[test]
fn too_many_blocks_or_calls_fail_the_stream() {
    let mut assembler = MessageAssembler::default();
    let mut result = Ok(Progress::More);
    for index in 0..=MAX_TOOL_CALLS {
        let start = format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"t{index}","name":"f","input":{{}}}}}}"#
        );
        result = assembler.push(&start, &mut Vec::new());
    }
    assert!(matches!(result, Err(ProviderError::Protocol(_))), "{result:?}");
    let mut assembler = MessageAssembler::default();
    for index in 0..=MAX_BLOCKS {
        let [start, ..] = text_block(index, "");
        result = assembler.push(&start, &mut Vec::new());
    }
    assert!(matches!(result, Err(ProviderError::Protocol(_))), "{result:?}");
}

#[test]
fn reasoning_past_its_bound_is_not_kept_but_still_streams() {
    let mut assembler = MessageAssembler::default();
    let mut out = Vec::new();
    let start =
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#;
    assembler.push(start, &mut out).expect("start");
    let piece = "y".repeat(1024 * 1024);
    let delta =
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": piece } }).to_string();
    for _ in 0..(MAX_REASONING_BYTES / piece.len() + 1) {
        assembler.push(&delta, &mut out).expect("delta");
    }
    let signature =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}"#;
    assembler.push(signature, &mut out).expect("signature");
    assembler.push(r#"{"type":"content_block_stop","index":0}"#, &mut out).expect("stop");
    let thoughts = out.iter().filter(|e| matches!(e, ModelEvent::ThoughtDelta { .. })).count();
    assert_eq!(thoughts, MAX_REASONING_BYTES / piece.len() + 1);
    assembler.finish(&mut out);
    assert!(!out.iter().any(|e| matches!(e, ModelEvent::ReasoningDetails { .. })));
}

#[test]
fn a_finished_message_says_so_before_message_stop() {
    let mut assembler = MessageAssembler::default();
    assembler.push(START, &mut Vec::new()).expect("start");
    assert!(!Fold::has_finished(&assembler));
    assembler.push(&stop_reason("end_turn"), &mut Vec::new()).expect("delta");
    assert!(Fold::has_finished(&assembler));
}

#[test]
fn a_tool_use_name_or_id_past_its_bound_fails_the_stream() {
    use crate::llm::MAX_TOOL_IDENTITY_BYTES;
    let start = |id: &str, name: &str| {
        json!({ "type": "content_block_start", "index": 0,
                "content_block": { "type": "tool_use", "id": id, "name": name, "input": {} } })
        .to_string()
    };
    let past = "n".repeat(MAX_TOOL_IDENTITY_BYTES + 1);
    for (id, name) in [(past.as_str(), "f"), ("t", past.as_str())] {
        assert!(
            matches!(failure(&[&start(id, name)]), ProviderError::Protocol(m) if m.contains("1024 bytes"))
        );
    }
    let at_bound = "n".repeat(MAX_TOOL_IDENTITY_BYTES);
    assert!(MessageAssembler::default().push(&start(&at_bound, &at_bound), &mut Vec::new()).is_ok());
}
