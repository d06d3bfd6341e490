//! MCP on the wire: the `mcpServers` an editor gives `session/new`, `load`, `resume` and
//! `fork`, `_heron/session/mcpStatus`, and `_heron/session/mcpStatus_update` for a client
//! that asked for status updates.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::errors::{ErrorCode, coded};
use super::{HeronAgent, Inner, Reply, notices};
use heron_core::secret::clip;
use heron_core::session::Session;
use heron_core::tools::mcp::{McpHub, ServerSpec, ServerState, TransportSpec, reaches_home};
use heron_core::tools::protected::Protected;
use heron_core::types::{Notice, NoticeSeverity};
use heron_protocol::error::INVALID_PARAMS;
use heron_protocol::runtime::{Outgoing, Then};
use heron_protocol::{
    Client, HeronMcpServerState, HeronMcpServerStatus, HeronMcpTransport, HeronSessionMcpStatusRequest,
    HeronSessionMcpStatusResponse, HeronSessionMcpStatusUpdateNotification, HttpHeader, McpServer,
    McpServerHttp, McpServerSse, McpServerStdio, RpcError, SessionId,
};

/// Refuses a server definition whose command or a path argument reaches into Heron's home:
/// a server started there could read the user's keys.
fn check_paths(
    command: &str,
    args: &[String],
    index: usize,
    cwd: &Path,
    protected: &Protected,
) -> Result<(), RpcError> {
    let Some((field, text)) = reaches_home(command, args, cwd, protected) else { return Ok(()) };
    let path = format!("mcpServers[{index}].{field}");
    let reason = format!("{text} is inside Heron's home, which no server Heron starts may use");
    Err(coded(
        INVALID_PARAMS,
        format!("{path}: {reason}"),
        ErrorCode::RootProtected,
        json!({ "path": path, "reason": reason }),
    ))
}

/// An http or sse server's URL: http or https only. An MCP URL is never a file path, so
/// nothing of Heron's home can be named through one.
fn check_url(url: &str, index: usize) -> Result<String, RpcError> {
    heron_core::tools::mcp::parse_url(url)
        .map(|_| url.trim().to_owned())
        .map_err(|reason| RpcError::invalid_params(format!("mcpServers[{index}].url"), reason))
}

/// The editor's headers for a server, as given (their values are secrets: never shown).
fn headers(headers: &[HttpHeader]) -> Vec<(String, String)> {
    headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect()
}

/// One server definition as the editor gave it, from whichever protocol version carried it.
#[derive(Debug)]
pub enum Definition<'a> {
    /// A command Heron starts, speaking MCP on its stdio.
    Stdio {
        /// The server's name.
        name: &'a str,
        /// Its executable.
        command: &'a str,
        /// Its arguments.
        args: &'a [String],
        /// Its environment, name and value.
        env: Vec<(String, String)>,
    },
    /// A streamable HTTP server.
    Http {
        /// The server's name.
        name: &'a str,
        /// Its URL.
        url: &'a str,
        /// The headers to send, name and value (secrets: never shown).
        headers: Vec<(String, String)>,
    },
    /// A legacy SSE server.
    Sse {
        /// The server's name.
        name: &'a str,
        /// Its URL.
        url: &'a str,
        /// The headers to send.
        headers: Vec<(String, String)>,
    },
}

/// The servers as Heron starts them. Headers come only from the editor's definition.
pub fn specs(servers: &[McpServer], cwd: &Path, protected: &Protected) -> Result<Vec<ServerSpec>, RpcError> {
    specs_of(servers.iter().map(definition), cwd, protected)
}

/// `server` as a [`Definition`].
pub fn definition(server: &McpServer) -> Definition<'_> {
    match server {
        McpServer::Stdio(stdio) => Definition::Stdio {
            name: &stdio.name,
            command: &stdio.command,
            args: &stdio.args,
            env: stdio.env.iter().map(|v| (v.name.clone(), v.value.clone())).collect(),
        },
        McpServer::Http(http) => {
            Definition::Http { name: &http.name, url: &http.url, headers: headers(&http.headers) }
        }
        McpServer::Sse(sse) => {
            Definition::Sse { name: &sse.name, url: &sse.url, headers: headers(&sse.headers) }
        }
    }
}

/// The most servers one session starts from the editor's list. Each is a process or a
/// connection, started at once: a list longer than any setup a person writes is refused
/// whole rather than started in part, so the editor learns the limit.
pub const MAX_SERVERS: usize = 64;

/// The servers `definitions` name, checked as [`spec_of`] checks each; more than
/// [`MAX_SERVERS`] is invalid params naming `mcpServers`.
pub fn specs_of<'a>(
    definitions: impl IntoIterator<Item = Definition<'a>>,
    cwd: &Path,
    protected: &Protected,
) -> Result<Vec<ServerSpec>, RpcError> {
    let mut specs = Vec::new();
    for (index, definition) in definitions.into_iter().enumerate() {
        if index == MAX_SERVERS {
            let reason = format!("a session starts at most {MAX_SERVERS} MCP servers");
            let mut refused = RpcError::invalid_params("mcpServers", reason);
            if let Some(Value::Object(data)) = &mut refused.data {
                data.insert("limit".into(), MAX_SERVERS.into());
            }
            return Err(refused);
        }
        specs.push(spec_of(index, definition, cwd, protected)?);
    }
    Ok(specs)
}

