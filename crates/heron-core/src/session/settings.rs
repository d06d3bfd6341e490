//! A session's settings (mode, model, effort, preset, approval posture), the config options
//! that expose them, and the rules for changing them: legacy names, the posture ceiling.

use serde::{Deserialize, Serialize};

/// What the agent is doing with the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Ordinary work.
    Normal,
    /// Read-only tools; the answer is a plan.
    Plan,
    /// Keeps working toward the objective across continuations.
    Goal,
}

impl Mode {
    /// Every mode, in the order offered.
    pub const ALL: [Mode; 3] = [Mode::Normal, Mode::Plan, Mode::Goal];

    /// The wire id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Plan => "plan",
            Mode::Goal => "goal",
        }
    }

    /// A human name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Normal => "Normal",
            Mode::Plan => "Plan",
            Mode::Goal => "Goal",
        }
    }

    /// What it does, for the mode picker.
    pub fn description(self) -> &'static str {
        match self {
            Mode::Normal => "Work on the request, asking before risky actions as the approval setting says",
            Mode::Plan => "Read and think only, and answer with a plan",
            Mode::Goal => "Keep working toward the objective across continuations until it is met",
        }
    }
}

/// How tool calls are approved, from most to least restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Posture {
    /// Reads only; edits and commands are refused.
    #[serde(rename = "readOnly")]
    ReadOnly,
    /// What is not pre-allowed is refused without asking.
    #[serde(rename = "dontAsk")]
    DontAsk,
    /// Reads run; edits and commands ask.
    #[serde(rename = "ask")]
    Ask,
    /// Edits inside the workspace run; commands ask unless allowed.
    #[serde(rename = "auto")]
    Auto,
    /// Everything runs.
    #[serde(rename = "yolo")]
    Yolo,
}

impl Posture {
    /// Every posture, most restrictive first.
    pub const ALL: [Posture; 5] =
        [Posture::ReadOnly, Posture::DontAsk, Posture::Ask, Posture::Auto, Posture::Yolo];

    /// The config value id.
    pub fn id(self) -> &'static str {
        match self {
            Posture::ReadOnly => "readOnly",
            Posture::DontAsk => "dontAsk",
            Posture::Ask => "ask",
            Posture::Auto => "auto",
            Posture::Yolo => "yolo",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Posture::ReadOnly => "Read only",
            Posture::DontAsk => "Don't ask",
            Posture::Ask => "Ask",
            Posture::Auto => "Auto",
            Posture::Yolo => "Yolo",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Posture::ReadOnly => "Only reads run; edits and commands are refused",
            Posture::DontAsk => "Anything not pre-allowed is refused without asking",
            Posture::Ask => "Reads run; edits and commands ask first",
            Posture::Auto => "Edits inside the workspace run; commands ask unless allowed",
            Posture::Yolo => "Everything runs without asking",
        }
    }

    /// Parses a config value id.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.id() == id)
    }

    /// Parses `heron acp --permission-mode`; `plan` is a mode, not a posture, and is refused.
    pub fn from_permission_mode(flag: &str) -> Option<Self> {
        match flag {
            "read-only" | "readOnly" => Some(Posture::ReadOnly),
            "dontAsk" | "dont-ask" => Some(Posture::DontAsk),
            "manual" | "ask" | "default" => Some(Posture::Ask),
            "auto" | "acceptEdits" => Some(Posture::Auto),
            "bypassPermissions" | "yolo" => Some(Posture::Yolo),
            _ => None,
        }
    }
}

/// How much the agent does per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Fewer model requests per turn, terse answers.
    Light,
    /// The default.
    Balanced,
    /// Works a task through to the end: more requests per turn.
    Delivery,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 3] = [Preset::Light, Preset::Balanced, Preset::Delivery];

    /// The config value id.
    pub fn id(self) -> &'static str {
        match self {
            Preset::Light => "light",
            Preset::Balanced => "balanced",
            Preset::Delivery => "delivery",
        }
    }

    /// Parses a value id, legacy names included.
    pub fn from_id(id: &str) -> Option<Self> {
        match id {
            "light" | "economy" => Some(Preset::Light),
            "balanced" => Some(Preset::Balanced),
            "delivery" => Some(Preset::Delivery),
            _ => None,
        }
    }

    /// Model requests one turn may make.
    pub fn max_turn_requests(self) -> u32 {
        match self {
            Preset::Light => 8,
            Preset::Balanced => 24,
            Preset::Delivery => 64,
        }
    }
}

