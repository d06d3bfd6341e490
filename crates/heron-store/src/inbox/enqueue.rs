//! Adding an item to a session's inbox: where it goes, the idempotency key that makes a
//! retry find its first item instead of adding one, and the room a full inbox makes by
//! removing its oldest finished item. One `BEGIN IMMEDIATE` transaction, so two enqueues
//! with one key never both add an item.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::{COLUMNS, InboxIntent, InboxItem, InboxStatus, item_from_row, len, paused, require, shift};
use crate::{Store, StoreError, encode_json, now, sessions};

/// The most items a session's inbox holds unless the caller says otherwise.
pub const INBOX_CAPACITY: usize = 500;

/// The most bytes of stored prompts a session's inbox holds.
pub const INBOX_SESSION_BYTES: usize = 32 * 1024 * 1024;

/// The most bytes of stored prompts the inboxes of every session hold together.
pub const INBOX_STORE_BYTES: usize = 256 * 1024 * 1024;

/// Where [`Store::inbox_enqueue`] puts a new item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Last.
    End,
    /// At this place (past the end: last); later items move down.
    At(u32),
    /// Just before the first queued follow-up (last if there is none), so it is the next
    /// follow-up to run, after any placed there before it.
    Next,
}

/// An item to add to a session's inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct NewInboxItem {
    /// The opaque prompt.
    pub prompt: Value,
    /// Where it goes.
    pub placement: Placement,
    /// What it is for.
    pub intent: InboxIntent,
    /// Names this enqueue within the session, so a retry finds the item it made.
    pub idempotency_key: Option<String>,
    /// The most items the inbox may hold once this one is in.
    pub capacity: usize,
    /// The most bytes of stored prompts the session's inbox may hold once this one is in.
    pub session_bytes: usize,
    /// The most bytes of stored prompts every session's inbox may hold together once this
    /// one is in.
    pub store_bytes: usize,
}

impl NewInboxItem {
    /// A follow-up appended to the queue, without a key, within [`INBOX_CAPACITY`],
    /// [`INBOX_SESSION_BYTES`] and [`INBOX_STORE_BYTES`].
    pub fn followup(prompt: Value) -> Self {
        Self {
            prompt,
            placement: Placement::End,
            intent: InboxIntent::Followup,
            idempotency_key: None,
            capacity: INBOX_CAPACITY,
            session_bytes: INBOX_SESSION_BYTES,
            store_bytes: INBOX_STORE_BYTES,
        }
    }
}

/// What [`Store::inbox_enqueue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The new item, or the one an earlier enqueue with the same key made.
    pub item: InboxItem,
    /// Whether the key named an existing item, so nothing was added.
    pub idempotent: bool,
    /// Whether the inbox is paused.
    pub paused: bool,
}

/// The item an earlier enqueue with `key` made in this session.
fn keyed(conn: &Connection, session_id: &str, key: &str) -> Result<Option<InboxItem>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM inbox_items WHERE session_id = ?1 AND idempotency_key = ?2"
    ))?;
    let mut rows = stmt.query(params![session_id, key])?;
    rows.next()?.map(item_from_row).transpose()
}

