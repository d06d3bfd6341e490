//! Sessions: the manager that creates, opens, lists, forks, closes and deletes them, and
//! one actor per open session that runs its turns in order. Knows nothing of ACP.
//!
//! Prompts are queued in arrival order: [`Session::prompt`] is synchronous, so the order
//! the editor sent them in is the order they run in. [`Session::cancel`] ends the running
//! turn and every queued one with `Cancelled`. Settings change at once, outside the
//! actor, and apply from the next model request on. The goal, steering input and the
//! status board are shared with the running turn; changes to them also happen at once.
//! When no prompt runs or waits, the actor runs the session's durable inbox (`inbox`).

pub mod commands;
pub mod event;
pub mod goal;
pub mod history;
pub mod inbox;
pub mod manager;
pub mod permission;
mod pursuit;
pub mod settings;
pub mod snapshot;
pub mod status;
pub mod steer;
pub mod turn;
pub mod update;
mod watched;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use self::event::Event;
use self::goal::Goal;
use self::inbox::Inbox;
use self::permission::Approvals;
use self::settings::{Choices, SettingError, Settings};
use self::snapshot::Snapshot;
use self::status::Board;
use self::steer::{SteerOutcome, Steers};
use self::turn::{Turn, TurnError};
use self::update::TurnUpdate;
use crate::llm::registry::{ModelError, Providers};
use crate::tools::editor::EditorIo;
use crate::tools::mcp::McpHub;
use crate::tools::roots::Roots;
use crate::tools::{Registry, ToolEnv};
use crate::types::{PromptInput, StopReason, UserContent};
use heron_store::Store;

pub use manager::{Manager, ManagerOptions, OpenOptions, SessionError};

/// How a prompt ended.
pub type PromptResult = Result<StopReason, PromptError>;

/// Why a prompt failed.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The turn started and then failed.
    #[error(transparent)]
    Turn(#[from] TurnError),
    /// The session's model cannot be used.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Saving an attachment failed.
    #[error("cannot save an attachment: {0}")]
    Attachment(String),
    /// The session was closed before the prompt ran.
    #[error("the session was closed")]
    Closed,
}

struct Job {
    input: Vec<PromptInput>,
    updates: mpsc::UnboundedSender<TurnUpdate>,
    reply: oneshot::Sender<PromptResult>,
    /// Resolves once the caller has passed the result on (or gave up on it).
    delivered: oneshot::Receiver<()>,
    generation: u64,
    /// Cancels this prompt alone, queued or running.
    cancel: CancellationToken,
}

/// A queued prompt: its result, the token that cancels it alone, and the handshake that
/// holds the session's next turn until this prompt's outcome has reached the client.
#[derive(Debug)]
pub struct Queued {
    /// Resolves to how the prompt ended.
    pub result: oneshot::Receiver<PromptResult>,
    /// Cancels this prompt only (a `$/cancel_request` for it).
    pub cancel: CancellationToken,
    /// Signal it (or drop it) once the result is on its way to the client.
    pub delivered: Delivered,
}

/// Lets the session start its next turn. Without it a client could see the next turn's
/// first updates before this prompt's answer, and take them for this prompt's.
#[derive(Debug)]
pub struct Delivered(oneshot::Sender<()>);

impl Delivered {
    /// The result has been handed on: the next turn may start.
    pub fn done(self) {
        let _ = self.0.send(());
    }
}

/// Mutable session state shared with the adapter.
#[derive(Debug, Clone)]
pub struct State {
    /// The settings.
    pub settings: Settings,
    /// The working directory.
    pub cwd: PathBuf,
    /// Extra workspace roots.
    pub additional_directories: Vec<PathBuf>,
    /// The title, once there is one.
    pub title: Option<String>,
}

