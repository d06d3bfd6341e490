//! The ACP adapter: Heron's implementation of the generated `Agent` trait. Besides
//! `heron-protocol`, it is the only code that knows protocol types; it converts them to
//! and from the core's own types at this edge (`convert`).
//!
//! The `Agent` impl below is a routing table: each method names the module that serves it.
//! A method's synchronous part runs on the connection's reader in arrival order (that is
//! where prompts are queued and cancels take effect); the future it returns does the rest.
//! What must follow an answer (a new session's commands, the release of its next turn) is
//! returned with it ([`Answered`]), never sent from elsewhere.

// Each method names its concrete future and result, narrower than the generated trait's
// (which leaves room for an answer with what follows it): refined on purpose.
#![allow(refining_impl_trait)]

mod commands;
mod compaction;
mod convert;
mod editor;
mod errors;
mod inbox;
mod init;
pub mod mcp;
pub mod negotiate;
mod notices;
pub mod policy;
mod prompt;
mod reload;
mod rewind;
mod sequencer;
mod sessions;
mod settings;
mod slot;
mod status;
mod updates;
pub mod v2;
mod variants;
mod vendor;

use std::future::{Future, ready};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use heron_core::session::Session;
use heron_core::session::settings::Settings;
use heron_core::tools::editor::EditorIo;
use heron_protocol::runtime::{Answered, ClientPeer, Outgoing, Then};
use heron_protocol::{
    Agent, AuthenticateRequest, AuthenticateResponse, CancelNotification, Client, ClientCapabilities,
    CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ForkSessionRequest, ForkSessionResponse, HeronGoalPauseRequest, HeronGoalPauseResponse,
    HeronGoalResumeRequest, HeronGoalResumeResponse, HeronInboxDeleteRequest, HeronInboxDeleteResponse,
    HeronInboxEnqueueRequest, HeronInboxEnqueueResponse, HeronInboxGetRequest, HeronInboxGetResponse,
    HeronInboxListRequest, HeronInboxListResponse, HeronInboxMoveRequest, HeronInboxMoveResponse,
    HeronInboxRefreshRequest, HeronInboxRefreshResponse, HeronInboxRetryRequest, HeronInboxRetryResponse,
    HeronInboxSetPausedRequest, HeronInboxSetPausedResponse, HeronInboxUpdateRequest,
    HeronInboxUpdateResponse, HeronReloadExtensionsRequest, HeronReloadExtensionsResponse,
    HeronSessionMcpStatusRequest, HeronSessionMcpStatusResponse, HeronSessionRewindRequest,
    HeronSessionRewindResponse, HeronSessionStatusRequest, HeronSessionStatusResponse,
    HeronSessionSteerRequest, HeronSessionSteerResponse, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse, RpcError,
    SessionConfigOption, SessionId, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, SetSessionModelRequest,
    SetSessionModelResponse,
};

use self::editor::AcpEditor;
use self::errors::{open_elsewhere, unknown_session};

pub use self::init::{PROTOCOL_VERSION, SETUP_METHOD};
pub use self::settings::preset;
pub use self::slot::{Built, ManagerSlot, Unusable};

/// Heron as an ACP agent on one connection.
#[derive(Debug, Clone)]
pub struct HeronAgent<O> {
    inner: Arc<Inner<O>>,
}

#[derive(Debug)]
struct Inner<O> {
    client: ClientPeer<O>,
    manager: ManagerSlot,
    home_root: PathBuf,
    /// `--cwd-only`: sessions work in their cwd, and `additionalDirectories` are refused.
    cwd_only: bool,
    client_capabilities: Mutex<ClientCapabilities>,
    /// What the client opted into that changes how updates show.
    opted: Mutex<convert::Opted>,
    notices: notices::Notices,
    status: status::StatusFeed,
    /// Sessions whose MCP servers this connection reports on.
    mcp_watched: Mutex<std::collections::HashSet<String>>,
}

type Reply<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, RpcError>> + Send + 'static>>;

