//! Calls and notifications the agent sends: ids, replies, timeouts and their cancel, batches,
//! and the validation hook that checks what comes in and sees what goes out.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_rpc::{ConnectionOptions, OutgoingKind, RpcError, Validate};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::support::{Editor, call, call_default, raw};

#[tokio::test]
async fn outgoing_ids_count_up_from_zero_and_results_decode() {
    let mut editor = Editor::start();
    let peer = editor.peer.clone();
    let first = tokio::spawn(call_default(&peer, "fs/read_text_file", json!({ "path": "/a" })));
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"path":"/a"}}"#
    );
    let second = tokio::spawn(call_default(&peer, "terminal/kill", Value::Null));
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":1,"method":"terminal/kill"}"#);
    // Answered out of order; a raw `null` result stays `null` (the typed layer reads it as `{}`).
    editor.send(r#"{"jsonrpc":"2.0","id":1,"result":null}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{"content":"hi"}}"#).await;
    assert_eq!(second.await.expect("task"), Ok(Value::Null));
    assert_eq!(first.await.expect("task"), Ok(json!({ "content": "hi" })));
}

#[tokio::test]
async fn outgoing_error_replies_reach_the_caller() {
    let mut editor = Editor::start();
    let call = tokio::spawn(call_default(&editor.peer, "fs/read_text_file", json!({})));
    editor.recv().await;
    editor.send(r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32002,"message":"File not found","data":{"path":"/x"}}}"#).await;
    assert_eq!(
        call.await.expect("task"),
        Err(RpcError::new(-32002, "File not found").with_data(json!({ "path": "/x" })))
    );
}

#[tokio::test]
async fn a_malformed_reply_fails_the_pending_call() {
    let mut editor = Editor::start();
    let call = tokio::spawn(call_default(&editor.peer, "fs/read_text_file", json!({})));
    editor.recv().await;
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{},"error":{"code":1,"message":"x"}}"#).await;
    let error = call.await.expect("task").expect_err("malformed reply");
    assert_eq!((error.code, error.message.as_str()), (-32603, "Peer sent a malformed response"));
    editor.expect_nothing_before_ping().await;
}

#[tokio::test]
async fn replies_for_unknown_ids_are_ignored() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":99,"result":{}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":"0","result":{}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":98}"#).await;
    editor.expect_nothing_before_ping().await;
}

#[tokio::test(start_paused = true)]
async fn timed_out_call_fails_cancelled_and_sends_cancel_request() {
    let mut editor = Editor::start();
    let peer = editor.peer.clone();
    let call = tokio::spawn(async move {
        call(&peer, "fs/read_text_file", json!({}), Some(Duration::from_secs(3))).await
    });
    assert_eq!(editor.recv().await["id"], json!(0));
    let started = tokio::time::Instant::now();
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}"#
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        call.await.expect("task"),
        Err(RpcError::request_cancelled().with_data(json!({
            "reason": "timeout", "method": "fs/read_text_file", "timeoutMs": 3000
        })))
    );
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#).await;
    editor.expect_nothing_before_ping().await;
}

#[tokio::test(start_paused = true)]
async fn calls_use_the_connection_default_timeout() {
    let mut editor = Editor::start_with(ConnectionOptions {
        call_timeout: Some(Duration::from_secs(2)),
        ..ConnectionOptions::default()
    });
    let started = tokio::time::Instant::now();
    let call = tokio::spawn(call_default(&editor.peer, "terminal/output", json!({})));
    editor.recv().await;
    let error = call.await.expect("task").expect_err("timeout");
    assert_eq!(error.code, -32800);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test]
async fn dropping_a_call_sends_cancel_request() {
    let mut editor = Editor::start();
    let call = tokio::spawn(call_default(&editor.peer, "fs/read_text_file", json!({})));
    assert_eq!(editor.recv().await["id"], json!(0));
    call.abort();
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}"#
    );
}

/// A call's first half ends with its line in the writer's queue, so a line queued after it
/// goes out after it, before anyone waits for the reply; the second half's time limit counts
/// from the queueing, and dropping that half withdraws the call.
#[tokio::test(start_paused = true)]
async fn a_queued_call_goes_out_in_its_place_and_its_wait_is_the_second_half() {
    let mut editor = Editor::start();
    let limit = Some(Duration::from_secs(3));
    let first = editor.peer.queue_call_raw("terminal/create", raw(&json!({"n": 1})), limit).await;
    editor.peer.notify_raw("session/update", raw(&json!({"n": 2}))).await.expect("queued");
    let second = editor.peer.queue_call_raw("fs/read_text_file", raw(&json!({"n": 3})), limit).await;
    let lines: Vec<Value> = [editor.recv().await, editor.recv().await, editor.recv().await].into();
    let order: Vec<_> =
        lines.iter().map(|line| (line["method"].clone(), line["params"]["n"].clone())).collect();
    assert_eq!(
        order,
        [
            (json!("terminal/create"), json!(1)),
            (json!("session/update"), json!(2)),
            (json!("fs/read_text_file"), json!(3))
        ]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{"terminalId":"t"}}"#).await;
    let started = tokio::time::Instant::now();
    assert_eq!(first.await.expect("answered").get(), r#"{"terminalId":"t"}"#);
    drop(second);
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#
    );
    assert!(started.elapsed() < Duration::from_secs(1), "the drop withdrew it, not its time limit");
}

