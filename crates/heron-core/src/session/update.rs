//! What a running turn streams to whoever forwards it to the editor, in order: durable
//! events as they are stored, and live-only pieces (chunks, progress, status, and requests
//! to the editor, sent in their place). Live channel types live here, apart from the
//! persisted model in [`super::event`].

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::event::Event;
use super::snapshot::Snapshot;
use crate::BoxFuture;
use crate::tools::{Progress, ProgressSink};
use crate::types::{Notice, ToolOutput, ToolStatus, UsageReport};

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
        /// Its share of the turn's [`ChunkBudget`], given back when the update is dropped.
        held: Held,
    },
    /// A piece of reasoning still streaming.
    ThoughtChunk {
        /// Message id.
        message_id: String,
        /// The text.
        text: String,
        /// Its share of the turn's [`ChunkBudget`].
        held: Held,
    },
    /// A compaction started writing its summary, under `id` (the id of the
    /// [`Event::Compacted`] that ends it well, and of its [`TurnUpdate::CompactionChunk`]s).
    CompactionStarted {
        /// The compaction's id.
        id: String,
    },
    /// A piece of a compaction's summary still streaming.
    CompactionChunk {
        /// The compaction's id.
        id: String,
        /// The text.
        text: String,
        /// Its share of the turn's [`ChunkBudget`].
        held: Held,
    },
    /// A compaction that started ended without its [`Event::Compacted`]: its summary request
    /// failed, was retried under a new id, or the turn was cancelled.
    CompactionEnded {
        /// The compaction's id.
        id: String,
        /// Whether the turn was cancelled (otherwise it failed).
        cancelled: bool,
        /// Why, for a failure.
        error: String,
    },
    /// Something the user should know now (a model request being retried).
    Notice(Notice),
    /// A tool call changed state without finishing.
    ToolProgress {
        /// The call id.
        call_id: String,
        /// The new status.
        status: ToolStatus,
        /// Output to show so far (replaces earlier output when not empty).
        output: Vec<ToolOutput>,
    },
    /// More output of a running tool call, after what it shows so far (a local command's
    /// output as it arrives). The call's result carries all of it again, so an edge that
    /// cannot add to a call's output may leave these out.
    ToolOutputChunk {
        /// The call id.
        call_id: String,
        /// The piece.
        output: ToolOutput,
    },
    /// Usage changed.
    Usage(UsageReport),
    /// How the turn ended, sent once just before a turn that ends `end_turn` answers.
    Outcome(crate::types::TurnOutcome),
    /// The session got a title (from its first prompt), stored at `updated_at`.
    Titled {
        /// The title.
        title: String,
        /// When the record changed (RFC 3339).
        updated_at: String,
    },
    /// The session's status changed: its sequence number and the new snapshot.
    Status(u64, Box<Snapshot>),
    /// A request to the editor, for whoever forwards the run to send in this place (see
    /// [`EditorRequest::send`]): so no request overtakes the updates it refers to (a
    /// permission question, a tool's `fs/*`, a terminal release). Put here by
    /// `WatchedEditor` alone.
    Request(EditorRequest),
}

impl TurnUpdate {
    /// Takes this update's share of the chunk budget out, so whoever forwards it can give
    /// the share back only once the update has reached the editor's connection.
    pub fn take_held(&mut self) -> Held {
        match self {
            TurnUpdate::MessageChunk { held, .. }
            | TurnUpdate::ThoughtChunk { held, .. }
            | TurnUpdate::CompactionChunk { held, .. } => std::mem::take(held),
            _ => Held::default(),
        }
    }
}

/// A share of a [`ChunkBudget`]; dropping it gives the share back.
#[derive(Default)]
pub struct Held(Option<tokio::sync::OwnedSemaphorePermit>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Held")
            .field(&self.0.as_ref().map_or(0, tokio::sync::OwnedSemaphorePermit::num_permits))
            .finish()
    }
}