/// A session's settings. Each changes independently of the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The mode.
    pub mode: Mode,
    /// `provider/model`.
    pub model: String,
    /// Reasoning effort: `auto` or a level the provider accepts.
    pub effort: String,
    /// The agent preset.
    pub preset: Preset,
    /// The approval posture.
    pub posture: Posture,
}

/// One config option in core terms; the ACP adapter turns it into a `select`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionSpec {
    /// The option id.
    pub id: &'static str,
    /// A human name.
    pub name: &'static str,
    /// What it changes.
    pub description: &'static str,
    /// The ACP category hint (`mode`, `model`, `thought_level`), or a custom `_heron_...` one.
    pub category: &'static str,
    /// The current value id.
    pub current: String,
    /// The values: (id, name, description).
    pub values: Vec<(String, String, Option<String>)>,
}

/// Why a setting could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// No option has that id.
    #[error("unknown config option `{0}`")]
    UnknownOption(String),
    /// The option has no such value.
    #[error("`{value}` is not a value of `{option}`")]
    UnknownValue {
        /// The option id.
        option: String,
        /// The value asked for.
        value: String,
    },
    /// The posture asked for is above the ceiling `heron acp --permission-mode` set.
    #[error("tool approval `{asked}` is above the ceiling `{ceiling}` set when Heron was started")]
    AboveCeiling {
        /// The posture asked for.
        asked: &'static str,
        /// The ceiling.
        ceiling: &'static str,
    },
}

/// What the settings may be changed to: the configured models and their efforts, and the
/// posture ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct Choices {
    /// Every `provider/model` id with its effort levels.
    pub models: Vec<(String, Vec<String>)>,
    /// The highest posture allowed, if `--permission-mode` set one.
    pub ceiling: Option<Posture>,
}

impl Choices {
    fn efforts(&self, model: &str) -> Vec<String> {
        let mut out = vec!["auto".to_owned()];
        if let Some((_, levels)) = self.models.iter().find(|(m, _)| m == model) {
            out.extend(levels.iter().cloned());
        }
        out
    }

    /// Caps a posture at the ceiling (a saved session reopens at most at the ceiling).
    pub fn cap(&self, posture: Posture) -> Posture {
        self.ceiling.map_or(posture, |ceiling| posture.min(ceiling))
    }
}

impl Settings {
    /// The config options, most important first, reflecting the current values.
    pub fn options(&self, choices: &Choices) -> Vec<OptionSpec> {
        let postures = Posture::ALL
            .into_iter()
            .filter(|p| choices.ceiling.is_none_or(|c| *p <= c))
            .map(|p| (p.id().to_owned(), p.name().to_owned(), Some(p.description().to_owned())))
            .collect();
        vec![
            OptionSpec {
                id: "mode",
                name: "Mode",
                description: "What the agent does with your requests",
                category: "mode",
                current: self.mode.id().to_owned(),
                values: Mode::ALL
                    .into_iter()
                    .map(|m| (m.id().to_owned(), m.name().to_owned(), Some(m.description().to_owned())))
                    .collect(),
            },
            OptionSpec {
                id: "model",
                name: "Model",
                description: "The model that answers",
                category: "model",
                current: self.model.clone(),
                values: choices.models.iter().map(|(m, _)| (m.clone(), m.clone(), None)).collect(),
            },
            OptionSpec {
                id: "effort",
                name: "Effort",
                description: "How hard the model thinks",
                category: "thought_level",
                current: self.effort.clone(),
                values: choices.efforts(&self.model).into_iter().map(|e| (e.clone(), e, None)).collect(),
            },
            OptionSpec {
                id: "agent_preset",
                name: "Preset",
                description: "How much the agent does per request",
                category: "_heron_preset",
                current: self.preset.id().to_owned(),
                values: Preset::ALL
                    .into_iter()
                    .map(|p| (p.id().to_owned(), p.id().to_owned(), None))
                    .collect(),
            },
            OptionSpec {
                id: "tool_approval",
                name: "Tool approval",
                description: "Which tool calls run without asking",
                category: "_heron_approval",
                current: self.posture.id().to_owned(),
                values: postures,
            },
        ]
    }

