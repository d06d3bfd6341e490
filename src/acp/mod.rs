//! The ACP adapter: Heron's implementation of the generated `Agent` trait. Besides
//! `protocol`, it is the only module that knows protocol types; it converts them to and
//! from the core's own types at this edge (`convert`).

pub mod convert;
pub mod editor;
pub mod errors;
pub mod policy;

use std::future::{Future, ready};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;
use tokio::sync::mpsc;

use self::editor::AcpEditor;
use self::errors::{WithField, prompt_error, session_error, unknown_session};
use crate::protocol::runtime::{ClientPeer, Outgoing};
use crate::protocol::{
    Agent, AgentCapabilities, AuthMethod, AuthMethodTerminal, AuthenticateRequest, AuthenticateResponse,
    CancelNotification, Client, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, ProtocolVersion, ResumeSessionRequest, ResumeSessionResponse, RpcError,
    SessionCapabilities, SessionId, SessionInfo, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse, SetSessionModelRequest, SetSessionModelResponse,
};
use crate::session::settings::Settings;
use crate::session::{Manager, OpenOptions, Session};
use crate::tools::editor::{EditorIo, NoEditor};

/// The session manager, built in the background so that `initialize` is answered at once.
/// Until it is ready no session can exist, so lookups simply find none.
#[derive(Debug, Clone)]
pub struct ManagerSlot(tokio::sync::watch::Receiver<Built>);

/// What building the manager gave: nothing yet, the manager, or why it failed.
pub type Built = Option<Result<Arc<Manager>, String>>;

impl ManagerSlot {
    /// A slot and the sender that fills it.
    pub fn new() -> (tokio::sync::watch::Sender<Built>, Self) {
        let (fill, slot) = tokio::sync::watch::channel(None);
        (fill, Self(slot))
    }

    /// A slot that is already filled.
    pub fn ready_now(manager: Arc<Manager>) -> Self {
        Self(tokio::sync::watch::channel(Some(Ok(manager))).1)
    }

    /// The manager, if it is built.
    pub fn now(&self) -> Option<Arc<Manager>> {
        match &*self.0.borrow() {
            Some(Ok(manager)) => Some(manager.clone()),
            _ => None,
        }
    }

    /// Waits for the manager; a failed start (a broken config) is reported to the caller.
    pub async fn ready(&self) -> Result<Arc<Manager>, RpcError> {
        let mut slot = self.0.clone();
        let built = slot
            .wait_for(Option::is_some)
            .await
            .map_err(|_| RpcError::internal(&"the session manager was never built"))?;
        match &*built {
            Some(Ok(manager)) => Ok(manager.clone()),
            Some(Err(reason)) => Err(RpcError::new(crate::protocol::error::INTERNAL_ERROR, reason.clone())
                .with_data(json!({ "code": "heron_home_unusable" }))),
            None => Err(RpcError::internal(&"the session manager was never built")),
        }
    }
}

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
    editor: Arc<dyn EditorIo>,
) -> Result<OpenOptions, RpcError> {
    let cwd = absolute(cwd, "cwd")?;
    // One bad entry refuses the whole request; nothing is silently dropped.
    let protected = [home_root.to_path_buf()];
    let additional_directories =
        crate::tools::roots::validate_additional_directories(additional, &cwd, &protected)
            .map_err(|e| errors::root_error(&e))?;
    Ok(OpenOptions { cwd, additional_directories, editor })
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

    fn options_of(&self, session: &Session) -> (Settings, Vec<crate::protocol::SessionConfigOption>) {
        let settings = session.state().settings;
        let options = convert::config_options(settings.options(session.choices()));
        (settings, options)
    }
}

/// Advertises the slash commands once the answer that made the session known is out
/// (a client drops updates for a session it does not know yet).
fn advertise_commands<O: Outgoing>(inner: &Arc<Inner<O>>, session_id: &str) {
    let inner = inner.clone();
    let id = session_id.to_owned();
    crate::rpc::after_response(async move {
        if let Err(err) = inner.send(&id, convert::available_commands()).await {
            tracing::debug!(%err, "could not advertise commands");
        }
    });
}

