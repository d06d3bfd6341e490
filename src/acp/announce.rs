//! Telling the editor a session's settings changed, after a settings method or a slash
//! command: the current mode, the full config options, and the status for a client that
//! wants it.

use super::{Inner, convert};
use heron_core::session::Session;
use heron_core::session::settings::Settings;
use heron_protocol::runtime::Outgoing;
use heron_protocol::{RpcError, SessionUpdate};

/// The `current_mode_update` for `settings`.
pub(super) fn mode_update(settings: &Settings) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(heron_protocol::CurrentModeUpdate {
        current_mode_id: heron_protocol::SessionModeId(settings.mode.id().to_owned()),
        meta: None,
    })
}

/// Tells the editor the settings changed: the mode, the full config options, and the
/// status for a client that wants it.
pub(super) async fn announce_settings<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
) -> Result<(), RpcError> {
    let (settings, config_options) = inner.options_of(session);
    inner.send(session.id(), mode_update(&settings)).await?;
    inner
        .send(
            session.id(),
            SessionUpdate::ConfigOptionUpdate(heron_protocol::ConfigOptionUpdate {
                config_options,
                meta: None,
            }),
        )
        .await?;
    inner.status.sync(&inner.client, session).await;
    Ok(())
}

/// Runs a slash command and answers with its reply as an agent message.
pub(super) async fn run_command<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
    invocation: &heron_core::session::commands::Invocation,
) -> Result<(), RpcError> {
    let mut outcome = None;
    let result = session
        .configure(|settings, choices| {
            outcome = Some(heron_core::session::commands::run(invocation, settings, choices));
            // A refused command changes nothing: report it as a setting error to roll back.
            match &outcome {
                Some(Err(reason)) => {
                    Err(heron_core::session::settings::SettingError::Refused(reason.clone()))
                }
                _ => Ok(()),
            }
        })
        .await;
    let (reply, changed) = match (outcome, result) {
        (Some(Ok(ran)), Ok(_)) => (ran.reply, ran.settings_changed),
        (Some(Err(reason)), _) => (reason, false),
        (_, Err(err)) => (err.to_string(), false),
        (None, Ok(_)) => (String::new(), false),
    };
    let message_id = uuid::Uuid::new_v4().to_string();
    inner.send(session.id(), convert::agent_message(&message_id, reply)).await?;
    if changed {
        announce_settings(inner, session).await?;
    }
    Ok(())
}
