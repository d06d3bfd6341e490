//! The agent's `terminal/*`: commands run in a process group of their own, inside the
//! session's cwd and in the same OS sandbox as Heron's own commands (Heron's home hidden,
//! writes only in the cwd, the temp folder and the configured caches, keys withheld), their
//! output redacted and kept within `outputByteLimit`. Invariants: no terminal outlives its
//! release or `heron run` (its group is killed on `terminal/kill`, on release, when the
//! command's leader exits, and at shutdown, and its keeper then ends what left the group:
//! `heron_core::sandbox::confine_kept`); memory is bounded by the number of terminals
//! times their output cap; an unknown terminal id is -32002.

use std::collections::{HashMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;
use tokio::io::AsyncRead;
use tokio::sync::watch;

use heron_core::local::{OutputSink, collect_redacted, signal_name};
use heron_core::sandbox::{self, Policy};
use heron_core::secret::{Secret, StreamRedactor};
use heron_protocol::error::RESOURCE_NOT_FOUND;
use heron_protocol::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalResponse, ReleaseTerminalResponse, RpcError,
    TerminalExitStatus, TerminalId, TerminalOutputResponse, WaitForTerminalExitResponse,
};

use super::files::Workspace;
use super::group::Group;

/// Output kept when the agent names no limit, and the most it may ask for.
const DEFAULT_OUTPUT_BYTES: u64 = 1024 * 1024;
const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
/// Terminals open at once; the agent releases one to start more. As many released ones
/// keep the end of their output for showing.
const MAX_TERMINALS: usize = 16;
const TAIL_LINES: usize = 12;
const TAIL_BYTES: usize = 4096;

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exit {
    code: Option<u32>,
    signal: Option<String>,
}

impl Exit {
    fn status(&self) -> TerminalExitStatus {
        TerminalExitStatus { exit_code: self.code, meta: None, signal: self.signal.clone() }
    }
}

/// Output within a byte limit: the front is dropped as the end comes in.
#[derive(Debug)]
struct Captured {
    bytes: VecDeque<u8>,
    limit: usize,
    truncated: bool,
}

impl Captured {
    fn new(limit: usize) -> Self {
        Self { bytes: VecDeque::new(), limit, truncated: false }
    }
}

impl OutputSink for Captured {
    fn push(&mut self, piece: &[u8]) {
        self.bytes.extend(piece);
        if self.bytes.len() > self.limit {
            let excess = self.bytes.len() - self.limit;
            self.bytes.drain(..excess);
            self.truncated = true;
        }
    }
}

impl Captured {
    /// The output as text of at most `limit` bytes, cut at a character boundary.
    fn text(&mut self) -> (String, bool) {
        let bytes = self.bytes.make_contiguous();
        // A cut front may start inside a character: its continuation bytes go too.
        let start =
            if self.truncated { bytes.iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count() } else { 0 };
        let text = String::from_utf8_lossy(&bytes[start..]);
        // Replacement characters may make the text longer than the bytes were.
        let mut cut = text.len().saturating_sub(self.limit);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        (text[cut..].to_owned(), self.truncated || start > 0 || cut > 0)
    }
}

/// One running (or finished) command.
struct Running {
    group: Option<Arc<Group>>,
    output: Arc<Mutex<Captured>>,
    exit: watch::Receiver<Option<Exit>>,
    /// The output readers and the waiter, aborted with the entry.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// The last lines of the output, for people.
    fn tail(&self) -> String {
        let (output, _) = self.output.lock().unwrap_or_else(PoisonError::into_inner).text();
        let all: Vec<&str> = output.lines().collect();
        let tail = all[all.len().saturating_sub(TAIL_LINES)..].join("\n");
        let mut cut = tail.len().saturating_sub(TAIL_BYTES);
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail[cut..].to_owned()
    }

