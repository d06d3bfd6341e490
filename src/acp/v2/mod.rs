//! The ACP v2 adapter: Heron's implementation of the generated v2 `Agent` trait, a second
//! edge over the same core as v1's (`super`), converting v2's types to and from the core's
//! (`convert`). Sessions, turns, tools, permissions and the store are the core's; only the
//! wire forms differ: a prompt is answered once accepted, with the id of its user message,
//! and the turn reports `state_update` `running`, its output, then `idle` with how it ended;
//! tool calls can be cancelled one by one; editors serve no files or terminals.
//!
//! What v2 offers that Heron does not serve yet is not advertised: audio in prompts,
//! elicitation, the `_heron/` extensions, agent-side terminals (commands run as tool calls,
//! their output streamed into the call's content as it arrives).

// As over v1: each method names its concrete future and result, refined on purpose.
#![allow(refining_impl_trait)]

mod commands;
mod convert;
mod editor;
pub mod policy;
mod prompt;
mod sessions;
mod settings;

use std::future::{Future, ready};
use std::path::PathBuf;
use std::sync::Arc;

use heron_core::session::Session;
use heron_protocol::RpcError;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::v2::{
    Agent, AgentCapabilities, AuthMethod, AuthMethodId, AuthMethodTerminal, CancelSessionNotification,
    CancelTerminalRequest, CancelTerminalResponse, CancelToolCallRequest, CancelToolCallResponse, Client,
    ClientPeer, CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoginAuthRequest, LoginAuthResponse, McpCapabilities, McpHttpCapabilities, McpStdioCapabilities,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptEmbeddedContextCapabilities,
    PromptImageCapabilities, PromptRequest, PromptResponse, ProtocolVersion, ResumeSessionRequest,
    ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionDeleteCapabilities, SessionId, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, UpdateSessionNotification,
};

use super::errors::{open_elsewhere, unknown_session};
use super::{ManagerSlot, Reply, SETUP_METHOD};

/// The protocol version this adapter speaks.
pub const PROTOCOL_VERSION: u16 = 2;

/// Heron as an ACP v2 agent on one connection.
#[derive(Debug, Clone)]
pub struct HeronAgentV2<O> {
    inner: Arc<Inner<O>>,
}

#[derive(Debug)]
struct Inner<O> {
    client: ClientPeer<O>,
    manager: ManagerSlot,
    home_root: PathBuf,
    /// `--cwd-only`: sessions work in their cwd, and `additionalDirectories` are refused.
    cwd_only: bool,
    turns: prompt::Turns,
    /// Sessions a dropped permission question left at `requires_action`.
    abandoned: Arc<editor::Abandoned>,
}

impl<O: Outgoing> HeronAgentV2<O> {
    /// An agent that talks to the editor through `client` and keeps sessions in the manager
    /// `slot` yields once built, with Heron's home at `home_root`.
    pub fn new(client: O, manager: ManagerSlot, home_root: PathBuf, cwd_only: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                client: ClientPeer(client),
                manager,
                home_root,
                cwd_only,
                turns: prompt::Turns::default(),
                abandoned: Arc::default(),
            }),
        }
    }

    /// The open session `id`; -32002 when it is not open here.
    fn session(&self, id: &SessionId) -> Result<Arc<Session>, RpcError> {
        let manager = self.inner.manager.now();
        match manager.as_ref().and_then(|m| m.get(&id.0)) {
            Some(session) => Ok(session),
            None if manager.is_some_and(|m| m.is_open_elsewhere(&id.0)) => Err(open_elsewhere(&id.0)),
            None => Err(unknown_session(&id.0)),
        }
    }
}

impl<O: Outgoing> Inner<O> {
    /// Sends one `session/update`.
    async fn send(&self, session_id: &str, update: SessionUpdate) -> Result<(), RpcError> {
        let note =
            UpdateSessionNotification { meta: None, session_id: SessionId(session_id.to_owned()), update };
        self.client.session_update(note).await
    }

    /// Puts one `session/update` in what follows an answer.
    fn then_send(&self, then: &mut Then, session_id: &str, update: SessionUpdate) {
        let note =
            UpdateSessionNotification { meta: None, session_id: SessionId(session_id.to_owned()), update };
        then.notify_serialized(heron_protocol::v2::Method::SessionUpdate.wire(), &note);
    }
}

