//! `heron acp --record FILE`: keeps a real editor session as a conformance transcript. The
//! recorder sees the bytes on stdin and stdout ([`tee`]), every model request's events (a
//! [`ModelTap`]) and each workspace file before a tool first uses it (a [`FileWitness`]);
//! [`transcript`] turns that into a scenario that replays on the scripted model. The file
//! is rewritten while the session runs, so an editor that kills the agent loses at most the
//! last moment.

mod tee;
mod transcript;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

pub use self::tee::{TeeReader, TeeWriter};
pub use self::transcript::turn_of;
use super::format::ScriptedAs;
use heron_core::config::Config;
use heron_core::llm::ModelEvent;
use heron_core::llm::tap::{ModelTap, TapEnd};
use heron_core::secret::Secret;
use heron_core::tools::FileWitness;
use heron_core::whole_file::WholeFileError;

/// A workspace file larger than this is left out of the recording.
const MAX_FILE: u64 = 256 * 1024;
/// The workspace files of one recording, together, stay under this.
const MAX_FILES_TOTAL: usize = 4 * 1024 * 1024;
/// How often the transcript is rewritten while the session runs.
const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// Which side sent a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// The editor (stdin).
    Client,
    /// Heron (stdout).
    Agent,
}

/// What the recording starts from: the agent's flags and configuration.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// `heron acp` arguments to replay with (not `--record`, `--validate` or `--cwd`).
    pub args: Vec<String>,
    /// The providers the session could choose from, as the script will play them.
    pub providers: BTreeMap<String, ScriptedAs>,
    /// Top-level `config.toml` settings that change behaviour.
    pub config: Option<String>,
    /// HERON_HOME, written `$HOME`.
    pub home: PathBuf,
    /// Values never to write down (API keys).
    pub secrets: Vec<Secret>,
}

impl Setup {
    /// The setup of an agent with `args` over `config`.
    pub fn new(args: Vec<String>, config: &Config, home: PathBuf, secrets: Vec<Secret>) -> Self {
        let providers = config
            .providers
            .iter()
            .map(|(name, p)| {
                let scripted = ScriptedAs {
                    models: p.models.clone(),
                    efforts: p.efforts.clone(),
                    prices: p
                        .prices
                        .iter()
                        .map(|(m, price)| (m.clone(), (price.input, price.output, price.currency.clone())))
                        .collect(),
                    context_window: p.context_window,
                    // Where compaction starts decides which requests the script must serve.
                    compact_at: p.compact_at.or(config.compact_at),
                };
                (name.clone(), scripted)
            })
            .collect();
        let mut settings = Vec::new();
        if let Some(model) = &config.default_model {
            settings.push(format!("default_model = {}", Value::String(model.clone())));
        }
        if let Some(seconds) = config.permission_timeout_s {
            settings.push(format!("permission_timeout_s = {seconds}"));
        }
        if let Some(requests) = config.max_turn_requests {
            settings.push(format!("max_turn_requests = {requests}"));
        }
        if let Some(continuations) = config.max_goal_continuations {
            settings.push(format!("max_goal_continuations = {continuations}"));
        }
        let config = (!settings.is_empty()).then(|| settings.join("\n"));
        Self { args, providers, config, home, secrets }
    }
}

/// One line that crossed stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Who sent it.
    pub from: Sender,
    /// Its text, without the newline, secrets redacted.
    pub text: String,
}

/// Everything seen so far.
#[derive(Debug, Default)]
struct Seen {
    lines: Vec<Line>,
    partial_in: Vec<u8>,
    partial_out: Vec<u8>,
    /// Model requests in the order they started: what each streamed, and how it ended
    /// (`None` while it still streams).
    turns: Vec<(Vec<ModelEvent>, Option<TapEnd>)>,
    /// The first session's working directory, as given and resolved.
    workspace: Option<(PathBuf, PathBuf)>,
    /// Workspace files as first used: relative path to text (`None`: it did not exist).
    files: BTreeMap<String, Option<String>>,
    files_bytes: usize,
    notes: Vec<String>,
    /// How many lines had crossed when the editor closed stdin.
    closed_at: Option<usize>,
    /// Bytes of lines kept, and of lines still being read.
    lines_bytes: usize,
    /// Whether the recording reached [`MAX_RECORDED_BYTES`] and keeps no more lines.
    full: bool,
}

