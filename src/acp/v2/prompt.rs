//! A prompt over ACP v2: `session/prompt` queues it in the core's session and is answered at
//! once with the id its user message will carry; the turn then reports, as `session/update`s,
//! `state_update` `running`, the user message, its output, and `idle` with the stop reason
//! (or the error the turn failed with). `session/cancel` ends the running and queued turns;
//! `tool_call/cancel` ends one call and the turn goes on.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use heron_core::llm::registry::Providers;
use heron_core::session::outbound::{Kind, Run};
use heron_core::session::update::TurnUpdate;
use heron_core::session::{Queued, Session, Submitted};
use heron_protocol::RpcError;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::v2::{
    CancelSessionNotification, CancelTerminalRequest, CancelTerminalResponse, CancelToolCallRequest,
    CancelToolCallResponse, MessageId, PromptRequest, PromptResponse,
};
use tokio::sync::watch;

use super::super::errors::prompt_error;
use super::{HeronAgentV2, Inner, Reply, commands as wire_commands, convert};

/// `session/prompt`. Runs on the reader up to queueing, so prompts keep their order.
pub(super) fn prompt<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: PromptRequest,
) -> Reply<Answered<PromptResponse>> {
    let message_id = uuid::Uuid::new_v4().to_string();
    let started = agent.session(&params.session_id).and_then(|session| {
        let input = convert::prompt_input(params.prompt)?;
        // The user message the session records is sent back with the id this answer gives.
        Ok((session.submit(input, Some(message_id.clone())), session))
    });
    let inner = agent.inner.clone();
    Box::pin(async move {
        let (submitted, session) = started?;
        let mut then = Then::new();
        // What follows goes out after the answer that gave the client the message id; the
        // follow-up only starts it, since a turn lasts.
        let following: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = match submitted {
            Submitted::Turn { mut queued } => {
                let active = inner.turns.begin(session.id());
                // The run goes out once this answer, which names its message, is queued.
                let accepted = std::mem::take(&mut queued.accepted);
                then.after(move || accepted.done());
                Box::pin(until_ended(inner, session, queued, active))
            }
            Submitted::Local { invocation, line, place } => {
                let id = message_id.clone();
                Box::pin(
                    async move { wire_commands::run(&inner, &session, invocation, (line, id), place).await },
                )
            }
            Submitted::Refused { line, reason, place } => {
                let id = message_id.clone();
                let reply = wire_commands::Reply { text: reason, changed: false };
                Box::pin(
                    async move { wire_commands::answer(&inner, &session, (line, id), reply, place).await },
                )
            }
        };
        then.after(move || drop(tokio::spawn(following)));
        Ok(Answered::new(PromptResponse { message_id: MessageId(message_id), meta: None }, then))
    })
}

/// Counts a queued prompt's turn as this connection's until the sequencer has reported it
/// `idle`. A prompt refused before it queued (its queue was full) never runs: its end is
/// reported here, as `running` then `idle` with the error.
async fn until_ended<O: Outgoing>(
    inner: Arc<Inner<O>>,
    session: Arc<Session>,
    queued: Queued,
    active: Active,
) {
    let ending = queued.result.await;
    if let Ok(ending) = ending {
        if ending.refused() {
            let ended = ending.result.map_err(|e| prompt_error(&e, session.runtime().providers().keys()));
            let _ = inner.send(session.id(), convert::running()).await;
            let _ = inner.send(session.id(), convert::idle(ended)).await;
        }
        ending.sent.done();
    }
    drop(active);
}

/// Starts forwarding `session`'s runs once the answer that made it known is queued, or
/// once that answer will never be (its request was cancelled): each run from `running` to
/// `idle`, in the order the session ran them, the next only after. A session this
/// connection already serves keeps its sequencer.
pub(super) fn serve<O: Outgoing>(inner: &Arc<Inner<O>>, then: &mut Then, session: &Arc<Session>) {
    let Some(mut outbound) = session.outbound() else { return };
    let (known, answered) = tokio::sync::oneshot::channel::<()>();
    then.after(move || {
        let _ = known.send(());
    });
    // Weak: the session's life is its manager's, and this task ends with it.
    let (inner, session) = (inner.clone(), Arc::downgrade(session));
    // Ends when the session closes: its actor holds the sending end.
    drop(tokio::spawn(async move {
        let _ = answered.await;
        while let Some(run) = outbound.next().await {
            let Some(open) = session.upgrade() else { break };
            let (id, providers) = (open.id().to_owned(), open.runtime().providers().clone());
            drop(open);
            Box::pin(forward(&inner, &id, &providers, run)).await;
        }
    }));
}

