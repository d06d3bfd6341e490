//! The ACP adapter: Heron's implementation of the generated `Agent` trait. Besides
//! `protocol`, it is the only module that knows protocol types; it converts them to and
//! from the core's own types at this edge (`convert`).

mod announce;
pub mod convert;
pub mod editor;
pub mod errors;
mod inbox;
pub mod mcp;
pub mod policy;
mod settings;
mod slot;
pub mod status;
pub mod vendor;

use std::future::{Future, ready};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;
use tokio::sync::mpsc;

use self::announce::{announce_settings, mode_update, run_command};
use self::editor::AcpEditor;
use self::errors::{WithField, prompt_error, session_error, unknown_session};
use heron_core::session::settings::{ConfigId, Settings};
use heron_core::session::{OpenOptions, Session};
use heron_core::tools::editor::{EditorIo, NoEditor};
use heron_protocol::runtime::{ClientPeer, Outgoing};
use heron_protocol::{
    Agent, AgentCapabilities, AuthMethod, AuthMethodTerminal, AuthenticateRequest, AuthenticateResponse,
    CancelNotification, Client, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse,
    HeronGoalPauseRequest, HeronGoalPauseResponse, HeronGoalResumeRequest, HeronGoalResumeResponse,
    HeronInboxDeleteRequest, HeronInboxDeleteResponse, HeronInboxEnqueueRequest, HeronInboxEnqueueResponse,
    HeronInboxGetRequest, HeronInboxGetResponse, HeronInboxListRequest, HeronInboxListResponse,
    HeronInboxMoveRequest, HeronInboxMoveResponse, HeronInboxRefreshRequest, HeronInboxRefreshResponse,
    HeronInboxRetryRequest, HeronInboxRetryResponse, HeronInboxSetPausedRequest, HeronInboxSetPausedResponse,
    HeronInboxUpdateRequest, HeronInboxUpdateResponse, HeronSessionMcpStatusRequest,
    HeronSessionMcpStatusResponse, HeronSessionStatusRequest, HeronSessionStatusResponse,
    HeronSessionSteerRequest, HeronSessionSteerResponse, Implementation, InitializeRequest,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, ProtocolVersion, ResumeSessionRequest, ResumeSessionResponse, RpcError,
    SessionCapabilities, SessionId, SessionInfo, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse, SetSessionModelRequest, SetSessionModelResponse,
};

pub use self::settings::preset;
pub use self::slot::{Built, ManagerSlot};

/// The only protocol version Heron speaks.
pub const PROTOCOL_VERSION: u16 = 1;

/// The id of the terminal auth method (it runs `heron acp --setup`).
pub const SETUP_METHOD: &str = "heron-setup";

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
    client_capabilities: Mutex<ClientCapabilities>,
    status: status::StatusFeed,
    /// Sessions whose MCP servers this connection reports on.
    mcp_watched: Mutex<std::collections::HashSet<String>>,
}

type Reply<T> = std::pin::Pin<Box<dyn Future<Output = Result<T, RpcError>> + Send + 'static>>;

fn absolute(path: &str, field: &str) -> Result<PathBuf, RpcError> {
    let path = PathBuf::from(path);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(RpcError::invalid_params(field, "must be an absolute path"))
    }
}

fn open_options(
    home_root: &std::path::Path,
    cwd: &str,
    additional: &[String],
    mcp_servers: &[heron_protocol::McpServer],
    editor: Arc<dyn EditorIo>,
) -> Result<OpenOptions, RpcError> {
    let cwd = absolute(cwd, "cwd")?;
    // One bad entry refuses the whole request; nothing is silently dropped.
    let protected = [home_root.to_path_buf()];
    let additional_directories =
        heron_core::tools::roots::validate_additional_directories(additional, &cwd, &protected)
            .map_err(|e| errors::root_error(&e))?;
    let mcp_servers = mcp::specs(mcp_servers)?;
    Ok(OpenOptions { cwd, additional_directories, editor, mcp_servers })
}

impl<O: Outgoing> HeronAgent<O> {
    /// An agent that calls the editor through `client` and keeps sessions in the manager
    /// `slot` yields once it is built (off the path to the first answer), with Heron's home
    /// at `home_root`.
    pub fn new(client: O, manager: ManagerSlot, home_root: PathBuf) -> Self {
        Self {
            inner: Arc::new(Inner {
                client: ClientPeer(client),
                manager,
                home_root,
                client_capabilities: Mutex::new(ClientCapabilities::default()),
                status: status::StatusFeed::default(),
                mcp_watched: Mutex::default(),
            }),
        }
    }

