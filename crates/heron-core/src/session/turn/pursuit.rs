//! How a goal-mode turn works toward the session's goal: it adopts the goal when it starts,
//! asks whether to go on each time the model stops, counts continuations and applies the
//! model's `finish_goal`. Every goal change is stored before the turn moves on.

use super::{Turn, TurnError};
use crate::session::event::Event;
use crate::session::goal::{Goal, GoalStatus, continuation_text, objective_of};
use crate::session::settings::Mode;
use crate::tools::finish_goal::GoalEnd;
use crate::types::UserContent;

impl Turn {
    /// Called when a goal-mode prompt starts: an active goal takes the prompt as more
    /// input; otherwise (none, paused or ended) the prompt states a new goal.
    pub(in crate::session) async fn adopt_goal(&mut self, prompt: &[UserContent]) -> Result<(), TurnError> {
        let changed = self.shared.status.change(|s| match &s.goal {
            Some(goal) if goal.status == GoalStatus::Active => false,
            _ => {
                s.goal = Some(Goal::new(objective_of(prompt)));
                true
            }
        });
        if changed {
            self.save_goal().await?;
        }
        Ok(())
    }

    /// Whether the model, having stopped, should be asked to go on: the goal is still
    /// active and the session is still in goal mode.
    pub(in crate::session) fn goal_wants_more(&self) -> bool {
        let (_, now) = self.shared.status.current();
        now.mode == Mode::Goal && now.goal.is_some_and(|g| g.status == GoalStatus::Active)
    }

    /// Whether the goal was paused (the turn stops after the step that was running).
    pub(in crate::session) fn goal_paused(&self) -> bool {
        self.shared.status.goal().is_some_and(|g| g.status == GoalStatus::Paused)
    }

    /// Counts a continuation and tells the model to go on.
    pub(in crate::session) async fn continue_goal(&mut self) -> Result<(), TurnError> {
        let goal = self.shared.status.change(|s| {
            if let Some(goal) = s.goal.as_mut() {
                goal.continued();
            }
            s.goal.clone()
        });
        let Some(goal) = goal else { return Ok(()) };
        self.save_goal().await?;
        let message_id = uuid::Uuid::new_v4().to_string();
        let text = continuation_text(&goal);
        self.record(Event::GoalContinuation { message_id, text, count: goal.continuation_count }).await
    }

    /// Applies the model's `finish_goal`.
    pub(in crate::session) async fn end_goal(&mut self, end: GoalEnd) -> Result<(), TurnError> {
        self.shared.status.change(|s| {
            if let Some(goal) = s.goal.as_mut() {
                goal.finish(end == GoalEnd::Completed);
            }
        });
        self.save_goal().await
    }

    async fn save_goal(&self) -> Result<(), TurnError> {
        self.shared
            .status
            .save(&self.shared.store, &self.shared.session_id)
            .await
            .map_err(|e| TurnError::Store(e.to_string()))
    }
}
