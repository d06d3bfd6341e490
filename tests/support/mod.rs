//! What the binary's tests share: `heron acp` over in-memory pipes ([`Editor`]), the real
//! binary over its stdio ([`Process`]), `heron run` ([`run`]), private directories
//! ([`Dirs`]), and the model servers (mocks, and a real one in `llama`) and helpers each kind
//! of test drives them with.

#[path = "../../crates/heron-core/tests/support/clients.rs"]
pub mod clients;
pub mod endpoint;
#[path = "../../crates/heron-core/tests/support/mcp_python.rs"]
pub mod mcp_python;
pub mod playing;
#[path = "../../crates/heron-core/tests/support/scratch.rs"]
pub mod scratch;
#[path = "../../crates/heron-core/tests/support/server_mock.rs"]
pub mod server_mock;
#[path = "../../crates/heron-core/tests/support/servers.rs"]
pub mod servers;
#[path = "../../crates/heron-core/tests/support/windowed.rs"]
pub mod windowed;

pub mod conformance;
pub mod llama;
pub mod process;
pub mod run;
pub mod turns;

pub use process::{Launch, PROCESS_WAIT, Process};

use std::time::Duration;

use std::path::PathBuf;
use std::sync::Arc;

use heron::cli::acp::{AcpArgs, serve};
use heron_core::config::Home;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

/// The binary under test: `HERON_TEST_BIN` when set (a release build, for figures that
/// mean something), else the one cargo built for these tests.
pub fn heron_bin() -> std::path::PathBuf {
    std::env::var_os("HERON_TEST_BIN").map_or_else(|| env!("CARGO_BIN_EXE_heron").into(), Into::into)
}

/// An editor's end of a connection to an in-process `heron acp`.
pub struct Editor {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    pub server: JoinHandle<()>,
    /// A private HERON_HOME and workspace, removed when the editor is dropped.
    pub dirs: Arc<Dirs>,
}

/// A temporary HERON_HOME and workspace, removed when dropped. Paths are given resolved
/// (the temporary folder may be behind a symlink), so they compare equal to what Heron and
/// its clients resolve.
pub struct Dirs {
    _root: tempfile::TempDir,
    /// The root, resolved.
    root: PathBuf,
    /// HERON_HOME, relative to `root`.
    home: &'static str,
}

impl Dirs {
    /// Fresh, empty directories: `home` and `ws` side by side.
    pub fn new() -> Arc<Dirs> {
        Self::with_home_at("home")
    }

    /// Fresh directories whose HERON_HOME is `ws/.heron`, as when an editor opens `~`.
    pub fn home_in_workspace() -> Arc<Dirs> {
        Self::with_home_at("ws/.heron")
    }

    /// Fresh directories like [`Dirs::new`], outside the temp folder every sandboxed
    /// command may write, so that what the sandbox refuses beside the workspace shows.
    pub fn outside_temp() -> Arc<Dirs> {
        Self::in_root(tempfile::tempdir_in(scratch::dir()).expect("tempdir"), "home")
    }

    fn with_home_at(home: &'static str) -> Arc<Dirs> {
        Self::in_root(tempfile::tempdir().expect("tempdir"), home)
    }

    fn in_root(temp: tempfile::TempDir, home: &'static str) -> Arc<Dirs> {
        let root = std::fs::canonicalize(temp.path()).expect("a resolved temporary folder");
        std::fs::create_dir_all(root.join("ws")).expect("workspace");
        std::fs::create_dir_all(root.join(home)).expect("home");
        Arc::new(Dirs { _root: temp, root, home })
    }

    /// `name` beside the home and the workspace (not created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// HERON_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.join(self.home)
    }

    /// The workspace, as the string a client sends for `cwd`.
    pub fn ws(&self) -> String {
        self.ws_path().display().to_string()
    }

    /// The workspace.
    pub fn ws_path(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// `rel` in the workspace, as the string a client sends.
    pub fn at(&self, rel: &str) -> String {
        self.ws_path().join(rel).display().to_string()
    }

    /// Another directory beside the workspace, created, as the string a client sends.
    pub fn other(&self, name: &str) -> String {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).expect("other directory");
        dir.display().to_string()
    }

    /// Writes `text` to `name` under HERON_HOME (`config.toml`, `.env`, a script).
    pub fn write_home(&self, name: &str, text: &str) {
        std::fs::write(self.home().join(name), text).expect("write into HERON_HOME");
    }
}

