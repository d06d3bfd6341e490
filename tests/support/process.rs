//! A real `heron` process spoken to over its stdio, the way an editor does: how it is
//! started ([`Launch`]), and the editor's end of its pipes ([`Process`]).
//!
//! Every stdout line is checked on a reader thread of its own (one LF-terminated JSON-RPC
//! 2.0 object, no terminal escapes: Heron's stdout carries protocol messages only), so a
//! wait can have a deadline and a bad line fails the test where it is read. The thread
//! holds a bounded number of lines ahead of the test, so an editor that stops reading
//! stops Heron's writes, as over a real pipe.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a real process may take to answer: a debug build on two shared cores.
pub const PROCESS_WAIT: Duration = Duration::from_secs(30);

/// How many checked lines the reader thread keeps ahead of the test by default.
const READ_AHEAD: usize = 4096;

/// What becomes of the process's stderr.
enum Stderr {
    /// Dropped.
    Null,
    /// Drained all along into a string (a chatty log never blocks the process on a full
    /// pipe), for [`Process::finish`].
    Captured,
    /// Shown with the test's own output.
    Inherited,
}

/// How a process is started: a command, what becomes of its stderr, and how its stdout is
/// read. Stdin and stdout are always piped.
pub struct Launch {
    command: Command,
    stderr: Stderr,
    read_ahead: usize,
    read_now: bool,
    wait: Duration,
}

impl Launch {
    /// `heron acp args...` on HERON_HOME `home`, logging at `warn`.
    pub fn acp(home: &Path, args: &[&str]) -> Launch {
        let mut command = Command::new(super::heron_bin());
        command.arg("acp").args(args).env("HERON_HOME", home).env("HERON_LOG", "warn");
        Launch::command(command)
    }

    /// `command` as it is (`heron acp` behind a shell, say), which must speak ACP on its
    /// stdio.
    pub fn command(command: Command) -> Launch {
        Launch { command, stderr: Stderr::Null, read_ahead: READ_AHEAD, read_now: true, wait: PROCESS_WAIT }
    }

    /// Sets `key` in the process's environment.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Launch {
        self.command.env(key, value);
        self
    }

    /// Removes `key` from the process's environment.
    pub fn env_remove(mut self, key: &str) -> Launch {
        self.command.env_remove(key);
        self
    }

    /// Runs the process in `dir`.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Launch {
        self.command.current_dir(dir);
        self
    }

    /// Keeps what the process logs, for [`Process::finish`].
    pub fn capture_stderr(mut self) -> Launch {
        self.stderr = Stderr::Captured;
        self
    }

    /// Shows what the process logs with the test's output.
    pub fn inherit_stderr(mut self) -> Launch {
        self.stderr = Stderr::Inherited;
        self
    }

    /// Reads at most `lines` ahead of the test (an editor that is slow to read).
    pub fn read_ahead(mut self, lines: usize) -> Launch {
        self.read_ahead = lines;
        self
    }

    /// Waits up to `wait` for each message instead of [`PROCESS_WAIT`] (a real model server
    /// on a slow machine).
    pub fn patience(mut self, wait: Duration) -> Launch {
        self.wait = wait;
        self
    }

    /// Leaves stdout unread until [`Process::read_stdout`] (an editor that does not read).
    pub fn unread(mut self) -> Launch {
        self.read_now = false;
        self
    }

    /// Starts the process.
    pub fn start(self) -> Process {
        let Launch { mut command, stderr, read_ahead, read_now, wait } = self;
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(match stderr {
            Stderr::Null => Stdio::null(),
            Stderr::Captured => Stdio::piped(),
            Stderr::Inherited => Stdio::inherit(),
        });
        let mut child = command.spawn().expect("spawn heron");
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        let mut process = Process {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            lines: None,
            stderr,
            read_ahead,
            wait,
        };
        if read_now {
            process.read_stdout();
        }
        process
    }
}

/// The editor's end of a real process's stdio.
pub struct Process {
    pub child: Child,
    /// Open until [`Process::close_input`]; a test may take it to write from a thread.
    pub stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// Every stdout line, checked and parsed by the reader thread; `Err` says what was wrong.
    lines: Option<Receiver<Result<Value, String>>>,
    stderr: Option<JoinHandle<String>>,
    read_ahead: usize,
    /// How long a message may take.
    wait: Duration,
}

/// A process that ended: how, what it wrote that was not read, and what it logged (when
/// captured).
pub struct Exited {
    pub status: ExitStatus,
    pub rest: Vec<Value>,
    pub stderr: String,
}

impl Process {
    /// Starts `heron acp args...` on `home` (see [`Launch::acp`]).
    pub fn spawn(home: &Path, args: &[&str]) -> Process {
        Launch::acp(home, args).start()
    }

    /// Starts `command` (`heron acp`, or a wrapper around it) and drives it.
    pub fn piped(command: Command) -> Process {
        Launch::command(command).start()
    }

