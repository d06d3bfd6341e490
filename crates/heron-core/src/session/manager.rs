//! The session manager: creates, opens (load and resume), lists, forks, closes and deletes
//! sessions, and keeps the open ones. Unknown ids are errors, never new sessions.
//!
//! A session is open in one process at a time: every way of opening one ends in
//! [`Manager::admit`], which takes the session's lock (`lock.rs`) before it reads or repairs
//! anything, and the lock is kept until the manager forgets the session (close, delete, the
//! connection ending) or the process dies. So two processes on one `HERON_HOME` never
//! interleave two conversations in one history, and an inbox item found `running` when a
//! session is reopened really was left by a process that stopped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::actor_context::ActorContext;
use super::event::Event;
use super::goal::Goal;
use super::history_budget::{HistoryBudget, Ledger, Reserved};
use super::loading::{Loading, StoredHistory};
use super::lock::{self, LockError, SessionLock};
use super::opening::{OpenOptions, OtherRoot, SessionError};
use super::reload::{builtin_names, mcp_sandbox, plugin_entries};
use super::seats::{Seat, Seats, max_open_sessions};
use super::settings::{Choices, Effort, Mode, Posture, Preset, Settings};
use super::snapshot::InboxCounts;
use super::status::Board;
use super::{Offer, Session, State};
use crate::config::Config;
use crate::extensions::{Catalog, Runtime, Shared};
use crate::llm::registry::{ModelError, Providers};
use crate::tools::Registry;
use crate::tools::mcp::McpHub;
use crate::types::UsageReport;
use heron_store::{ListQuery, NewSession, Page, SessionPatch, SessionRecord, Store};

/// Defaults and limits from the command line.
#[derive(Debug, Clone, Default)]
pub struct ManagerOptions {
    /// `--model`: the model new sessions use (else `default_model` from the config).
    pub model: Option<String>,
    /// `--preset`.
    pub preset: Option<Preset>,
    /// `--permission-mode`: the starting posture and the ceiling.
    pub ceiling: Option<Posture>,
    /// `--title`: the title of new sessions.
    pub title: Option<String>,
    /// How long to wait for a permission answer (`permission_timeout_s`, default 120 s).
    pub permission_timeout: Option<std::time::Duration>,
    /// The posture new sessions start in (else the ceiling, else `ask`).
    pub start_posture: Option<Posture>,
    /// Sees the files tools use (`heron acp --record`).
    pub witness: Option<Arc<dyn crate::tools::FileWitness>>,
    /// `--append-system-prompt`: text added to every request's system prompt.
    pub append_system_prompt: Option<String>,
    /// `--max-tokens`: the most tokens one model reply may take.
    pub max_tokens: Option<u32>,
    /// The bytes of history open sessions may hold (`--max-history-bytes`).
    pub history: HistoryBudget,
}

/// Everything read for a session about to open but its history: its record, settings and
/// inbox, its lock, and the runtime and commands it starts with.
struct Admitted {
    record: SessionRecord,
    settings: Settings,
    inbox: InboxCounts,
    lock: Option<SessionLock>,
    runtime: Arc<Runtime>,
    catalog: Catalog,
    /// How many events its stored history holds, to size the list it is read into.
    events: u64,
    /// Its history's place in the process's budget, taken before the history is read.
    budget: Reserved,
    /// Its place among the sessions open here, until it is open.
    _seat: Seat,
}

/// A session open in this process, and the lock that keeps it from opening elsewhere.
struct Open {
    session: Arc<Session>,
    /// Released when the manager forgets the session; `None` where the file system
    /// cannot lock.
    _lock: Option<SessionLock>,
    /// Its history's bytes, given back to the process when the manager forgets it.
    _history: Reserved,
}

/// What settings may be changed to under `config`, up to `ceiling`.
pub(super) fn choices_of(config: &Config, ceiling: Option<Posture>) -> Choices {
    // Provider by provider: resolving each id again would cost a search of its provider's
    // models per model, which a config of many models turns into seconds.
    let models = config
        .providers
        .iter()
        .flat_map(|(name, provider)| {
            provider.models.iter().map(move |model| (format!("{name}/{model}"), provider.efforts.clone()))
        })
        .collect();
    Choices { models, ceiling }
}

