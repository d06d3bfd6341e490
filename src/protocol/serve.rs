//! Serves a generated handler trait on a connection: looks the method up in the table,
//! checks it is one this side handles, and hands it to the generated dispatch glue with
//! the execution policy the caller chose per method.

use serde_json::value::RawValue;

use super::error::RpcError;
use super::runtime::{Dispatcher, Kind, NotificationFuture, Policy, ResponseFuture};
use super::types::{
    Agent, Client, Method, dispatch_agent_notification, dispatch_agent_request, dispatch_client_notification,
    dispatch_client_request,
};

/// The per-method execution policy: a hand-written exhaustive `match`, so a method added
/// to the schema does not compile until someone decides how it runs.
pub type PolicyTable = fn(Method) -> Policy;

/// Serves an [`Agent`] implementation.
#[derive(Debug)]
pub struct AgentService<A> {
    agent: A,
    policy: PolicyTable,
}

impl<A: Agent> AgentService<A> {
    /// Serves `agent`, running each method as `policy` says.
    pub fn new(agent: A, policy: PolicyTable) -> Self {
        Self { agent, policy }
    }
}

/// Serves a [`Client`] implementation (Heron driving another agent).
#[derive(Debug)]
pub struct ClientService<C> {
    client: C,
    policy: PolicyTable,
}

impl<C: Client> ClientService<C> {
    /// Serves `client`, running each method as `policy` says.
    pub fn new(client: C, policy: PolicyTable) -> Self {
        Self { client, policy }
    }
}

/// Finds a request method, or explains why it cannot be called as one.
fn request_method(method: &str) -> Result<Method, RpcError> {
    match Method::from_wire(method) {
        Some(found) if found.info().kind == Kind::Request => Ok(found),
        // A notification method sent with an id, or an unknown or `_`-prefixed extension
        // method: nothing here answers it.
        _ => Err(RpcError::method_not_found(method)),
    }
}

fn notification_method(method: &str) -> Option<Method> {
    Method::from_wire(method).filter(|m| m.info().kind == Kind::Notification)
}

fn log_dropped(method: &str, error: &RpcError) {
    tracing::warn!(%method, %error, data = ?error.data, "notification dropped");
}

impl<A: Agent> Dispatcher for AgentService<A> {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let found = request_method(method)?;
        let params = super::legacy::upgrade(found, params);
        let running = dispatch_agent_request(&self.agent, found, params.as_deref())?;
        Ok(((self.policy)(found), running))
    }

    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)> {
        let found = notification_method(method)?;
        match dispatch_agent_notification(&self.agent, found, params) {
            Ok(running) => Some(((self.policy)(found), running)),
            Err(error) => {
                log_dropped(method, &error);
                None
            }
        }
    }
}

impl<C: Client> Dispatcher for ClientService<C> {
    fn dispatch_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(Policy, ResponseFuture), RpcError> {
        let found = request_method(method)?;
        let running = dispatch_client_request(&self.client, found, params)?;
        Ok(((self.policy)(found), running))
    }

    fn dispatch_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<(Policy, NotificationFuture)> {
        let found = notification_method(method)?;
        match dispatch_client_notification(&self.client, found, params) {
            Ok(running) => Some(((self.policy)(found), running)),
            Err(error) => {
                log_dropped(method, &error);
                None
            }
        }
    }
}