    /// Starts the thread that reads, checks and parses every stdout line.
    pub fn read_stdout(&mut self) {
        let stdout = self.stdout.take().expect("stdout is read once");
        let (sender, lines) = sync_channel(self.read_ahead);
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if sender.send(check_stdout_line(&line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        self.lines = Some(lines);
    }

    /// Writes `bytes` as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).and_then(|()| stdin.flush()).expect("write to heron");
    }

    /// Writes `line` and a newline.
    pub fn send_line(&mut self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    /// Sends one message.
    pub fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// The next message, within [`PROCESS_WAIT`] (or the launch's patience); a bad stdout
    /// line fails the test.
    pub fn next(&self) -> Value {
        let lines = self.lines.as_ref().expect("stdout is being read");
        match lines.recv_timeout(self.wait) {
            Ok(Ok(message)) => message,
            Ok(Err(problem)) => panic!("{problem}"),
            Err(RecvTimeoutError::Timeout) => panic!("no message from heron within {:?}", self.wait),
            Err(RecvTimeoutError::Disconnected) => panic!("heron closed its output while a message was due"),
        }
    }

    /// Reads until a message `done` accepts, and returns it.
    pub fn until(&self, done: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.next();
            if done(&message) {
                return message;
            }
        }
    }

    /// Reads until the answer to request `id`, handing each message before it to `each`
    /// (which may answer the agent's own requests through the process it is given).
    pub fn until_answer(&mut self, id: &Value, mut each: impl FnMut(&mut Process, &Value)) -> Value {
        loop {
            let message = self.next();
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return message;
            }
            each(self, &message);
        }
    }

    /// Sends a request and returns its answer, skipping the notifications before it.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.until_answer(&id, |_, _| {})
    }

    /// Answers the agent's request `request` with `result`.
    pub fn reply(&mut self, request: &Value, result: Value) {
        self.send(json!({ "jsonrpc": "2.0", "id": request["id"], "result": result }));
    }

    /// `initialize`, then `session/new` in `cwd`; returns the session id.
    pub fn new_session(&mut self, cwd: &str) -> String {
        self.request(json!("init"), "initialize", json!({ "protocolVersion": 1 }));
        let answer = self.request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_owned()
    }

    /// Sends `session/prompt` with one text block under `id`, without waiting.
    pub fn send_prompt(&mut self, id: Value, session: &str, text: &str) {
        let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params }));
    }

    /// Closes stdin, as an editor that quits.
    pub fn close_input(&mut self) {
        self.stdin = None;
    }

    /// Waits at most `limit` for the process to exit; how long it took, or `None`.
    pub fn exited_within(&mut self, limit: Duration) -> Option<Duration> {
        let began = Instant::now();
        while began.elapsed() < limit {
            if self.child.try_wait().expect("wait for heron").is_some() {
                return Some(began.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Closes stdin and waits for the process to exit, failing the test past `limit`;
    /// then what it wrote that was not read, and its log if captured.
    pub fn finish(mut self, limit: Duration) -> Exited {
        self.close_input();
        let closed = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for heron") {
                break status;
            }
            assert!(closed.elapsed() < limit, "heron still running {limit:?} after stdin EOF");
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.take().map(|t| t.join().expect("stderr thread")).unwrap_or_default();
        // The process is gone, so the reader thread ends at EOF and this terminates.
        let rest = self
            .lines
            .take()
            .into_iter()
            .flatten()
            .map(|line| line.unwrap_or_else(|problem| panic!("{problem}")))
            .collect();
        Exited { status, rest, stderr }
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_memory(&self) -> usize {
        memory_field(self.child.id(), "VmHWM:").expect("VmHWM in /proc status")
    }

    /// The process's resident memory now (`VmRSS`), in bytes.
    pub fn memory(&self) -> usize {
        memory_field(self.child.id(), "VmRSS:").unwrap_or(0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Only after a failed test is it still running; stop it by its own handle.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A memory figure of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), in bytes.
fn memory_field(pid: u32, field: &str) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(field))?;
    let kib: usize = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Checks one raw stdout line: LF-terminated, no ANSI escape, exactly one JSON-RPC 2.0
/// object (a response with exactly one of `result` and `error`, or a request or
/// notification with a string `method`).
fn check_stdout_line(line: &[u8]) -> Result<Value, String> {
    let shown = String::from_utf8_lossy(line);
    let text = line.strip_suffix(b"\n").ok_or_else(|| format!("stdout ended mid-line: {shown:?}"))?;
    if text.contains(&0x1b) {
        return Err(format!("ANSI escape on stdout: {shown:?}"));
    }
    let message: Value = serde_json::from_slice(text)
        .map_err(|err| format!("stdout line is not one JSON value ({err}): {shown:?}"))?;
    let Some(object) = message.as_object() else {
        return Err(format!("stdout line is not a JSON object: {shown:?}"));
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(format!("stdout line is not JSON-RPC 2.0: {shown:?}"));
    }
    let shape_ok = match (object.get("method"), object.get("result"), object.get("error")) {
        (Some(method), None, None) => method.is_string(),
        (None, Some(_), None) => object.contains_key("id"),
        (None, None, Some(error)) => {
            object.contains_key("id") && error["code"].is_i64() && error["message"].is_string()
        }
        _ => false,
    };
    if !shape_ok {
        return Err(format!("stdout line is not a JSON-RPC request, notification or response: {shown:?}"));
    }
    Ok(message)
}