/// Bounds the bytes of streamed text a turn has sent that have not reached the editor's
/// connection yet: past it, the turn waits (and so stops reading the model), so a slow
/// editor slows the model stream down instead of growing Heron's memory.
#[derive(Debug, Clone)]
pub struct ChunkBudget(Arc<tokio::sync::Semaphore>);

impl ChunkBudget {
    /// The bytes in flight a turn may have.
    pub const BYTES: usize = 1024 * 1024;

    /// A fresh budget.
    pub fn new() -> Self {
        Self(Arc::new(tokio::sync::Semaphore::new(Self::BYTES)))
    }

    /// Waits for room for `bytes` (at most the whole budget); `None` when cancelled first.
    pub async fn hold(&self, bytes: usize, cancel: &tokio_util::sync::CancellationToken) -> Option<Held> {
        let wanted = u32::try_from(bytes.clamp(1, Self::BYTES)).unwrap_or(u32::MAX);
        tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            permit = self.0.clone().acquire_many_owned(wanted) => permit.ok().map(|p| Held(Some(p))),
        }
    }
}

impl Default for ChunkBudget {
    fn default() -> Self {
        Self::new()
    }
}

/// A request to the editor waiting for its place in a run.
pub struct EditorRequest(BoxFuture<()>);

impl EditorRequest {
    /// `send`, which puts the request in the editor's connection and hands the wait for its
    /// answer to the turn.
    pub(crate) fn new(send: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Box::pin(send))
    }

    /// Puts the request in the editor's connection; returns once it is queued there (its
    /// answer goes to the turn that made it). Dropped unsent, the turn hears that the
    /// connection is gone.
    pub async fn send(self) {
        self.0.await;
    }
}

impl std::fmt::Debug for EditorRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EditorRequest")
    }
}

/// One tool call's progress, shown as updates on its turn's stream.
pub(crate) struct CallProgress {
    call_id: String,
    updates: UnboundedSender<TurnUpdate>,
    /// What runs once the call's final update is on the stream (a request to the editor
    /// among them goes out behind it).
    after: std::sync::Mutex<Vec<BoxFuture<()>>>,
}

impl CallProgress {
    /// Runs what the call left for after its final update (call once that update is sent),
    /// within `limit`: a release the editor never answers must not hold the turn. A request
    /// to the editor among them goes out after that update (`WatchedEditor`).
    pub(crate) async fn finish(&self, limit: std::time::Duration) {
        let tasks =
            std::mem::take(&mut *self.after.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if tasks.is_empty() {
            return;
        }
        if tokio::time::timeout(limit, futures_util::future::join_all(tasks)).await.is_err() {
            tracing::debug!(call = %self.call_id, "cleanup after a tool call took too long; left it");
        }
    }
}

impl ProgressSink for CallProgress {
    fn show(&self, output: Vec<ToolOutput>) {
        let _ = self.updates.send(TurnUpdate::ToolProgress {
            call_id: self.call_id.clone(),
            status: ToolStatus::InProgress,
            output,
        });
    }

    fn append(&self, output: ToolOutput) {
        let _ = self.updates.send(TurnUpdate::ToolOutputChunk { call_id: self.call_id.clone(), output });
    }

    fn call_id(&self) -> Option<&str> {
        Some(&self.call_id)
    }

    fn after_result(&self, task: BoxFuture<()>) -> Option<BoxFuture<()>> {
        self.after.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
        None
    }
}

/// The progress line of call `call_id` on a turn's stream; the turn keeps the sink to run
/// what the call leaves for after its result ([`CallProgress::finish`]).
pub(crate) fn call_progress(
    call_id: &str,
    updates: &UnboundedSender<TurnUpdate>,
) -> (Progress, Arc<CallProgress>) {
    let sink = Arc::new(CallProgress {
        call_id: call_id.to_owned(),
        updates: updates.clone(),
        after: std::sync::Mutex::default(),
    });
    (Progress::to(sink.clone()), sink)
}
