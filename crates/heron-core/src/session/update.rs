//! What a running turn streams to whoever forwards it to the editor, in order: durable
//! events as they are stored, and live-only pieces (chunks, progress, status, barriers).
//! Live channel types live here, apart from the persisted model in [`super::event`].

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use super::event::Event;
use super::snapshot::Snapshot;
use crate::BoxFuture;
use crate::tools::{Progress, ProgressSink};
use crate::types::{ToolOutput, ToolStatus, UsageReport};

/// What a turn streams to the editor, in order.
#[derive(Debug)]
pub enum TurnUpdate {
    /// A durable event, already stored.
    Event(Event),
    /// A piece of an agent message still streaming.
    MessageChunk {
        /// Message id (one per attempt).
        message_id: String,
        /// The text.
        text: String,
    },
    /// A piece of reasoning still streaming.
    ThoughtChunk {
        /// Message id.
        message_id: String,
        /// The text.
        text: String,
    },
    /// A tool call changed state without finishing.
    ToolProgress {
        /// The call id.
        call_id: String,
        /// The new status.
        status: ToolStatus,
        /// Output to show so far (replaces earlier output when not empty).
        output: Vec<ToolOutput>,
    },
    /// Usage changed.
    Usage(UsageReport),
    /// The session's status changed: its sequence number and the new snapshot.
    Status(u64, Box<Snapshot>),
    /// Answered once everything sent before it has been handed to the editor's connection,
    /// so a request to the editor (a permission question, a terminal release) never
    /// overtakes the updates it refers to.
    Flushed(oneshot::Sender<()>),
}

/// Waits until everything sent on `updates` before this call has been handed to the
/// editor's connection (at once when nobody forwards the stream any more).
pub(crate) async fn flushed(updates: &UnboundedSender<TurnUpdate>) {
    let (done, handed_on) = oneshot::channel();
    if updates.send(TurnUpdate::Flushed(done)).is_ok() {
        let _ = handed_on.await;
    }
}

/// One tool call's progress, shown as updates on its turn's stream.
struct CallProgress {
    call_id: String,
    updates: UnboundedSender<TurnUpdate>,
}

impl ProgressSink for CallProgress {
    fn show(&self, output: Vec<ToolOutput>) {
        let _ = self.updates.send(TurnUpdate::ToolProgress {
            call_id: self.call_id.clone(),
            status: ToolStatus::InProgress,
            output,
        });
    }

    fn flushed(&self) -> BoxFuture<()> {
        let updates = self.updates.clone();
        Box::pin(async move { flushed(&updates).await })
    }
}

/// The progress line of call `call_id` on a turn's stream.
pub(crate) fn call_progress(call_id: &str, updates: &UnboundedSender<TurnUpdate>) -> Progress {
    Progress::to(Arc::new(CallProgress { call_id: call_id.to_owned(), updates: updates.clone() }))
}