impl<O: Outgoing> HeronAgent<O> {
    /// An agent that calls the editor through `client` and keeps sessions in the manager
    /// `slot` yields once it is built (off the path to the first answer), with Heron's home
    /// at `home_root`; with `cwd_only`, sessions get no additional directories.
    pub fn new(client: O, manager: ManagerSlot, home_root: PathBuf, cwd_only: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                client: ClientPeer(client),
                manager,
                home_root,
                cwd_only,
                client_capabilities: Mutex::new(ClientCapabilities::default()),
                opted: Mutex::default(),
                notices: notices::Notices::default(),
                status: status::StatusFeed::default(),
                mcp_watched: Mutex::default(),
            }),
        }
    }

    /// The editor for a session opened on this connection, limited to what the client
    /// advertised.
    fn editor_for(&self, session_id: &str) -> Arc<dyn EditorIo> {
        let capabilities =
            self.inner.client_capabilities.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Arc::new(AcpEditor::new(self.inner.client.clone(), session_id.to_owned(), &capabilities))
    }

    /// The open session `id`; -32002 when it is not open here, with `data.code` saying so
    /// when another process has it open.
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
    /// What the client opted into.
    fn opted(&self) -> convert::Opted {
        *self.opted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one `session/update`, unless ACP forbids it to this client (an update it did not
    /// opt into, which Heron's own paths never offer: logged, not sent).
    async fn send(&self, session_id: &str, update: SessionUpdate) -> Result<(), RpcError> {
        if !variants::may_send(update.kind(), self.opted()) {
            tracing::error!(
                update = update.kind().wire(),
                "an update the client did not opt into was not sent"
            );
            return Ok(());
        }
        let note = SessionNotification { meta: None, session_id: SessionId(session_id.to_owned()), update };
        self.client.session_update(note).await
    }

    /// Puts one `session/update` in what follows an answer, under the same rule as
    /// [`Inner::send`].
    fn then_send(&self, then: &mut Then, session_id: &str, update: SessionUpdate) {
        if !variants::may_send(update.kind(), self.opted()) {
            tracing::error!(
                update = update.kind().wire(),
                "an update the client did not opt into was not sent"
            );
            return;
        }
        let note = SessionNotification { meta: None, session_id: SessionId(session_id.to_owned()), update };
        then.notify_serialized(heron_protocol::Method::SessionUpdate.wire(), &note);
    }

    /// Sends `updates` of one session, in order, as one burst the connection writes
    /// together (a replay: one queue entry rather than one per update).
    async fn send_batch(&self, session_id: &str, updates: Vec<SessionUpdate>) -> Result<(), RpcError> {
        let session_id = SessionId(session_id.to_owned());
        let opted = self.opted();
        let notes: Vec<_> = updates
            .into_iter()
            .filter(|update| variants::may_send(update.kind(), opted))
            .map(|update| SessionNotification { meta: None, session_id: session_id.clone(), update })
            .collect();
        self.client.0.notify_batch(heron_protocol::Method::SessionUpdate.wire(), notes).await
    }

    /// The session's settings and its config options as the wire shows them.
    fn options_of(&self, session: &Session) -> (Settings, Vec<SessionConfigOption>) {
        let settings = session.state().settings;
        let mut options = settings::config_options(settings.options(&session.choices()));
        if self.opted().boolean_options {
            options.extend(settings::mcp_options(session.mcp()));
        }
        (settings, options)
    }
}

/// Each method, and where it is served.
impl<O: Outgoing> Agent for HeronAgent<O> {
    fn initialize(
        &self,
        params: InitializeRequest,
    ) -> impl Future<Output = Result<Answered<InitializeResponse>, RpcError>> + Send + 'static {
        let answer = init::initialize(self, params);
        // The store, config and extensions are read once the answer is queued, so nothing
        // but the answer stands between the spawn and the editor's next step.
        let start = (!self.inner.manager.is_wanted()).then(|| self.inner.manager.clone());
        async move {
            let mut then = Then::new();
            if let Some(manager) = start {
                then.after(move || manager.want());
            }
            Ok(Answered::new(answer?, then))
        }
    }

    fn authenticate(
        &self,
        params: AuthenticateRequest,
    ) -> impl Future<Output = Result<AuthenticateResponse, RpcError>> + Send + 'static {
        init::authenticate(self, params)
    }

    fn session_new(
        &self,
        params: NewSessionRequest,
    ) -> impl Future<Output = Result<Answered<NewSessionResponse>, RpcError>> + Send + 'static {
        sessions::new(self, params)
    }

    fn session_load(
        &self,
        params: LoadSessionRequest,
    ) -> impl Future<Output = Result<Answered<LoadSessionResponse>, RpcError>> + Send + 'static {
        sessions::load(self, params)
    }

    fn session_resume(
        &self,
        params: ResumeSessionRequest,
    ) -> impl Future<Output = Result<Answered<ResumeSessionResponse>, RpcError>> + Send + 'static {
        sessions::resume(self, params)
    }

    fn session_list(
        &self,
        params: ListSessionsRequest,
    ) -> impl Future<Output = Result<ListSessionsResponse, RpcError>> + Send + 'static {
        sessions::list(self, params)
    }

    fn session_close(
        &self,
        params: CloseSessionRequest,
    ) -> impl Future<Output = Result<CloseSessionResponse, RpcError>> + Send + 'static {
        sessions::close(self, params)
    }

    fn session_delete(
        &self,
        params: DeleteSessionRequest,
    ) -> impl Future<Output = Result<DeleteSessionResponse, RpcError>> + Send + 'static {
        sessions::delete(self, params)
    }

    fn session_fork(
        &self,
        params: ForkSessionRequest,
    ) -> impl Future<Output = Result<Answered<ForkSessionResponse>, RpcError>> + Send + 'static {
        sessions::fork(self, params)
    }

    fn session_set_mode(
        &self,
        params: SetSessionModeRequest,
    ) -> impl Future<Output = Result<Answered<SetSessionModeResponse>, RpcError>> + Send + 'static {
        settings::set_mode(self, params)
    }

    fn session_set_config_option(
        &self,
        params: SetSessionConfigOptionRequest,
    ) -> impl Future<Output = Result<Answered<SetSessionConfigOptionResponse>, RpcError>> + Send + 'static
    {
        settings::set_config_option(self, params)
    }

    fn session_set_model(
        &self,
        params: SetSessionModelRequest,
    ) -> impl Future<Output = Result<SetSessionModelResponse, RpcError>> + Send + 'static {
        settings::set_model(self, params)
    }

    fn session_prompt(
        &self,
        params: PromptRequest,
    ) -> impl Future<Output = Result<Answered<PromptResponse>, RpcError>> + Send + 'static {
        prompt::prompt(self, params)
    }

    fn session_cancel(
        &self,
        params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        prompt::cancel(self, &params);
        ready(Ok(()))
    }

    fn heron_session_status(
        &self,
        params: HeronSessionStatusRequest,
    ) -> impl Future<Output = Result<HeronSessionStatusResponse, RpcError>> + Send + 'static {
        vendor::status(self, params)
    }

    fn heron_session_steer(
        &self,
        params: HeronSessionSteerRequest,
    ) -> impl Future<Output = Result<Answered<HeronSessionSteerResponse>, RpcError>> + Send + 'static {
        inbox::steer(self, params)
    }

    fn heron_session_mcp_status(
        &self,
        params: HeronSessionMcpStatusRequest,
    ) -> impl Future<Output = Result<HeronSessionMcpStatusResponse, RpcError>> + Send + 'static {
        mcp::status(self, params)
    }

    fn heron_session_reload_extensions(
        &self,
        params: HeronReloadExtensionsRequest,
    ) -> impl Future<Output = Result<Answered<HeronReloadExtensionsResponse>, RpcError>> + Send + 'static
    {
        reload::reload(self, params)
    }

    fn heron_session_rewind(
        &self,
        params: HeronSessionRewindRequest,
    ) -> impl Future<Output = Result<Answered<HeronSessionRewindResponse>, RpcError>> + Send + 'static {
        rewind::rewind(self, params)
    }

    fn heron_session_goal_pause(
        &self,
        params: HeronGoalPauseRequest,
    ) -> impl Future<Output = Result<HeronGoalPauseResponse, RpcError>> + Send + 'static {
        let goal = vendor::change_goal(self, &params.session_id, true);
        async move { Ok(HeronGoalPauseResponse { goal: goal.await?, meta: None }) }
    }

    fn heron_session_goal_resume(
        &self,
        params: HeronGoalResumeRequest,
    ) -> impl Future<Output = Result<HeronGoalResumeResponse, RpcError>> + Send + 'static {
        let goal = vendor::change_goal(self, &params.session_id, false);
        async move { Ok(HeronGoalResumeResponse { goal: goal.await?, meta: None }) }
    }

    fn heron_inbox_enqueue(
        &self,
        params: HeronInboxEnqueueRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxEnqueueResponse>, RpcError>> + Send + 'static {
        inbox::enqueue(self, params)
    }

    fn heron_inbox_list(
        &self,
        params: HeronInboxListRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxListResponse>, RpcError>> + Send + 'static {
        inbox::list(self, params)
    }

    fn heron_inbox_get(
        &self,
        params: HeronInboxGetRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxGetResponse>, RpcError>> + Send + 'static {
        inbox::get(self, params)
    }

    fn heron_inbox_update(
        &self,
        params: HeronInboxUpdateRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxUpdateResponse>, RpcError>> + Send + 'static {
        inbox::update(self, params)
    }

    fn heron_inbox_delete(
        &self,
        params: HeronInboxDeleteRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxDeleteResponse>, RpcError>> + Send + 'static {
        inbox::delete(self, params)
    }

    fn heron_inbox_move(
        &self,
        params: HeronInboxMoveRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxMoveResponse>, RpcError>> + Send + 'static {
        inbox::move_item(self, params)
    }

    fn heron_inbox_set_paused(
        &self,
        params: HeronInboxSetPausedRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxSetPausedResponse>, RpcError>> + Send + 'static {
        inbox::set_paused(self, params)
    }

    fn heron_inbox_retry(
        &self,
        params: HeronInboxRetryRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxRetryResponse>, RpcError>> + Send + 'static {
        inbox::retry(self, params)
    }

    fn heron_inbox_refresh(
        &self,
        params: HeronInboxRefreshRequest,
    ) -> impl Future<Output = Result<Answered<HeronInboxRefreshResponse>, RpcError>> + Send + 'static {
        inbox::refresh(self, params)
    }
}
