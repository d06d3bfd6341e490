//! Reading a stored history page by page, and opening a stored session while its history
//! is replayed ([`Loading`]).
//!
//! A history is read in bounded pages ([`PageBudget`]), each row decoded straight into an
//! [`Event`] on the store's blocking thread. While a session is loaded, each page is handed
//! to the caller (the editor's replay) and then kept as the actor's history, so there is
//! one copy of the history at any time, never a second one for the replay, and the replay
//! goes out as it is read rather than after the whole log is in memory.
//!
//! While the caller works on one page, the next is already being read and decoded on the
//! store's blocking thread, so a replay costs about the larger of reading and sending, not
//! their sum; at most one page is read ahead.
//!
//! An actor's history is read only once its manager has checked the history's stored size
//! against the session's and the process's budgets (`history_budget`); a replay to a
//! session already open here holds one page at a time and is not counted.
//!
//! A row that is not JSON fails the read ([`SessionError::Store`], naming its seq); one that
//! is JSON but no event this build knows is skipped with a warning, so a session written by
//! a newer build still opens.

use std::sync::Arc;

use heron_store::{DecodedPage, PageBudget, Store, StoreError};
use tokio::task::JoinHandle;

use super::Session;
use super::event::Event;
use super::opening::SessionError;
use crate::tools::editor::EditorIo;

/// A session's stored events, read a page at a time.
pub(super) struct StoredHistory {
    id: String,
    /// Where the next page starts; `None` once the end was read.
    after: Option<u64>,
    /// The events read: all of them when `keep`, else the last page only.
    events: Vec<Event>,
    keep: bool,
    budget: PageBudget,
    /// The page after the last one returned, being read.
    ahead: Option<JoinHandle<Result<Page, StoreError>>>,
}

/// One page as the store decodes it.
type Page = DecodedPage<Event>;

impl StoredHistory {
    /// A reader of session `id`, `count` events long, that keeps every event it reads (for
    /// an actor, whose manager checked its size against the history budget first).
    pub(super) fn kept(id: &str, count: u64) -> StoredHistory {
        // Sized once from the count, so a long history is not copied while the list grows.
        let count = usize::try_from(count).unwrap_or(0);
        StoredHistory::new(id, Vec::with_capacity(count), true)
    }

    /// A reader of session `id` that holds one page at a time (a replay of a session whose
    /// actor already has its history).
    pub(super) fn passing(id: &str) -> StoredHistory {
        StoredHistory::new(id, Vec::new(), false)
    }

    fn new(id: &str, events: Vec<Event>, keep: bool) -> StoredHistory {
        StoredHistory {
            id: id.to_owned(),
            after: Some(0),
            events,
            keep,
            budget: PageBudget::default(),
            ahead: None,
        }
    }

    /// Starts reading the page after `after` on the store's thread.
    fn read(&self, store: &Store, after: u64) -> JoinHandle<Result<Page, StoreError>> {
        let (store, id, budget) = (store.clone(), self.id.clone(), self.budget);
        tokio::spawn(async move {
            store.decode_events(&id, after, budget, |text| serde_json::from_str::<Event>(text)).await
        })
    }

    /// The whole history of session `id`, in order.
    pub(super) async fn read_all(store: &Store, id: &str) -> Result<Vec<Event>, SessionError> {
        let count = store.event_count(id).await?;
        StoredHistory::kept(id, count).read_rest(store).await
    }

    /// Reads what is left of the history; every event kept, in order.
    pub(super) async fn read_rest(mut self, store: &Store) -> Result<Vec<Event>, SessionError> {
        while self.next_page(store).await?.is_some() {}
        Ok(self.events)
    }

    /// The events of the next page (possibly none, when every row of it was skipped), or
    /// `None` once the whole history was read.
    pub(super) async fn next_page(&mut self, store: &Store) -> Result<Option<&[Event]>, SessionError> {
        let Some(after) = self.after else { return Ok(None) };
        let reading = match self.ahead.take() {
            Some(reading) => reading,
            None => self.read(store, after),
        };
        let page = reading.await.map_err(|err| StoreError::Task(err.to_string()))??;
        self.ahead = page.next_after.map(|next| self.read(store, next));
        if !self.keep {
            self.events.clear();
        }
        let start = self.events.len();
        for (seq, event) in page.rows {
            match event {
                Ok(event) => self.events.push(event),
                // An event this build cannot read is skipped, not fatal: the rest replays.
                Err(err) => tracing::warn!(session = %self.id, seq, %err, "skipping an unreadable event"),
            }
        }
        self.after = page.next_after;
        Ok(Some(&self.events[start..]))
    }
}

/// Starts the actor of a session that is not open in this process yet, with its whole
/// history: the manager's last step of opening it, with what the manager read for it. A
/// load holds it rather than the manager, so that this module knows nothing of the manager.
pub(super) type Start<'m> = Box<dyn FnOnce(Vec<Event>) -> Arc<Session> + Send + 'm>;

/// What a loaded session becomes once its history is read.
enum Target<'m> {
    /// Not open in this process: its actor starts with the history read.
    Spawn(Start<'m>),
    /// Already open here: its actor has its history; the replay reads the store.
    Attach { session: Arc<Session>, editor: Arc<dyn EditorIo> },
}

/// A stored session being opened, its history read page by page (see the module docs).
/// The session's lock is held from the start; dropping this before [`Loading::open`]
/// releases it and opens nothing.
pub struct Loading<'m> {
    store: &'m Store,
    target: Target<'m>,
    history: StoredHistory,
}

impl<'m> Loading<'m> {
    /// A load that will start the session's actor (`start`).
    pub(super) fn spawning(store: &'m Store, start: Start<'m>, history: StoredHistory) -> Self {
        Loading { store, target: Target::Spawn(start), history }
    }

    /// A load of a session already open in this process.
    pub(super) fn attaching(store: &'m Store, session: Arc<Session>, editor: Arc<dyn EditorIo>) -> Self {
        let history = StoredHistory::passing(session.id());
        Loading { store, target: Target::Attach { session, editor }, history }
    }

    /// The next events of the history, in order (possibly none), or `None` at its end.
    pub async fn next_events(&mut self) -> Result<Option<&[Event]>, SessionError> {
        self.history.next_page(self.store).await
    }

    /// Opens the session: reads what the caller did not, then starts its actor with the
    /// history (or binds the session already open here to this load's editor).
    pub async fn open(self) -> Result<Arc<Session>, SessionError> {
        match self.target {
            Target::Spawn(start) => Ok(start(self.history.read_rest(self.store).await?)),
            Target::Attach { session, editor } => {
                session.attach(editor);
                Ok(session)
            }
        }
    }
}
