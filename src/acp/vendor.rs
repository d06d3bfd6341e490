//! Heron's vendor methods on a session: `_heron/session/status` and
//! `_heron/session/goal/{pause,resume}`, and what `initialize` advertises about the vendor
//! methods (`_heron/session/steer` is an inbox write: `super::inbox`).

use serde_json::{Map, Value, json};

use super::errors::{goal_error, session_error};
use super::{HeronAgent, Reply, settings, status};
use heron_core::session::SessionError;
use heron_core::session::settings::{Change, Mode};
use heron_protocol::runtime::{Kind, Outgoing, Side, Stability};
use heron_protocol::{HeronGoal, HeronSessionStatusRequest, HeronSessionStatusResponse, SessionId};

/// The vendor methods the Reasonix guide advertises as keys of `agentCapabilities._meta`
/// itself, each with `{"schemaVersion": 1}` (its goal and MCP health sections): a client
/// written from the guide looks for them there, not under `_meta.heron`.
pub const VERSIONED_AT_TOP: &[&str] = &[
    "_heron/session/goal/resume",
    "_heron/session/goal/pause",
    "_heron/session/mcpStatus",
    "_heron/session/mcpStatus_update",
];

/// `_meta.heron.extensionSurface`: what the guide calls structured extension UI. Heron's
/// extensions (plugin actions, custom commands) have no structured surface of their own:
/// every client gets their output as the guide's text fallbacks (agent messages for cards
/// and statuses, permission requests for forms), so `structured` lists nothing.
fn extension_surface() -> Value {
    json!({ "schemaVersion": 1, "structured": [] })
}

/// `agentCapabilities._meta`: the vendor methods Heron serves and the notifications it
/// sends, read from the generated tables so the list cannot drift from the code. Each
/// extension whose methods are all served appears under its name, versioned
/// (`sessionInbox: {schemaVersion, methods: {enqueue: ..., ...}}`; one-method extensions
/// also name it as `method`), beside the flat `methods` and `notifications` lists older
/// clients read; the methods the guide advertises at the top of `_meta` are there too
/// ([`VERSIONED_AT_TOP`]).
pub fn capabilities_meta() -> Map<String, Value> {
    let vendor = |side: Side, kind: Kind| -> Vec<&str> {
        heron_protocol::METHODS
            .iter()
            .filter(|m| m.stability == Stability::Vendor && m.implemented && m.side == side && m.kind == kind)
            .map(|m| m.wire)
            .collect()
    };
    let served = |wire: &str| heron_protocol::METHODS.iter().any(|m| m.wire == wire && m.implemented);
    let mut heron = Map::new();
    heron.insert("methods".into(), json!(vendor(Side::Agent, Kind::Request)));
    heron.insert("notifications".into(), json!(vendor(Side::Client, Kind::Notification)));
    for extension in heron_protocol::EXTENSIONS.iter() {
        if !extension.methods.iter().all(|(_, wire)| served(wire)) {
            continue;
        }
        let pairs = |list: &[(&str, &str)]| -> Map<String, Value> {
            list.iter().map(|(short, wire)| ((*short).to_owned(), json!(wire))).collect()
        };
        let mut entry = Map::new();
        entry.insert("schemaVersion".into(), json!(extension.schema_version));
        if let [(_, only)] = extension.methods {
            entry.insert("method".into(), json!(only));
        }
        entry.insert("methods".into(), Value::Object(pairs(extension.methods)));
        if !extension.notifications.is_empty() {
            entry.insert("notifications".into(), Value::Object(pairs(extension.notifications)));
        }
        heron.insert(extension.name.to_owned(), Value::Object(entry));
    }
    heron.insert("extensionSurface".into(), extension_surface());
    let mut meta = Map::from_iter([("heron".to_owned(), Value::Object(heron))]);
    for wire in VERSIONED_AT_TOP.iter().filter(|wire| served(wire)) {
        meta.insert((*wire).to_owned(), json!({ "schemaVersion": 1 }));
    }
    meta
}

/// `_heron/session/status`: a snapshot, with no side effects.
pub(super) fn status<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: HeronSessionStatusRequest,
) -> Reply<HeronSessionStatusResponse> {
    let session = agent.session(&params.session_id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        inner.manager.ready().await?;
        let (_, snapshot) = session?.status();
        Ok(HeronSessionStatusResponse { meta: None, status: status::status(&snapshot) })
    })
}

/// `_heron/session/goal/pause` (`pause`) and `_heron/session/goal/resume`. Resume re-enters
/// goal mode, so the next prompt continues the retained objective (a mode change is
/// announced as any other). The status update (`event: "goal"`), for a client that wants
/// them, goes out before the answer.
pub(super) fn change_goal<O: Outgoing>(
    agent: &HeronAgent<O>,
    id: &SessionId,
    pause: bool,
) -> Reply<HeronGoal> {
    let session = agent.session(id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let session = session?;
        let changed = if pause { session.pause_goal().await } else { session.resume_goal().await };
        let goal = changed.map_err(|e| match e {
            SessionError::Goal(goal) => goal_error(&goal, pause),
            other => session_error(other, &manager),
        })?;
        if !pause && session.state().settings.mode != Mode::Goal {
            session
                .configure(|s, c| s.change(Change::Mode(Mode::Goal), c))
                .await
                .map_err(|e| session_error(e, &manager))?;
            settings::announce_options(&inner, &session).await?;
        }
        inner.status.sync_goal(&inner.client, &session).await;
        Ok(status::goal(&goal))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_methods_advertised_at_the_top_are_served_and_versioned() {
        let meta = capabilities_meta();
        for wire in VERSIONED_AT_TOP {
            assert!(
                heron_protocol::METHODS.iter().any(|m| m.wire == *wire && m.implemented),
                "{wire} is advertised but not served"
            );
            assert_eq!(meta.get(*wire), Some(&json!({ "schemaVersion": 1 })), "{wire}");
        }
    }
}
