//! A session's actor: the one task that runs its turns, in order. Prompts come first; when
//! none runs or waits it takes the next inbox item. Each job reaches the session's
//! outbound stream as one run, in the order the actor runs them, and every prompt is
//! answered exactly once, through its run; the actor never waits for that answer. A
//! reload of the session's extensions (`reload`) runs here too, between turns, never
//! beside one; each turn reads the session's runtime when it starts, so the one after a
//! reload uses it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::actor_context::ActorContext;
use super::inbox::{self, Inbox};
use super::outbound::{Ending, Origin, Run, Runs};
use super::turn::limits::Limits;
use super::turn::{Carried, Turn, TurnIo, TurnPolicy, TurnShared};
use super::update::ChunkBudget;
use super::update::TurnUpdate;
use super::{Job, PromptError, PromptResult, Session, State, Work, attachments, reload, watched};
use crate::extensions::LoadSkill;
use crate::tools::mcp::McpHub;
use crate::tools::protected::Protected;
use crate::tools::roots::Roots;
use crate::tools::{Registry, ToolEnv};
use crate::types::{StopReason, UserContent};

/// What the actor runs next.
enum Next {
    Prompt(Box<Job>),
    Item(inbox::Claimed),
}

/// The actor's two ends: the jobs it takes, and the stream it reports each run on.
pub(super) struct Ends {
    pub(super) queue: mpsc::UnboundedReceiver<Box<Job>>,
    pub(super) runs: Runs,
}

pub(super) async fn run(
    session: std::sync::Weak<Session>,
    closed: CancellationToken,
    ends: Ends,
    mut carried: Carried,
    context: ActorContext,
    inbox: Arc<Inbox>,
    reloads: Arc<reload::ReloadSlot>,
) {
    let Ends { mut queue, runs } = ends;
    while !closed.is_cancelled() {
        // A reload asked for while idle runs before anything else is taken.
        if let Some(waiting) = reloads.take() {
            let Some(session) = session.upgrade() else { break };
            Box::pin(reload::run(&session, &context, &runs, waiting)).await;
            continue;
        }
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
                    () = reloads.woken() => continue,
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
        // A reload that came in meanwhile still goes first; one asked for from now on,
        // while this turn runs, waits for its end.
        while let Err(waiting) = reloads.begin_turn() {
            Box::pin(reload::run(&session, &context, &runs, waiting)).await;
        }
        // Boxed: the turn's machinery is large, and inline it would make every idle actor
        // that large for its whole life (1,000 open sessions are mostly idle actors).
        match next {
            Next::Prompt(job) => Box::pin(run_prompt(&session, &context, &runs, *job, &mut carried)).await,
            Next::Item(item) => Box::pin(run_item(&session, &context, &runs, item, &mut carried)).await,
        }
        reloads.end_turn();
    }
    // Whatever is still queued is answered, never dropped silently.
    queue.close();
    while let Some(job) = queue.recv().await {
        let _ = job.asker.reply.send(Ending::never_ran(Ok(StopReason::Cancelled)));
    }
    let large = carried.history.len() >= GIVE_BACK_AFTER_EVENTS;
    drop(carried);
    if large {
        give_back_memory().await;
    }
}

/// How long a closed session's history must have been for its memory to be handed back
/// to the system when it ends: below this, what it freed is reused by the next turns.
const GIVE_BACK_AFTER_EVENTS: usize = 1_000;

/// Returns the heap's free pages to the system. glibc keeps what a large history freed
/// (one arena, fragmented by the allocations made while it was loaded), so a closed
/// session's memory stayed with the process; trimming walks the heap, so it runs off the
/// async threads.
async fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases free memory of the allocator's own heap.
        let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
    }
}