/// The server `definition` names, the `index`th of its list, checked: a command must be
/// named and must not reach into Heron's home, a URL must be http(s); an unnamed server is
/// named by its place. The error's `data` has the field's `path` and the `reason`.
pub fn spec_of(
    index: usize,
    definition: Definition<'_>,
    cwd: &Path,
    protected: &Protected,
) -> Result<ServerSpec, RpcError> {
    let (name, transport) = match definition {
        Definition::Stdio { name, command, args, env } => {
            if command.trim().is_empty() {
                return Err(RpcError::invalid_params(
                    format!("mcpServers[{index}].command"),
                    "must name the server's executable",
                ));
            }
            check_paths(command, args, index, cwd, protected)?;
            (name, TransportSpec::Stdio { command: command.into(), args: args.to_vec(), env })
        }
        Definition::Http { name, url, headers } => {
            (name, TransportSpec::Http { url: check_url(url, index)?, headers })
        }
        Definition::Sse { name, url, headers } => {
            (name, TransportSpec::Sse { url: check_url(url, index)?, headers })
        }
    };
    let name = if name.trim().is_empty() { format!("server{}", index + 1) } else { name.to_owned() };
    Ok(ServerSpec { name, transport })
}

/// The `index`th entry of `session/new`'s `mcpServers`, as JSON, read as ACP v1 reads it
/// and checked as [`spec_of`] checks it; else why a session would refuse it. For `heron
/// doctor --mcp`, which reads such a list from a file.
pub fn spec_of_wire(
    index: usize,
    item: &Value,
    cwd: &Path,
    protected: &Protected,
) -> Result<ServerSpec, String> {
    use serde::Deserialize;
    // As older clients send it too: `env` and `headers` as objects.
    let mut item = item.clone();
    if let Value::Object(server) = &mut item {
        heron_protocol::upgrade_mcp_server(server);
    }
    // Stdio is v1's untagged variant: it would take any `type` it does not know.
    let server = match item.get("type").and_then(Value::as_str).unwrap_or("stdio") {
        "stdio" => McpServerStdio::deserialize(&item).map(McpServer::Stdio),
        "http" => McpServerHttp::deserialize(&item).map(McpServer::Http),
        "sse" => McpServerSse::deserialize(&item).map(McpServer::Sse),
        other => return Err(format!("type: `{other}` is not a transport Heron starts (stdio, http, sse)")),
    };
    let server = server.map_err(|err| format!("not an ACP server definition: {err}"))?;
    checked(index, definition(&server), cwd, protected)
}

/// [`spec_of`], or why not as a sentence after the field it is about (`command: ...`).
pub fn checked(
    index: usize,
    definition: Definition<'_>,
    cwd: &Path,
    protected: &Protected,
) -> Result<ServerSpec, String> {
    spec_of(index, definition, cwd, protected).map_err(|err| {
        let data = err.data.as_ref();
        let reason = data.and_then(|d| d["reason"].as_str()).unwrap_or(&err.message);
        match data.and_then(|d| d["path"].as_str()).and_then(|path| path.split_once('.')) {
            Some((_, field)) => format!("{field}: {reason}"),
            None => reason.to_owned(),
        }
    })
}

/// The longest `error` a server status carries, in bytes: a server's own words (its stderr,
/// its errors) are not the client's to store whole.
const MAX_STATUS_ERROR: usize = 2048;

/// Every server of `hub` as the wire shows it.
pub fn statuses(hub: &McpHub) -> Vec<HeronMcpServerStatus> {
    hub.statuses()
        .into_iter()
        .map(|status| {
            let (state, error) = match status.state {
                ServerState::Connecting => (HeronMcpServerState::Connecting, None),
                ServerState::Ready => (HeronMcpServerState::Ready, None),
                ServerState::Disabled => (HeronMcpServerState::Disabled, None),
                ServerState::Failed(reason) => {
                    (HeronMcpServerState::Failed, Some(clip(&reason, MAX_STATUS_ERROR)))
                }
            };
            HeronMcpServerStatus {
                error,
                http_status: status.http_status,
                meta: None,
                name: status.name,
                status: state,
                tools: u32::try_from(status.tool_count).unwrap_or(u32::MAX),
                transport: match status.transport {
                    "http" => HeronMcpTransport::Http,
                    "sse" => HeronMcpTransport::Sse,
                    _ => HeronMcpTransport::Stdio,
                },
            }
        })
        .collect()
}

/// The version of the snapshot's shape (the Reasonix guide's `schemaVersion`).
const SNAPSHOT_VERSION: i64 = 1;

/// The snapshot of `hub`'s servers as `_heron/session/mcpStatus_update` carries it.
fn snapshot(session_id: &str, hub: &McpHub) -> HeronSessionMcpStatusUpdateNotification {
    HeronSessionMcpStatusUpdateNotification {
        meta: None,
        schema_version: SNAPSHOT_VERSION,
        servers: statuses(hub),
        session_id: SessionId(session_id.to_owned()),
    }
}

