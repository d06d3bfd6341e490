//! Serves a generated handler trait on a connection: looks the method up in the table,
//! checks it is one this side handles, and hands it to the generated dispatch glue with
//! the execution policy the caller chose per method.

use serde_json::value::RawValue;

use heron_rpc::{Dispatcher, NotificationFuture, Policy, ResponseFuture, RpcError};

use crate::table::Kind;
use crate::types::{
    Agent, Client, Method, dispatch_agent_notification, dispatch_agent_request, dispatch_client_notification,
    dispatch_client_request,
};

/// The per-method execution policy: a hand-written exhaustive `match`, so a method added
/// to the schema does not compile until someone decides how it runs.
pub type PolicyTable = fn(Method) -> Policy;

/// One side's generated dispatch glue.
pub trait Side: Send + Sync + 'static {
    /// Starts the handler of a request this side serves.
    fn request(&self, method: Method, params: Option<&RawValue>) -> Result<ResponseFuture, RpcError>;
    /// Starts the handler of a notification this side serves.
    fn notification(&self, method: Method, params: Option<&RawValue>)
    -> Result<NotificationFuture, RpcError>;
}

/// An [`Agent`] implementation, as a side that serves the editor's messages.
#[derive(Debug)]
pub struct AgentSide<A>(pub A);

impl<A: Agent> Side for AgentSide<A> {
    fn request(&self, method: Method, params: Option<&RawValue>) -> Result<ResponseFuture, RpcError> {
        // Older clients' params are rewritten before they are decoded.
        let params = crate::legacy::upgrade(method, params);
        dispatch_agent_request(&self.0, method, params.as_deref())
    }

    fn notification(
        &self,
        method: Method,
        params: Option<&RawValue>,
    ) -> Result<NotificationFuture, RpcError> {
        dispatch_agent_notification(&self.0, method, params)
    }
}

/// A [`Client`] implementation, as a side that serves an agent's messages.
#[derive(Debug)]
pub struct ClientSide<C>(pub C);

impl<C: Client> Side for ClientSide<C> {
    fn request(&self, method: Method, params: Option<&RawValue>) -> Result<ResponseFuture, RpcError> {
        dispatch_client_request(&self.0, method, params)
    }

    fn notification(
        &self,
        method: Method,
        params: Option<&RawValue>,
    ) -> Result<NotificationFuture, RpcError> {
        dispatch_client_notification(&self.0, method, params)
    }
}

/// Serves one side on a connection with a per-method policy.
#[derive(Debug)]
pub struct Service<S> {
    side: S,
    policy: PolicyTable,
}

/// Serves an [`Agent`] (what `heron acp` runs).
pub type AgentService<A> = Service<AgentSide<A>>;

/// Serves a [`Client`] (Heron driving another agent).
pub type ClientService<C> = Service<ClientSide<C>>;

impl<A: Agent> Service<AgentSide<A>> {
    /// Serves `agent`, running each method as `policy` says.
    pub fn new(agent: A, policy: PolicyTable) -> Self {
        Self { side: AgentSide(agent), policy }
    }
}

impl<C: Client> Service<ClientSide<C>> {
    /// Serves `client`, running each method as `policy` says.
    pub fn new(client: C, policy: PolicyTable) -> Self {
        Self { side: ClientSide(client), policy }
    }
}

impl<S: Side> Dispatcher for Service<S> {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let found = match Method::from_wire(method) {
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
        let found = Method::from_wire(method).filter(|m| m.info().kind == Kind::Notification)?;
        match self.side.notification(found, params) {
            Ok(running) => Some(((self.policy)(found), running)),
            Err(error) => {
                tracing::warn!(%method, %error, data = ?error.data, "notification dropped");
                None
            }
        }
    }
}