/// Starts a run on the session's outbound stream: its updates go to the sender returned,
/// and how it ended to the other.
fn start_run(
    runs: &Runs,
    origin: Origin,
    forwarded: Option<tokio_util::sync::DropGuard>,
) -> (mpsc::UnboundedSender<TurnUpdate>, oneshot::Sender<PromptResult>) {
    let (updates, stream) = mpsc::unbounded_channel();
    let (ended, result) = oneshot::channel();
    // With nobody serving the session any more, the run has no reader: it ends unseen.
    let _ = runs.send(Box::new(Run::new(origin, stream, result, forwarded)));
    (updates, ended)
}

async fn run_prompt(session: &Session, context: &ActorContext, runs: &Runs, job: Job, carried: &mut Carried) {
    let Job { work, _held, asker, generation, cancel } = job;
    // The work records the user's message itself unless its line is echoed for it.
    let recorded = asker.echo.is_none();
    let shown = asker.shown.clone().filter(|_| recorded);
    let stale = generation < session.generation.load(Ordering::SeqCst)
        || session.closed.is_cancelled()
        || cancel.is_cancelled()
        || asker.reply.is_closed();
    let (updates, ended) = start_run(runs, Origin::Asked(asker), None);
    // Prompts queued before a cancel, or cancelled alone, end without running.
    if stale {
        drop(updates);
        let _ = ended.send(Ok(StopReason::Cancelled));
        return;
    }
    // The job's own token runs the turn, so cancelling this prompt alone ends it too.
    let token = cancel;
    *session.current.lock().unwrap_or_else(PoisonError::into_inner) = token.clone();
    // A cancel that raced the swap above still applies.
    if generation < session.generation.load(Ordering::SeqCst) {
        token.cancel();
    }
    let state = session.state();
    session.status.begin_turn(updates.clone());
    // An editor that shows what it sent itself does not get its prompt echoed back; one that
    // shows only what the agent reports (ACP v2) gets it under the id it was given.
    let prompted = Prompted { work, updates, cancel: token, echo: shown.is_some(), message_id: shown };
    let result = run_job(session, context, state, prompted, carried).await;
    carried.transcript.sync(&carried.history).await;
    // The idle status goes out on the prompt's run, before its end.
    session.status.end_turn();
    let _ = ended.send(result);
}

/// Runs an inbox item's turn like a prompt's, as a run of its own, and records how it
/// ended.
async fn run_item(
    session: &Session,
    context: &ActorContext,
    runs: &Runs,
    item: inbox::Claimed,
    carried: &mut Carried,
) {
    let (updates, ended) = start_run(runs, Origin::Inbox, Some(item.forwarded));
    // `session/cancel` reaches the item's turn through `current`; a delete through its token.
    *session.current.lock().unwrap_or_else(PoisonError::into_inner) = item.cancel.clone();
    session.status.begin_turn(updates.clone());
    let outcome = match item.input {
        Ok(input) => {
            let state = session.state();
            // Nobody typed an inbox item in this editor: it is shown like a prompt.
            let prompted = Prompted {
                work: Work::Prompt(input),
                updates,
                cancel: item.cancel,
                echo: true,
                message_id: None,
            };
            run_job(session, context, state, prompted, carried)
                .await
                .map_err(|err| inbox::failure(&err, session.runtime().providers()))
        }
        Err(reason) => {
            drop(updates);
            Err(format!("the stored prompt cannot be read: {reason}"))
        }
    };
    carried.transcript.sync(&carried.history).await;
    // The idle status, with the new counts, is the last thing the turn's stream carries.
    session.inbox.finish(&item.id, outcome, session.closed.is_cancelled()).await;
    // An item has nobody to answer: its run ends cancelled or done alike.
    let _ = ended.send(Ok(StopReason::EndTurn));
}

/// A prompt about to run: what was asked, where its updates go, what cancels it.
struct Prompted {
    work: Work,
    updates: mpsc::UnboundedSender<TurnUpdate>,
    cancel: CancellationToken,
    /// Whether the prompt is shown as a user message (see [`Turn::echo_prompt`]).
    echo: bool,
    /// The id of that user message, when the client was already given one.
    message_id: Option<String>,
}

