//! A session's status at one moment, as status bars show it: what it is doing, its
//! settings, goal, context use and inbox.

use super::goal::{Goal, GoalStatus};
use super::settings::{Mode, Posture};
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
    /// When the running turn started.
    pub turn_started_at: Option<String>,
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
