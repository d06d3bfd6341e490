//! The durable inbox on the wire: `_heron/inbox/*` and `_heron/session/steer` (a steer is an
//! inbox item); inbox turns reach the editor through the session's sequencer. Each method runs on
//! the session's inbox in the order the editor sent it; a client that wants status updates
//! gets the new counts before the answer, and an item a method made runnable starts only
//! after that answer, so the editor knows it first. Listings carry item metadata; only
//! `get`, `update` and `retry` answer with a prompt.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;

use super::errors::{ErrorCode, coded, session_as_param, unknown_session};
use super::{HeronAgent, Reply, convert};
use heron_core::session::Session;
use heron_core::session::inbox::{
    CAPACITY, Disposition, InboxError, InboxIntent, InboxStatus, Item, NewItem,
};
use heron_core::types::PromptInput;
use heron_protocol::error::INVALID_PARAMS;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{
    ContentBlock, HeronInboxDeleteRequest, HeronInboxDeleteResponse, HeronInboxDisposition,
    HeronInboxEnqueueRequest, HeronInboxEnqueueResponse, HeronInboxGetRequest, HeronInboxGetResponse,
    HeronInboxIntent, HeronInboxItem, HeronInboxItemId, HeronInboxItemStatus, HeronInboxItemSummary,
    HeronInboxListRequest, HeronInboxListResponse, HeronInboxMoveRequest, HeronInboxMoveResponse,
    HeronInboxRefreshRequest, HeronInboxRefreshResponse, HeronInboxRetryRequest, HeronInboxRetryResponse,
    HeronInboxSetPausedRequest, HeronInboxSetPausedResponse, HeronInboxUpdateRequest,
    HeronInboxUpdateResponse, HeronSessionSteerRequest, HeronSessionSteerResponse, RpcError, SessionId,
    TextContent,
};

/// Checks a prompt as `session/prompt` does, and that it is not empty (`empty` says why not).
fn checked_prompt(prompt: Vec<ContentBlock>, empty: &str) -> Result<Vec<PromptInput>, RpcError> {
    if prompt.is_empty() {
        return Err(RpcError::invalid_params("prompt", empty));
    }
    convert::prompt_input(prompt)
}

const EMPTY_ITEM: &str = "an inbox prompt must not be empty";

/// An enqueue's prompt: its content blocks, or its `text` (the Reasonix guide's parameter)
/// as one text block. Exactly one of them.
fn enqueued_prompt(
    prompt: Option<Vec<ContentBlock>>,
    text: Option<String>,
) -> Result<Vec<ContentBlock>, RpcError> {
    match (prompt, text) {
        (Some(prompt), None) => Ok(prompt),
        (None, Some(text)) => {
            Ok(vec![ContentBlock::Text(TextContent { annotations: None, meta: None, text })])
        }
        (Some(_), Some(_)) => Err(RpcError::invalid_params("prompt", "give `prompt` or `text`, not both")),
        (None, None) => Err(RpcError::invalid_params("prompt", "give the prompt as `prompt` or `text`")),
    }
}

/// An item as `get`, `update` and `retry` show it: with its prompt.
fn wire_item(item: Item) -> HeronInboxItem {
    let prompt = match &item.prompt {
        Ok(input) => convert::prompt_blocks(input),
        Err(_) => vec![ContentBlock::Text(TextContent {
            annotations: None,
            meta: None,
            text: "[this prompt can no longer be read]".to_owned(),
        })],
    };
    let summary = wire_summary(item);
    HeronInboxItem {
        created_at: summary.created_at,
        error: summary.error,
        idempotency_key: summary.idempotency_key,
        intent: summary.intent,
        item_id: summary.item_id,
        meta: None,
        position: summary.position,
        preview: summary.preview,
        prompt,
        prompt_bytes: summary.prompt_bytes,
        status: summary.status,
        updated_at: summary.updated_at,
    }
}

/// An item as listings show it: metadata, never the prompt.
fn wire_summary(item: Item) -> HeronInboxItemSummary {
    HeronInboxItemSummary {
        preview: item.preview(),
        prompt_bytes: item.prompt_bytes(),
        created_at: item.created_at,
        error: item.error,
        idempotency_key: item.idempotency_key,
        intent: wire_intent(item.intent),
        item_id: HeronInboxItemId(item.id),
        meta: None,
        position: item.position,
        status: wire_status(item.status),
        updated_at: item.updated_at,
    }
}

fn wire_status(status: InboxStatus) -> HeronInboxItemStatus {
    match status {
        InboxStatus::Queued => HeronInboxItemStatus::Queued,
        InboxStatus::Running => HeronInboxItemStatus::Running,
        InboxStatus::Done => HeronInboxItemStatus::Done,
        InboxStatus::Failed => HeronInboxItemStatus::Failed,
        InboxStatus::Cancelled => HeronInboxItemStatus::Cancelled,
    }
}

