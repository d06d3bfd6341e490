//! Serves a generated handler trait on a connection: looks the method up in its version's
//! table, checks it is one this side handles, and hands it to the generated dispatch glue
//! with the execution policy the caller chose per method. Written once for every protocol
//! version ([`ProtocolMethod`]); the v1 names below are the crate root's, v2's are in
//! [`crate::v2`].

use serde_json::value::RawValue;

use heron_rpc::{Dispatcher, NotificationFuture, Policy, ResponseFuture, RpcError};

use crate::table::Kind;
use crate::types::Method;
use crate::version::ProtocolMethod;

/// The per-method execution policy of ACP v1: a hand-written exhaustive `match`, so a method
/// added to the schema does not compile until someone decides how it runs.
pub type PolicyTable = fn(Method) -> Policy;

/// One side's generated dispatch glue for the methods `M` of one protocol version
/// (implemented for [`AgentSide`] and [`ClientSide`] by each version).
pub trait Side<M>: Send + Sync + 'static {
    /// Starts the handler of a request this side serves.
    fn request(&self, method: M, params: Option<&RawValue>) -> Result<ResponseFuture, RpcError>;
    /// Starts the handler of a notification this side serves.
    fn notification(&self, method: M, params: Option<&RawValue>) -> Result<NotificationFuture, RpcError>;
}

/// An `Agent` implementation (of any version), as a side that serves the editor's messages.
#[derive(Debug)]
pub struct AgentSide<A>(pub A);

/// A `Client` implementation (of any version), as a side that serves an agent's messages.
#[derive(Debug)]
pub struct ClientSide<C>(pub C);

/// Serves one side on a connection with a per-method policy; `M` is the version's `Method`.
#[derive(Debug)]
pub struct Service<S, M = Method> {
    side: S,
    policy: fn(M) -> Policy,
}

/// Serves an ACP v1 [`Agent`](crate::Agent) (what `heron acp` runs).
pub type AgentService<A> = Service<AgentSide<A>>;

/// Serves an ACP v1 [`Client`](crate::Client) (Heron driving another agent).
pub type ClientService<C> = Service<ClientSide<C>>;

impl<A, M: ProtocolMethod> Service<AgentSide<A>, M>
where
    AgentSide<A>: Side<M>,
{
    /// Serves `agent`, running each method as `policy` says.
    pub fn new(agent: A, policy: fn(M) -> Policy) -> Self {
        Self { side: AgentSide(agent), policy }
    }
}

impl<C, M: ProtocolMethod> Service<ClientSide<C>, M>
where
    ClientSide<C>: Side<M>,
{
    /// Serves `client`, running each method as `policy` says.
    pub fn new(client: C, policy: fn(M) -> Policy) -> Self {
        Self { side: ClientSide(client), policy }
    }
}

impl<S: Side<M>, M: ProtocolMethod> Dispatcher for Service<S, M> {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let found = match M::from_wire(method) {
            Some(found) if found.info().kind == Kind::Request => found,
            // A notification method sent with an id, or an unknown or `_`-prefixed
            // extension method: nothing here answers it.
            _ => return Err(RpcError::method_not_found(method)),
        };
        let running = self.side.request(found, params)?;
        Ok(((self.policy)(found), running))
    }

    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)> {
        let found = M::from_wire(method).filter(|m| m.info().kind == Kind::Notification)?;
        match self.side.notification(found, params) {
            Ok(running) => Some(((self.policy)(found), running)),
            Err(error) => {
                tracing::warn!(%method, %error, data = ?error.data, "notification dropped");
                None
            }
        }
    }
}
