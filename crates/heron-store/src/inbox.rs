//! The inbox: a durable, ordered per-session queue of prompts waiting to run, and the
//! steering accepted for a session's running turn.
//!
//! Positions within a session are dense, `0..n`, after every operation: inserting at a
//! position shifts later items down, deleting or moving closes the gap. Each operation runs in
//! one `BEGIN IMMEDIATE` transaction, so concurrent writers never leave holes or duplicates.
//! The store itself only moves items between [`InboxStatus::Queued`], `Running` and
//! `Failed` (claiming the next item, failing interrupted ones); the caller sets the rest. A change
//! that must only apply in one status (`only_if`) is checked in the same transaction, so an
//! item claimed by a turn can no longer be edited as if it were still waiting.
//!
//! An item's [`InboxIntent`] says what it is for: a follow-up runs as a turn of its own; a
//! queued steer waits for the running turn to apply it ([`Store::inbox_apply_steer`]) and
//! is never claimed as a turn. An idempotency key names one enqueue per session: a second
//! enqueue with it finds the first item instead of adding one. A session's inbox holds at
//! most [`NewInboxItem::capacity`] items; a full one makes room by removing its oldest
//! finished item, or refuses the new one.
//!
//! A session's `inbox_paused` and `inbox_recovered` flags live on its row: a paused inbox
//! yields nothing to [`Store::inbox_claim_next`].

mod enqueue;
mod steers;

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde_json::Value;

use super::{Store, StoreError, decode_json, encode_json, now, sessions};

pub use enqueue::{
    Enqueued, INBOX_CAPACITY, INBOX_SESSION_BYTES, INBOX_STORE_BYTES, NewInboxItem, Placement,
};
pub use steers::Recovery;

/// Where an inbox item stands; stored as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxStatus {
    /// Waiting to run: what [`Store::inbox_enqueue`] gives a new item.
    Queued,
    /// Its prompt is the session's current turn.
    Running,
    /// Its turn ended normally.
    Done,
    /// Its turn failed or was interrupted; it may be retried.
    Failed,
    /// Its turn was cancelled.
    Cancelled,
}

impl InboxStatus {
    /// Every status.
    pub const ALL: [InboxStatus; 5] = [
        InboxStatus::Queued,
        InboxStatus::Running,
        InboxStatus::Done,
        InboxStatus::Failed,
        InboxStatus::Cancelled,
    ];

    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            InboxStatus::Queued => "queued",
            InboxStatus::Running => "running",
            InboxStatus::Done => "done",
            InboxStatus::Failed => "failed",
            InboxStatus::Cancelled => "cancelled",
        }
    }

    /// The status a stored name names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for InboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an inbox item is for; stored as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxIntent {
    /// A prompt that runs as a turn of its own.
    Followup,
    /// Guidance for the session's running turn; never claimed as a turn.
    Steer,
}

impl InboxIntent {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            InboxIntent::Followup => "followup",
            InboxIntent::Steer => "steer",
        }
    }

    /// The intent a stored name names.
    pub fn from_name(name: &str) -> Option<Self> {
        [InboxIntent::Followup, InboxIntent::Steer].into_iter().find(|i| i.as_str() == name)
    }
}

/// A session's whole inbox, read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxState {
    /// Every item, in position order.
    pub items: Vec<InboxItem>,
    /// Whether queued items are held back.
    pub paused: bool,
    /// Whether the inbox was found with work a stopped process left unfinished, and has
    /// not been resumed since.
    pub recovered: bool,
}

/// How many items of a session's inbox stand where, read without their prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxTally {
    /// The number of items of each status and intent present.
    pub counts: Vec<(InboxStatus, InboxIntent, u32)>,
    /// Whether queued items are held back.
    pub paused: bool,
}

