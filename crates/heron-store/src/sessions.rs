//! Session records: create, read, update, delete, and keyset-paginated listing.
//!
//! Listing orders by `updated_at` then `id`, both descending, and pages by keyset rather than
//! offset: a cursor names the last row shown, so sessions created between pages never shift or
//! repeat rows. The `cwd` filter is part of the SQL, applied before the page is cut, and the
//! cursor records the filter it was issued for.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde_json::Value;

use super::{Store, StoreError, decode_json, encode_json, now};

/// The largest page [`Store::list_sessions`] returns, whatever the caller asks for.
pub const MAX_LIST_LIMIT: usize = 500;

/// Tags cursors so one from another query kind or build is recognised as foreign.
const CURSOR_TAG: &str = "sessions.v1";

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// Unique id, minted by the store unless the creator chose one.
    pub id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// Extra workspace roots, in order.
    pub additional_directories: Vec<String>,
    /// Human-readable title, if any.
    pub title: Option<String>,
    /// When the session was created (RFC 3339 UTC, milliseconds).
    pub created_at: String,
    /// When the session or its event log last changed (RFC 3339 UTC, milliseconds).
    pub updated_at: String,
    /// Opaque settings owned by the session module (model, mode, posture...).
    pub settings: Value,
    /// The session this one was forked from.
    pub parent_id: Option<String>,
    /// Opaque goal owned by the session module; `None` when the session has none.
    pub goal: Option<Value>,
    /// Opaque last usage report owned by the session module; `None` before the first.
    pub usage: Option<Value>,
}

/// What a new session starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// The id to use; `None` mints a fresh UUID.
    pub id: Option<String>,
    /// Absolute working directory.
    pub cwd: String,
    /// Extra workspace roots, in order.
    pub additional_directories: Vec<String>,
    /// Initial title.
    pub title: Option<String>,
    /// Initial opaque settings.
    pub settings: Value,
}

impl NewSession {
    /// A session in `cwd` with a minted id, no title, no extra roots and empty settings.
    pub fn in_dir(cwd: impl Into<String>) -> NewSession {
        NewSession {
            id: None,
            cwd: cwd.into(),
            additional_directories: Vec::new(),
            title: None,
            settings: Value::Object(Default::default()),
        }
    }
}

/// Fields to change on a session; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPatch {
    /// `Some(None)` clears the title.
    pub title: Option<Option<String>>,
    /// Replaces the settings wholesale.
    pub settings: Option<Value>,
    /// Replaces the working directory.
    pub cwd: Option<String>,
    /// Replaces the extra roots wholesale.
    pub additional_directories: Option<Vec<String>>,
    /// `Some(None)` clears the goal.
    pub goal: Option<Option<Value>>,
    /// `Some(None)` clears the usage report.
    pub usage: Option<Option<Value>>,
}

/// A request for one page of sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only sessions whose `cwd` equals this exactly.
    pub cwd: Option<String>,
    /// The `next_cursor` of the previous page; `None` for the first page.
    pub cursor: Option<String>,
    /// Page size, clamped to `1..=MAX_LIST_LIMIT`.
    pub limit: usize,
}

/// One page of sessions, most recently updated first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The sessions on this page.
    pub sessions: Vec<SessionRecord>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// The position after which a page starts.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Cursor {
    tag: String,
    cwd: Option<String>,
    updated_at: String,
    id: String,
}

impl Cursor {
    fn encode(&self) -> Result<String, StoreError> {
        Ok(URL_SAFE_NO_PAD.encode(encode_json(self)?))
    }

    /// Decodes `text`, insisting it was issued for a query with the same `cwd` filter.
    fn decode(text: &str, cwd: Option<&str>) -> Result<Cursor, StoreError> {
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| StoreError::BadCursor)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
        let well_formed = cursor.tag == CURSOR_TAG
            && cursor.cwd.as_deref() == cwd
            && humantime::parse_rfc3339(&cursor.updated_at).is_ok();
        if well_formed { Ok(cursor) } else { Err(StoreError::BadCursor) }
    }
}

const COLUMNS: &str =
    "id, cwd, additional_directories, title, created_at, updated_at, settings, parent_id, goal, usage";

