//! Mid-turn steering: user input added to a session without cancelling its turn. Invariant:
//! no steer is lost. Input for the running turn is shown to the model before its next
//! request; input that arrives with no turn running, or that the turn ended without
//! showing, opens the session's next prompt.

use std::sync::{Mutex, PoisonError};

use super::PromptInput;

/// Where a steer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerOutcome {
    /// The running turn shows it to the model at its next request.
    Delivered,
    /// No turn was running: it opens the next prompt.
    Queued,
}

#[derive(Debug, Default)]
struct Inbox {
    /// Whether a turn takes steers now.
    open: bool,
    /// For the running turn.
    pending: Vec<Vec<PromptInput>>,
    /// For the next prompt.
    queued: Vec<Vec<PromptInput>>,
}

/// One session's steering input. Every decision is made under one lock, so a steer either
/// reaches a turn that will still read it or waits for the next one.
#[derive(Debug, Default)]
pub struct Steers {
    inbox: Mutex<Inbox>,
}

impl Steers {
    /// Adds `input` for the running turn, or for the next prompt when none runs.
    pub fn steer(&self, input: Vec<PromptInput>) -> SteerOutcome {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        if inbox.open {
            inbox.pending.push(input);
            SteerOutcome::Delivered
        } else {
            inbox.queued.push(input);
            SteerOutcome::Queued
        }
    }

    /// A turn starts taking steers; returns those queued for it, oldest first.
    pub fn open(&self) -> Vec<Vec<PromptInput>> {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        inbox.open = true;
        std::mem::take(&mut inbox.queued)
    }

    /// What arrived for the running turn since it last looked.
    pub fn take(&self) -> Vec<Vec<PromptInput>> {
        std::mem::take(&mut self.inbox.lock().unwrap_or_else(PoisonError::into_inner).pending)
    }

    /// The turn would end: it stops taking steers, unless some arrived that it has not
    /// shown the model yet (`Err`), in which case it must go on.
    pub fn close(&self) -> Result<(), Vec<Vec<PromptInput>>> {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        if inbox.pending.is_empty() {
            inbox.open = false;
            Ok(())
        } else {
            Err(std::mem::take(&mut inbox.pending))
        }
    }

    /// The turn ended early (cancelled, failed, out of requests): what it never showed the
    /// model opens the next prompt, ahead of anything queued since.
    pub fn close_now(&self) {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        inbox.open = false;
        let mut carried = std::mem::take(&mut inbox.pending);
        carried.append(&mut inbox.queued);
        inbox.queued = carried;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::UserContent;

    fn text(t: &str) -> Vec<PromptInput> {
        vec![PromptInput::Content(UserContent::Text { text: t.into() })]
    }

    #[test]
    fn a_steer_is_queued_without_a_turn_and_delivered_during_one() {
        let steers = Steers::default();
        assert_eq!(steers.steer(text("early")), SteerOutcome::Queued);
        assert_eq!(steers.open(), [text("early")]);
        assert_eq!(steers.steer(text("during")), SteerOutcome::Delivered);
        assert_eq!(steers.take(), [text("during")]);
        assert_eq!(steers.close(), Ok(()));
        assert_eq!(steers.steer(text("after")), SteerOutcome::Queued);
    }

    #[test]
    fn a_turn_cannot_close_over_a_steer_it_has_not_shown() {
        let steers = Steers::default();
        steers.open();
        steers.steer(text("late"));
        assert_eq!(steers.close(), Err(vec![text("late")]));
        assert_eq!(steers.steer(text("later")), SteerOutcome::Delivered, "the turn is still open");
    }

    #[test]
    fn a_turn_that_ends_early_carries_its_steers_to_the_next_prompt() {
        let steers = Steers::default();
        steers.open();
        steers.steer(text("unseen"));
        steers.close_now();
        steers.steer(text("queued"));
        assert_eq!(steers.open(), [text("unseen"), text("queued")]);
    }
}
