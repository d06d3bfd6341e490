//! The generated types read what the schema marks open or lenient without rejecting the
//! whole message, and stay strict where the schema is strict.

use heron_protocol::runtime::{decode_params, decode_result};
use heron_protocol::{
    CreateElicitationResponse, McpServer, PromptRequest, SessionConfigOptionCategory, SessionNotification,
    SessionUpdate, ToolCallContent,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, heron_protocol::RpcError> {
    let raw = RawValue::from_string(value.to_string()).expect("raw");
    decode_params(Some(&raw))
}

fn tool_call_update(update: Value) -> SessionUpdate {
    let note: SessionNotification = decode(json!({ "sessionId": "s", "update": update })).expect("decodes");
    note.update
}

#[test]
fn unknown_tool_kind_reads_as_absent_and_keeps_the_rest() {
    let update = tool_call_update(json!({
        "sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Teleport", "kind": "teleport",
        "status": "in_progress"
    }));
    let SessionUpdate::ToolCall(call) = update else { panic!("not a tool call: {update:?}") };
    assert_eq!(call.kind, None);
    assert_eq!(call.title, "Teleport");
    assert!(call.status.is_some());
}

#[test]
fn malformed_list_items_are_dropped_and_valid_ones_kept() {
    let update = tool_call_update(json!({
        "sessionUpdate": "tool_call_update", "toolCallId": "t1",
        "content": [
            { "type": "hologram", "data": 1 },
            { "type": "content", "content": { "type": "text", "text": "kept" } }
        ],
        "locations": "not a list"
    }));
    let SessionUpdate::ToolCallUpdate(call) = update else { panic!("not an update: {update:?}") };
    let content = call.content.expect("content");
    assert_eq!(content.len(), 1);
    assert!(matches!(&content[0], ToolCallContent::Content(_)));
    assert_eq!(call.locations, None);
}

#[test]
fn malformed_meta_reads_as_absent() {
    let prompt: PromptRequest =
        decode(json!({ "sessionId": "s", "prompt": [], "_meta": 5 })).expect("decodes despite _meta");
    assert_eq!(prompt.meta, None);
}

#[test]
fn a_malformed_prompt_block_rejects_the_request_naming_the_field() {
    let err = decode::<PromptRequest>(json!({ "sessionId": "s", "prompt": [{ "type": "text" }] }))
        .expect_err("a text block without text is invalid");
    assert_eq!(err.code, -32602);
    let data = err.data.expect("data");
    assert_eq!(data["path"], "prompt[0].text", "{data}");
    assert!(data["reason"].as_str().is_some_and(|r| r.contains("text")), "{data}");
}

#[test]
fn a_missing_field_is_named_by_its_own_path() {
    fn path_of<T: serde::de::DeserializeOwned + std::fmt::Debug>(params: Value) -> Value {
        let err = decode::<T>(params).expect_err("a required field is missing");
        assert_eq!(err.code, -32602);
        err.data.expect("data")["path"].clone()
    }
    assert_eq!(path_of::<heron_protocol::NewSessionRequest>(json!({ "mcpServers": [] })), "cwd");
    assert_eq!(path_of::<PromptRequest>(json!({ "sessionId": "s" })), "prompt");
    assert_eq!(path_of::<heron_protocol::InitializeRequest>(json!({})), "protocolVersion");
    // A field missing below the top keeps its parent's path.
    let blocks = json!({ "sessionId": "s", "prompt": [
        { "type": "text", "text": "hi" }, { "type": "resource_link", "name": "a" }
    ] });
    assert_eq!(path_of::<PromptRequest>(blocks), "prompt[1].uri");
}

#[test]
fn a_wrong_type_names_the_nested_field_path() {
    let err = decode::<PromptRequest>(json!({ "sessionId": 7, "prompt": [] })).expect_err("bad id");
    assert_eq!(err.data.expect("data")["path"], "sessionId");
}

#[test]
fn null_lists_on_stdio_servers_read_as_empty() {
    let server: McpServer =
        decode(json!({ "name": "fs", "command": "/bin/mcp", "args": null, "env": null })).expect("stdio");
    let McpServer::Stdio(stdio) = server else { panic!("not stdio: {server:?}") };
    assert!(stdio.args.is_empty() && stdio.env.is_empty());
}

#[test]
fn http_servers_are_told_from_stdio_by_their_tag() {
    let server: McpServer =
        decode(json!({ "type": "http", "name": "web", "url": "http://127.0.0.1:1", "headers": [] }))
            .expect("http");
    assert!(matches!(server, McpServer::Http(_)));
}

#[test]
fn unknown_tags_of_open_unions_are_kept_as_sent() {
    let response: CreateElicitationResponse =
        decode(json!({ "action": "snooze", "until": 3 })).expect("open");
    let CreateElicitationResponse::Other(map) = &response else { panic!("not kept: {response:?}") };
    assert_eq!(map["until"], 3);
    assert_eq!(serde_json::to_value(&response).expect("encodes"), json!({ "action": "snooze", "until": 3 }));
}

#[test]
fn open_string_enums_keep_unknown_values() {
    let known: SessionConfigOptionCategory = serde_json::from_value(json!("model")).expect("known");
    assert_eq!(known, SessionConfigOptionCategory::Model);
    let custom: SessionConfigOptionCategory = serde_json::from_value(json!("_heron_budget")).expect("custom");
    assert_eq!(custom.as_str(), "_heron_budget");
    assert_eq!(serde_json::to_value(&custom).expect("encodes"), json!("_heron_budget"));
}

#[test]
fn unknown_fields_are_tolerated() {
    let prompt: PromptRequest =
        decode(json!({ "sessionId": "s", "prompt": [], "fromTheFuture": { "x": 1 } })).expect("tolerated");
    assert!(prompt.prompt.is_empty());
}

#[test]
fn absent_and_null_params_read_as_an_empty_object() {
    let none: Result<heron_protocol::ListSessionsRequest, _> = decode_params(None);
    assert!(none.is_ok());
    let raw = RawValue::from_string("null".into()).expect("raw");
    let null: Result<heron_protocol::ListSessionsRequest, _> = decode_params(Some(&raw));
    assert!(null.is_ok());
}

#[test]
fn a_null_result_from_a_peer_reads_as_an_empty_object() {
    let raw = RawValue::from_string("null".into()).expect("raw");
    let killed: Result<heron_protocol::KillTerminalResponse, _> = decode_result(&raw);
    assert!(killed.is_ok(), "{killed:?}");
    let broken = RawValue::from_string(r#"{"content":7}"#.into()).expect("raw");
    let read: Result<heron_protocol::ReadTextFileResponse, _> = decode_result(&broken);
    let err = read.expect_err("a number is not text");
    assert_eq!((err.code, err.data.expect("data")["path"].clone()), (-32603, json!("content")));
}

/// The same leniency when the tag comes first (as peers write it), read from the text
/// without buffering the union, as when it comes later (above: `json!` sorts keys).
#[test]
fn leniency_holds_whichever_member_comes_first() {
    let raw = RawValue::from_string(
        r#"{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","kind":"teleport",
        "content":[{"type":"hologram"},{"type":"content","content":{"type":"text","text":"kept"}}],
        "locations":{"not":"a list"},"_meta":7}}"#
            .to_owned(),
    )
    .expect("raw");
    let note: SessionNotification = decode_params(Some(&raw)).expect("decodes");
    let SessionUpdate::ToolCallUpdate(call) = note.update else { panic!("not an update") };
    assert_eq!(call.kind, None);
    assert_eq!(call.content.map(|c| c.len()), Some(1));
    assert_eq!(call.locations, None);
    assert_eq!(call.meta, None);
}

