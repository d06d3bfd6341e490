//! The durable inbox on the wire: `_heron/inbox/*`, and the stream that carries inbox turns
//! to the editor. Each method runs on the session's inbox in the order the editor sent it;
//! a client that wants status updates gets the new counts before the answer, and an item a
//! method made runnable starts only after that answer, so the editor knows it first.

use std::future::Future;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use super::errors::{ErrorCode, coded, unknown_session};
use super::{HeronAgent, Inner, Reply, convert};
use heron_core::session::Session;
use heron_core::session::inbox::{InboxError, InboxStatus, Item};
use heron_core::types::PromptInput;
use heron_protocol::error::INVALID_PARAMS;
use heron_protocol::runtime::Outgoing;
use heron_protocol::{
    ContentBlock, HeronInboxDeleteRequest, HeronInboxDeleteResponse, HeronInboxEnqueueRequest,
    HeronInboxEnqueueResponse, HeronInboxGetRequest, HeronInboxGetResponse, HeronInboxItem, HeronInboxItemId,
    HeronInboxItemStatus, HeronInboxListRequest, HeronInboxListResponse, HeronInboxMoveRequest,
    HeronInboxMoveResponse, HeronInboxRefreshRequest, HeronInboxRefreshResponse, HeronInboxRetryRequest,
    HeronInboxRetryResponse, HeronInboxSetPausedRequest, HeronInboxSetPausedResponse,
    HeronInboxUpdateRequest, HeronInboxUpdateResponse, RpcError, SessionId, TextContent,
};

/// Lets the session's queued items run once the answer that opened it is out (the editor
/// drops updates for a session it does not know yet), streaming their turns like prompts'.
pub(super) fn serve<O: Outgoing>(inner: &Arc<Inner<O>>, session: &Session) {
    let (updates, mut stream) = mpsc::unbounded_channel();
    let (forwarding, id) = (inner.clone(), session.id().to_owned());
    // Ends when the session, which holds the sending end, is closed.
    tokio::spawn(async move {
        while let Some(update) = stream.recv().await {
            super::updates::forward(&forwarding, &id, update).await;
        }
    });
    let inbox = session.inbox().clone();
    heron_rpc::after_response(async move { inbox.serve(updates) });
}

/// Checks a prompt as `session/prompt` does, and that it is not empty.
fn checked_prompt(prompt: Vec<ContentBlock>) -> Result<Vec<PromptInput>, RpcError> {
    if prompt.is_empty() {
        return Err(RpcError::invalid_params("prompt", "an inbox prompt must not be empty"));
    }
    convert::prompt_input(prompt)
}

/// An item as the wire shows it.
fn wire_item(item: Item) -> HeronInboxItem {
    let prompt = match &item.prompt {
        Ok(input) => convert::prompt_blocks(input),
        Err(_) => vec![ContentBlock::Text(TextContent {
            annotations: None,
            meta: None,
            text: "[this prompt can no longer be read]".to_owned(),
        })],
    };
    HeronInboxItem {
        created_at: item.created_at,
        error: item.error,
        item_id: HeronInboxItemId(item.id),
        meta: None,
        position: item.position,
        prompt,
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

fn wire_items(items: Vec<Item>) -> Vec<HeronInboxItem> {
    items.into_iter().map(wire_item).collect()
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
        InboxError::SessionGone(id) => unknown_session(&id),
        InboxError::Internal(cause) => RpcError::internal(&cause),
    }
}

/// Runs `work` on the session's inbox after every inbox method the editor sent before it.
fn ordered<O, T, F, Fut>(agent: &HeronAgent<O>, id: &SessionId, work: F) -> Reply<T>
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
        heron_rpc::after_response(async move {
            inbox.wake();
            drop(ticket);
        });
        Ok(answer)
    })
}

/// `_heron/inbox/enqueue`.
pub(super) fn enqueue<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxEnqueueRequest,
) -> Reply<HeronInboxEnqueueResponse> {
    let prompt = checked_prompt(params.prompt);
    ordered(agent, &params.session_id, move |session| async move {
        let prompt = prompt?;
        let item = session.inbox().enqueue(&prompt, params.position).await.map_err(inbox_error)?;
        Ok(HeronInboxEnqueueResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/list`.
pub(super) fn list<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxListRequest,
) -> Reply<HeronInboxListResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let page = session.inbox().page(params.cursor.as_deref()).await.map_err(inbox_error)?;
        Ok(HeronInboxListResponse {
            items: wire_items(page.items),
            meta: None,
            next_cursor: page.next_cursor,
            paused: page.paused,
        })
    })
}

/// `_heron/inbox/get`.
pub(super) fn get<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxGetRequest,
) -> Reply<HeronInboxGetResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let item = session.inbox().get(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxGetResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/update`: queued items only.
pub(super) fn update<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxUpdateRequest,
) -> Reply<HeronInboxUpdateResponse> {
    let prompt = checked_prompt(params.prompt);
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
) -> Reply<HeronInboxDeleteResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        session.inbox().delete(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxDeleteResponse { meta: None })
    })
}

/// `_heron/inbox/move`: queued items only.
pub(super) fn move_item<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxMoveRequest,
) -> Reply<HeronInboxMoveResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let items = session.inbox().move_to(&params.item_id.0, params.position).await.map_err(inbox_error)?;
        Ok(HeronInboxMoveResponse { items: wire_items(items), meta: None })
    })
}

/// `_heron/inbox/setPaused`.
pub(super) fn set_paused<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxSetPausedRequest,
) -> Reply<HeronInboxSetPausedResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let paused = session.inbox().set_paused(params.paused).await.map_err(inbox_error)?;
        Ok(HeronInboxSetPausedResponse { meta: None, paused })
    })
}

/// `_heron/inbox/retry`: failed items only.
pub(super) fn retry<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxRetryRequest,
) -> Reply<HeronInboxRetryResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let item = session.inbox().retry(&params.item_id.0).await.map_err(inbox_error)?;
        Ok(HeronInboxRetryResponse { item: wire_item(item), meta: None })
    })
}

/// `_heron/inbox/refresh`: the whole inbox, re-read from the store.
pub(super) fn refresh<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronInboxRefreshRequest,
) -> Reply<HeronInboxRefreshResponse> {
    ordered(agent, &params.session_id, move |session| async move {
        let state = session.inbox().all().await.map_err(inbox_error)?;
        Ok(HeronInboxRefreshResponse { items: wire_items(state.items), meta: None, paused: state.paused })
    })
}
