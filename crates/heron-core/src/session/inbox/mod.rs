//! A session's durable inbox: prompts kept in the store that run, in order, as ordinary turns
//! whenever the session is idle (no prompt running or waiting) and the inbox is not paused,
//! and the steering accepted for the running turn (`self::steer`). Invariant: each
//! follow-up is taken by one turn at most, and once a session is reopened no item is left
//! `running` without a turn running it, nor a steer waiting for a turn that is gone.
//!
//! The rules, as the adapter and the actor rely on them:
//! - Prompts come first: the actor takes an item only when no prompt waits in its queue.
//! - Nothing starts until the adapter serves the inbox ([`Inbox::serve`]): an item's turn
//!   is a run of the session's outbound stream, which the adapter forwards.
//! - An enqueue may carry an idempotency key (at most [`MAX_KEY_BYTES`]): a second enqueue
//!   with the same key in the same session returns the first one's item and adds nothing,
//!   for as long as that item is kept. The inbox holds at most [`CAPACITY`] items; a full
//!   one removes its oldest finished (done or cancelled) item to make room, and refuses the
//!   new one when none has finished ([`InboxError::Full`]).
//! - An item's turn ending `end_turn` makes it `done`. Any other ending is `failed`, with
//!   the reason in `error`: the turn failed, ended `max_tokens`, `max_turn_requests` or
//!   `refusal`, or was interrupted (the session closed, or the process stopped, which is
//!   found when the session is next opened). `session/cancel` during its turn makes it
//!   `cancelled` and pauses the inbox, so a stop is not followed by the next item.
//! - An inbox found with work a stopped process left (an item still `running`, a steer
//!   never applied) is recovered when its session opens ([`reopen`]): it starts paused and
//!   marked `recovered` until it is resumed, so the user can look at it first.
//! - Deleting a running item removes it and cancels its turn, and is answered once that
//!   turn has ended and its last updates are out; the inbox goes on.
//! - Changes from the adapter happen one at a time in the order they were asked for
//!   ([`Inbox::in_order`]), whatever order their store writes would finish in. The actor
//!   takes its place in the same line to claim an item, so a claim never lands between a
//!   change and the answer that reports it.

mod item;
mod line;
pub(super) mod steer;
pub(super) mod stored_prompt;

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

mod error;

pub use self::error::InboxError;
use self::item::items;
pub use self::item::{Disposition, Item, PREVIEW_BYTES};
use self::line::Line;
pub use self::line::Ticket;

use self::steer::Steers;
use super::snapshot::InboxCounts;
use super::status::Board;
use super::{PromptError, PromptInput};
use crate::llm::registry::Providers;
use crate::types::StopReason;
pub use heron_store::{InboxIntent, InboxStatus};
use heron_store::{InboxItem, NewInboxItem, Placement, Store, StoreError};

/// The most items one page of [`Inbox::page`] holds.
pub const PAGE_SIZE: usize = 50;

/// The most items a session's inbox holds (the store's default; it fits the wire's u32).
pub const CAPACITY: u32 = heron_store::INBOX_CAPACITY as u32;

/// The longest idempotency key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;

/// The error of an item found running when its session is opened.
pub const INTERRUPTED: &str = "interrupted: Heron stopped while this item ran";

/// The error of an item whose session was closed while it ran.
pub const CLOSED: &str = "interrupted: the session was closed while this item ran";

/// The longest failure message kept with an item, in bytes.
const MAX_ERROR: usize = 2048;

/// Tags cursors, so one from another list is recognised as foreign.
const CURSOR_TAG: &str = "inbox.v1";

/// A whole inbox at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxState {
    /// Every item, in queue order.
    pub items: Vec<Item>,
    /// Whether queued items are held back.
    pub paused: bool,
    /// Whether it was recovered from a stopped process and not resumed since.
    pub recovered: bool,
}

/// One page of an inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxPage {
    /// The items of this page, in queue order.
    pub items: Vec<Item>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Whether the inbox is paused.
    pub paused: bool,
    /// Whether it was recovered from a stopped process and not resumed since.
    pub recovered: bool,
}

/// A prompt to add to the inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    /// The prompt.
    pub prompt: Vec<PromptInput>,
    /// Where it goes; `None`: a follow-up goes last, a steer before the first queued
    /// follow-up.
    pub position: Option<u32>,
    /// A follow-up, or steering for the running turn.
    pub intent: InboxIntent,
    /// Names this enqueue, so a retry finds the item it made.
    pub idempotency_key: Option<String>,
}

