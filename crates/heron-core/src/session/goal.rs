//! A session's goal: the objective a goal-mode prompt states, and the rules for moving it
//! between active, paused, completed and failed. Completed and failed are final; a new
//! goal-mode prompt then states a new objective.

use serde::{Deserialize, Serialize};

use crate::types::UserContent;

/// Where a goal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Heron keeps continuing toward it.
    Active,
    /// Kept, but not pursued until resumed.
    Paused,
    /// Reached.
    Completed,
    /// Abandoned: the model found it cannot be reached.
    Failed,
}

impl GoalStatus {
    /// Whether the goal has ended for good.
    pub fn is_final(self) -> bool {
        matches!(self, GoalStatus::Completed | GoalStatus::Failed)
    }

    fn id(self) -> &'static str {
        match self {
            GoalStatus::Active => "active",
            GoalStatus::Paused => "paused",
            GoalStatus::Completed => "completed",
            GoalStatus::Failed => "failed",
        }
    }
}

/// As the wire spells it (`completed`), for messages.
impl std::fmt::Display for GoalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// A long-running objective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    /// The objective, as the user stated it.
    pub objective: String,
    /// Where it stands.
    pub status: GoalStatus,
    /// When it was set (RFC 3339 UTC).
    pub started_at: String,
    /// When its status or continuation count last changed (RFC 3339 UTC).
    pub updated_at: String,
    /// Turns Heron started on its own to continue toward it.
    pub continuation_count: u32,
}

/// Why a goal could not be paused or resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GoalError {
    /// The session has no goal.
    #[error("the session has no goal; a prompt in goal mode sets one")]
    NoGoal,
    /// The goal has already ended.
    #[error("the goal is already {status}; a new prompt in goal mode sets a new one")]
    Ended {
        /// How it ended: completed or failed.
        status: GoalStatus,
    },
    /// Pause asked of a goal that is not running (it is paused already).
    #[error("the goal is not running: it is already paused")]
    NotRunning,
    /// Resume asked of a goal that is running: there is nothing to resume.
    #[error("the goal is already running; a prompt continues it")]
    AlreadyRunning,
}

/// The current time as an RFC 3339 UTC string with millisecond precision.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

impl Goal {
    /// A new active goal for `objective`.
    pub fn new(objective: String) -> Self {
        let at = now();
        Self {
            objective,
            status: GoalStatus::Active,
            started_at: at.clone(),
            updated_at: at,
            continuation_count: 0,
        }
    }

    fn set(&mut self, status: GoalStatus) {
        if self.status != status {
            self.status = status;
            self.updated_at = now();
        }
    }

    /// Counts one more continuation.
    pub(crate) fn continued(&mut self) {
        self.continuation_count += 1;
        self.updated_at = now();
    }

    /// Ends the goal (`finish_goal`); an ended goal keeps its first ending.
    pub fn finish(&mut self, completed: bool) {
        if !self.status.is_final() {
            self.set(if completed { GoalStatus::Completed } else { GoalStatus::Failed });
        }
    }
}

/// Pauses a running `goal`; any other (none, paused, ended) is refused, as the Reasonix
/// guide's pause is when no goal is running.
pub fn pause(goal: &mut Option<Goal>) -> Result<Goal, GoalError> {
    change(goal, GoalStatus::Active, GoalStatus::Paused, GoalError::NotRunning)
}

/// Makes a paused `goal` active again; any other (none, running, ended) is refused, as the
/// guide's resume is when there is nothing to resume.
pub fn resume(goal: &mut Option<Goal>) -> Result<Goal, GoalError> {
    change(goal, GoalStatus::Paused, GoalStatus::Active, GoalError::AlreadyRunning)
}

/// Moves `goal` from `from` to `to`, or says why it is not at `from` (`otherwise` when it is
/// open but at the other status).
fn change(
    goal: &mut Option<Goal>,
    from: GoalStatus,
    to: GoalStatus,
    otherwise: GoalError,
) -> Result<Goal, GoalError> {
    let goal = goal.as_mut().ok_or(GoalError::NoGoal)?;
    if goal.status.is_final() {
        return Err(GoalError::Ended { status: goal.status });
    }
    if goal.status != from {
        return Err(otherwise);
    }
    goal.set(to);
    Ok(goal.clone())
}

/// The objective a prompt states: its text, or a note when it has none.
pub(crate) fn objective_of(prompt: &[UserContent]) -> String {
    let text: Vec<&str> = prompt
        .iter()
        .filter_map(|c| match c {
            UserContent::Text { text } => Some(text.trim()),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect();
    if text.is_empty() {
        "The objective is in the content the user attached.".to_owned()
    } else {
        text.join("\n")
    }
}

/// The user message that asks the model to go on.
pub(crate) fn continuation_text(goal: &Goal) -> String {
    format!(
        "Continue working toward the goal: {}\nIf it is reached, or you find it cannot be reached, call \
         `finish_goal`.",
        goal.objective
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pausing_and_resuming_move_an_open_goal_and_refuse_an_ended_one() {
        let mut goal = Some(Goal::new("ship it".into()));
        assert_eq!(resume(&mut goal), Err(GoalError::AlreadyRunning));
        assert_eq!(pause(&mut goal).map(|g| g.status), Ok(GoalStatus::Paused));
        assert_eq!(pause(&mut goal), Err(GoalError::NotRunning));
        assert_eq!(resume(&mut goal).map(|g| g.status), Ok(GoalStatus::Active));
        if let Some(g) = goal.as_mut() {
            g.finish(false);
        }
        assert_eq!(resume(&mut goal), Err(GoalError::Ended { status: GoalStatus::Failed }));
        assert_eq!(pause(&mut None), Err(GoalError::NoGoal));
    }

    #[test]
    fn an_ended_goal_keeps_its_first_ending() {
        let mut goal = Goal::new("x".into());
        goal.finish(true);
        goal.finish(false);
        assert_eq!(goal.status, GoalStatus::Completed);
    }

    #[test]
    fn the_objective_is_the_prompt_text() {
        let prompt = vec![
            UserContent::Text { text: " Make the tests pass ".into() },
            UserContent::Link {
                uri: "file:///a".into(),
                name: "a".into(),
                mime_type: None,
                title: None,
                description: None,
                size: None,
            },
            UserContent::Text { text: "in crate b".into() },
        ];
        assert_eq!(objective_of(&prompt), "Make the tests pass\nin crate b");
        assert!(objective_of(&[]).contains("attached"));
    }
}
