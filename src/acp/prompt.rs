//! A prompt's path on the wire, in one line: `session/prompt` -> the core's session (or
//! a slash command, run here without the model, its reply sent at its place among the
//! session's runs; `/compact` and custom commands queue in the session like a prompt) ->
//! the turn's updates, forwarded by the session's sequencer (`sequencer.rs`) -> its ending
//! handed here -> the answer.
//! `session/cancel` ends the running and queued turns.

use std::sync::Arc;

use heron_core::session::commands::Invocation;
use heron_core::session::outbound::{Ending, Place};
use heron_core::session::{Session, Submitted};
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{CancelNotification, PromptRequest, PromptResponse, RpcError, StopReason};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::errors::prompt_error;
use super::{HeronAgent, Reply, convert, settings};

/// `session/prompt`. Runs on the reader up to queueing, so prompts keep their order.
pub(super) fn prompt<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: PromptRequest,
) -> Reply<Answered<PromptResponse>> {
    let submitted = agent
        .session(&params.session_id)
        .and_then(|session| Ok((session.submit(convert::prompt_input(params.prompt)?, None), session)));
    // Queued now, in arrival order; the session's sequencer forwards its updates.
    let (queued, session) = match submitted {
        // v1 clients show the prompt as sent: nothing is echoed.
        Ok((Submitted::Turn { queued, .. }, session)) => (queued, session),
        Ok((Submitted::Local { invocation, place, .. }, session)) => {
            return local(agent, session, place, Ok(invocation));
        }
        Ok((Submitted::Refused { reason, place, .. }, session)) => {
            return local(agent, session, place, Err(reason));
        }
        Err(err) => {
            // A store that failed to open is the answer, before any lookup's error.
            let inner = agent.inner.clone();
            return Box::pin(async move {
                inner.manager.ready().await?;
                Err(err)
            });
        }
    };
    // If this request is dropped ($/cancel_request), even before its future first runs,
    // this prompt alone is cancelled.
    let guard = CancelOnDrop(Some(queued.cancel));
    let ending = queued.result;
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        // Handed on by the sequencer once the turn's updates are out.
        let ending = ending.await.map_err(|_| RpcError::internal(&"the session stopped"))?;
        guard.disarm();
        let Ending { result, outcome: turn_outcome, sent, .. } = ending;
        // The sequencer forwards the session's next run once this answer is queued.
        let mut then = Then::new();
        then.after(move || sent.done());
        let answer = result.map_err(|e| prompt_error(&e, session.runtime().providers().keys())).map(|stop| {
            let transcript = manager.transcript_path(session.id());
            let mut heron = json!({ "transcriptPath": transcript.display().to_string() });
            if let Some(outcome) = turn_outcome.filter(|_| stop == heron_core::types::StopReason::EndTurn) {
                heron["turnOutcome"] = serde_json::to_value(outcome).unwrap_or_default();
            }
            PromptResponse {
                meta: Some(serde_json::Map::from_iter([("heron".to_owned(), heron)])),
                stop_reason: convert::stop_reason(stop),
            }
        });
        Ok(Answered::either(answer, then))
    })
}

/// A prompt Heron answers itself, without the model: one of its slash commands, run here at
/// once (`Ok`), or a refusal (`Err`, the reason). Once the runs before its `place` are out,
/// the reply goes out as an agent message (with the new settings, when the command changed
/// them), then the answer; the session's next run follows that answer.
fn local<O: Outgoing>(
    agent: &HeronAgent<O>,
    session: Arc<Session>,
    place: Place,
    asked: Result<Invocation, String>,
) -> Reply<Answered<PromptResponse>> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let (text, changed) = match asked {
            Ok(invocation) => super::commands::run_here(&session, &invocation).await,
            Err(reason) => (reason, false),
        };
        let sent = place.reached().await;
        let message_id = uuid::Uuid::new_v4().to_string();
        inner.send(session.id(), convert::agent_message(&message_id, text)).await?;
        if changed {
            settings::announce(&inner, &session).await?;
        }
        let mut then = Then::new();
        then.after(move || sent.done());
        Ok(Answered::new(PromptResponse { meta: None, stop_reason: StopReason::EndTurn }, then))
    })
}

/// `session/cancel`: ends the running turn and every queued one. A cancel for an unknown or
/// idle session is a silent no-op.
pub(super) fn cancel<O: Outgoing>(agent: &HeronAgent<O>, params: &CancelNotification) {
    if let Some(session) = agent.inner.manager.now().and_then(|m| m.get(&params.session_id.0)) {
        session.cancel();
    }
}

/// Cancels one prompt when its request is dropped before it was answered.
struct CancelOnDrop(Option<CancellationToken>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}
