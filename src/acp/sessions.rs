//! Sessions on the wire: `session/new`, `load`, `resume` and `fork` through one
//! [`open_session`] path, and `list`, `close` and `delete`.
//!
//! Opening a session, however it is asked for, is one sequence: check the roots and MCP
//! servers (on the blocking pool: it reads the file system; a bad request fails before
//! anything happens), open it in the manager, bind this connection's editor to it, watch
//! its MCP servers, replay its history (load only), then, once the answer is out, advertise
//! its commands and start its inbox.
//!
//! A load replays the history as the store reads it, page by page, before the session's
//! actor starts with that same history (`Manager::load`): each update waits its turn in the
//! connection's bounded outgoing queue, so a long history never sits in memory twice or
//! piles up ahead of a slow editor.

use std::path::Path;
use std::sync::Arc;

use heron_core::session::goal::Goal;
use heron_core::session::{OpenOptions, Session};
use heron_core::tools::editor::NoEditor;
use heron_core::tools::mcp::ServerSpec;
use heron_core::tools::protected::Protected;
use heron_core::tools::roots::{validate_additional_directories, validate_cwd};
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{
    CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ForkSessionRequest, ForkSessionResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, McpServer, NewSessionRequest, NewSessionResponse, ResumeSessionRequest,
    ResumeSessionResponse, RpcError, SessionConfigOption, SessionId, SessionInfo, SessionModeState,
};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use super::errors::{additional_directories_disabled, cwd_error, root_error, session_error};
use super::{HeronAgent, Reply, convert, mcp, notices, sequencer, status, updates};

/// How many replayed updates go to the writer as one entry: about 40 KiB of lines, enough
/// to make the per-entry costs (a queue slot, a budget wait, a writer wake-up, a write)
/// vanish, small enough that the editor gets the first ones at once and the writer keeps
/// writing while the next burst is encoded.
const REPLAY_BURST: usize = 64;

/// How a session is opened.
enum Opening {
    /// A new one.
    New,
    /// A stored one, its history replayed first.
    Load(String),
    /// A stored one, without replay.
    Resume(String),
    /// A copy of a stored one.
    Fork(String),
}

/// A session opened on this connection, as its answer shows it.
struct Opened {
    session: Arc<Session>,
    config_options: Vec<SessionConfigOption>,
    modes: SessionModeState,
    /// What follows the answer: the commands, the servers' snapshot, notices.
    then: Then,
}

/// Where a session opens, over either protocol version, checked whole before it opens, so
/// one bad entry refuses the whole request and nothing is silently dropped: the roots, then
/// the MCP servers (`mcp`, the edge's own conversion, given the checked cwd). Blocks: it
/// canonicalizes the roots and reads Heron's home.
fn open_options(
    home_root: &Path,
    cwd_only: bool,
    cwd: &str,
    additional: &[String],
    mcp: impl FnOnce(&Path, &Protected) -> Result<Vec<ServerSpec>, RpcError>,
) -> Result<OpenOptions, RpcError> {
    if cwd_only && !additional.is_empty() {
        return Err(additional_directories_disabled());
    }
    let guarded = Protected::for_home(home_root);
    let cwd = validate_cwd(cwd, &guarded).map_err(|(problem, reason)| cwd_error(problem, reason))?;
    let protected = [home_root.to_path_buf()];
    let additional_directories =
        validate_additional_directories(additional, &cwd, &protected).map_err(|e| root_error(&e))?;
    let mcp_servers = mcp(&cwd, &guarded)?;
    Ok(OpenOptions { cwd, additional_directories, editor: Arc::new(NoEditor), mcp_servers })
}

/// [`open_options`] started on the blocking pool now, as the request is read; the reply
/// awaits it.
pub(super) fn checking_options<M>(
    home_root: &Path,
    cwd_only: bool,
    cwd: String,
    additional: Vec<String>,
    mcp: M,
) -> JoinHandle<Result<OpenOptions, RpcError>>
where
    M: FnOnce(&Path, &Protected) -> Result<Vec<ServerSpec>, RpcError> + Send + 'static,
{
    let home_root = home_root.to_path_buf();
    tokio::task::spawn_blocking(move || open_options(&home_root, cwd_only, &cwd, &additional, mcp))
}

/// The one path every way of opening a session takes (see the module docs).
fn open_session<O: Outgoing>(
    agent: &HeronAgent<O>,
    opening: Opening,
    options: JoinHandle<Result<OpenOptions, RpcError>>,
) -> Reply<Opened> {
    let agent = agent.clone();
    Box::pin(async move {
        let inner = agent.inner.clone();
        // An unusable home is the answer whatever the request says, as it was before the
        // check moved off the reader.
        let manager = inner.manager.ready().await?;
        let options = options.await.map_err(|e| RpcError::internal(&e))??;
        let failed = |e| session_error(e, &manager);
        let session = match &opening {
            Opening::New => manager.create(options).await.map_err(failed)?,
            Opening::Load(id) => {
                let mut loading = manager.load(id, options).await.map_err(failed)?;
                // The whole history goes out before the answer, in bursts of updates.
                let mut burst = Vec::with_capacity(REPLAY_BURST);
                while let Some(events) = loading.next_events().await.map_err(failed)? {
                    for event in events {
                        // Images and blobs a prompt attached are read on the blocking pool.
                        let files = convert::files_shown(event).await;
                        burst.extend(convert::replay_updates(event, &files, inner.opted()));
                        if burst.len() >= REPLAY_BURST {
                            inner.send_batch(id, std::mem::take(&mut burst)).await?;
                        }
                    }
                }
                inner.send_batch(id, burst).await?;
                loading.open().await.map_err(failed)?
            }
            Opening::Resume(id) => manager.open(id, options).await.map_err(failed)?,
            Opening::Fork(from) => manager.fork(from, options).await.map_err(failed)?,
        };
        session.attach(agent.editor_for(session.id()));
        let usage = session.status().1.usage;
        let mut then = Then::new();
        match opening {
            Opening::Load(_) => {
                // The context meter ends the replay, so the editor has both when load answers.
                if let Some(update) = usage.as_ref().and_then(convert::usage_update) {
                    inner.send(session.id(), update).await?;
                }
                updates::advertise(&inner, &mut then, &session, None);
            }
            // A resumed session's meter follows the commands, after the answer.
            Opening::Resume(_) => updates::advertise(&inner, &mut then, &session, usage),
            Opening::New | Opening::Fork(_) => updates::advertise(&inner, &mut then, &session, None),
        }
        // The servers' first snapshot follows the commands.
        mcp::watch(&inner, &mut then, &session, true);
        notices::after_open(&inner, &mut then, &session);
        notices::posture_raised(&inner, &mut then, &session, None);
        sequencer::serve(&inner, &mut then, &session);
        let (settings, config_options) = inner.options_of(&session);
        Ok(Opened { modes: convert::modes(&settings), config_options, session, then })
    })
}

