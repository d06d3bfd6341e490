//! The table of incoming requests still running. Whoever removes an entry answers that
//! request, which is what makes "exactly one response" hold when a result races a cancel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::envelope::Id;

tokio::task_local! {
    static CANCELLATION: CancellationToken;
}

/// The cancellation signal of the incoming request whose handler is running, when called
/// from inside that handler's future (not from `dispatch_request` itself).
///
/// Handlers need not watch it: a cancelled handler's future is dropped anyway. It is for
/// handlers that want to wind down cleanly or pass the signal to tasks they spawn.
pub fn current_cancellation() -> Option<CancellationToken> {
    CANCELLATION.try_with(CancellationToken::clone).ok()
}

/// Runs `future` with `token` visible through [`current_cancellation`].
pub(super) async fn with_cancellation<F: Future>(token: CancellationToken, future: F) -> F::Output {
    CANCELLATION.scope(token, future).await
}

/// One running request's claim on its entry.
#[derive(Debug)]
pub(super) struct Ticket {
    /// The request id, as received.
    pub(super) id: Id,
    /// Fired when a cancel or shutdown took the entry.
    pub(super) token: CancellationToken,
    /// Tells this run apart from a later request that reuses the id.
    serial: u64,
}

struct Entry {
    serial: u64,
    method: String,
    token: CancellationToken,
}

/// Incoming requests by id.
#[derive(Default)]
pub(super) struct InFlight {
    entries: Mutex<HashMap<Id, Entry>>,
    next_serial: AtomicU64,
}

impl InFlight {
    fn entries(&self) -> MutexGuard<'_, HashMap<Id, Entry>> {
        // No code panics while holding the lock, so a poisoned table is still consistent.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a request, or returns `None` when one with this id is still running.
    pub(super) fn start(&self, id: &Id, method: &str) -> Option<Ticket> {
        let mut entries = self.entries();
        if entries.contains_key(id) {
            return None;
        }
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        entries.insert(id.clone(), Entry { serial, method: method.to_owned(), token: token.clone() });
        Some(Ticket { id: id.clone(), token, serial })
    }

    /// True while a request with this id is running.
    pub(super) fn contains(&self, id: &Id) -> bool {
        self.entries().contains_key(id)
    }

    /// Takes the entry for the handler that finished; `None` if a cancel took it first.
    /// Returns the request's method.
    pub(super) fn finish(&self, ticket: &Ticket) -> Option<String> {
        let mut entries = self.entries();
        match entries.get(&ticket.id) {
            Some(entry) if entry.serial == ticket.serial => {
                entries.remove(&ticket.id).map(|entry| entry.method)
            }
            _ => None,
        }
    }

    /// Takes the entry for a cancel and signals its handler; `false` if there was none.
    pub(super) fn cancel(&self, id: &Id) -> bool {
        let entry = self.entries().remove(id);
        match entry {
            Some(entry) => {
                entry.token.cancel();
                true
            }
            None => false,
        }
    }

    /// Takes every entry and signals every handler; returns the ids to answer.
    pub(super) fn cancel_all(&self) -> Vec<Id> {
        let entries = std::mem::take(&mut *self.entries());
        entries
            .into_iter()
            .map(|(id, entry)| {
                entry.token.cancel();
                id
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_that_takes_the_entry_first_leaves_the_result_unsent() {
        let table = InFlight::default();
        let ticket = table.start(&Id::Int(1), "m").expect("new id");
        assert!(table.cancel(&Id::Int(1)));
        assert!(ticket.token.is_cancelled());
        assert_eq!(table.finish(&ticket), None);
    }

    #[test]
    fn a_cancel_after_the_result_is_ignored() {
        let table = InFlight::default();
        let ticket = table.start(&Id::Str("a".into()), "m").expect("new id");
        assert_eq!(table.finish(&ticket).as_deref(), Some("m"));
        assert!(!table.cancel(&Id::Str("a".into())));
        assert!(!ticket.token.is_cancelled());
    }

    #[test]
    fn a_stale_ticket_cannot_answer_a_later_request_with_the_same_id() {
        let table = InFlight::default();
        let old = table.start(&Id::Null, "old").expect("new id");
        assert!(table.start(&Id::Null, "dup").is_none());
        assert!(table.cancel(&Id::Null));
        let new = table.start(&Id::Null, "new").expect("id free again");
        assert_eq!(table.finish(&old), None);
        assert_eq!(table.finish(&new).as_deref(), Some("new"));
    }

    #[test]
    fn shutdown_takes_every_entry() {
        let table = InFlight::default();
        let a = table.start(&Id::Int(1), "m").expect("new id");
        let b = table.start(&Id::Int(2), "m").expect("new id");
        let mut ids = table.cancel_all();
        ids.sort_by_key(ToString::to_string);
        assert_eq!(ids, vec![Id::Int(1), Id::Int(2)]);
        assert!(a.token.is_cancelled() && b.token.is_cancelled());
        assert_eq!((table.finish(&a), table.finish(&b)), (None, None));
    }
}
