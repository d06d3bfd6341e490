//! Steering kept in the inbox: queued steers a running turn applies, steers it left
//! unapplied turning into follow-ups, and the recovery of an inbox a stopped process left.
//! Invariant: a steer is applied at most once, and applying it (status `done`) and
//! appending the user message that shows it to the model are one transaction, so a crash
//! either keeps both or neither.

use std::sync::Arc;

use rusqlite::{Connection, TransactionBehavior, params};

use super::{COLUMNS, InboxIntent, InboxItem, InboxStatus, get, item_from_row};
use crate::{Store, StoreError, events, now, sessions};

/// What [`Store::inbox_recover`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Items left `running`, now `failed`.
    pub interrupted: usize,
    /// Steers accepted for a turn that never applied them, now queued follow-ups.
    pub steers: usize,
}

impl Recovery {
    /// Whether anything was left unfinished.
    pub fn any(&self) -> bool {
        self.interrupted > 0 || self.steers > 0
    }
}

/// Turns a session's queued steers into queued follow-ups, in their places.
fn steers_to_followups(conn: &Connection, session_id: &str) -> Result<usize, StoreError> {
    Ok(conn.execute(
        "UPDATE inbox_items SET intent = ?4, updated_at = ?5
         WHERE session_id = ?1 AND status = ?2 AND intent = ?3",
        params![
            session_id,
            InboxStatus::Queued.as_str(),
            InboxIntent::Steer.as_str(),
            InboxIntent::Followup.as_str(),
            now()
        ],
    )?)
}

fn pause(conn: &Connection, session_id: &str, recovered: bool) -> Result<(), StoreError> {
    let changed = conn.execute(
        "UPDATE sessions SET inbox_paused = 1, inbox_recovered = MAX(inbox_recovered, ?2) WHERE id = ?1",
        params![session_id, recovered],
    )?;
    if changed == 0 {
        return Err(sessions::not_found(session_id));
    }
    Ok(())
}

impl Store {
    /// A session's queued steers in queue order: what its running turn has yet to apply.
    pub async fn inbox_pending_steers(&self, session_id: &str) -> Result<Vec<InboxItem>, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM inbox_items WHERE session_id = ?1 AND status = ?2 AND intent = ?3
                 ORDER BY position"
            ))?;
            let mut rows =
                stmt.query(params![session_id, InboxStatus::Queued.as_str(), InboxIntent::Steer.as_str()])?;
            let mut items = Vec::new();
            while let Some(row) = rows.next()? {
                items.push(item_from_row(row)?);
            }
            Ok(items)
        })
        .await
    }

    /// Applies a queued steer: marks it [`InboxStatus::Done`] and appends the event that
    /// shows it (`kind`, `payload`: one JSON value) to its session's log, in one
    /// transaction. Returns the event's seq, or `None`, appending nothing, when the item is
    /// gone or is no longer a queued steer (deleted, or turned into a follow-up).
    pub async fn inbox_apply_steer(
        &self,
        id: &str,
        kind: &str,
        payload: Arc<str>,
    ) -> Result<Option<u64>, StoreError> {
        let (id, kind) = (id.to_owned(), kind.to_owned());
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(item) = get(&tx, &id)? else { return Ok(None) };
            if item.status != InboxStatus::Queued || item.intent != InboxIntent::Steer {
                return Ok(None);
            }
            tx.execute(
                "UPDATE inbox_items SET status = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, InboxStatus::Done.as_str(), now()],
            )?;
            let seqs = events::append(&tx, &item.session_id, &[(kind, &*payload)])?;
            tx.commit()?;
            Ok(seqs.first().copied())
        })
        .await
    }

    /// Turns the queued steers of a session whose turn ended into queued follow-ups, and
    /// pauses the inbox when `pause` is set and there were any. Returns how many there were.
    pub async fn inbox_steers_to_followups(
        &self,
        session_id: &str,
        pause: bool,
    ) -> Result<usize, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let turned = steers_to_followups(&tx, &session_id)?;
            if turned > 0 && pause {
                self::pause(&tx, &session_id, false)?;
            }
            tx.commit()?;
            Ok(turned)
        })
        .await
    }

    /// Recovers the inbox of a session no live process runs: items left `running` become
    /// `failed` with `error`, queued steers become queued follow-ups, and if there was any
    /// of either the inbox is paused and marked recovered, so nothing starts before the
    /// user has looked. One transaction. An unknown session is [`StoreError::NotFound`].
    pub async fn inbox_recover(&self, session_id: &str, error: &str) -> Result<Recovery, StoreError> {
        let (session_id, error) = (session_id.to_owned(), error.to_owned());
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            sessions::require(&tx, &session_id)?;
            let interrupted = tx.execute(
                "UPDATE inbox_items SET status = ?3, error = ?4, updated_at = ?5
                 WHERE session_id = ?1 AND status = ?2",
                params![
                    session_id,
                    InboxStatus::Running.as_str(),
                    InboxStatus::Failed.as_str(),
                    error,
                    now()
                ],
            )?;
            let recovery = Recovery { interrupted, steers: steers_to_followups(&tx, &session_id)? };
            if recovery.any() {
                pause(&tx, &session_id, true)?;
            }
            tx.commit()?;
            Ok(recovery)
        })
        .await
    }
}