/// Opens a session the way `opening` says and answers with `respond`'s shape of it.
fn answer<O: Outgoing, R: Send + 'static>(
    agent: &HeronAgent<O>,
    opening: Opening,
    place: (&str, &[String], &[McpServer]),
    respond: impl FnOnce(Opened) -> R + Send + 'static,
) -> Reply<Answered<R>> {
    let (cwd, additional, servers) = (place.0.to_owned(), place.1.to_vec(), place.2.to_vec());
    let mcp = move |cwd: &Path, guarded: &Protected| mcp::specs(&servers, cwd, guarded);
    let options = checking_options(&agent.inner.home_root, agent.inner.cwd_only, cwd, additional, mcp);
    let opened = open_session(agent, opening, options);
    Box::pin(async move {
        let mut opened = opened.await?;
        let then = std::mem::take(&mut opened.then);
        Ok(Answered::new(respond(opened), then))
    })
}

/// `session/new`.
pub(super) fn new<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: NewSessionRequest,
) -> Reply<Answered<NewSessionResponse>> {
    let place =
        (params.cwd.as_str(), params.additional_directories.as_slice(), params.mcp_servers.as_slice());
    answer(agent, Opening::New, place, |opened| NewSessionResponse {
        config_options: Some(opened.config_options),
        meta: None,
        modes: Some(opened.modes),
        session_id: SessionId(opened.session.id().to_owned()),
    })
}

/// `session/load`: the history replays before the answer.
pub(super) fn load<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: LoadSessionRequest,
) -> Reply<Answered<LoadSessionResponse>> {
    let place =
        (params.cwd.as_str(), params.additional_directories.as_slice(), params.mcp_servers.as_slice());
    answer(agent, Opening::Load(params.session_id.0.clone()), place, |opened| LoadSessionResponse {
        config_options: Some(opened.config_options),
        meta: None,
        modes: Some(opened.modes),
    })
}

/// `session/resume`.
pub(super) fn resume<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: ResumeSessionRequest,
) -> Reply<Answered<ResumeSessionResponse>> {
    let place =
        (params.cwd.as_str(), params.additional_directories.as_slice(), params.mcp_servers.as_slice());
    answer(agent, Opening::Resume(params.session_id.0.clone()), place, |opened| ResumeSessionResponse {
        config_options: Some(opened.config_options),
        meta: None,
        modes: Some(opened.modes),
    })
}

/// `session/fork`.
pub(super) fn fork<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: ForkSessionRequest,
) -> Reply<Answered<ForkSessionResponse>> {
    let place =
        (params.cwd.as_str(), params.additional_directories.as_slice(), params.mcp_servers.as_slice());
    answer(agent, Opening::Fork(params.session_id.0.clone()), place, |opened| ForkSessionResponse {
        config_options: Some(opened.config_options),
        meta: None,
        modes: Some(opened.modes),
        session_id: SessionId(opened.session.id().to_owned()),
    })
}

/// `session/list`: one page, most recent first.
pub(super) fn list<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: ListSessionsRequest,
) -> Reply<ListSessionsResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let page = manager.list(params.cwd, params.cursor).await.map_err(|e| session_error(e, &manager))?;
        Ok(ListSessionsResponse {
            meta: None,
            next_cursor: page.next_cursor,
            sessions: page
                .sessions
                .into_iter()
                .map(|s| SessionInfo {
                    meta: listed_goal(s.goal.as_ref()),
                    additional_directories: s.additional_directories,
                    cwd: s.cwd,
                    session_id: SessionId(s.id),
                    title: s.title,
                    updated_at: Some(s.updated_at),
                })
                .collect(),
        })
    })
}

/// `session/close`.
pub(super) fn close<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: CloseSessionRequest,
) -> Reply<CloseSessionResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        manager.close(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
        inner.notices.forget(&params.session_id.0);
        Ok(CloseSessionResponse { meta: None })
    })
}

/// `session/delete`: an unknown id succeeds.
pub(super) fn delete<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: DeleteSessionRequest,
) -> Reply<DeleteSessionResponse> {
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        manager.delete(&params.session_id.0).await.map_err(|e| session_error(e, &manager))?;
        inner.notices.forget(&params.session_id.0);
        Ok(DeleteSessionResponse { meta: None })
    })
}

/// `_meta.heron.goal` of a listed session that has a goal.
fn listed_goal(stored: Option<&Value>) -> Option<Map<String, Value>> {
    let goal = serde_json::from_value::<Goal>(stored?.clone()).ok()?;
    json!({ "heron": { "goal": status::goal(&goal) } }).as_object().cloned()
}