    fn kill(&self) {
        if let Some(group) = &self.group {
            group.signal(libc::SIGKILL);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The terminals of the session.
pub struct Terminals {
    ws: Workspace,
    sandbox: Arc<Policy>,
    secrets: Arc<Vec<Secret>>,
    open: Mutex<HashMap<String, Arc<Running>>>,
    /// The end of the output of terminals released lately, by id.
    released: Mutex<VecDeque<(String, String)>>,
    next: AtomicU64,
}

fn unknown(id: &TerminalId) -> RpcError {
    RpcError::new(RESOURCE_NOT_FOUND, "Resource not found").with_data(json!({ "terminalId": id.0 }))
}

fn no_nul(field: &str, value: &str) -> Result<(), RpcError> {
    if value.contains('\0') {
        return Err(RpcError::invalid_params(field, "holds a NUL byte"));
    }
    Ok(())
}

impl Terminals {
    /// Terminals confined to `ws`, sandboxed by `sandbox`, with `secrets` redacted.
    pub fn new(ws: Workspace, sandbox: Arc<Policy>, secrets: Arc<Vec<Secret>>) -> Self {
        Self {
            ws,
            sandbox,
            secrets,
            open: Mutex::default(),
            released: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    fn get(&self, id: &TerminalId) -> Result<Arc<Running>, RpcError> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&id.0).cloned().ok_or_else(|| unknown(id))
    }

    /// `terminal/create`: starts the command and returns its terminal's id.
    pub async fn create(&self, request: CreateTerminalRequest) -> Result<CreateTerminalResponse, RpcError> {
        let cwd = match &request.cwd {
            Some(dir) => self.ws.inside("cwd", dir)?,
            None => self.ws.cwd().to_path_buf(),
        };
        if !cwd.is_dir() {
            return Err(RpcError::invalid_params("cwd", format!("{} is not a directory", cwd.display())));
        }
        if request.command.is_empty() {
            return Err(RpcError::invalid_params("command", "the command is empty"));
        }
        no_nul("command", &request.command)?;
        for (i, arg) in request.args.iter().enumerate() {
            no_nul(&format!("args[{i}]"), arg)?;
        }
        for (i, var) in request.env.iter().enumerate() {
            if var.name.is_empty() || var.name.contains('=') {
                return Err(RpcError::invalid_params(format!("env[{i}].name"), "not a variable name"));
            }
            no_nul(&format!("env[{i}].name"), &var.name)?;
            no_nul(&format!("env[{i}].value"), &var.value)?;
        }
        let limit = request.output_byte_limit.unwrap_or(DEFAULT_OUTPUT_BYTES).min(MAX_OUTPUT_BYTES);
        if self.open.lock().unwrap_or_else(PoisonError::into_inner).len() >= MAX_TERMINALS {
            return Err(RpcError::invalid_params(
                "command",
                format!("{MAX_TERMINALS} terminals are open; release one before creating another"),
            ));
        }

        let mut command = tokio::process::Command::new(&request.command);
        command
            .args(&request.args)
            .envs(request.env.iter().map(|v| (&v.name, &v.value)))
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // What leaves the group (`setsid`) is ended by the command's keeper, which only the
        // group's end reaches: so the child itself is never killed from here.
        sandbox::confine_kept(&mut command, &self.sandbox).await.map_err(|e| RpcError::internal(&e))?;
        let spawned = command.spawn();
        // The command holds the sandbox's ruleset descriptor: closed here, once the child has it.
        drop(command);
        let mut child = spawned.map_err(|e| {
            RpcError::invalid_params("command", format!("cannot start `{}`: {e}", request.command))
        })?;

        let output = Arc::new(Mutex::new(Captured::new(usize::try_from(limit).unwrap_or(usize::MAX))));
        let mut tasks: Vec<_> = [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        .map(|stream| {
            tokio::spawn(collect_redacted(
                stream,
                StreamRedactor::new(self.secrets.iter()),
                Arc::clone(&output),
            ))
        })
        .collect();
        let (exited, exit) = watch::channel(None);
        let group = Group::led_by(child.id()).map(Arc::new);
        tasks.push(tokio::spawn(wait(child, group.clone(), exited)));
        let running = Arc::new(Running { group, output, exit, tasks });
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed));
        self.open.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), running);
        Ok(CreateTerminalResponse { meta: None, terminal_id: TerminalId(id) })
    }

