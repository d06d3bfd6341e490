//! The connection handle ([`Peer`]) and the state it shares with the reader: the pending
//! replies to our own calls, the in-flight table, and the queue into the writer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::inflight::InFlight;
use super::outbox::Outbox;
use super::{OutgoingKind, Validate};
use crate::answer::Answer;
use crate::envelope::{self, Id};
use crate::error::{INTERNAL_ERROR, RpcError};

/// The reply a pending call is waiting for.
pub(super) type Reply = Result<Box<RawValue>, RpcError>;

/// The error every call fails with once the connection is closed.
pub fn connection_closed() -> RpcError {
    RpcError::new(INTERNAL_ERROR, "Connection closed")
}

/// State shared by the reader, the handler tasks and every [`Peer`].
pub(super) struct Shared {
    /// Encoded lines for the writer.
    pub(super) out: Outbox,
    /// Fired once the connection stops: input ended, output failed or `Peer::close`.
    pub(super) closed: CancellationToken,
    /// Incoming requests still running.
    pub(super) inflight: InFlight,
    /// Checks outgoing payloads, when set.
    pub(super) validator: Option<Arc<dyn Validate>>,
    call_timeout: Option<Duration>,
    pending: Mutex<PendingReplies>,
    next_id: AtomicI64,
}

/// Our calls waiting for a reply. `closed` lives under the same lock as the map, so a call
/// cannot register after shutdown has failed the others.
#[derive(Default)]
struct PendingReplies {
    closed: bool,
    calls: HashMap<i64, PendingCall>,
    /// Calls we withdrew (`$/cancel_request`) whose answer may still come: the spec has the
    /// peer answer them anyway (a permission request answers `cancelled`), which is no
    /// fault of the peer's. The most recent [`WITHDRAWN_KEPT`].
    withdrawn: std::collections::VecDeque<i64>,
}

/// How many withdrawn call ids are remembered.
const WITHDRAWN_KEPT: usize = 256;

struct PendingCall {
    method: String,
    reply: oneshot::Sender<Reply>,
}

impl Shared {
    pub(super) fn new(
        out: Outbox,
        call_timeout: Option<Duration>,
        validator: Option<Arc<dyn Validate>>,
    ) -> Self {
        Self {
            out,
            closed: CancellationToken::new(),
            inflight: InFlight::default(),
            validator,
            call_timeout,
            pending: Mutex::default(),
            next_id: AtomicI64::new(0),
        }
    }

    fn pending(&self) -> MutexGuard<'_, PendingReplies> {
        // No code panics while holding the lock, so a poisoned map is still consistent.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a line for the writer; `false` once the writer is gone.
    pub(super) async fn send(&self, line: String) -> bool {
        self.out.send(line).await
    }

    /// Queues the response to an incoming request, then what follows it: its notifications
    /// in the same queue entry, so nothing else comes between them, then its actions.
    pub(super) async fn answer_then(&self, id: &Id, answer: Answer) {
        let (notes, after) = answer.then.into_parts();
        let mut line = envelope::encode_response(id, &answer.result);
        for (method, params) in notes {
            if let (Some(params), Some(validator)) = (&params, &self.validator) {
                validator.outgoing(OutgoingKind::Notification, &method, params);
            }
            line.push('\n');
            line.push_str(&envelope::encode_notification(&method, params.as_deref()));
        }
        if !self.send(line).await {
            tracing::debug!(%id, "output closed; response dropped");
        }
        // Even when the output is gone: an action releases what waited on this answer.
        for action in after {
            action();
        }
    }

    /// Queues the response to an incoming request.
    pub(super) async fn answer(&self, id: &Id, result: &Reply) {
        if !self.send(envelope::encode_response(id, result)).await {
            tracing::debug!(%id, "output closed; response dropped");
        }
    }

    /// Routes a response from the peer to the call waiting on it.
    pub(super) fn resolve(&self, id: &Id, reply: Reply) {
        match self.take_call(id) {
            Some(call) => {
                // The caller may have gone in the meantime; its guard saw no entry.
                let _ = call.reply.send(reply);
            }
            None if self.was_withdrawn(id) => {
                tracing::debug!(%id, "the answer to a withdrawn call came after all; dropped");
            }
            None => match reply {
                Err(error) if *id == Id::Null => {
                    tracing::warn!(%error, "peer reported an error about a message we sent");
                }
                _ => tracing::warn!(%id, "ignoring a response to an id we are not waiting on"),
            },
        }
    }

