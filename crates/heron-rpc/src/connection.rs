//! The connection: owns the reader loop, which classifies each frame, routes replies,
//! starts handlers without awaiting them, and shuts everything down when the input ends.
//!
//! The cancellation rules it implements are in the [`rpc`](super) module docs.

use std::io;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::framing::{DEFAULT_MAX_LINE, Frame, LineReader};
use super::inflight::{Ticket, with_cancellation};
use super::outbox::{Outbox, Queued};
use super::peer::{Peer, Shared};
use super::{OutgoingKind, Validate, writer};
use crate::answer::Answer;
use crate::dispatch::{BoxFuture, Dispatcher, NotificationFuture, Policy, ResponseFuture};
use crate::envelope::{self, Id, Message, Rejected};
use crate::error::RpcError;

/// The method the connection handles itself.
const CANCEL_REQUEST: &str = "$/cancel_request";

/// Tunables of one connection.
#[derive(Clone)]
pub struct ConnectionOptions {
    /// The largest message line accepted, in bytes.
    pub max_line_bytes: usize,
    /// The default timeout of our own calls; `None` waits until the reply or close.
    pub call_timeout: Option<Duration>,
    /// How many encoded messages may wait for the writer before senders wait.
    pub write_queue: usize,
    /// How many bytes of encoded messages may wait for the writer before senders wait.
    pub write_queue_bytes: usize,
    /// How long shutdown may spend writing what is already queued.
    pub flush_timeout: Duration,
    /// When the input ends, how long requests already running may take to finish and be
    /// answered before they are cancelled.
    pub drain_timeout: Duration,
    /// An optional schema check of incoming and outgoing payloads.
    pub validator: Option<Arc<dyn Validate>>,
    /// How many handlers may run at once; beyond that the input is not read until one
    /// ends, so a peer that floods requests and never reads answers cannot grow memory
    /// without bound. High enough that a client pipelining thousands of requests before it
    /// reads any answer still gets them all.
    pub max_in_flight: usize,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE,
            call_timeout: Some(Duration::from_secs(60)),
            write_queue: 1024,
            write_queue_bytes: 1024 * 1024,
            flush_timeout: Duration::from_secs(1),
            drain_timeout: Duration::from_millis(800),
            validator: None,
            max_in_flight: 16 * 1024,
        }
    }
}

impl std::fmt::Debug for ConnectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionOptions")
            .field("max_line_bytes", &self.max_line_bytes)
            .field("call_timeout", &self.call_timeout)
            .field("write_queue", &self.write_queue)
            .field("write_queue_bytes", &self.write_queue_bytes)
            .field("flush_timeout", &self.flush_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .field("validator", &self.validator.is_some())
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

/// A JSON-RPC connection over a reader and a writer, not yet serving.
///
/// Take a [`Peer`] with [`Connection::peer`] first (handlers need it to call the peer),
/// then run [`Connection::serve`] until the input ends.
pub struct Connection<R, W> {
    input: LineReader<R>,
    output: W,
    queue: mpsc::Receiver<Queued>,
    shared: Arc<Shared>,
    flush_timeout: Duration,
    drain_timeout: Duration,
    max_in_flight: usize,
}

impl<R, W> Connection<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    /// Wraps `reader` and `writer`; nothing is read or written until `serve`.
    pub fn new(reader: R, writer: W, options: ConnectionOptions) -> Self {
        let (out, queue) = Outbox::new(options.write_queue, options.write_queue_bytes);
        Self {
            input: LineReader::new(reader, options.max_line_bytes),
            output: writer,
            queue,
            shared: Arc::new(Shared::new(out, options.call_timeout, options.validator)),
            flush_timeout: options.flush_timeout,
            drain_timeout: options.drain_timeout,
            max_in_flight: options.max_in_flight.max(1),
        }
    }

    /// A handle for calling and notifying the peer.
    pub fn peer(&self) -> Peer {
        Peer { shared: self.shared.clone() }
    }

    /// Serves until the input ends, the output fails or [`Peer::close`] is called; then
    /// fails pending calls, cancels in-flight handlers and flushes queued output.
    ///
    /// Handler futures are spawned on the current tokio runtime. Returns the first I/O
    /// error of the input or the output.
    pub async fn serve(self, dispatcher: Arc<dyn Dispatcher>) -> io::Result<()> {
        let Connection { mut input, output, queue, shared, flush_timeout, drain_timeout, max_in_flight } =
            self;
        let stop = CancellationToken::new();
        let writer = writer::run(output, queue, stop.clone(), shared.closed.clone(), flush_timeout);
        let reader = async {
            let mut tasks = JoinSet::new();
            let result = read_loop(&mut input, &shared, &*dispatcher, &mut tasks, max_in_flight).await;
            if result.is_ok() && !shared.closed.is_cancelled() {
                drain(&shared, &mut tasks, drain_timeout).await;
            }
            shut_down(&shared, &mut tasks);
            stop.cancel();
            result
        };
        let (read, write) = tokio::join!(reader, writer);
        read.and(write)
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    input: &mut LineReader<R>,
    shared: &Arc<Shared>,
    dispatcher: &dyn Dispatcher,
    tasks: &mut JoinSet<()>,
    max_in_flight: usize,
) -> io::Result<()> {
    loop {
        tokio::select! {
            biased;
            () = shared.closed.cancelled() => return Ok(()),
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                // Handlers catch their own panics; this only reaps finished tasks.
                if let Err(err) = joined
                    && err.is_panic()
                {
                    tracing::error!("a handler task panicked");
                }
            }
            // At the limit, only a handler ending lets the next message in.
            frame = input.next_frame(), if tasks.len() < max_in_flight => match frame {
                Ok(Some(frame)) => on_frame(frame, shared, dispatcher, tasks).await,
                Ok(None) => {
                    tracing::debug!("input ended");
                    return Ok(());
                }
                Err(err) => {
                    tracing::warn!(%err, "reading input failed");
                    return Err(err);
                }
            },
        }
    }
}

