//! Sessions: the manager that creates, opens, lists, forks, closes and deletes them, and
//! one actor per open session that runs its turns in order. Knows nothing of ACP.
//!
//! Prompts are queued in arrival order: [`Session::prompt`] is synchronous, so the order
//! the editor sent them in is the order they run in. [`Session::cancel`] ends the running
//! turn and every queued one with `Cancelled`. Settings change at once, outside the
//! actor (invariant 3 in `docs/architecture.md` says why), and apply from the next turn
//! on: a turn keeps the settings it started with. The goal, steering input and the
//! status board are shared with the running turn; changes to them also happen at once
//! (steering is committed to the store first).
//! When no prompt runs or waits, the actor runs the session's durable inbox (`inbox`).

mod actor;
mod actor_context;
pub mod attachments;
mod calls;
pub mod checkpoints;
pub mod commands;
pub mod event;
pub mod goal;
pub mod history_budget;
pub mod inbox;
mod loading;
mod lock;
mod manager;
mod mcp_commands;
mod opening;
pub mod outbound;
mod outcome;
pub mod queue_budget;
pub mod reload;
mod sampling;
mod seats;
pub mod settings;
pub mod side_effects;
pub mod snapshot;
mod status;
pub mod subagent;
mod submit;
mod title;
mod tokens;
mod turn;
pub mod update;
mod watched;
pub mod working;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use self::event::Event;
use self::goal::Goal;
use self::inbox::Inbox;
use self::inbox::steer::Steers;
use self::reload::{ReloadRequest, ReloadSlot};
use self::settings::{Choices, Posture, SettingError, Settings};
use self::snapshot::Snapshot;
use self::status::Board;
pub use self::turn::TurnError;
use self::turn::permission::Approvals;
use crate::extensions::{Catalog, LoadedSkills, Runtime, Shared};
use crate::llm::registry::ModelError;
use crate::tools::editor::EditorIo;
use crate::tools::mcp::McpHub;
use crate::types::{PromptInput, StopReason};
use heron_store::Store;

pub use loading::Loading;
pub use manager::{Manager, ManagerOptions};
pub use opening::{OpenOptions, OtherRoot, SessionError};
pub use seats::{MAX_OPEN_SESSIONS, max_open_sessions};
pub use submit::Submitted;
pub use turn::transcript::transcript_path;

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
    /// Saving an attachment failed, or it would pass a bound.
    #[error("cannot save an attachment: {0}")]
    Attachment(#[from] attachments::AttachmentError),
    /// The session was closed before the prompt ran.
    #[error("the session was closed")]
    Closed,
    /// An MCP server's prompt could not be fetched.
    #[error("the MCP prompt could not be fetched: {0}")]
    McpPrompt(String),
    /// The prompts waiting already fill their budget ([`queue_budget`]).
    #[error(
        "too many prompts are waiting: {} hold their budget of {} MiB; send this one once a turn has ended",
        if .0.process { "all sessions together" } else { "this session's" },
        .0.limit / (1024 * 1024)
    )]
    QueueFull(queue_budget::Full),
    /// The session's history, or that of every open session, has grown past its budget
    /// ([`history_budget`]): no turn starts.
    #[error("{0}")]
    HistoryFull(history_budget::HistoryFull),
}

/// What a queued job does.
enum Work {
    /// A prompt turn.
    Prompt(Vec<PromptInput>),
    /// A custom command's prompt: its expansion, and the line the user typed.
    Command {
        /// What the model is sent.
        prompt: Vec<PromptInput>,
        /// `/name argument`.
        invoked: String,
    },
    /// `/compact`, with the user's instructions for the summary.
    Compact(String),
    /// `/undo` or `/rewind N`.
    Rewind(checkpoints::Target),
    /// An MCP server's prompt, fetched when its turn starts, and the line the user typed.
    McpPrompt {
        /// Which prompt, with its arguments.
        call: crate::extensions::McpPromptCall,
        /// `/mcp:server:prompt argument`.
        invoked: String,
    },
}

struct Job {
    work: Work,
    /// Its place in the queue's byte budget, given back when the job is done with.
    _held: queue_budget::Held,
    /// Who asked for it, and where its ending goes.
    asker: outbound::Asker,
    generation: u64,
    /// Cancels this prompt alone, queued or running.
    cancel: CancellationToken,
}