    /// The editor for a session opened on this connection. Sessions are keyed by their id;
    /// a new session's id is not known yet, so its editor is bound when it is created.
    fn editor_for(&self, session_id: &str) -> Arc<dyn EditorIo> {
        let capabilities =
            self.inner.client_capabilities.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Arc::new(AcpEditor::new(self.inner.client.clone(), session_id.to_owned(), &capabilities))
    }

    fn session(&self, id: &SessionId) -> Result<Arc<Session>, RpcError> {
        self.inner.manager.now().and_then(|m| m.get(&id.0)).ok_or_else(|| unknown_session(&id.0))
    }
}

impl<O: Outgoing> Inner<O> {
    async fn send(&self, session_id: &str, update: SessionUpdate) -> Result<(), RpcError> {
        let note = SessionNotification { meta: None, session_id: SessionId(session_id.to_owned()), update };
        self.client.session_update(note).await
    }

    fn options_of(&self, session: &Session) -> (Settings, Vec<heron_protocol::SessionConfigOption>) {
        let settings = session.state().settings;
        let options = convert::config_options(settings.options(session.choices()));
        (settings, options)
    }
}

/// Advertises the slash commands once the answer that made the session known is out
/// (a client drops updates for a session it does not know yet), then the context use of a
/// resumed session that has any.
fn advertise_commands<O: Outgoing>(inner: &Arc<Inner<O>>, session_id: &str) {
    advertise(inner, session_id, None);
}

fn advertise<O: Outgoing>(
    inner: &Arc<Inner<O>>,
    session_id: &str,
    usage: Option<heron_core::types::UsageReport>,
) {
    let inner = inner.clone();
    let id = session_id.to_owned();
    heron_rpc::after_response(async move {
        if let Err(err) = inner.send(&id, convert::available_commands()).await {
            tracing::debug!(%err, "could not advertise commands");
        }
        if let Some(report) = usage
            && let Err(err) = inner.send(&id, convert::usage_update(&report)).await
        {
            tracing::debug!(%err, "could not send the usage");
        }
    });
}

/// What Heron advertises: only what it serves.
fn capabilities() -> AgentCapabilities {
    AgentCapabilities {
        auth: None,
        load_session: Some(true),
        mcp_capabilities: Some(McpCapabilities { http: Some(false), meta: None, sse: Some(false) }),
        meta: Some(vendor::capabilities_meta()),
        prompt_capabilities: Some(PromptCapabilities {
            audio: Some(false),
            embedded_context: Some(true),
            image: Some(true),
            meta: None,
        }),
        session_capabilities: Some(SessionCapabilities {
            additional_directories: Some(Default::default()),
            archive: None,
            close: Some(Default::default()),
            delete: Some(Default::default()),
            fork: Some(Default::default()),
            list: Some(Default::default()),
            meta: None,
            resume: Some(Default::default()),
            status: None,
            system_prompt: None,
            title: None,
        }),
    }
}

impl<O: Outgoing> Agent for HeronAgent<O> {
    fn initialize(
        &self,
        params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        // Version negotiation: any version asked for is answered with the one Heron speaks;
        // the client decides whether to go on.
        if params.protocol_version.0 != PROTOCOL_VERSION {
            tracing::info!(asked = params.protocol_version.0, "protocol version negotiated to 1");
        }
        let client = params.client_capabilities.unwrap_or_default();
        let terminal_auth = client.auth.as_ref().and_then(|a| a.terminal).unwrap_or(false);
        self.inner.status.want(status::wants_updates(&client));
        *self.inner.client_capabilities.lock().unwrap_or_else(PoisonError::into_inner) = client;
        // The terminal method is only offered to clients that can run it.
        let auth_methods = if terminal_auth {
            vec![AuthMethod::Terminal(AuthMethodTerminal {
                args: vec!["--setup".to_owned()],
                description: Some("Choose a model provider and store its key".to_owned()),
                env: Default::default(),
                id: heron_protocol::AuthMethodId(SETUP_METHOD.to_owned()),
                meta: None,
                name: "Set up Heron".to_owned(),
            })]
        } else {
            Vec::new()
        };
        ready(Ok(InitializeResponse {
            protocol_version: ProtocolVersion(PROTOCOL_VERSION),
            agent_capabilities: Some(capabilities()),
            agent_info: Some(Implementation {
                name: "heron".to_owned(),
                title: Some("Heron".to_owned()),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                meta: None,
            }),
            auth_methods,
            meta: None,
        }))
    }

