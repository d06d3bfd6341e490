//! Tools the model can call: the [`Tool`] trait, the registry the turn loop looks them up
//! in, and what a call reports. Knows nothing of ACP.

pub(crate) mod call;
pub mod deadline;
pub mod edit_file;
pub mod editor;
mod files;
pub(crate) mod finish_goal;
pub(crate) mod fsio;
pub mod grep;
pub(crate) mod later;
#[cfg(target_os = "linux")]
pub mod list_files;
mod local_process;
pub mod mcp;
pub mod protected;
pub mod question;
pub mod read_file;
pub mod restore_file;
pub mod roots;
pub mod run_command;
pub mod shown_diff;
pub(crate) mod streams;
mod text;
pub(crate) mod title;
pub mod todo;
pub(crate) mod walk;
pub mod write_file;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use self::editor::EditorIo;
use self::roots::Roots;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::types::{Location, ToolKind, ToolOutput, ToolStatus};

/// Where a tool call runs.
#[derive(Clone)]
pub struct ToolEnv {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// The session's write roots: its cwd and additional directories.
    pub roots: Arc<Roots>,
    /// Cancelled when the turn is.
    pub cancel: CancellationToken,
    /// What the editor does for tools (file I/O, terminals, questions).
    pub editor: Arc<dyn EditorIo>,
    /// Secrets to scrub from anything a tool returns.
    pub secrets: Arc<Vec<crate::secret::Secret>>,
    /// The OS sandbox of the commands tools start on this machine.
    pub sandbox: Arc<crate::sandbox::Policy>,
    /// Where a running call shows its progress.
    pub progress: Progress,
    /// Sees the files tools are about to use, when someone is watching (`--record`).
    pub witness: Option<Arc<dyn FileWitness>>,
    /// How long calls may take.
    pub deadlines: deadline::Deadlines,
}

/// Sees each file a tool is about to read, search or change, before it does. Used by
/// `heron acp --record` to keep the workspace a recorded session started from.
pub trait FileWitness: Send + Sync + std::fmt::Debug + 'static {
    /// `path` (absolute) is about to be used; it may not exist.
    fn before_use(&self, path: &std::path::Path);
}

impl ToolEnv {
    /// Tells the witness, if any, that `path` is about to be used.
    pub fn witness(&self, path: &std::path::Path) {
        if let Some(witness) = &self.witness {
            witness.before_use(path);
        }
    }
}

/// Where a running call shows what it is doing. The turn gives each call its own sink;
/// tools never see the session's channels.
pub trait ProgressSink: Send + Sync + 'static {
    /// Shows `output` in the call (replacing what it showed before); the call stays running.
    fn show(&self, output: Vec<ToolOutput>);
    /// Adds `output` after what the call shows so far, as it arrives (a command's output);
    /// the call stays running, and its result replaces all of it.
    fn append(&self, output: ToolOutput);
    /// Takes `task` to run once the call's final update has reached the editor (releasing
    /// a terminal that update still shows). `Some` hands it back: run it now.
    fn after_result(&self, task: BoxFuture<()>) -> Option<BoxFuture<()>> {
        Some(task)
    }
    /// The id of the tool call the editor shows, so what the tool asks the editor (a
    /// question) can name the card it belongs to.
    fn call_id(&self) -> Option<&str> {
        None
    }
}

/// A running call's line to the editor: output shown before the call ends, and what runs
/// once its result has reached the editor. The default shows nothing (a call nobody
/// watches).
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<dyn ProgressSink>>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Progress").field(&self.0.is_some()).finish()
    }
}

impl Progress {
    /// Progress reported to `sink`.
    pub fn to(sink: Arc<dyn ProgressSink>) -> Self {
        Self(Some(sink))
    }

    /// Shows `output` in the call (replacing what it showed before); the call stays running.
    pub fn show(&self, output: Vec<ToolOutput>) {
        if let Some(sink) = &self.0 {
            sink.show(output);
        }
    }

    /// Adds `output` after what the call shows so far; the call stays running, and its
    /// result replaces all of it.
    pub fn append(&self, output: ToolOutput) {
        if let Some(sink) = &self.0 {
            sink.append(output);
        }
    }

    /// The id of the tool call the editor shows, when one shows it.
    pub fn call_id(&self) -> Option<&str> {
        self.0.as_ref().and_then(|sink| sink.call_id())
    }

    /// Runs `task` once the call's final update has reached the editor, or now when
    /// nobody shows the call.
    pub async fn after_result(&self, task: BoxFuture<()>) {
        let handed_back = match &self.0 {
            Some(sink) => sink.after_result(task),
            None => Some(task),
        };
        if let Some(task) = handed_back {
            task.await;
        }
    }
}

impl std::fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEnv").field("cwd", &self.cwd).field("roots", &self.roots).finish_non_exhaustive()
    }
}

/// A call described before it runs: what the editor shows and the permission gate sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// A human title, e.g. "Read src/main.rs".
    pub title: String,
    /// What it does.
    pub kind: ToolKind,
    /// Files it touches (absolute paths).
    pub locations: Vec<Location>,
    /// The parsed arguments.
    pub raw_input: Value,
    /// Whether it reads something outside the session's roots (the gate asks first).
    pub outside_roots: bool,
    /// Why it is asked in every posture, yolo included, if it is: a read of a credential
    /// folder, a write into a `.git` folder.
    pub always_ask: Option<AlwaysAsk>,
    /// What it will do, shown before it runs and in a permission request: the command
    /// line of a command; the diff of a write once [`Tool::preview`] worked it out.
    pub content: Vec<ToolOutput>,
    /// The exact change a write will make, once previewed: what runs is what was shown.
    pub planned: Option<files::PlannedChange>,
}

