//! Settings on the wire: `session/set_mode`, `set_config_option` and `set_model`; the
//! config options as the wire shows them (a select per setting, and for clients that take
//! them a boolean per MCP server); the config option ids and value ids clients send, older
//! clients' names included, read into the core's changes; the protocol category of each
//! option; and telling the editor that settings changed.

use heron_core::session::settings::{
    Change, Choices, ConfigId, Mode, Posture, Preset, SettingError, Settings,
};
use heron_core::session::{Manager, Session};
use heron_protocol::runtime::{Answered, Outgoing, Then};
use heron_protocol::{
    ConfigOptionUpdate, CurrentModeUpdate, RpcError, SessionConfigOptionCategory, SessionId, SessionModeId,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse, SetSessionModelRequest, SetSessionModelResponse,
};
use serde_json::json;

use super::errors::{WithField, session_error};
use super::{HeronAgent, Inner, Reply, notices};

/// Applies what `changes` reads from the settings, then tells the editor; a refusal names
/// `field` (the method's own name for the value). Resolves to what follows the answer.
fn change_and_announce<O: Outgoing>(
    agent: &HeronAgent<O>,
    session_id: &SessionId,
    field: &'static str,
    changes: impl FnOnce() -> Result<Vec<Change>, SettingError> + Send + 'static,
) -> Reply<Then> {
    let session = agent.session(session_id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let session = session?;
        let before = session.state().settings.posture;
        session
            .configure(|s, c| apply_all(s, changes()?, c))
            .await
            .map_err(|e| session_error(e, &manager).at_field(field))?;
        let mut then = Then::new();
        notices::posture_raised(&inner, &mut then, &session, Some(before));
        announce(&inner, &session).await?;
        Ok(then)
    })
}

/// `session/set_mode`.
pub(super) fn set_mode<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: SetSessionModeRequest,
) -> Reply<Answered<SetSessionModeResponse>> {
    let mode = params.mode_id.0;
    let changed = change_and_announce(agent, &params.session_id, "modeId", move || mode_changes(&mode));
    Box::pin(async move { Ok(Answered::new(SetSessionModeResponse { meta: None }, changed.await?)) })
}

/// `session/set_config_option`: value ids, and booleans for the options that turn MCP
/// servers on and off.
pub(super) fn set_config_option<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: SetSessionConfigOptionRequest,
) -> Reply<Answered<SetSessionConfigOptionResponse>> {
    if let SetSessionConfigOptionRequest::Boolean(b) = &params
        && let Some(server) = b.config_id.0.strip_prefix(MCP_OPTION)
    {
        let set = set_mcp_option(agent, &b.session_id, server.to_owned(), b.value);
        return Box::pin(async move { set.await.map(Answered::from) });
    }
    let request = match params {
        SetSessionConfigOptionRequest::ValueId(v) => {
            config_id(&v.config_id.0).map(|option| (v.session_id, option, v.value.0))
        }
        SetSessionConfigOptionRequest::Boolean(b) => Err(RpcError::invalid_params(
            "value",
            format!("`{}` takes a value id, not a boolean", b.config_id.0),
        )),
    };
    let session = request.as_ref().map_err(Clone::clone).and_then(|(id, _, _)| agent.session(id));
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let (_, option, value) = request?;
        let session = session?;
        let before = session.state().settings;
        set_option(&session, &manager, option, &value).await?;
        let mut then = Then::new();
        notices::posture_raised(&inner, &mut then, &session, Some(before.posture));
        if session.state().settings.mode != before.mode {
            let (settings, _) = inner.options_of(&session);
            inner.send(session.id(), mode_update(&settings)).await?;
        }
        inner.status.sync(&inner.client, &session).await;
        let (_, config_options) = inner.options_of(&session);
        Ok(Answered::new(SetSessionConfigOptionResponse { config_options, meta: None }, then))
    })
}