async fn on_frame(frame: Frame, shared: &Arc<Shared>, dispatcher: &dyn Dispatcher, tasks: &mut JoinSet<()>) {
    let text = match frame {
        Frame::Line(text) => text,
        Frame::Rejected(error) => {
            shared.answer(&Id::Null, &Err(error)).await;
            return;
        }
    };
    match envelope::parse(&text) {
        Ok(Message::Request { id, method, params }) => {
            on_request(id, method, params, shared, dispatcher, tasks).await;
        }
        Ok(Message::Notification { method, params }) => {
            on_notification(&method, params.as_deref(), shared, dispatcher, tasks).await;
        }
        Ok(Message::Response { id, result }) => shared.resolve(&id, result),
        Err(Rejected::Answer { id, error }) => {
            // The line itself is not logged: a rejected line can still carry a prompt or a key.
            tracing::warn!(%id, %error, bytes = text.len(), "rejecting a message");
            shared.answer(&id, &Err(error)).await;
        }
        Err(Rejected::BadResponse { id, error }) => shared.fail_call(id.as_ref(), error),
    }
}

async fn on_request(
    id: Id,
    method: String,
    params: Option<Box<RawValue>>,
    shared: &Arc<Shared>,
    dispatcher: &dyn Dispatcher,
    tasks: &mut JoinSet<()>,
) {
    if shared.inflight.contains(&id) {
        let error = RpcError::invalid_request("a request with this id is still in flight");
        shared.answer(&id, &Err(error)).await;
        return;
    }
    if let Some(validator) = &shared.validator
        && let Err(error) = validator.incoming(&method, params.as_deref())
    {
        shared.answer(&id, &Err(error)).await;
        return;
    }
    let dispatched = std::panic::catch_unwind(AssertUnwindSafe(|| {
        dispatcher.dispatch_request(&method, params.as_deref())
    }))
    .unwrap_or_else(|_| Err(RpcError::internal(&format!("dispatching {method} panicked"))));
    let (policy, handler) = match dispatched {
        Ok(started) => started,
        Err(error) => {
            shared.answer(&id, &Err(error)).await;
            return;
        }
    };
    // `contains` was checked above and nothing else inserts, so this always registers.
    let Some(ticket) = shared.inflight.start(&id, &method) else {
        return;
    };
    start(policy, Box::pin(run_request(shared.clone(), ticket, handler)), tasks).await;
}