/// A queued call's time limit runs from the queueing, not from the first wait on it.
#[tokio::test(start_paused = true)]
async fn a_queued_calls_time_limit_runs_from_its_queueing() {
    let mut editor = Editor::start();
    let started = tokio::time::Instant::now();
    let pending = editor.peer.queue_call_raw("fs/read_text_file", None, Some(Duration::from_secs(3))).await;
    assert_eq!(editor.recv().await["id"], json!(0));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let error = pending.await.expect_err("never answered");
    assert_eq!(error.code, -32800);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}

#[tokio::test]
async fn notifications_are_sent_as_one_line() {
    let mut editor = Editor::start();
    editor
        .peer
        .notify_raw("session/update", raw(&json!({ "sessionId": "s1", "text": "a\nb" })))
        .await
        .expect("notify");
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","text":"a\nb"}}"#
    );
}

#[tokio::test]
async fn a_batch_of_notifications_arrives_as_its_lines_in_order() {
    let mut editor = Editor::start();
    let params = [json!({ "n": 1, "text": "a\nb" }), json!({ "n": 2 }), json!(null)];
    editor.peer.notify_batch_serialized("session/update", &params).await.expect("batch");
    editor.peer.notify_raw("after", None).await.expect("notify");
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"n":1,"text":"a\nb"}}"#
    );
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","method":"session/update","params":{"n":2}}"#);
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","method":"session/update"}"#, "null: no params");
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","method":"after"}"#);
    editor.peer.notify_batch_serialized::<Value>("empty", &[]).await.expect("nothing to send");
    editor.peer.notify_raw("last", None).await.expect("notify");
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","method":"last"}"#,
        "an empty batch sends no line"
    );
}

/// Rejects `echo` params without `ok`, and records everything sent.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(OutgoingKind, String, String)>>,
}

impl Validate for Recorder {
    fn incoming(&self, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
        let has_ok = params.is_some_and(|p| p.get().contains("\"ok\""));
        if matches!(method, "echo" | "note") && !has_ok {
            return Err(RpcError::invalid_params("ok", "missing field `ok`"));
        }
        Ok(())
    }

    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue) {
        self.seen.lock().expect("seen").push((kind, method.to_owned(), payload.get().to_owned()));
    }
}

#[tokio::test]
async fn the_validator_checks_incoming_params_and_sees_outgoing_payloads() {
    let recorder = Arc::new(Recorder::default());
    let mut editor = Editor::start_with(ConnectionOptions {
        validator: Some(recorder.clone()),
        ..ConnectionOptions::default()
    });
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{}}"#).await;
    assert_eq!(
        editor.recv_line().await,
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params","data":{"path":"ok","reason":"missing field `ok`"}}}"#
    );
    editor.send(r#"{"jsonrpc":"2.0","method":"note","params":{}}"#).await;
    editor.send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"ok":1}}"#).await;
    assert_eq!(editor.recv_line().await, r#"{"jsonrpc":"2.0","id":2,"result":{"ok":1}}"#);
    assert!(editor.state.notes.lock().expect("notes").is_empty());

    let call = tokio::spawn(call_default(&editor.peer, "fs/read_text_file", json!({ "path": "/p" })));
    editor.recv().await;
    editor.send(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#).await;
    call.await.expect("task").expect("reply");
    editor.peer.notify_raw("session/update", raw(&json!({ "u": 1 }))).await.expect("notify");
    editor.recv().await;
    editor
        .peer
        .notify_batch_serialized("session/update", &[json!({ "u": 2 }), json!({ "u": 3 })])
        .await
        .expect("batch");
    assert_eq!(editor.recv().await["params"], json!({ "u": 2 }));
    assert_eq!(editor.recv().await["params"], json!({ "u": 3 }));
    let note = |u: u8| (OutgoingKind::Notification, "session/update".to_owned(), format!(r#"{{"u":{u}}}"#));
    assert_eq!(
        *recorder.seen.lock().expect("seen"),
        vec![
            (OutgoingKind::Result, "echo".to_owned(), r#"{"ok":1}"#.to_owned()),
            (OutgoingKind::Request, "fs/read_text_file".to_owned(), r#"{"path":"/p"}"#.to_owned()),
            note(1),
            note(2),
            note(3),
        ]
    );
}

#[tokio::test]
async fn a_reply_to_the_agents_call_gets_through_while_its_output_is_full() {
    let options =
        ConnectionOptions { write_queue: 4, write_queue_bytes: 1024, ..ConnectionOptions::default() };
    let mut editor = Editor::start_with(options);
    let asked = call_default(&editor.peer, "question", json!({}));
    let asked = tokio::spawn(asked);
    let question: Value = serde_json::from_str(&editor.recv_line().await).expect("JSON");
    assert_eq!(question["method"], "question");
    // The agent now streams far more than the pipe and its queue hold, and the editor reads
    // none of it: every sender of the agent waits for room.
    let peer = editor.peer.clone();
    let flood = tokio::spawn(async move {
        let noise = json!({ "text": "x".repeat(1024) });
        for _ in 0..1024 {
            if peer.notify_raw("noise", raw(&noise)).await.is_err() {
                return;
            }
        }
    });
    editor.send(&format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"yes":true}}}}"#, question["id"])).await;
    let answered = tokio::time::timeout(Duration::from_secs(5), asked).await;
    let answered = answered.expect("the reply got through").expect("task").expect("reply");
    assert_eq!(answered, json!({ "yes": true }));
    assert!(!flood.is_finished(), "the output was still full when the reply arrived");
    flood.abort();
}
