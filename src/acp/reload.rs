//! `_heron/session/reloadExtensions` on the wire, and what follows a reload.
//!
//! Idle, the reload runs and answers the session's commands and MCP servers after it (and
//! the files that could not be used in `_meta.heron.problems`); once that answer is out, a
//! fresh `available_commands_update` follows, and a `config_option_update` when the models
//! on offer changed. During a turn it answers at once with `queued: true` and what the
//! session has now; when the queued reload succeeds, after the turn, the commands and the
//! config options follow (watched per session and connection, like MCP status). A reload that fails is
//! -32603 with `data.code: "extensions.reload_failed"` naming the file and line, and the
//! session keeps everything it had; a queued one has no request to fail, so its failure is
//! told by the session status (`extensions.lastReload`, sent to a client that wants status
//! updates, and read by `_heron/session/status`).

use std::sync::Arc;

use super::errors::reload_error;
use super::{HeronAgent, Inner, Reply, commands, mcp, notices};
use heron_core::session::Session;
use heron_core::session::reload::ReloadRequest;
use heron_core::types::{Notice, NoticeSeverity};
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{
    ConfigOptionUpdate, HeronReloadExtensionsRequest, HeronReloadExtensionsResponse, RpcError, SessionUpdate,
};

/// `_heron/session/reloadExtensions`.
pub(super) fn reload<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronReloadExtensionsRequest,
) -> Reply<Answered<HeronReloadExtensionsResponse>> {
    let session = agent.session(&params.session_id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        let session = session?;
        let running = match session.reload() {
            ReloadRequest::Queued => return Ok(answer(&session, true).into()),
            ReloadRequest::Running(running) => running,
        };
        let reloaded = running.await.map_err(|_| RpcError::internal(&"the session stopped"))?;
        // The status's `extensions.lastReload` changed either way; a client that wants
        // updates has it before the answer, as after every vendor method.
        inner.status.sync(&inner.client, &session).await;
        let reloaded = reloaded.map_err(|err| reload_error(&err, session.runtime().providers().keys()))?;
        let mut then = Then::new();
        mcp::watch(&inner, &mut then, &session, false);
        if let Some(notice) = left_out(&session.status().1.extensions.problems) {
            notices::then_notify(&inner, &mut then, session.id(), notice);
        }
        inner.then_send(&mut then, session.id(), commands::update(&reloaded.catalog, session.mcp()));
        if reloaded.choices_changed {
            inner.then_send(&mut then, session.id(), options_update(&inner, &session));
        }
        let mut response = answer(&session, false);
        response.meta = commands::meta(&reloaded.catalog);
        Ok(Answered::new(response, then))
    })
}

/// The notice of extension files a reload left out, if any: how many, and the first few.
fn left_out(problems: &[heron_core::extensions::Problem]) -> Option<Notice> {
    const SHOWN: usize = 5;
    if problems.is_empty() {
        return None;
    }
    let mut lines: Vec<String> = problems
        .iter()
        .take(SHOWN)
        .map(|p| {
            let at = p.line.map(|line| format!(" line {line}")).unwrap_or_default();
            format!("{}{at}: {}", p.file.display(), p.message)
        })
        .collect();
    if problems.len() > SHOWN {
        lines.push(format!("and {} more (`/status` lists them)", problems.len() - SHOWN));
    }
    Some(Notice {
        severity: NoticeSeverity::Warning,
        title: format!("{} extension files could not be used", problems.len()),
        description: Some(lines.join("\n")),
    })
}

/// What the session offers now.
fn answer(session: &Session, queued: bool) -> HeronReloadExtensionsResponse {
    HeronReloadExtensionsResponse {
        available_commands: commands::available(&session.commands(), session.mcp()),
        mcp_servers: mcp::statuses(session.mcp()),
        meta: None,
        queued: queued.then_some(true),
    }
}

/// The session's config options as they stand, as an update.
fn options_update<O: Outgoing>(inner: &Inner<O>, session: &Session) -> SessionUpdate {
    let (_, config_options) = inner.options_of(session);
    SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate { config_options, meta: None })
}

/// Sends the commands, then the config options when given.
async fn announce<O: Outgoing>(
    inner: &Inner<O>,
    id: &str,
    commands: SessionUpdate,
    options: Option<SessionUpdate>,
) {
    for update in std::iter::once(commands).chain(options) {
        if let Err(err) = inner.send(id, update).await {
            tracing::debug!(%err, "could not announce the reload");
            return;
        }
    }
}

/// Tells the client of one queued reload of `session` that ended (the session's sequencer
/// reaches it behind the turn it waited for): the status (`extensions.lastReload`, for a
/// client that wants updates) either way, and after a success the commands and config
/// options. Its caller had its answer long ago, so a failure, or files left out, is also a
/// notice.
pub(super) async fn tell<O: Outgoing>(inner: &Arc<Inner<O>>, id: &str, session: &Arc<Session>) {
    inner.status.sync(&inner.client, session).await;
    let (_, snapshot) = session.status();
    if let Some(error) = snapshot.extensions.last_reload.as_ref().and_then(|reload| reload.error.as_ref()) {
        // Nothing changed: the notice and the status say why; there is nothing to announce.
        let at = error.line.map(|line| format!(" line {line}")).unwrap_or_default();
        let notice = Notice {
            severity: NoticeSeverity::Error,
            title: "Reloading the extensions failed; the session keeps what it had".to_owned(),
            description: Some(format!("{}{at}: {}", error.file.display(), error.reason)),
        };
        notices::notify(inner, id, notice).await;
        return;
    }
    if let Some(notice) = left_out(&snapshot.extensions.problems) {
        notices::notify(inner, id, notice).await;
    }
    if let Some(start) = mcp::follower(inner, session) {
        start();
    }
    // Nobody was told what changed: the options go out too, changed or not.
    let options = Some(options_update(inner, session));
    announce(inner, id, commands::update(&session.commands(), session.mcp()), options).await;
}
