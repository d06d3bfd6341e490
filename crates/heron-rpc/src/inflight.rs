//! The table of incoming requests still running. Whoever removes an entry answers that
//! request, which is what makes "exactly one response" hold when a result races a cancel.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::envelope::Id;

tokio::task_local! {
    static CANCELLATION: CancellationToken;
    static FOLLOW_UPS: Later;
}

/// A follow-up to run once an answer is queued.
type FollowUp = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The follow-ups one request's handler registered.
pub(super) type Later = Arc<Mutex<Vec<FollowUp>>>;

/// How long the reader waits for follow-ups before it handles the next message anyway.
const FOLLOW_UP_WAIT: Duration = Duration::from_secs(2);

/// The cancellation signal of the incoming request whose handler is running, when called
/// from inside that handler's future (not from `dispatch_request` itself).
///
/// Handlers need not watch it: a cancelled handler's future is dropped anyway. It is for
/// handlers that want to wind down cleanly or pass the signal to tasks they spawn.
pub fn current_cancellation() -> Option<CancellationToken> {
    CANCELLATION.try_with(CancellationToken::clone).ok()
}

/// Runs `future` with `token` visible through [`current_cancellation`], and `later`
/// collecting what it passes to [`after_response`].
pub(super) async fn with_cancellation<F: Future>(
    token: CancellationToken,
    later: Later,
    future: F,
) -> F::Output {
    FOLLOW_UPS.scope(later, CANCELLATION.scope(token, future)).await
}

/// Runs `follow_up` right after the answer of the request whose handler calls this is
/// queued, and before the connection handles the peer's next message: what it sends comes
/// after that answer and before anything the peer does about it (e.g.
/// `available_commands_update` after `session/new`, ahead of the first prompt's updates).
/// If the request is cancelled instead, `follow_up` never runs. It must not wait for the
/// peer's replies (the reader waits for it, up to two seconds). Outside a request handler
/// it runs at once, on its own task.
pub fn after_response<F>(follow_up: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match FOLLOW_UPS.try_with(Arc::clone) {
        Ok(later) => later.lock().unwrap_or_else(PoisonError::into_inner).push(Box::pin(follow_up)),
        Err(_) => {
            tokio::spawn(follow_up);
        }
    }
}

/// Answers whose follow-ups are still being queued; the reader waits for none to be.
#[derive(Debug, Default)]
pub(super) struct FollowUps {
    running: AtomicUsize,
    done: tokio::sync::Notify,
}

impl FollowUps {
    /// Runs `later` in order, holding the reader back meanwhile; `answer` queues the answer.
    pub(super) async fn run(&self, answer: impl Future<Output = ()>, later: Vec<FollowUp>) {
        let _running = Running::enter(self);
        answer.await;
        for follow_up in later {
            if tokio::time::timeout(FOLLOW_UP_WAIT, follow_up).await.is_err() {
                tracing::warn!("a follow-up of an answer took too long; it was dropped");
            }
        }
    }

    /// Waits until no follow-up is running (or two seconds have passed).
    pub(super) async fn settled(&self) {
        let wait = async {
            loop {
                let notified = self.done.notified();
                if self.running.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(FOLLOW_UP_WAIT, wait).await;
    }
}

/// A running follow-up batch; leaving also happens when the task is dropped.
struct Running<'a>(&'a FollowUps);

impl<'a> Running<'a> {
    fn enter(follow_ups: &'a FollowUps) -> Self {
        follow_ups.running.fetch_add(1, Ordering::SeqCst);
        Self(follow_ups)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.done.notify_waiters();
        }
    }
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