/// The sessions of one agent process.
pub struct Manager {
    store: Store,
    /// The runtime sessions open with; a session's reload replaces it.
    runtime: Arc<Shared<Runtime>>,
    tools: Arc<Registry>,
    options: ManagerOptions,
    transcripts: PathBuf,
    /// The session locks, beside the store file they protect.
    locks: PathBuf,
    open: Mutex<HashMap<String, Open>>,
    /// The sessions being opened (see `seats`).
    seats: Seats,
    /// The bytes of history the open sessions hold (see `history_budget`).
    history: Ledger,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("options", &self.options).finish_non_exhaustive()
    }
}

fn require_absolute(path: &Path, what: &str) -> Result<(), SessionError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(SessionError::BadPath(format!("{what} must be an absolute path")))
    }
}

impl Manager {
    /// A manager over `store` whose sessions open with `runtime`, writing transcripts under
    /// `transcripts`.
    pub fn new(
        store: Store,
        runtime: Runtime,
        tools: Arc<Registry>,
        options: ManagerOptions,
        transcripts: PathBuf,
    ) -> Self {
        let locks = lock::locks_dir(store.path());
        let runtime = Arc::new(Shared::new(Arc::new(runtime)));
        let history = Ledger::new(options.history);
        Self {
            store,
            runtime,
            tools,
            options,
            transcripts,
            locks,
            open: Mutex::new(HashMap::new()),
            seats: Seats::default(),
            history,
        }
    }

    /// Reads `config.toml` and `.env` again if they changed since the runtime sessions open
    /// with was read, so a setup finished while Heron runs (in the editor's terminal) counts
    /// without a restart. Sessions already open keep theirs until they reload. A file that
    /// cannot be used now is an error naming it, and the runtime stays as it was.
    pub async fn refresh_home(&self) -> Result<(), SessionError> {
        let current = self.runtime.get();
        let fresh = tokio::task::spawn_blocking(move || {
            if current.home_changed() { current.reloaded().map(Some) } else { Ok(None) }
        })
        .await
        .map_err(|e| SessionError::Internal(e.to_string()))?
        .map_err(SessionError::Home)?;
        if let Some(fresh) = fresh {
            tracing::info!("config.toml or .env changed: new sessions use what they hold now");
            self.runtime.set(Arc::new(fresh));
        }
        Ok(())
    }

    /// The providers sessions open with now (and so the config and keys).
    pub fn providers(&self) -> Arc<Providers> {
        self.runtime.get().providers().clone()
    }

    /// Where a session's transcript is written.
    pub fn transcript_path(&self, id: &str) -> PathBuf {
        super::transcript_path(&self.transcripts, id)
    }

    /// What settings may be changed to.
    pub fn choices(&self) -> Choices {
        choices_of(self.runtime.get().providers().config(), self.options.ceiling)
    }

    /// The model new sessions use, checked to be usable.
    pub fn default_model(&self) -> Result<String, ModelError> {
        let providers = self.providers();
        let model = self
            .options
            .model
            .clone()
            .or_else(|| providers.config().default_model.clone())
            .ok_or(ModelError::NoModel)?;
        providers.check(&model)?;
        Ok(model)
    }

    fn default_settings(&self, model: String) -> Settings {
        Settings {
            mode: Mode::Normal,
            model,
            effort: Effort::Auto,
            preset: self.options.preset.unwrap_or(Preset::Balanced),
            posture: self
                .options
                .start_posture
                .map(|p| self.choices().cap(p))
                .unwrap_or_else(|| self.options.ceiling.unwrap_or(Posture::Ask)),
        }
    }