fn wire_intent(intent: InboxIntent) -> HeronInboxIntent {
    match intent {
        InboxIntent::Followup => HeronInboxIntent::Followup,
        InboxIntent::Steer => HeronInboxIntent::Steer,
    }
}

fn core_intent(intent: HeronInboxIntent) -> InboxIntent {
    match intent {
        HeronInboxIntent::Followup => InboxIntent::Followup,
        HeronInboxIntent::Steer => InboxIntent::Steer,
    }
}

fn wire_disposition(disposition: Disposition) -> HeronInboxDisposition {
    match disposition {
        Disposition::QueuedFollowup => HeronInboxDisposition::QueuedFollowup,
        Disposition::SteerAccepted => HeronInboxDisposition::SteerAccepted,
    }
}

fn summaries(items: Vec<Item>) -> Vec<HeronInboxItemSummary> {
    items.into_iter().map(wire_summary).collect()
}

/// The wire error for a refused inbox operation.
fn inbox_error(err: InboxError) -> RpcError {
    let reason = err.to_string();
    match err {
        InboxError::NotFound(id) => coded(
            INVALID_PARAMS,
            reason.clone(),
            ErrorCode::ItemNotFound,
            json!({ "path": "itemId", "itemId": id, "reason": reason }),
        ),
        InboxError::WrongStatus { status, needed, .. } => {
            let code = match needed {
                InboxStatus::Failed => ErrorCode::ItemNotFailed,
                _ => ErrorCode::ItemNotQueued,
            };
            coded(
                INVALID_PARAMS,
                reason.clone(),
                code,
                json!({ "path": "itemId", "status": status.as_str(), "reason": reason }),
            )
        }
        InboxError::BadCursor => RpcError::invalid_params("cursor", reason),
        InboxError::BadKey(_) => RpcError::invalid_params("idempotencyKey", reason),
        InboxError::Full { capacity } => coded(
            INVALID_PARAMS,
            reason.clone(),
            ErrorCode::InboxFull,
            json!({ "capacity": capacity, "reason": reason }),
        ),
        InboxError::BytesFull { limit, all_sessions } => coded(
            INVALID_PARAMS,
            reason.clone(),
            ErrorCode::InboxBytesFull,
            json!({ "limit": limit, "scope": if all_sessions { "process" } else { "session" }, "reason": reason }),
        ),
        InboxError::SessionGone(id) => unknown_session(&id),
        InboxError::Internal(cause) => RpcError::internal(&cause),
    }
}

/// Runs `work` on the session's inbox after every inbox method the editor sent before it.
fn ordered<O, T, F, Fut>(agent: &HeronAgent<O>, id: &SessionId, work: F) -> Reply<Answered<T>>
where
    O: Outgoing,
    T: Send + 'static,
    F: FnOnce(Arc<Session>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, RpcError>> + Send + 'static,
{
    // The place in line is taken here, on the reader, in arrival order.
    let started = agent.session(id).map(|session| (session.inbox().in_order(), session));
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        let (mut ticket, session) = started?;
        ticket.wait().await;
        let answer = work(session.clone()).await?;
        inner.status.sync(&inner.client, &session).await;
        // The next change, or the actor's claim of an item, waits until this answer is out.
        let inbox = session.inbox().clone();
        let mut then = Then::new();
        then.after(move || {
            inbox.wake();
            drop(ticket);
        });
        Ok(Answered::new(answer, then))
    })
}

/// `_heron/inbox/enqueue`.
pub(super) fn enqueue<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxEnqueueRequest,
) -> Reply<Answered<HeronInboxEnqueueResponse>> {
    let prompt = enqueued_prompt(params.prompt, params.text).and_then(|p| checked_prompt(p, EMPTY_ITEM));
    let (position, idempotency_key) = (params.position, params.idempotency_key);
    // Absent means a follow-up, as every enqueue was before intents existed.
    let intent = params.intent.map_or(InboxIntent::Followup, core_intent);
    ordered(agent, &params.session_id, move |session| async move {
        let new = NewItem { prompt: prompt?, position, intent, idempotency_key };
        let enqueued = session.inbox().enqueue(new).await.map_err(inbox_error)?;
        Ok(HeronInboxEnqueueResponse {
            disposition: wire_disposition(enqueued.disposition),
            idempotent: enqueued.idempotent,
            status: wire_status(enqueued.item.status),
            position: enqueued.item.position,
            item_id: HeronInboxItemId(enqueued.item.id),
            paused: enqueued.paused,
            meta: None,
        })
    })
}

