//! ACP v2 messages, shaped as the v2 protocol docs show them and checked against the
//! vendored v2 schema, decode into the v2 types as what they say and encode back to the
//! same JSON.

use heron_protocol::runtime::{Side, decode_params};
use heron_protocol::v2::{
    ContentBlock, IdleStateUpdate, InitializeRequest, Method, PromptResponse, SchemaValidator, SessionUpdate,
    StateUpdate, ToolCallContent, UpdateSessionNotification, canonical_params, canonical_result,
};
use serde_json::Value;
use serde_json::value::RawValue;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("test JSON is valid")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("test JSON is valid")
}

/// The vendored v2 schema accepts `text` as the definition `def`, so the fixture is v2.
fn assert_v2(def: &str, text: &str) {
    let validator = SchemaValidator::new(Side::Agent).expect("the v2 schema compiles");
    if let Err((pointer, reason)) = validator.check(def, &json(text)) {
        panic!("not a v2 `{def}` at `{pointer}`: {reason}\n{text}");
    }
}

/// Decodes `text` as `session/update` params and checks that it encodes back unchanged.
fn update(text: &str) -> SessionUpdate {
    assert_v2("UpdateSessionNotification", text);
    let back = canonical_params(Method::SessionUpdate, &raw(text)).expect("decodes");
    assert_eq!(back, json(text), "re-encoded differently");
    let notification: UpdateSessionNotification = decode_params(Some(&raw(text))).expect("decodes");
    assert_eq!(notification.session_id.0, "sess_abc123def456");
    notification.update
}

#[test]
fn idle_state_update_with_a_stop_reason_round_trips() {
    let update = update(
        r#"{"sessionId":"sess_abc123def456",
            "update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}"#,
    );
    assert!(
        matches!(update, SessionUpdate::StateUpdate(StateUpdate::Idle(IdleStateUpdate::EndTurn(_)))),
        "{update:?}"
    );
}

#[test]
fn running_state_update_round_trips() {
    let update = update(
        r#"{"sessionId":"sess_abc123def456","update":{"sessionUpdate":"state_update","state":"running"}}"#,
    );
    assert!(matches!(update, SessionUpdate::StateUpdate(StateUpdate::Running(_))), "{update:?}");
}

#[test]
fn idle_state_update_without_a_stop_reason_is_the_none_variant() {
    let update = update(
        r#"{"sessionId":"sess_abc123def456","update":{"sessionUpdate":"state_update","state":"idle","stopReason":null}}"#,
    );
    assert!(
        matches!(update, SessionUpdate::StateUpdate(StateUpdate::Idle(IdleStateUpdate::None(_)))),
        "{update:?}"
    );
}

#[test]
fn idle_state_update_with_a_custom_stop_reason_is_kept_as_sent() {
    let text = r#"{"sessionId":"sess_abc123def456",
        "update":{"sessionUpdate":"state_update","state":"idle","stopReason":"_heron_paused"}}"#;
    let update = update(text);
    let SessionUpdate::StateUpdate(StateUpdate::Idle(IdleStateUpdate::Other(kept))) = update else {
        panic!("not kept as an unknown stop reason: {update:?}");
    };
    assert_eq!(kept["stopReason"], "_heron_paused");
}

#[test]
fn agent_message_round_trips_with_its_content() {
    let update = update(
        r#"{"sessionId":"sess_abc123def456","update":{"sessionUpdate":"agent_message",
            "messageId":"msg_agent_c42b9",
            "content":[{"type":"text","text":"I'll analyze your code for potential issues. Let me examine it..."}]}}"#,
    );
    let SessionUpdate::AgentMessage(message) = update else { panic!("not an agent message: {update:?}") };
    assert_eq!(message.message_id.0, "msg_agent_c42b9");
    let content = message.content.expect("has content");
    assert!(matches!(content.as_slice(), [ContentBlock::Text(_)]), "{content:?}");
}

#[test]
fn tool_call_content_chunk_round_trips() {
    let update = update(
        r#"{"sessionId":"sess_abc123def456","update":{"sessionUpdate":"tool_call_content_chunk",
            "toolCallId":"call_001",
            "content":{"type":"content","content":{"type":"text","text":"Checked syntax..."}}}}"#,
    );
    let SessionUpdate::ToolCallContentChunk(chunk) = update else { panic!("not a chunk: {update:?}") };
    assert_eq!(chunk.tool_call_id.0, "call_001");
    assert!(matches!(chunk.content, ToolCallContent::Content(_)), "{:?}", chunk.content);
}

#[test]
fn initialize_with_protocol_version_2_round_trips() {
    let text = r#"{"protocolVersion":2,"capabilities":{},
        "info":{"name":"my-client","title":"My Client","version":"1.0.0"}}"#;
    assert_v2("InitializeRequest", text);
    let request: InitializeRequest = decode_params(Some(&raw(text))).expect("decodes");
    assert_eq!(request.protocol_version.0, 2);
    assert_eq!(request.info.name, "my-client");
    assert_eq!(canonical_params(Method::Initialize, &raw(text)).expect("decodes"), json(text));
}

#[test]
fn session_prompt_answer_round_trips() {
    let text = r#"{"messageId":"msg_user_8f7a1"}"#;
    assert_v2("PromptResponse", text);
    let answer: PromptResponse = decode_params(Some(&raw(text))).expect("decodes");
    assert_eq!(answer.message_id.0, "msg_user_8f7a1");
    assert_eq!(canonical_result(Method::SessionPrompt, &raw(text)).expect("decodes"), json(text));
}

#[test]
fn a_v1_prompt_answer_is_no_v2_answer() {
    // v1 answered with the stop reason; v2 names the inserted user message instead.
    let v1 = r#"{"stopReason":"end_turn"}"#;
    assert!(canonical_result(Method::SessionPrompt, &raw(v1)).is_err());
}
