//! `_heron/session/rewind` on the wire: `/rewind N` for clients that show no slash
//! commands. It queues in the session like a prompt (so it runs after the prompts sent
//! before it), streams the rewind's turn as `session/update`s (each restore a tool call,
//! asked with the diff it makes) and answers, once that turn ended, with how it ended and
//! the message the conversation stores.

use heron_core::session::checkpoints::Target;
use heron_core::session::outbound::Ending;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{HeronSessionRewindRequest, HeronSessionRewindResponse, RpcError};

use super::errors::prompt_error;
use super::{HeronAgent, Reply, convert};

/// `_heron/session/rewind`. Queues on the reader, so it keeps its place among prompts.
pub(super) fn rewind<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronSessionRewindRequest,
) -> Reply<Answered<HeronSessionRewindResponse>> {
    let turn = usize::try_from(params.turn).unwrap_or(usize::MAX);
    let started = agent.session(&params.session_id).map(|session| {
        let queued = session.rewind(Target::Turn(turn));
        (session, queued.result)
    });
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        let (session, ending) = started?;
        // Handed on by the session's sequencer once the rewind's updates are out.
        let ending = ending.await.map_err(|_| RpcError::internal(&"the session stopped"))?;
        let Ending { result, said, sent, .. } = ending;
        let mut then = Then::new();
        then.after(move || sent.done());
        let answer = result.map_err(|e| prompt_error(&e, session.runtime().providers().keys())).map(|stop| {
            HeronSessionRewindResponse { stop_reason: convert::stop_reason(stop), summary: said, meta: None }
        });
        Ok(Answered::either(answer, then))
    })
}