/// Reads a row selected with [`COLUMNS`]; JSON columns are decoded by [`RawSession::decode`].
struct RawSession {
    id: String,
    cwd: String,
    additional_directories: String,
    title: Option<String>,
    created_at: String,
    updated_at: String,
    settings: String,
    parent_id: Option<String>,
    goal: Option<String>,
    usage: Option<String>,
}

impl RawSession {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<RawSession> {
        Ok(RawSession {
            id: row.get(0)?,
            cwd: row.get(1)?,
            additional_directories: row.get(2)?,
            title: row.get(3)?,
            created_at: row.get(4)?,
            updated_at: row.get(5)?,
            settings: row.get(6)?,
            parent_id: row.get(7)?,
            goal: row.get(8)?,
            usage: row.get(9)?,
        })
    }

    fn decode(self) -> Result<SessionRecord, StoreError> {
        let additional_directories = decode_json(&self.additional_directories, || {
            format!("additional_directories of session {:?}", self.id)
        })?;
        let settings = decode_json(&self.settings, || format!("settings of session {:?}", self.id))?;
        let goal = self
            .goal
            .as_deref()
            .map(|text| decode_json(text, || format!("goal of session {:?}", self.id)))
            .transpose()?;
        let usage = self
            .usage
            .as_deref()
            .map(|text| decode_json(text, || format!("usage of session {:?}", self.id)))
            .transpose()?;
        Ok(SessionRecord {
            id: self.id,
            cwd: self.cwd,
            additional_directories,
            title: self.title,
            created_at: self.created_at,
            updated_at: self.updated_at,
            settings,
            parent_id: self.parent_id,
            goal,
            usage,
        })
    }
}

/// Reads one session by id.
pub(super) fn get(conn: &Connection, id: &str) -> Result<Option<SessionRecord>, StoreError> {
    let raw = conn
        .query_row(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"), [id], RawSession::from_row)
        .optional()?;
    raw.map(RawSession::decode).transpose()
}

/// Reads one session by id, failing with [`StoreError::NotFound`] when it is missing.
pub(super) fn require(conn: &Connection, id: &str) -> Result<SessionRecord, StoreError> {
    get(conn, id)?.ok_or_else(|| not_found(id))
}

pub(super) fn not_found(id: &str) -> StoreError {
    StoreError::NotFound { entity: "session", id: id.to_owned() }
}

/// Inserts a session inside the caller's transaction.
pub(super) fn insert(
    conn: &Connection,
    new: &NewSession,
    parent_id: Option<&str>,
) -> Result<SessionRecord, StoreError> {
    let id = new.id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let at = now();
    let inserted = conn.execute(
        "INSERT INTO sessions (id, cwd, additional_directories, title, settings, parent_id, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
         ON CONFLICT (id) DO NOTHING",
        params![
            id,
            new.cwd,
            encode_json(&new.additional_directories)?,
            new.title,
            encode_json(&new.settings)?,
            parent_id,
            at
        ],
    )?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists(id));
    }
    require(conn, &id)
}

/// A patch field that may clear its column: whether to set it, and the encoded value.
fn optional_json(field: Option<&Option<Value>>) -> Result<(bool, Option<String>), StoreError> {
    match field {
        Some(value) => Ok((true, value.as_ref().map(encode_json).transpose()?)),
        None => Ok((false, None)),
    }
}

/// Moves a session's `updated_at` to now, never backwards (the clock may step back).
pub(super) fn touch(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    let changed = conn
        .execute("UPDATE sessions SET updated_at = MAX(updated_at, ?2) WHERE id = ?1", params![id, now()])?;
    Ok(changed > 0)
}

