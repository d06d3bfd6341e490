//! Sessions over ACP v2: `session/new`, `session/resume` (with the history replayed in v2's
//! whole-message forms when `replayFrom` asks, then the session's state), `list`, `close`
//! and `delete`, on the core's manager, the same one v1 connections use: a session made over
//! v1 resumes here.

use std::path::Path;
use std::sync::Arc;

use heron_core::session::{OpenOptions, Session};
use heron_core::tools::protected::Protected;
use heron_protocol::RpcError;
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::v2::{
    AbsolutePath, CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ListSessionsRequest, ListSessionsResponse, McpServer, NewSessionRequest, NewSessionResponse, ReplayFrom,
    ResumeSessionRequest, ResumeSessionResponse, SessionId, SessionInfo, SessionListCursor,
};
use tokio::task::JoinHandle;

use super::super::errors::session_error;
use super::super::mcp::specs_of;
use super::editor::V2Editor;
use super::{HeronAgentV2, Reply, convert};

/// Where the session opens, checked as over v1 (`acp/sessions.rs`), started on the blocking
/// pool as the request is read: the roots, and the MCP servers through v1's checks (a
/// command must not reach into Heron's home, a URL must be http(s)); a server type v2 may
/// add later is refused by name rather than dropped.
fn checking_options(
    home_root: &Path,
    cwd_only: bool,
    cwd: &AbsolutePath,
    additional: &[AbsolutePath],
    mcp_servers: &[McpServer],
) -> JoinHandle<Result<OpenOptions, RpcError>> {
    let additional = additional.iter().map(|p| p.0.clone()).collect();
    let servers = mcp_servers.to_vec();
    let mcp =
        move |cwd: &Path, guarded: &Protected| specs_of(convert::mcp_definitions(&servers)?, cwd, guarded);
    super::super::sessions::checking_options(home_root, cwd_only, cwd.0.clone(), additional, mcp)
}

/// Binds this connection's editor to a session it opened.
fn attach<O: Outgoing>(agent: &HeronAgentV2<O>, session: &Session) {
    let editor =
        V2Editor::new(agent.inner.client.clone(), session.id().to_owned(), agent.inner.abandoned.clone());
    session.attach(Arc::new(editor));
}

/// `session/new`.
pub(super) fn new<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: NewSessionRequest,
) -> Reply<Answered<NewSessionResponse>> {
    let options = checking_options(
        &agent.inner.home_root,
        agent.inner.cwd_only,
        &params.cwd,
        &params.additional_directories,
        &params.mcp_servers,
    );
    let agent = agent.clone();
    Box::pin(async move {
        let manager = agent.inner.manager.ready().await?;
        let options = options.await.map_err(|e| RpcError::internal(&e))??;
        let session = manager.create(options).await.map_err(|e| session_error(e, &manager))?;
        attach(&agent, &session);
        let mut then = Then::new();
        super::commands::advertise(&agent.inner, &mut then, &session);
        super::prompt::serve(&agent.inner, &mut then, &session);
        let response = NewSessionResponse {
            available_commands: Vec::new(),
            config_options: super::settings::options_of(&session),
            meta: None,
            session_id: SessionId(session.id().to_owned()),
        };
        Ok(Answered::new(response, then))
    })
}

/// `session/resume`: with `replayFrom: {"type": "start"}` the whole history goes out first,
/// page by page as the store reads it; either way the session's state (at rest) follows,
/// before the answer.
pub(super) fn resume<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: ResumeSessionRequest,
) -> Reply<Answered<ResumeSessionResponse>> {
    let options = checking_options(
        &agent.inner.home_root,
        agent.inner.cwd_only,
        &params.cwd,
        &params.additional_directories,
        &params.mcp_servers,
    );
    let replay = match &params.replay_from {
        None => Ok(false),
        Some(ReplayFrom::Start(_)) => Ok(true),
        Some(_) => Err(RpcError::invalid_params("replayFrom", "Heron replays from the start only")),
    };
    let agent = agent.clone();
    let id = params.session_id.0;
    Box::pin(async move {
        let inner = agent.inner.clone();
        let manager = inner.manager.ready().await?;
        let options = options.await.map_err(|e| RpcError::internal(&e))??;
        let replay = replay?;
        let failed = |e| session_error(e, &manager);
        let session = if replay {
            let mut loading = manager.load(&id, options).await.map_err(failed)?;
            while let Some(events) = loading.next_events().await.map_err(failed)? {
                for event in events {
                    for update in convert::replay_updates(event) {
                        inner.send(&id, update).await?;
                    }
                }
            }
            loading.open().await.map_err(failed)?
        } else {
            manager.open(&id, options).await.map_err(failed)?
        };
        attach(&agent, &session);
        let mut then = Then::new();
        super::commands::advertise(&inner, &mut then, &session);
        super::prompt::serve(&inner, &mut then, &session);
        if let Some(update) = session.status().1.usage.as_ref().and_then(convert::usage_update) {
            inner.send(session.id(), update).await?;
        }
        inner.send(session.id(), convert::at_rest()).await?;
        let config_options = super::settings::options_of(&session);
        let response = ResumeSessionResponse { available_commands: Vec::new(), config_options, meta: None };
        Ok(Answered::new(response, then))
    })
}

/// `session/list`: one page, most recent first.
pub(super) fn list<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: ListSessionsRequest,
) -> Reply<ListSessionsResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let (cwd, cursor) = (params.cwd.map(|c| c.0), params.cursor.map(|c| c.0));
        let page = manager.list(cwd, cursor).await.map_err(|e| session_error(e, &manager))?;
        Ok(ListSessionsResponse {
            meta: None,
            next_cursor: page.next_cursor.map(SessionListCursor),
            sessions: page
                .sessions
                .into_iter()
                .map(|s| SessionInfo {
                    additional_directories: s.additional_directories.into_iter().map(AbsolutePath).collect(),
                    cwd: AbsolutePath(s.cwd),
                    meta: None,
                    session_id: SessionId(s.id),
                    title: s.title,
                    updated_at: Some(s.updated_at),
                })
                .collect(),
        })
    })
}

/// `session/close`: a running turn is cancelled and ends (`idle` `cancelled`) before the
/// answer.
pub(super) fn close<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: CloseSessionRequest,
) -> Reply<CloseSessionResponse> {
    let inner = agent.inner.clone();
    let ending =
        agent.session(&params.session_id).ok().map(|session| super::prompt::ending(&inner, &session));
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        if let Some(ending) = ending {
            ending.await;
        }
        manager.close(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
        Ok(CloseSessionResponse { meta: None })
    })
}

/// `session/delete`: an unknown id succeeds.
pub(super) fn delete<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: DeleteSessionRequest,
) -> Reply<DeleteSessionResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        manager.delete(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
        Ok(DeleteSessionResponse { meta: None })
    })
}
