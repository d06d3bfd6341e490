//! A spawned `heron acp` driven line by line over real pipes, for the benches that time the
//! optimised binary from outside; it is killed when dropped, so no bench leaves one behind.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// Every agent notification starts with these bytes (`envelope::encode_notification`), so
/// they are told from answers without parsing them.
const NOTIFICATION: &str = r#"{"jsonrpc":"2.0","method":"#;

/// One `heron acp` process and the editor's end of its stdio.
pub struct Spawned {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Spawned {
    /// Starts `bin` with `args` on `home` (logs and validation off) and initializes it.
    pub fn start(bin: &Path, args: &[&str], home: &Path) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .env("HERON_HOME", home)
            .env_remove("HERON_LOG")
            .env_remove("HERON_VALIDATE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn heron");
        let input = child.stdin.take().expect("piped stdin");
        let output = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut agent = Self { child, input, output, next_id: 0 };
        agent.call("initialize", json!({ "protocolVersion": 1, "clientCapabilities": {} }));
        agent
    }

    /// Sends a request and returns its `result`, skipping notifications; an error answer
    /// is a bench failure.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_watching(method, params, |_| {})
    }

    /// [`Spawned::call`], handing each notification line to `each` as soon as it is read.
    pub fn call_watching(&mut self, method: &str, params: Value, mut each: impl FnMut(&str)) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        line.push('\n');
        self.input.write_all(line.as_bytes()).expect("write a request");
        self.input.flush().expect("flush a request");
        loop {
            let mut line = String::new();
            let read = self.output.read_line(&mut line).expect("read from heron");
            assert!(read > 0, "heron closed its output during {method}");
            if line.starts_with(NOTIFICATION) {
                each(&line);
                continue;
            }
            let mut message: Value = serde_json::from_str(&line).expect("heron writes JSON lines");
            assert!(message.get("method").is_none(), "heron asked the bench something: {line}");
            assert!(message["id"] == id, "an answer to another request: {line}");
            match message.get_mut("result") {
                Some(result) => return result.take(),
                None => panic!("{method} failed: {line}"),
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
