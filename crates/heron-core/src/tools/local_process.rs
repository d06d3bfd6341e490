//! Running a shell command on this machine for `run_command`, in its own process group and
//! the session's sandbox, under a keeper (`sandbox::confine_kept`). Invariant: when the run ends (exit,
//! timeout, cancel, or the future being dropped) the whole group is killed, and the keeper
//! then kills whatever left the group (`setsid`), so nothing the command started outlives
//! the call. The keeper itself is never killed from here: it ends once it has swept.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use super::Progress;
use super::streams::{OutputSink, collect_redacted, signal_name};
use crate::sandbox::{self, Policy};
use crate::secret::{Secret, StreamRedactor};
use crate::types::ToolOutput;

/// How long the output of processes that outlive the shell is still collected.
const DRAIN: Duration = Duration::from_secs(2);

/// How long the keeper may take to sweep before it is killed too.
const KEEPER_WAIT: Duration = Duration::from_secs(5);

/// How a local command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// It exited with a code.
    Exited(i32),
    /// A signal ended it (its name, e.g. `SIGKILL`).
    Signalled(String),
    /// It ran out of time and was killed.
    TimedOut,
    /// The call was cancelled and it was killed.
    Cancelled,
}

/// A finished local command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its stdout and stderr, interleaved as they arrived, capped.
    pub output: String,
}

/// Where and how long a local command runs, and what its output may hold.
pub(super) struct Limits<'a> {
    /// Its working directory.
    pub cwd: &'a Path,
    /// How long it may run before it is killed.
    pub timeout: Duration,
    /// The output bytes kept (its head and tail).
    pub cap: usize,
    /// Redacted from the output as it arrives, before anything is clipped, so that a cut
    /// never leaves two halves of a key that redaction of the result could not see.
    pub secrets: &'a [Secret],
    /// Where the output is shown while the command runs, redacted, up to `cap` bytes.
    pub progress: &'a Progress,
}

/// Runs `sh -c command` in a new process group, confined by `sandbox`, collecting its
/// output (redacted, then capped) until it exits, times out or `cancel` fires.
pub(super) async fn run(
    command: &str,
    limits: Limits<'_>,
    cancel: &CancellationToken,
    sandbox: &Arc<Policy>,
) -> Result<Finished, String> {
    let Limits { cwd, timeout, cap, secrets, progress } = limits;
    let mut shell = tokio::process::Command::new("sh");
    shell
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    sandbox::confine_kept(&mut shell, sandbox).await.map_err(|e| format!("the command was not run: {e}"))?;
    let spawned = shell.spawn();
    // The command holds the sandbox's ruleset descriptor: closed here, once the child has it.
    drop(shell);
    let mut child = spawned.map_err(|e| format!("cannot start `sh` in {}: {e}", cwd.display()))?;
    // The shell leads its own group, so its pid is the group id.
    let mut group = ProcessGroup(child.id().and_then(|pid| i32::try_from(pid).ok()));
    let output = Arc::new(Mutex::new(Collected {
        kept: CappedOutput::new(cap),
        live: LiveOutput::new(progress.clone(), cap),
    }));
    let readers: Vec<_> = [
        child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
        child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| tokio::spawn(collect_redacted(stream, StreamRedactor::new(secrets), Arc::clone(&output))))
    .collect();

    let ending = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => exit_ending(status),
            Err(e) => return Err(format!("waiting for the command failed: {e}")),
        },
        () = tokio::time::sleep(timeout) => Ending::TimedOut,
        () = cancel.cancelled() => Ending::Cancelled,
    };
    // Whatever the shell left running (background jobs) goes with it; the keeper then
    // sweeps what left the group and exits. Killing the keeper itself would let that go.
    group.kill();
    if tokio::time::timeout(KEEPER_WAIT, child.wait()).await.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    // Readers end when every holder of the pipes is gone; a process that left the group
    // could hold them forever, so they get a short grace period.
    let deadline = tokio::time::Instant::now() + DRAIN;
    for reader in readers {
        let abort = reader.abort_handle();
        if tokio::time::timeout_at(deadline, reader).await.is_err() {
            abort.abort();
        }
    }
    let output = output.lock().unwrap_or_else(PoisonError::into_inner).kept.render();
    Ok(Finished { ending, output })
}