/// A queued prompt: how it ends, and the token that cancels it alone. Its updates reach
/// whoever serves the session's [`outbound::Outbound`], when it runs.
#[derive(Debug)]
pub struct Queued {
    /// Resolves to how the prompt ended, once its updates are out.
    pub result: oneshot::Receiver<outbound::Ending>,
    /// Cancels this prompt only (a `$/cancel_request` for it).
    pub cancel: CancellationToken,
    /// For an editor told at once that the prompt was accepted (ACP v2): signal it once
    /// that answer is queued, and nothing of the prompt's run goes out before. Dropping it
    /// lets the run go out as soon as it starts.
    pub accepted: outbound::Sent,
}

impl Queued {
    /// A prompt refused as it was queued, for being past the queue budget `full`: it never
    /// runs, and its ending says why.
    pub(super) fn refused(full: queue_budget::Full) -> Queued {
        let (reply, result) = oneshot::channel();
        let _ = reply.send(outbound::Ending::never_ran(Err(PromptError::QueueFull(full))));
        Queued { result, cancel: CancellationToken::new(), accepted: outbound::Sent::default() }
    }
}

/// How a queued job shows: the line echoed as its user message, the id that message was
/// given, and whether its asker wants the text it says.
#[derive(Debug, Default)]
struct Shown {
    echo: Option<String>,
    id: Option<String>,
    said: bool,
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
    /// Boxed: a tokio channel allocates its first block of 32 messages when it is made,
    /// and 32 jobs held inline were 3.5 KiB of every idle session.
    jobs: mpsc::UnboundedSender<Box<Job>>,
    /// The session's runs, until whoever serves it takes them ([`Session::outbound`]).
    outbound: Mutex<Option<outbound::Outbound>>,
    /// Where what is answered outside the turns takes its place among the runs
    /// ([`Session::submit`]); dropped at close, so the stream ends with the actor.
    places: Mutex<Option<outbound::Runs>>,
    generation: AtomicU64,
    current: Mutex<CancellationToken>,
    closed: CancellationToken,
    store: Store,
    /// The highest posture allowed (`--permission-mode`).
    ceiling: Option<Posture>,
    /// The providers, commands and plugins this session's turns use; a reload replaces it.
    runtime: Shared<Runtime>,
    /// The session's custom commands and skills.
    catalog: Shared<Catalog>,
    /// The skills loaded so far, so a project's asks only before its first load.
    loaded_skills: Arc<LoadedSkills>,
    /// Places for subagents running at once (`task`), shared by the session's turns.
    subagents: Arc<tokio::sync::Semaphore>,
    reload: Arc<ReloadSlot>,
    editor: Mutex<Arc<dyn EditorIo>>,
    approvals: Arc<Mutex<Approvals>>,
    status: Arc<Board>,
    steers: Arc<Steers>,
    mcp: Arc<McpHub>,
    inbox: Arc<Inbox>,
    /// Tool calls that can be cancelled one by one.
    calls: Arc<calls::RunningCalls>,
    /// The bytes of the prompts it holds, running and waiting ([`queue_budget`]).
    queued_bytes: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

/// What a session offers when it opens: its runtime and commands, and the posture ceiling.
struct Offer {
    runtime: Arc<Runtime>,
    catalog: Arc<Catalog>,
    ceiling: Option<Posture>,
}

impl Session {
    fn spawn(
        id: String,
        state: State,
        history: Vec<Event>,
        context: actor_context::ActorContext,
        offer: Offer,
        editor: Arc<dyn EditorIo>,
        status: Board,
    ) -> Arc<Session> {
        let (jobs, queue) = mpsc::unbounded_channel();
        let (runs, outbound) = mpsc::unbounded_channel();
        // Cost and token totals carry on from the last stored report.
        let stored = status.current().1.usage;
        let cost = stored.as_ref().and_then(|u| u.cost.as_ref()).map_or(0.0, |(amount, _)| *amount);
        let currency = stored.as_ref().and_then(|u| u.cost.as_ref()).map(|(_, currency)| currency.clone());
        let cost_complete = stored.as_ref().is_none_or(|u| u.cost_complete);
        let tokens = stored.map(|u| u.tokens).unwrap_or_default();
        let status = Arc::new(status);
        let steers = Arc::new(Steers::new(id.clone(), context.store.clone()));
        let inbox = Arc::new(Inbox::new(id.clone(), context.store.clone(), status.clone(), steers.clone()));
        context.mcp.attach(Arc::new(watched::WatchedEditor::new(editor.clone(), status.clone())));
        // How many subagents run at once is fixed for the session when it opens.
        let subagent_cap = offer.runtime.providers().config().subagent_cap();
        let session = Arc::new(Session {
            id,
            state: Mutex::new(state),
            jobs,
            outbound: Mutex::new(Some(outbound::Outbound(outbound))),
            places: Mutex::new(Some(runs.clone())),
            generation: AtomicU64::new(0),
            current: Mutex::new(CancellationToken::new()),
            closed: CancellationToken::new(),
            store: context.store.clone(),
            ceiling: offer.ceiling,
            runtime: Shared::new(offer.runtime),
            catalog: Shared::new(offer.catalog),
            loaded_skills: Arc::default(),
            subagents: Arc::new(tokio::sync::Semaphore::new(subagent_cap)),
            reload: Arc::default(),
            editor: Mutex::new(editor),
            approvals: Arc::new(Mutex::new(Approvals::default())),
            status,
            steers,
            mcp: context.mcp.clone(),
            inbox: inbox.clone(),
            calls: Arc::default(),
            queued_bytes: Arc::default(),
        });
        let closed = session.closed.clone();
        let transcript = turn::transcript::Transcript::new(&context.transcripts, session.id());
        let carried = turn::Carried {
            history,
            cost,
            tokens,
            currency,
            cost_complete,
            images: Default::default(),
            transcript,
            calibration: Default::default(),
        };
        session.mcp.attach_sampler(Arc::new(sampling::SessionSampler::new(&session)));
        let reloads = session.reload.clone();
        let ends = actor::Ends { queue, runs };
        tokio::spawn(actor::run(Arc::downgrade(&session), closed, ends, carried, context, inbox, reloads));
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
        // The servers' elicitations wait on the user like a question does: on the board.
        self.mcp.attach(Arc::new(watched::WatchedEditor::new(editor.clone(), self.status.clone())));
        *self.editor.lock().unwrap_or_else(PoisonError::into_inner) = editor;
    }