/// What Heron advertises: only what it serves.
fn capabilities() -> AgentCapabilities {
    AgentCapabilities {
        auth: None,
        load_session: Some(true),
        mcp_capabilities: Some(McpCapabilities { http: Some(false), meta: None, sse: Some(false) }),
        meta: None,
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
        *self.inner.client_capabilities.lock().unwrap_or_else(PoisonError::into_inner) = client;
        // The terminal method is only offered to clients that can run it.
        let auth_methods = if terminal_auth {
            vec![AuthMethod::Terminal(AuthMethodTerminal {
                args: vec!["--setup".to_owned()],
                description: Some("Choose a model provider and store its key".to_owned()),
                env: Default::default(),
                id: crate::protocol::AuthMethodId(SETUP_METHOD.to_owned()),
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
            Arc::new(NoEditor),
        );
        let agent = self.clone();
        let reply: Reply<NewSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session = manager.create(options?).await.map_err(|e| session_error(e, &manager))?;
            session.attach(agent.editor_for(session.id()));
            advertise_commands(&inner, session.id());
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
            self.editor_for(&id),
        );
        let reply: Reply<LoadSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, history) =
                manager.open(&id, options?).await.map_err(|e| session_error(e, &manager))?;
            // The whole history goes out before the answer.
            for event in &history {
                for update in convert::replay_updates(event) {
                    inner.send(&id, update).await?;
                }
            }
            advertise_commands(&inner, &id);
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
            self.editor_for(&id),
        );
        let reply: Reply<ResumeSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, _) = manager.open(&id, options?).await.map_err(|e| session_error(e, &manager))?;
            advertise_commands(&inner, &id);
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
                        additional_directories: s.additional_directories,
                        cwd: s.cwd,
                        meta: None,
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
            Arc::new(NoEditor),
        );
        let agent = self.clone();
        let reply: Reply<ForkSessionResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let session =
                manager.fork(&params.session_id.0, options?).await.map_err(|e| session_error(e, &manager))?;
            session.attach(agent.editor_for(session.id()));
            advertise_commands(&inner, session.id());
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
                .configure(|s, c| s.set_mode(&mode, c))
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
            SetSessionConfigOptionRequest::ValueId(v) => Ok((v.session_id, v.config_id.0, v.value.0)),
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
                .configure(|s, c| s.apply(&option, &value, c))
                .await
                .map_err(|e| session_error(e, &manager))?;
            if session.state().settings.mode != before.mode {
                let (settings, _) = inner.options_of(&session);
                inner.send(session.id(), mode_update(&settings)).await?;
            }
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
                .configure(|s, c| s.apply("model", &model, c))
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
        if let [crate::protocol::ContentBlock::Text(text)] = params.prompt.as_slice()
            && let Some(invocation) = crate::session::commands::parse(&text.text)
        {
            let session = self.session(&params.session_id);
            let inner = self.inner.clone();
            let reply: Reply<PromptResponse> = Box::pin(async move {
                let session = session?;
                run_command(&inner, &session, &invocation).await?;
                Ok(PromptResponse { meta: None, stop_reason: crate::protocol::StopReason::EndTurn })
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
            Ok((session, stream, queued.result, guard))
        });
        let inner = self.inner.clone();
        let reply: Reply<PromptResponse> = Box::pin(async move {
            let manager = inner.manager.ready().await?;
            let (session, mut stream, result, guard) = started?;
            while let Some(update) = stream.recv().await {
                for update in convert::turn_updates(update) {
                    // A client that stopped reading does not stop the turn.
                    let _ = inner.send(session.id(), update).await;
                }
            }
            let outcome = result.await.map_err(|_| RpcError::internal(&"the session stopped"))?;
            guard.disarm();
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
}

fn mode_update(settings: &Settings) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(crate::protocol::CurrentModeUpdate {
        current_mode_id: crate::protocol::SessionModeId(settings.mode.id().to_owned()),
        meta: None,
    })
}

/// Tells the editor the settings changed: the mode, and the full config options.
async fn announce_settings<O: Outgoing>(inner: &Inner<O>, session: &Session) -> Result<(), RpcError> {
    let (settings, config_options) = inner.options_of(session);
    inner.send(session.id(), mode_update(&settings)).await?;
    inner
        .send(
            session.id(),
            SessionUpdate::ConfigOptionUpdate(crate::protocol::ConfigOptionUpdate {
                config_options,
                meta: None,
            }),
        )
        .await
}

/// Runs a slash command and answers with its reply as an agent message.
async fn run_command<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
    invocation: &crate::session::commands::Invocation,
) -> Result<(), RpcError> {
    let mut outcome = None;
    let result = session
        .configure(|settings, choices| {
            outcome = Some(crate::session::commands::run(invocation, settings, choices));
            // A refused command changes nothing: report it as a setting error to roll back.
            match &outcome {
                Some(Err(reason)) => Err(crate::session::settings::SettingError::UnknownValue {
                    option: invocation.name.clone(),
                    value: reason.clone(),
                }),
                _ => Ok(()),
            }
        })
        .await;
    let (reply, changed) = match (outcome, result) {
        (Some(Ok(ran)), Ok(_)) => (ran.reply, ran.settings_changed),
        (Some(Err(reason)), _) => (reason, false),
        (_, Err(err)) => (err.to_string(), false),
        (None, Ok(_)) => (String::new(), false),
    };
    let message_id = uuid::Uuid::new_v4().to_string();
    inner.send(session.id(), convert::agent_message(&message_id, reply)).await?;
    if changed {
        announce_settings(inner, session).await?;
    }
    Ok(())
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