/// The most bytes of stdio lines a recording keeps: what a transcript may hold to be
/// replayed at all (`MAX_TRANSCRIPT_BYTES`), less room for its setup and files. Past it the
/// session goes on unrecorded, so the recorder holds no more than this whatever is sent.
pub const MAX_RECORDED_BYTES: usize = 24 * 1024 * 1024;

/// A session being recorded. Shared by the stdio adapters, the model tap, the file
/// witness and the task that writes the file.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    setup: Setup,
    seen: Mutex<Seen>,
    dirty: AtomicBool,
}

impl Recorder {
    /// A recorder that writes to `path`.
    pub fn new(path: PathBuf, setup: Setup) -> Self {
        Self { path, setup, seen: Mutex::new(Seen::default()), dirty: AtomicBool::new(true) }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes that crossed stdio from `from`.
    pub fn bytes(&self, from: Sender, bytes: &[u8]) {
        let mut seen = self.seen();
        if seen.full {
            return;
        }
        if seen.lines_bytes + seen.partial_in.len() + seen.partial_out.len() + bytes.len()
            > MAX_RECORDED_BYTES
        {
            seen.full = true;
            (seen.partial_in, seen.partial_out) = (Vec::new(), Vec::new());
            let kept = seen.lines.len();
            seen.notes.push(format!(
                "the recording stopped after {kept} lines: it holds at most {MAX_RECORDED_BYTES} bytes of them"
            ));
            self.dirty.store(true, Ordering::Relaxed);
            return;
        }
        let partial = match from {
            Sender::Client => &mut seen.partial_in,
            Sender::Agent => &mut seen.partial_out,
        };
        partial.extend_from_slice(bytes);
        let mut complete = Vec::new();
        while let Some(end) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=end).collect();
            complete.push(line);
        }
        for mut line in complete {
            line.pop();
            self.push_line(&mut seen, from, &line);
        }
    }

    /// The stream from `from` ended: a last line without a newline still counts.
    pub fn end_of(&self, from: Sender) {
        let mut seen = self.seen();
        let partial = match from {
            Sender::Client => std::mem::take(&mut seen.partial_in),
            Sender::Agent => std::mem::take(&mut seen.partial_out),
        };
        if !partial.is_empty() {
            self.push_line(&mut seen, from, &partial);
        }
        if from == Sender::Client && seen.closed_at.is_none() {
            seen.closed_at = Some(seen.lines.len());
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    fn push_line(&self, seen: &mut Seen, from: Sender, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let text = heron_core::secret::redact(&String::from_utf8_lossy(line), &self.setup.secrets);
        if from == Sender::Client && seen.workspace.is_none() {
            seen.workspace = session_cwd(&text).map(|cwd| {
                let resolved = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
                (cwd, resolved)
            });
        }
        seen.lines_bytes += text.len();
        seen.lines.push(Line { from, text });
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// The transcript as it stands.
    pub fn transcript(&self) -> String {
        let seen = self.seen();
        transcript::write(&self.setup, &seen)
    }

    /// Writes the transcript (to a temporary file renamed over the old one, so a reader
    /// never sees half of it).
    pub fn flush(&self) -> std::io::Result<()> {
        self.dirty.store(false, Ordering::Relaxed);
        let text = self.transcript();
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".partial");
        let temporary = PathBuf::from(temporary);
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, &self.path)
    }

    /// Rewrites the file whenever something new was seen, until the task is dropped.
    pub async fn keep_flushing(self: std::sync::Arc<Self>) {
        let mut warned = false;
        loop {
            tokio::time::sleep(FLUSH_EVERY).await;
            if self.dirty.load(Ordering::Relaxed)
                && let Err(error) = self.flush()
                && !warned
            {
                warned = true;
                tracing::warn!(path = %self.path.display(), %error, "cannot write the recording");
            }
        }
    }
}

