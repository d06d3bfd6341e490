//! Drives the real `heron run` binary: against Heron itself on a scripted model, or
//! against the scripted fake agent `tests/fixtures/acp_agent.py`, whose log (beside the
//! workspace) says what the client sent it and what came back.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Dirs;

/// How long a run may take before the test gives up on it.
pub const RUN_WAIT: Duration = Duration::from_secs(60);

/// The fake agent's plan and log live beside the workspace.
impl Dirs {
    /// The `--agent` command playing `plan`, logging to `log.jsonl` under the root.
    pub fn fake_agent(&self, plan: &Value) -> String {
        let plan_path = self.path("plan.json");
        std::fs::write(&plan_path, plan.to_string()).expect("write plan");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp_agent.py");
        format!(
            "exec python3 '{}' '{}' '{}'",
            fixture.display(),
            plan_path.display(),
            self.agent_log().display()
        )
    }

    fn agent_log(&self) -> PathBuf {
        self.path("log.jsonl")
    }

    /// What the fake agent logged so far.
    pub fn log(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.agent_log()).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The logged entries of `event`.
    pub fn events(&self, event: &str) -> Vec<Value> {
        self.log().into_iter().filter(|e| e["event"] == event).collect()
    }

    /// The replies the fake agent got, in order.
    pub fn replies(&self) -> Vec<Value> {
        self.events("reply").into_iter().map(|e| e["reply"].clone()).collect()
    }

    /// Waits until the fake agent has logged `event`.
    pub fn wait_for(&self, event: &str) {
        let began = Instant::now();
        while self.events(event).is_empty() {
            assert!(began.elapsed() < RUN_WAIT, "the agent never logged {event}: {:?}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A running `heron run`.
pub struct Run {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Drained,
    stderr: Drained,
}

/// What a pipe's reader has taken so far, and the reader, which ends with the pipe.
struct Drained {
    bytes: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Drained {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

/// A finished run.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

fn drain(mut from: impl Read + Send + 'static) -> Drained {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::clone(&bytes);
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = from.read(&mut buffer) {
            if n == 0 {
                break;
            }
            shared.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(&buffer[..n]);
        }
    });
    Drained { bytes, reader }
}

/// The `heron run` command on `dirs`'s home and workspace; `NO_COLOR` is left unset, so
/// that only the missing terminal keeps escape codes out.
pub fn command(dirs: &Dirs, args: &[&str]) -> Command {
    let mut command = Command::new(super::heron_bin());
    command
        .arg("run")
        .arg("--cwd")
        .arg(dirs.ws_path())
        .args(args)
        .env("HERON_HOME", dirs.home())
        .env("HERON_LOG", "warn")
        .env_remove("NO_COLOR");
    command
}

impl Run {
    /// Starts `heron run args...`, then writes `input` to its stdin (kept open).
    pub fn start(dirs: &Dirs, args: &[&str], input: &str) -> Run {
        let mut child = command(dirs, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn heron run");
        let mut stdin = child.stdin.take();
        if let Some(pipe) = stdin.as_mut() {
            pipe.write_all(input.as_bytes()).expect("write stdin");
        }
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        Run { child, stdin, stdout, stderr }
    }

    /// Writes one line to stdin.
    pub fn type_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").and_then(|()| stdin.flush()).expect("write stdin");
    }

    /// Closes stdin (end of input).
    pub fn close_input(&mut self) {
        self.stdin = None;
    }

    /// What stderr holds so far.
    pub fn stderr_now(&self) -> String {
        self.stderr.text()
    }

    /// Sends `signal` to `heron run`.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill takes plain integers.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal heron run");
    }

    /// Waits for the run to end (failing the test past [`RUN_WAIT`]).
    pub fn finish(mut self) -> Finished {
        self.close_input();
        let began = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if began.elapsed() > RUN_WAIT {
                let _ = self.child.kill();
                panic!("heron run did not end; stderr so far:\n{}", self.stderr_now());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The readers end with the pipes, once they have taken the last bytes; a process
        // the run left behind could hold a pipe open, so the wait is bounded.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !(self.stdout.reader.is_finished() && self.stderr.reader.is_finished())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        Finished { status, stdout: self.stdout.text(), stderr: self.stderr.text() }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `heron run args...` to its end with `input` on stdin.
pub fn run(dirs: &Dirs, args: &[&str], input: &str) -> Finished {
    Run::start(dirs, args, input).finish()
}

/// Runs the fake agent on `plan` with the prompt "go".
pub fn run_fake(dirs: &Dirs, plan: &Value, input: &str) -> Finished {
    let agent = dirs.fake_agent(plan);
    run(dirs, &["--agent", &agent, "go"], input)
}

/// Whether process `pid` is gone: no entry in /proc, or only a zombie left for its parent.
pub fn gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (generously) for `pid` to be gone; whether it is.
pub fn becomes_gone(pid: u64) -> bool {
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(10) {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

/// The error object of a reply, or `Null`.
pub fn error_of(reply: &Value) -> &Value {
    &reply["error"]
}
