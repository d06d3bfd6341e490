//! Settings on the wire: the config option ids and value ids clients send, older clients'
//! names included, read into the core's changes; and the protocol category of each option.

use heron_core::session::settings::{Change, ConfigId, Mode, Posture, Preset, SettingError, Settings};
use heron_protocol::{RpcError, SessionConfigOptionCategory};
use serde_json::json;

/// The config option an id names; `work_mode` is the older name of `agent_preset`.
pub fn config_id(id: &str) -> Result<ConfigId, RpcError> {
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
pub fn mode_changes(id: &str) -> Result<Vec<Change>, SettingError> {
    match id {
        "default" => Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Ask)]),
        "auto" => Ok(vec![Change::Mode(Mode::Normal), Change::Posture(Posture::Yolo)]),
        _ => Settings::read(ConfigId::Mode, id).map(|change| vec![change]),
    }
}

/// What setting `option` to value id `value` asks for, older names included.
pub fn option_changes(option: ConfigId, value: &str) -> Result<Vec<Change>, SettingError> {
    match option {
        ConfigId::Mode => mode_changes(value),
        ConfigId::AgentPreset => preset(value)
            .map(|p| vec![Change::Preset(p)])
            .ok_or_else(|| SettingError::UnknownValue { option, value: value.to_owned() }),
        _ => Settings::read(option, value).map(|change| vec![change]),
    }
}

/// Applies `changes` in order; the caller's `configure` keeps none of them if one fails.
pub fn apply_all(
    settings: &mut Settings,
    changes: Vec<Change>,
    choices: &heron_core::session::settings::Choices,
) -> Result<(), SettingError> {
    changes.into_iter().try_for_each(|change| settings.change(change, choices))
}

/// The protocol's category of an option: ACP's own where one fits, Heron's otherwise.
pub fn category(id: ConfigId) -> SessionConfigOptionCategory {
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
