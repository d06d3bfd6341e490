//! Mid-turn steering: user input added to a session without cancelling its turn. Invariant:
//! no steer is lost, and none is shown twice. Every steer is committed to the store as an
//! inbox item before it is answered:
//!
//! - While a turn takes steers it is a queued steer (`steer_accepted`): the turn applies it
//!   before its next model request, recording it as a user message in the same store
//!   transaction that marks it done ([`Steers::apply`]); a turn cannot end over a steer it
//!   has not applied ([`Steers::close`]).
//! - With no such turn it is a queued follow-up (`queued_followup`) that runs as a turn of
//!   its own.
//! - A turn that ends without applying some (cancelled, failed, out of requests) turns
//!   them into queued follow-ups, and a cancelled one pauses the inbox so a stop is not
//!   followed by a new turn ([`Steers::close_now`]). A process that dies leaves them
//!   queued steers, which the next opening recovers as follow-ups (`inbox::reopen`).
//!
//! Whether a turn takes steers is decided under one lock held across the store write, so a
//! steer is either one the open turn will still find or a follow-up.

use std::sync::Arc;

use tokio::sync::Mutex;

use super::stored_prompt;
use crate::session::PromptInput;
use heron_store::{Enqueued, InboxIntent, NewInboxItem, Store, StoreError};

/// A steer waiting for the running turn: its item and its input, or why that cannot be read.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::session) struct Pending {
    /// The inbox item.
    pub(in crate::session) id: String,
    /// The input.
    pub(in crate::session) input: Result<Vec<PromptInput>, String>,
}

/// One session's steering gate.
#[derive(Debug)]
pub(in crate::session) struct Steers {
    session_id: String,
    store: Store,
    /// Whether a turn takes steers now.
    open: Mutex<bool>,
}

impl Steers {
    pub(in crate::session) fn new(session_id: String, store: Store) -> Self {
        Self { session_id, store, open: Mutex::new(false) }
    }

    /// Commits `new` as a steer for the running turn if one takes steers, or as a follow-up.
    pub(in crate::session) async fn accept(&self, mut new: NewInboxItem) -> Result<Enqueued, StoreError> {
        let open = self.open.lock().await;
        new.intent = if *open { InboxIntent::Steer } else { InboxIntent::Followup };
        let enqueued = self.store.inbox_enqueue(&self.session_id, new).await;
        drop(open);
        enqueued
    }

    /// A turn starts taking steers.
    pub(in crate::session) async fn open(&self) {
        *self.open.lock().await = true;
    }

    /// The steers the running turn has yet to apply, in queue order.
    pub(in crate::session) async fn pending(&self) -> Result<Vec<Pending>, StoreError> {
        let items = self.store.inbox_pending_steers(&self.session_id).await?;
        Ok(items
            .into_iter()
            .map(|item| Pending { input: stored_prompt::decode(&item.prompt), id: item.id })
            .collect())
    }

    /// Applies steer `id`: marks it done and appends the event that shows it, together.
    /// `false` when it was withdrawn meanwhile (deleted), so nothing was recorded.
    pub(in crate::session) async fn apply(
        &self,
        id: &str,
        kind: &str,
        payload: Arc<str>,
    ) -> Result<bool, StoreError> {
        Ok(self.store.inbox_apply_steer(id, kind, payload).await?.is_some())
    }

    /// The turn would end: it stops taking steers, unless some arrived that it has not
    /// applied yet (`Err`), in which case it must go on. A store that cannot be read closes
    /// the gate; what it holds is turned into follow-ups by [`Steers::close_now`] or, at
    /// the latest, when the session is next opened.
    pub(in crate::session) async fn close(&self) -> Result<(), Vec<Pending>> {
        let mut open = self.open.lock().await;
        match self.pending().await {
            Ok(pending) if !pending.is_empty() => Err(pending),
            Ok(_) => {
                *open = false;
                Ok(())
            }
            Err(err) => {
                tracing::warn!(session = %self.session_id, %err, "cannot read pending steers");
                *open = false;
                Ok(())
            }
        }
    }

    /// The turn has ended: it stops taking steers, and those it did not apply become queued
    /// follow-ups; `stopped` (the turn was cancelled) pauses the inbox if there were any.
    /// Returns how many there were.
    pub(in crate::session) async fn close_now(&self, stopped: bool) -> usize {
        let mut open = self.open.lock().await;
        *open = false;
        match self.store.inbox_steers_to_followups(&self.session_id, stopped).await {
            Ok(turned) => turned,
            Err(err) => {
                tracing::warn!(session = %self.session_id, %err, "cannot turn unapplied steers into follow-ups");
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::UserContent;
    use heron_store::{InboxStatus, NewSession};

    async fn steers() -> (tempfile::TempDir, Store, Steers) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("heron.db")).await.expect("store");
        let id = store.create_session(NewSession::in_dir("/w")).await.expect("session").id;
        let steers = Steers::new(id, store.clone());
        (dir, store, steers)
    }

    fn text(t: &str) -> NewInboxItem {
        let input = vec![PromptInput::Content(UserContent::Text { text: t.into() })];
        NewInboxItem::followup(stored_prompt::encode(&input))
    }

    async fn intent(steers: &Steers, t: &str) -> InboxIntent {
        steers.accept(text(t)).await.expect("accept").item.intent
    }

    #[tokio::test]
    async fn a_steer_is_a_followup_without_a_turn_and_accepted_during_one() {
        let (_dir, _store, steers) = steers().await;
        assert_eq!(intent(&steers, "early").await, InboxIntent::Followup);
        steers.open().await;
        assert_eq!(intent(&steers, "during").await, InboxIntent::Steer);
        let pending = steers.pending().await.expect("pending");
        assert_eq!(pending.len(), 1);
        assert!(steers.apply(&pending[0].id, "user_message", "{}".into()).await.expect("apply"));
        assert_eq!(steers.close().await, Ok(()));
        assert_eq!(intent(&steers, "after").await, InboxIntent::Followup);
    }

    #[tokio::test]
    async fn a_turn_cannot_close_over_a_steer_it_has_not_applied() {
        let (_dir, _store, steers) = steers().await;
        steers.open().await;
        steers.accept(text("late")).await.expect("accept");
        assert!(steers.close().await.is_err_and(|late| late.len() == 1));
        assert_eq!(intent(&steers, "later").await, InboxIntent::Steer, "the turn is still open");
    }

    #[tokio::test]
    async fn a_turn_that_ends_early_leaves_its_steers_as_followups() {
        let (_dir, store, steers) = steers().await;
        steers.open().await;
        let unseen = steers.accept(text("unseen")).await.expect("accept").item;
        assert_eq!(steers.close_now(true).await, 1);
        let item = store.inbox_get(&unseen.id).await.expect("get").expect("kept");
        assert_eq!((item.intent, item.status), (InboxIntent::Followup, InboxStatus::Queued));
        assert!(store.inbox_state(&item.session_id).await.expect("state").paused, "a stop pauses");
        assert_eq!(intent(&steers, "queued").await, InboxIntent::Followup);
    }
}
