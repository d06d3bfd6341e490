//! Heron's JSON-RPC 2.0 layer: NDJSON framing, the envelope, correlation, cancellation and
//! the single writer, over any `AsyncRead`/`AsyncWrite`. It moves raw JSON and knows no
//! protocol built on it: params and results stay `RawValue`, methods are strings, and the
//! typed layer (`heron-protocol`) sits on top through [`Dispatcher`] and [`Peer`].
//!
//! # Message flow
//!
//! One reader task reads frames in order and never awaits a handler. Each request or
//! notification is dispatched synchronously, in arrival order, through
//! [`Dispatcher`]; the future it returns is polled
//! once on the reader and spawned if still pending (`Policy::Inline`) or spawned at once
//! (`Policy::Concurrent`). Responses to our own calls are routed to their waiting callers
//! by id. Only the writer task ([`writer`]) writes to the output.
//!
//! A request's handler resolves to an [`Answer`]: its result, then what must follow it
//! ([`Then`]). The answer and the notifications that follow it are queued as one entry, so
//! nothing comes between them; then the answer's actions run. The reader waits for none of
//! it.
//!
//! # Cancellation rules
//!
//! Incoming requests (the peer asked us):
//! 1. Every request gets exactly one response. Whoever removes the request from the
//!    in-flight table answers it: the handler with its result, or a cancel with -32800.
//!    A result and a cancel that race therefore produce one answer, never two.
//! 2. `$/cancel_request {requestId}` is handled by the connection, not the dispatcher. If
//!    the id is in flight, its handler future is dropped at its next await point and the
//!    request is answered -32800 at once. Unknown or finished ids are ignored, so a cancel
//!    that arrives after the result changes nothing.
//! 3. Dropping the future is enough; a handler that wants to stop cleanly (or hand the
//!    signal to tasks it spawns) can watch [`current_cancellation`].
//! 4. A second request with the id of one still in flight is answered -32600 and not run.
//! 5. When the input ends or the output fails, every in-flight request is cancelled and
//!    answered -32800 (best effort: the output may be gone), and notification handlers
//!    still running are aborted.
//!
//! Outgoing requests (we asked the peer):
//! 1. Ids are integers counting up from 0, unique for the connection's life.
//! 2. Every call has a timeout (the connection default, or one chosen per call; `None`
//!    waits forever). A call that times out fails with -32800 and the peer is sent
//!    `$/cancel_request` for it.
//! 3. A caller that drops its call before the reply also sends `$/cancel_request`.
//! 4. A reply for an id we are not waiting on is ignored: quietly for a call we withdrew
//!    (timed out or dropped; the peer is told to answer it anyway), with a warning for an
//!    id we never sent. A reply that races a timeout or a drop is used if it won the race.
//! 5. When the connection closes, every pending call fails at once with -32603
//!    "Connection closed", and later calls fail the same way without being sent.
//!
//! Notifications are never answered, not even when dispatch or validation fails.

#![deny(missing_docs)]
// A `pub` item is the crate's API or it is narrowed to where it is used.
#![warn(unreachable_pub)]

mod answer;
mod connection;
mod dispatch;
pub mod envelope;
pub mod error;
mod framing;
mod inflight;
mod outbox;
mod peer;
mod writer;

use serde_json::value::RawValue;

pub use answer::{Answer, Then};
pub use connection::{Connection, ConnectionOptions};
pub use dispatch::{BoxFuture, Dispatcher, NotificationFuture, Policy, ResponseFuture};
pub use envelope::Id;
pub use error::RpcError;
pub use framing::{DEFAULT_MAX_LINE, Frame, LineReader};
pub use inflight::current_cancellation;
pub use peer::{Peer, Pending, connection_closed};

/// What kind of outgoing payload a [`Validate::outgoing`] check sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutgoingKind {
    /// The params of a request we send.
    Request,
    /// The params of a notification we send.
    Notification,
    /// The result we answer a request with; `method` is the request's method.
    Result,
}

/// An optional check of payloads against the protocol schema.
///
/// Incoming failures are answered (requests) or logged (notifications); outgoing ones
/// are only logged, because a message we built wrong is a bug to see, not to block on.
pub trait Validate: Send + Sync + 'static {
    /// Checks the params of an incoming request or notification before dispatch.
    fn incoming(&self, method: &str, params: Option<&RawValue>) -> Result<(), RpcError>;

    /// Checks an outgoing payload. Must not block: it runs on the sending path.
    fn outgoing(&self, kind: OutgoingKind, method: &str, payload: &RawValue);
}