/// An open session.
pub struct Session {
    id: String,
    state: Mutex<State>,
    jobs: mpsc::UnboundedSender<Job>,
    generation: AtomicU64,
    current: Mutex<CancellationToken>,
    closed: CancellationToken,
    store: Store,
    choices: Choices,
    editor: Mutex<Arc<dyn EditorIo>>,
    approvals: Arc<Mutex<Approvals>>,
    status: Arc<Board>,
    steers: Arc<Steers>,
    mcp: Arc<McpHub>,
    inbox: Arc<Inbox>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

/// What the actor needs beyond the session itself.
struct ActorContext {
    store: Store,
    providers: Arc<Providers>,
    tools: Arc<Registry>,
    transcripts: PathBuf,
    permission_timeout: std::time::Duration,
    witness: Option<Arc<dyn crate::tools::FileWitness>>,
    max_goal_continuations: u32,
    mcp: Arc<McpHub>,
}

impl Session {
    fn spawn(
        id: String,
        state: State,
        history: Vec<Event>,
        context: ActorContext,
        choices: Choices,
        editor: Arc<dyn EditorIo>,
        status: Board,
    ) -> Arc<Session> {
        let (jobs, queue) = mpsc::unbounded_channel();
        // Cost carries on from the last stored report.
        let cost = status.current().1.usage.and_then(|u| u.cost).map_or(0.0, |(amount, _)| amount);
        let status = Arc::new(status);
        let inbox = Arc::new(Inbox::new(id.clone(), context.store.clone(), status.clone()));
        let session = Arc::new(Session {
            id,
            state: Mutex::new(state),
            jobs,
            generation: AtomicU64::new(0),
            current: Mutex::new(CancellationToken::new()),
            closed: CancellationToken::new(),
            store: context.store.clone(),
            choices,
            editor: Mutex::new(editor),
            approvals: Arc::new(Mutex::new(Approvals::default())),
            status,
            steers: Arc::new(Steers::default()),
            mcp: context.mcp.clone(),
            inbox: inbox.clone(),
        });
        let closed = session.closed.clone();
        tokio::spawn(actor(Arc::downgrade(&session), closed, queue, history, context, cost, inbox));
        session
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A copy of the current state.
    pub fn state(&self) -> State {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Serves tool I/O through `editor` from now on (the session was opened by a new
    /// connection).
    pub fn attach(&self, editor: Arc<dyn EditorIo>) {
        *self.editor.lock().unwrap_or_else(PoisonError::into_inner) = editor;
    }

    fn editor(&self) -> Arc<dyn EditorIo> {
        self.editor.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What the settings may be changed to.
    pub fn choices(&self) -> &Choices {
        &self.choices
    }

    /// Queues a prompt; it runs after those queued before it. Updates stream to `updates`
    /// (closed when the turn ends, before the result is sent).
    pub fn prompt(&self, input: Vec<PromptInput>, updates: mpsc::UnboundedSender<TurnUpdate>) -> Queued {
        let (reply, result) = oneshot::channel();
        let (delivered, handed_on) = oneshot::channel();
        let cancel = CancellationToken::new();
        let job = Job {
            input,
            updates,
            reply,
            delivered: handed_on,
            generation: self.generation.load(Ordering::SeqCst),
            cancel: cancel.clone(),
        };
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(job) {
            let _ = job.reply.send(Err(PromptError::Closed));
        }
        Queued { result, cancel, delivered: Delivered(delivered) }
    }

    /// Cancels the running turn and every queued prompt.
    pub fn cancel(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.current.lock().unwrap_or_else(PoisonError::into_inner).cancel();
    }

    /// Cancels everything and stops the actor and the MCP servers (the returned task, for a
    /// caller that must wait for them). History stays in the store.
    pub fn close(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.cancel();
        self.closed.cancel();
        if self.mcp.is_empty() {
            return None;
        }
        let hub = self.mcp.clone();
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(runtime.spawn(async move { hub.shutdown().await }))
    }

    /// The session's MCP servers.
    pub fn mcp(&self) -> &Arc<McpHub> {
        &self.mcp
    }

    /// Changes one setting and stores the result; returns the new settings.
    pub async fn configure(
        &self,
        change: impl FnOnce(&mut Settings, &Choices) -> Result<(), SettingError>,
    ) -> Result<Settings, SessionError> {
        let settings = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let mut settings = state.settings.clone();
            change(&mut settings, &self.choices).map_err(SessionError::Setting)?;
            state.settings = settings.clone();
            self.status.set_settings(&settings);
            settings
        };
        let value = serde_json::to_value(&settings).map_err(|e| SessionError::Internal(e.to_string()))?;
        let patch = heron_store::SessionPatch { settings: Some(value), ..Default::default() };
        self.store
            .update_session(&self.id, patch)
            .await
            .map_err(|e| SessionError::Internal(e.to_string()))?;
        Ok(settings)
    }

    /// The session's status and its sequence number (which moves on every real change).
    pub fn status(&self) -> (u64, Snapshot) {
        self.status.current()
    }

    /// Pauses the goal: a running goal-mode turn stops after its current model step.
    pub async fn pause_goal(&self) -> Result<Goal, SessionError> {
        self.change_goal(goal::pause).await
    }

    /// Makes the goal active again; continuations resume with the next prompt.
    pub async fn resume_goal(&self) -> Result<Goal, SessionError> {
        self.change_goal(goal::resume).await
    }

    async fn change_goal(
        &self,
        change: fn(&mut Option<Goal>) -> Result<Goal, goal::GoalError>,
    ) -> Result<Goal, SessionError> {
        let goal = self.status.change(|s| change(&mut s.goal)).map_err(SessionError::Goal)?;
        self.status.save(&self.store, &self.id).await.map_err(|e| SessionError::Internal(e.to_string()))?;
        Ok(goal)
    }

    /// The session's durable inbox.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// Adds user input to the running turn, or to the next prompt when none runs.
    pub fn steer(&self, input: Vec<PromptInput>) -> SteerOutcome {
        self.steers.steer(input)
    }
}

/// What the actor runs next.
enum Next {
    Prompt(Job),
    Item(inbox::Claimed),
}

async fn actor(
    session: std::sync::Weak<Session>,
    closed: CancellationToken,
    mut queue: mpsc::UnboundedReceiver<Job>,
    mut history: Vec<Event>,
    context: ActorContext,
    mut cost: f64,
    inbox: Arc<Inbox>,
) {
    while !closed.is_cancelled() {
        // Prompts come first: the inbox runs only when none waits.
        let next = match queue.try_recv() {
            Ok(job) => Next::Prompt(job),
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => match inbox.claim().await {
                Some(item) => Next::Item(item),
                None => tokio::select! {
                    job = queue.recv() => match job {
                        Some(job) => Next::Prompt(job),
                        None => break,
                    },
                    () = inbox.woken() => continue,
                    () = closed.cancelled() => break,
                },
            },
        };
        let Some(session) = session.upgrade() else {
            if let Next::Item(item) = next {
                inbox.finish(&item.id, Ok(StopReason::Cancelled), true).await;
            }
            break;
        };
        match next {
            Next::Prompt(job) => run_prompt(&session, &context, job, &mut history, &mut cost).await,
            Next::Item(item) => run_item(&session, &context, item, &mut history, &mut cost).await,
        }
    }
    // Whatever is still queued is answered, never dropped silently.
    queue.close();
    while let Some(job) = queue.recv().await {
        let _ = job.reply.send(Ok(StopReason::Cancelled));
    }
}

/// Answers a prompt, then waits until its caller has handed the answer on (or the session
/// closed), so the next turn's updates cannot overtake it. The prompt's update stream is
/// closed first: its caller forwards updates until then.
async fn answer(
    reply: oneshot::Sender<PromptResult>,
    delivered: oneshot::Receiver<()>,
    updates: Option<mpsc::UnboundedSender<TurnUpdate>>,
    result: PromptResult,
    closed: &CancellationToken,
) {
    drop(updates);
    if reply.send(result).is_err() {
        return;
    }
    tokio::select! {
        _ = delivered => {}
        () = closed.cancelled() => {}
    }
}

async fn run_prompt(
    session: &Session,
    context: &ActorContext,
    job: Job,
    history: &mut Vec<Event>,
    cost: &mut f64,
) {
    // Prompts queued before a cancel, or cancelled alone, are answered without running.
    if job.generation < session.generation.load(Ordering::SeqCst)
        || session.closed.is_cancelled()
        || job.cancel.is_cancelled()
        || job.reply.is_closed()
    {
        answer(job.reply, job.delivered, Some(job.updates), Ok(StopReason::Cancelled), &session.closed).await;
        return;
    }
    // The job's own token runs the turn, so cancelling this prompt alone ends it too.
    let token = job.cancel.clone();
    *session.current.lock().unwrap_or_else(PoisonError::into_inner) = token.clone();
    // A cancel that raced the swap above still applies.
    if job.generation < session.generation.load(Ordering::SeqCst) {
        token.cancel();
    }
    let state = session.state();
    session.status.begin_turn(job.updates.clone());
    let result = run_job(session, context, state, job.input, job.updates, token, history, cost).await;
    export_transcript(&context.transcripts, session.id(), history);
    // The idle status goes out on the prompt's stream, before its answer.
    session.status.end_turn();
    answer(job.reply, job.delivered, None, result, &session.closed).await;
}

/// Runs an inbox item's turn like a prompt's, reporting to the inbox's stream, and records
/// how it ended.
async fn run_item(
    session: &Session,
    context: &ActorContext,
    item: inbox::Claimed,
    history: &mut Vec<Event>,
    cost: &mut f64,
) {
    // `session/cancel` reaches the item's turn through `current`; a delete through its token.
    *session.current.lock().unwrap_or_else(PoisonError::into_inner) = item.cancel.clone();
    session.status.begin_turn(item.updates.clone());
    let outcome = match item.input {
        Ok(input) => {
            let state = session.state();
            run_job(session, context, state, input, item.updates, item.cancel, history, cost)
                .await
                .map_err(|err| inbox::failure(&err, &context.providers))
        }
        Err(reason) => Err(format!("the stored prompt cannot be read: {reason}")),
    };
    export_transcript(&context.transcripts, session.id(), history);
    // The idle status, with the new counts, is the last thing the turn's stream carries.
    session.inbox.finish(&item.id, outcome, session.closed.is_cancelled()).await;
}

#[allow(clippy::too_many_arguments, reason = "the actor's loop state, passed once per turn")]
async fn run_job(
    session: &Session,
    context: &ActorContext,
    state: State,
    input: Vec<PromptInput>,
    updates: mpsc::UnboundedSender<TurnUpdate>,
    cancel: CancellationToken,
    history: &mut Vec<Event>,
    cost: &mut f64,
) -> PromptResult {
    let provider = context.providers.resolve(&state.settings.model)?;
    let prompt = save_attachments(&state.cwd, input).map_err(PromptError::Attachment)?;
    let roots = Arc::new(Roots::new(state.cwd.clone(), state.additional_directories.clone()));
    let secrets = Arc::new(context.providers.keys().all().cloned().collect::<Vec<_>>());
    let tools = with_mcp_tools(&context.tools, &session.mcp, &cancel).await;
    let turn = Turn {
        session_id: session.id.clone(),
        store: context.store.clone(),
        provider,
        tools,
        settings: state.settings,
        env: ToolEnv {
            cwd: state.cwd,
            roots,
            cancel,
            editor: Arc::new(watched::WatchedEditor::new(session.editor(), session.status.clone())),
            secrets,
            progress: crate::tools::Progress::default(),
            witness: context.witness.clone(),
        },
        approvals: session.approvals.clone(),
        permission_timeout: context.permission_timeout,
        updates,
        history: std::mem::take(history),
        cost: *cost,
        status: session.status.clone(),
        steers: session.steers.clone(),
        max_goal_continuations: context.max_goal_continuations,
    };
    let (outcome, new_history, new_cost) = turn.run(prompt).await;
    *history = new_history;
    *cost = new_cost;
    Ok(outcome?)
}

/// Saves binary prompt content under `<cwd>/.heron/attachments/` and refers to it by path.
fn save_attachments(cwd: &std::path::Path, input: Vec<PromptInput>) -> Result<Vec<UserContent>, String> {
    let dir = cwd.join(".heron").join("attachments");
    input
        .into_iter()
        .map(|item| match item {
            PromptInput::Content(content) => Ok(content),
            PromptInput::Attachment { image, mime_type, data, uri } => {
                std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                let extension = mime_type.rsplit('/').next().filter(|e| e.chars().all(char::is_alphanumeric));
                let name = format!("{}.{}", uuid::Uuid::new_v4(), extension.unwrap_or("bin"));
                let path = dir.join(name);
                std::fs::write(&path, &data).map_err(|e| e.to_string())?;
                let path = path.display().to_string();
                Ok(if image {
                    UserContent::Image { mime_type, path, uri }
                } else {
                    UserContent::Blob { uri: uri.unwrap_or_default(), mime_type: Some(mime_type), path }
                })
            }
        })
        .collect()
}

/// Writes the session's transcript (one JSON event per line) for people and tools to read.
fn export_transcript(dir: &std::path::Path, id: &str, history: &[Event]) {
    let mut text = String::new();
    for event in history {
        if let Ok(line) = serde_json::to_string(event) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    let path = transcript_path(dir, id);
    let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, text));
    if let Err(err) = written {
        tracing::warn!(%err, path = %path.display(), "cannot write the transcript");
    }
}

/// Where a session's transcript is written.
pub fn transcript_path(dir: &std::path::Path, id: &str) -> PathBuf {
    // Session ids are Heron's own UUIDs, but never trust a name to stay inside the directory.
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    dir.join(format!("{safe}.jsonl"))
}

/// The built-in tools plus those of the session's ready MCP servers; a turn first waits
/// for servers still starting (each gives up after its startup timeout), unless cancelled.
async fn with_mcp_tools(builtin: &Arc<Registry>, hub: &McpHub, cancel: &CancellationToken) -> Arc<Registry> {
    if hub.is_empty() {
        return builtin.clone();
    }
    tokio::select! {
        () = hub.started() => {}
        () = cancel.cancelled() => {}
    }
    let mut tools = (**builtin).clone();
    for tool in hub.tools() {
        tools.add(tool);
    }
    Arc::new(tools)
}
