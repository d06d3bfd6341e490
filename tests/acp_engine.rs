//! `heron acp` end to end over in-memory pipes, validation on: the handshake, routing
//! through the method table, and the error contract.

use crate::support;
use serde_json::json;

#[tokio::test]
async fn initialize_answers_version_one_with_agent_info() {
    let mut editor = support::start();
    let answer = editor.request(json!(0), "initialize", json!({ "protocolVersion": 1 })).await;
    let result = &answer["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "heron");
    assert!(result["agentCapabilities"].is_object());
    editor.close().await;
}

#[tokio::test]
async fn a_newer_protocol_version_is_answered_with_version_one() {
    let mut editor = support::start();
    let answer = editor.request(json!("v"), "initialize", json!({ "protocolVersion": 2 })).await;
    assert_eq!(answer["result"]["protocolVersion"], 1);
    editor.close().await;
}

#[tokio::test]
async fn a_string_protocol_version_is_invalid_params() {
    let mut editor = support::start();
    let answer = editor.request(json!(1), "initialize", json!({ "protocolVersion": "1.0.0" })).await;
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(answer["error"]["data"]["pointer"], "/protocolVersion", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn without_validation_decode_errors_name_the_field_path() {
    let mut editor =
        support::start_with(heron::cli::acp::AcpArgs { validate: false, ..support::demo_args() });
    let answer = editor.request(json!(1), "initialize", json!({ "protocolVersion": "1.0.0" })).await;
    assert_eq!(answer["error"]["code"], -32602);
    assert_eq!(answer["error"]["data"]["path"], "protocolVersion", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn without_validation_a_missing_field_is_named_by_its_path() {
    let mut editor =
        support::start_with(heron::cli::acp::AcpArgs { validate: false, ..support::demo_args() });
    let answer = editor.request(json!(1), "initialize", json!({})).await;
    assert_eq!(answer["error"]["data"]["path"], "protocolVersion", "{answer}");
    let answer = editor.request(json!(2), "initialize", json!({ "protocolVersion": 1 })).await;
    assert!(answer["result"].is_object(), "{answer}");
    let answer = editor.request(json!(3), "session/new", json!({ "mcpServers": [] })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "cwd", "{answer}");
    let answer = editor.request(json!(4), "session/prompt", json!({ "sessionId": "s" })).await;
    assert_eq!(answer["error"]["data"]["path"], "prompt", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn validation_names_the_pointer_of_a_nested_violation() {
    let mut editor = support::start();
    let params = json!({ "sessionId": "s", "prompt": [{ "type": "text", "text": 5 }] });
    let answer = editor.request(json!(2), "session/prompt", params).await;
    assert_eq!(answer["error"]["code"], -32602);
    assert!(
        answer["error"]["data"]["pointer"].as_str().is_some_and(|p| p.starts_with("/prompt/0")),
        "{answer}"
    );
    editor.close().await;
}

#[tokio::test]
async fn legacy_aliases_route_to_their_method() {
    let mut editor = support::start();
    let cwd = editor.dirs.ws();
    let via_alias = editor.request(json!(3), "newSession", json!({ "cwd": cwd, "mcpServers": [] })).await;
    assert!(via_alias["result"]["sessionId"].is_string(), "{via_alias}");
    let id = via_alias["result"]["sessionId"].clone();
    let (_, closed) = editor.call(json!(4), "closeSession", json!({ "sessionId": id })).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    editor.close().await;
}

#[tokio::test]
async fn unknown_and_extension_methods_are_method_not_found() {
    let mut editor = support::start();
    for (id, method) in [(5, "session/teleport"), (6, "_zed.dev/workspace/buffers"), (7, "fs/read_text_file")]
    {
        let answer = editor.request(json!(id), method, json!({})).await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        assert_eq!(answer["error"]["data"]["method"], method);
    }
    editor.close().await;
}

#[tokio::test]
async fn a_notification_method_sent_with_an_id_is_answered() {
    let mut editor = support::start();
    let answer = editor.request(json!(8), "session/cancel", json!({ "sessionId": "s" })).await;
    assert_eq!(answer["error"]["code"], -32601);
    editor.close().await;
}

#[tokio::test]
async fn notifications_are_never_answered_even_when_invalid() {
    let mut editor = support::start();
    editor
        .send_json(json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": 5 } }))
        .await;
    editor.send_json(json!({ "jsonrpc": "2.0", "method": "_heron/unknown", "params": {} })).await;
    editor.send_json(json!({ "jsonrpc": "2.0", "method": "session/cancel" })).await;
    editor.expect_silence().await;
    let answer = editor.request(json!(9), "initialize", json!({ "protocolVersion": 1 })).await;
    assert_eq!(answer["result"]["protocolVersion"], 1);
    editor.close().await;
}

#[tokio::test]
async fn vendor_methods_are_routed_through_the_table() {
    let mut editor = support::start();
    // Known to the table and served: an unknown session reaches the handler's own answer.
    let answer =
        editor.request(json!(10), "_heron/session/reloadExtensions", json!({ "sessionId": "s" })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    // Invalid params are caught before the handler: the method is known to the table.
    let answer =
        editor.request(json!(11), "_heron/session/reloadExtensions", json!({ "sessionId": 1 })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A vendor name the table does not know is method-not-found, named.
    let answer = editor.request(json!(12), "_heron/session/frobnicate", json!({ "sessionId": "s" })).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["error"]["data"]["method"], "_heron/session/frobnicate", "{answer}");
    editor.close().await;
}
