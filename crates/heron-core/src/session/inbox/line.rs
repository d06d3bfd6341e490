//! The inbox's line: places handed out in the order changes are asked for, each going
//! ahead only after every earlier one is done (or was abandoned).

use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

/// Hands out places in line, each after the one handed out before it.
#[derive(Debug, Default)]
pub(super) struct Line(Mutex<Option<oneshot::Receiver<()>>>);

impl Line {
    pub(super) fn ticket(&self) -> Ticket {
        let (done, after) = oneshot::channel();
        let before = self.0.lock().unwrap_or_else(PoisonError::into_inner).replace(after);
        Ticket { before, _done: done }
    }
}

/// A place in line for one change; the change may go ahead once [`Ticket::wait`] returns,
/// and the next one when the ticket is dropped.
#[derive(Debug)]
pub struct Ticket {
    before: Option<oneshot::Receiver<()>>,
    _done: oneshot::Sender<()>,
}

impl Ticket {
    /// Waits until every change asked for earlier is done (or was abandoned). Safe to
    /// cancel and call again.
    pub async fn wait(&mut self) {
        if let Some(before) = self.before.as_mut() {
            // A dropped sender means the change before gave up: the line moves on.
            let _ = before.await;
            self.before = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn ready(ticket: &mut Ticket) -> bool {
        tokio::time::timeout(Duration::from_millis(50), ticket.wait()).await.is_ok()
    }

    #[tokio::test]
    async fn a_ticket_waits_for_every_earlier_one_and_a_dropped_one_frees_the_line() {
        let line = Line::default();
        let mut first = line.ticket();
        let mut second = line.ticket();
        let mut third = line.ticket();
        assert!(ready(&mut first).await, "the first goes at once");
        assert!(!ready(&mut third).await, "the third waits for the second");
        drop(first);
        assert!(!ready(&mut third).await, "a wait cut short still waits when called again");
        assert!(ready(&mut second).await);
        drop(second);
        assert!(ready(&mut third).await);
    }
}