    /// Applies one option change; legacy ids and values are accepted.
    pub fn apply(&mut self, option: &str, value: &str, choices: &Choices) -> Result<(), SettingError> {
        let unknown = || SettingError::UnknownValue { option: option.to_owned(), value: value.to_owned() };
        match option {
            "mode" => {
                self.set_mode(value, choices)?;
            }
            "model" => {
                if !choices.models.iter().any(|(m, _)| m == value) {
                    return Err(unknown());
                }
                self.model = value.to_owned();
                // An effort the new model does not know falls back to `auto`.
                if !choices.efforts(value).contains(&self.effort) {
                    self.effort = "auto".to_owned();
                }
            }
            "effort" => {
                if !choices.efforts(&self.model).iter().any(|e| e == value) {
                    return Err(unknown());
                }
                self.effort = value.to_owned();
            }
            "agent_preset" | "work_mode" => self.preset = Preset::from_id(value).ok_or_else(unknown)?,
            "tool_approval" => self.set_posture(Posture::from_id(value).ok_or_else(unknown)?, choices)?,
            other => return Err(SettingError::UnknownOption(other.to_owned())),
        }
        Ok(())
    }

    /// Sets the mode by id; the legacy ids `default` and `auto` also set the posture.
    pub fn set_mode(&mut self, id: &str, choices: &Choices) -> Result<(), SettingError> {
        match id {
            "default" => {
                self.mode = Mode::Normal;
                self.set_posture(Posture::Ask, choices)
            }
            "auto" => {
                self.mode = Mode::Normal;
                self.set_posture(Posture::Yolo, choices)
            }
            _ => {
                self.mode = Mode::ALL.into_iter().find(|m| m.id() == id).ok_or_else(|| {
                    SettingError::UnknownValue { option: "mode".to_owned(), value: id.to_owned() }
                })?;
                Ok(())
            }
        }
    }

    fn set_posture(&mut self, posture: Posture, choices: &Choices) -> Result<(), SettingError> {
        if let Some(ceiling) = choices.ceiling
            && posture > ceiling
        {
            return Err(SettingError::AboveCeiling { asked: posture.id(), ceiling: ceiling.id() });
        }
        self.posture = posture;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choices(ceiling: Option<Posture>) -> Choices {
        Choices {
            models: vec![
                ("demo/demo".into(), vec![]),
                ("local/smart".into(), vec!["low".into(), "high".into()]),
            ],
            ceiling,
        }
    }

    fn settings() -> Settings {
        Settings {
            mode: Mode::Normal,
            model: "local/smart".into(),
            effort: "high".into(),
            preset: Preset::Balanced,
            posture: Posture::Ask,
        }
    }

    #[test]
    fn changing_the_model_keeps_the_other_settings_and_resets_an_unknown_effort() {
        let mut s = settings();
        s.apply("model", "demo/demo", &choices(None)).expect("applies");
        assert_eq!((s.model.as_str(), s.effort.as_str(), s.posture), ("demo/demo", "auto", Posture::Ask));
    }

    #[test]
    fn legacy_mode_ids_map_to_normal_with_a_posture() {
        let mut s = settings();
        s.set_mode("auto", &choices(None)).expect("applies");
        assert_eq!((s.mode, s.posture), (Mode::Normal, Posture::Yolo));
        s.set_mode("default", &choices(None)).expect("applies");
        assert_eq!((s.mode, s.posture), (Mode::Normal, Posture::Ask));
    }

    #[test]
    fn legacy_work_mode_economy_is_the_light_preset() {
        let mut s = settings();
        s.apply("work_mode", "economy", &choices(None)).expect("applies");
        assert_eq!(s.preset, Preset::Light);
    }

    #[test]
    fn a_posture_above_the_ceiling_is_refused_and_nothing_changes() {
        let mut s = settings();
        let err = s.apply("tool_approval", "yolo", &choices(Some(Posture::Auto))).expect_err("refused");
        assert_eq!(err, SettingError::AboveCeiling { asked: "yolo", ceiling: "auto" });
        assert_eq!(s.posture, Posture::Ask);
    }

    #[test]
    fn options_above_the_ceiling_are_not_offered() {
        let options = settings().options(&choices(Some(Posture::Ask)));
        let approval = options.iter().find(|o| o.id == "tool_approval").expect("offered");
        let ids: Vec<&str> = approval.values.iter().map(|(id, _, _)| id.as_str()).collect();
        assert_eq!(ids, ["readOnly", "dontAsk", "ask"]);
    }

    #[test]
    fn unknown_options_and_values_are_errors() {
        let mut s = settings();
        assert_eq!(
            s.apply("colour", "blue", &choices(None)),
            Err(SettingError::UnknownOption("colour".into()))
        );
        assert!(matches!(s.apply("effort", "max", &choices(None)), Err(SettingError::UnknownValue { .. })));
    }
}
