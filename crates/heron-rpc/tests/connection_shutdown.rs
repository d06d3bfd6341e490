//! How a connection ends: EOF, a broken output or the peer closing fail what is pending
//! and end `serve`, within its graces even when the editor stopped reading.

use std::sync::atomic::Ordering;
use std::time::Duration;

use heron_rpc::{ConnectionOptions, RpcError};
use serde_json::json;

use crate::support::{Editor, WAIT, call, call_default, error_line, next_line, raw};

#[tokio::test]
async fn eof_fails_pending_calls_cancels_handlers_and_ends_serve() {
    let mut editor = Editor::start();
    let peer = editor.peer.clone();
    let call = tokio::spawn(call(&peer, "fs/read_text_file", json!({}), None));
    assert_eq!(editor.recv().await["id"], json!(0));
    editor.send(r#"{"jsonrpc":"2.0","id":7,"method":"slow"}"#).await;
    editor.expect_nothing_before_ping().await;
    editor.state.wait_started(1).await;
    let state = editor.state.clone();
    let (mut output, result) = editor.close_input().await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        tokio::time::timeout(WAIT, call).await.expect("call ends").expect("task"),
        Err(RpcError::new(-32603, "Connection closed"))
    );
    assert_eq!(output.next_line().await.expect("read"), Some(error_line("7", -32800, "Request cancelled")));
    assert_eq!(output.next_line().await.expect("read"), None);
    assert_eq!(state.dropped.load(Ordering::SeqCst), 1);
    assert!(peer.is_closed());
    assert_eq!(
        call_default(&peer, "fs/read_text_file", json!({})).await,
        Err(RpcError::new(-32603, "Connection closed"))
    );
    assert_eq!(peer.notify_raw("x", raw(&json!({}))).await, Err(RpcError::new(-32603, "Connection closed")));
}

#[tokio::test]
async fn a_call_failed_by_eof_sees_calls_closed_while_handlers_still_finish() {
    let mut editor = Editor::start();
    let peer = editor.peer.clone();
    let call = tokio::spawn(call(&peer, "fs/read_text_file", json!({}), None));
    assert_eq!(editor.recv().await["id"], json!(0));
    editor.send(r#"{"jsonrpc":"2.0","id":7,"method":"slow"}"#).await;
    editor.state.wait_started(1).await;
    assert!(!peer.calls_closed());
    let Editor { input, output, serve, .. } = editor;
    drop(input);
    let failed = tokio::time::timeout(WAIT, call).await.expect("call ends").expect("task");
    assert_eq!(failed, Err(RpcError::new(-32603, "Connection closed")));
    // The slow handler holds the connection open for its grace, yet the caller can already
    // tell its call failed because the peer went away.
    assert!(!peer.is_closed(), "the drain grace is still running");
    assert!(peer.calls_closed());
    let _ = tokio::time::timeout(Duration::from_secs(2), serve).await;
    drop(output);
}

#[tokio::test]
async fn a_broken_output_closes_the_connection() {
    let editor = Editor::start();
    let Editor { input, output, peer, serve, .. } = editor;
    drop(output);
    let call = call(&peer, "fs/read_text_file", json!({}), None);
    assert_eq!(
        tokio::time::timeout(WAIT, call).await.expect("call ends"),
        Err(RpcError::new(-32603, "Connection closed"))
    );
    let result = tokio::time::timeout(WAIT, serve).await.expect("serve ends").expect("task");
    assert!(result.is_err());
    drop(input);
}

#[tokio::test]
async fn peer_close_ends_serve_like_eof() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#).await;
    editor.expect_nothing_before_ping().await;
    editor.peer.close();
    assert_eq!(editor.recv_line().await, error_line("1", -32800, "Request cancelled"));
    let result = tokio::time::timeout(WAIT, &mut editor.serve).await.expect("serve ends").expect("task");
    assert!(result.is_ok());
}

/// Short graces for the shutdown tests; the defaults are pinned where they are used.
fn short_graces(grace: Duration) -> ConnectionOptions {
    let defaults = ConnectionOptions::default();
    assert_eq!(defaults.flush_timeout, Duration::from_secs(1), "the production flush grace");
    assert_eq!(defaults.drain_timeout, Duration::from_millis(800), "the production drain grace");
    ConnectionOptions { flush_timeout: grace, drain_timeout: grace, ..defaults }
}

#[tokio::test]
async fn requests_running_when_the_input_ends_get_the_drain_grace_then_are_cancelled() {
    let editor = Editor::start_with(short_graces(Duration::from_millis(300)));
    let Editor { mut input, mut output, state, serve, .. } = editor;
    for line in [r#"{"jsonrpc":"2.0","id":1,"method":"gate"}"#, r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#]
    {
        tokio::io::AsyncWriteExt::write_all(&mut input, format!("{line}\n").as_bytes()).await.expect("send");
    }
    state.wait_started(1).await;
    drop(input);
    // The gate opens within the grace: its request is answered as usual.
    state.gate.notify_one();
    assert_eq!(next_line(&mut output).await, r#"{"jsonrpc":"2.0","id":1,"result":{"gate":"passed"}}"#);
    // The slow one outlives the grace: cancelled, answered -32800, and serve ends.
    assert_eq!(next_line(&mut output).await, error_line("2", -32800, "Request cancelled"));
    let result = tokio::time::timeout(WAIT, serve).await.expect("serve ends after the grace").expect("task");
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(state.dropped.load(Ordering::SeqCst), 1, "the slow handler was stopped");
}

#[tokio::test]
async fn an_editor_that_stops_reading_holds_shutdown_only_for_the_flush_grace() {
    let grace = Duration::from_millis(100);
    let mut editor = Editor::start_with(short_graces(grace));
    // Answers larger than the pipe and the writer's buffer: the writer blocks on an editor
    // that reads nothing.
    let big = "x".repeat(48 * 1024);
    for id in 0..4 {
        editor
            .send(
                &json!({ "jsonrpc": "2.0", "id": id, "method": "echo", "params": { "t": big } }).to_string(),
            )
            .await;
    }
    let Editor { input, mut output, serve, .. } = editor;
    drop(input);
    let started = tokio::time::Instant::now();
    let result =
        tokio::time::timeout(WAIT, serve).await.expect("serve ends though nobody reads").expect("task");
    let err = result.expect_err("the output timed out");
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(started.elapsed() >= grace, "the queued output got its grace first");
    // What was not written is dropped: fewer whole answers arrive than were made.
    let mut whole = 0;
    while let Ok(Some(line)) = output.next_line().await {
        whole += usize::from(serde_json::from_str::<serde_json::Value>(&line).is_ok());
    }
    assert!(whole < 4, "{whole} answers were written");
}