/// `_heron/session/steer`: guidance committed as an inbox item, for the running turn or as
/// a follow-up. An unknown session is -32602 naming `sessionId`: the session is a
/// parameter of this call, not a resource it looks up.
pub(super) fn steer<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronSessionSteerRequest,
) -> Reply<Answered<HeronSessionSteerResponse>> {
    let prompt = checked_prompt(params.prompt, "steering input must not be empty");
    let steered = ordered(agent, &params.session_id, move |session| async move {
        let new =
            NewItem { prompt: prompt?, position: None, intent: InboxIntent::Steer, idempotency_key: None };
        let enqueued = session.inbox().enqueue(new).await.map_err(inbox_error)?;
        Ok(HeronSessionSteerResponse {
            disposition: wire_disposition(enqueued.disposition),
            item_id: HeronInboxItemId(enqueued.item.id),
            meta: None,
        })
    });
    Box::pin(async move { steered.await.map_err(session_as_param) })
}

/// `_heron/inbox/list`: metadata only.
pub(super) fn list<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxListRequest,
) -> Reply<Answered<HeronInboxListResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        let page = session.inbox().page(params.cursor.as_deref()).await.map_err(inbox_error)?;
        Ok(HeronInboxListResponse {
            items: summaries(page.items),
            meta: None,
            next_cursor: page.next_cursor,
            paused: page.paused,
            recovered: page.recovered,
            capacity: CAPACITY,
        })
    })
}

/// `_heron/inbox/get`.
pub(super) fn get<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxGetRequest,
) -> Reply<Answered<HeronInboxGetResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        let item = session.inbox().get(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxGetResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/update`: queued items only (a follow-up not started, a steer not applied).
pub(super) fn update<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxUpdateRequest,
) -> Reply<Answered<HeronInboxUpdateResponse>> {
    let prompt = checked_prompt(params.prompt, EMPTY_ITEM);
    ordered(agent, &params.session_id, move |session| async move {
        let prompt = prompt?;
        let item = session.inbox().update(&params.item_id.0, &prompt).await.map_err(inbox_error)?;
        Ok(HeronInboxUpdateResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/delete`: a running item's turn is cancelled.
pub(super) fn delete<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxDeleteRequest,
) -> Reply<Answered<HeronInboxDeleteResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        session.inbox().delete(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxDeleteResponse { meta: None })
    })
}

/// `_heron/inbox/move`: queued items only.
pub(super) fn move_item<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxMoveRequest,
) -> Reply<Answered<HeronInboxMoveResponse>> {
    // `toIndex` is the Reasonix guide's name for the place.
    let place = match (params.position, params.to_index) {
        (Some(place), None) | (None, Some(place)) => Ok(place),
        (Some(_), Some(_)) => {
            Err(RpcError::invalid_params("position", "give `position` or `toIndex`, not both"))
        }
        (None, None) => {
            Err(RpcError::invalid_params("position", "give the place as `position` or `toIndex`"))
        }
    };
    ordered(agent, &params.session_id, move |session| async move {
        let items = session.inbox().move_to(&params.item_id.0, place?).await.map_err(inbox_error)?;
        Ok(HeronInboxMoveResponse { items: summaries(items), meta: None })
    })
}

/// `_heron/inbox/setPaused`.
pub(super) fn set_paused<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxSetPausedRequest,
) -> Reply<Answered<HeronInboxSetPausedResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        let paused = session.inbox().set_paused(params.paused).await.map_err(inbox_error)?;
        Ok(HeronInboxSetPausedResponse { meta: None, paused })
    })
}

/// `_heron/inbox/retry`: failed items only.
pub(super) fn retry<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxRetryRequest,
) -> Reply<Answered<HeronInboxRetryResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        let item = session.inbox().retry(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxRetryResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/refresh`: the whole inbox's metadata, re-read from the store.
pub(super) fn refresh<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxRefreshRequest,
) -> Reply<Answered<HeronInboxRefreshResponse>> {
    ordered(agent, &params.session_id, move |session| async move {
        if let Some(item) = &params.item_id {
            session.inbox().get(&item.0).await.map_err(inbox_error)?;
        }
        let state = session.inbox().all().await.map_err(inbox_error)?;
        Ok(HeronInboxRefreshResponse {
            items: summaries(state.items),
            meta: None,
            paused: state.paused,
            recovered: state.recovered,
            capacity: CAPACITY,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_past_the_budget_of_every_session_is_refused_with_the_process_scope() {
        let limit = heron_store::INBOX_STORE_BYTES;
        let refused = inbox_error(InboxError::from(heron_store::StoreError::InboxBytesFull {
            limit,
            all_sessions: true,
        }));
        assert_eq!(refused.code, INVALID_PARAMS);
        let data = refused.data.expect("data");
        assert_eq!(
            (data["code"].as_str(), data["scope"].as_str()),
            (Some("inbox.bytes_full"), Some("process"))
        );
        assert_eq!(data["limit"], limit);
    }
}