/// `_heron/session/mcpStatus`: the same snapshot the update carries. It reads the servers'
/// states and starts or probes nothing.
pub(super) fn status<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronSessionMcpStatusRequest,
) -> Reply<HeronSessionMcpStatusResponse> {
    let session = agent.session(&params.session_id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        Ok(HeronSessionMcpStatusResponse {
            meta: None,
            schema_version: SNAPSHOT_VERSION,
            servers: statuses(session?.mcp()),
            session_id: params.session_id,
        })
    })
}

/// A notice for each server of `hub` that failed since `told` was last updated (a server
/// that recovers may be told of again).
fn failures(hub: &McpHub, told: &mut std::collections::HashSet<String>) -> Vec<Notice> {
    let mut notices = Vec::new();
    for status in hub.statuses() {
        match status.state {
            ServerState::Failed(reason) => {
                if told.insert(status.name.clone()) {
                    notices.push(Notice {
                        severity: NoticeSeverity::Error,
                        title: format!(
                            "The MCP server `{}` is not available: its tools are missing",
                            status.name
                        ),
                        description: Some(clip(&reason, MAX_STATUS_ERROR)),
                    });
                }
            }
            _ => {
                told.remove(&status.name);
            }
        }
    }
    notices
}

/// A notice for each message the servers logged at warning or above since the last look.
fn said(hub: &McpHub) -> Vec<Notice> {
    hub.take_said()
        .into_iter()
        .map(|said| {
            let (severity, what) = if said.error {
                (NoticeSeverity::Error, "an error")
            } else {
                (NoticeSeverity::Warning, "a warning")
            };
            let mut description = said.text;
            if said.last {
                description.push_str(" (its further messages of this session go to Heron's log)");
            }
            Notice {
                severity,
                title: format!("The MCP server `{}` logged {what}", said.server),
                description: Some(description),
            }
        })
        .collect()
}

/// Follows the servers of `session` until the session is gone: each failure (at start or
/// later) is a notice, and each change is a `_heron/session/mcpStatus_update` to a client
/// that asked for status updates. One watcher per session and connection. With `first`
/// (a session just opened: new, load, resume, fork), that client also gets the first
/// snapshot, servers or none. All of it follows the answer that opened the session
/// (`then`), since a client drops updates for a session it does not know yet.
pub(super) fn watch<O: Outgoing>(inner: &Arc<Inner<O>>, then: &mut Then, session: &Session, first: bool) {
    if first && inner.status.is_wanted() {
        let snapshot = snapshot(session.id(), session.mcp());
        then.notify_serialized(heron_protocol::Method::HeronSessionMcpStatusUpdate.wire(), &snapshot);
    }
    if let Some(start) = follower(inner, session) {
        then.after(start);
    }
}

/// What starts this connection's watcher of the servers of `session`, unless it has one or
/// the session has no servers (see [`watch`]). Its subscription is taken now, so a change
/// between now and the start is not missed.
pub(super) fn follower<O: Outgoing>(
    inner: &Arc<Inner<O>>,
    session: &Session,
) -> Option<impl FnOnce() + Send + 'static> {
    let hub = session.mcp();
    let follows = !hub.is_empty()
        && inner
            .mcp_watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(session.id().to_owned());
    follows.then(|| {
        let (inner, id, changes) = (inner.clone(), session.id().to_owned(), hub.subscribe());
        // The hub is not kept alive by its watcher: a closed session ends it.
        let hub = Arc::downgrade(hub);
        move || drop(tokio::spawn(follow(inner, id, hub, changes)))
    })
}

/// The watcher's loop (see [`watch`]).
async fn follow<O: Outgoing>(
    inner: Arc<Inner<O>>,
    id: String,
    hub: std::sync::Weak<McpHub>,
    mut changes: tokio::sync::watch::Receiver<u64>,
) {
    let mut told = std::collections::HashSet::new();
    // The prompts last advertised as commands: the session's opening advertised none.
    let mut advertised = Vec::new();
    // A server may have failed before this watcher started.
    if let Some(hub) = hub.upgrade() {
        for notice in failures(&hub, &mut told) {
            notices::notify(&inner, &id, notice).await;
        }
    }
    while changes.changed().await.is_ok() {
        // A closed session's servers stopping is no news to its client.
        let Some(hub) = hub.upgrade().filter(|h| !h.is_stopped()) else { break };
        for notice in failures(&hub, &mut told).into_iter().chain(said(&hub)) {
            notices::notify(&inner, &id, notice).await;
        }
        // A server's prompts came, changed or went: the commands go out again.
        let prompts = hub.prompts();
        if prompts != advertised
            && let Some(session) = inner.manager.now().and_then(|m| m.get(&id))
        {
            let _ = inner.send(&id, super::commands::update(&session.commands(), &hub)).await;
            advertised = prompts;
        }
        if !inner.status.is_wanted() {
            continue;
        }
        if inner.client.heron_session_mcp_status_update(snapshot(&id, &hub)).await.is_err() {
            break;
        }
    }
    inner.mcp_watched.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
}
