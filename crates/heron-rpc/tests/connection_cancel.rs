//! Incoming cancellation (one answer per request, the handler dropped or told) and what
//! keeps flowing while handlers wait: on the editor, or at the in-flight limit.

use std::sync::atomic::Ordering;
use std::time::Duration;

use heron_rpc::ConnectionOptions;
use serde_json::{Value, json};

use crate::support::{Editor, error_line};

#[tokio::test]
async fn cancel_request_answers_cancelled_and_drops_the_handler() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":"s","method":"slow"}"#).await;
    editor.state.wait_started(1).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"s"}}"#).await;
    assert_eq!(editor.recv_line().await, error_line(r#""s""#, -32800, "Request cancelled"));
    editor.expect_nothing_before_ping().await;
    assert_eq!(editor.state.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn cancel_while_running_sends_only_cancelled_even_if_the_handler_could_finish() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"gate"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#).await;
    assert_eq!(editor.recv_line().await, error_line("1", -32800, "Request cancelled"));
    editor.state.gate.notify_waiters();
    // A second cancel for the same id is ignored too.
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#).await;
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn cancel_after_finish_sends_only_the_result() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#);
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#).await;
    editor.expect_nothing_before_ping().await;
}

/// Runs on two threads so the handler really can finish while the cancel is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_racing_a_cancel_gets_exactly_one_answer() {
    let mut editor = Editor::start();
    for n in 0..200 {
        editor
            .send(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"echo\",\"params\":{{}}}}\n\
                 {{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{{\"requestId\":{n}}}}}"
            ))
            .await;
        let answer = editor.recv().await;
        assert_eq!(answer["id"], json!(n));
        assert!(
            answer.get("result") == Some(&json!({})) || answer["error"]["code"] == json!(-32800),
            "{answer}"
        );
    }
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn duplicate_in_flight_id_is_rejected_and_the_first_request_is_unaffected() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":5,"method":"gate"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await;
    let answer = editor.recv().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!(5), json!(-32600)));
    // The same value with another type is another id.
    editor.send(r#"{"jsonrpc":"2.0","id":"5","method":"ping"}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":"5","result":{"pong":true}}"#);
    editor.state.gate.notify_waiters();
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":5,"result":{"gate":"passed"}}"#);
    // Once answered, the id may be used again.
    editor.send(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":5,"result":{"pong":true}}"#);
}

#[tokio::test]
async fn a_handler_can_observe_its_own_cancellation() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"watch_cancel"}"#).await;
    editor.state.wait_started(1).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#).await;
    assert_eq!(editor.recv_line().await, error_line("1", -32800, "Request cancelled"));
    for _ in 0..100 {
        if editor.state.saw_cancellation.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the handler's token never fired");
}

#[tokio::test]
async fn requests_cancels_and_the_reply_flow_while_a_handler_awaits_the_editor() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}"#).await;
    let ask = editor.recv().await;
    assert_eq!(ask["method"], json!("session/request_permission"));
    assert_eq!(ask["id"], json!(0));
    // The reader keeps serving while the prompt waits on the editor.
    editor.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":2,"result":{"pong":true}}"#);
    editor.send(r#"{"jsonrpc":"2.0","id":3,"method":"slow"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}"#).await;
    assert_eq!(editor.recv_line().await, error_line("3", -32800, "Request cancelled"));
    // Same id value as our outgoing call, but a request: a separate id space.
    editor.send(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":0,"result":{"pong":true}}"#);
    editor
        .send(r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#)
        .await;
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"permission":{"optionId":"allow","outcome":"selected"},"stopReason":"end_turn"}}"#
    );
}

#[tokio::test]
async fn session_cancel_during_permission_ends_the_turn_and_cancels_the_ask() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}"#).await;
    assert_eq!(editor.recv().await["method"], json!("session/request_permission"));
    editor.send(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}"#).await;
    // The dropped permission call tells the editor, then the turn answers `cancelled`.
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}"#
    );
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}"#);
    // A late answer to the cancelled ask is ignored.
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}"#).await;
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn at_the_in_flight_limit_the_next_message_waits_for_a_handler_to_end() {
    let mut editor =
        Editor::start_with(ConnectionOptions { max_in_flight: 2, ..ConnectionOptions::default() });
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"gate"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":2,"method":"gate"}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#).await;
    // Two handlers hold the limit: the ping is not even read.
    let early = tokio::time::timeout(Duration::from_millis(300), editor.output.next_line()).await;
    assert!(early.is_err(), "nothing is answered while both gates wait: {early:?}");
    editor.state.gate.notify_waiters();
    let mut ids = vec![editor.recv().await["id"].clone(), editor.recv().await["id"].clone()];
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, [json!(1), json!(2)]);
    assert_eq!(editor.recv().await, json!({"jsonrpc": "2.0", "id": "ping", "result": {"pong": true}}));
}
