//! `_heron/session/rewind` on the wire: `/rewind N` for clients that show no slash
//! commands. It queues in the session like a prompt (so it runs after the prompts sent
//! before it), streams the rewind's turn as `session/update`s (each restore a tool call,
//! asked with the diff it makes) and answers, once that turn ended, with how it ended and
//! the message the conversation stores.

use heron_core::session::checkpoints::Target;
use heron_core::session::update::TurnUpdate;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{HeronSessionRewindRequest, HeronSessionRewindResponse, RpcError};
use tokio::sync::mpsc;

use super::errors::prompt_error;
use super::{HeronAgent, Reply, convert, updates};

/// The most of the rewind's message the answer repeats: the message itself streamed whole.
const SUMMARY_CAP: usize = 64 * 1024;

/// `_heron/session/rewind`. Queues on the reader, so it keeps its place among prompts.
pub(super) fn rewind<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronSessionRewindRequest,
) -> Reply<Answered<HeronSessionRewindResponse>> {
    let turn = usize::try_from(params.turn).unwrap_or(usize::MAX);
    let started = agent.session(&params.session_id).map(|session| {
        let (sender, stream) = mpsc::unbounded_channel();
        let queued = session.rewind(Target::Turn(turn), sender);
        (session, stream, queued.result, queued.delivered)
    });
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        let (session, mut stream, result, delivered) = started?;
        let mut summary = String::new();
        while let Some(update) = stream.recv().await {
            match &update {
                TurnUpdate::Outcome(_) => continue,
                TurnUpdate::MessageChunk { text, .. } => append_bounded(&mut summary, text),
                _ => {}
            }
            updates::forward(&inner, session.id(), update).await;
        }
        // The session's next turn starts once this answer is queued, never before.
        let mut then = Then::new();
        then.after(move || delivered.done());
        let answer =
            result.await.map_err(|_| RpcError::internal(&"the session stopped")).and_then(|outcome| {
                let stop = outcome.map_err(|e| prompt_error(e, session.runtime().providers().keys()))?;
                Ok(HeronSessionRewindResponse {
                    stop_reason: convert::stop_reason(stop),
                    summary,
                    meta: None,
                })
            });
        Ok(Answered::either(answer, then))
    })
}

/// Appends `text` to `summary` up to [`SUMMARY_CAP`] bytes, cut on a character boundary.
fn append_bounded(summary: &mut String, text: &str) {
    let room = SUMMARY_CAP.saturating_sub(summary.len());
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    summary.push_str(&text[..end]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_bounded_on_a_character_boundary() {
        let mut summary = "a".repeat(SUMMARY_CAP - 1);
        append_bounded(&mut summary, "éé");
        assert_eq!(summary.len(), SUMMARY_CAP - 1, "a split character is left out whole");
        let mut short = String::from("Rewound");
        append_bounded(&mut short, " the files");
        assert_eq!(short, "Rewound the files");
    }
}
