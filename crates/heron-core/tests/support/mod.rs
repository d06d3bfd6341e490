//! A scriptable stand-in for the editor side of a session, for the tool tests: it records
//! every call, serves an in-memory buffer map and fake terminals, and answers questions.

pub mod clients;
pub mod mcp_python;
pub mod runs;
pub mod scratch;
pub mod served;
pub mod server_mock;
pub mod servers;
pub mod windowed;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_core::sandbox::{Policy, Withheld};
use heron_core::tools::editor::{
    Answer, Call, EditorError, EditorIo, Elicitation, ElicitationAnswer, ElicitationModes, ExitStatus,
    NoEditor, PermissionAnswer, PermissionAsk, QuestionAnswer, TerminalCommand, TerminalOutput,
};
use heron_core::tools::roots::Roots;
use heron_core::tools::{Outcome, Tool, ToolEnv};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the fake offers and how it behaves.
#[derive(Debug, Clone)]
pub struct Script {
    pub reads: bool,
    pub writes: bool,
    pub terminals: bool,
    pub questions: bool,
    /// When a terminal command exits on its own; `None`: only when killed.
    pub exit_after: Option<Duration>,
    pub exit_code: u32,
    /// The answer to questions; `None`: never answers.
    pub answer: Option<QuestionAnswer>,
    /// What a terminal's output is, and whether the editor cut its start.
    pub output: (String, bool),
    /// The elicitation modes it advertises, and its answer to an elicitation.
    pub elicitation: ElicitationModes,
    pub elicited: ElicitationAnswer,
    /// Instead of answering, the elicitation fails with this (the editor's wait ran out).
    pub elicit_error: Option<String>,
}

impl Script {
    /// Everything offered; commands exit 0 at once; questions are answered "yes".
    pub fn full() -> Self {
        Self {
            reads: true,
            writes: true,
            terminals: true,
            questions: true,
            exit_after: Some(Duration::ZERO),
            exit_code: 0,
            answer: Some(QuestionAnswer::Answer("yes".to_owned())),
            output: ("fake output\n".to_owned(), false),
            elicitation: ElicitationModes { form: true, url: true },
            elicited: ElicitationAnswer::Decline,
            elicit_error: None,
        }
    }
}

struct State {
    script: Script,
    calls: Mutex<Vec<String>>,
    elicitations: Mutex<Vec<Elicitation>>,
    buffers: Mutex<HashMap<PathBuf, String>>,
    killed: watch::Sender<bool>,
}

/// The fake editor; clones share state.
#[derive(Clone)]
pub struct FakeEditor(Arc<State>);

impl FakeEditor {
    pub fn new(script: Script) -> Self {
        let (killed, _) = watch::channel(false);
        Self(Arc::new(State {
            script,
            calls: Mutex::default(),
            elicitations: Mutex::default(),
            buffers: Mutex::default(),
            killed,
        }))
    }

    /// The calls so far, as `method` or `method arg`.
    pub fn calls(&self) -> Vec<String> {
        self.0.calls.lock().expect("calls").clone()
    }

    /// The elicitations it was shown so far.
    pub fn elicitations(&self) -> Vec<Elicitation> {
        self.0.elicitations.lock().expect("elicitations").clone()
    }

    /// Just the method names of the calls so far.
    pub fn methods(&self) -> Vec<String> {
        self.calls().iter().map(|c| c.split(' ').next().unwrap_or_default().to_owned()).collect()
    }

    /// Puts an unsaved buffer in the editor.
    pub fn set_buffer(&self, path: &Path, text: &str) {
        self.0.buffers.lock().expect("buffers").insert(path.to_path_buf(), text.to_owned());
    }

    /// The editor's buffer for `path`, if it has one.
    pub fn buffer(&self, path: &Path) -> Option<String> {
        self.0.buffers.lock().expect("buffers").get(path).cloned()
    }

    fn record(&self, call: String) {
        self.0.calls.lock().expect("calls").push(call);
    }
}

fn ready<T: Send + 'static>(value: T) -> Call<T> {
    Call::answered(value)
}

/// A call sent at once whose answer is `answer`.
fn later<T: Send + 'static>(answer: impl std::future::Future<Output = T> + Send + 'static) -> Call<T> {
    Call::new(std::future::ready(Answer::new(answer)))
}

