//! What the connection answers, and what it never does: error answers for bad lines and
//! failing handlers, ids echoed exactly, notifications unanswered, framing tolerances, and
//! a handler's follow-up ordered after its answer.

use std::sync::atomic::Ordering;

use heron_rpc::{ConnectionOptions, Id};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::{Editor, error_line, next_line};

#[tokio::test]
async fn invalid_json_is_answered_with_parse_error_and_null_id_then_serving_continues() {
    let mut editor = Editor::start();
    editor.send("PS C:\\> profile loaded").await;
    let answer = editor.recv().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32700)));
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn batch_is_answered_once_with_invalid_request() {
    let mut editor = Editor::start();
    editor
        .send(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#)
        .await;
    assert_eq!(
        editor.recv().await,
        json!({ "jsonrpc": "2.0", "id": null, "error": {
            "code": -32600, "message": "Invalid request",
            "data": { "reason": "JSON-RPC batches are not supported" } } })
    );
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn non_object_message_is_an_invalid_request_with_null_id() {
    let mut editor = Editor::start();
    editor.send("[]").await;
    editor.send("17").await;
    for _ in 0..2 {
        let answer = editor.recv().await;
        assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32600)));
    }
}

#[tokio::test]
async fn wrong_jsonrpc_version_is_an_invalid_request_echoing_the_id() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"1.0","id":"v","method":"ping"}"#).await;
    assert_eq!(
        editor.recv().await,
        json!({ "jsonrpc": "2.0", "id": "v", "error": {
            "code": -32600, "message": "Invalid request",
            "data": { "reason": "jsonrpc must be \"2.0\"" } } })
    );
}

#[tokio::test]
async fn fractional_id_is_an_invalid_request_with_null_id() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).await;
    let answer = editor.recv().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32600)));
}

#[tokio::test]
async fn unknown_method_gets_the_dispatchers_method_not_found() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":9,"method":"_zed.dev/nope"}"#).await;
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Method not found","data":{"method":"_zed.dev/nope"}}}"#
    );
}

#[tokio::test]
async fn bad_params_pass_through_as_invalid_params() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"typed","params":[1]}"#).await;
    let answer = editor.recv().await;
    assert_eq!(answer["error"]["code"], json!(-32602));
    editor.send(r#"{"jsonrpc":"2.0","id":2,"method":"typed","params":{"name":7}}"#).await;
    let answer = editor.recv().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!(2), json!(-32602)));
}

#[tokio::test]
async fn a_panicking_handler_is_answered_internal_error_and_serving_continues() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"panic"}"#).await;
    assert_eq!(editor.recv_line().await, error_line("1", -32603, "Internal error"));
    editor.send(r#"{"jsonrpc":"2.0","method":"boom"}"#).await;
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let mut editor = Editor::start();
    for (sent, echoed) in
        [(r#""1""#, r#""1""#), ("1", "1"), ("null", "null"), (r#""é\u2028""#, "\"é\u{2028}\"")]
    {
        editor.send(&format!(r#"{{"jsonrpc":"2.0","id":{sent},"method":"ping"}}"#)).await;
        assert_eq!(
            editor.recv_line().await,
            format!(r#"{{"jsonrpc":"2.0","id":{echoed},"result":{{"pong":true}}}}"#)
        );
    }
}

#[tokio::test]
async fn notifications_are_never_answered() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","method":"_unknown/thing","params":{}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"session/cancel","params":[1,2]}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":404}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#).await;
    editor.expect_nothing_before_ping().await;
    assert_eq!(*editor.state.notes.lock().expect("notes"), vec![r#"{"n":1}"#.to_owned()]);
}

#[tokio::test]
async fn inline_handlers_run_before_the_next_message() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","method":"set_flag"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"read_flag"}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":1,"result":{"flag":true}}"#);
}

#[tokio::test]
async fn framing_tolerates_crlf_blank_lines_and_u2028() {
    let mut editor = Editor::start();
    editor.input.write_all(b"\r\n\n   \n").await.expect("write");
    editor
        .input
        .write_all(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{\"t\":\"a\u{2028}b\"}}\r\n"
                .as_bytes(),
        )
        .await
        .expect("write");
    assert_eq!(editor.recv_line().await, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"a\u{2028}b\"}}");
}

#[tokio::test]
async fn oversized_line_is_rejected_and_the_next_request_is_answered() {
    let mut editor =
        Editor::start_with(ConnectionOptions { max_line_bytes: 1024 * 1024, ..ConnectionOptions::default() });
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":{{"data":"{}"}}}}"#,
        "A".repeat(5 * 1024 * 1024)
    );
    let mut input = editor.input;
    let writer = tokio::spawn(async move {
        input.write_all(big.as_bytes()).await?;
        input.write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n").await?;
        Ok::<_, std::io::Error>(input)
    });
    let mut output = editor.output;
    let rejected: Value = serde_json::from_str(&next_line(&mut output).await).expect("json");
    assert_eq!(
        rejected,
        json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32600, "message": "Invalid request",
            "data": { "reason": "the message is larger than the maximum line size", "maxLineBytes": 1048576 } } })
    );
    assert_eq!(next_line(&mut output).await, r#"{"jsonrpc":"2.0","id":2,"result":{"pong":true}}"#);
    editor.input = writer.await.expect("writer task").expect("writes");
}

#[tokio::test]
async fn final_line_without_newline_is_answered_before_shutdown() {
    let mut editor = Editor::start();
    editor.input.write_all(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await.expect("write");
    let (mut output, result) = editor.close_input().await;
    assert!(result.is_ok());
    assert_eq!(
        output.next_line().await.expect("read"),
        Some(r#"{"jsonrpc":"2.0","id":1,"result":{"pong":true}}"#.to_owned())
    );
    assert_eq!(output.next_line().await.expect("read"), None);
}

#[test]
fn ids_display_for_logs() {
    assert_eq!(Id::Str("a".into()).to_string(), "\"a\"");
    assert_eq!(Id::Int(-3).to_string(), "-3");
    assert_eq!(Id::Null.to_string(), "null");
}

#[tokio::test]
async fn what_follows_an_answer_goes_out_right_behind_it_and_the_reader_never_waits_for_it() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"open"}"#).await;
    // The editor reacts before it has read anything: its ping may be handled before or
    // after the open answer, but never between the answer and what follows it.
    editor.send(r#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#).await;
    let mut seen = vec![editor.recv().await, editor.recv().await, editor.recv().await];
    let opened =
        seen.iter().position(|m| m == &json!({"jsonrpc": "2.0", "id": 1, "result": {"opened": true}}));
    let opened = opened.expect("the open answer");
    assert_eq!(seen[opened + 1], json!({"jsonrpc": "2.0", "method": "opened"}));
    seen.drain(opened..=opened + 1);
    assert_eq!(seen, [json!({"jsonrpc": "2.0", "id": "ping", "result": {"pong": true}})]);
    // The action runs once the lines are queued, which may be just after the editor read them.
    let ran = async {
        while editor.state.opened.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), ran).await.expect("the action ran");
    assert_eq!(editor.state.opened.load(Ordering::SeqCst), 1, "the action ran once");
}
