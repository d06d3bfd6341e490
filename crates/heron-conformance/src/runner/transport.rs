//! How a replay talks to the agent under test: lines in, lines out, over the agent's own
//! stdin and stdout, its stderr kept (the tail only) for failure reports.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What the agent side of a replay said next.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    /// One line of its output.
    Line(String),
    /// Nothing within the wait.
    Timeout,
    /// Its output ended.
    Closed,
}

/// A connection to the agent under test: lines in, lines out.
pub trait Transport {
    /// Writes one line (the newline is added).
    fn send(&mut self, line: &str) -> Result<(), String>;
    /// The next line of the agent's output, waiting at most `wait`.
    fn recv(&mut self, wait: Duration) -> Received;
    /// Ends the agent's input (stdin EOF).
    fn close_input(&mut self);
    /// The end of the agent's log output, for failure reports.
    fn stderr_tail(&self) -> String {
        String::new()
    }
}

/// The longest line of the agent's output taken, in bytes: the size of line Heron itself
/// reads by default. A longer one is dropped as it arrives, never held.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Lines of the agent's output read ahead of the replay.
const QUEUED_LINES: usize = 1024;

/// The most of the agent's stderr held for failure reports, in bytes; past it the text is cut
/// to its last [`STDERR_CUT_TO`] bytes, so a chatty agent, or one endless line, cannot grow
/// the report without bound.
const STDERR_KEPT: usize = 64 * 1024;
/// What is left of the stderr held once it passes [`STDERR_KEPT`].
const STDERR_CUT_TO: usize = 32 * 1024;
/// How much of the agent's stderr is read at a time.
const STDERR_PIECE: usize = 8 * 1024;

/// Appends `piece` of the agent's stderr to `log`, keeping the tail only (see
/// [`STDERR_KEPT`]); the cut falls on a character boundary.
fn keep_tail(log: &mut String, piece: &[u8]) {
    log.push_str(&String::from_utf8_lossy(piece));
    if log.len() > STDERR_KEPT {
        let cut = log.len() - STDERR_CUT_TO;
        let cut = (cut..log.len()).find(|i| log.is_char_boundary(*i)).unwrap_or(0);
        log.drain(..cut);
    }
}

/// Calls `each` with every line of `reader` (without its newline), or with how many bytes a
/// line past `cap` had when it ended (its bytes dropped as they came); stops when `each`
/// says so or the input ends. Bytes that are not UTF-8 are replaced.
pub fn each_line(mut reader: impl BufRead, cap: usize, mut each: impl FnMut(Result<String, usize>) -> bool) {
    let (mut line, mut length) = (Vec::new(), 0usize);
    loop {
        let Ok(buffer) = reader.fill_buf() else { return };
        if buffer.is_empty() {
            if length > 0 {
                let last =
                    if length > cap { Err(length) } else { Ok(String::from_utf8_lossy(&line).into_owned()) };
                each(last);
            }
            return;
        }
        let (body, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        if length + body.len() <= cap {
            line.extend_from_slice(body);
        } else {
            line = Vec::new();
        }
        length += body.len();
        let used = body.len() + usize::from(ended);
        reader.consume(used);
        if ended {
            let done =
                if length > cap { Err(length) } else { Ok(String::from_utf8_lossy(&line).into_owned()) };
            (line, length) = (Vec::new(), 0);
            if !each(done) {
                return;
            }
        }
    }
}

/// An agent running as a child process, spoken to over its stdin and stdout.
pub struct ProcessTransport {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// The thread reading stderr; done once every writer of it is gone.
    stderr_reader: std::thread::JoinHandle<()>,
}

impl ProcessTransport {
    /// Starts `command` (program, arguments, directory and environment already set) with
    /// its stdio piped to the replay.
    pub fn spawn(mut command: Command) -> std::io::Result<ProcessTransport> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            return Err(std::io::Error::other("the agent's stdio is not piped"));
        };
        // Bounded both ways: a line past the cap is replaced by a note the replay reports as
        // not JSON, and an agent that writes faster than the replay reads waits on the pipe.
        let (sender, lines) = sync_channel(QUEUED_LINES);
        std::thread::spawn(move || {
            each_line(BufReader::new(stdout), MAX_LINE_BYTES, |line| {
                let line = line.unwrap_or_else(|dropped| {
                    format!("<a line of more than {MAX_LINE_BYTES} bytes ({dropped} read), dropped>")
                });
                sender.send(line).is_ok()
            });
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut stderr = stderr;
            let mut piece = [0u8; STDERR_PIECE];
            while let Ok(read) = stderr.read(&mut piece) {
                if read == 0 {
                    break;
                }
                let mut log = sink.lock().unwrap_or_else(PoisonError::into_inner);
                keep_tail(&mut log, &piece[..read]);
            }
        });
        Ok(ProcessTransport { child, stdin, lines, stderr: log, stderr_reader })
    }
}