impl EditorIo for FakeEditor {
    fn reads_files(&self) -> bool {
        self.0.script.reads
    }
    fn writes_files(&self) -> bool {
        self.0.script.writes
    }
    fn has_terminals(&self) -> bool {
        self.0.script.terminals
    }
    fn asks_questions(&self) -> bool {
        self.0.script.questions
    }

    fn read_text_file(&self, path: &Path) -> Call<Result<String, EditorError>> {
        self.record(format!("read_text_file {}", path.display()));
        if let Some(text) = self.buffer(path) {
            return ready(Ok(text));
        }
        ready(std::fs::read_to_string(path).map_err(|e| EditorError(e.to_string())))
    }

    fn write_text_file(&self, path: &Path, content: String) -> Call<Result<(), EditorError>> {
        self.record(format!("write_text_file {}", path.display()));
        self.0.buffers.lock().expect("buffers").insert(path.to_path_buf(), content);
        ready(Ok(()))
    }

    fn terminal_create(&self, command: TerminalCommand) -> Call<Result<String, EditorError>> {
        self.record(format!(
            "terminal_create {} {} in {}",
            command.command,
            command.args.join(" "),
            command.cwd
        ));
        ready(Ok("term-1".to_owned()))
    }

    fn terminal_output(&self, id: &str) -> Call<Result<TerminalOutput, EditorError>> {
        self.record(format!("terminal_output {id}"));
        let (output, truncated) = self.0.script.output.clone();
        ready(Ok(TerminalOutput { output, truncated, exit: None }))
    }

    fn terminal_wait_for_exit(&self, id: &str) -> Call<Result<ExitStatus, EditorError>> {
        self.record(format!("terminal_wait_for_exit {id}"));
        let script = self.0.script.clone();
        let mut killed = self.0.killed.subscribe();
        later(async move {
            match script.exit_after {
                Some(after) => {
                    tokio::time::sleep(after).await;
                    Ok(ExitStatus { code: Some(script.exit_code), signal: None })
                }
                None => {
                    let _ = killed.wait_for(|k| *k).await;
                    Ok(ExitStatus { code: None, signal: Some("SIGKILL".to_owned()) })
                }
            }
        })
    }

    fn terminal_kill(&self, id: &str) -> Call<Result<(), EditorError>> {
        self.record(format!("terminal_kill {id}"));
        self.0.killed.send_replace(true);
        ready(Ok(()))
    }

    fn terminal_release(&self, id: &str) -> Call<Result<(), EditorError>> {
        self.record(format!("terminal_release {id}"));
        self.0.killed.send_replace(true);
        ready(Ok(()))
    }

    fn request_permission(&self, ask: &PermissionAsk, _: Duration) -> Call<PermissionAnswer> {
        self.record(format!("request_permission {}", ask.call_id));
        ready(PermissionAnswer::AllowOnce)
    }

    fn elicitation_modes(&self) -> ElicitationModes {
        self.0.script.elicitation
    }

    fn elicit(&self, request: Elicitation) -> Call<Result<ElicitationAnswer, EditorError>> {
        self.0.elicitations.lock().expect("elicitations").push(request);
        match &self.0.script.elicit_error {
            Some(error) => ready(Err(EditorError(error.clone()))),
            None => ready(Ok(self.0.script.elicited.clone())),
        }
    }

    fn ask(
        &self,
        question: &str,
        options: &[String],
        call_id: Option<&str>,
    ) -> Call<Result<QuestionAnswer, EditorError>> {
        let on = call_id.map(|id| format!(" on {id}")).unwrap_or_default();
        self.record(format!("ask {question} [{}]{on}", options.join("|")));
        match self.0.script.answer.clone() {
            Some(answer) => ready(Ok(answer)),
            None => later(std::future::pending()),
        }
    }
}

