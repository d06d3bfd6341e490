//! Replays a transcript against an agent: sends the client's lines in order, matches every
//! message the agent sends against the next expectation, and fails on anything unexpected,
//! including what arrives after the last expectation. In refresh mode it rewrites the
//! expectations from what the agent actually sent instead of failing.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::format::{Expectation, FormatError, Item, Scenario, expect_line};
use super::matcher::{self, Bindings, Paths, fill, generalize, matches, merge, side_by_side, signature};

/// How long to wait for each expected message unless the header says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a run of repeated messages may pause before it counts as finished, when no
/// expectation follows it.
const GRACE: Duration = Duration::from_millis(300);
/// How long the agent may take to end its output once its input is closed.
const EOF_WAIT: Duration = Duration::from_secs(3);

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
}

impl ProcessTransport {
    /// Starts `program args...` in `cwd` with `env` added to the environment.
    pub fn spawn(
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &[(&str, &str)],
    ) -> std::io::Result<ProcessTransport> {
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // The scenario decides validation and the model, not the caller's environment.
        command.env_remove("HERON_VALIDATE");
        for (key, value) in env {
            command.env(key, value);
        }
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
        std::thread::spawn(move || {
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
        Ok(ProcessTransport { child, stdin, lines, stderr: log })
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

/// A scenario's private HERON_HOME and workspace under the system temp directory, removed
/// when dropped.
#[derive(Debug)]
pub struct Sandbox {
    root: PathBuf,
    /// The workspace and home paths, as the matcher sees them.
    pub paths: Paths,
}

impl Sandbox {
    /// Creates the directories and writes the header's script, config and workspace files.
    pub fn create(header: &super::format::Header) -> std::io::Result<Sandbox> {
        let root = std::env::temp_dir().join(format!("heron-conformance-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("home"))?;
        std::fs::create_dir_all(root.join("ws"))?;
        // Canonical, so the paths the agent reports (after resolving symlinks) are `$WS`.
        let root = std::fs::canonicalize(&root)?;
        let sandbox = Sandbox {
            paths: Paths {
                ws: root.join("ws").display().to_string(),
                home: root.join("home").display().to_string(),
            },
            root,
        };
        let mut config = String::new();
        // Top-level keys go before the first table, or TOML reads them into that table.
        if let Some(extra) = &header.config {
            config.push_str(extra);
            config.push('\n');
        }
        if !header.script.is_empty() || !header.providers.is_empty() {
            let mut script = String::new();
            for turn in &header.script {
                script.push_str(&turn.to_string());
                script.push('\n');
            }
            std::fs::write(sandbox.home().join("script.jsonl"), script)?;
        }
        if header.providers.is_empty() && !header.script.is_empty() {
            config.push_str(
                "[providers.script]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"script.jsonl\"\n",
            );
        }
        for (name, provider) in &header.providers {
            config.push_str(&provider.toml(name));
        }
        if !config.is_empty() {
            std::fs::write(sandbox.home().join("config.toml"), config)?;
        }
        for (name, text) in &header.files {
            let relative = Path::new(name);
            if relative.is_absolute() || relative.components().any(|c| c == std::path::Component::ParentDir) {
                return Err(std::io::Error::other(format!(
                    "workspace file `{name}` is outside the workspace"
                )));
            }
            let path = sandbox.ws().join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        Ok(sandbox)
    }

    /// HERON_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The workspace, the agent's working directory.
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Why a replay failed: the transcript line, a one-line summary and the details.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The 1-based transcript line (0 when it is not about one line).
    pub line: usize,
    /// What went wrong, in a sentence.
    pub summary: String,
    /// Expected and actual side by side, or other context.
    pub detail: String,
    /// The end of the agent's stderr.
    pub stderr: String,
}

impl Failure {
    fn new(line: usize, summary: impl Into<String>, detail: impl Into<String>) -> Failure {
        Failure { line, summary: summary.into(), detail: detail.into(), stderr: String::new() }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "line {}: {}", self.line, self.summary)?;
        if !self.detail.is_empty() {
            writeln!(f, "{}", self.detail.trim_end())?;
        }
        if !self.stderr.is_empty() {
            writeln!(f, "--- the agent's stderr (last lines) ---\n{}", self.stderr.trim_end())?;
        }
        Ok(())
    }
}

impl From<FormatError> for Failure {
    fn from(err: FormatError) -> Failure {
        Failure::new(err.line, format!("the transcript does not parse: {}", err.reason), "")
    }
}

/// One replay in progress: the bindings so far and the messages read.
struct Replay<'a> {
    transport: &'a mut dyn Transport,
    paths: &'a Paths,
    bindings: Bindings,
    timeout: Duration,
    /// A message read ahead (after a repeated run) and not yet matched.
    pushed: Option<Value>,
    /// Every message read in the current segment, in order (for refresh).
    seen: Vec<Value>,
}

impl Replay<'_> {
    /// The next message, or `None` when nothing came within `wait`.
    fn next(&mut self, wait: Duration, line: usize) -> Result<Option<Value>, Failure> {
        if let Some(message) = self.pushed.take() {
            self.seen.push(message.clone());
            return Ok(Some(message));
        }
        match self.transport.recv(wait) {
            Received::Line(text) => match serde_json::from_str::<Value>(&text) {
                Ok(message) => {
                    self.seen.push(message.clone());
                    Ok(Some(message))
                }
                Err(err) => Err(Failure::new(
                    line,
                    "the agent wrote a line that is not JSON",
                    format!("{err}: {}", text.chars().take(200).collect::<String>()),
                )),
            },
            Received::Timeout => Ok(None),
            Received::Closed => Err(Failure::new(line, "the agent closed its output", "")),
        }
    }

    /// Expected beside actual, the actual shown through the pattern where it matches, so
    /// only real differences are marked.
    fn compare(&self, pattern: &Value, message: &Value) -> String {
        let shown = merge(pattern, message, self.paths, &mut self.bindings.clone());
        side_by_side(pattern, &shown)
    }

    fn push_back(&mut self, message: Value) {
        self.seen.pop();
        self.pushed = Some(message);
    }

    fn required(&mut self, pattern: &Value, line: usize) -> Result<Value, Failure> {
        match self.next(self.timeout, line)? {
            Some(message) => Ok(message),
            None => Err(Failure::new(
                line,
                format!("nothing arrived within {:?}; expected:", self.timeout),
                serde_json::to_string_pretty(pattern).unwrap_or_default(),
            )),
        }
    }

    /// After a repeated run: consumes further messages matching `patterns`.
    fn absorb(&mut self, patterns: &[&Value], followed: bool, line: usize) -> Result<(), Failure> {
        let wait = if followed { self.timeout } else { GRACE };
        while let Some(message) = self.next(wait, line)? {
            if !patterns.iter().any(|p| matches(p, &message, self.paths, &mut self.bindings).is_ok()) {
                self.push_back(message);
                break;
            }
        }
        Ok(())
    }

    fn expect(&mut self, e: &Expectation, followed: bool) -> Result<(), Failure> {
        let message = self.required(&e.pattern, e.line)?;
        if let Err(mismatch) = matches(&e.pattern, &message, self.paths, &mut self.bindings) {
            return Err(Failure::new(
                e.line,
                format!("the agent's message does not match ({mismatch})"),
                self.compare(&e.pattern, &message),
            ));
        }
        if e.repeat { self.absorb(&[&e.pattern], followed, e.line) } else { Ok(()) }
    }

    fn unordered(&mut self, entries: &[Expectation], begin: usize, followed: bool) -> Result<(), Failure> {
        let mut used = vec![0usize; entries.len()];
        let done =
            |used: &[usize]| used.iter().zip(entries).all(|(n, e)| if e.repeat { *n >= 1 } else { *n == 1 });
        while !done(&used) {
            let open = entries.iter().zip(&used).find(|(e, n)| **n == 0 || e.repeat).map(|(e, _)| e);
            let pattern = open.map(|e| e.pattern.clone()).unwrap_or(Value::Null);
            let message = self.required(&pattern, begin)?;
            // A message goes to the first open entry it matches; specific entries before runs.
            let fits = |index: &usize| {
                matches(&entries[*index].pattern, &message, self.paths, &mut self.bindings.clone()).is_ok()
            };
            let single = (0..entries.len()).filter(|i| !entries[*i].repeat && used[*i] == 0).find(fits);
            let run = (0..entries.len()).filter(|i| entries[*i].repeat).find(fits);
            match single.or(run) {
                Some(index) => {
                    let _ = matches(&entries[index].pattern, &message, self.paths, &mut self.bindings);
                    used[index] += 1;
                }
                None => {
                    let unmatched: Vec<&Expectation> = entries
                        .iter()
                        .zip(&used)
                        .filter(|(e, n)| **n == 0 || e.repeat)
                        .map(|(e, _)| e)
                        .collect();
                    let closest = unmatched
                        .iter()
                        .find(|e| signature(&e.pattern) == signature(&message))
                        .or(unmatched.first())
                        .copied();
                    let (line, detail) = match closest {
                        Some(e) => (e.line, self.compare(&e.pattern, &message)),
                        None => (begin, serde_json::to_string_pretty(&message).unwrap_or_default()),
                    };
                    return Err(Failure::new(
                        line,
                        format!(
                            "the agent's message matches none of the {} open entries of the unordered block at line {begin}; the closest:",
                            unmatched.len()
                        ),
                        detail,
                    ));
                }
            }
        }
        let runs: Vec<&Value> = entries.iter().filter(|e| e.repeat).map(|e| &e.pattern).collect();
        if runs.is_empty() { Ok(()) } else { self.absorb(&runs, followed, begin) }
    }

    fn send(&mut self, item: &Item) -> Result<(), Failure> {
        let (text, line) = match item {
            Item::Send { message, line } => {
                let filled = fill(message, self.paths, &self.bindings)
                    .map_err(|e| Failure::new(*line, e.to_string(), ""))?;
                (filled.to_string(), *line)
            }
            Item::SendRaw { text, line } => (matcher::expand_paths(text, self.paths), *line),
            Item::CloseInput { .. } => {
                self.transport.close_input();
                return Ok(());
            }
            _ => return Ok(()),
        };
        self.transport.send(&text).map_err(|e| Failure::new(line, e, ""))
    }

    /// Matches one segment (the expectations between two sends).
    fn segment(&mut self, items: &[&Item], followed_by_expectation_at_end: bool) -> Result<(), Failure> {
        for (index, item) in items.iter().enumerate() {
            let followed = index + 1 < items.len() || followed_by_expectation_at_end;
            match item {
                Item::Expect(e) => self.expect(e, followed)?,
                Item::Unordered { entries, begin, .. } => self.unordered(entries, *begin, followed)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads whatever else arrives until the agent is quiet for `quiet`.
    fn drain(&mut self, quiet: Duration, line: usize) -> Result<(), Failure> {
        while self.next(quiet, line)?.is_some() {}
        Ok(())
    }
}

/// The lines that replace a segment whose messages changed.
fn rewrite_segment(items: &[&Item], seen: &[Value], paths: &Paths, bindings: &mut Bindings) -> Vec<String> {
    let olds: Vec<&Expectation> = items
        .iter()
        .flat_map(|item| match item {
            Item::Expect(e) => vec![e],
            Item::Unordered { entries, .. } => entries.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut taken = vec![false; olds.len()];
    let mut out: Vec<(Value, bool)> = Vec::new();
    for message in seen {
        if let Some((pattern, true)) = out.last()
            && matches(pattern, message, paths, bindings).is_ok()
        {
            continue;
        }
        let old = (0..olds.len()).find(|i| !taken[*i] && signature(&olds[*i].pattern) == signature(message));
        let (pattern, repeat) = match old {
            Some(index) => {
                taken[index] = true;
                let old = olds[index];
                let still = matches(&old.pattern, message, paths, &mut bindings.clone()).is_ok();
                (merge(&old.pattern, message, paths, bindings), old.repeat && still)
            }
            None => (generalize(message, paths, bindings), false),
        };
        let _ = matches(&pattern, message, paths, bindings);
        out.push((pattern, repeat));
    }
    let unordered = items.iter().any(|i| matches!(i, Item::Unordered { .. })) && out.len() > 1;
    let mut lines = Vec::new();
    if unordered {
        lines.push(r#"{"unordered": "begin"}"#.to_owned());
    }
    lines.extend(out.iter().map(|(p, r)| expect_line(p, *r)));
    if unordered {
        lines.push(r#"{"unordered": "end"}"#.to_owned());
    }
    lines
}

fn item_lines(item: &Item) -> (usize, usize) {
    match item {
        Item::Send { line, .. } | Item::SendRaw { line, .. } | Item::CloseInput { line } => (*line, *line),
        Item::Expect(e) => (e.line, e.line),
        Item::Unordered { begin, end, .. } => (*begin, *end),
    }
}

/// Replays `scenario` over `transport`. Without `refresh`, any difference is a failure.
/// With it, differing segments are rewritten and the new file text is returned (`None`
/// when nothing changed).
pub fn replay(
    scenario: &Scenario,
    transport: &mut dyn Transport,
    paths: &Paths,
    refresh: bool,
) -> Result<Option<String>, Failure> {
    let timeout = scenario.header.timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_TIMEOUT);
    let mut replay =
        Replay { transport, paths, bindings: Bindings::default(), timeout, pushed: None, seen: Vec::new() };
    let outcome = replay_items(scenario, &mut replay, refresh);
    outcome.map_err(|mut failure| {
        failure.stderr = replay.transport.stderr_tail();
        failure
    })
}

fn replay_items(
    scenario: &Scenario,
    replay: &mut Replay<'_>,
    refresh: bool,
) -> Result<Option<String>, Failure> {
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let items = &scenario.items;
    let mut index = 0;
    let last_line = scenario.lines.len();
    while index < items.len() {
        if !items[index].is_expectation() {
            replay.send(&items[index])?;
            index += 1;
            continue;
        }
        let start = index;
        while index < items.len() && items[index].is_expectation() {
            index += 1;
        }
        let segment: Vec<&Item> = items[start..index].iter().collect();
        let first_line = item_lines(segment[0]).0;
        let end_line = segment.last().map(|i| item_lines(i).1).unwrap_or(first_line);
        replay.seen.clear();
        if !refresh {
            replay.segment(&segment, false)?;
            continue;
        }
        let changed = match replay.segment(&segment, false) {
            Ok(()) => {
                let before = replay.seen.len();
                replay.drain(GRACE, end_line)?;
                replay.seen.len() > before
            }
            Err(_) => {
                replay.drain(Duration::from_millis(700), end_line)?;
                true
            }
        };
        if changed {
            let lines = rewrite_segment(&segment, &replay.seen, replay.paths, &mut replay.bindings);
            replacements.push((first_line, end_line, lines));
        }
    }
    // Nothing may follow the last expectation: end the input and read to the end.
    if let Some(message) = replay.pushed.take() {
        if !refresh {
            return Err(unexpected(last_line, &message));
        }
        replay.seen = vec![message];
    } else {
        replay.seen.clear();
    }
    replay.transport.close_input();
    let deadline = Instant::now() + EOF_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match replay.transport.recv(left) {
            Received::Line(text) => {
                let message = serde_json::from_str(&text).unwrap_or(Value::String(text));
                if !refresh {
                    return Err(unexpected(last_line, &message));
                }
                replay.seen.push(message);
            }
            Received::Timeout | Received::Closed => break,
        }
    }
    if refresh && !replay.seen.is_empty() {
        let lines = rewrite_segment(&[], &replay.seen, replay.paths, &mut replay.bindings);
        replacements.push((last_line + 1, last_line, lines));
    }
    if replacements.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<String> = Vec::new();
    let mut next = 1;
    for (first, last, lines) in replacements {
        out.extend((next..first).filter_map(|line| scenario.lines.get(line - 1).cloned()));
        out.extend(lines);
        next = last + 1;
    }
    out.extend(scenario.lines.iter().skip(next - 1).cloned());
    let mut text = out.join("\n");
    text.push('\n');
    Ok(Some(text))
}

fn unexpected(line: usize, message: &Value) -> Failure {
    Failure::new(
        line,
        "the agent sent a message the transcript does not expect",
        side_by_side(&Value::String("(nothing)".into()), message),
    )
}

/// Which agent a replay runs against.
#[derive(Debug, Clone)]
pub enum AgentCommand {
    /// `EXE acp --validate ARGS...`, with the scenario's arguments.
    Heron(PathBuf),
    /// A shell command line (`sh -c`), run as it is.
    Shell(String),
}

/// The result of one scenario.
#[derive(Debug)]
pub struct Outcome {
    /// The scenario's name.
    pub name: String,
    /// How long it took.
    pub elapsed: Duration,
    /// Pass, or why not.
    pub result: Result<(), Failure>,
    /// Whether refresh rewrote the file.
    pub rewritten: bool,
}

fn start(agent: &AgentCommand, scenario: &Scenario, sandbox: &Sandbox) -> Result<ProcessTransport, Failure> {
    let home = sandbox.paths.home.clone();
    let env = [("HERON_HOME", home.as_str())];
    let spawned = match agent {
        AgentCommand::Heron(exe) => {
            let mut args = vec!["acp".to_owned(), "--validate".to_owned()];
            args.extend(scenario.header.args.iter().map(|a| matcher::expand_paths(a, &sandbox.paths)));
            ProcessTransport::spawn(exe, &args, &sandbox.ws(), &env)
        }
        AgentCommand::Shell(line) => {
            ProcessTransport::spawn(Path::new("sh"), &["-c".to_owned(), line.clone()], &sandbox.ws(), &env)
        }
    };
    spawned.map_err(|e| Failure::new(0, format!("cannot start the agent: {e}"), ""))
}

fn run_once(scenario: &Scenario, agent: &AgentCommand, refresh: bool) -> Result<Option<String>, Failure> {
    let sandbox = Sandbox::create(&scenario.header)
        .map_err(|e| Failure::new(0, format!("cannot prepare the sandbox: {e}"), ""))?;
    let mut transport = start(agent, scenario, &sandbox)?;
    replay(scenario, &mut transport, &sandbox.paths, refresh)
}

/// Replays the transcript at `path` against `agent`. With `refresh`, a transcript whose
/// expectations no longer hold is rewritten from the agent's messages, then replayed again
/// to prove the new text passes.
pub fn run_file(path: &Path, agent: &AgentCommand, refresh: bool) -> Outcome {
    let started = Instant::now();
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut rewritten = false;
    let result = (|| {
        let scenario = Scenario::load(path)?;
        if let Some(text) = run_once(&scenario, agent, refresh)? {
            std::fs::write(path, &text)
                .map_err(|e| Failure::new(0, format!("cannot rewrite {}: {e}", path.display()), ""))?;
            rewritten = true;
            let scenario = Scenario::parse(&scenario.name, &text)?;
            run_once(&scenario, agent, false)?;
        }
        Ok(())
    })();
    Outcome { name, elapsed: started.elapsed(), result, rewritten }
}
