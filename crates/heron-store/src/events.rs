//! The per-session append-only event log, and forking a session with its log.
//!
//! Sequence numbers run 1, 2, 3... per session with no gaps. They are allocated inside the
//! appending `BEGIN IMMEDIATE` transaction, so appends from several connections or processes
//! interleave without losing or repeating a number. Every append bumps the session's
//! `updated_at`.
//!
//! A long log is read in bounded pages ([`Store::decode_events`]): each row is decoded from
//! SQLite's own buffer on the blocking thread, so a page costs its decoded events and no
//! second copy of their text.

use std::borrow::Borrow;

use rusqlite::{Connection, Row, TransactionBehavior, params};
use serde_json::Value;

use super::sessions::{self, NewSession, SessionRecord};
use super::{Store, StoreError, decode_json, encode_json, now};

/// One entry of a session's event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// Position in the session's log, starting at 1.
    pub seq: u64,
    /// What kind of event this is; defined by the session module.
    pub kind: String,
    /// The opaque event body.
    pub payload: Value,
    /// When it was appended (RFC 3339 UTC, milliseconds).
    pub at: String,
}

/// The largest page [`Store::events`] returns, whatever the caller asks for.
pub const MAX_EVENTS_LIMIT: usize = 10_000;

/// How much one page of [`Store::decode_events`] reads: at most `rows` rows, and no more
/// rows once their payloads reach `bytes` (a page always holds at least one row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageBudget {
    /// The most rows, clamped to `1..=MAX_EVENTS_LIMIT`.
    pub rows: usize,
    /// The payload bytes after which the page ends.
    pub bytes: usize,
}

impl Default for PageBudget {
    /// 500 rows or 4 MiB: small next to a long history, large enough that a page's query
    /// and thread hop cost little per row.
    fn default() -> Self {
        PageBudget { rows: 500, bytes: 4 << 20 }
    }
}

/// How long a session's log is ([`Store::event_totals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventTotals {
    /// Its events.
    pub count: u64,
    /// The bytes of their payloads, as stored (JSON text).
    pub bytes: u64,
}

/// One page read by [`Store::decode_events`].
#[derive(Debug)]
pub struct DecodedPage<T> {
    /// Each row's seq and what the decoder made of its payload, in order. A payload that
    /// is JSON but not what the decoder wanted is its error here; one that is not JSON at
    /// all fails the whole read instead.
    pub rows: Vec<(u64, Result<T, serde_json::Error>)>,
    /// The seq to pass as `after_seq` for the next page; `None` when this page was the end.
    pub next_after: Option<u64>,
}

/// Appends encoded events inside the caller's transaction and returns their seqs.
pub(crate) fn append<K: AsRef<str>, P: AsRef<str>>(
    conn: &Connection,
    session_id: &str,
    events: &[(K, P)],
) -> Result<Vec<u64>, StoreError> {
    if events.is_empty() {
        // Nothing changes, so `updated_at` stays; the session must still exist.
        return sessions::require(conn, session_id).map(|_| Vec::new());
    }
    if !sessions::touch(conn, session_id)? {
        return Err(sessions::not_found(session_id));
    }
    let last: i64 = conn.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?1",
        [session_id],
        |row| row.get(0),
    )?;
    let at = now();
    let mut insert = conn.prepare_cached(INSERT_EVENT)?;
    let mut seqs = Vec::with_capacity(events.len());
    for (seq, (kind, payload)) in (last + 1..).zip(events) {
        let row = NewRow { session_id, seq, kind: kind.as_ref(), payload: payload.as_ref(), at: &at };
        if row.payload.len() >= BOUND_IN_PLACE {
            insert_in_place(conn, &row)?;
        } else {
            insert.execute(params![row.session_id, row.seq, row.kind, row.payload, row.at])?;
        }
        seqs.push(to_seq(seq)?);
    }
    Ok(seqs)
}

const INSERT_EVENT: &str =
    "INSERT INTO events (session_id, seq, kind, payload, at) VALUES (?1, ?2, ?3, ?4, ?5)";

/// Payloads from this size on are bound where they lie ([`insert_in_place`]).
const BOUND_IN_PLACE: usize = 64 * 1024;

/// One event row to insert.
struct NewRow<'a> {
    session_id: &'a str,
    seq: i64,
    kind: &'a str,
    payload: &'a str,
    at: &'a str,
}