/// What an enqueue did.
#[derive(Debug, Clone, PartialEq)]
pub struct Enqueued {
    /// The item: the new one, or the one an earlier enqueue with the same key made.
    pub item: Item,
    /// Where it went.
    pub disposition: Disposition,
    /// Whether the key named an existing item, so nothing was added.
    pub idempotent: bool,
    /// Whether the inbox is paused.
    pub paused: bool,
}

/// Where a page starts: after the item it names, or at its old place if it is gone.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Cursor {
    tag: String,
    session: String,
    after: String,
    position: u32,
}

/// The item whose turn runs, what cancels it, and what tells that its run is done with.
struct Running {
    id: String,
    cancel: CancellationToken,
    /// Fired once the item's run is done with: its turn ended and its updates are out.
    forwarded: CancellationToken,
}

/// An item the actor took: what it runs, what cancels it, and what its run holds until it
/// is done with.
pub(super) struct Claimed {
    pub id: String,
    /// The prompt, or why it cannot be read.
    pub input: Result<Vec<PromptInput>, String>,
    pub cancel: CancellationToken,
    pub forwarded: tokio_util::sync::DropGuard,
}

/// One open session's inbox.
pub struct Inbox {
    session_id: String,
    store: Store,
    board: Arc<Board>,
    wake: Notify,
    /// Whether the session is served: items run only then.
    served: std::sync::atomic::AtomicBool,
    /// Held while an item is claimed or deleted, so a delete never misses the turn it must
    /// cancel.
    running: tokio::sync::Mutex<Option<Running>>,
    line: Line,
    steers: Arc<Steers>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("session_id", &self.session_id).finish_non_exhaustive()
    }
}

/// Prepares a stored session's inbox for opening: items left `running` by a process that
/// stopped become `failed` ([`INTERRUPTED`]), steers it accepted and never applied become
/// queued follow-ups, and if there was either the inbox is paused and marked recovered.
/// Returns the counts the session opens with. The manager calls it only while holding the
/// session's lock, which a live process that has the session open would hold instead, so
/// what is found here really was left by a process that stopped.
pub(crate) async fn reopen(store: &Store, session_id: &str) -> Result<InboxCounts, StoreError> {
    let recovery = store.inbox_recover(session_id, INTERRUPTED).await?;
    if recovery.any() {
        tracing::info!(
            session = session_id,
            interrupted = recovery.interrupted,
            steers = recovery.steers,
            "an inbox a stopped process left is recovered, paused"
        );
    }
    let tally = store.inbox_tally(session_id).await?;
    Ok(InboxCounts::tallied(tally.counts, tally.paused))
}

/// The text kept as a failed item's `error`: redacted of keys and clipped.
pub(super) fn failure(err: &PromptError, providers: &Providers) -> String {
    crate::secret::clip(&crate::secret::redact(&err.to_string(), providers.keys().all()), MAX_ERROR)
}

impl Inbox {
    pub(super) fn new(session_id: String, store: Store, board: Arc<Board>, steers: Arc<Steers>) -> Self {
        Self {
            session_id,
            store,
            board,
            wake: Notify::new(),
            served: std::sync::atomic::AtomicBool::new(false),
            running: tokio::sync::Mutex::new(None),
            line: Line::default(),
            steers,
        }
    }

    /// A place in line for a change, taken in the order changes are asked for. Hold it
    /// until the change is reported.
    pub fn in_order(&self) -> Ticket {
        self.line.ticket()
    }

    /// Lets queued items run: each is a run of the session's outbound stream, which whoever
    /// calls this serves.
    pub fn serve(&self) {
        self.served.store(true, std::sync::atomic::Ordering::SeqCst);
        self.wake();
    }

    /// Tells an idle session to look for a queued item.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub(super) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Adds a prompt, committed before this returns: a follow-up, or a steer that the
    /// running turn takes if one takes steers and that is a follow-up otherwise. With a
    /// known key nothing is added and the earlier item is returned.
    pub async fn enqueue(&self, new: NewItem) -> Result<Enqueued, InboxError> {
        if let Some(key) = &new.idempotency_key
            && (key.is_empty() || key.len() > MAX_KEY_BYTES)
        {
            return Err(InboxError::BadKey(key.len()));
        }
        let placement = match (new.position, new.intent) {
            (Some(position), _) => Placement::At(position),
            (None, InboxIntent::Followup) => Placement::End,
            // Guidance goes ahead of what was queued before it.
            (None, InboxIntent::Steer) => Placement::Next,
        };
        let stored = NewInboxItem {
            placement,
            idempotency_key: new.idempotency_key,
            ..NewInboxItem::followup(stored_prompt::encode(&new.prompt))
        };
        let enqueued = match new.intent {
            InboxIntent::Followup => self.store.inbox_enqueue(&self.session_id, stored).await?,
            InboxIntent::Steer => self.steers.accept(stored).await?,
        };
        self.recount().await;
        Ok(Enqueued {
            disposition: Disposition::of(enqueued.item.intent),
            item: enqueued.item.into(),
            idempotent: enqueued.idempotent,
            paused: enqueued.paused,
        })
    }