/// Turns MCP server `server` on or off; a server the session does not have, or one that
/// cannot be started (safe mode), is -32602 naming `configId`.
fn set_mcp_option<O: Outgoing>(
    agent: &HeronAgent<O>,
    session_id: &SessionId,
    server: String,
    on: bool,
) -> Reply<SetSessionConfigOptionResponse> {
    let session = agent.session(session_id);
    let inner = agent.inner.clone();
    Box::pin(async move {
        let session = session?;
        let hub = session.mcp().clone();
        let already = hub
            .statuses()
            .iter()
            .any(|s| s.name == server && (s.state != heron_core::tools::mcp::ServerState::Disabled) == on);
        if !already {
            hub.set_enabled(&server, on).await.map_err(|why| RpcError::invalid_params("configId", why))?;
        }
        let (_, config_options) = inner.options_of(&session);
        Ok(SetSessionConfigOptionResponse { config_options, meta: None })
    })
}

/// The config options as `select`s.
pub fn config_options(
    options: Vec<heron_core::session::settings::OptionSpec>,
) -> Vec<heron_protocol::SessionConfigOption> {
    options
        .into_iter()
        .map(|o| {
            heron_protocol::SessionConfigOption::Select(heron_protocol::SessionConfigOptionSelect {
                category: Some(category(o.id)),
                current_value: heron_protocol::SessionConfigValueId(o.current),
                description: Some(o.description.to_owned()),
                id: heron_protocol::SessionConfigId(o.id.id().to_owned()),
                meta: None,
                name: o.name.to_owned(),
                options: heron_protocol::SessionConfigSelectOptions::Ungrouped(
                    o.values
                        .into_iter()
                        .map(|(value, name, description)| heron_protocol::SessionConfigSelectOption {
                            description,
                            meta: None,
                            name,
                            value: heron_protocol::SessionConfigValueId(value),
                        })
                        .collect(),
                ),
            })
        })
        .collect()
}

/// The prefix of the boolean config option that turns an MCP server on or off.
pub const MCP_OPTION: &str = "mcp:";

/// One boolean option per MCP server of `hub`, on unless it is disabled, for a client that
/// takes boolean options.
pub fn mcp_options(hub: &heron_core::tools::mcp::McpHub) -> Vec<heron_protocol::SessionConfigOption> {
    hub.statuses()
        .into_iter()
        .map(|status| {
            heron_protocol::SessionConfigOption::Boolean(heron_protocol::SessionConfigOptionBoolean {
                category: Some(SessionConfigOptionCategory::Other("mcp".into())),
                current_value: status.state != heron_core::tools::mcp::ServerState::Disabled,
                description: Some(format!(
                    "Turn the MCP server `{}` off or on for this session",
                    status.name
                )),
                id: heron_protocol::SessionConfigId(format!("{MCP_OPTION}{}", status.name)),
                meta: None,
                name: format!("MCP: {}", status.name),
            })
        })
        .collect()
}

/// `session/set_model` (unstable in ACP; the `model` option does the same).
pub(super) fn set_model<O: Outgoing>(
    agent: &HeronAgent<O>,
    params: SetSessionModelRequest,
) -> Reply<SetSessionModelResponse> {
    let model = params.model_id.0;
    let changed = change_and_announce(agent, &params.session_id, "modelId", move || {
        Settings::read(ConfigId::Model, &model).map(|change| vec![change])
    });
    Box::pin(async move {
        changed.await?;
        Ok(SetSessionModelResponse { meta: None })
    })
}

/// The `current_mode_update` for `settings`.
fn mode_update(settings: &Settings) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
        current_mode_id: SessionModeId(settings.mode.id().to_owned()),
        meta: None,
    })
}

/// Tells the editor the settings changed: the mode, the full config options, and the
/// status for a client that wants it.
pub(super) async fn announce<O: Outgoing>(inner: &Inner<O>, session: &Session) -> Result<(), RpcError> {
    announce_options(inner, session).await?;
    inner.status.sync(&inner.client, session).await;
    Ok(())
}