/// The `cwd` of a `session/new`, `session/load`, `session/resume` or `session/fork` line.
fn session_cwd(text: &str) -> Option<PathBuf> {
    if !text.contains("\"cwd\"") {
        return None;
    }
    let message: Value = serde_json::from_str(text).ok()?;
    let method = message.get("method")?.as_str()?;
    if !matches!(method, "session/new" | "session/load" | "session/resume" | "session/fork") {
        return None;
    }
    let cwd = PathBuf::from(message.pointer("/params/cwd")?.as_str()?);
    cwd.is_absolute().then_some(cwd)
}

impl ModelTap for Recorder {
    fn begin(&self) -> usize {
        let mut seen = self.seen();
        seen.turns.push((Vec::new(), None));
        seen.turns.len() - 1
    }

    fn event(&self, index: usize, event: &ModelEvent) {
        if let Some((events, _)) = self.seen().turns.get_mut(index) {
            events.push(event.clone());
        }
        self.dirty.store(true, Ordering::Relaxed);
    }

    fn end(&self, index: usize, end: TapEnd) {
        if let Some((_, slot)) = self.seen().turns.get_mut(index) {
            *slot = Some(end);
        }
        self.dirty.store(true, Ordering::Relaxed);
    }
}

impl FileWitness for Recorder {
    fn before_use(&self, path: &Path) {
        let mut seen = self.seen();
        let Some((given, resolved)) = &seen.workspace else { return };
        let Some(relative) = path.strip_prefix(resolved).or_else(|_| path.strip_prefix(given)).ok() else {
            return;
        };
        let Some(relative) = relative.to_str().map(str::to_owned).filter(|r| !r.is_empty()) else { return };
        if seen.files.contains_key(&relative) {
            return;
        }
        // A link is not followed: it could lead out of the workspace, into what a shared
        // recording must never hold.
        let kept = match std::fs::symlink_metadata(path) {
            Err(_) => None,
            Ok(meta) if !meta.is_file() => return,
            // The bound is on the read itself: the file may grow after its size was seen.
            Ok(_) => match heron_core::whole_file::read_text(path, MAX_FILE) {
                Ok(text) if seen.files_bytes + text.len() <= MAX_FILES_TOTAL => Some(text),
                Ok(_) => {
                    seen.notes.push(format!("{relative} is left out: the recording holds enough files"));
                    None
                }
                Err(WholeFileError::TooLarge { .. }) => {
                    seen.notes.push(format!("{relative} is left out: it is larger than {MAX_FILE} bytes"));
                    None
                }
                Err(WholeFileError::NotText) => {
                    seen.notes.push(format!("{relative} is left out: it is not UTF-8 text"));
                    None
                }
                Err(error) => {
                    seen.notes.push(format!("{relative} is left out: {error}"));
                    None
                }
            },
        };
        let kept = kept.map(|text| heron_core::secret::redact(&text, &self.setup.secrets));
        seen.files_bytes += kept.as_ref().map_or(0, String::len);
        seen.files.insert(relative, kept);
        self.dirty.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_keeps_names_and_behaviour_but_no_endpoint_or_key_name() {
        let config = Config::parse(
            "default_model = \"p/a\"\npermission_timeout_s = 5\nmax_turn_requests = 7\nmax_goal_continuations = 2\n\
             [providers.p]\nkind = \"openai\"\nbase_url = \"http://10.0.0.1/v1\"\napi_key_env = \"P_KEY\"\n\
             models = [\"a\"]\ncontext_window = 1000\ncompact_at = 0.5\n",
        )
        .expect("config");
        let setup =
            Setup::new(vec!["--model".into(), "p/a".into()], &config, PathBuf::from("/h"), Vec::new());
        assert_eq!(
            setup.config.as_deref(),
            Some(
                "default_model = \"p/a\"\npermission_timeout_s = 5\nmax_turn_requests = 7\n\
                 max_goal_continuations = 2"
            )
        );
        assert_eq!(setup.providers["p"].models, ["a"]);
        assert_eq!(setup.providers["p"].context_window, Some(1000));
        let table = setup.providers["p"].toml("p");
        assert!(table.contains("compact_at = 0.5"), "{table}");
        assert!(!table.contains("10.0.0.1") && !table.contains("P_KEY"), "{table}");
        assert!(table.contains("playback = \"sequential\""), "{table}");
    }

    #[test]
    fn workspace_files_past_their_bounds_are_left_out_with_a_note() {
        let workspace = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(workspace.path()).expect("canonical");
        let recorder = Recorder::new(PathBuf::from("unused.ndjson"), Setup::default());
        let open = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
            "params": {"cwd": root, "mcpServers": []}});
        recorder.bytes(Sender::Client, format!("{open}\n").as_bytes());
        let full = usize::try_from(MAX_FILE).expect("fits");
        // One byte past the bound on a file; sixteen files at it fill the total exactly.
        std::fs::write(root.join("large.txt"), "x".repeat(full + 1)).expect("write");
        recorder.before_use(&root.join("large.txt"));
        for index in 0..MAX_FILES_TOTAL / full {
            let name = format!("at-the-bound-{index}.txt");
            std::fs::write(root.join(&name), "y".repeat(full)).expect("write");
            recorder.before_use(&root.join(name));
        }
        std::fs::write(root.join("one-more.txt"), "z").expect("write");
        recorder.before_use(&root.join("one-more.txt"));
        std::os::unix::fs::symlink(root.join("one-more.txt"), root.join("link.txt")).expect("link");
        recorder.before_use(&root.join("link.txt"));