/// One queued prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxItem {
    /// Unique id (a UUID).
    pub id: String,
    /// The session whose queue holds it.
    pub session_id: String,
    /// Place in the queue, from 0.
    pub position: u32,
    /// The opaque prompt.
    pub prompt: Value,
    /// Where it stands.
    pub status: InboxStatus,
    /// What it is for.
    pub intent: InboxIntent,
    /// The key its enqueue was given, if any.
    pub idempotency_key: Option<String>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When it was enqueued (RFC 3339 UTC, milliseconds).
    pub created_at: String,
    /// When it last changed (RFC 3339 UTC, milliseconds).
    pub updated_at: String,
}

const COLUMNS: &str =
    "id, session_id, position, prompt, status, error, created_at, updated_at, intent, idempotency_key";

fn item_from_row(row: &Row<'_>) -> Result<InboxItem, StoreError> {
    let id: String = row.get(0)?;
    let position: i64 = row.get(2)?;
    let prompt: String = row.get(3)?;
    let status: String = row.get(4)?;
    let status = InboxStatus::from_name(&status)
        .ok_or_else(|| StoreError::Corrupt(format!("inbox item {id:?} has status {status:?}")))?;
    let intent: String = row.get(8)?;
    let intent = InboxIntent::from_name(&intent)
        .ok_or_else(|| StoreError::Corrupt(format!("inbox item {id:?} has intent {intent:?}")))?;
    Ok(InboxItem {
        intent,
        idempotency_key: row.get(9)?,
        position: u32::try_from(position)
            .map_err(|_| StoreError::Corrupt(format!("inbox item {id:?} has position {position}")))?,
        prompt: decode_json(&prompt, || format!("prompt of inbox item {id:?}"))?,
        session_id: row.get(1)?,
        status,
        error: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        id,
    })
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound { entity: "inbox item", id: id.to_owned() }
}

fn get(conn: &Connection, id: &str) -> Result<Option<InboxItem>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM inbox_items WHERE id = ?1"))?;
    let mut rows = stmt.query([id])?;
    rows.next()?.map(item_from_row).transpose()
}

fn require(conn: &Connection, id: &str) -> Result<InboxItem, StoreError> {
    get(conn, id)?.ok_or_else(|| not_found(id))
}

/// Reads an item that must be in status `only_if` (when given).
fn require_in(conn: &Connection, id: &str, only_if: Option<InboxStatus>) -> Result<InboxItem, StoreError> {
    let item = require(conn, id)?;
    match only_if {
        Some(wanted) if item.status != wanted => {
            Err(StoreError::WrongStatus { id: item.id, status: item.status })
        }
        _ => Ok(item),
    }
}

/// Whether a session's inbox is paused; `None` for an unknown session.
fn paused(conn: &Connection, session_id: &str) -> Result<Option<bool>, StoreError> {
    Ok(flags(conn, session_id)?.map(|(paused, _)| paused))
}

/// A session's inbox flags, `(paused, recovered)`; `None` for an unknown session.
fn flags(conn: &Connection, session_id: &str) -> Result<Option<(bool, bool)>, StoreError> {
    Ok(conn
        .query_row("SELECT inbox_paused, inbox_recovered FROM sessions WHERE id = ?1", [session_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?)
}

fn list(conn: &Connection, session_id: &str) -> Result<Vec<InboxItem>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM inbox_items WHERE session_id = ?1 ORDER BY position, created_at, id"
    ))?;
    let mut rows = stmt.query([session_id])?;
    let mut items = Vec::new();
    while let Some(row) = rows.next()? {
        items.push(item_from_row(row)?);
    }
    Ok(items)
}

fn len(conn: &Connection, session_id: &str) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT COUNT(*) FROM inbox_items WHERE session_id = ?1", [session_id], |row| {
        row.get(0)
    })?)
}

/// Shifts the items at `from..` of a session by `delta` positions.
fn shift(conn: &Connection, session_id: &str, from: i64, delta: i64) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE inbox_items SET position = position + ?3 WHERE session_id = ?1 AND position >= ?2",
        params![session_id, from, delta],
    )?;
    Ok(())
}

