//! Why an inbox operation is refused, in the words the editor is answered with.

use super::{InboxStatus, MAX_KEY_BYTES};
use heron_store::StoreError;

/// Why an inbox operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// The session has no such item.
    #[error("the session's inbox has no item {0}")]
    NotFound(String),
    /// The item is not in the status the operation needs.
    #[error("inbox item {id} is {status}; only a {needed} item can be {action}")]
    WrongStatus {
        /// The item.
        id: String,
        /// Its status.
        status: InboxStatus,
        /// The status the operation needs.
        needed: InboxStatus,
        /// What the operation does, as a past participle (`updated`, `moved`, `retried`).
        action: &'static str,
    },
    /// The list cursor is not one this inbox issued.
    #[error("the cursor is not one this agent issued for this inbox")]
    BadCursor,
    /// The idempotency key is empty or longer than [`MAX_KEY_BYTES`].
    #[error("the idempotency key must be 1 to {MAX_KEY_BYTES} bytes long, not {0}")]
    BadKey(usize),
    /// The inbox holds [`CAPACITY`](super::CAPACITY) items and none has finished.
    #[error(
        "the inbox is full: it holds {capacity} items and none has finished; delete some or let them run"
    )]
    Full {
        /// The most items it holds.
        capacity: u32,
    },
    /// The stored prompts fill their byte budget and none has finished.
    #[error(
        "the inbox is full: {} prompts hold their budget of {} MiB and none has finished; delete some or let them run",
        if *all_sessions { "every session's" } else { "this session's" },
        limit / (1024 * 1024)
    )]
    BytesFull {
        /// The budget, in bytes.
        limit: usize,
        /// Whether it is every session's inboxes together.
        all_sessions: bool,
    },
    /// The session itself is gone from the store.
    #[error("session {0} not found")]
    SessionGone(String),
    /// The store failed.
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for InboxError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { entity: "session", id } => InboxError::SessionGone(id),
            StoreError::NotFound { id, .. } => InboxError::NotFound(id),
            StoreError::InboxFull { capacity } => {
                InboxError::Full { capacity: u32::try_from(capacity).unwrap_or(u32::MAX) }
            }
            StoreError::InboxBytesFull { limit, all_sessions } => {
                InboxError::BytesFull { limit, all_sessions }
            }
            other => InboxError::Internal(other.to_string()),
        }
    }
}