/// Fresh directories whose HERON_HOME holds `files`, as (name, text) pairs.
pub fn dirs_with(files: &[(&str, &str)]) -> Arc<Dirs> {
    let dirs = Dirs::new();
    for (name, text) in files {
        dirs.write_home(name, text);
    }
    dirs
}

/// `config.toml` text for a scripted provider `name` with one model `m` playing `script`
/// (a file name under HERON_HOME); the model id is `name/m`.
pub fn scripted_provider(name: &str, script: &str) -> String {
    format!("[providers.{name}]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"{script}\"\n")
}

/// Fresh directories whose model `name/m` plays `script`; `config` (top-level keys, which
/// must come before the first table) goes first in `config.toml`.
pub fn scripted_home(name: &str, config: &str, script: &str) -> Arc<Dirs> {
    let file = format!("{name}.jsonl");
    let config = format!("{config}{}", scripted_provider(name, &file));
    dirs_with(&[("config.toml", &config), (&file, script)])
}

/// `heron acp --validate --model name/m`.
pub fn scripted_args(name: &str) -> AcpArgs {
    AcpArgs { model: Some(format!("{name}/m")), ..demo_args() }
}

/// A fresh agent whose model `name/m` plays `script`.
pub fn start_scripted(name: &str, script: &str) -> Editor {
    start_in(scripted_args(name), scripted_home(name, "", script))
}

/// `clientCapabilities` asking for status updates, plus the members of `extra`.
pub fn wanting_status(extra: Value) -> Value {
    let mut capabilities = serde_json::json!({ "_meta": { "heron": { "statusUpdates": true } } });
    if let (Some(all), Some(more)) = (capabilities.as_object_mut(), extra.as_object()) {
        all.extend(more.clone());
    }
    capabilities
}

/// The `sessionUpdate` kind of a `session/update` notification; `None` for anything else.
pub fn update_kind(message: &Value) -> Option<&str> {
    if message["method"] != "session/update" {
        return None;
    }
    message["params"]["update"]["sessionUpdate"].as_str()
}

/// `heron acp --validate --model demo/demo`.
pub fn demo_args() -> AcpArgs {
    AcpArgs { validate: true, model: Some("demo/demo".into()), ..AcpArgs::default() }
}

/// Starts `heron acp --validate --model demo/demo` on in-memory pipes with a fresh home.
pub fn start() -> Editor {
    start_with(demo_args())
}

/// Starts `heron acp` with `args` on in-memory pipes with a fresh home.
pub fn start_with(args: AcpArgs) -> Editor {
    start_in(args, Dirs::new())
}

/// Starts `heron acp` with `args` on in-memory pipes in existing directories.
pub fn start_in(args: AcpArgs, dirs: Arc<Dirs>) -> Editor {
    let (editor_in, agent_in) = tokio::io::duplex(1 << 20);
    let (agent_out, editor_out) = tokio::io::duplex(1 << 20);
    let home = Home::at(dirs.home());
    let server = tokio::spawn(async move {
        serve(agent_in, agent_out, &args, &home).await.expect("serve ends cleanly");
    });
    Editor { input: editor_in, output: BufReader::new(editor_out).lines(), server, dirs }
}

