//! A session served by one configured provider, for the engine's provider tests: a private
//! home whose default model `net/m` is that provider, a workspace with `a.txt` and `b.txt`,
//! and prompts run to their end.

use std::sync::Arc;

use heron_core::config::Home;
use heron_core::session::event::Event;
use heron_core::session::update::TurnUpdate;
use heron_core::session::{Manager, ManagerOptions, OpenOptions, PromptError, Queued, Session};
use heron_core::tools::editor::NoEditor;
use heron_core::types::{PromptInput, StopReason, UsageReport, UserContent};

use super::servers::{BEE, KEY, NOTES};

/// A session and the directories it lives in (removed on drop).
pub struct Served {
    /// The session.
    pub session: Arc<Session>,
    /// The manager that opened it.
    pub manager: Manager,
    /// The session's workspace.
    pub ws: std::path::PathBuf,
    runs: tokio::sync::Mutex<super::runs::Runs>,
    _dir: tempfile::TempDir,
}

impl Served {
    /// A session whose provider table has the keys `table` (beside `models`,
    /// `api_key_env` and `max_retries`).
    pub async fn open(table: &str) -> Served {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path().join("home"));
        std::fs::create_dir_all(home.root()).expect("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).expect("workspace");
        std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
        std::fs::write(ws.join("b.txt"), BEE).expect("b.txt");
        let config = format!(
            "default_model = \"net/m\"\n[providers.net]\nmodels = [\"m\"]\napi_key_env = \"NET_KEY\"\nmax_retries = 0\n{table}"
        );
        std::fs::write(home.config_path(), config).expect("config");
        std::fs::write(home.env_path(), format!("NET_KEY={KEY}\n")).expect(".env");
        let manager = super::manager_for(&home, ManagerOptions::default()).await;
        let options = OpenOptions {
            cwd: ws.clone(),
            additional_directories: Vec::new(),
            editor: Arc::new(NoEditor),
            mcp_servers: Vec::new(),
        };
        let session = manager.create(options).await.expect("a session");
        let runs = tokio::sync::Mutex::new(super::runs::Runs::of(&session));
        Served { session, manager, ws, runs, _dir: dir }
    }

    /// Runs one prompt of `text` to its end; returns what streamed and how it ended.
    pub async fn prompt(&self, text: &str) -> (String, Result<StopReason, PromptError>) {
        let ended = self.run(text).await;
        (ended.text, ended.result)
    }

    /// Runs one prompt of `text` to its end and keeps its usage reports too.
    pub async fn run(&self, text: &str) -> Ended {
        let input = vec![PromptInput::Content(UserContent::Text { text: text.into() })];
        let queued = self.session.prompt(input);
        self.until_answered(queued).await
    }

    /// Runs `/compact` with `instructions` to its end.
    pub async fn compact(&self, instructions: &str) -> Ended {
        let queued = self.session.compact(instructions.into());
        self.until_answered(queued).await
    }

    /// Every stored event of the session, in order.
    pub async fn history(&self) -> Vec<Event> {
        self.manager.history(self.session.id()).await.expect("the history")
    }

    async fn until_answered(&self, queued: Queued) -> Ended {
        let (seen, result) = {
            let mut runs = self.runs.lock().await;
            runs.next(queued).await
        };
        let mut streamed = String::new();
        let mut thought = String::new();
        let mut events = Vec::new();
        let mut usage = Vec::new();
        for update in seen {
            match update {
                TurnUpdate::MessageChunk { text: piece, .. } => streamed.push_str(&piece),
                // A compaction's summary streams as its own chunks: it is reasoning the user sees.
                TurnUpdate::ThoughtChunk { text: piece, .. }
                | TurnUpdate::CompactionChunk { text: piece, .. } => thought.push_str(&piece),
                TurnUpdate::Event(event) => events.push(event),
                TurnUpdate::Usage(report) => usage.push(report),
                _ => {}
            }
        }
        Ended { text: streamed, thought, events, result, usage }
    }
}

/// How a prompt ended.
pub struct Ended {
    /// The agent's text, as streamed.
    pub text: String,
    /// Its thoughts and compaction summaries, as streamed.
    pub thought: String,
    /// The durable events the turn showed, in order.
    pub events: Vec<Event>,
    /// The prompt's answer.
    pub result: Result<StopReason, PromptError>,
    /// Every usage report, in order.
    pub usage: Vec<UsageReport>,
}

/// Runs one prompt in a fresh session of the provider with the keys `table`.
pub async fn turn(table: &str) -> (String, Result<StopReason, PromptError>) {
    Served::open(table).await.prompt("read the notes").await
}

/// The text of `lines` numbered lines of about 60 bytes, unlike each other: a file whose
/// reading takes room in a request.
pub fn big_file(lines: usize) -> String {
    (0..lines).map(|i| format!("line {i:04}: the quick brown fox jumps over the lazy dog\n")).collect()
}