    /// Fails the call a malformed response names, if we are waiting on it.
    pub(super) fn fail_call(&self, id: Option<&Id>, error: RpcError) {
        match id.and_then(|id| self.take_call(id)) {
            Some(call) => {
                tracing::warn!(method = %call.method, %error, "peer sent a malformed response");
                let _ = call.reply.send(Err(error));
            }
            None => tracing::warn!(%error, "dropping a malformed response"),
        }
    }

    /// Whether `id` is a call we withdrew, forgetting it (one answer each).
    fn was_withdrawn(&self, id: &Id) -> bool {
        let Id::Int(id) = id else { return false };
        let withdrawn = &mut self.pending().withdrawn;
        match withdrawn.iter().position(|w| w == id) {
            Some(at) => {
                withdrawn.remove(at);
                true
            }
            None => false,
        }
    }

    /// Remembers that we withdrew call `id`.
    fn withdrew(&self, id: i64) {
        let withdrawn = &mut self.pending().withdrawn;
        if withdrawn.len() == WITHDRAWN_KEPT {
            withdrawn.pop_front();
        }
        withdrawn.push_back(id);
    }

    fn take_call(&self, id: &Id) -> Option<PendingCall> {
        let Id::Int(id) = id else { return None };
        self.pending().calls.remove(id)
    }

    /// Fails every pending call and refuses new ones.
    pub(super) fn close_calls(&self) {
        let calls = {
            let mut pending = self.pending();
            pending.closed = true;
            std::mem::take(&mut pending.calls)
        };
        for (_, call) in calls {
            let _ = call.reply.send(Err(connection_closed()));
        }
    }

    /// Registers a call and returns its id, or `None` when the connection is closed.
    fn register(&self, method: &str, reply: oneshot::Sender<Reply>) -> Option<i64> {
        let mut pending = self.pending();
        if pending.closed {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        pending.calls.insert(id, PendingCall { method: method.to_owned(), reply });
        Some(id)
    }

    /// Queues `$/cancel_request` for one of our calls without waiting (usable in `Drop`).
    fn cancel_now(&self, id: i64) {
        self.withdrew(id);
        match self.out.try_send(cancel_request_line(id)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(line)) => {
                // The queue is full; send from a task rather than lose the cancel.
                let out = self.out.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move { out.send_unbudgeted(line).await });
                    }
                    Err(_) => tracing::debug!(id, "no runtime to send $/cancel_request"),
                }
            }
        }
    }
}

fn cancel_request_line(id: i64) -> String {
    let params = serde_json::value::to_raw_value(&json!({ "requestId": id })).ok();
    envelope::encode_notification("$/cancel_request", params.as_deref())
}

/// The handle for talking to the peer: sends calls and notifications, and can close the
/// connection. Cheap to clone; usable before `serve` starts (messages wait in the queue).
#[derive(Clone)]
pub struct Peer {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("closed", &self.is_closed()).finish_non_exhaustive()
    }
}