#[test]
fn a_patch_field_tells_absent_from_null_from_a_value_both_ways() {
    use heron_protocol::SessionInfoUpdate;
    let read = |text: &str| serde_json::from_str::<SessionInfoUpdate>(text).expect("reads");
    assert_eq!(read("{}").title, None, "absent: leave the title as it is");
    assert_eq!(read(r#"{"title": null}"#).title, Some(None), "null: clear it");
    assert_eq!(read(r#"{"title": "Fix the build"}"#).title, Some(Some("Fix the build".to_owned())));
    assert_eq!(read(r#"{"title": 5, "updatedAt": null}"#).title, None, "malformed reads as absent");
    let write = |update: SessionInfoUpdate| serde_json::to_value(update).expect("writes");
    let cleared = SessionInfoUpdate { title: Some(None), ..SessionInfoUpdate::default() };
    assert_eq!(write(cleared), serde_json::json!({ "title": null }), "clearing can be said");
    assert_eq!(write(SessionInfoUpdate::default()), serde_json::json!({}));
}

#[test]
fn a_v2_tool_call_update_tells_unchanged_capabilities_from_cleared_ones() {
    use heron_protocol::v2::ToolCallUpdate;
    let read = |text: &str| serde_json::from_str::<ToolCallUpdate>(text).expect("reads");
    assert_eq!(read(r#"{"toolCallId": "c"}"#).capabilities, None, "absent: unchanged");
    assert_eq!(
        read(r#"{"toolCallId": "c", "capabilities": null}"#).capabilities,
        Some(None),
        "null: cleared"
    );
    let cleared = ToolCallUpdate { capabilities: Some(None), ..read(r#"{"toolCallId": "c"}"#) };
    let written = serde_json::to_value(cleared).expect("writes");
    assert_eq!(
        written,
        serde_json::json!({ "toolCallId": "c", "capabilities": null }),
        "clearing can be said"
    );
}
