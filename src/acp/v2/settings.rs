//! Settings over ACP v2: the session's config options in v2's shape (`configId`, `select`s),
//! and `session/set_config_option`, read through the same ids, older names and checks as
//! over v1 (`super::super::settings`).

use heron_core::session::Session;
use heron_core::session::settings::{ConfigId, OptionSpec};
use heron_protocol::RpcError;
use heron_protocol::runtime::Outgoing;
use heron_protocol::v2::{
    SessionConfigId, SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionSelect,
    SessionConfigSelectOption, SessionConfigSelectOptions, SessionConfigValueId,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};

use super::super::settings::{config_id, set_option};
use super::{HeronAgentV2, Reply};

/// v2's category of an option: ACP's own where one fits, Heron's otherwise.
fn category(id: ConfigId) -> SessionConfigOptionCategory {
    match id {
        ConfigId::Mode => SessionConfigOptionCategory::Mode,
        ConfigId::Model => SessionConfigOptionCategory::Model,
        ConfigId::Effort => SessionConfigOptionCategory::ThoughtLevel,
        ConfigId::AgentPreset => SessionConfigOptionCategory::Other("_heron_preset".to_owned()),
        ConfigId::ToolApproval => SessionConfigOptionCategory::Other("_heron_approval".to_owned()),
    }
}

fn config_options(options: Vec<OptionSpec>) -> Vec<SessionConfigOption> {
    options
        .into_iter()
        .map(|o| {
            SessionConfigOption::Select(SessionConfigOptionSelect {
                category: Some(category(o.id)),
                config_id: SessionConfigId(o.id.id().to_owned()),
                current_value: SessionConfigValueId(o.current),
                description: Some(o.description.to_owned()),
                meta: None,
                name: o.name.to_owned(),
                options: SessionConfigSelectOptions::Ungrouped(
                    o.values
                        .into_iter()
                        .map(|(value, name, description)| SessionConfigSelectOption {
                            description,
                            meta: None,
                            name,
                            value: SessionConfigValueId(value),
                        })
                        .collect(),
                ),
            })
        })
        .collect()
}

/// The session's config options as v2 shows them.
pub(super) fn options_of(session: &Session) -> Vec<SessionConfigOption> {
    config_options(session.state().settings.options(&session.choices()))
}

/// `session/set_config_option`: value ids only (Heron offers no boolean options).
pub(super) fn set_config_option<O: Outgoing>(
    agent: &HeronAgentV2<O>,
    params: SetSessionConfigOptionRequest,
) -> Reply<SetSessionConfigOptionResponse> {
    let request = match params {
        SetSessionConfigOptionRequest::Id(v) => {
            config_id(&v.config_id.0).map(|option| (v.session_id, option, v.value.0))
        }
        SetSessionConfigOptionRequest::Boolean(b) => Err(RpcError::invalid_params(
            "value",
            format!("`{}` takes a value id, not a boolean", b.config_id.0),
        )),
        SetSessionConfigOptionRequest::Other(_) => {
            Err(RpcError::invalid_params("type", "Heron's options take a value id (`type: \"id\"`)"))
        }
    };
    let session = request.as_ref().map_err(Clone::clone).and_then(|(id, _, _)| agent.session(id));
    let inner = agent.inner.clone();
    Box::pin(async move {
        let manager = inner.manager.ready().await?;
        let (_, option, value) = request?;
        let session = session?;
        set_option(&session, &manager, option, &value).await?;
        Ok(SetSessionConfigOptionResponse { config_options: options_of(&session), meta: None })
    })
}