fn exit_ending(status: std::process::ExitStatus) -> Ending {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exited(code),
        (None, Some(signal)) => Ending::Signalled(signal_name(signal)),
        (None, None) => Ending::Exited(-1),
    }
}

/// A process group killed when dropped (and when asked).
pub(crate) struct ProcessGroup(pub(crate) Option<i32>);

impl ProcessGroup {
    /// Kills the group once; later calls do nothing, so a recycled id is never hit.
    pub(crate) fn kill(&mut self) {
        if let Some(group) = self.0.take().filter(|&g| g > 1) {
            // SAFETY: killpg takes plain integers and touches no memory of ours; a group
            // that is already gone makes it fail with ESRCH, which is fine.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Where a command's redacted output goes: kept for the result, and shown as it arrives.
struct Collected {
    kept: CappedOutput,
    live: LiveOutput,
}

impl OutputSink for Collected {
    fn push(&mut self, bytes: &[u8]) {
        self.kept.push(bytes);
        self.live.push(bytes);
    }
}

/// Output shown while the command runs, in the pieces it arrives in, up to a budget: past
/// it nothing more is shown until the result, which keeps the head and the tail. A
/// character split between two reads waits for its last bytes.
struct LiveOutput {
    progress: Progress,
    room: usize,
    partial: Vec<u8>,
}

impl LiveOutput {
    /// Said once the budget is spent, so the user knows the output goes on.
    const CUT: &'static str = "\n[more output follows; the result shows how it ends]\n";

    fn new(progress: Progress, room: usize) -> Self {
        Self { progress, room, partial: Vec::new() }
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.room == 0 || bytes.is_empty() {
            return;
        }
        let taken = &bytes[..bytes.len().min(self.room)];
        self.room -= taken.len();
        self.partial.extend_from_slice(taken);
        let whole = match std::str::from_utf8(&self.partial) {
            Ok(_) => self.partial.len(),
            // Only an incomplete last character waits; invalid bytes are shown replaced.
            Err(e) if e.error_len().is_none() && self.room > 0 => e.valid_up_to(),
            Err(_) => self.partial.len(),
        };
        let mut text = String::from_utf8_lossy(&self.partial[..whole]).into_owned();
        self.partial.drain(..whole);
        if self.room == 0 {
            text.push_str(Self::CUT);
        }
        if !text.is_empty() {
            self.progress.append(ToolOutput::Text { text });
        }
    }
}

/// Output kept within a cap: the first half and the last half, with the count of bytes
/// dropped between them.
struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    dropped: usize,
}

impl CappedOutput {
    fn new(cap: usize) -> Self {
        let half = cap / 2;
        Self { head: Vec::new(), tail: VecDeque::new(), half, dropped: 0 }
    }
}

impl OutputSink for CappedOutput {
    fn push(&mut self, mut bytes: &[u8]) {
        let room = self.half.saturating_sub(self.head.len());
        let (front, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(front);
        bytes = rest;
        self.tail.extend(bytes);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }
}

impl CappedOutput {
    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!("\n[truncated: {} bytes of output omitted here]\n", self.dropped));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a call's progress was given to append, as text.
    #[derive(Default)]
    struct Appended(Mutex<Vec<String>>);

    impl crate::tools::ProgressSink for Appended {
        fn show(&self, _: Vec<ToolOutput>) {}
        fn append(&self, output: ToolOutput) {
            if let ToolOutput::Text { text } = output {
                self.0.lock().expect("not poisoned").push(text);
            }
        }
    }

    #[test]
    fn live_output_waits_for_a_split_character_and_stops_at_its_budget() {
        let seen = Arc::new(Appended::default());
        let mut live = LiveOutput::new(Progress::to(seen.clone()), 8);
        live.push(b"a\xc3");
        live.push(b"\xa9bc");
        live.push(b"defgh");
        live.push(b"more");
        let shown = seen.0.lock().expect("not poisoned").clone();
        let cut = format!("def{}", LiveOutput::CUT);
        assert_eq!(shown, ["a", "\u{e9}bc", cut.as_str()]);
    }

    #[test]
    fn capped_output_keeps_head_and_tail() {
        let mut out = CappedOutput::new(8);
        out.push(b"abcdefghijkl");
        assert_eq!(out.render(), "abcd\n[truncated: 4 bytes of output omitted here]\nijkl");
    }
}