/// Why a call is asked about in every posture (and refused where nothing may ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlwaysAsk {
    /// It reads a credential folder (`~/.ssh`, ...).
    Credentials,
    /// It writes a file another program runs or obeys later, outside the sandbox (git's
    /// hooks and config, `.envrc`, an editor's tasks: `later`); the reason says which.
    RunsLater(&'static str),
    /// It loads a skill that came with the project (which may be hostile) for the first time
    /// in the session.
    ProjectSkill,
    /// It puts back a file someone changed since Heron last wrote it (a rewind): their
    /// change would be lost.
    ChangedSince,
}

impl AlwaysAsk {
    /// What the call does, for the model when it is refused: "`tool` {what}".
    pub fn what(self) -> String {
        match self {
            AlwaysAsk::Credentials => "reads a credential store".to_owned(),
            AlwaysAsk::RunsLater(why) => format!("writes a file another program runs later ({why})"),
            AlwaysAsk::ProjectSkill => "loads a skill that comes with the project".to_owned(),
            AlwaysAsk::ChangedSince => "puts back a file someone changed since Heron wrote it".to_owned(),
        }
    }

    /// Why a read of `access` is always asked, if it is.
    pub(crate) fn for_read(access: roots::ReadAccess) -> Option<Self> {
        (access == roots::ReadAccess::Credentials).then_some(AlwaysAsk::Credentials)
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `Completed` or `Failed`.
    pub status: ToolStatus,
    /// What the user sees.
    pub output: Vec<ToolOutput>,
    /// The raw result, for the editor.
    pub raw_output: Option<Value>,
    /// What the model is told.
    pub for_model: String,
    /// A new plan, replacing the session's (`todo_write`).
    pub plan: Option<Vec<crate::types::PlanItem>>,
}

impl Outcome {
    /// A failure the model reads as `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status: ToolStatus::Failed,
            output: vec![ToolOutput::Text { text: message.clone() }],
            raw_output: None,
            for_model: message,
            plan: None,
        }
    }
}

/// A tool.
pub trait Tool: Send + Sync + 'static {
    /// The name, description and argument schema offered to the model.
    fn spec(&self) -> ToolSpec;

    /// What kind of action it is.
    fn kind(&self) -> ToolKind;

    /// What it waits on, which decides its deadline ([`deadline::run_within`]).
    fn pace(&self) -> deadline::Pace {
        deadline::Pace::Quick
    }

    /// Parses `arguments` (the model's JSON text) and describes the call. An `Err` is a
    /// message for the model: the call fails without running.
    fn prepare(&self, arguments: &str, env: &ToolEnv) -> Result<Prepared, String>;

    /// Works out, changing nothing, what a call the user is about to be asked about will do,
    /// so the request shows it (a write's diff, against the file as it is now). An `Err`
    /// fails the call without asking (an edit that cannot apply). The default adds nothing.
    fn preview(&self, prepared: Prepared, _env: ToolEnv) -> BoxFuture<Result<Prepared, String>> {
        Box::pin(std::future::ready(Ok(prepared)))
    }

    /// Runs a prepared call (a previewed write makes exactly the change it showed).
    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome>;

    /// Whether calls of this tool in one step run at once rather than one after another
    /// (subagents: each is a whole run of its own). The default runs them in order.
    fn runs_together(&self) -> bool {
        false
    }
}

/// The tools a session offers, by name.
#[derive(Clone, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Tools that exist but cannot be called now, by their names' prefix (an MCP server's
    /// `mcp__<server>__`), with why.
    unavailable: Vec<(String, String)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool under its spec's name.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Marks the tools named `prefix...` as existing but not callable now, saying `why`.
    pub fn mark_unavailable(&mut self, prefix: String, why: String) {
        self.unavailable.push((prefix, why));
    }

    /// What the model is told when it calls `name`, which is not here: why its tools
    /// cannot be called now, or that no such tool exists.
    pub fn missing(&self, name: &str) -> String {
        self.unavailable
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix.as_str()))
            .map_or_else(|| format!("There is no tool called `{name}`."), |(_, why)| why.clone())
    }

    /// The specs offered to the model; `read_only` keeps only tools that change nothing.
    pub fn specs(&self, read_only: bool) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| !read_only || matches!(t.kind(), ToolKind::Read | ToolKind::Search | ToolKind::Think))
            .map(|t| t.spec())
            .collect()
    }
}

/// The built-in tools: files, search, commands, the plan and questions.
pub fn builtin() -> Registry {
    let mut registry = Registry::new();
    registry.add(Arc::new(read_file::ReadFile));
    registry.add(Arc::new(write_file::WriteFile));
    registry.add(Arc::new(edit_file::EditFile));
    registry.add(Arc::new(list_files::ListFiles));
    registry.add(Arc::new(grep::Grep));
    registry.add(Arc::new(run_command::RunCommand));
    registry.add(Arc::new(todo::TodoWrite));
    registry.add(Arc::new(question::Question));
    registry.add(Arc::new(finish_goal::FinishGoal));
    registry
}