/// Inserts `row` with its payload bound where it lies (`SQLITE_STATIC`): rusqlite binds
/// text `SQLITE_TRANSIENT`, a copy as large as the payload made before SQLite builds the
/// record (a long message is stored in pieces of 1 MiB, each copied once more that way).
/// The statement is prepared, run and finalized here, so the borrowed text outlives every
/// use SQLite makes of it.
fn insert_in_place(conn: &Connection, row: &NewRow<'_>) -> Result<(), StoreError> {
    use rusqlite::ffi;
    // SAFETY: the handle is the connection's own, used on this thread only while `conn` is
    // borrowed, and never closed here.
    let db = unsafe { conn.handle() };
    let failed = |code: std::ffi::c_int| {
        // SAFETY: `db` is open; the message is copied before anything else runs on it.
        let message = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(db)) };
        StoreError::from(rusqlite::Error::SqliteFailure(
            ffi::Error::new(code),
            Some(message.to_string_lossy().into_owned()),
        ))
    };
    let mut stmt = std::ptr::null_mut();
    let sql = std::ffi::CString::new(INSERT_EVENT).map_err(|e| StoreError::Sqlite(e.to_string()))?;
    // SAFETY: `db` is open, `sql` NUL-terminated, `stmt` a valid out pointer.
    let code = unsafe { ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &raw mut stmt, std::ptr::null_mut()) };
    if code != ffi::SQLITE_OK {
        return Err(failed(code));
    }
    let texts = [(1, row.session_id), (3, row.kind), (4, row.payload), (5, row.at)];
    let mut code = ffi::SQLITE_OK;
    for (index, text) in texts {
        let Ok(len) = u64::try_from(text.len()) else { break };
        // SAFETY: `stmt` is the statement just prepared; `text` stays alive and unchanged
        // until it is finalized below, which `SQLITE_STATIC` requires.
        code = unsafe {
            ffi::sqlite3_bind_text64(
                stmt,
                index,
                text.as_ptr().cast(),
                len,
                ffi::SQLITE_STATIC(),
                ffi::SQLITE_UTF8 as u8,
            )
        };
        if code != ffi::SQLITE_OK {
            break;
        }
    }
    if code == ffi::SQLITE_OK {
        // SAFETY: as above.
        code = unsafe { ffi::sqlite3_bind_int64(stmt, 2, row.seq) };
    }
    if code == ffi::SQLITE_OK {
        // SAFETY: every parameter is bound; the step runs while the texts are alive.
        code = match unsafe { ffi::sqlite3_step(stmt) } {
            ffi::SQLITE_DONE => ffi::SQLITE_OK,
            other => other,
        };
    }
    let error = (code != ffi::SQLITE_OK).then(|| failed(code));
    // SAFETY: `stmt` was prepared above and is finalized exactly once, after its last use.
    unsafe { ffi::sqlite3_finalize(stmt) };
    error.map_or(Ok(()), Err)
}

fn to_seq(raw: i64) -> Result<u64, StoreError> {
    u64::try_from(raw).map_err(|_| StoreError::Corrupt(format!("negative event seq {raw}")))
}

fn event_from_row(session_id: &str, row: &Row<'_>) -> Result<EventRecord, StoreError> {
    let seq = to_seq(row.get(0)?)?;
    let payload: String = row.get(2)?;
    Ok(EventRecord {
        seq,
        kind: row.get(1)?,
        payload: decode_json(&payload, || format!("event {seq} of session {session_id:?}"))?,
        at: row.get(3)?,
    })
}

impl Store {
    /// Appends one event and returns its seq. It is committed when this returns.
    pub async fn append_event(
        &self,
        session_id: &str,
        kind: &str,
        payload: &Value,
    ) -> Result<u64, StoreError> {
        let seqs = self.append_events(session_id, [(kind, payload)]).await?;
        seqs.first().copied().ok_or_else(|| StoreError::Corrupt("an append assigned no seq".to_owned()))
    }

    /// Appends several events whose payloads are already JSON text (the caller encoded
    /// them, so a large event is not held twice; each must be one JSON value) in one
    /// transaction; their seqs, in order.
    pub async fn append_events_json(
        &self,
        session_id: &str,
        events: Vec<(String, std::sync::Arc<str>)>,
    ) -> Result<Vec<u64>, StoreError> {
        self.append_texts(session_id, events).await
    }