/// A job with its attachments saved, ready for its turn: the prompt, and the custom
/// command line it expands, if it does.
enum Ready {
    Prompt(Vec<UserContent>, Option<String>),
    Compact(String),
    Rewind(super::checkpoints::Target),
}

/// How long an MCP server may take to expand a prompt (`/mcp:<server>:<prompt>`).
const MCP_PROMPT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

async fn run_job(
    session: &Session,
    context: &ActorContext,
    state: State,
    prompted: Prompted,
    carried: &mut Carried,
) -> PromptResult {
    let Prompted { work, updates, cancel, echo: echo_prompt, message_id } = prompted;
    // A history past its budget starts no turn: nothing is saved, titled or recorded.
    context.history.check().map_err(PromptError::HistoryFull)?;
    // The runtime as the turn starts: a reload later in the turn does not change it.
    let runtime = session.runtime();
    let providers = runtime.providers();
    let provider = providers.resolve(&state.settings.model)?;
    let work = match work {
        Work::Prompt(input) => {
            Ready::Prompt(attachments::save(&state.cwd, input).await.map_err(PromptError::Attachment)?, None)
        }
        Work::Command { prompt, invoked } => Ready::Prompt(
            attachments::save(&state.cwd, prompt).await.map_err(PromptError::Attachment)?,
            Some(invoked),
        ),
        Work::Compact(instructions) => Ready::Compact(instructions),
        Work::Rewind(target) => Ready::Rewind(target),
        Work::McpPrompt { call, invoked } => {
            // The server is a peer: its answer is awaited within a deadline, and a cancel
            // of the prompt ends the wait.
            let fetched = tokio::select! {
                fetched = tokio::time::timeout(MCP_PROMPT_WAIT, session.mcp.get_prompt(&call.server, &call.name, call.arguments)) => fetched,
                () = cancel.cancelled() => return Ok(StopReason::Cancelled),
            };
            let text = fetched
                .map_err(|_| {
                    PromptError::McpPrompt(format!(
                        "the MCP server `{}` did not answer within {} s",
                        call.server,
                        MCP_PROMPT_WAIT.as_secs()
                    ))
                })?
                .map_err(PromptError::McpPrompt)?;
            Ready::Prompt(vec![UserContent::Text { text }], Some(invoked))
        }
    };
    // A session nobody titled (`--title`) is named by its first prompt, or the command line
    // that stands for it.
    if let Ready::Prompt(prompt, invoked) = &work
        && state.title.is_none()
    {
        let typed = invoked.as_ref().map(|line| vec![UserContent::Text { text: line.clone() }]);
        if let Some(title) =
            super::title::from_prompt(typed.as_ref().unwrap_or(prompt), providers.keys().all())
            && let Some(updated_at) = session.adopt_title(title.clone()).await
        {
            let _ = updates.send(TurnUpdate::Titled { title, updated_at });
        }
    }
    let roots =
        Arc::new(confinement(providers.home().root(), &state.cwd, &state.additional_directories).await?);
    let secrets = Arc::new(providers.keys().all().cloned().collect::<Vec<_>>());
    let sandbox = reload::sandbox(&runtime, roots.all().to_vec());
    let config = providers.config();
    let permission_timeout = context.permission_timeout.unwrap_or_else(|| config.permission_timeout());
    let limits = Limits {
        max_reply_bytes: config.reply_cap(),
        max_reply_tokens: context.max_reply_tokens,
        max_tool_calls: config.tool_call_cap(),
        max_tool_result_bytes: config.tool_result_cap(),
        ..Limits::default()
    };
    let tools = with_mcp_tools(&context.tools, &session.mcp, &cancel).await;
    // The skills as the turn starts, like the runtime: a reload changes the next turn's.
    let catalog = session.commands();
    let skills = catalog.skill_listing().map(Arc::from);
    let tools = match LoadSkill::for_catalog(catalog, session.loaded_skills.clone()) {
        Some(load_skill) => {
            let mut with_skills = (*tools).clone();
            with_skills.add(Arc::new(load_skill));
            Arc::new(with_skills)
        }
        None => tools,
    };
    // Subagents get the turn's read-only tools, which never include `task` itself.
    let task = super::subagent::Task {
        model: provider.clone(),
        providers: providers.clone(),
        tools: tools.clone(),
        status: session.status.clone(),
        bounds: super::subagent::Bounds {
            running: session.subagents.clone(),
            max_steps: config.subagent_steps(),
            max_time: config.subagent_time(),
        },
        gate: super::subagent::Gate {
            posture: state.settings.posture,
            plan: state.settings.mode == super::settings::Mode::Plan,
            approvals: session.approvals.clone(),
            timeout: permission_timeout,
        },
        transcript: carried.transcript.path().map(std::path::Path::to_path_buf),
    };
    let tools = {
        let mut with_task = (*tools).clone();
        with_task.add(Arc::new(task));
        Arc::new(with_task)
    };
    let command = match &work {
        Ready::Prompt(_, invoked) => invoked.clone(),
        Ready::Compact(_) | Ready::Rewind(_) => None,
    };
    let turn = Turn {
        policy: TurnPolicy {
            provider,
            tools,
            settings: state.settings,
            permission_timeout,
            max_goal_continuations: config.goal_continuations(),
            limits,
            append_system_prompt: context.append_system_prompt.clone(),
            skills,
            verify_command: config.verify_command.as_deref().map(Arc::from),
            echo_prompt,
            prompt_message_id: message_id,
            command,
        },
        shared: TurnShared {
            session_id: session.id.clone(),
            store: context.store.clone(),
            approvals: session.approvals.clone(),
            status: session.status.clone(),
            steers: session.steers.clone(),
            calls: session.calls.clone(),
            history: context.history.clone(),
        },
        io: TurnIo {
            env: ToolEnv {
                cwd: state.cwd,
                roots,
                cancel,
                editor: Arc::new(watched::WatchedEditor::new(session.editor(), session.status.clone())),
                secrets,
                sandbox,
                progress: crate::tools::Progress::default(),
                witness: context.witness.clone(),
                deadlines: config.deadlines(),
            },
            updates,
            budget: ChunkBudget::new(),
        },
        carried: std::mem::take(carried),
        unstored: Vec::new(),
        before_commands: None,
    };
    let (outcome, after) = match work {
        Ready::Prompt(prompt, _) => {
            session.steers.open().await;
            turn.run(prompt).await
        }
        Ready::Compact(instructions) => turn.compact(instructions).await,
        Ready::Rewind(target) => turn.rewind(target).await,
    };
    *carried = after;
    // Steering the turn never applied becomes a follow-up, held back after a stop.
    session.inbox.settle_steers(matches!(outcome, Ok(StopReason::Cancelled))).await;
    Ok(outcome?)
}

/// The roots a turn's tools are confined to, with Heron's home kept out of reach, read
/// afresh for every turn: the home's files are protected by inode, so a file created there
/// since the last turn (a new `.env`) must be in the set, and a root may have been replaced
/// since. Both read the file system, so it runs on the blocking pool.
async fn confinement(home: &Path, cwd: &Path, additional: &[PathBuf]) -> Result<Roots, PromptError> {
    let (home, cwd, additional) = (home.to_path_buf(), cwd.to_path_buf(), additional.to_vec());
    let reading = tokio::task::spawn_blocking(move || {
        Roots::new(cwd, additional).protecting(Protected::for_home(&home))
    });
    match reading.await {
        Ok(roots) => Ok(roots),
        // A panic there is one here, as when this ran inline.
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        // Only a runtime shutting down cancels a blocking task: the session is closing.
        Err(_) => Err(PromptError::Closed),
    }
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
    for (prefix, why) in hub.unavailable() {
        tools.mark_unavailable(prefix, why);
    }
    Arc::new(tools)
}
