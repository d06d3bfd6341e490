//! The bounded queue into the writer, bounded twice: by messages, and by the bytes queued
//! and not yet written. A peer that reads slowly therefore holds back whoever sends (and a
//! turn streaming to it), instead of growing memory by the size of everything sent.
//!
//! Messages sent without waiting (a `$/cancel_request` from a dropped call, the -32800
//! answers of shutdown) take no byte budget: they must get through even when it is spent,
//! and they are small.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// One encoded line, holding its share of the byte budget until it is written.
pub(crate) struct Queued {
    pub(crate) line: String,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// The sending side; clones share the queue and the budget.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Queued>,
    bytes: Arc<Semaphore>,
    budget: usize,
}

impl Outbox {
    /// A queue of at most `messages` lines and `bytes` queued bytes, and its receiving end.
    pub(crate) fn new(messages: usize, bytes: usize) -> (Outbox, mpsc::Receiver<Queued>) {
        let budget = bytes.clamp(1, Semaphore::MAX_PERMITS);
        let (tx, rx) = mpsc::channel(messages.max(1));
        (Outbox { tx, bytes: Arc::new(Semaphore::new(budget)), budget }, rx)
    }

    /// Queues `line`, waiting for room; `false` once the writer is gone. A line larger than
    /// the whole budget waits until nothing else is queued.
    pub(crate) async fn send(&self, line: String) -> bool {
        let wanted = u32::try_from(line.len().clamp(1, self.budget)).unwrap_or(u32::MAX);
        let Ok(permit) = self.bytes.clone().acquire_many_owned(wanted).await else { return false };
        self.tx.send(Queued { line, _bytes: Some(permit) }).await.is_ok()
    }

    /// Queues `line` now, outside the byte budget, if the queue has a place.
    pub(crate) fn try_send(&self, line: String) -> Result<(), mpsc::error::TrySendError<String>> {
        self.tx.try_send(Queued { line, _bytes: None }).map_err(|err| match err {
            mpsc::error::TrySendError::Full(queued) => mpsc::error::TrySendError::Full(queued.line),
            mpsc::error::TrySendError::Closed(queued) => mpsc::error::TrySendError::Closed(queued.line),
        })
    }

    /// Queues `line` outside the byte budget, waiting for a place in the queue.
    pub(crate) async fn send_unbudgeted(&self, line: String) -> bool {
        self.tx.send(Queued { line, _bytes: None }).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn senders_wait_while_the_queued_bytes_are_spent_and_go_on_once_written() {
        let (outbox, mut rx) = Outbox::new(100, 10);
        assert!(outbox.send("12345678".into()).await);
        let blocked = tokio::time::timeout(Duration::from_millis(50), outbox.send("abcd".into())).await;
        assert!(blocked.is_err(), "the budget is spent: the sender waits");
        assert!(outbox.try_send("cancel".into()).is_ok(), "unbudgeted messages still pass");
        drop(rx.recv().await);
        assert!(tokio::time::timeout(Duration::from_millis(50), outbox.send("abcd".into())).await.is_ok());
    }

    #[tokio::test]
    async fn a_line_larger_than_the_budget_still_goes_alone() {
        let (outbox, mut rx) = Outbox::new(100, 10);
        assert!(outbox.send("x".repeat(50)).await);
        assert_eq!(rx.recv().await.map(|q| q.line.len()), Some(50));
    }
}