    /// Every item and the flags, re-read from the store (another process sharing it may
    /// have changed them); the status counts follow.
    pub async fn all(&self) -> Result<InboxState, InboxError> {
        let state = self.store.inbox_state(&self.session_id).await?;
        self.board.change(|s| s.inbox = InboxCounts::of(&state.items, state.paused));
        Ok(InboxState { items: items(state.items), paused: state.paused, recovered: state.recovered })
    }

    /// One page of items, from the start or from a cursor this inbox issued. Items added,
    /// moved or deleted while a client pages may be missed or shown twice.
    pub async fn page(&self, cursor: Option<&str>) -> Result<InboxPage, InboxError> {
        let after = cursor.map(|text| self.decode(text)).transpose()?;
        let state = self.store.inbox_state(&self.session_id).await?;
        let start = match &after {
            None => 0,
            Some(cursor) => match state.items.iter().position(|item| item.id == cursor.after) {
                Some(at) => at + 1,
                // The item is gone and its gap closed: the next one took its place.
                None => usize::try_from(cursor.position).unwrap_or(usize::MAX).min(state.items.len()),
            },
        };
        let mut page: Vec<InboxItem> = state.items.into_iter().skip(start).take(PAGE_SIZE + 1).collect();
        let more = page.len() > PAGE_SIZE;
        page.truncate(PAGE_SIZE);
        let next_cursor = match page.last() {
            Some(last) if more => Some(self.encode(&last.id, last.position)?),
            _ => None,
        };
        Ok(InboxPage { items: items(page), next_cursor, paused: state.paused, recovered: state.recovered })
    }

    /// One item of this session.
    pub async fn get(&self, id: &str) -> Result<Item, InboxError> {
        self.stored(id).await.map(Item::from)
    }

    async fn stored(&self, id: &str) -> Result<InboxItem, InboxError> {
        match self.store.inbox_get(id).await? {
            Some(item) if item.session_id == self.session_id => Ok(item),
            _ => Err(InboxError::NotFound(id.to_owned())),
        }
    }

    /// Replaces the prompt of a queued item.
    pub async fn update(&self, id: &str, prompt: &[PromptInput]) -> Result<Item, InboxError> {
        self.stored(id).await?;
        let queued = Some(InboxStatus::Queued);
        let item = self
            .store
            .inbox_update_prompt(id, stored_prompt::encode(prompt), queued)
            .await
            .map_err(|e| wrong_status(e, InboxStatus::Queued, "updated"))?;
        Ok(item.into())
    }

    /// Moves a queued item to `position` (past the end: last); returns the whole inbox.
    pub async fn move_to(&self, id: &str, position: u32) -> Result<Vec<Item>, InboxError> {
        self.stored(id).await?;
        let moved = self
            .store
            .inbox_move(id, position, Some(InboxStatus::Queued))
            .await
            .map_err(|e| wrong_status(e, InboxStatus::Queued, "moved"))?;
        Ok(items(moved))
    }

    /// Queues a failed item again, in its place, without its error.
    pub async fn retry(&self, id: &str) -> Result<Item, InboxError> {
        self.stored(id).await?;
        let item = self
            .store
            .inbox_set_status(id, InboxStatus::Queued, None, Some(InboxStatus::Failed))
            .await
            .map_err(|e| wrong_status(e, InboxStatus::Failed, "retried"))?;
        self.recount().await;
        Ok(item.into())
    }

    /// Removes an item; if its turn is running, cancels it and waits until the turn has
    /// ended and its updates are out.
    pub async fn delete(&self, id: &str) -> Result<(), InboxError> {
        self.stored(id).await?;
        let ended = {
            let running = self.running.lock().await;
            // The row goes first: the ending turn then finds nothing to mark cancelled.
            self.store.inbox_delete(id).await?;
            running.as_ref().filter(|run| run.id == id).map(|run| {
                run.cancel.cancel();
                run.forwarded.clone()
            })
        };
        match ended {
            Some(forwarded) => forwarded.cancelled().await,
            None => self.recount().await,
        }
        Ok(())
    }

    /// Ends steering for the turn that just ended: steers it did not apply become queued
    /// follow-ups, and `stopped` (it was cancelled) pauses the inbox if there were any.
    pub(super) async fn settle_steers(&self, stopped: bool) {
        if self.steers.close_now(stopped).await > 0 {
            self.recount().await;
        }
    }

