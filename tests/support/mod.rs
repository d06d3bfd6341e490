//! Drives `heron acp` over in-memory pipes: send lines, read answers with a deadline.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::time::Duration;

use heron::cli::acp::{AcpArgs, serve};
use heron::rpc::DEFAULT_MAX_LINE;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::task::JoinHandle;

/// An editor's end of a connection to an in-process `heron acp`.
pub struct Editor {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    pub server: JoinHandle<()>,
}

/// Starts `heron acp --validate` on in-memory pipes.
pub fn start() -> Editor {
    start_with(AcpArgs { validate: true, max_line_bytes: DEFAULT_MAX_LINE })
}

/// Starts `heron acp` with `args` on in-memory pipes.
pub fn start_with(args: AcpArgs) -> Editor {
    let (editor_in, agent_in) = tokio::io::duplex(1 << 20);
    let (agent_out, editor_out) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(async move {
        serve(agent_in, agent_out, &args).await.expect("serve ends cleanly");
    });
    Editor { input: editor_in, output: BufReader::new(editor_out).lines(), server }
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

    /// Closes stdin and waits for the agent to stop.
    pub async fn close(self) {
        drop(self.input);
        tokio::time::timeout(Duration::from_secs(2), self.server)
            .await
            .expect("the agent stops within 2 s of EOF")
            .expect("the agent task does not panic");
    }
}
