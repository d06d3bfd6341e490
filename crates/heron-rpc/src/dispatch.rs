//! What the connection needs from the side that serves a peer: the [`Dispatcher`] that turns
//! an incoming method and its raw params into a running handler, and the [`Policy`] that
//! says how that handler runs relative to the reader.

use std::future::Future;
use std::pin::Pin;

use serde_json::value::RawValue;

use crate::answer::Answer;
use crate::error::RpcError;

/// A boxed, sendable, `'static` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The running handler of an incoming request: resolves to the encoded result, then what
/// follows it.
pub type ResponseFuture = BoxFuture<Answer>;

/// The running handler of an incoming notification.
pub type NotificationFuture = BoxFuture<()>;

/// How an incoming method runs relative to the reader.
///
/// Every handler's synchronous part runs on the reader task in arrival order; the
/// policy decides what happens to the future it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Polled once on the reader task before the next message is read, then spawned
    /// if it is not finished. For cancellations, whose effect must be immediate.
    Inline,
    /// Spawned as its own task; the reader moves on at once.
    Concurrent,
}

/// The side that serves incoming messages on a connection.
///
/// `dispatch_*` run on the reader task, in arrival order: they decode the params, run the
/// handler's synchronous part and return its future. They must never block.
pub trait Dispatcher: Send + Sync + 'static {
    /// Starts the handler of a request. An `Err` is answered at once.
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError>;

    /// Starts the handler of a notification. Unknown methods and bad params are logged and
    /// dropped, because notifications are never answered.
    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)>;
}
