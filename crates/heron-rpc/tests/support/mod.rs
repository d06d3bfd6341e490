//! The connection under test: a small agent whose methods each show one behaviour the
//! connection must support, and the editor's end of in-memory pipes to it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_rpc::{
    Answer, Connection, ConnectionOptions, Dispatcher, NotificationFuture, Peer, Policy, ResponseFuture,
    RpcError, Then, current_cancellation,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long a test waits for a message before failing.
pub const WAIT: Duration = Duration::from_secs(5);

/// What the fake handlers share with the test.
#[derive(Default)]
pub struct State {
    pub notes: Mutex<Vec<String>>,
    /// Released by the test to let `gate` requests finish.
    pub gate: Notify,
    /// Fired by the `session/cancel` notification.
    pub turn_cancelled: Notify,
    /// Counts handler futures dropped before they finished.
    pub dropped: AtomicUsize,
    /// Set by the `set_flag` notification's future; read by `read_flag`.
    pub flag: AtomicBool,
    /// Set when a handler saw its cancellation token fire.
    pub saw_cancellation: AtomicBool,
    /// Counts `slow` and `watch_cancel` handlers that started running.
    pub started: AtomicUsize,
    /// Counts `open` answers whose follow-ups were queued.
    pub opened: AtomicUsize,
}

impl State {
    /// Waits until `n` long-running handlers have been polled at least once.
    pub async fn wait_started(&self, n: usize) {
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

/// A handler's result as its answer, with nothing following.
fn answered(
    result: impl Future<Output = Result<Box<RawValue>, RpcError>> + Send + 'static,
) -> ResponseFuture {
    Box::pin(async move { Answer::from(result.await) })
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
pub fn raw(value: &Value) -> Option<Box<RawValue>> {
    if value.is_null() { None } else { serde_json::value::to_raw_value(value).ok() }
}

/// Calls the peer with JSON params and a chosen timeout, and reads the result as JSON.
pub fn call(
    peer: &Peer,
    method: &str,
    params: Value,
    timeout: Option<Duration>,
) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
    as_json(peer.call_raw_with_timeout(method, raw(&params), timeout))
}

/// Calls the peer under the connection's default timeout.
pub fn call_default(
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
            "ping" => (Policy::Inline, answered(async { ok(json!({ "pong": true })) })),
            "echo" => {
                let params: Value = decode_params(params)?;
                (Policy::Concurrent, answered(async move { ok(params) }))
            }
            "typed" => {
                let params: Named = decode_params(params)?;
                (Policy::Concurrent, answered(async move { ok(json!({ "hello": params.name })) }))
            }
            "slow" => (
                Policy::Concurrent,
                answered(async move {
                    let mut spy = DropSpy(state.clone(), true);
                    state.started.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                    spy.1 = false;
                    ok(json!({}))
                }),
            ),
            "gate" => (
                Policy::Concurrent,
                answered(async move {
                    let mut spy = DropSpy(state.clone(), true);
                    state.gate.notified().await;
                    spy.1 = false;
                    ok(json!({ "gate": "passed" }))
                }),
            ),
            "watch_cancel" => (
                Policy::Concurrent,
                answered(async move {
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
                (Policy::Inline, answered(async move { ok(json!({ "flag": flag })) }))
            }
            "panic" => (Policy::Concurrent, answered(async { panic!("handler bug") })),
            // Answers, then announces what the answer made known, and counts once both are out.
            "open" => (
                Policy::Concurrent,
                Box::pin(async move {
                    let mut then = Then::new();
                    then.notify("opened", None);
                    then.after(move || {
                        state.opened.fetch_add(1, Ordering::SeqCst);
                    });
                    Answer { result: ok(json!({ "opened": true })), then }
                }),
            ),
            // A turn that asks the editor for permission and can be cancelled meanwhile.
            "session/prompt" => (
                Policy::Concurrent,
                answered(async move {
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
pub struct Editor {
    pub input: DuplexStream,
    pub output: Lines<BufReader<DuplexStream>>,
    pub peer: Peer,
    pub state: Arc<State>,
    pub serve: JoinHandle<std::io::Result<()>>,
}

impl Editor {
    pub fn start() -> Self {
        Self::start_with(ConnectionOptions::default())
    }

    pub fn start_with(options: ConnectionOptions) -> Self {
        let (input, agent_in) = tokio::io::duplex(1 << 16);
        let (agent_out, output) = tokio::io::duplex(1 << 16);
        let connection = Connection::new(agent_in, agent_out, options);
        let peer = connection.peer();
        let state = Arc::new(State::default());
        let fake = Arc::new(Fake { peer: peer.clone(), state: state.clone() });
        let serve = tokio::spawn(connection.serve(fake));
        Self { input, output: BufReader::new(output).lines(), peer, state, serve }
    }

    pub async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.expect("write to agent");
        self.input.write_all(b"\n").await.expect("write to agent");
    }

    /// The next line the agent wrote, exactly as written.
    pub async fn recv_line(&mut self) -> String {
        match tokio::time::timeout(WAIT, self.output.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("the agent closed its output"),
            Ok(Err(err)) => panic!("reading agent output failed: {err}"),
            Err(_) => panic!("no message from the agent within {WAIT:?}"),
        }
    }

    pub async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("agent wrote non-JSON {line}: {err}"))
    }

    /// Proves nothing else was written before: a ping's answer is the very next line.
    pub async fn expect_nothing_before_ping(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":"ping","method":"ping"}"#).await;
        assert_eq!(self.recv_line().await, r#"{"jsonrpc":"2.0","id":"ping","result":{"pong":true}}"#);
    }

    /// Ends the agent's input and waits for `serve` to return.
    pub async fn close_input(self) -> (Lines<BufReader<DuplexStream>>, std::io::Result<()>) {
        let Editor { input, output, serve, .. } = self;
        drop(input);
        let result = tokio::time::timeout(Duration::from_secs(2), serve)
            .await
            .expect("serve ends within 2 s of EOF")
            .expect("serve task");
        (output, result)
    }
}

pub async fn next_line(output: &mut Lines<BufReader<DuplexStream>>) -> String {
    let line = tokio::time::timeout(WAIT, output.next_line()).await;
    line.expect("an answer in time").expect("read").expect("a line")
}

pub fn error_line(id: &str, code: i32, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}