/// Forwards one run to the editor, from `running` to `idle`, then hands its end on.
async fn forward<O: Outgoing>(inner: &Inner<O>, id: &str, providers: &Providers, mut run: Run) {
    match run.kind() {
        // Over v2 a reload is answered at once and not told later: nothing ran for the editor.
        Kind::Reload => return,
        // A slash command's reply, sent by its asker as a turn of its own once handed on.
        Kind::Placed => {
            let (result, ended) = run.end().await;
            return ended.hand_on(result).await;
        }
        Kind::Asked | Kind::Inbox => {}
    }
    let mut started = false;
    while let Some(mut update) = run.next().await {
        // The first thing a turn sends (its status) says it started.
        if !started {
            started = true;
            let _ = inner.send(id, convert::running()).await;
            if let Some((line, message_id)) = run.echo() {
                let message_id = message_id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
                let _ = inner.send(id, convert::user_line(line.to_owned(), message_id)).await;
            }
        }
        // A request to the editor goes out here, in its place.
        if let TurnUpdate::Request(request) = update {
            request.send().await;
            continue;
        }
        // The chunk's share of the turn's budget goes back once it is queued for the
        // editor, so a slow editor slows the turn down.
        let held = update.take_held();
        let updates = convert::turn_updates(update);
        // The turn goes on after a question dropped unanswered: it runs again.
        if !updates.is_empty() && inner.abandoned.take(id) {
            let _ = inner.send(id, convert::running()).await;
        }
        for update in updates {
            // A client that stopped reading does not stop the turn.
            let _ = inner.send(id, update).await;
        }
        drop(held);
    }
    // `idle` ends a wait as well as `running` would.
    inner.abandoned.take(id);
    let (result, ended) = run.end().await;
    // A prompt cancelled before it ran still ends where the client can see it.
    if !started {
        let _ = inner.send(id, convert::running()).await;
    }
    let idle = result.as_ref().map(|stop| *stop).map_err(|e| prompt_error(e, providers.keys()));
    let _ = inner.send(id, convert::idle(idle)).await;
    ended.hand_on(result).await;
}

/// `session/cancel`: ends the running turn and every queued one; unknown or idle sessions
/// are a silent no-op.
pub(super) fn cancel<O: Outgoing>(agent: &HeronAgentV2<O>, params: &CancelSessionNotification) {
    if let Ok(session) = agent.session(&params.session_id) {
        session.cancel();
    }
}

/// `tool_call/cancel`: ends one call that is pending, waiting for approval or running (one
/// pending never starts); it ends `cancelled`, the model reads that the user cancelled it,
/// and the turn goes on.
pub(super) fn cancel_tool_call<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: &CancelToolCallRequest,
) -> Result<CancelToolCallResponse, RpcError> {
    let session = agent.session(&params.session_id)?;
    if session.cancel_tool_call(&params.tool_call_id.0) {
        Ok(CancelToolCallResponse { meta: None })
    } else {
        Err(RpcError::invalid_params(
            "toolCallId",
            format!("no tool call `{}` is pending or running in this session", params.tool_call_id.0),
        ))
    }
}

/// `terminal/cancel`: Heron reports no terminals over v2 (a command is a tool call, and
/// `tool_call/cancel` ends it), so no id names one.
pub(super) fn cancel_terminal<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: &CancelTerminalRequest,
) -> Result<CancelTerminalResponse, RpcError> {
    agent.session(&params.session_id)?;
    Err(RpcError::invalid_params(
        "terminalId",
        format!(
            "no terminal `{}`: Heron runs commands as tool calls over ACP v2; cancel one with tool_call/cancel",
            params.terminal_id.0
        ),
    ))
}

/// Cancels the session's turns and resolves once this connection has reported each of them
/// ended (`session/close` answers after that).
pub(super) fn ending<O: Outgoing>(inner: &Inner<O>, session: &Session) -> impl Future<Output = ()> + use<O> {
    session.cancel();
    inner.turns.ended(session.id())
}

/// The turns this connection is forwarding, counted per session.
#[derive(Debug, Default)]
pub(super) struct Turns(Mutex<HashMap<String, watch::Sender<usize>>>);

impl Turns {
    fn begin(&self, session_id: &str) -> Active {
        let mut turns = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = turns.entry(session_id.to_owned()).or_insert_with(|| watch::channel(0).0).clone();
        count.send_modify(|n| *n += 1);
        Active(count)
    }

    fn ended(&self, session_id: &str) -> impl Future<Output = ()> + use<> {
        let watching = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session_id)
            .map(watch::Sender::subscribe);
        async move {
            if let Some(mut count) = watching {
                let _ = count.wait_for(|n| *n == 0).await;
            }
        }
    }
}

/// One forwarded turn; dropping it counts the turn ended.
struct Active(watch::Sender<usize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
