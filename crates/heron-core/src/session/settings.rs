//! A session's settings (mode, model, effort, preset, approval posture), the config options
//! that expose them, and the rules for changing them: known values only, the posture
//! ceiling. Ids here are Heron's own; older clients' names are the adapter's to translate.

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

    /// Its id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Plan => "plan",
            Mode::Goal => "goal",
        }
    }

    /// The mode an id names.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == id)
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

    /// What the posture lets run, in a sentence.
    pub fn description(self) -> &'static str {
        match self {
            Posture::ReadOnly => "Only reads run; edits and commands are refused",
            Posture::DontAsk => "Anything not pre-allowed is refused without asking",
            Posture::Ask => "Reads run; edits and commands ask first",
            Posture::Auto => "Edits inside the workspace run; commands ask unless allowed",
            Posture::Yolo => "Everything runs without asking",
        }
    }

    /// The posture an id names.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.id() == id)
    }
}

impl std::fmt::Display for Posture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
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

    /// The preset an id names.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.id() == id)
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

/// How hard the model thinks: the provider's own default, or a level it accepts. Stored
/// and offered as its id (`auto`, `low`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Effort {
    /// No effort is sent; the provider decides.
    #[default]
    Auto,
    /// A level the provider understands, sent as is.
    Level(String),
}

impl Effort {
    /// The id of `Effort::Auto`.
    pub const AUTO: &'static str = "auto";

    /// Its id.
    pub fn id(&self) -> &str {
        match self {
            Effort::Auto => Self::AUTO,
            Effort::Level(level) => level,
        }
    }

    /// The level to send, if any.
    pub fn level(&self) -> Option<&str> {
        match self {
            Effort::Auto => None,
            Effort::Level(level) => Some(level),
        }
    }
}

impl From<String> for Effort {
    fn from(id: String) -> Self {
        if id == Self::AUTO { Effort::Auto } else { Effort::Level(id) }
    }
}

impl From<Effort> for String {
    fn from(effort: Effort) -> Self {
        effort.id().to_owned()
    }
}

impl std::fmt::Display for Effort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// The config options a session offers, in the order offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigId {
    /// [`Mode`].
    Mode,
    /// The model, as `provider/model`.
    Model,
    /// [`Effort`].
    Effort,
    /// [`Preset`].
    AgentPreset,
    /// [`Posture`].
    ToolApproval,
}

impl ConfigId {
    /// Every option, in the order offered.
    pub const ALL: [ConfigId; 5] =
        [ConfigId::Mode, ConfigId::Model, ConfigId::Effort, ConfigId::AgentPreset, ConfigId::ToolApproval];

    /// Its id.
    pub fn id(self) -> &'static str {
        match self {
            ConfigId::Mode => "mode",
            ConfigId::Model => "model",
            ConfigId::Effort => "effort",
            ConfigId::AgentPreset => "agent_preset",
            ConfigId::ToolApproval => "tool_approval",
        }
    }

    /// The option an id names.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.id() == id)
    }
}

impl std::fmt::Display for ConfigId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One change of one setting, already read from its value id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new mode.
    Mode(Mode),
    /// A new model (`provider/model`); it must be configured.
    Model(String),
    /// A new effort; it must be one the model offers.
    Effort(Effort),
    /// A new preset.
    Preset(Preset),
    /// A new posture; it must not pass the ceiling.
    Posture(Posture),
}

/// A session's settings. Each changes independently of the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The mode.
    pub mode: Mode,
    /// `provider/model`.
    pub model: String,
    /// Reasoning effort.
    pub effort: Effort,
    /// The agent preset.
    pub preset: Preset,
    /// The approval posture.
    pub posture: Posture,
}

/// One config option in core terms; the adapter turns it into the protocol's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionSpec {
    /// Which option.
    pub id: ConfigId,
    /// A human name.
    pub name: &'static str,
    /// What it changes.
    pub description: &'static str,
    /// The current value id.
    pub current: String,
    /// The values: (id, name, description).
    pub values: Vec<(String, String, Option<String>)>,
}