/// A temporary directory with a workspace `ws`, a sibling `outside` and a Heron home `home`
/// (hidden from commands by the sandbox).
pub struct Dirs {
    pub root: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        Self::in_dir(tempfile::tempdir().expect("tempdir"))
    }

    /// The same layout in `root`.
    pub fn in_dir(root: tempfile::TempDir) -> Self {
        for dir in ["ws", "outside", "home"] {
            std::fs::create_dir_all(root.path().join(dir)).expect("dirs");
        }
        Self { root }
    }

    /// Heron's home (canonical).
    pub fn home(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("home")).expect("canonical home")
    }

    /// The sandbox of a session over the workspace, on, with no extra writable paths.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::new(Policy {
            enabled: true,
            home: self.home(),
            roots: vec![self.ws()],
            writable: Vec::new(),
            credentials: Vec::new(),
            withheld: Withheld::default(),
            list_carved: false,
            readable: None,
            network: true,
            port: None,
            private_ports: Vec::new(),
            host_sockets: Vec::new(),
            temp: Default::default(),
        })
    }

    /// The workspace (canonical).
    pub fn ws(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("ws")).expect("canonical ws")
    }

    /// The sibling directory outside the workspace (canonical).
    pub fn outside(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("outside")).expect("canonical outside")
    }

    /// Writes bytes under the workspace, creating parents.
    pub fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.ws().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("parents");
        }
        std::fs::write(&path, bytes).expect("write fixture");
        path
    }

    /// A local-only environment over the workspace.
    pub fn env(&self) -> ToolEnv {
        self.env_with(Arc::new(NoEditor))
    }

    /// Heron's home inside the workspace (`ws/.heron`, as when an editor opens `~`), with a
    /// key in its `.env` and a config.
    pub fn home_inside(&self) -> PathBuf {
        let home = self.ws().join(".heron");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join(".env"), "OPENAI_API_KEY=sk-live-0123456789abcdef\n").expect("env");
        std::fs::write(home.join("config.toml"), "default_model = \"demo/demo\"\n").expect("config");
        home
    }

    /// A local-only environment whose tools keep out of Heron's home at `home`.
    pub fn env_protecting(&self, home: &std::path::Path) -> ToolEnv {
        let mut env = self.env();
        let protected = heron_core::tools::protected::Protected::new(home, None);
        env.roots = Arc::new(Roots::new(self.ws(), Vec::new()).protecting(protected));
        env
    }

    /// An environment over the workspace with `editor`.
    pub fn env_with(&self, editor: Arc<dyn EditorIo>) -> ToolEnv {
        ToolEnv {
            cwd: self.ws(),
            roots: Arc::new(Roots::new(self.ws(), Vec::new())),
            cancel: CancellationToken::new(),
            editor,
            secrets: Arc::new(Vec::new()),
            sandbox: self.policy(),
            progress: Default::default(),
            witness: None,
            deadlines: Default::default(),
        }
    }
}

/// Prepares and runs one call, panicking when preparation fails.
pub async fn call(tool: &dyn Tool, env: &ToolEnv, args: Value) -> Outcome {
    let prepared = match tool.prepare(&args.to_string(), env) {
        Ok(prepared) => prepared,
        Err(message) => panic!("prepare failed: {message}"),
    };
    tool.run(prepared, env.clone()).await
}

/// The text of an outcome's first text output.
pub fn text_of(outcome: &Outcome) -> String {
    outcome
        .output
        .iter()
        .find_map(|o| match o {
            heron_core::types::ToolOutput::Text { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A session manager over `home` (its config, keys and store) with the built-in tools.
pub async fn manager_for(
    home: &heron_core::config::Home,
    options: heron_core::session::ManagerOptions,
) -> heron_core::session::Manager {
    use heron_core::config::{Config, Keys};
    let providers = heron_core::llm::registry::Providers::new(
        home.clone(),
        Arc::new(Config::load(home).expect("config parses")),
        Arc::new(Keys::load(home).expect("keys")),
    );
    let store = heron_store::Store::open(home.db_path()).await.expect("store");
    heron_core::session::Manager::new(
        store,
        heron_core::extensions::Runtime::bare(Arc::new(providers)),
        Arc::new(heron_core::tools::builtin()),
        options,
        home.root().join("transcripts"),
    )
}

/// Whether `pid` is a live (not zombie) process, from `/proc`.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rfind(')').map(|i| stat[i + 2..].starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Waits up to 5 s until no process of this machine has `marker` in its command line; fails
/// naming `what` if one does. For processes of a pid namespace, whose own pids mean nothing
/// here.
pub fn wait_until_none_runs(marker: &str, what: &str) {
    let running = || {
        std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
            let pid = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok());
            pid.is_some_and(|pid| {
                alive(pid)
                    && std::fs::read(entry.path().join("cmdline"))
                        .is_ok_and(|line| String::from_utf8_lossy(&line).contains(marker))
            })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while running() {
        assert!(std::time::Instant::now() < deadline, "{what} ({marker}) outlived the command");
        std::thread::sleep(Duration::from_millis(20));
    }
}