        let transcript = recorder.transcript();
        assert!(transcript.contains("# Note: large.txt is left out"), "the recording says so");
        let seen = recorder.seen();
        assert_eq!(seen.files.get("large.txt"), Some(&None), "a file past MAX_FILE is not kept");
        assert_eq!(seen.files.get("one-more.txt"), Some(&None), "nor one past MAX_FILES_TOTAL");
        assert!(!seen.files.contains_key("link.txt"), "a link is not followed");
        let kept: Vec<&String> = seen.files.values().flatten().collect();
        assert_eq!(kept.len(), MAX_FILES_TOTAL / full, "every file at the bound is kept whole");
        assert!(kept.iter().all(|text| text.len() == full));
        assert_eq!(seen.files_bytes, MAX_FILES_TOTAL);
        assert_eq!(
            seen.notes,
            [
                format!("large.txt is left out: it is larger than {MAX_FILE} bytes"),
                "one-more.txt is left out: the recording holds enough files".to_owned(),
            ]
        );
    }

    #[test]
    fn a_recording_keeps_lines_up_to_its_budget_and_then_says_it_stopped() {
        let recorder = Recorder::new(PathBuf::from("unused.ndjson"), Setup::default());
        recorder.bytes(Sender::Client, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n");
        // One endless line: it is not held past the budget.
        let piece = vec![b'x'; 1024 * 1024];
        for _ in 0..=MAX_RECORDED_BYTES / piece.len() {
            recorder.bytes(Sender::Agent, &piece);
        }
        recorder.bytes(Sender::Client, b"{\"after\":true}\n");
        let seen = recorder.seen();
        assert_eq!(seen.lines.len(), 1, "only the line before the budget ran out");
        assert!(seen.partial_in.is_empty() && seen.partial_out.is_empty(), "nothing is held");
        assert!(seen.full);
        assert!(
            seen.notes.iter().any(|n| n.contains("the recording stopped after 1 lines")),
            "{:?}",
            seen.notes
        );
    }
}
