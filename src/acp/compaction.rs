//! How a compaction shows on the wire. A client that advertised `session.compaction` gets
//! ACP's compaction entity: `compaction_update` `in_progress` when a summary starts, its text
//! as `compaction_summary_chunk`s, then `completed` with the whole summary (or `failed`,
//! `cancelled`), replayed by `session/load` as one `completed` update. Any other client gets
//! what Heron sent before ACP had the entity: the summary as thought chunks of the
//! compaction's id, closed by a thought marked `_meta.heron.compaction`.

use serde_json::{Value, json};

use heron_core::session::event::{Compaction, CompactionStage};
use heron_protocol::{
    self as p, CompactionId, CompactionStatus, ContentBlock, ContentChunk, MessageId, SessionUpdate,
    TextContent,
};

fn text(text: String) -> ContentBlock {
    ContentBlock::Text(TextContent { annotations: None, meta: None, text })
}

/// `_meta.heron.compaction`: what a compaction changed (over v2 too).
pub(super) fn marker(compaction: &Compaction) -> Value {
    let stage = match compaction.stage {
        CompactionStage::Clipped => "clipped",
        CompactionStage::Summarized => "summarized",
        CompactionStage::Dropped => "dropped",
    };
    let mut marker = json!({
        "stage": stage,
        "replacedEvents": compaction.replaced,
        "clippedOutputs": compaction.clipped,
        "tokensBefore": compaction.tokens_before,
        "tokensAfter": compaction.tokens_after,
    });
    if let Some(instructions) = &compaction.instructions {
        marker["instructions"] = json!(instructions);
    }
    marker
}

fn chunk(id: &str, content: ContentBlock) -> ContentChunk {
    ContentChunk { content, message_id: Some(MessageId(id.to_owned())), meta: None }
}

fn marked() -> impl Fn(&Compaction) -> Option<serde_json::Map<String, Value>> {
    |compaction| json!({ "heron": { "compaction": marker(compaction) } }).as_object().cloned()
}

fn update(id: &str, status: CompactionStatus) -> p::CompactionUpdate {
    p::CompactionUpdate {
        compaction_id: CompactionId(id.to_owned()),
        error: None,
        meta: None,
        status,
        summary: None,
    }
}

/// A summary starting under `id`.
pub(super) fn started(id: &str, entity: bool) -> Vec<SessionUpdate> {
    if entity {
        vec![SessionUpdate::CompactionUpdate(update(id, CompactionStatus::InProgress))]
    } else {
        Vec::new()
    }
}

/// A piece of the summary of `id`.
pub(super) fn piece(id: &str, piece: String, entity: bool) -> SessionUpdate {
    if entity {
        SessionUpdate::CompactionSummaryChunk(p::CompactionSummaryChunk {
            compaction_id: CompactionId(id.to_owned()),
            content: text(piece),
            meta: None,
        })
    } else {
        SessionUpdate::AgentThoughtChunk(chunk(id, text(piece)))
    }
}

/// A summary `id` that ended without a compaction: cancelled, or failed with `error`. The
/// thought chunks of a client without the entity need no closing.
pub(super) fn ended(id: &str, cancelled: bool, error: String, entity: bool) -> Vec<SessionUpdate> {
    if !entity {
        return Vec::new();
    }
    let mut ended =
        update(id, if cancelled { CompactionStatus::Cancelled } else { CompactionStatus::Failed });
    ended.error = (!cancelled).then_some(error);
    vec![SessionUpdate::CompactionUpdate(ended)]
}

/// The compaction, done: live its summary already streamed, so a thought shows only the note;
/// the entity gets the whole summary, which replaces what the chunks built.
pub(super) fn done(compaction: &Compaction, entity: bool, live: bool) -> SessionUpdate {
    if entity {
        let mut done = update(&compaction.message_id, CompactionStatus::Completed);
        done.summary = Some(vec![text(compaction.shown())]);
        done.meta = marked()(compaction);
        SessionUpdate::CompactionUpdate(done)
    } else {
        let shown = if live { compaction.note() } else { compaction.shown() };
        let mut content = chunk(&compaction.message_id, text(shown));
        content.meta = marked()(compaction);
        SessionUpdate::AgentThoughtChunk(content)
    }
}