    /// `terminal/output`: what the command printed so far, and how it ended if it did.
    pub fn output(&self, id: &TerminalId) -> Result<TerminalOutputResponse, RpcError> {
        let running = self.get(id)?;
        let (output, truncated) = running.output.lock().unwrap_or_else(PoisonError::into_inner).text();
        let exit_status = running.exit.borrow().as_ref().map(Exit::status);
        Ok(TerminalOutputResponse { exit_status, meta: None, output, truncated })
    }

    /// The end of what a terminal printed, for showing when its tool call ends (agents
    /// release the terminal first, and ACP asks clients to keep showing its output);
    /// `None` for a terminal that is not ours.
    pub fn tail(&self, id: &str) -> Option<String> {
        if let Ok(running) = self.get(&TerminalId(id.to_owned())) {
            return Some(running.tail());
        }
        let released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        released.iter().find(|(released, _)| released == id).map(|(_, tail)| tail.clone())
    }

    /// `terminal/wait_for_exit`: resolves when the command has exited.
    pub async fn wait_for_exit(&self, id: &TerminalId) -> Result<WaitForTerminalExitResponse, RpcError> {
        let mut exit = self.get(id)?.exit.clone();
        let ended = exit.wait_for(Option::is_some).await.map_err(|_| unknown(id))?.clone();
        let ended = ended.unwrap_or(Exit { code: None, signal: None });
        Ok(WaitForTerminalExitResponse { exit_code: ended.code, meta: None, signal: ended.signal })
    }

    /// `terminal/kill`: ends the command; its output and exit stay readable until release.
    pub fn kill(&self, id: &TerminalId) -> Result<KillTerminalResponse, RpcError> {
        self.get(id)?.kill();
        Ok(KillTerminalResponse { meta: None })
    }

    /// `terminal/release`: ends the command if it still runs and forgets the terminal.
    pub fn release(&self, id: &TerminalId) -> Result<ReleaseTerminalResponse, RpcError> {
        let removed = self.open.lock().unwrap_or_else(PoisonError::into_inner).remove(&id.0);
        let running = removed.ok_or_else(|| unknown(id))?;
        running.kill();
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        if released.len() >= MAX_TERMINALS {
            released.pop_front();
        }
        released.push_back((id.0.clone(), running.tail()));
        Ok(ReleaseTerminalResponse { meta: None })
    }

    /// Ends every command (at shutdown).
    pub fn kill_all(&self) {
        let all: Vec<_> = self.open.lock().unwrap_or_else(PoisonError::into_inner).drain().collect();
        for (_, running) in all {
            running.kill();
        }
    }
}

/// Waits for the leader to exit, kills what it left in its group, reaps it, records how it
/// ended.
async fn wait(
    mut child: tokio::process::Child,
    group: Option<Arc<Group>>,
    exited: watch::Sender<Option<Exit>>,
) {
    if let Some(group) = &group {
        group.exited().await;
        // Background jobs go with the command, before the leader is reaped.
        group.sweep();
    }
    let exit = match child.wait().await {
        Ok(status) => Exit {
            code: status.code().and_then(|c| u32::try_from(c).ok()),
            signal: status.signal().map(signal_name),
        },
        Err(_) => Exit { code: None, signal: None },
    };
    let _ = exited.send(Some(exit));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_keeps_the_end_within_the_limit_at_a_char_boundary() {
        let mut captured = Captured::new(5);
        captured.push("ab".as_bytes());
        assert_eq!(captured.text(), ("ab".to_owned(), false));
        captured.push("cdé€".as_bytes()); // 2 + 2 + 3 bytes: the front is cut inside `é`
        let (text, truncated) = captured.text();
        assert!(truncated);
        assert!(text.len() <= 5, "{text:?}");
        assert!(text.ends_with('€'), "{text:?}");
    }
}