    fn editor(&self) -> Arc<dyn EditorIo> {
        self.editor.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// What the settings may be changed to: the models of the session's runtime, up to the
    /// ceiling.
    pub fn choices(&self) -> Choices {
        manager::choices_of(self.runtime.get().providers().config(), self.ceiling)
    }

    /// The providers, commands and plugins the session's next turn uses.
    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.get()
    }

    /// The session's custom commands, and the problems found reading them.
    pub fn commands(&self) -> Arc<Catalog> {
        self.catalog.get()
    }

    /// Runs `/mcp` with `argument`: the reply for the user, and whether a server was turned
    /// off or on (the editor's options for them changed).
    pub async fn mcp_command(&self, argument: &str) -> (String, bool) {
        mcp_commands::run(&self.mcp, argument).await
    }

    /// Asks for a reload of the session's extensions (see `reload`): run now when the
    /// session is idle, queued (at most one) while a turn runs.
    pub fn reload(&self) -> ReloadRequest {
        self.reload.request()
    }

    /// The session's runs, in the order they run: taken once, by whoever serves the
    /// session (`None` after that). Nothing runs unforwarded: a session nobody serves still
    /// runs its prompts, and their updates wait for a server.
    pub fn outbound(&self) -> Option<outbound::Outbound> {
        self.outbound.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Queues a prompt; it runs after those queued before it, and its updates stream on
    /// its run ([`Session::outbound`]).
    pub fn prompt(&self, input: Vec<PromptInput>) -> Queued {
        self.queue(Work::Prompt(input), Shown::default())
    }

    /// Cancels one tool call of the running turn, pending behind earlier calls, waiting for
    /// approval or running; it ends cancelled (without starting, if it had not), the turn
    /// goes on, and the model reads that the user cancelled the call. False when no call
    /// with that id is pending, waiting or running.
    pub fn cancel_tool_call(&self, call_id: &str) -> bool {
        self.calls.cancel(call_id)
    }

    /// Queues `/compact`: once the prompts queued before it have run, the model summarizes
    /// the conversation so far (following `instructions`, which may be empty) and later
    /// requests start from that summary. It streams and answers like a prompt.
    pub fn compact(&self, instructions: String) -> Queued {
        self.queue(Work::Compact(instructions), Shown::default())
    }

    /// Queues `/undo` or `/rewind N`: once the prompts queued before it have run, the files
    /// Heron changed after that turn go back, each restore shown and approved like any file
    /// change. It streams and answers like a prompt.
    /// Its answer repeats the text the rewind's turn said ([`outbound::Ending::said`]).
    pub fn rewind(&self, target: checkpoints::Target) -> Queued {
        self.queue(Work::Rewind(target), Shown { said: true, ..Shown::default() })
    }

    fn queue(&self, work: Work, shown: Shown) -> Queued {
        let held = match queue_budget::admit(&self.queued_bytes, &work) {
            Ok(held) => held,
            Err(full) => return Queued::refused(full),
        };
        let (reply, result) = oneshot::channel();
        let cancel = CancellationToken::new();
        let (accepted, acceptance) = outbound::Sent::new();
        let asker = outbound::Asker {
            reply,
            echo: shown.echo,
            shown: shown.id,
            wants_said: shown.said,
            accepted: Some(acceptance),
        };
        let job = Job {
            work,
            _held: held,
            asker,
            generation: self.generation.load(Ordering::SeqCst),
            cancel: cancel.clone(),
        };
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Box::new(job)) {
            let _ = job.asker.reply.send(outbound::Ending::never_ran(Err(PromptError::Closed)));
        }
        Queued { result, cancel, accepted }
    }