/// The bytes of the stored prompts of `session_id`'s inbox, or of every inbox.
fn stored_bytes(conn: &Connection, session_id: Option<&str>) -> Result<usize, StoreError> {
    let bytes: i64 = match session_id {
        Some(id) => conn.query_row(
            "SELECT COALESCE(SUM(LENGTH(prompt)), 0) FROM inbox_items WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )?,
        None => {
            conn.query_row("SELECT COALESCE(SUM(LENGTH(prompt)), 0) FROM inbox_items", [], |row| row.get(0))?
        }
    };
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// Whether the inbox of `session_id` can take `adding` more bytes: within its own budget
/// and within every inbox's together (`new`'s); `Some` names the budget it would pass.
fn bytes_fit(
    conn: &Connection,
    session_id: &str,
    new: &NewInboxItem,
    adding: usize,
) -> Result<Option<StoreError>, StoreError> {
    let limit = new.session_bytes;
    if stored_bytes(conn, Some(session_id))?.saturating_add(adding) > limit {
        return Ok(Some(StoreError::InboxBytesFull { limit, all_sessions: false }));
    }
    let limit = new.store_bytes;
    if stored_bytes(conn, None)?.saturating_add(adding) > limit {
        return Ok(Some(StoreError::InboxBytesFull { limit, all_sessions: true }));
    }
    Ok(None)
}

/// Removes the oldest finished items (done or cancelled: failed ones wait for a retry)
/// until the session holds fewer than `new`'s capacity of items and room for `adding` more
/// bytes in its byte budgets; fails when that is not enough.
fn make_room(
    conn: &Connection,
    session_id: &str,
    new: &NewInboxItem,
    adding: usize,
) -> Result<(), StoreError> {
    let capacity = new.capacity;
    let capacity_i64 = i64::try_from(capacity).unwrap_or(i64::MAX);
    loop {
        let full = if len(conn, session_id)? >= capacity_i64 {
            Some(StoreError::InboxFull { capacity })
        } else {
            bytes_fit(conn, session_id, new, adding)?
        };
        let Some(full) = full else { return Ok(()) };
        let oldest: Option<(String, i64)> = conn
            .query_row(
                "SELECT id, position FROM inbox_items WHERE session_id = ?1 AND status IN (?2, ?3)
                 ORDER BY updated_at, position LIMIT 1",
                params![session_id, InboxStatus::Done.as_str(), InboxStatus::Cancelled.as_str()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((id, position)) = oldest else {
            return Err(full);
        };
        conn.execute("DELETE FROM inbox_items WHERE id = ?1", [&id])?;
        shift(conn, session_id, position + 1, -1)?;
    }
}

/// Where `placement` puts a new item in a queue of `end` items.
fn place(conn: &Connection, session_id: &str, placement: Placement, end: i64) -> Result<i64, StoreError> {
    Ok(match placement {
        Placement::End => end,
        Placement::At(position) => i64::from(position).min(end),
        Placement::Next => conn
            .query_row(
                "SELECT MIN(position) FROM inbox_items WHERE session_id = ?1 AND status = ?2 AND intent = ?3",
                params![session_id, InboxStatus::Queued.as_str(), InboxIntent::Followup.as_str()],
                |row| row.get::<_, Option<i64>>(0),
            )?
            .unwrap_or(end),
    })
}

impl Store {
    /// Adds an item to a session's queue with status [`InboxStatus::Queued`], where its
    /// placement says, first making room if the inbox is full ([`StoreError::InboxFull`]
    /// when it cannot). When its key names an item already there, that item is returned
    /// and nothing changes. An unknown session is [`StoreError::NotFound`].
    pub async fn inbox_enqueue(&self, session_id: &str, new: NewInboxItem) -> Result<Enqueued, StoreError> {
        let session_id = session_id.to_owned();
        let prompt = encode_json(&new.prompt)?;
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(paused) = paused(&tx, &session_id)? else {
                return Err(sessions::not_found(&session_id));
            };
            if let Some(key) = &new.idempotency_key
                && let Some(item) = keyed(&tx, &session_id, key)?
            {
                return Ok(Enqueued { item, idempotent: true, paused });
            }
            make_room(&tx, &session_id, &new, prompt.len())?;
            let end = len(&tx, &session_id)?;
            let position = place(&tx, &session_id, new.placement, end)?;
            shift(&tx, &session_id, position, 1)?;
            let id = uuid::Uuid::new_v4().to_string();
            tx.execute(
                "INSERT INTO inbox_items
                     (id, session_id, position, prompt, status, error, created_at, updated_at, intent, idempotency_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?6, ?7, ?8)",
                params![
                    id,
                    session_id,
                    position,
                    prompt,
                    InboxStatus::Queued.as_str(),
                    now(),
                    new.intent.as_str(),
                    new.idempotency_key
                ],
            )?;
            let item = require(&tx, &id)?;
            tx.commit()?;
            Ok(Enqueued { item, idempotent: false, paused })
        })
        .await
    }
}