    /// Appends events whose payloads are JSON text in one transaction: the one body of
    /// every append.
    async fn append_texts<P: AsRef<str> + Send + 'static>(
        &self,
        session_id: &str,
        events: Vec<(String, P)>,
    ) -> Result<Vec<u64>, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let seqs = append(&tx, &session_id, &events)?;
            tx.commit()?;
            Ok(seqs)
        })
        .await
    }

    /// Appends several events in one transaction and returns their seqs, in order.
    pub async fn append_events<K, P>(
        &self,
        session_id: &str,
        events: impl IntoIterator<Item = (K, P)>,
    ) -> Result<Vec<u64>, StoreError>
    where
        K: AsRef<str>,
        P: Borrow<Value>,
    {
        // Encode on the caller's thread so the blocking task owns plain strings.
        let events = events
            .into_iter()
            .map(|(kind, payload)| Ok((kind.as_ref().to_owned(), encode_json(payload.borrow())?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.append_texts(session_id, events).await
    }

    /// Reads up to `limit` events with seq greater than `after_seq`, in order. Page through a
    /// long log by passing the last seq seen; an empty page means the end. `limit` is clamped to
    /// `1..=MAX_EVENTS_LIMIT`. An unknown session has no events.
    pub async fn events(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let session_id = session_id.to_owned();
        let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit.clamp(1, MAX_EVENTS_LIMIT)).unwrap_or(1);
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, kind, payload, at FROM events
                 WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let mut rows = stmt.query(params![session_id, after, limit])?;
            let mut events = Vec::new();
            while let Some(row) = rows.next()? {
                events.push(event_from_row(&session_id, row)?);
            }
            Ok(events)
        })
        .await
    }

    /// Reads one page of events with seq greater than `after_seq` and decodes each payload
    /// with `decode`, on the blocking thread, straight from the row's text. A payload that
    /// is not text, not UTF-8 or not JSON is [`StoreError::Corrupt`], naming its seq but
    /// none of its content. An unknown session has no events.
    pub async fn decode_events<T, F>(
        &self,
        session_id: &str,
        after_seq: u64,
        budget: PageBudget,
        mut decode: F,
    ) -> Result<DecodedPage<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&str) -> Result<T, serde_json::Error> + Send + 'static,
    {
        let session_id = session_id.to_owned();
        let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
        let rows = budget.rows.clamp(1, MAX_EVENTS_LIMIT);
        let limit = i64::try_from(rows).unwrap_or(1);
        self.run(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, payload FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let mut found = stmt.query(params![session_id, after, limit])?;
            let (mut page, mut bytes, mut last) = (Vec::new(), 0_usize, None);
            while let Some(row) = found.next()? {
                let seq = to_seq(row.get(0)?)?;
                let corrupt = |what: String| {
                    StoreError::Corrupt(format!("event {seq} of session {session_id:?} {what}"))
                };
                let text = row.get_ref(1)?.as_str().map_err(|err| match err {
                    rusqlite::types::FromSqlError::InvalidType => {
                        corrupt("has a payload that is not text".to_owned())
                    }
                    _ => corrupt("has a payload that is not UTF-8".to_owned()),
                })?;
                let decoded = decode(text);
                if let Err(err) = &decoded
                    && !err.is_data()
                {
                    return Err(corrupt(format!(
                        "is not valid JSON (line {}, column {})",
                        err.line(),
                        err.column()
                    )));
                }
                bytes = bytes.saturating_add(text.len());
                page.push((seq, decoded));
                last = Some(seq);
                if bytes >= budget.bytes {
                    break;
                }
            }
            // A short page is the last one; a full one may have more behind it.
            let full = page.len() == rows || bytes >= budget.bytes;
            Ok(DecodedPage { rows: page, next_after: last.filter(|_| full) })
        })
        .await
    }

    /// The number of events in a session's log (0 for an unknown session).
    pub async fn event_count(&self, session_id: &str) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let count: i64 =
                conn.query_row("SELECT COUNT(*) FROM events WHERE session_id = ?1", [session_id], |row| {
                    row.get(0)
                })?;
            to_seq(count)
        })
        .await
    }

    /// The number of events in a session's log and the bytes of their stored payloads
    /// (the JSON text of each row), both 0 for an unknown session. The bytes are what
    /// opening the session would read and hold: the total the schema's triggers keep on
    /// the session's row, so nothing walks the log's rows (the count comes from its index).
    pub async fn event_totals(&self, session_id: &str) -> Result<EventTotals, StoreError> {
        let session_id = session_id.to_owned();
        self.run(move |conn| {
            let (count, bytes): (i64, i64) = conn.query_row(
                "SELECT (SELECT COUNT(*) FROM events WHERE session_id = ?1),
                        COALESCE((SELECT history_bytes FROM sessions WHERE id = ?1), 0)",
                [session_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            Ok(EventTotals { count: to_seq(count)?, bytes: u64::try_from(bytes).unwrap_or_default() })
        })
        .await
    }

    /// Creates a session from `new` with `parent_id = source_id` and a copy of the source's
    /// whole event log, in one transaction. Settings and roots come from `new` alone: nothing
    /// else is inherited. An unknown source is [`StoreError::NotFound`].
    pub async fn fork_session(&self, source_id: &str, new: NewSession) -> Result<SessionRecord, StoreError> {
        let source_id = source_id.to_owned();
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            sessions::require(&tx, &source_id)?;
            let record = sessions::insert(&tx, &new, Some(&source_id))?;
            tx.execute(
                "INSERT INTO events (session_id, seq, kind, payload, at)
                 SELECT ?2, seq, kind, payload, at FROM events WHERE session_id = ?1 ORDER BY seq",
                params![source_id, record.id],
            )?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }
}
