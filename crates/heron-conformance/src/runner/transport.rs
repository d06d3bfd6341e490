//! How a replay talks to the agent under test: lines in, lines out, over the agent's own
//! stdin and stdout, its stderr kept (the tail only) for failure reports.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
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
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap_or_else(PoisonError::into_inner);
                log.push_str(&line);
                log.push('\n');
                // Keep the tail only: a chatty agent must not grow the report without bound.
                if log.len() > 64 * 1024 {
                    let cut = log.len() - 32 * 1024;
                    let cut = (cut..log.len()).find(|i| log.is_char_boundary(*i)).unwrap_or(0);
                    log.drain(..cut);
                }
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
