//! Schema migrations, versioned by `PRAGMA user_version`: an ordered list of SQL steps.
//!
//! Step `i` takes the schema from version `i` to `i + 1` and runs in its own `BEGIN IMMEDIATE`
//! transaction that re-reads the version first, so two processes opening the same fresh file
//! apply each step exactly once. Steps are append-only: never edit one that has shipped.

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// The migration steps, oldest first.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, the event log and the inbox.
    r#"
    CREATE TABLE sessions (
        id                     TEXT PRIMARY KEY NOT NULL,
        cwd                    TEXT NOT NULL,
        additional_directories TEXT NOT NULL DEFAULT '[]',
        title                  TEXT,
        settings               TEXT NOT NULL DEFAULT '{}',
        -- Provenance of a fork; deliberately not a foreign key, so it outlives its source.
        parent_id              TEXT,
        created_at             TEXT NOT NULL,
        updated_at             TEXT NOT NULL
    );
    CREATE INDEX sessions_by_recency ON sessions (updated_at, id);
    CREATE INDEX sessions_by_cwd_recency ON sessions (cwd, updated_at, id);

    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL CHECK (seq > 0),
        kind       TEXT NOT NULL,
        payload    TEXT NOT NULL,
        at         TEXT NOT NULL,
        UNIQUE (session_id, seq)
    );

    CREATE TABLE inbox_items (
        id         TEXT PRIMARY KEY NOT NULL,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        position   INTEGER NOT NULL CHECK (position >= 0),
        prompt     TEXT NOT NULL,
        status     TEXT NOT NULL,
        error      TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX inbox_by_session ON inbox_items (session_id, position);
    "#,
    // 2: a session's goal and its last usage report, opaque JSON owned by the session module.
    r#"
    ALTER TABLE sessions ADD COLUMN goal TEXT;
    ALTER TABLE sessions ADD COLUMN usage TEXT;
    "#,
    // 3: whether a session's inbox holds its queued items back.
    r#"
    ALTER TABLE sessions ADD COLUMN inbox_paused INTEGER NOT NULL DEFAULT 0;
    "#,
    // 4: what an inbox item is for (a follow-up prompt or steering for the running turn),
    // the key that makes a retried enqueue find its first item, and whether the inbox was
    // found with work a stopped process left unfinished. Existing items are follow-ups
    // without a key; existing inboxes were not recovered.
    r#"
    ALTER TABLE inbox_items ADD COLUMN intent TEXT NOT NULL DEFAULT 'followup';
    ALTER TABLE inbox_items ADD COLUMN idempotency_key TEXT;
    CREATE UNIQUE INDEX inbox_by_idempotency_key ON inbox_items (session_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    ALTER TABLE sessions ADD COLUMN inbox_recovered INTEGER NOT NULL DEFAULT 0;
    "#,
    // 5: the bytes of a session's event rows (their JSON text), kept by triggers on every
    // insert and delete, so opening a session learns its size without walking its log.
    // `length(CAST(.. AS BLOB))` rather than `octet_length`, so that an older SQLite that
    // writes to the file (a script, the sqlite3 shell) still fires them.
    r#"
    ALTER TABLE sessions ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE sessions SET history_bytes =
        (SELECT COALESCE(SUM(length(CAST(payload AS BLOB))), 0) FROM events WHERE session_id = sessions.id);
    CREATE TRIGGER events_bytes_in AFTER INSERT ON events BEGIN
        UPDATE sessions SET history_bytes = history_bytes + length(CAST(NEW.payload AS BLOB))
            WHERE id = NEW.session_id;
    END;
    CREATE TRIGGER events_bytes_out AFTER DELETE ON events BEGIN
        UPDATE sessions SET history_bytes = history_bytes - length(CAST(OLD.payload AS BLOB))
            WHERE id = OLD.session_id;
    END;
    "#,
];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

fn user_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// Fails with [`StoreError::TooNew`] when the file was written by a newer schema.
pub(super) fn refuse_newer(conn: &Connection) -> Result<(), StoreError> {
    let found = user_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew { found, supported: SCHEMA_VERSION });
    }
    Ok(())
}

/// Applies every step the file has not seen yet.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    for (from, step) in (0_i64..).zip(MIGRATIONS) {
        if user_version(conn)? > from {
            continue;
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have applied this step while we waited for the lock.
        let found = user_version(&tx)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew { found, supported: SCHEMA_VERSION });
        }
        if found == from {
            tx.execute_batch(step)?;
            tx.pragma_update(None, "user_version", from + 1)?;
            tracing::debug!(version = from + 1, "store schema migrated");
        }
        tx.commit()?;
    }
    Ok(())
}
