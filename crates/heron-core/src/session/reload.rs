//! Reloading a session's extensions ([`super::Session::reload`]): config, providers,
//! commands, plugins and the plugins' MCP servers, all or nothing.
//!
//! A reload runs in the session's actor, never beside a turn. Asked while the session is
//! idle, it runs at once and its caller gets the result. Asked while a turn runs, it is
//! queued: at most one reload waits, however often it is asked for (each ask answers
//! [`ReloadRequest::Queued`]), and it runs when that turn ends, before the next one
//! starts. Every reload's outcome goes on the session's status board (`extensions`), and
//! a queued one, which has no caller to answer, is also announced as a run of the
//! session's outbound stream ([`super::outbound::Kind::Reload`]), behind the turn it waited
//! for, so its failure reaches the client as surely as its success, and after that turn's
//! answer.
//!
//! What it swaps: the manager's runtime (sessions opened later start with it), the
//! session's runtime (its next turn uses the new providers), its commands, and its plugin
//! servers (each stopped and started again, so a changed server program is picked up). The
//! editor's own servers are left running. It fails, changing nothing, when the new runtime
//! cannot be built ([`ReloadError`]) or no longer has the session's model.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, oneshot};

use super::Session;
use super::actor_context::ActorContext;
use super::commands::COMMANDS;
use super::goal::now;
use super::snapshot::ReloadReport;
use crate::extensions::{Catalog, ReloadError, Runtime};
use crate::sandbox::Policy;
use crate::tools::mcp::{PluginEntry, ServerSpec, TransportSpec, reaches_home};
use crate::tools::protected::Protected;

/// How a reload ended.
pub type ReloadResult = Result<Reloaded, ReloadError>;

/// What a successful reload left the session with.
#[derive(Debug, Clone)]
pub struct Reloaded {
    /// Its commands now.
    pub catalog: Arc<Catalog>,
    /// Whether the models (or their efforts) on offer changed, so the settings' choices did.
    pub choices_changed: bool,
}

/// What asking for a reload did.
#[derive(Debug)]
pub enum ReloadRequest {
    /// A turn is running: the reload runs when it ends.
    Queued,
    /// The reload is running; its result comes here.
    Running(oneshot::Receiver<ReloadResult>),
}

/// The reload that waits for the session's actor, and whether a turn is running.
#[derive(Default)]
pub(super) struct ReloadSlot {
    state: Mutex<SlotState>,
    wake: Notify,
}

#[derive(Default)]
struct SlotState {
    busy: bool,
    /// A reload is wanted; these callers wait for its result (none when it was queued).
    pending: Option<Vec<oneshot::Sender<ReloadResult>>>,
}

impl ReloadSlot {
    /// Asks for a reload (see the module docs).
    pub(super) fn request(&self) -> ReloadRequest {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.busy {
            state.pending.get_or_insert_with(Vec::new);
            return ReloadRequest::Queued;
        }
        let (reply, result) = oneshot::channel();
        state.pending.get_or_insert_with(Vec::new).push(reply);
        drop(state);
        self.wake.notify_one();
        ReloadRequest::Running(result)
    }

    /// The wanted reload's callers, taking it, if one is wanted.
    pub(super) fn take(&self) -> Option<Vec<oneshot::Sender<ReloadResult>>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).pending.take()
    }

    /// Marks a turn as running, unless a reload is wanted: then that comes first, and its
    /// callers are returned.
    pub(super) fn begin_turn(&self) -> Result<(), Vec<oneshot::Sender<ReloadResult>>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match state.pending.take() {
            Some(waiting) => Err(waiting),
            None => {
                state.busy = true;
                Ok(())
            }
        }
    }

    /// The turn ended.
    pub(super) fn end_turn(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).busy = false;
    }

    /// Resolves when a reload was asked for while the actor was idle.
    pub(super) async fn woken(&self) {
        self.wake.notified().await;
    }
}

/// Runs one reload of `session` and hands its result to `waiting` (or, with nobody
/// waiting, announces a success on the session).
pub(super) async fn run(
    session: &Session,
    context: &ActorContext,
    runs: &super::outbound::Runs,
    waiting: Vec<oneshot::Sender<ReloadResult>>,
) {
    let result = reload(session, context).await;
    match &result {
        Ok(reloaded) => tracing::info!(
            session = %session.id,
            commands = reloaded.catalog.commands().count(),
            problems = reloaded.catalog.problems().len(),
            "extensions reloaded"
        ),
        Err(err) => {
            tracing::warn!(session = %session.id, %err, "reload failed; the session keeps what it had")
        }
    }
    let queued = waiting.is_empty();
    // The status goes to the client as it is: a key quoted from a broken `.env` must not.
    let runtime = session.runtime.get();
    let error = result.as_ref().err().map(|err| ReloadError {
        reason: crate::secret::redact(&err.reason, runtime.providers().keys().all()),
        ..err.clone()
    });
    let report = ReloadReport { queued, finished_at: now(), error };
    session.status.change(|s| {
        if let Ok(reloaded) = &result {
            s.extensions.problems = reloaded.catalog.problems().to_vec();
        }
        s.extensions.last_reload = Some(report);
    });
    if queued {
        let told = super::outbound::Run::ended(
            super::outbound::Origin::Reload,
            Ok(crate::types::StopReason::EndTurn),
        );
        let _ = runs.send(Box::new(told));
        return;
    }
    for reply in waiting {
        let _ = reply.send(result.clone());
    }
}