/// Why a setting could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// The option has no such value.
    #[error("`{value}` is not a value of `{option}`")]
    UnknownValue {
        /// The option.
        option: ConfigId,
        /// The value asked for.
        value: String,
    },
    /// A slash command refused to run; nothing changed.
    #[error("{0}")]
    Refused(String),
    /// The posture asked for is above the ceiling `heron acp --permission-mode` set.
    #[error("tool approval `{asked}` is above the ceiling `{ceiling}` set when Heron was started")]
    AboveCeiling {
        /// The posture asked for.
        asked: Posture,
        /// The ceiling.
        ceiling: Posture,
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
    fn efforts(&self, model: &str) -> Vec<Effort> {
        let mut out = vec![Effort::Auto];
        if let Some((_, levels)) = self.models.iter().find(|(m, _)| m == model) {
            out.extend(levels.iter().cloned().map(Effort::Level));
        }
        out
    }

    /// Caps a posture at the ceiling (a saved session reopens at most at the ceiling).
    pub fn cap(&self, posture: Posture) -> Posture {
        self.ceiling.map_or(posture, |ceiling| posture.min(ceiling))
    }
}

/// The most models the model option lists. Every option goes to the editor whole with each
/// session and each change; a config of thousands of models (a router's catalog pasted in)
/// would make every one of those messages megabytes. Past it, the list holds the first ones
/// in config order and the current one; any configured model can still be chosen by id.
pub const MAX_OFFERED_MODELS: usize = 256;