impl Peer {
    /// Calls `method` with raw params under the connection's default timeout and returns
    /// the raw result (`null` for an empty one).
    pub fn call_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> impl Future<Output = Result<Box<RawValue>, RpcError>> + Send + 'static {
        call_raw(self.shared.clone(), method.to_owned(), params, self.shared.call_timeout)
    }

    /// Calls `method` with a chosen timeout (`None`: wait until the reply or close).
    pub fn call_raw_with_timeout(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Box<RawValue>, RpcError>> + Send + 'static {
        call_raw(self.shared.clone(), method.to_owned(), params, timeout)
    }

    /// The first half of a call: resolves once the request's line is in the writer's queue,
    /// to the wait for its reply (`timeout` counts from then). Whoever must keep the call in
    /// its place among other lines awaits this in order and the reply anywhere.
    pub fn queue_call_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Pending> + Send + 'static {
        pending(self.shared.clone(), method.to_owned(), params, timeout)
    }

    /// Sends a notification with raw params.
    pub fn notify_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        notify_raw(self.shared.clone(), method.to_owned(), params)
    }

    /// Sends a notification, serializing `params` straight into its line; with a validator
    /// on the connection they are serialized apart first, so the validator sees them.
    pub fn notify_serialized<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static + use<P> {
        let shared = self.shared.clone();
        let encoded = match &shared.validator {
            Some(_) => serde_json::value::to_raw_value(params)
                .map(|raw| Encoded::Params(method.to_owned(), (raw.get() != "null").then_some(raw))),
            None => envelope::encode_notification_of(method, params).map(Encoded::Line),
        }
        .map_err(|err| RpcError::internal(&err));
        async move {
            match encoded? {
                Encoded::Params(method, params) => notify_raw(shared, method, params).await,
                Encoded::Line(line) => {
                    if !shared.closed.is_cancelled() && shared.send(line).await {
                        Ok(())
                    } else {
                        Err(connection_closed())
                    }
                }
            }
        }
    }

    /// Sends notifications of one method as one entry of the writer's queue: their lines
    /// are encoded together, so a burst (a history replay) costs one queue slot, one
    /// budget wait and one writer wake-up per batch instead of per line. A validator still
    /// sees each one's params.
    pub fn notify_batch_serialized<P: Serialize>(
        &self,
        method: &str,
        params: &[P],
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static + use<P> {
        let shared = self.shared.clone();
        let encoded = encode_batch(&shared, method, params).map_err(|err| RpcError::internal(&err));
        async move {
            let lines = encoded?;
            if lines.is_empty() {
                return Ok(());
            }
            if !shared.closed.is_cancelled() && shared.send(lines).await {
                Ok(())
            } else {
                Err(connection_closed())
            }
        }
    }

    /// The timeout calls get unless they choose one.
    pub fn call_timeout(&self) -> Option<Duration> {
        self.shared.call_timeout
    }

    /// True once the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// True once no call to the peer can be answered any more: the input ended (the
    /// connection may still be finishing requests already running) or it closed.
    pub fn calls_closed(&self) -> bool {
        self.is_closed() || self.shared.pending().closed
    }

    /// Resolves when the connection closes.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        self.shared.closed.clone().cancelled_owned()
    }

    /// Closes the connection as if the input had ended: pending calls fail, in-flight
    /// requests are answered -32800, queued output is flushed and `serve` returns.
    pub fn close(&self) {
        self.shared.closed.cancel();
    }
}

/// A notification ready to send: a whole line, or params the validator must see first.
enum Encoded {
    Line(String),
    Params(String, Option<Box<RawValue>>),
}

/// Removes a call that was given up on and tells the peer, unless the reply already came.
struct CallGuard {
    shared: Arc<Shared>,
    id: i64,
    /// The request reached the queue, so the peer may be working on it.
    sent: bool,
    settled: bool,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let taken = self.shared.take_call(&Id::Int(self.id)).is_some();
        if taken && self.sent {
            tracing::debug!(id = self.id, "call dropped before its reply; cancelling it");
            self.shared.cancel_now(self.id);
        }
    }
}

async fn call_raw(
    shared: Arc<Shared>,
    method: String,
    params: Option<Box<RawValue>>,
    timeout: Option<Duration>,
) -> Result<Box<RawValue>, RpcError> {
    let queued = queue_call(shared, method, params).await?;
    queued.reply(timeout.map(|limit| (tokio::time::Instant::now() + limit, limit))).await
}

/// A call whose reply is still to come (the second half of [`Peer::queue_call_raw`]):
/// await it for the reply. Dropping it before the reply withdraws the call.
pub struct Pending(crate::dispatch::BoxFuture<Result<Box<RawValue>, RpcError>>);

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pending").finish_non_exhaustive()
    }
}

// Not a `Future` itself: a wait handed on, to be awaited elsewhere, not where it was made.
impl std::future::IntoFuture for Pending {
    type Output = Result<Box<RawValue>, RpcError>;
    type IntoFuture = crate::dispatch::BoxFuture<Self::Output>;

    fn into_future(self) -> Self::IntoFuture {
        self.0
    }
}

/// Queues a call, then gives back the wait for its reply (a failure to queue is its reply).
async fn pending(
    shared: Arc<Shared>,
    method: String,
    params: Option<Box<RawValue>>,
    timeout: Option<Duration>,
) -> Pending {
    match queue_call(shared, method, params).await {
        Ok(queued) => {
            let deadline = timeout.map(|limit| (tokio::time::Instant::now() + limit, limit));
            Pending(Box::pin(queued.reply(deadline)))
        }
        Err(err) => Pending(Box::pin(std::future::ready(Err(err)))),
    }
}

/// A request in the writer's queue, waiting for its reply.
struct Queued {
    method: String,
    guard: CallGuard,
    reply_rx: oneshot::Receiver<Reply>,
}