/// Runs one request's handler and answers it, unless a cancel answered it first.
async fn run_request(shared: Arc<Shared>, ticket: Ticket, handler: ResponseFuture) {
    let token = ticket.token.clone();
    let handler = with_cancellation(token.clone(), AssertUnwindSafe(handler).catch_unwind());
    let outcome = tokio::select! {
        biased;
        // The canceller took the entry and answered; dropping `handler` stops the work.
        () = token.cancelled() => return,
        outcome = handler => outcome,
    };
    let answer =
        outcome.unwrap_or_else(|_| Answer::from(Err(RpcError::internal(&"a request handler panicked"))));
    let Some(method) = shared.inflight.finish(&ticket) else {
        return;
    };
    if let (Ok(payload), Some(validator)) = (&answer.result, &shared.validator) {
        validator.outgoing(OutgoingKind::Result, &method, payload);
    }
    shared.answer_then(&ticket.id, answer).await;
}

async fn on_notification(
    method: &str,
    params: Option<&RawValue>,
    shared: &Arc<Shared>,
    dispatcher: &dyn Dispatcher,
    tasks: &mut JoinSet<()>,
) {
    if method == CANCEL_REQUEST {
        cancel_request(params, shared).await;
        return;
    }
    if let Some(validator) = &shared.validator
        && let Err(error) = validator.incoming(method, params)
    {
        tracing::warn!(method, %error, "dropping an invalid notification");
        return;
    }
    let dispatched =
        std::panic::catch_unwind(AssertUnwindSafe(|| dispatcher.dispatch_notification(method, params)));
    match dispatched {
        Ok(Some((policy, handler))) => {
            start(policy, Box::pin(run_notification(method.to_owned(), handler)), tasks).await;
        }
        Ok(None) => tracing::debug!(method, "notification ignored"),
        Err(_) => tracing::error!(method, "dispatching a notification panicked"),
    }
}

async fn run_notification(method: String, handler: NotificationFuture) {
    if AssertUnwindSafe(handler).catch_unwind().await.is_err() {
        tracing::error!(%method, "a notification handler panicked");
    }
}

#[derive(Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: Id,
}

/// Handles `$/cancel_request`: answers the named request -32800 if it is still running.
async fn cancel_request(params: Option<&RawValue>, shared: &Shared) {
    let params = params.map(|raw| serde_json::from_str::<CancelParams>(raw.get()));
    let id = match params {
        Some(Ok(params)) => params.request_id,
        _ => {
            tracing::debug!("ignoring $/cancel_request without a valid requestId");
            return;
        }
    };
    if shared.inflight.cancel(&id) {
        tracing::debug!(%id, "request cancelled by the peer");
        shared.answer(&id, &Err(RpcError::request_cancelled())).await;
    } else {
        tracing::debug!(%id, "ignoring $/cancel_request for a request not in flight");
    }
}

/// Starts a handler future per its policy. Never waits for it to finish.
async fn start(policy: Policy, mut task: BoxFuture<()>, tasks: &mut JoinSet<()>) {
    if policy == Policy::Inline {
        let first = std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx))).await;
        if first.is_ready() {
            return;
        }
    }
    tasks.spawn(task);
}

/// Fails our pending calls, answers in-flight requests -32800 and stops every handler.
/// The input ended: calls to the peer can no longer be answered, but requests already
/// running get a short grace to finish, so `printf '...' | heron acp` sees its answers.
async fn drain(shared: &Shared, tasks: &mut JoinSet<()>, grace: Duration) {
    shared.close_calls();
    let finished = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::debug!("requests still running after the input ended are cancelled");
    }
}

fn shut_down(shared: &Shared, tasks: &mut JoinSet<()>) {
    shared.closed.cancel();
    shared.close_calls();
    for id in shared.inflight.cancel_all() {
        let line = envelope::encode_response(&id, &Err(RpcError::request_cancelled()));
        // Best effort: waiting here could hold shutdown on a peer that stopped reading.
        if shared.out.try_send(line).is_err() {
            tracing::debug!(%id, "could not answer a request cancelled by shutdown");
        }
    }
    tasks.abort_all();
}
