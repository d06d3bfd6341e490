//! The typed calling side of a connection: [`Outgoing`], what the generated `Agent` and
//! `Client` peer handles of every protocol version send through, implemented for the raw
//! [`heron_rpc::Peer`]; and ACP v1's handles (v2's are [`crate::v2::AgentPeer`] and
//! [`crate::v2::ClientPeer`], so one version's peer cannot be passed where the other's is
//! expected).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::decode::decode_result;
use heron_rpc::RpcError;

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

    /// Sends a request that may wait longer (or shorter) than the connection's default
    /// timeout; `None` waits until the reply or the connection closes.
    fn call_with_timeout<P, R>(
        &self,
        method: &'static str,
        params: P,
        timeout: Option<std::time::Duration>,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static;

    /// The timeout a plain [`Outgoing::call`] gets (`None`: none).
    fn call_timeout(&self) -> Option<Duration> {
        None
    }

    /// The first half of a call: resolves once the request's line is queued for the peer,
    /// to the wait for its decoded result (`timeout` counting from then), so whoever keeps
    /// a request in its place among other messages awaits only this in that place. A
    /// sender without a queue of its own sends on the first poll of the wait.
    fn queue_call<P, R>(
        &self,
        method: &'static str,
        params: P,
        timeout: Option<Duration>,
    ) -> impl Future<Output = PendingReply<R>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        std::future::ready(PendingReply::new(self.call_with_timeout(method, params, timeout)))
    }

    /// Sends a notification. Fails only when the connection is closed.
    fn notify<P>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static;

    /// Sends notifications of one method, in order, as one burst: a connection may write
    /// them together (one queue entry for all). Fails only when the connection is closed.
    fn notify_batch<P>(
        &self,
        method: &'static str,
        params: Vec<P>,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
    {
        let this = self.clone();
        async move {
            for params in params {
                this.notify(method, params).await?;
            }
            Ok(())
        }
    }
}

/// The second half of a queued call: await it for the decoded result. Dropping it before
/// the reply withdraws the call.
pub struct PendingReply<R>(std::pin::Pin<Box<dyn Future<Output = Result<R, RpcError>> + Send + 'static>>);

impl<R> PendingReply<R> {
    /// The wait `reply`.
    pub fn new(reply: impl Future<Output = Result<R, RpcError>> + Send + 'static) -> Self {
        Self(Box::pin(reply))
    }
}

impl<R> std::fmt::Debug for PendingReply<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingReply")
    }
}

// Not a `Future` itself: a wait handed on, to be awaited elsewhere, not where it was made.
impl<R> std::future::IntoFuture for PendingReply<R> {
    type Output = Result<R, RpcError>;
    type IntoFuture = std::pin::Pin<Box<dyn Future<Output = Result<R, RpcError>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        self.0
    }
}

/// Serializes params; `null` (as from `()`) means "no params" and is omitted.
fn encode_params<P: Serialize>(params: &P) -> Result<Option<Box<RawValue>>, RpcError> {
    let raw = serde_json::value::to_raw_value(params).map_err(|err| RpcError::internal(&err))?;
    Ok((raw.get() != "null").then_some(raw))
}

impl Outgoing for heron_rpc::Peer {
    fn call<P, R>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        Outgoing::call_with_timeout(self, method, params, self.call_timeout())
    }

    fn call_with_timeout<P, R>(
        &self,
        method: &'static str,
        params: P,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<R, RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        let params = encode_params(&params);
        let peer = self.clone();
        async move {
            let raw = peer.call_raw_with_timeout(method, params?, timeout).await?;
            decode_result(&raw)
        }
    }

    fn call_timeout(&self) -> Option<Duration> {
        heron_rpc::Peer::call_timeout(self)
    }

    fn queue_call<P, R>(
        &self,
        method: &'static str,
        params: P,
        timeout: Option<Duration>,
    ) -> impl Future<Output = PendingReply<R>> + Send + 'static
    where
        P: Serialize + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        let peer = self.clone();
        async move {
            let params = match encode_params(&params) {
                Ok(params) => params,
                Err(err) => return PendingReply::new(std::future::ready(Err(err))),
            };
            let pending = peer.queue_call_raw(method, params, timeout).await;
            PendingReply::new(async move { decode_result(&pending.await?) })
        }
    }

    fn notify<P>(
        &self,
        method: &'static str,
        params: P,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
    {
        self.notify_serialized(method, &params)
    }

    fn notify_batch<P>(
        &self,
        method: &'static str,
        params: Vec<P>,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static
    where
        P: Serialize + Send + 'static,
    {
        self.notify_batch_serialized(method, &params)
    }
}

/// A connection's remote ACP v1 agent: implements the generated v1 `Agent` trait by sending.
#[derive(Debug, Clone)]
pub struct AgentPeer<O>(pub O);

/// A connection's remote ACP v1 editor: implements the generated v1 `Client` trait by sending.
#[derive(Debug, Clone)]
pub struct ClientPeer<O>(pub O);