impl Editor {
    /// Sends one line (a newline is appended).
    pub async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.expect("write");
        self.input.write_all(b"\n").await.expect("write");
    }

    /// Sends a JSON value as one line.
    pub async fn send_json(&mut self, value: Value) {
        self.send(&value.to_string()).await;
    }

    /// The next message from the agent, within two seconds.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(2), self.output.next_line())
            .await
            .expect("an answer within 2 s")
            .expect("read")
            .expect("the agent closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Asserts that nothing was sent before now: a probe sent now (a method nobody serves)
    /// must be the next thing answered, since Heron's one writer sends in order and whatever
    /// was already on its way would come first. An event, not a wait on the clock.
    pub async fn expect_silence(&mut self) {
        static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("silence-probe-{n}");
        self.send_json(serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": "heron/probe" })).await;
        let next = self.recv().await;
        assert_eq!(next["id"], id.as_str(), "unexpected message: {next}");
    }

    /// Sends a request and returns its answer (which must carry the same id).
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send_json(serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        let answer = self.recv().await;
        assert_eq!(answer["id"], id, "answer for another id: {answer}");
        answer
    }

    /// Sends a request and collects every message until its answer: (notifications, answer).
    pub async fn call(&mut self, id: Value, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send_json(serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        let mut notes = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return (notes, message);
            }
            notes.push(message);
        }
    }

    /// `initialize` then `session/new` in the workspace; returns the session id.
    pub async fn new_session(&mut self) -> String {
        self.request(serde_json::json!("init"), "initialize", serde_json::json!({ "protocolVersion": 1 }))
            .await;
        let cwd = self.dirs.ws();
        let answer = self
            .request(
                serde_json::json!("new"),
                "session/new",
                serde_json::json!({ "cwd": cwd, "mcpServers": [] }),
            )
            .await;
        answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_owned()
    }

    /// Sends a request without waiting for its answer.
    pub async fn send_request(&mut self, id: Value, method: &str, params: Value) {
        self.send_json(serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
    }

    /// The next message from the agent, within `limit`.
    pub async fn recv_within(&mut self, limit: Duration) -> Value {
        let line = tokio::time::timeout(limit, self.output.next_line())
            .await
            .unwrap_or_else(|_| panic!("a message within {limit:?}"))
            .expect("read")
            .expect("the agent closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Collects every message until the answer to `id`: (everything before it, the answer).
    /// The agent's permission requests are answered by allowing once, and kept in the list.
    /// Slash command advertisements (`available_commands_update`), which follow session
    /// setup at their own pace, are left out.
    pub async fn until_answer(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.recv().await;
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (before, message);
            }
            if update_kind(&message) == Some("available_commands_update") {
                continue;
            }
            if message["method"] == "session/request_permission" {
                let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
                let allow = options.iter().find(|o| o["kind"] == "allow_once").or(options.first());
                let option_id = allow.map(|o| o["optionId"].clone()).unwrap_or(Value::Null);
                let reply = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": { "outcome": { "outcome": "selected", "optionId": option_id } },
                });
                self.send_json(reply).await;
            }
            before.push(message);
        }
    }

    /// Sends a request and collects what comes before its answer, as [`Editor::until_answer`].
    pub async fn exchange(&mut self, id: Value, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send_request(id.clone(), method, params).await;
        self.until_answer(&id).await
    }

    /// Sends a request and returns its answer, skipping whatever comes before it.
    pub async fn ask(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.exchange(id, method, params).await.1
    }

    /// `session/prompt` with one text block; returns (messages before the answer, answer).
    pub async fn prompt(&mut self, id: Value, session: &str, text: &str) -> (Vec<Value>, Value) {
        let params =
            serde_json::json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
        self.send_request(id.clone(), "session/prompt", params).await;
        self.until_answer(&id).await
    }

    /// `initialize` with `capabilities`, then `session/new` in the workspace; returns the
    /// session id.
    pub async fn new_session_with(&mut self, capabilities: Value) -> String {
        let params = serde_json::json!({ "protocolVersion": 1, "clientCapabilities": capabilities });
        self.ask(serde_json::json!("init"), "initialize", params).await;
        let cwd = self.dirs.ws();
        let answer = self.open_session(serde_json::json!("new"), &cwd).await;
        answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_owned()
    }

    /// `session/new` in `cwd` (after `initialize` was sent); returns the whole answer.
    pub async fn open_session(&mut self, id: Value, cwd: &str) -> Value {
        self.ask(id, "session/new", serde_json::json!({ "cwd": cwd, "mcpServers": [] })).await
    }

    /// Closes stdin and waits for the agent to stop.
    pub async fn close(self) {
        drop(self.input);
        tokio::time::timeout(Duration::from_secs(2), self.server)
            .await
            .expect("the agent stops within 2 s of EOF")
            .expect("the agent task does not panic");
    }
}

/// Runs git in `dir` as a user would, with an author for its commits; a failure fails the test.
pub fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the test needs git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}