    /// Starts the actor of an admitted session with its `history`, and keeps it open.
    fn spawn(&self, admitted: Admitted, history: Vec<Event>, options: OpenOptions) -> Arc<Session> {
        let Admitted { record, settings, inbox, lock, runtime, catalog, events: _, budget, _seat } = admitted;
        let record = &record;
        // A goal or usage this build cannot read is dropped, not fatal: the session still opens.
        let goal = record.goal.clone().and_then(|v| serde_json::from_value::<Goal>(v).ok());
        let usage = record.usage.clone().and_then(|v| serde_json::from_value::<UsageReport>(v).ok());
        let status = Board::new(&settings, goal, usage, inbox);
        // What could not be loaded shows in the status from the start, not only in the
        // commands update the editor may have missed.
        status.change(|s| {
            s.extensions.problems = catalog.problems().to_vec();
            s.instructions = super::turn::working::loaded(&history);
        });
        let state = State {
            settings,
            cwd: PathBuf::from(&record.cwd),
            additional_directories: record.additional_directories.iter().map(PathBuf::from).collect(),
            title: record.title.clone(),
        };
        let roots: Vec<PathBuf> =
            std::iter::once(&state.cwd).chain(&state.additional_directories).cloned().collect();
        let mcp = if runtime.safe_mode() {
            // Safe mode starts nothing it was given; the servers are listed as disabled.
            McpHub::disabled(options.mcp_servers)
        } else if options.mcp_servers.is_empty() {
            McpHub::empty()
        } else {
            McpHub::start(options.mcp_servers, state.cwd.clone(), mcp_sandbox(&runtime, roots.clone()))
        };
        let plugins = plugin_entries(&runtime, &state.cwd);
        if !plugins.is_empty() {
            mcp.replace_plugin_servers(plugins, state.cwd.clone(), mcp_sandbox(&runtime, roots));
        }
        let context = ActorContext {
            store: self.store.clone(),
            tools: self.tools.clone(),
            transcripts: self.transcripts.clone(),
            permission_timeout: self.options.permission_timeout,
            witness: self.options.witness.clone(),
            max_reply_tokens: self.options.max_tokens,
            append_system_prompt: self.options.append_system_prompt.as_deref().map(Arc::from),
            mcp,
            shared: self.runtime.clone(),
            history: budget.usage(),
        };
        let offer = Offer { runtime, catalog: Arc::new(catalog), ceiling: self.options.ceiling };
        let session =
            Session::spawn(record.id.clone(), state, history, context, offer, options.editor, status);
        let open = Open { session: session.clone(), _lock: lock, _history: budget };
        self.open.lock().unwrap_or_else(PoisonError::into_inner).insert(record.id.clone(), open);
        session
    }