async fn reload(session: &Session, context: &ActorContext) -> ReloadResult {
    let previous = session.runtime.get();
    let state = session.state();
    let cwd = state.cwd.clone();
    let built = tokio::task::spawn_blocking(move || {
        let next = previous.reloaded()?;
        let catalog = next.catalog(&cwd, &builtin_names());
        Ok::<_, ReloadError>((next, catalog))
    })
    .await
    .map_err(|e| ReloadError {
        file: session.runtime.get().providers().home().config_path(),
        line: None,
        column: None,
        reason: format!("the reload stopped: {e}"),
    })?;
    let (next, catalog) = built?;
    let config = next.providers().config();
    if config.resolve(&state.settings.model).is_none() {
        return Err(ReloadError {
            file: next.providers().home().config_path(),
            line: None,
            column: None,
            reason: format!(
                "the session's model `{}` is not configured there any more; switch the session to another \
                 model first",
                state.settings.model
            ),
        });
    }
    let before = session.choices();
    let next = Arc::new(next);
    let catalog = Arc::new(catalog);
    context.shared.set(next.clone());
    session.runtime.set(next.clone());
    session.catalog.set(catalog.clone());
    let roots = std::iter::once(&state.cwd).chain(&state.additional_directories).cloned().collect();
    session.mcp.replace_plugin_servers(
        plugin_entries(&next, &state.cwd),
        state.cwd.clone(),
        mcp_sandbox(&next, roots),
    );
    Ok(Reloaded { catalog, choices_changed: session.choices() != before })
}

/// The names of Heron's own commands, which no custom one may take.
pub(super) fn builtin_names() -> Vec<&'static str> {
    COMMANDS.iter().map(|c| c.name).collect()
}

/// The sandbox of the processes a session with `roots` starts, by `runtime`'s config.
pub(super) fn sandbox(runtime: &Runtime, roots: Vec<std::path::PathBuf>) -> Arc<Policy> {
    let providers = runtime.providers();
    Arc::new(Policy::from_config(providers.config(), providers.home(), providers.keys(), roots))
}

/// The policy of a session's MCP servers ([`Policy::for_mcp_servers`]).
pub(super) fn mcp_sandbox(runtime: &Runtime, roots: Vec<std::path::PathBuf>) -> Arc<Policy> {
    let providers = runtime.providers();
    Arc::new(Policy::for_mcp_servers(providers.config(), providers.home(), providers.keys(), roots))
}

/// The MCP servers `runtime`'s plugins give a session in `cwd`: each loaded plugin's
/// servers, listed disabled when turned off, refused when they name a path in Heron's home
/// (as the editor's are), and each plugin that did not load, reported failed under its own
/// name.
pub(super) fn plugin_entries(runtime: &Runtime, cwd: &Path) -> Vec<PluginEntry> {
    let protected = Protected::for_home(runtime.providers().home().root());
    let mut entries = Vec::new();
    for server in runtime.plugins().iter().flat_map(|p| &p.servers) {
        let spec = ServerSpec {
            name: server.name.clone(),
            transport: TransportSpec::Stdio {
                command: server.command.clone().into(),
                args: server.args.clone(),
                env: server.env.clone(),
            },
        };
        // A server turned off never starts, so where its program lives does not matter.
        let entry = if !server.enabled {
            PluginEntry::Disabled(spec)
        } else if let Some((field, text)) = reaches_home(&server.command, &server.args, cwd, &protected) {
            PluginEntry::Failed {
                name: server.name.clone(),
                reason: format!(
                    "its {field} ({text}) is inside Heron's home, which no server Heron starts may use"
                ),
            }
        } else {
            PluginEntry::Start(spec)
        };
        entries.push(entry);
    }
    for (name, problem) in runtime.broken_plugins() {
        entries.push(PluginEntry::Failed {
            name: name.clone(),
            reason: format!("the plugin did not load: {problem}"),
        });
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_asks_run_and_asks_during_a_turn_queue_exactly_one_reload() {
        let slot = ReloadSlot::default();
        assert!(matches!(slot.request(), ReloadRequest::Running(_)));
        assert_eq!(slot.take().map(|waiting| waiting.len()), Some(1));
        assert!(slot.begin_turn().is_ok());
        assert!(matches!(slot.request(), ReloadRequest::Queued));
        assert!(matches!(slot.request(), ReloadRequest::Queued));
        slot.end_turn();
        assert_eq!(slot.take().map(|waiting| waiting.len()), Some(0), "one reload, nobody waiting on it");
        assert!(slot.take().is_none(), "and only one");
    }

    #[test]
    fn a_reload_asked_before_a_turn_begins_goes_first() {
        let slot = ReloadSlot::default();
        let _waiting = slot.request();
        assert_eq!(slot.begin_turn().map_err(|waiting| waiting.len()), Err(1));
        assert!(slot.begin_turn().is_ok());
    }
}
