//! The ACP adapter: Heron's implementation of the generated `Agent` trait. It is the only
//! module besides `protocol` that knows protocol types; it converts them to and from the
//! core's own types at this edge.

pub mod policy;

use std::future::{Future, ready};
use std::sync::Arc;

use crate::protocol::runtime::{ClientPeer, Outgoing};
use crate::protocol::{
    Agent, AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, ProtocolVersion, RpcError,
};

/// The only protocol version Heron speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// Heron as an ACP agent on one connection.
#[derive(Debug, Clone)]
pub struct HeronAgent<O> {
    /// The editor, for the calls the agent makes (permission, fs, terminals).
    #[allow(dead_code, reason = "the session core reaches the editor through it")]
    client: Arc<ClientPeer<O>>,
}

impl<O: Outgoing> HeronAgent<O> {
    /// An agent that calls the editor through `client`.
    pub fn new(client: O) -> Self {
        Self { client: Arc::new(ClientPeer(client)) }
    }
}

/// What Heron advertises: only what it serves today. Capabilities are added here as the
/// features behind them land, never before.
fn capabilities() -> AgentCapabilities {
    AgentCapabilities::default()
}

impl<O: Outgoing> Agent for HeronAgent<O> {
    fn initialize(
        &self,
        params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        // Version negotiation: a client asking for any version gets the one Heron speaks,
        // and decides itself whether to go on.
        let asked = params.protocol_version.0;
        if asked != PROTOCOL_VERSION {
            tracing::info!(asked, answered = PROTOCOL_VERSION, "protocol version negotiated");
        }
        ready(Ok(InitializeResponse {
            protocol_version: ProtocolVersion(PROTOCOL_VERSION),
            agent_capabilities: Some(capabilities()),
            agent_info: Some(Implementation {
                name: "heron".to_owned(),
                title: Some("Heron".to_owned()),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                meta: None,
            }),
            auth_methods: Vec::new(),
            meta: None,
        }))
    }

    fn session_new(
        &self,
        _params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/new")))
    }

    fn session_prompt(
        &self,
        _params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/prompt")))
    }

    fn session_cancel(
        &self,
        _params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        // No session exists yet, so a cancel is always for an unknown session: a no-op.
        ready(Ok(()))
    }
}