    /// A place for one more open session, or the refusal that the process holds the most.
    fn seat(&self) -> Result<Seat, SessionError> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner).len();
        self.seats.take(open).ok_or_else(|| SessionError::TooManyOpen(max_open_sessions()))
    }

    /// Takes the lock of session `id` for this process. A file system that cannot lock
    /// (some network mounts) opens the session unlocked, with a warning, rather than not at
    /// all. A lock found held is tried again for a moment ([`SessionLock::acquire_patiently`]).
    async fn lock(&self, id: &str) -> Result<Option<SessionLock>, SessionError> {
        let (dir, name) = (self.locks.clone(), id.to_owned());
        let taken = tokio::task::spawn_blocking(move || SessionLock::acquire_patiently(&dir, &name))
            .await
            .map_err(|e| SessionError::Internal(e.to_string()))?;
        match taken {
            Ok(lock) => Ok(Some(lock)),
            Err(LockError::Held) => Err(SessionError::OpenElsewhere(id.to_owned())),
            Err(LockError::Io(err)) => {
                tracing::warn!(session = id, %err, "cannot lock the session; opening it unlocked");
                Ok(None)
            }
        }
    }

    /// The one place a stored session is opened in this process (created, loaded, resumed
    /// or forked): its lock first, then the record, its history's size (refused past its
    /// budget before anything is changed or read: `history_budget`), its settings
    /// (`settings_of`), the directories it opens in and its inbox, all read after the lock,
    /// so none of it is what another process was still changing. Its history is read after
    /// this, still under the lock (`loading`).
    async fn admit(
        &self,
        id: &str,
        options: &OpenOptions,
        settings_of: impl FnOnce(&SessionRecord) -> Settings,
    ) -> Result<Admitted, SessionError> {
        let seat = self.seat()?;
        let lock = self.lock(id).await?;
        let record = self.store.session(id).await?.ok_or_else(|| SessionError::NotFound(id.to_owned()))?;
        let totals = self.store.event_totals(id).await?;
        let budget = self.history.reserve(totals.bytes).map_err(SessionError::HistoryFull)?;
        let settings = settings_of(&record);
        let dirs: Vec<String> =
            options.additional_directories.iter().map(|d| d.display().to_string()).collect();
        let cwd = options.cwd.display().to_string();
        let record = if record.cwd != cwd || record.additional_directories != dirs {
            let patch =
                SessionPatch { cwd: Some(cwd), additional_directories: Some(dirs), ..Default::default() };
            self.store.update_session(id, patch).await?
        } else {
            record
        };
        let inbox = super::inbox::reopen(&self.store, id).await?;
        // The project's commands are read once the cwd is known, off the async threads.
        let runtime = self.runtime.get();
        let extensions = {
            let (runtime, cwd) = (runtime.clone(), PathBuf::from(&record.cwd));
            tokio::task::spawn_blocking(move || runtime.catalog(&cwd, &builtin_names()))
                .await
                .map_err(|e| SessionError::Internal(e.to_string()))?
        };
        Ok(Admitted {
            record,
            settings,
            inbox,
            lock,
            runtime,
            catalog: extensions,
            events: totals.count,
            budget,
            _seat: seat,
        })
    }

    /// Admits session `id` and starts it with its whole stored history.
    async fn admit_with_history(
        &self,
        id: &str,
        options: OpenOptions,
        settings_of: impl FnOnce(&SessionRecord) -> Settings,
    ) -> Result<Arc<Session>, SessionError> {
        let admitted = self.admit(id, &options, settings_of).await?;
        let history = StoredHistory::kept(id, admitted.events).read_rest(&self.store).await?;
        Ok(self.spawn(admitted, history, options))
    }

    /// Creates a session.
    pub async fn create(&self, options: OpenOptions) -> Result<Arc<Session>, SessionError> {
        require_absolute(&options.cwd, "cwd")?;
        // Refused before a record is made; the seat that counts is the one `admit` takes.
        drop(self.seat()?);
        self.refresh_home().await?;
        let model = self.default_model()?;
        let settings = self.default_settings(model);
        let record = self
            .store
            .create_session(NewSession {
                id: None,
                cwd: options.cwd.display().to_string(),
                additional_directories: options
                    .additional_directories
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect(),
                title: self.options.title.clone(),
                settings: serde_json::to_value(&settings)
                    .map_err(|e| SessionError::Internal(e.to_string()))?,
            })
            .await?;
        // A new session has no history to read.
        let admitted = self.admit(&record.id, &options, |_| settings).await?;
        Ok(self.spawn(admitted, Vec::new(), options))
    }

    /// The open session `id`, if it is open in this process.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner).get(id).map(|open| open.session.clone())
    }

    /// Whether session `id` is open in another process: not here, and its lock is held.
    /// A quick probe of the lock file, for explaining a refusal.
    pub fn is_open_elsewhere(&self, id: &str) -> bool {
        self.get(id).is_none() && lock::held_elsewhere(&self.locks, id)
    }

    /// Every stored event of `id`, in order, read for the caller rather than an actor (so
    /// outside the history budget: the caller holds what it asked for).
    pub async fn history(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        StoredHistory::read_all(&self.store, id).await
    }

    /// Opens a stored session in `options.cwd` without replaying it (resume), or returns it
    /// if it is already open here.
    pub async fn open(&self, id: &str, options: OpenOptions) -> Result<Arc<Session>, SessionError> {
        self.load(id, options).await?.open().await
    }

    /// Starts opening a stored session in `options.cwd` (or attaching to it, if it is
    /// already open here) whose history the caller reads page by page as it replays it;
    /// [`Loading::open`] then opens it.
    pub async fn load(&self, id: &str, options: OpenOptions) -> Result<Loading<'_>, SessionError> {
        require_absolute(&options.cwd, "cwd")?;
        self.refresh_home().await?;
        if self.store.session(id).await?.is_none() {
            return Err(SessionError::NotFound(id.to_owned()));
        }
        if let Some(session) = self.get(id) {
            let state = session.state();
            let same_cwd = tokio::fs::canonicalize(&state.cwd).await.unwrap_or(state.cwd) == options.cwd;
            // Kept silently on the old roots, the editor would work in one folder while the
            // tools act in another.
            if !same_cwd {
                return Err(SessionError::OpenWithOtherRoots(OtherRoot::Cwd));
            }
            if state.additional_directories != options.additional_directories {
                return Err(SessionError::OpenWithOtherRoots(OtherRoot::AdditionalDirectories));
            }
            return Ok(Loading::attaching(&self.store, session, options.editor));
        }
        let admitted = self
            .admit(id, &options, |record| {
                let mut settings = serde_json::from_value::<Settings>(record.settings.clone())
                    .unwrap_or_else(|_| self.default_settings(self.default_model().unwrap_or_default()));
                // A saved posture above today's ceiling opens at the ceiling.
                settings.posture = self.choices().cap(settings.posture);
                settings
            })
            .await?;
        let history = StoredHistory::kept(id, admitted.events);
        let start = Box::new(move |history| self.spawn(admitted, history, options));
        Ok(Loading::spawning(&self.store, start, history))
    }

    /// One page of stored sessions, most recent first; a `cwd` filter must be absolute.
    pub async fn list(&self, cwd: Option<String>, cursor: Option<String>) -> Result<Page, SessionError> {
        if let Some(cwd) = &cwd {
            require_absolute(Path::new(cwd), "cwd")?;
        }
        Ok(self.store.list_sessions(ListQuery { cwd, cursor, limit: 50 }).await?)
    }

    /// Closes an open session: cancels its work, frees it (and its lock), keeps its history.
    pub async fn close(&self, id: &str) -> Result<(), SessionError> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        match open {
            Some(open) => {
                open.session.close();
                Ok(())
            }
            None if self.store.session(id).await?.is_some() => Ok(()),
            None => Err(SessionError::NotFound(id.to_owned())),
        }
    }

    /// Deletes a session and its history, under the session's lock: one open in another
    /// process is refused ([`SessionError::OpenElsewhere`]), as loading it would be, since
    /// deleting it would pull the history from under the process that is writing it. An
    /// unknown id succeeds and deletes nothing (and makes no lock file).
    pub async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        // Held until the rows are gone, so no other process opens the session meanwhile.
        let _lock = match open {
            Some(open) => {
                open.session.close();
                open._lock
            }
            None if self.store.session(id).await?.is_none() => return Ok(()),
            None => self.lock(id).await?,
        };
        self.store.delete_session(id).await?;
        let _ = tokio::fs::remove_file(self.transcript_path(id)).await;
        Ok(())
    }

    /// Forks `id` into a new session in `options.cwd` with a copy of its history.
    pub async fn fork(&self, id: &str, options: OpenOptions) -> Result<Arc<Session>, SessionError> {
        require_absolute(&options.cwd, "cwd")?;
        self.refresh_home().await?;
        let source = self.store.session(id).await?.ok_or_else(|| SessionError::NotFound(id.to_owned()))?;
        // A copy the fork could not open is not made (the process's budget is asked when it opens).
        let size = self.store.event_totals(id).await?.bytes;
        self.history.fits_session(size).map_err(SessionError::HistoryFull)?;
        let mut settings = match self.get(id) {
            Some(open) => open.state().settings,
            None => serde_json::from_value::<Settings>(source.settings.clone())
                .map_err(|e| SessionError::Internal(e.to_string()))?,
        };
        // A fork opens at most at today's ceiling, like a reopened session.
        settings.posture = self.choices().cap(settings.posture);
        let stored = serde_json::to_value(&settings).map_err(|e| SessionError::Internal(e.to_string()))?;
        let record = self
            .store
            .fork_session(
                id,
                NewSession {
                    id: None,
                    cwd: options.cwd.display().to_string(),
                    additional_directories: options
                        .additional_directories
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect(),
                    title: source.title.clone(),
                    settings: stored,
                },
            )
            .await?;
        // The fork goes on from the same point: same goal, same context use.
        let (goal, usage) = match self.get(id) {
            Some(open) => {
                let (_, now) = open.status();
                (serde_json::to_value(now.goal).ok(), serde_json::to_value(now.usage).ok())
            }
            None => (source.goal.clone(), source.usage.clone()),
        };
        let patch = SessionPatch {
            goal: Some(goal.filter(|g| !g.is_null())),
            usage: Some(usage.filter(|u| !u.is_null())),
            ..Default::default()
        };
        let record = self.store.update_session(&record.id, patch).await?;
        self.admit_with_history(&record.id, options, |_| settings).await
    }

    /// Closes every open session and waits (at most two seconds) for their MCP servers to
    /// stop, so none outlives the agent.
    pub async fn stop_all(&self) {
        let open: Vec<Open> =
            self.open.lock().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, o)| o).collect();
        let all = futures_util::future::join_all(open.iter().filter_map(|open| open.session.close()));
        if tokio::time::timeout(std::time::Duration::from_secs(2), all).await.is_err() {
            tracing::warn!("some MCP servers did not stop in time; their process groups are killed on exit");
        }
    }
}