    fn authenticate(
        &self,
        params: AuthenticateRequest,
    ) -> impl Future<Output = Result<AuthenticateResponse, RpcError>> + Send + 'static {
        let error = if params.method_id.0 == SETUP_METHOD {
            RpcError::invalid_params("methodId", "this method runs in a terminal: launch `heron acp --setup`")
        } else {
            RpcError::invalid_params("methodId", format!("unknown auth method `{}`", params.method_id.0))
        };
        ready(Err(error))
    }

    fn session_new(
        &self,
        params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let options = open_options(
            &self.inner.home_root,
            &params.cwd,
            &params.additional_directories,
            &params.mcp_servers,
            Arc::new(NoEditor),
        );
        let agent = self.clone();
        let reply: Reply<NewSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session = manager.create(options?).await.map_err(|e| session_error(e, &manager))?;
            session.attach(agent.editor_for(session.id()));
            mcp::watch(&inner, &session);
            advertise_commands(&inner, session.id());
            inbox::serve(&inner, &session);
            let (settings, config_options) = inner.options_of(&session);
            Ok(NewSessionResponse {
                config_options: Some(config_options),
                meta: None,
                modes: Some(convert::modes(&settings)),
                session_id: SessionId(session.id().to_owned()),
            })
        });
        reply
    }

    fn session_load(
        &self,
        params: LoadSessionRequest,
    ) -> impl Future<Output = Result<LoadSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let id = params.session_id.0;
        let options = open_options(
            &self.inner.home_root,
            &params.cwd,
            &params.additional_directories,
            &params.mcp_servers,
            self.editor_for(&id),
        );
        let reply: Reply<LoadSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, history) =
                manager.open(&id, options?).await.map_err(|e| session_error(e, &manager))?;
            mcp::watch(&inner, &session);
            // The whole history goes out before the answer.
            for event in &history {
                for update in convert::replay_updates(event) {
                    inner.send(&id, update).await?;
                }
            }
            // The context meter ends the replay, so the editor has it when load answers.
            if let Some(report) = session.status().1.usage {
                inner.send(&id, convert::usage_update(&report)).await?;
            }
            advertise_commands(&inner, &id);
            inbox::serve(&inner, &session);
            let (settings, config_options) = inner.options_of(&session);
            Ok(LoadSessionResponse {
                config_options: Some(config_options),
                meta: None,
                modes: Some(convert::modes(&settings)),
            })
        });
        reply
    }

    fn session_resume(
        &self,
        params: ResumeSessionRequest,
    ) -> impl Future<Output = Result<ResumeSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let id = params.session_id.0;
        let options = open_options(
            &self.inner.home_root,
            &params.cwd,
            &params.additional_directories,
            &params.mcp_servers,
            self.editor_for(&id),
        );
        let reply: Reply<ResumeSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, _) = manager.open(&id, options?).await.map_err(|e| session_error(e, &manager))?;
            mcp::watch(&inner, &session);
            advertise(&inner, &id, session.status().1.usage);
            inbox::serve(&inner, &session);
            let (settings, config_options) = inner.options_of(&session);
            Ok(ResumeSessionResponse {
                config_options: Some(config_options),
                meta: None,
                modes: Some(convert::modes(&settings)),
            })
        });
        reply
    }

    fn session_list(
        &self,
        params: ListSessionsRequest,
    ) -> impl Future<Output = Result<ListSessionsResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let reply: Reply<ListSessionsResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            if let Some(cwd) = &params.cwd {
                absolute(cwd, "cwd")?;
            }
            let page =
                manager.list(params.cwd, params.cursor).await.map_err(|e| session_error(e, &manager))?;
            Ok(ListSessionsResponse {
                meta: None,
                next_cursor: page.next_cursor,
                sessions: page
                    .sessions
                    .into_iter()
                    .map(|s| SessionInfo {
                        meta: listed_goal(s.goal.as_ref()),
                        additional_directories: s.additional_directories,
                        cwd: s.cwd,
                        session_id: SessionId(s.id),
                        title: s.title,
                        updated_at: Some(s.updated_at),
                    })
                    .collect(),
            })
        });
        reply
    }

    fn session_close(
        &self,
        params: CloseSessionRequest,
    ) -> impl Future<Output = Result<CloseSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let reply: Reply<CloseSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            manager.close(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
            Ok(CloseSessionResponse { meta: None })
        });
        reply
    }

    fn session_delete(
        &self,
        params: DeleteSessionRequest,
    ) -> impl Future<Output = Result<DeleteSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let reply: Reply<DeleteSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            manager.delete(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
            Ok(DeleteSessionResponse { meta: None })
        });
        reply
    }

    fn session_fork(
        &self,
        params: ForkSessionRequest,
    ) -> impl Future<Output = Result<ForkSessionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let options = open_options(
            &self.inner.home_root,
            &params.cwd,
            &params.additional_directories,
            &params.mcp_servers,
            Arc::new(NoEditor),
        );
        let agent = self.clone();
        let reply: Reply<ForkSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session =
                manager.fork(&params.session_id.0, options?).await.map_err(|e| session_error(e, &manager))?;
            session.attach(agent.editor_for(session.id()));
            mcp::watch(&inner, &session);
            advertise_commands(&inner, session.id());
            inbox::serve(&inner, &session);
            let (settings, config_options) = inner.options_of(&session);
            Ok(ForkSessionResponse {
                config_options: Some(config_options),
                meta: None,
                modes: Some(convert::modes(&settings)),
                session_id: SessionId(session.id().to_owned()),
            })
        });
        reply
    }

    fn session_set_mode(
        &self,
        params: SetSessionModeRequest,
    ) -> impl Future<Output = Result<SetSessionModeResponse, RpcError>> + Send + 'static {
        let session = self.session(&params.session_id);
        let inner = self.inner.clone();
        let reply: Reply<SetSessionModeResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session = session?;
            let mode = params.mode_id.0;
            session
                .configure(|s, c| settings::apply_all(s, settings::mode_changes(&mode)?, c))
                .await
                .map_err(|e| session_error(e, &manager).at_field("modeId"))?;
            announce_settings(&inner, &session).await?;
            Ok(SetSessionModeResponse { meta: None })
        });
        reply
    }

    fn session_set_config_option(
        &self,
        params: SetSessionConfigOptionRequest,
    ) -> impl Future<Output = Result<SetSessionConfigOptionResponse, RpcError>> + Send + 'static {
        let inner = self.inner.clone();
        let request = match params {
            SetSessionConfigOptionRequest::ValueId(v) => {
                settings::config_id(&v.config_id.0).map(|option| (v.session_id, option, v.value.0))
            }
            SetSessionConfigOptionRequest::Boolean(b) => Err(RpcError::invalid_params(
                "value",
                format!("`{}` takes a value id, not a boolean", b.config_id.0),
            )),
        };
        let session = request.as_ref().map_err(Clone::clone).and_then(|(id, _, _)| self.session(id));
        let reply: Reply<SetSessionConfigOptionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (_, option, value) = request?;
            let session = session?;
            let before = session.state().settings;
            session
                .configure(|s, c| settings::apply_all(s, settings::option_changes(option, &value)?, c))
                .await
                .map_err(|e| session_error(e, &manager))?;
            if session.state().settings.mode != before.mode {
                let (settings, _) = inner.options_of(&session);
                inner.send(session.id(), mode_update(&settings)).await?;
            }
            inner.status.sync(&inner.client, &session).await;
            let (_, config_options) = inner.options_of(&session);
            Ok(SetSessionConfigOptionResponse { config_options, meta: None })
        });
        reply
    }

    fn session_set_model(
        &self,
        params: SetSessionModelRequest,
    ) -> impl Future<Output = Result<SetSessionModelResponse, RpcError>> + Send + 'static {
        let session = self.session(&params.session_id);
        let inner = self.inner.clone();
        let reply: Reply<SetSessionModelResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session = session?;
            let model = params.model_id.0;
            session
                .configure(|s, c| s.apply(ConfigId::Model, &model, c))
                .await
                .map_err(|e| session_error(e, &manager).at_field("modelId"))?;
            announce_settings(&inner, &session).await?;
            Ok(SetSessionModelResponse { meta: None })
        });
        reply
    }

    fn session_prompt(
        &self,
        params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        // A prompt that is one of Heron's slash commands runs here, without the model.
        if let [heron_protocol::ContentBlock::Text(text)] = params.prompt.as_slice()
            && let Some(invocation) = heron_core::session::commands::parse(&text.text)
        {
            let session = self.session(&params.session_id);
            let inner = self.inner.clone();
            let reply: Reply<PromptResponse> = Box::pin(async move {
                let session = session?;
                run_command(&inner, &session, &invocation).await?;
                Ok(PromptResponse { meta: None, stop_reason: heron_protocol::StopReason::EndTurn })
            });
            return reply;
        }
        // Queue the prompt now, in arrival order; stream its updates in the future.
        let started = self.session(&params.session_id).and_then(|session| {
            let input = convert::prompt_input(params.prompt)?;
            let (updates, stream) = mpsc::unbounded_channel();
            let queued = session.prompt(input, updates);
            // If this request is dropped ($/cancel_request), even before its future first
            // runs, this prompt alone is cancelled.
            let guard = CancelOnDrop(Some(queued.cancel));
            Ok((session, stream, queued.result, guard, queued.delivered))
        });
        let inner = self.inner.clone();
        let reply: Reply<PromptResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, mut stream, result, guard, delivered) = started?;
            while let Some(update) = stream.recv().await {
                inbox::forward(&inner, session.id(), update).await;
            }
            let outcome = result.await.map_err(|_| RpcError::internal(&"the session stopped"))?;
            guard.disarm();
            // The session's next turn starts once this answer is queued, never before.
            heron_rpc::after_response(async move { delivered.done() });
            let stop = outcome.map_err(|e| prompt_error(e, manager.providers().keys()))?;
            let transcript = manager.transcript_path(session.id());
            Ok(PromptResponse {
                meta: Some(
                    json!({ "heron": { "transcriptPath": transcript.display().to_string() } })
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
                stop_reason: convert::stop_reason(stop),
            })
        });
        reply
    }

    fn session_cancel(
        &self,
        params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        // A cancel for an unknown or idle session is a silent no-op.
        if let Some(session) = self.inner.manager.now().and_then(|m| m.get(&params.session_id.0)) {
            session.cancel();
        }
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
    ) -> impl Future<Output = Result<HeronSessionSteerResponse, RpcError>> + Send + 'static {
        ready(vendor::steer(self, params))
    }

    fn heron_session_mcp_status(
        &self,
        params: HeronSessionMcpStatusRequest,
    ) -> impl Future<Output = Result<HeronSessionMcpStatusResponse, RpcError>> + Send + 'static {
        mcp::status(self, params)
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
    ) -> impl Future<Output = Result<HeronInboxEnqueueResponse, RpcError>> + Send + 'static {
        inbox::enqueue(self, params)
    }

    fn heron_inbox_list(
        &self,
        params: HeronInboxListRequest,
    ) -> impl Future<Output = Result<HeronInboxListResponse, RpcError>> + Send + 'static {
        inbox::list(self, params)
    }

    fn heron_inbox_get(
        &self,
        params: HeronInboxGetRequest,
    ) -> impl Future<Output = Result<HeronInboxGetResponse, RpcError>> + Send + 'static {
        inbox::get(self, params)
    }

    fn heron_inbox_update(
        &self,
        params: HeronInboxUpdateRequest,
    ) -> impl Future<Output = Result<HeronInboxUpdateResponse, RpcError>> + Send + 'static {
        inbox::update(self, params)
    }

    fn heron_inbox_delete(
        &self,
        params: HeronInboxDeleteRequest,
    ) -> impl Future<Output = Result<HeronInboxDeleteResponse, RpcError>> + Send + 'static {
        inbox::delete(self, params)
    }

    fn heron_inbox_move(
        &self,
        params: HeronInboxMoveRequest,
    ) -> impl Future<Output = Result<HeronInboxMoveResponse, RpcError>> + Send + 'static {
        inbox::move_item(self, params)
    }

    fn heron_inbox_set_paused(
        &self,
        params: HeronInboxSetPausedRequest,
    ) -> impl Future<Output = Result<HeronInboxSetPausedResponse, RpcError>> + Send + 'static {
        inbox::set_paused(self, params)
    }

    fn heron_inbox_retry(
        &self,
        params: HeronInboxRetryRequest,
    ) -> impl Future<Output = Result<HeronInboxRetryResponse, RpcError>> + Send + 'static {
        inbox::retry(self, params)
    }

    fn heron_inbox_refresh(
        &self,
        params: HeronInboxRefreshRequest,
    ) -> impl Future<Output = Result<HeronInboxRefreshResponse, RpcError>> + Send + 'static {
        inbox::refresh(self, params)
    }
}

/// `_meta.heron.goal` of a listed session that has a goal.
fn listed_goal(stored: Option<&serde_json::Value>) -> Option<serde_json::Map<String, serde_json::Value>> {
    let goal = serde_json::from_value::<heron_core::session::goal::Goal>(stored?.clone()).ok()?;
    json!({ "heron": { "goal": status::goal(&goal) } }).as_object().cloned()
}

struct CancelOnDrop(Option<tokio_util::sync::CancellationToken>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}
