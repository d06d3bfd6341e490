//! How a connection ends: EOF, a broken output or the peer closing fail what is pending
//! and end `serve`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use heron_rpc::RpcError;
use serde_json::json;

use crate::support::{Editor, WAIT, call, call_default, error_line, raw};

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