    /// Pauses or resumes the inbox (resuming clears its `recovered` mark); a running item
    /// is not interrupted.
    pub async fn set_paused(&self, paused: bool) -> Result<bool, InboxError> {
        self.store.inbox_set_paused(&self.session_id, paused).await?;
        self.recount().await;
        Ok(paused)
    }

    /// Takes the next queued item, if the inbox is served, not paused and has one.
    pub(super) async fn claim(&self) -> Option<Claimed> {
        if !self.served.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let mut ticket = self.in_order();
        ticket.wait().await;
        let (item, cancel) = {
            let mut running = self.running.lock().await;
            let item = match self.store.inbox_claim_next(&self.session_id).await {
                Ok(item) => item?,
                Err(err) => {
                    tracing::warn!(session = %self.session_id, %err, "cannot take the next inbox item");
                    return None;
                }
            };
            let (cancel, forwarded) = (CancellationToken::new(), CancellationToken::new());
            let claimed = (cancel.clone(), forwarded.clone().drop_guard());
            *running = Some(Running { id: item.id.clone(), cancel, forwarded });
            (item, claimed)
        };
        drop(ticket);
        let (cancel, forwarded) = cancel;
        // Counted now, shown with the turn's first status.
        self.recount().await;
        Some(Claimed { input: stored_prompt::decode(&item.prompt), id: item.id, cancel, forwarded })
    }

    /// Records how an item's turn ended (`outcome`: its stop reason, or why it failed;
    /// `closed`: the session closed meanwhile) and ends the turn on the status board, with
    /// the new counts.
    pub(super) async fn finish(&self, id: &str, outcome: Result<StopReason, String>, closed: bool) {
        let run = self.running.lock().await.take();
        let (status, error) = match outcome {
            Ok(StopReason::EndTurn) => (InboxStatus::Done, None),
            Ok(StopReason::Cancelled) if closed => (InboxStatus::Failed, Some(CLOSED.to_owned())),
            Ok(StopReason::Cancelled) => (InboxStatus::Cancelled, None),
            Ok(other) => {
                let ended = format!("the turn ended with `{}`, not `end_turn`", other.as_str());
                (InboxStatus::Failed, Some(ended))
            }
            Err(reason) => (InboxStatus::Failed, Some(reason)),
        };
        match self.store.inbox_set_status(id, status, error.as_deref(), Some(InboxStatus::Running)).await {
            // A stop is not followed by the next item.
            Ok(_) if status == InboxStatus::Cancelled => {
                if let Err(err) = self.store.inbox_set_paused(&self.session_id, true).await {
                    tracing::warn!(session = %self.session_id, %err, "cannot pause the inbox");
                }
            }
            Ok(_) => {}
            // Deleted during its turn: nothing is left to mark.
            Err(StoreError::NotFound { .. }) => {}
            Err(err) => {
                tracing::warn!(session = %self.session_id, item = id, %err, "cannot record an inbox item")
            }
        }
        drop(run);
        self.board.end_turn_with(self.counts().await);
    }

    async fn counts(&self) -> Option<InboxCounts> {
        // Counted in the store: a long inbox's prompts are not read for it.
        match self.store.inbox_tally(&self.session_id).await {
            Ok(tally) => Some(InboxCounts::tallied(tally.counts, tally.paused)),
            Err(err) => {
                tracing::warn!(session = %self.session_id, %err, "cannot count the inbox");
                None
            }
        }
    }

    /// Brings the status counts up to date with the store.
    async fn recount(&self) {
        if let Some(counts) = self.counts().await {
            self.board.change(|s| s.inbox = counts);
        }
    }

    fn encode(&self, after: &str, position: u32) -> Result<String, InboxError> {
        let cursor = Cursor {
            tag: CURSOR_TAG.to_owned(),
            session: self.session_id.clone(),
            after: after.to_owned(),
            position,
        };
        let json = serde_json::to_vec(&cursor).map_err(|e| InboxError::Internal(e.to_string()))?;
        Ok(URL_SAFE_NO_PAD.encode(json))
    }

    fn decode(&self, text: &str) -> Result<Cursor, InboxError> {
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| InboxError::BadCursor)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| InboxError::BadCursor)?;
        if cursor.tag == CURSOR_TAG && cursor.session == self.session_id {
            Ok(cursor)
        } else {
            Err(InboxError::BadCursor)
        }
    }
}

/// Names a store refusal by the status the operation needed.
fn wrong_status(err: StoreError, needed: InboxStatus, action: &'static str) -> InboxError {
    match err {
        StoreError::WrongStatus { id, status } => InboxError::WrongStatus { id, status, needed, action },
        other => other.into(),
    }
}
