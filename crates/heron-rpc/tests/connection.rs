//! The connection over in-memory pipes: error answers, ids, notifications, cancellation,
//! concurrency while a handler waits on the peer, outgoing calls and shutdown.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_rpc::{
    Connection, ConnectionOptions, Dispatcher, Id, NotificationFuture, OutgoingKind, Peer, Policy,
    ResponseFuture, RpcError, Validate, current_cancellation,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long a test waits for a message before failing.
const WAIT: Duration = Duration::from_secs(5);

/// What the fake handlers share with the test.
#[derive(Default)]
struct State {
    notes: Mutex<Vec<String>>,
    /// Released by the test to let `gate` requests finish.
    gate: Notify,
    /// Fired by the `session/cancel` notification.
    turn_cancelled: Notify,
    /// Counts handler futures dropped before they finished.
    dropped: AtomicUsize,
    /// Set by the `set_flag` notification's future; read by `read_flag`.
    flag: AtomicBool,
    /// Set when a handler saw its cancellation token fire.
    saw_cancellation: AtomicBool,
    /// Counts `slow` and `watch_cancel` handlers that started running.
    started: AtomicUsize,
}

impl State {
    /// Waits until `n` long-running handlers have been polled at least once.
    async fn wait_started(&self, n: usize) {
        for _ in 0..500 {
            if self.started.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("handlers did not start");
    }
}

/// Counts a drop unless disarmed: proves a cancelled handler's future was dropped.
struct DropSpy(Arc<State>, bool);

impl Drop for DropSpy {
    fn drop(&mut self) {
        if self.1 {
            self.0.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A small agent: each method shows one behaviour the connection must support.
struct Fake {
    peer: Peer,
    state: Arc<State>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

fn ok(value: Value) -> Result<Box<RawValue>, RpcError> {
    serde_json::value::to_raw_value(&value).map_err(|e| RpcError::internal(&e))
}

/// Decodes raw params the way a typed layer on top would (absent params read as `{}`).
fn decode_params<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RpcError> {
    serde_json::from_str(params.map_or("{}", RawValue::get))
        .map_err(|e| RpcError::invalid_params("", e.to_string()))
}

/// Raw params for a JSON value; `null` means no params, as a typed layer sends them.
fn raw(value: &Value) -> Option<Box<RawValue>> {
    if value.is_null() { None } else { serde_json::value::to_raw_value(value).ok() }
}

/// Calls the peer with JSON params and a chosen timeout, and reads the result as JSON.
fn call(
    peer: &Peer,
    method: &str,
    params: Value,
    timeout: Option<Duration>,
) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
    as_json(peer.call_raw_with_timeout(method, raw(&params), timeout))
}

/// Calls the peer under the connection's default timeout.
fn call_default(
    peer: &Peer,
    method: &str,
    params: Value,
) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
    as_json(peer.call_raw(method, raw(&params)))
}

async fn as_json(pending: impl Future<Output = Result<Box<RawValue>, RpcError>>) -> Result<Value, RpcError> {
    let result = pending.await?;
    serde_json::from_str(result.get()).map_err(|e| RpcError::internal(&e))
}

impl Dispatcher for Fake {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let state = self.state.clone();
        let peer = self.peer.clone();
        Ok(match method {
            "ping" => (Policy::Inline, Box::pin(async { ok(json!({ "pong": true })) })),
            "echo" => {
                let params: Value = decode_params(params)?;
                (Policy::Concurrent, Box::pin(async move { ok(params) }))
            }
            "typed" => {
                let params: Named = decode_params(params)?;
                (Policy::Concurrent, Box::pin(async move { ok(json!({ "hello": params.name })) }))
            }
            "slow" => (
                Policy::Concurrent,
                Box::pin(async move {
                    let mut spy = DropSpy(state.clone(), true);
                    state.started.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                    spy.1 = false;
                    ok(json!({}))
                }),
            ),
            "gate" => (
                Policy::Concurrent,
                Box::pin(async move {
                    let mut spy = DropSpy(state.clone(), true);
                    state.gate.notified().await;
                    spy.1 = false;
                    ok(json!({ "gate": "passed" }))
                }),
            ),
            "watch_cancel" => (
                Policy::Concurrent,
                Box::pin(async move {
                    let Some(token) = current_cancellation() else {
                        return Err(RpcError::new(-1, "no cancellation token in scope"));
                    };
                    state.started.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(async move {
                        token.cancelled().await;
                        state.saw_cancellation.store(true, Ordering::SeqCst);
                    });
                    std::future::pending().await
                }),
            ),
            "read_flag" => {
                let flag = state.flag.load(Ordering::SeqCst);
                (Policy::Inline, Box::pin(async move { ok(json!({ "flag": flag })) }))
            }
            "panic" => (Policy::Concurrent, Box::pin(async { panic!("handler bug") })),
            // Answers, then (slowly) announces what the answer made known.
            "open" => (
                Policy::Concurrent,
                Box::pin(async move {
                    heron_rpc::after_response(async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let _ = peer.notify_raw("opened", None).await;
                    });
                    ok(json!({ "opened": true }))
                }),
            ),
            // A turn that asks the editor for permission and can be cancelled meanwhile.
            "session/prompt" => (
                Policy::Concurrent,
                Box::pin(async move {
                    let ask = call_default(
                        &peer,
                        "session/request_permission",
                        json!({ "sessionId": "s1", "toolCall": { "toolCallId": "t1" } }),
                    );
                    tokio::select! {
                        answer = ask => {
                            let answer = answer?;
                            ok(json!({ "stopReason": "end_turn", "permission": answer["outcome"] }))
                        }
                        () = state.turn_cancelled.notified() => ok(json!({ "stopReason": "cancelled" })),
                    }
                }),
            ),
            other => return Err(RpcError::method_not_found(other)),
        })
    }

    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)> {
        let state = self.state.clone();
        match method {
            "note" => {
                let text = params.map_or_else(String::new, |p| p.get().to_owned());
                Some((
                    Policy::Concurrent,
                    Box::pin(async move { state.notes.lock().expect("notes").push(text) }),
                ))
            }
            "set_flag" => {
                Some((Policy::Inline, Box::pin(async move { state.flag.store(true, Ordering::SeqCst) })))
            }
            "session/cancel" => {
                Some((Policy::Inline, Box::pin(async move { state.turn_cancelled.notify_waiters() })))
            }
            "boom" => Some((Policy::Inline, Box::pin(async { panic!("notification bug") }))),
            _ => None,
        }
    }
}

