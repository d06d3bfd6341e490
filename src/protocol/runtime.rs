//! The small hand-written runtime that the generated dispatch glue and peer handles call.
//!
//! The generated code stays data and glue: it decodes params with [`decode_params`],
//! encodes results with [`encode_result`], and talks to the wire only through the
//! [`Outgoing`] trait, which the `rpc` connection implements.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// A boxed, sendable, `'static` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The running handler of an incoming request: resolves to the encoded result.
pub type ResponseFuture = BoxFuture<Result<Box<RawValue>, RpcError>>;

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

/// The calling side of a connection: what the generated peer handles send through.
pub trait Outgoing: Clone + Send + Sync + 'static {
    /// Sends a request and resolves to its decoded result (or the peer's error, a timeout
    /// as -32800, or a closed connection as -32603).
    fn call<P, R>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static;

    /// Sends a notification. Fails only when the connection is closed.
    fn notify<P>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static;
}

/// Decodes the params of `method`. Absent or `null` params decode as `{}`, as the
/// reference SDKs do, so methods whose fields are all optional work without params.
///
/// On failure the error's `data` names the JSON path of the offending field.
pub fn decode_params<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RpcError> {
    let text = match params.map(RawValue::get) {
        None | Some("null") => "{}",
        Some(text) => text,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." { String::new() } else { path };
        RpcError::invalid_params(path, err.into_inner().to_string())
    })
}

/// Decodes a result from a peer. `null` decodes as `{}`, since some clients answer empty
/// results that way.
pub fn decode_result<T: DeserializeOwned>(result: &RawValue) -> Result<T, RpcError> {
    let text = match result.get() {
        "null" => "{}",
        text => text,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        tracing::warn!(%path, error = %err.inner(), "peer sent a result that does not decode");
        RpcError::new(super::error::INTERNAL_ERROR, "Peer sent an invalid result")
            .with_data(serde_json::json!({ "path": path, "reason": err.into_inner().to_string() }))
    })
}

/// Encodes a handler's result for the wire.
pub fn encode_result<T: Serialize>(result: &T) -> Result<Box<RawValue>, RpcError> {
    serde_json::value::to_raw_value(result).map_err(|err| RpcError::internal(&err))
}

pub use super::error::RpcError;

/// Encodes a decoded message as a JSON value (for canonical round trips).
pub fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value, RpcError> {
    serde_json::to_value(value).map_err(|err| RpcError::internal(&err))
}

/// The side that receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it; the editor sends it.
    Agent,
    /// The editor handles it; the agent sends it.
    Client,
    /// Either side may send it (`$/cancel_request`).
    Protocol,
}

/// Request (answered exactly once) or notification (never answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Answered with a result or an error.
    Request,
    /// Never answered.
    Notification,
}

/// Where a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stability {
    /// The stable ACP v1 schema.
    Stable,
    /// The unstable ACP schema, or a legacy method kept for older clients.
    Unstable,
    /// Heron's own `_heron/` extension.
    Vendor,
}

/// One row of the generated method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// The wire name.
    pub wire: &'static str,
    /// Legacy names accepted on input.
    pub aliases: &'static [&'static str],
    /// The side that handles it.
    pub side: Side,
    /// Request or notification.
    pub kind: Kind,
    /// The params definition name.
    pub params: &'static str,
    /// The result definition name, for requests.
    pub result: Option<&'static str>,
    /// Where it is specified.
    pub stability: Stability,
    /// Whether every implementation must serve it.
    pub baseline: bool,
    /// Whether Heron serves (agent side) or calls (client side) it.
    pub implemented: bool,
}

/// A connection's remote agent: implements the generated `Agent` trait by sending.
#[derive(Debug, Clone)]
pub struct AgentPeer<O>(pub O);

/// A connection's remote editor: implements the generated `Client` trait by sending.
#[derive(Debug, Clone)]
pub struct ClientPeer<O>(pub O);