impl Transport for ProcessTransport {
    fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the agent's input is closed")?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot write to the agent: {e}"))
    }

    fn recv(&mut self, wait: Duration) -> Received {
        match self.lines.recv_timeout(wait) {
            Ok(line) => Received::Line(line),
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
            Err(RecvTimeoutError::Disconnected) => Received::Closed,
        }
    }

    fn close_input(&mut self) {
        self.stdin = None;
    }

    fn stderr_tail(&self) -> String {
        // An agent that exits closes stdout a moment before its last stderr lines are read:
        // give the reader a moment to drain (bounded: a grandchild may hold stderr open).
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while !self.stderr_reader.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let log = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for ProcessTransport {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(input: &[u8], cap: usize) -> Vec<Result<String, usize>> {
        let mut lines = Vec::new();
        // A small buffer, so lines arrive in many pieces.
        each_line(BufReader::with_capacity(3, input), cap, |line| {
            lines.push(line);
            true
        });
        lines
    }

    #[test]
    fn lines_past_the_cap_are_reported_by_length_and_never_held() {
        let lines = split(b"abc\nabcdefgh\n\nxyz", 4);
        assert_eq!(lines, [Ok("abc".into()), Err(8), Ok(String::new()), Ok("xyz".into())]);
        assert_eq!(split(b"abcd\nabcde", 4), [Ok("abcd".into()), Err(5)]);
    }

    #[test]
    fn an_agents_endless_stderr_is_held_to_its_tail() {
        // One line of about 200 KiB, three times what is held, then a last line.
        let script = r#"printf 'the first words' >&2
            i=0; while [ $i -lt 3000 ]; do printf 'é%063d' $i >&2; i=$((i+1)); done
            printf '\nthe last line\n' >&2"#;
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        let mut transport = ProcessTransport::spawn(command).expect("sh starts");
        // Its stdout closes when it exits; the wait is a bound, not a pause.
        assert_eq!(transport.recv(Duration::from_secs(10)), Received::Closed);
        let tail = transport.stderr_tail();
        assert!(transport.stderr_reader.is_finished(), "the agent's stderr was read to its end");
        let held = transport.stderr.lock().unwrap_or_else(PoisonError::into_inner).len();
        assert!(held <= STDERR_KEPT, "{held} bytes held");
        assert!(tail.ends_with("the last line"), "{}", &tail[tail.len().saturating_sub(80)..]);
        assert!(!tail.contains("the first words"), "the oldest text is dropped");
    }

    #[test]
    fn the_stderr_tail_is_cut_at_a_character_boundary() {
        let mut log = String::new();
        // Two-byte characters, so the cut point often falls inside one.
        let piece = "é".repeat(STDERR_PIECE / 2 + 1);
        for _ in 0..2 * STDERR_KEPT / piece.len() + 1 {
            keep_tail(&mut log, piece.as_bytes());
            assert!(log.len() <= STDERR_KEPT, "{} bytes held", log.len());
        }
        assert!(log.len() >= STDERR_CUT_TO, "the tail is kept, {} bytes", log.len());
        assert!(log.chars().all(|c| c == 'é'), "no character is split");
    }
}