/// The editor's end of a connection under test.
struct Editor {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    peer: Peer,
    state: Arc<State>,
    serve: JoinHandle<std::io::Result<()>>,
}

impl Editor {
    fn start() -> Self {
        Self::start_with(ConnectionOptions::default())
    }

    fn start_with(options: ConnectionOptions) -> Self {
        let (input, agent_in) = tokio::io::duplex(1 << 16);
        let (agent_out, output) = tokio::io::duplex(1 << 16);
        let connection = Connection::new(agent_in, agent_out, options);
        let peer = connection.peer();
        let state = Arc::new(State::default());
        let fake = Arc::new(Fake { peer: peer.clone(), state: state.clone() });
        let serve = tokio::spawn(connection.serve(fake));
        Self { input, output: BufReader::new(output).lines(), peer, state, serve }
    }

    async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.expect("write to agent");
        self.input.write_all(b"\n").await.expect("write to agent");
    }

    /// The next line the agent wrote, exactly as written.
    async fn recv_line(&mut self) -> String {
        match tokio::time::timeout(WAIT, self.output.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("the agent closed its output"),
            Ok(Err(err)) => panic!("reading agent output failed: {err}"),
            Err(_) => panic!("no message from the agent within {WAIT:?}"),
        }
    }

    async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("agent wrote non-JSON {line}: {err}"))
    }

    /// Proves nothing else was written before: a ping's answer is the very next line.
    async fn expect_nothing_before_ping(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#).await;
        assert_eq!(self.recv_line().await, r#"{"jsonrpc":"2.0","id":"ping","result":{"pong":true}}"#);
    }

    /// Ends the agent's input and waits for `serve` to return.
    async fn close_input(self) -> (Lines<BufReader<DuplexStream>>, std::io::Result<()>) {
        let Editor { input, output, serve, .. } = self;
        drop(input);
        let result = tokio::time::timeout(Duration::from_secs(2), serve)
            .await
            .expect("serve ends within 2 s of EOF")
            .expect("serve task");
        (output, result)
    }
}

async fn next_line(output: &mut Lines<BufReader<DuplexStream>>) -> String {
    let line = tokio::time::timeout(WAIT, output.next_line()).await;
    line.expect("an answer in time").expect("read").expect("a line")
}

fn error_line(id: &str, code: i32, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}

// ---- Error answers ----

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

// ---- Ids and notifications ----

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

// ---- Incoming cancellation ----

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

// ---- Concurrency while a handler awaits the editor ----

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

// ---- Outgoing calls ----

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

// ---- Shutdown ----

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

// ---- Validation hook ----

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

#[test]
fn ids_display_for_logs() {
    assert_eq!(Id::Str("a".into()).to_string(), "\"a\"");
    assert_eq!(Id::Int(-3).to_string(), "-3");
    assert_eq!(Id::Null.to_string(), "null");
}

#[tokio::test]
async fn a_follow_up_goes_out_after_its_answer_and_before_the_next_message_is_handled() {
    let mut editor = Editor::start();
    editor.send(r#"{"jsonrpc":"2.0","id":1,"method":"open"}"#).await;
    assert_eq!(editor.recv().await, json!({"jsonrpc": "2.0", "id": 1, "result": {"opened": true}}));
    // The editor reacts at once; the agent's follow-up is still on its way.
    editor.send(r#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#).await;
    assert_eq!(editor.recv().await, json!({"jsonrpc": "2.0", "method": "opened"}));
    assert_eq!(editor.recv().await, json!({"jsonrpc": "2.0", "id": "ping", "result": {"pong": true}}));
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