/// The model option's values: see [`MAX_OFFERED_MODELS`].
fn offered_models(current: &str, choices: &Choices) -> Vec<(String, String, Option<String>)> {
    let mut offered: Vec<_> =
        choices.models.iter().take(MAX_OFFERED_MODELS).map(|(m, _)| (m.clone(), m.clone(), None)).collect();
    if choices.models.len() > MAX_OFFERED_MODELS && !offered.iter().any(|(m, _, _)| m == current) {
        offered.pop();
        offered.insert(0, (current.to_owned(), current.to_owned(), None));
    }
    offered
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
                id: ConfigId::Mode,
                name: "Mode",
                description: "What the agent does with your requests",
                current: self.mode.id().to_owned(),
                values: Mode::ALL
                    .into_iter()
                    .map(|m| (m.id().to_owned(), m.name().to_owned(), Some(m.description().to_owned())))
                    .collect(),
            },
            OptionSpec {
                id: ConfigId::Model,
                name: "Model",
                description: "The model that answers",
                current: self.model.clone(),
                values: offered_models(&self.model, choices),
            },
            OptionSpec {
                id: ConfigId::Effort,
                name: "Effort",
                description: "How hard the model thinks",
                current: self.effort.id().to_owned(),
                values: choices
                    .efforts(&self.model)
                    .into_iter()
                    .map(|e| (e.id().to_owned(), e.id().to_owned(), None))
                    .collect(),
            },
            OptionSpec {
                id: ConfigId::AgentPreset,
                name: "Preset",
                description: "How much the agent does per request",
                current: self.preset.id().to_owned(),
                values: Preset::ALL
                    .into_iter()
                    .map(|p| (p.id().to_owned(), p.id().to_owned(), None))
                    .collect(),
            },
            OptionSpec {
                id: ConfigId::ToolApproval,
                name: "Tool approval",
                description: "Which tool calls run without asking",
                current: self.posture.id().to_owned(),
                values: postures,
            },
        ]
    }

    /// Reads a value id of `option` into a change.
    pub fn read(option: ConfigId, value: &str) -> Result<Change, SettingError> {
        let unknown = || SettingError::UnknownValue { option, value: value.to_owned() };
        Ok(match option {
            ConfigId::Mode => Change::Mode(Mode::from_id(value).ok_or_else(unknown)?),
            ConfigId::Model => Change::Model(value.to_owned()),
            ConfigId::Effort => Change::Effort(Effort::from(value.to_owned())),
            ConfigId::AgentPreset => Change::Preset(Preset::from_id(value).ok_or_else(unknown)?),
            ConfigId::ToolApproval => Change::Posture(Posture::from_id(value).ok_or_else(unknown)?),
        })
    }

    /// Reads and applies one value id of `option`.
    pub(crate) fn apply(
        &mut self,
        option: ConfigId,
        value: &str,
        choices: &Choices,
    ) -> Result<(), SettingError> {
        self.change(Self::read(option, value)?, choices)
    }

    /// Applies one change; a refused change changes nothing.
    pub fn change(&mut self, change: Change, choices: &Choices) -> Result<(), SettingError> {
        match change {
            Change::Mode(mode) => self.mode = mode,
            Change::Model(model) => {
                if !choices.models.iter().any(|(m, _)| *m == model) {
                    return Err(SettingError::UnknownValue { option: ConfigId::Model, value: model });
                }
                // An effort the new model does not know falls back to `auto`.
                if !choices.efforts(&model).contains(&self.effort) {
                    self.effort = Effort::Auto;
                }
                self.model = model;
            }
            Change::Effort(effort) => {
                if !choices.efforts(&self.model).contains(&effort) {
                    return Err(SettingError::UnknownValue {
                        option: ConfigId::Effort,
                        value: effort.id().to_owned(),
                    });
                }
                self.effort = effort;
            }
            Change::Preset(preset) => self.preset = preset,
            Change::Posture(posture) => self.set_posture(posture, choices)?,
        }
        Ok(())
    }

    fn set_posture(&mut self, posture: Posture, choices: &Choices) -> Result<(), SettingError> {
        if let Some(ceiling) = choices.ceiling
            && posture > ceiling
        {
            return Err(SettingError::AboveCeiling { asked: posture, ceiling });
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
            effort: Effort::Level("high".into()),
            preset: Preset::Balanced,
            posture: Posture::Ask,
        }
    }

    #[test]
    fn a_catalog_of_many_models_offers_a_bounded_list_with_the_current_one_and_takes_any() {
        let many =
            Choices { models: (0..1000).map(|i| (format!("p/m{i}"), Vec::new())).collect(), ceiling: None };
        let mut s = Settings { model: "p/m999".into(), effort: Effort::Auto, ..settings() };
        let listed = |s: &Settings| {
            let options = s.options(&many);
            let model = options.iter().find(|o| o.id == ConfigId::Model).expect("a model option");
            model.values.iter().map(|(id, _, _)| id.clone()).collect::<Vec<_>>()
        };
        let values = listed(&s);
        assert_eq!(values.len(), MAX_OFFERED_MODELS);
        assert_eq!((values[0].as_str(), values[1].as_str()), ("p/m999", "p/m0"), "the current one first");
        s.apply(ConfigId::Model, "p/m500", &many).expect("a model not listed is still taken");
        assert_eq!(listed(&s)[0], "p/m500");
        assert!(s.apply(ConfigId::Model, "p/m1000", &many).is_err(), "an unconfigured one is not");
        let early = listed(&Settings { model: "p/m3".into(), ..s.clone() });
        assert_eq!(early[..2], ["p/m0".to_owned(), "p/m1".to_owned()], "a listed one keeps its place");
    }

    #[test]
    fn changing_the_model_keeps_the_other_settings_and_resets_an_unknown_effort() {
        let mut s = settings();
        s.apply(ConfigId::Model, "demo/demo", &choices(None)).expect("applies");
        assert_eq!((s.model.as_str(), &s.effort, s.posture), ("demo/demo", &Effort::Auto, Posture::Ask));
    }

    #[test]
    fn effort_is_stored_as_its_id() {
        let stored = serde_json::to_value(settings()).expect("encodes");
        assert_eq!(stored["effort"], "high");
        let mut auto = stored.clone();
        auto["effort"] = "auto".into();
        let read: Settings = serde_json::from_value(auto).expect("decodes");
        assert_eq!(read.effort, Effort::Auto);
    }

    #[test]
    fn a_posture_above_the_ceiling_is_refused_and_nothing_changes() {
        let mut s = settings();
        let err =
            s.apply(ConfigId::ToolApproval, "yolo", &choices(Some(Posture::Auto))).expect_err("refused");
        assert_eq!(err, SettingError::AboveCeiling { asked: Posture::Yolo, ceiling: Posture::Auto });
        assert_eq!(s.posture, Posture::Ask);
    }

    #[test]
    fn options_above_the_ceiling_are_not_offered() {
        let options = settings().options(&choices(Some(Posture::Ask)));
        let approval = options.iter().find(|o| o.id == ConfigId::ToolApproval).expect("offered");
        let ids: Vec<&str> = approval.values.iter().map(|(id, _, _)| id.as_str()).collect();
        assert_eq!(ids, ["readOnly", "dontAsk", "ask"]);
    }

    #[test]
    fn unknown_values_are_errors_and_change_nothing() {
        let mut s = settings();
        let before = s.clone();
        assert!(matches!(
            s.apply(ConfigId::Effort, "max", &choices(None)),
            Err(SettingError::UnknownValue { option: ConfigId::Effort, .. })
        ));
        assert!(s.apply(ConfigId::Mode, "auto", &choices(None)).is_err(), "legacy ids are the adapter's");
        assert!(s.apply(ConfigId::Model, "nowhere/x", &choices(None)).is_err());
        assert_eq!(s, before);
    }
}