/// Registers a call and queues its line.
async fn queue_call(
    shared: Arc<Shared>,
    method: String,
    params: Option<Box<RawValue>>,
) -> Result<Queued, RpcError> {
    let (reply_tx, reply_rx) = oneshot::channel();
    let id = shared.register(&method, reply_tx).ok_or_else(connection_closed)?;
    let mut guard = CallGuard { shared: shared.clone(), id, sent: false, settled: false };
    if let (Some(validator), Some(params)) = (&shared.validator, &params) {
        validator.outgoing(OutgoingKind::Request, &method, params);
    }
    let line = envelope::encode_request(&Id::Int(id), &method, params.as_deref());
    if !shared.send(line).await {
        return Err(connection_closed());
    }
    guard.sent = true;
    Ok(Queued { method, guard, reply_rx })
}

impl Queued {
    /// Waits for the reply, up to `deadline` (the time limit set from the moment the line
    /// was queued; past it the call is withdrawn).
    async fn reply(
        self,
        deadline: Option<(tokio::time::Instant, Duration)>,
    ) -> Result<Box<RawValue>, RpcError> {
        let Queued { method, mut guard, mut reply_rx } = self;
        let (shared, id) = (guard.shared.clone(), guard.id);
        let reply = match deadline {
            None => (&mut reply_rx).await,
            Some((at, limit)) => match tokio::time::timeout_at(at, &mut reply_rx).await {
                Ok(reply) => reply,
                Err(_) => {
                    guard.settled = true;
                    if shared.take_call(&Id::Int(id)).is_some() {
                        tracing::warn!(%method, id, ?limit, "call timed out; cancelling it");
                        shared.withdrew(id);
                        let _ = shared.send(cancel_request_line(id)).await;
                        return Err(RpcError::request_cancelled().with_data(json!({
                            "reason": "timeout",
                            "method": method,
                            "timeoutMs": u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                        })));
                    }
                    // The reply won the race and is already in the channel.
                    reply_rx.await
                }
            },
        };
        guard.settled = true;
        // A sender dropped without a reply means the connection went away.
        reply.unwrap_or_else(|_| Err(connection_closed()))
    }
}

/// The lines of a batch of notifications, joined by LF (the writer ends the last).
fn encode_batch<P: Serialize>(shared: &Shared, method: &str, params: &[P]) -> serde_json::Result<String> {
    let mut out = Vec::new();
    for (n, params) in params.iter().enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        match &shared.validator {
            Some(validator) => {
                let raw = serde_json::value::to_raw_value(params)?;
                let raw = (raw.get() != "null").then_some(raw);
                if let Some(raw) = &raw {
                    validator.outgoing(OutgoingKind::Notification, method, raw);
                }
                out.extend_from_slice(envelope::encode_notification(method, raw.as_deref()).as_bytes());
            }
            None => envelope::push_notification_of(&mut out, method, params)?,
        }
    }
    // serde_json writes UTF-8 only; were it ever not, the error says so instead of a panic.
    String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

async fn notify_raw(
    shared: Arc<Shared>,
    method: String,
    params: Option<Box<RawValue>>,
) -> Result<(), RpcError> {
    if shared.closed.is_cancelled() {
        return Err(connection_closed());
    }
    if let (Some(validator), Some(params)) = (&shared.validator, &params) {
        validator.outgoing(OutgoingKind::Notification, &method, params);
    }
    if shared.send(envelope::encode_notification(&method, params.as_deref())).await {
        Ok(())
    } else {
        Err(connection_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_to_a_withdrawn_call_is_expected_once_and_the_memory_is_bounded() {
        let (out, _queue) = crate::outbox::Outbox::new(16, 1 << 20);
        let shared = Shared::new(out, None, None);
        let (reply, _) = oneshot::channel();
        let id = shared.register("session/request_permission", reply).expect("registered");
        assert!(shared.take_call(&Id::Int(id)).is_some());
        shared.cancel_now(id);
        assert!(shared.was_withdrawn(&Id::Int(id)), "its late answer is expected");
        assert!(!shared.was_withdrawn(&Id::Int(id)), "but only one");
        assert!(!shared.was_withdrawn(&Id::Int(id + 1)), "an id never withdrawn is not");
        for n in 0..(WITHDRAWN_KEPT as i64 + 10) {
            shared.withdrew(1000 + n);
        }
        assert_eq!(shared.pending().withdrawn.len(), WITHDRAWN_KEPT);
        assert!(!shared.was_withdrawn(&Id::Int(1000)), "the oldest was forgotten");
    }
}