/// Sends the mode and the full config options, for a caller that sends the status itself.
pub(super) async fn announce_options<O: Outgoing>(
    inner: &Inner<O>,
    session: &Session,
) -> Result<(), RpcError> {
    let (settings, config_options) = inner.options_of(session);
    inner.send(session.id(), mode_update(&settings)).await?;
    let options = SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate { config_options, meta: None });
    inner.send(session.id(), options).await?;
    Ok(())
}

/// The config option an id names; `work_mode` is the older name of `agent_preset`.
pub(super) fn config_id(id: &str) -> Result<ConfigId, RpcError> {
    match id {
        "work_mode" => Ok(ConfigId::AgentPreset),
        _ => ConfigId::from_id(id).ok_or_else(|| {
            let reason = format!("unknown config option `{id}`");
            RpcError::invalid_params("configId", reason.clone())
                .with_data(json!({ "path": "configId", "configId": id, "reason": reason }))
        }),
    }
}

/// The preset a name names; `economy` is the older name of `light`.
pub fn preset(name: &str) -> Option<Preset> {
    match name {
        "economy" => Some(Preset::Light),
        _ => Preset::from_id(name),
    }
}

/// What a mode id asks for. The mode ids of older clients also set the posture:
/// `default` is normal work that asks first, `auto` is normal work without asking.
fn mode_changes(id: &str) -> Result<Vec<Change>, SettingError> {
    match id {
        "default" => Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Ask)]),
        "auto" => Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Yolo)]),
        _ => Settings::read(ConfigId::Mode, id).map(|change| vec![change]),
    }
}

/// What setting `option` to value id `value` asks for, older names included.
fn option_changes(option: ConfigId, value: &str) -> Result<Vec<Change>, SettingError> {
    match option {
        ConfigId::Mode => mode_changes(value),
        ConfigId::AgentPreset => preset(value)
            .map(|p| vec![Change::Preset(p)])
            .ok_or_else(|| SettingError::UnknownValue { option, value: value.to_owned() }),
        _ => Settings::read(option, value).map(|change| vec![change]),
    }
}

/// Sets `option` of `session` to value id `value` (older names included), whichever
/// protocol version asked; a refusal keeps every setting as it was.
pub(super) async fn set_option(
    session: &Session,
    manager: &Manager,
    option: ConfigId,
    value: &str,
) -> Result<(), RpcError> {
    session
        .configure(|s, c| apply_all(s, option_changes(option, value)?, c))
        .await
        .map(drop)
        .map_err(|e| session_error(e, manager))
}

/// Applies `changes` in order; the caller's `configure` keeps none of them if one fails.
fn apply_all(settings: &mut Settings, changes: Vec<Change>, choices: &Choices) -> Result<(), SettingError> {
    changes.into_iter().try_for_each(|change| settings.change(change, choices))
}

/// The protocol's category of an option: ACP's own where one fits, Heron's otherwise.
pub(super) fn category(id: ConfigId) -> SessionConfigOptionCategory {
    match id {
        ConfigId::Mode => SessionConfigOptionCategory::Mode,
        ConfigId::Model => SessionConfigOptionCategory::Model,
        ConfigId::Effort => SessionConfigOptionCategory::ThoughtLevel,
        ConfigId::AgentPreset => SessionConfigOptionCategory::Other("_heron_preset".to_owned()),
        ConfigId::ToolApproval => SessionConfigOptionCategory::Other("_heron_approval".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_mode_ids_set_the_posture_too() {
        assert_eq!(
            mode_changes("auto"),
            Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Yolo)])
        );
        assert_eq!(
            mode_changes("default"),
            Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Ask)])
        );
        assert_eq!(mode_changes("plan"), Ok(vec![Change::Mode(Mode::Plan)]));
        assert!(mode_changes("reckless").is_err());
    }

    #[test]
    fn work_mode_economy_is_the_light_preset() {
        let option = config_id("work_mode").expect("known");
        assert_eq!(option_changes(option, "economy"), Ok(vec![Change::Preset(Preset::Light)]));
        assert_eq!(config_id("colour").expect_err("unknown").data.expect("data")["configId"], "colour");
    }
}
