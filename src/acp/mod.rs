//! The ACP adapter: Heron's implementation of the generated `Agent` trait. Besides
//! `heron-protocol`, it is the only code that knows protocol types; it converts them to
//! and from the core's own types at this edge (`convert`).
//!
//! The `Agent` impl below is a routing table: each method names the module that serves it.
//! A method's synchronous part runs on the connection's reader in arrival order (that is
//! where prompts are queued and cancels take effect); the future it returns does the rest.
//! What must follow an answer (a new session's commands, the release of its session's next
//! run) is returned with it ([`Answered`]), never sent from elsewhere.

// Each method names its concrete future and result, narrower than the generated trait's
// (which leaves room for an answer with what follows it): refined on purpose.
#![allow(refining_impl_trait)]

/// Rows of a generated handler trait's routing table, in both protocol versions: each
/// method handed whole to the function that serves it, `method(Params) -> Result => serve`.
/// Methods that do more than hand over are written out beside the rows.
macro_rules! served_by {
    ($($method:ident($params:ty) -> $result:ty => $($serve:ident)::+;)*) => {
        $(
            fn $method(
                &self,
                params: $params,
            ) -> impl Future<Output = Result<$result, RpcError>> + Send + 'static {
                $($serve)::+(self, params)
            }
        )*
    };
}

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

/// A handler's boxed future, in both protocol versions.
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
    served_by! {
        authenticate(AuthenticateRequest) -> AuthenticateResponse => init::authenticate;
        session_new(NewSessionRequest) -> Answered<NewSessionResponse> => sessions::new;
        session_load(LoadSessionRequest) -> Answered<LoadSessionResponse> => sessions::load;
        session_resume(ResumeSessionRequest) -> Answered<ResumeSessionResponse> => sessions::resume;
        session_list(ListSessionsRequest) -> ListSessionsResponse => sessions::list;
        session_close(CloseSessionRequest) -> CloseSessionResponse => sessions::close;
        session_delete(DeleteSessionRequest) -> DeleteSessionResponse => sessions::delete;
        session_fork(ForkSessionRequest) -> Answered<ForkSessionResponse> => sessions::fork;
        session_set_mode(SetSessionModeRequest) -> Answered<SetSessionModeResponse> => settings::set_mode;
        session_set_config_option(SetSessionConfigOptionRequest) -> Answered<SetSessionConfigOptionResponse> => settings::set_config_option;
        session_set_model(SetSessionModelRequest) -> SetSessionModelResponse => settings::set_model;
        session_prompt(PromptRequest) -> Answered<PromptResponse> => prompt::prompt;
        heron_session_status(HeronSessionStatusRequest) -> HeronSessionStatusResponse => vendor::status;
        heron_session_steer(HeronSessionSteerRequest) -> Answered<HeronSessionSteerResponse> => inbox::steer;
        heron_session_mcp_status(HeronSessionMcpStatusRequest) -> HeronSessionMcpStatusResponse => mcp::status;
        heron_session_reload_extensions(HeronReloadExtensionsRequest) -> Answered<HeronReloadExtensionsResponse> => reload::reload;
        heron_session_rewind(HeronSessionRewindRequest) -> Answered<HeronSessionRewindResponse> => rewind::rewind;
        heron_inbox_enqueue(HeronInboxEnqueueRequest) -> Answered<HeronInboxEnqueueResponse> => inbox::enqueue;
        heron_inbox_list(HeronInboxListRequest) -> Answered<HeronInboxListResponse> => inbox::list;
        heron_inbox_get(HeronInboxGetRequest) -> Answered<HeronInboxGetResponse> => inbox::get;
        heron_inbox_update(HeronInboxUpdateRequest) -> Answered<HeronInboxUpdateResponse> => inbox::update;
        heron_inbox_delete(HeronInboxDeleteRequest) -> Answered<HeronInboxDeleteResponse> => inbox::delete;
        heron_inbox_move(HeronInboxMoveRequest) -> Answered<HeronInboxMoveResponse> => inbox::move_item;
        heron_inbox_set_paused(HeronInboxSetPausedRequest) -> Answered<HeronInboxSetPausedResponse> => inbox::set_paused;
        heron_inbox_retry(HeronInboxRetryRequest) -> Answered<HeronInboxRetryResponse> => inbox::retry;
        heron_inbox_refresh(HeronInboxRefreshRequest) -> Answered<HeronInboxRefreshResponse> => inbox::refresh;
    }

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

    fn session_cancel(
        &self,
        params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        prompt::cancel(self, &params);
        ready(Ok(()))
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
}