    /// Cancels the running turn and every queued prompt.
    pub fn cancel(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.current.lock().unwrap_or_else(PoisonError::into_inner).cancel();
    }

    /// Cancels everything and stops the actor and the MCP servers (the returned task, for a
    /// caller that must wait for them). History stays in the store.
    pub fn close(&self) -> Option<tokio::task::JoinHandle<()>> {
        // Closed first: an actor whose turn ends by this cancel must find the session closed,
        // or it would take the next inbox item and start it only to have it interrupted.
        self.closed.cancel();
        self.places.lock().unwrap_or_else(PoisonError::into_inner).take();
        self.cancel();
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

    /// Gives the session a title if it has none yet (from its first prompt); the stored
    /// record's update time when it did.
    pub(super) async fn adopt_title(&self, title: String) -> Option<String> {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.title.is_some() {
                return None;
            }
            state.title = Some(title.clone());
        }
        let patch = heron_store::SessionPatch { title: Some(Some(title)), ..Default::default() };
        match self.store.update_session(&self.id, patch).await {
            Ok(record) => Some(record.updated_at),
            Err(err) => {
                tracing::warn!(%err, "storing the session's title failed");
                None
            }
        }
    }

    /// Changes one setting and stores the result; returns the new settings.
    pub async fn configure(
        &self,
        change: impl FnOnce(&mut Settings, &Choices) -> Result<(), SettingError>,
    ) -> Result<Settings, SessionError> {
        let settings = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let mut settings = state.settings.clone();
            change(&mut settings, &self.choices()).map_err(SessionError::Setting)?;
            state.settings = settings.clone();
            self.status.set_settings(&settings);
            settings
        };
        let value = serde_json::to_value(&settings).map_err(|e| SessionError::Internal(e.to_string()))?;
        let patch = heron_store::SessionPatch { settings: Some(value), ..Default::default() };
        self.store.update_session(&self.id, patch).await?;
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
        self.status.save(&self.store, &self.id).await?;
        Ok(goal)
    }

    /// The session's durable inbox.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// Adds user input to the running turn, or as a follow-up when none takes it
    /// (`steer`); committed to the store before this returns.
    pub async fn steer(&self, input: Vec<PromptInput>) -> Result<inbox::Enqueued, inbox::InboxError> {
        let new = inbox::NewItem {
            prompt: input,
            position: None,
            intent: inbox::InboxIntent::Steer,
            idempotency_key: None,
        };
        self.inbox.enqueue(new).await
    }
}