/// What Heron advertises over v2: only what this adapter serves.
fn capabilities(cwd_only: bool) -> AgentCapabilities {
    AgentCapabilities {
        auth: None,
        meta: None,
        session: Some(SessionCapabilities {
            additional_directories: (!cwd_only)
                .then_some(SessionAdditionalDirectoriesCapabilities { meta: None }),
            delete: Some(SessionDeleteCapabilities { meta: None }),
            // Servers the editor names start here; a session's tools include theirs.
            mcp: Some(McpCapabilities {
                http: Some(McpHttpCapabilities { meta: None }),
                meta: None,
                stdio: Some(McpStdioCapabilities { meta: None }),
            }),
            meta: None,
            prompt: Some(PromptCapabilities {
                audio: None,
                embedded_context: Some(PromptEmbeddedContextCapabilities { meta: None }),
                image: Some(PromptImageCapabilities { meta: None }),
                meta: None,
            }),
        }),
    }
}

fn initialize(params: InitializeRequest, cwd_only: bool) -> InitializeResponse {
    // The terminal method is only offered to clients that can run it. Nothing else a v2
    // client advertises changes what Heron does yet (elicitation over v2 is not served).
    let client = params.capabilities.unwrap_or_default();
    let terminal_auth = client.auth.as_ref().and_then(|a| a.terminal.as_ref()).is_some();
    let auth_methods = if terminal_auth {
        vec![AuthMethod::Terminal(AuthMethodTerminal {
            args: vec!["--setup".to_owned()],
            description: Some(super::init::SETUP_DESCRIPTION.to_owned()),
            env: Vec::new(),
            meta: None,
            method_id: AuthMethodId(SETUP_METHOD.to_owned()),
            name: super::init::SETUP_NAME.to_owned(),
        })]
    } else {
        Vec::new()
    };
    InitializeResponse {
        auth_methods,
        capabilities: Some(capabilities(cwd_only)),
        info: Implementation {
            meta: None,
            name: "heron".to_owned(),
            title: Some("Heron".to_owned()),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
        meta: Some(super::init::meta(heron_core::sandbox::reported())),
        protocol_version: ProtocolVersion(PROTOCOL_VERSION),
    }
}

/// Each v2 method, and where it is served.
impl<O: Outgoing> Agent for HeronAgentV2<O> {
    served_by! {
        session_new(NewSessionRequest) -> Answered<NewSessionResponse> => sessions::new;
        session_resume(ResumeSessionRequest) -> Answered<ResumeSessionResponse> => sessions::resume;
        session_list(ListSessionsRequest) -> ListSessionsResponse => sessions::list;
        session_close(CloseSessionRequest) -> CloseSessionResponse => sessions::close;
        session_delete(DeleteSessionRequest) -> DeleteSessionResponse => sessions::delete;
        session_set_config_option(SetSessionConfigOptionRequest) -> SetSessionConfigOptionResponse => settings::set_config_option;
        session_prompt(PromptRequest) -> Answered<PromptResponse> => prompt::prompt;
    }

    fn initialize(
        &self,
        params: InitializeRequest,
    ) -> impl Future<Output = Result<Answered<InitializeResponse>, RpcError>> + Send + 'static {
        let answer = initialize(params, self.inner.cwd_only);
        // As over v1: the store and config are read once the answer is queued.
        let start = (!self.inner.manager.is_wanted()).then(|| self.inner.manager.clone());
        async move {
            let mut then = Then::new();
            if let Some(manager) = start {
                then.after(move || manager.want());
            }
            Ok(Answered::new(answer, then))
        }
    }

    fn auth_login(
        &self,
        params: LoginAuthRequest,
    ) -> impl Future<Output = Result<LoginAuthResponse, RpcError>> + Send + 'static {
        // Heron's one method runs in a terminal, as over v1.
        ready(Err(super::init::auth_refusal(&params.method_id.0)))
    }

    fn session_cancel(
        &self,
        params: CancelSessionNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        prompt::cancel(self, &params);
        ready(Ok(()))
    }

    fn tool_call_cancel(
        &self,
        params: CancelToolCallRequest,
    ) -> impl Future<Output = Result<CancelToolCallResponse, RpcError>> + Send + 'static {
        ready(prompt::cancel_tool_call(self, &params))
    }

    fn terminal_cancel(
        &self,
        params: CancelTerminalRequest,
    ) -> impl Future<Output = Result<CancelTerminalResponse, RpcError>> + Send + 'static {
        ready(prompt::cancel_terminal(self, &params))
    }
}
