//! A session's status at one moment, as status bars show it: what it is doing, its
//! settings, goal, context use, inbox, and its extension files that could not be used.

use super::goal::{Goal, GoalStatus};
use super::settings::{Mode, Posture};
use crate::extensions::{Problem, ReloadError};
use crate::types::UsageReport;
use heron_store::{InboxIntent, InboxItem, InboxStatus};

/// What the session's actor is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// No turn is running.
    Idle,
    /// A turn is running.
    Running,
    /// The turn waits for a permission answer.
    AwaitingPermission,
    /// The turn waits for the user's answer to a question.
    AwaitingInput,
}

/// The state a status bar shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// No turn is running.
    Idle,
    /// A turn is running.
    Running,
    /// The turn waits for a permission answer.
    AwaitingPermission,
    /// The turn waits for other user input.
    AwaitingInput,
    /// No turn is running and the goal is paused.
    Paused,
}

/// Counts of the session's stored inbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxCounts {
    /// Waiting to run.
    pub queued: u32,
    /// Running.
    pub running: u32,
    /// Failed.
    pub failed: u32,
    /// Whether queued items are held back.
    pub paused: bool,
}

impl InboxCounts {
    /// Counts the items of a stored inbox by their status. A queued steer waits for the
    /// running turn, not to run: it is not counted.
    pub fn of(items: &[InboxItem], paused: bool) -> Self {
        Self::tallied(items.iter().map(|item| (item.status, item.intent, 1)), paused)
    }

    /// Counts an inbox from how many items of each status and intent it holds.
    pub fn tallied(tally: impl IntoIterator<Item = (InboxStatus, InboxIntent, u32)>, paused: bool) -> Self {
        let mut counts = Self { paused, ..Self::default() };
        for (status, intent, n) in tally {
            let count = match status {
                InboxStatus::Queued if intent == InboxIntent::Steer => continue,
                InboxStatus::Queued => &mut counts.queued,
                InboxStatus::Running => &mut counts.running,
                InboxStatus::Failed => &mut counts.failed,
                InboxStatus::Done | InboxStatus::Cancelled => continue,
            };
            *count = count.saturating_add(n);
        }
        counts
    }
}

/// The session's extensions as its status shows them: what could not be used, and how the
/// last reload ended. A reload queued behind a turn has nobody to answer, so this is where
/// its failure reaches the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtensionsReport {
    /// Command files, plugins and folders left out, and why.
    pub problems: Vec<Problem>,
    /// The last reload since the session opened here.
    pub last_reload: Option<ReloadReport>,
}

impl ExtensionsReport {
    /// Whether there is nothing to tell.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty() && self.last_reload.is_none()
    }
}

/// How one reload ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// It waited for a turn, so no request was answered with its result.
    pub queued: bool,
    /// When it ended.
    pub finished_at: String,
    /// Why it changed nothing; `None` when it succeeded.
    pub error: Option<ReloadError>,
}

/// A session's status at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// What the actor is doing.
    pub activity: Activity,
    /// The mode.
    pub mode: Mode,
    /// `provider/model`.
    pub model: String,
    /// The approval posture.
    pub posture: Posture,
    /// The goal, if one was ever set.
    pub goal: Option<Goal>,
    /// The last usage report, if any.
    pub usage: Option<UsageReport>,
    /// The stored inbox.
    pub inbox: InboxCounts,
    /// Its extension files that could not be used, and the last reload.
    pub extensions: ExtensionsReport,
    /// When the running turn started.
    pub turn_started_at: Option<String>,
    /// The instruction files the model was given (`AGENTS.md` and the like), in the order it
    /// read them: the latest context's, then those a tool found in folders below the cwd.
    pub instructions: Vec<String>,
    /// When anything above last changed.
    pub updated_at: String,
}

impl Snapshot {
    /// The state shown: an idle session whose goal is paused is `Paused`.
    pub fn state(&self) -> SessionState {
        match self.activity {
            Activity::Idle if self.goal.as_ref().is_some_and(|g| g.status == GoalStatus::Paused) => {
                SessionState::Paused
            }
            Activity::Idle => SessionState::Idle,
            Activity::Running => SessionState::Running,
            Activity::AwaitingPermission => SessionState::AwaitingPermission,
            Activity::AwaitingInput => SessionState::AwaitingInput,
        }
    }
}
