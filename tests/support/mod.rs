//! Drives `heron acp` over in-memory pipes: send lines, read answers with a deadline.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::time::Duration;

use std::path::PathBuf;
use std::sync::Arc;

use heron::cli::acp::{AcpArgs, serve};
use heron::config::Home;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

/// An editor's end of a connection to an in-process `heron acp`.
pub struct Editor {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    pub server: JoinHandle<()>,
    /// A private HERON_HOME and workspace, removed when the editor is dropped.
    pub dirs: Arc<Dirs>,
}

/// A temporary HERON_HOME and workspace.
pub struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    /// Fresh, empty directories.
    pub fn new() -> Arc<Dirs> {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("home")).expect("home");
        std::fs::create_dir_all(root.path().join("ws")).expect("workspace");
        Arc::new(Dirs { root })
    }

    /// HERON_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The workspace, as the string a client sends for `cwd`.
    pub fn ws(&self) -> String {
        self.root.path().join("ws").display().to_string()
    }
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

    /// Asserts nothing arrives for a short while.
    pub async fn expect_silence(&mut self) {
        let next = tokio::time::timeout(Duration::from_millis(150), self.output.next_line()).await;
        assert!(next.is_err(), "unexpected message: {next:?}");
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

    /// Closes stdin and waits for the agent to stop.
    pub async fn close(self) {
        drop(self.input);
        tokio::time::timeout(Duration::from_secs(2), self.server)
            .await
            .expect("the agent stops within 2 s of EOF")
            .expect("the agent task does not panic");
    }
}
