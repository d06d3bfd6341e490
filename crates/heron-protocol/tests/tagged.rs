//! Closed tagged unions (`SessionUpdate`, `ContentBlock`, `ToolCallContent`, ...) read their
//! payload straight from the object when the tag comes first, and otherwise read exactly as
//! serde's derive does (kept as `protocol::buffered`). Either way the result is the same.

use heron_protocol::runtime::decode_params;
use heron_protocol::{
    ContentBlock, CreateElicitationResponse, McpServer, PromptRequest, RequestPermissionOutcome,
    SessionNotification, SessionUpdate, ToolCallContent, buffered,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("test JSON is valid")
}

/// A block as a member, as blocks travel in real params.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct Holder<T> {
    block: T,
}

/// Decodes `text` as a `ContentBlock` member through the new reading and through serde's
/// derive. Errors are compared without their position: outside `decode_params`, which
/// repeats a failed decode with the derive, an error may point a column earlier.
fn both_ways(text: &str) -> (Result<ContentBlock, String>, Result<ContentBlock, String>) {
    let holder = format!(r#"{{"block":{text}}}"#);
    let message =
        |e: serde_json::Error| e.to_string().split(" at line ").next().unwrap_or_default().to_owned();
    let fast = serde_json::from_str::<Holder<ContentBlock>>(&holder).map(|h| h.block).map_err(message);
    let derived = serde_json::from_str::<Holder<buffered::ContentBlock>>(&holder)
        .map(|h| ContentBlock::from(h.block))
        .map_err(message);
    (fast, derived)
}

#[test]
fn tag_after_the_payload_members_still_decodes() {
    let block: ContentBlock = serde_json::from_str(r#"{"text":"hi","type":"text"}"#).expect("decodes");
    let ContentBlock::Text(text) = block else { panic!("not text: {block:?}") };
    assert_eq!(text.text, "hi");
}

#[test]
fn tag_first_and_tag_last_decode_to_the_same_update() {
    let first = json!({ "sessionId": "s", "update": {
        "sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
        "content": [{ "type": "content", "content": { "type": "text", "text": "done" } }]
    }});
    let last = json!({ "sessionId": "s", "update": {
        "toolCallId": "t1", "status": "completed",
        "content": [{ "content": { "text": "done", "type": "text" }, "type": "content" }],
        "sessionUpdate": "tool_call_update"
    }});
    let first: SessionNotification = decode_params(Some(&raw(&first.to_string()))).expect("tag first");
    let last: SessionNotification = decode_params(Some(&raw(&last.to_string()))).expect("tag last");
    assert_eq!(first, last);
    let SessionUpdate::ToolCallUpdate(update) = &first.update else { panic!("not an update: {first:?}") };
    assert!(matches!(update.content.as_deref(), Some([ToolCallContent::Content(_)])));
}

#[test]
fn encoding_writes_the_tag_first() {
    let block: ContentBlock = serde_json::from_str(r#"{"text":"hi","type":"text"}"#).expect("decodes");
    assert_eq!(serde_json::to_string(&block).expect("encodes"), r#"{"type":"text","text":"hi"}"#);
}

#[test]
fn unknown_tag_of_an_open_union_is_kept_as_sent() {
    let response: CreateElicitationResponse =
        decode_params(Some(&raw(r#"{"action":"snooze","until":3}"#))).expect("open");
    let CreateElicitationResponse::Other(map) = &response else { panic!("not kept: {response:?}") };
    assert_eq!(map["action"], "snooze");
}

#[test]
fn stdio_server_without_a_type_falls_back_to_stdio() {
    let server: McpServer =
        decode_params(Some(&raw(r#"{"name":"fs","command":"/bin/mcp","args":[],"env":[]}"#))).expect("stdio");
    assert!(matches!(server, McpServer::Stdio(_)), "{server:?}");
}

#[test]
fn tag_only_variant_ignores_the_other_members() {
    let outcome: RequestPermissionOutcome =
        serde_json::from_str(r#"{"outcome":"cancelled","note":{"why":[1,2]}}"#).expect("decodes");
    assert_eq!(outcome, RequestPermissionOutcome::Cancelled);
}

#[test]
fn malformed_payload_of_a_known_tag_names_the_block_path() {
    let params = raw(r#"{"sessionId":"s","prompt":[{"type":"text","text":5}]}"#);
    let err = decode_params::<PromptRequest>(Some(&params)).expect_err("text must be a string");
    assert_eq!(err.code, -32602);
    let data = err.data.expect("data");
    // The same path and reason serde's derive reports: the block, not the field inside it.
    assert_eq!(data["path"], "prompt[0]", "{data}");
    let reason = data["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("invalid type: integer `5`, expected a string at line 1"), "{data}");
}

#[test]
fn decode_errors_are_the_ones_serde_derive_gives() {
    for text in [
        r#"{"type":"text","text":5}"#,
        r#"{"type":"text"}"#,
        r#"{"text":"a","type":"teleport"}"#,
        r#"{"type":"teleport","text":"a"}"#,
        r#"{"type":7,"text":"a"}"#,
        r#"{"type":"image","mimeType":"image/png"}"#,
        r#"["text"]"#,
    ] {
        let fast = decode_params::<ContentBlock>(Some(&raw(text))).expect_err(text);
        let mut de = serde_json::Deserializer::from_str(text);
        let Err(derived) = serde_path_to_error::deserialize::<_, buffered::ContentBlock>(&mut de) else {
            panic!("the derive accepts {text}");
        };
        let path = derived.path().to_string();
        let path = if path == "." { String::new() } else { path };
        let reason = derived.into_inner().to_string();
        // A missing field is named by its own path, below the one serde tracked.
        let path = match reason.strip_prefix("missing field `").and_then(|r| r.split_once('`')) {
            Some((field, _)) if path.is_empty() => field.to_owned(),
            Some((field, _)) => format!("{path}.{field}"),
            None => path,
        };
        let data = fast.data.expect("data");
        assert_eq!(data["path"], Value::String(path), "{text}");
        assert_eq!(data["reason"], Value::String(reason), "{text}");
    }
}

#[test]
fn duplicate_tag_is_rejected_as_the_derive_rejects_it() {
    let (fast, derived) = both_ways(r#"{"type":"text","text":"a","type":"image"}"#);
    assert!(fast.as_ref().is_err_and(|e| e.starts_with("duplicate field `type`")), "{fast:?}");
    assert_eq!(fast, derived);
}

#[test]
fn every_shape_decodes_as_the_derive_decodes_it() {
    for text in [
        r#"{"type":"text","text":"hi"}"#,
        r#"{"type":"text","text":"hi","annotations":{"audience":["user"],"priority":0.5}}"#,
        r#"{"type":"text","text":"hi","fromTheFuture":{"x":[1,{"y":null}]}}"#,
        r#"{"annotations":null,"type":"text","text":"hi"}"#,
        r#"{"type":"resource_link","uri":"file:///a","name":"a","size":12}"#,
        r#"{"type":"resource","resource":{"uri":"file:///a","text":"body"}}"#,
        r#"{"typ\u0065":"text","text":"escaped tag key"}"#,
        r#"{"type":"te\u0078t","text":"escaped tag value"}"#,
        r#"{"type":"teleport"}"#,
        r#"{"text":"no tag"}"#,
        r#"{}"#,
        r#"["text","positional"]"#,
        r#""text""#,
        r#"null"#,
        r#"{"type":null,"text":"a"}"#,
        r#"{"text":5,"type":"text"}"#,
        r#"{"type":"text","text":5}"#,
        r#"{"type":"text","text":"a","text":"b"}"#,
    ] {
        let (fast, derived) = both_ways(text);
        assert_eq!(fast, derived, "{text}");
    }
}
