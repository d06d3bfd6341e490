//! A prompt turn's workspace check: the files stamped just before its first command runs and
//! again at its end; what moved besides Heron's own file changes meanwhile is stored with
//! the turn, so a later rewind can list it as changed by a command (see
//! `session::side_effects`). A turn that runs no command walks nothing.

use super::Turn;
use crate::session::checkpoints::written_paths;
use crate::session::event::Event;
use crate::session::side_effects::{self, MAX_LISTED, Snapshot};

/// The workspace as it was before the turn's first command, and where the history stood.
pub(in crate::session) struct BeforeCommands {
    at: usize,
    snapshot: Snapshot,
}

/// The tool whose calls run commands.
const RUNS_COMMANDS: &str = "run_command";

impl Turn {
    /// Stamps the workspace before the turn's first command (`tool` about to run).
    pub(super) async fn before_command(&mut self, tool: &str) {
        if tool == RUNS_COMMANDS && self.before_commands.is_none() {
            let snapshot = self.workspace_snapshot(None).await;
            self.before_commands = Some(BeforeCommands { at: self.carried.history.len(), snapshot });
        }
    }

    /// The workspace's files now, stamped off the async threads (bounded).
    async fn workspace_snapshot(&self, earlier: Option<Snapshot>) -> Snapshot {
        let root = self.io.env.cwd.clone();
        let protected = self.io.env.roots.protected().clone();
        // Its own token: a cancelled turn still checks what its commands left behind.
        let cancel = tokio_util::sync::CancellationToken::new();
        tokio::task::spawn_blocking(move || side_effects::take(&root, &protected, &cancel, earlier.as_ref()))
            .await
            .unwrap_or_else(|_| Snapshot::Skipped("the check stopped".into()))
    }

    /// Stores what the turn's commands changed, when it ran one.
    pub(super) async fn record_command_changes(&mut self) {
        let Some(BeforeCommands { at, snapshot: before }) = self.before_commands.take() else { return };
        let events = self.carried.history.get(at..).unwrap_or_default();
        let written: Vec<String> = written_paths(events).into_iter().map(str::to_owned).collect();
        let after = self.workspace_snapshot(Some(before.clone())).await;
        let written: Vec<&str> = written.iter().map(String::as_str).collect();
        let event = match side_effects::changed(&before, &after, &written) {
            Ok(mut files) => {
                let more = files.len().saturating_sub(MAX_LISTED) as u64;
                files.truncate(MAX_LISTED);
                Event::CommandChanges { files, more, skipped: None }
            }
            Err(why) => Event::CommandChanges { files: Vec::new(), more: 0, skipped: Some(why) },
        };
        if let Err(err) = self.record(event).await {
            tracing::warn!(session = %self.shared.session_id, %err, "cannot store what the turn's commands changed");
        }
    }
}