impl Store {
    /// Creates a session. A chosen id that is taken fails with [`StoreError::AlreadyExists`].
    pub async fn create_session(&self, new: NewSession) -> Result<SessionRecord, StoreError> {
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let record = insert(&tx, &new, None)?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    /// Creates several sessions in one transaction (an import, or seeding a large store) and
    /// returns their ids in order. If any fails, none is created.
    pub async fn create_sessions(&self, news: Vec<NewSession>) -> Result<Vec<String>, StoreError> {
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let ids = news
                .iter()
                .map(|new| insert(&tx, new, None).map(|record| record.id))
                .collect::<Result<Vec<_>, _>>()?;
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    /// Reads a session, or `None` when there is no such session.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| get(conn, &id)).await
    }

    /// Applies `patch` and bumps `updated_at`. An unknown id is [`StoreError::NotFound`].
    pub async fn update_session(&self, id: &str, patch: SessionPatch) -> Result<SessionRecord, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| {
            let additional_directories =
                patch.additional_directories.as_ref().map(encode_json).transpose()?;
            let settings = patch.settings.as_ref().map(encode_json).transpose()?;
            let (set_title, title) = match patch.title {
                Some(title) => (true, title),
                None => (false, None),
            };
            let (set_goal, goal) = optional_json(patch.goal.as_ref())?;
            let (set_usage, usage) = optional_json(patch.usage.as_ref())?;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let changed = tx.execute(
                "UPDATE sessions SET
                     title = CASE WHEN ?2 THEN ?3 ELSE title END,
                     settings = COALESCE(?4, settings),
                     cwd = COALESCE(?5, cwd),
                     additional_directories = COALESCE(?6, additional_directories),
                     goal = CASE WHEN ?8 THEN ?9 ELSE goal END,
                     usage = CASE WHEN ?10 THEN ?11 ELSE usage END,
                     updated_at = MAX(updated_at, ?7)
                 WHERE id = ?1",
                params![
                    id,
                    set_title,
                    title,
                    settings,
                    patch.cwd,
                    additional_directories,
                    now(),
                    set_goal,
                    goal,
                    set_usage,
                    usage
                ],
            )?;
            if changed == 0 {
                return Err(not_found(&id));
            }
            let record = require(&tx, &id)?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    /// Deletes a session with its events and inbox. Returns whether it existed; deleting an
    /// unknown id succeeds.
    pub async fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Explicit deletes keep the cascade correct even on a connection without foreign keys.
            tx.execute("DELETE FROM events WHERE session_id = ?1", [&id])?;
            tx.execute("DELETE FROM inbox_items WHERE session_id = ?1", [&id])?;
            let deleted = tx.execute("DELETE FROM sessions WHERE id = ?1", [&id])?;
            tx.commit()?;
            Ok(deleted > 0)
        })
        .await
    }

    /// Lists one page of sessions, most recently updated first.
    ///
    /// A session updated while a client pages may move ahead of the cursor and be missed or
    /// shown twice; sessions created meanwhile never disturb the pages still to come.
    pub async fn list_sessions(&self, query: ListQuery) -> Result<Page, StoreError> {
        let limit = query.limit.clamp(1, MAX_LIST_LIMIT);
        let after =
            query.cursor.as_deref().map(|text| Cursor::decode(text, query.cwd.as_deref())).transpose()?;
        self.run(move |conn| {
            let mut sql = format!("SELECT {COLUMNS} FROM sessions WHERE 1 = 1");
            if query.cwd.is_some() {
                sql.push_str(" AND cwd = :cwd");
            }
            if after.is_some() {
                sql.push_str(" AND (updated_at, id) < (:updated_at, :id)");
            }
            sql.push_str(" ORDER BY updated_at DESC, id DESC LIMIT :limit");
            let mut stmt = conn.prepare_cached(&sql)?;
            // One row beyond the page tells whether another page follows.
            let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
            let mut named: Vec<(&str, &dyn rusqlite::ToSql)> = vec![(":limit", &fetch)];
            if let Some(cwd) = &query.cwd {
                named.push((":cwd", cwd));
            }
            if let Some(cursor) = &after {
                named.push((":updated_at", &cursor.updated_at));
                named.push((":id", &cursor.id));
            }
            let mut sessions = stmt
                .query_map(named.as_slice(), RawSession::from_row)?
                .map(|raw| raw.map_err(StoreError::from).and_then(RawSession::decode))
                .collect::<Result<Vec<_>, _>>()?;
            let more = sessions.len() > limit;
            sessions.truncate(limit);
            let next_cursor = match sessions.last() {
                Some(last) if more => Some(
                    Cursor {
                        tag: CURSOR_TAG.to_owned(),
                        cwd: query.cwd.clone(),
                        updated_at: last.updated_at.clone(),
                        id: last.id.clone(),
                    }
                    .encode()?,
                ),
                _ => None,
            };
            Ok(Page { sessions, next_cursor })
        })
        .await
    }
}