impl Store {
    /// A session's queue in position order (empty for an unknown session).
    pub async fn inbox_list(&self, session_id: &str) -> Result<Vec<InboxItem>, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| list(conn, &session_id)).await
    }

    /// Reads one item, or `None` when there is no such item.
    pub async fn inbox_get(&self, id: &str) -> Result<Option<InboxItem>, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| get(conn, &id)).await
    }

    /// Replaces an item's prompt. An unknown id is [`StoreError::NotFound`]; an item not in
    /// status `only_if` (when given) is [`StoreError::WrongStatus`] and left alone.
    pub async fn inbox_update_prompt(
        &self,
        id: &str,
        prompt: Value,
        only_if: Option<InboxStatus>,
    ) -> Result<InboxItem, StoreError> {
        let id = id.to_owned();
        let prompt = encode_json(&prompt)?;
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            require_in(&tx, &id, only_if)?;
            tx.execute(
                "UPDATE inbox_items SET prompt = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, prompt, now()],
            )?;
            let item = require(&tx, &id)?;
            tx.commit()?;
            Ok(item)
        })
        .await
    }

    /// Sets an item's status and error (`None` clears it). An unknown id is
    /// [`StoreError::NotFound`]; an item not in status `only_if` (when given) is
    /// [`StoreError::WrongStatus`] and left alone.
    pub async fn inbox_set_status(
        &self,
        id: &str,
        status: InboxStatus,
        error: Option<&str>,
        only_if: Option<InboxStatus>,
    ) -> Result<InboxItem, StoreError> {
        let (id, error) = (id.to_owned(), error.map(str::to_owned));
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            require_in(&tx, &id, only_if)?;
            tx.execute(
                "UPDATE inbox_items SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, status.as_str(), error, now()],
            )?;
            let item = require(&tx, &id)?;
            tx.commit()?;
            Ok(item)
        })
        .await
    }

    /// Removes an item and closes the gap. Returns whether it existed.
    pub async fn inbox_delete(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(item) = get(&tx, &id)? else {
                return Ok(false);
            };
            tx.execute("DELETE FROM inbox_items WHERE id = ?1", [&id])?;
            shift(&tx, &item.session_id, i64::from(item.position) + 1, -1)?;
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    /// Moves an item to `to_position` (clamped to the last place), renumbers the queue
    /// densely and returns it. An unknown id is [`StoreError::NotFound`]; an item not in
    /// status `only_if` (when given) is [`StoreError::WrongStatus`] and stays where it is.
    pub async fn inbox_move(
        &self,
        id: &str,
        to_position: u32,
        only_if: Option<InboxStatus>,
    ) -> Result<Vec<InboxItem>, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let item = require_in(&tx, &id, only_if)?;
            let mut order: Vec<String> = list(&tx, &item.session_id)?
                .into_iter()
                .map(|it| it.id)
                .filter(|other| *other != id)
                .collect();
            let to = usize::try_from(to_position).unwrap_or(usize::MAX).min(order.len());
            order.insert(to, id);
            let now = now();
            {
                let mut renumber = tx.prepare_cached(
                    "UPDATE inbox_items SET position = ?2,
                         updated_at = CASE WHEN position = ?2 THEN updated_at ELSE ?3 END
                     WHERE id = ?1",
                )?;
                for (position, item_id) in (0_i64..).zip(&order) {
                    renumber.execute(params![item_id, position, now])?;
                }
            }
            let items = list(&tx, &item.session_id)?;
            tx.commit()?;
            Ok(items)
        })
        .await
    }

    /// The first queued follow-up in queue order, if any: the item that runs next.
    pub async fn inbox_next_queued(&self, session_id: &str) -> Result<Option<InboxItem>, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM inbox_items WHERE session_id = ?1 AND status = ?2 AND intent = ?3
                 ORDER BY position LIMIT 1"
            ))?;
            let mut rows = stmt.query(params![
                session_id,
                InboxStatus::Queued.as_str(),
                InboxIntent::Followup.as_str()
            ])?;
            rows.next()?.map(item_from_row).transpose()
        })
        .await
    }

    /// Takes the first queued follow-up in queue order and marks it [`InboxStatus::Running`],
    /// in one transaction, so two runners never take the same item (queued steers are the
    /// running turn's, never a turn of their own). Yields nothing while the inbox is paused.
    /// An unknown session is [`StoreError::NotFound`].
    pub async fn inbox_claim_next(&self, session_id: &str) -> Result<Option<InboxItem>, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            match paused(&tx, &session_id)? {
                None => return Err(sessions::not_found(&session_id)),
                Some(true) => return Ok(None),
                Some(false) => {}
            }
            let next: Option<String> = tx
                .query_row(
                    "SELECT id FROM inbox_items WHERE session_id = ?1 AND status = ?2 AND intent = ?3
                     ORDER BY position LIMIT 1",
                    params![session_id, InboxStatus::Queued.as_str(), InboxIntent::Followup.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            let Some(id) = next else { return Ok(None) };
            tx.execute(
                "UPDATE inbox_items SET status = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, InboxStatus::Running.as_str(), now()],
            )?;
            let item = require(&tx, &id)?;
            tx.commit()?;
            Ok(Some(item))
        })
        .await
    }

    /// A session's items and flags, read together. An unknown session is
    /// [`StoreError::NotFound`].
    pub async fn inbox_state(&self, session_id: &str) -> Result<InboxState, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let (paused, recovered) =
                flags(&tx, &session_id)?.ok_or_else(|| sessions::not_found(&session_id))?;
            let items = list(&tx, &session_id)?;
            tx.commit()?;
            Ok(InboxState { items, paused, recovered })
        })
        .await
    }

    /// How many of a session's items stand where, and its paused flag, read together
    /// without reading any prompt. An unknown session is [`StoreError::NotFound`].
    pub async fn inbox_tally(&self, session_id: &str) -> Result<InboxTally, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            let paused = paused(&tx, &session_id)?.ok_or_else(|| sessions::not_found(&session_id))?;
            let mut stmt = tx.prepare_cached(
                "SELECT status, intent, COUNT(*) FROM inbox_items WHERE session_id = ?1 GROUP BY status, intent",
            )?;
            let mut rows = stmt.query([&session_id])?;
            let mut counts = Vec::new();
            while let Some(row) = rows.next()? {
                let (status, intent): (String, String) = (row.get(0)?, row.get(1)?);
                let count: i64 = row.get(2)?;
                let corrupt = || StoreError::Corrupt(format!("an inbox item has status {status:?}, intent {intent:?}"));
                counts.push((
                    InboxStatus::from_name(&status).ok_or_else(corrupt)?,
                    InboxIntent::from_name(&intent).ok_or_else(corrupt)?,
                    u32::try_from(count).unwrap_or(u32::MAX),
                ));
            }
            drop(rows);
            drop(stmt);
            tx.commit()?;
            Ok(InboxTally { counts, paused })
        })
        .await
    }

    /// Pauses or resumes a session's inbox; resuming also clears its `recovered` flag (the
    /// user has seen what was left). An unknown session is [`StoreError::NotFound`].
    pub async fn inbox_set_paused(&self, session_id: &str, paused: bool) -> Result<(), StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let changed = conn.execute(
                "UPDATE sessions SET inbox_paused = ?2,
                     inbox_recovered = CASE WHEN ?2 THEN inbox_recovered ELSE 0 END
                 WHERE id = ?1",
                params![session_id, paused],
            )?;
            if changed == 0 {
                return Err(sessions::not_found(&session_id));
            }
            Ok(())
        })
        .await
    }
}
