//! Heron's home directory (`HERON_HOME`, default `~/.heron`): `config.toml` (providers,
//! models, defaults), `.env` (API keys: the only place keys are read from) and `heron.db`.
//! Invariant: a config is checked whole as it is read (every key known, every value in
//! range, no writable path inside the home), and an error names its line without quoting
//! the text, which may hold a secret.
//!
//! This module reads `config.toml` into [`Config`]; the rest is split by concern: the home's
//! paths and keys (`home`), what a provider is and how its requests are shaped (`provider`,
//! [`flavor`]), how far a turn and its tools may go (`limits`) and what sandboxed commands
//! may write (`sandbox`). It sits below the providers and the tools, which read it; it
//! depends on neither.

pub mod flavor;
mod home;
mod limits;
mod provider;
mod sandbox;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::whole_file::WholeFileError;

pub use self::home::{Home, Keys, MAX_ENV_BYTES};
pub use self::limits::{
    COMMAND_GRACE, DEFAULT_COMPACT_AT, DEFAULT_GOAL_CONTINUATIONS, DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_SUBAGENTS, DEFAULT_MAX_TOOL_CALLS, DEFAULT_MAX_TOOL_RESULT_BYTES, DEFAULT_PERMISSION_TIMEOUT,
    DEFAULT_SUBAGENT_MAX_STEPS, DEFAULT_SUBAGENT_TIMEOUT, Deadlines, Pace,
};
pub use self::provider::{Playback, Price, ProviderConfig, ProviderKind, ResolvedModel};
pub use self::sandbox::{DEFAULT_SANDBOX_WRITABLE, SandboxSetting};

/// Why the home could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `config.toml` is not valid.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, without any secret.
        reason: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// No home directory could be found.
    #[error("no home directory: set HERON_HOME")]
    NoHome,
}

/// Why `config.toml` text is not a valid config: what, and where when it can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The 1-based line at fault.
    pub line: Option<usize>,
    /// The 1-based column (in characters) at fault, when the parser knows it.
    pub column: Option<usize>,
    /// What is wrong, without quoting the text (it may hold a secret).
    pub message: String,
}

impl Invalid {
    /// A problem with what `text` says about `key` (a top-level key, or a `[table]`
    /// header), placed on the first line that starts with it when there is one.
    fn at(text: &str, key: &str, message: String) -> Self {
        let line = text
            .lines()
            .position(|l| {
                let l = l.trim_start();
                l.starts_with(key) && (key.starts_with('[') || l[key.len()..].trim_start().starts_with('='))
            })
            .map(|i| i + 1);
        Self { line, column: None, message }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "line {line}, column {column}: {}", self.message),
            (Some(line), None) => write!(f, "line {line}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `provider/model` used when a session does not choose one.
    pub default_model: Option<String>,
    /// Whether the model's commands run in the OS sandbox (`"on"`, the default, or
    /// `"off"`). Postures never change it: this is the only way out.
    #[serde(default)]
    pub sandbox: SandboxSetting,
    /// Whether MCP servers run in the OS sandbox too. Off by default: they are the user's
    /// own programs and run as the user (with the keys withheld); with `sandbox = "off"`
    /// they are never confined.
    #[serde(default)]
    pub sandbox_mcp: bool,
    /// More paths sandboxed commands may write, `~` expanded; when absent, the tool caches
    /// of [`DEFAULT_SANDBOX_WRITABLE`]. None may lie inside `HERON_HOME`.
    pub sandbox_writable: Option<Vec<String>>,
    /// Variables of Heron's environment that look like credentials (`GH_TOKEN`) but that
    /// commands and MCP servers may still inherit. A key of `.env` is never passed.
    #[serde(default)]
    pub sandbox_pass_env: Vec<String>,
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Seconds to wait for a permission answer before treating it as a rejection.
    pub permission_timeout_s: Option<u64>,
    /// Model requests allowed in one turn before it stops with `max_turn_requests`.
    pub max_turn_requests: Option<u32>,
    /// Continuations one goal-mode prompt may start on its own before it stops with
    /// `max_turn_requests` (default [`DEFAULT_GOAL_CONTINUATIONS`]).
    pub max_goal_continuations: Option<u32>,
    /// The most bytes of text, thought and tool-call arguments one model reply may hold
    /// before the turn ends with `max_tokens` (default [`DEFAULT_MAX_REPLY_BYTES`]).
    pub max_reply_bytes: Option<u64>,
    /// The most tool calls of one model reply that run (default [`DEFAULT_MAX_TOOL_CALLS`]).
    pub max_tool_calls_per_reply: Option<u32>,
    /// The most bytes the results of one reply's tool calls hold together, what the model
    /// reads and what the editor is shown (default [`DEFAULT_MAX_TOOL_RESULT_BYTES`]).
    pub max_tool_result_bytes: Option<u64>,
    /// The most subagents (`task`) of one session that run at once; more wait for a place
    /// (default [`DEFAULT_MAX_SUBAGENTS`]).
    pub max_subagents: Option<u32>,
    /// The most model requests one subagent makes before its call fails showing what it
    /// did (default [`DEFAULT_SUBAGENT_MAX_STEPS`]).
    pub subagent_max_steps: Option<u32>,
    /// Seconds one subagent may run before its call fails with what it did (default
    /// [`DEFAULT_SUBAGENT_TIMEOUT`]).
    pub subagent_timeout_s: Option<u64>,
    /// Seconds a built-in file or session tool may take before it fails (default 30).
    pub tool_timeout_s: Option<u64>,
    /// The most seconds a command may run, whatever timeout the model asks for (default 600).
    pub command_timeout_s: Option<u64>,
    /// Seconds an MCP tool call may take before it fails (default 300).
    pub mcp_timeout_s: Option<u64>,
    /// The command that verifies changes (e.g. `cargo test`): with the `delivery` preset, a
    /// turn that changed files ends `paused` unless a run of it succeeded afterwards (any
    /// successful command counts when this is not set).
    pub verify_command: Option<String>,
    /// The share of a model's `context_window` past which a request is compacted before it
    /// is sent (default [`DEFAULT_COMPACT_AT`]); a provider's own `compact_at` wins.
    pub compact_at: Option<f64>,
}

/// The largest `config.toml` read, in bytes: more than any hand-written config, and what
/// keeps a session's model list (sent with every config option update) within reason.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The name of the always-available offline demo provider and its one model.
pub const DEMO_PROVIDER: &str = "demo";
/// The demo model id.
pub const DEMO_MODEL: &str = "demo/demo";

impl Config {
    /// Reads `config.toml`; a missing file is an empty config.
    pub fn load(home: &Home) -> Result<Self, ConfigError> {
        let path = home.config_path();
        let text = match crate::whole_file::read_text(&path, MAX_CONFIG_BYTES) {
            Ok(text) => text,
            Err(WholeFileError::NotFound) => String::new(),
            Err(WholeFileError::TooLarge { .. }) => {
                return Err(ConfigError::Invalid {
                    path: path.display().to_string(),
                    reason: format!("config.toml is read up to {MAX_CONFIG_BYTES} bytes, and it is larger"),
                });
            }
            Err(error) => {
                return Err(ConfigError::Io { path: path.display().to_string(), reason: error.to_string() });
            }
        };
        Self::from_text(home, &text)
            .map_err(|e| ConfigError::Invalid { path: path.display().to_string(), reason: e.to_string() })
    }

    /// The config `text` (the contents of `home`'s `config.toml`) describes, checked against
    /// the home and with the demo provider added.
    pub(crate) fn from_text(home: &Home, text: &str) -> Result<Self, Invalid> {
        let mut config = Self::parse_located(text)?;
        config
            .check_writable_outside(home.root())
            .map_err(|message| Invalid::at(text, "sandbox_writable", message))?;
        config.add_demo();
        Ok(config)
    }

    /// Parses `config.toml` text; an error names its line and column (an unknown key, a bad
    /// value), never quoting the text itself.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_located(text).map_err(|e| e.to_string())
    }

    fn parse_located(text: &str) -> Result<Self, Invalid> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|span| line_column_at(text, span.start));
            Invalid { line: at.map(|(l, _)| l), column: at.map(|(_, c)| c), message: e.message().to_owned() }
        })?;
        for path in config.sandbox_writable.iter().flatten() {
            if !(path == "~" || path.starts_with("~/") || Path::new(path).is_absolute()) {
                let message = format!("sandbox_writable: `{path}` must be absolute or start with `~/`");
                return Err(Invalid::at(text, "sandbox_writable", message));
            }
        }
        limits::check_compact_at(config.compact_at, "").map_err(|m| Invalid::at(text, "compact_at", m))?;
        for (name, provider) in &config.providers {
            let table = format!("[providers.{name}]");
            limits::check_compact_at(provider.compact_at, &format!("provider `{name}`: "))
                .map_err(|m| Invalid::at(text, &table, m))?;
            if name.contains('/') {
                return Err(Invalid::at(
                    text,
                    &table,
                    format!("provider name `{name}` must not contain `/`"),
                ));
            }
            if provider.kind == ProviderKind::Openai && provider.base_url.is_none() {
                return Err(Invalid::at(
                    text,
                    &table,
                    format!("provider `{name}` (kind openai) needs a base_url"),
                ));
            }
            if provider.kind != ProviderKind::Openai && provider.shapes_chat_completions() {
                return Err(Invalid::at(
                    text,
                    &table,
                    format!(
                        "provider `{name}`: flavor, stream_options, max_tokens_field, reasoning_field, \
                         drop_fields, tool_call_content, tool_choice and body shape Chat Completions \
                         requests; kind {} has its own",
                        provider.kind.name()
                    ),
                ));
            }
        }
        Ok(config)
    }

    /// The offline demo provider is always there, so a newcomer can try Heron without keys.
    fn add_demo(&mut self) {
        self.providers.entry(DEMO_PROVIDER.to_owned()).or_insert_with(|| ProviderConfig {
            kind: ProviderKind::Scripted,
            base_url: None,
            api_key_env: None,
            models: vec!["demo".to_owned()],
            script: None,
            playback: Playback::Conversation,
            efforts: Vec::new(),
            prices: BTreeMap::new(),
            context_window: Some(128_000),
            compact_at: None,
            timeout_s: None,
            response_timeout_s: None,
            max_retries: None,
            flavor: None,
            headers: BTreeMap::new(),
            query: BTreeMap::new(),
            key_header: None,
            stream_options: None,
            max_tokens_field: None,
            reasoning_field: None,
            drop_fields: None,
            tool_call_content: None,
            tool_choice: None,
            body: None,
        });
    }

    /// Every `provider/model` id, in config order.
    pub fn model_ids(&self) -> Vec<String> {
        self.providers
            .iter()
            .flat_map(|(name, p)| p.models.iter().map(move |m| format!("{name}/{m}")))
            .collect()
    }

    /// Splits `provider/model` and finds the provider.
    pub fn resolve(&self, model_id: &str) -> Option<ResolvedModel<'_>> {
        let (provider, model) = model_id.split_once('/')?;
        let (name, config) = self.providers.get_key_value(provider)?;
        let model = config.models.iter().find(|m| *m == model)?;
        Some(ResolvedModel { provider: name, config, model })
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column_at(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::flavor::DropField;
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let config = Config::parse(
            r#"
default_model = "local/fast"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_API_KEY"
models = ["fast", "smart"]
[providers.demo]
kind = "scripted"
models = ["demo"]
script = "demo.jsonl"
"#,
        )
        .expect("parses");
        assert_eq!(config.model_ids(), ["demo/demo", "local/fast", "local/smart"]);
        assert!(config.resolve("local/smart").is_some());
        assert!(config.resolve("local/huge").is_none());
    }

    #[test]
    fn an_unknown_flavor_or_shaping_key_is_refused_with_its_line() {
        let table = "[providers.x]\nkind = \"openai\"\nbase_url = \"http://h\"\n";
        let err = Config::parse(&format!("{table}flavor = \"gemini\"\n")).expect_err("refused");
        assert!(err.starts_with("line 4, column 10: ") && err.contains("gemini"), "{err}");
        let err = Config::parse(&format!("{table}key_heder = \"a\"\n")).expect_err("refused");
        assert!(err.starts_with("line 4, column 1: ") && err.contains("key_heder"), "{err}");
    }

    #[test]
    fn drop_fields_reach_the_shape_and_a_bad_entry_is_refused_with_its_line() {
        let table = "[providers.x]\nkind = \"openai\"\nbase_url = \"http://h\"\n";
        let config =
            Config::parse(&format!("{table}drop_fields = [\"parallel_tool_calls\", \"messages.name\"]\n"))
                .expect("parses");
        assert_eq!(
            config.providers["x"].request_shape().drop_fields,
            [DropField::Body("parallel_tool_calls".into()), DropField::Message("name".into())]
        );
        for (bad, why) in
            [("\"model\"", "cannot be dropped"), ("\"tools.x\"", "neither"), ("\"a b\"", "not a field")]
        {
            let err = Config::parse(&format!("{table}drop_fields = [\"seed\", {bad}]\n")).expect_err(bad);
            assert!(err.starts_with("line 4, column ") && err.contains(why), "{err}");
        }
        let err = Config::parse("[providers.a]\nkind = \"anthropic\"\ndrop_fields = [\"seed\"]\n")
            .expect_err("refused");
        assert!(err.contains("kind anthropic has its own"), "{err}");
    }

    #[test]
    fn body_tool_choice_and_tool_call_content_reach_the_shape_and_needed_fields_are_refused() {
        use super::flavor::{ToolCallContent, ToolChoice};
        let table = "[providers.x]\nkind = \"openai\"\nbase_url = \"http://h\"\n";
        let config = Config::parse(&format!(
            "{table}tool_call_content = \"omitted\"\ntool_choice = {{ function = \"read_file\" }}\n\
             body = {{ temperature = 0.5, chat_template_kwargs = {{ enable_thinking = false }} }}\n"
        ))
        .expect("parses");
        let shape = config.providers["x"].request_shape();
        assert_eq!(shape.tool_call_content, ToolCallContent::Omitted);
        assert_eq!(shape.tool_choice, Some(ToolChoice::Function("read_file".into())));
        assert_eq!(shape.body.0.len(), 2);
        assert_eq!(
            shape.body.0[0],
            ("chat_template_kwargs".into(), serde_json::json!({ "enable_thinking": false }))
        );
        for word in ["auto", "required", "none"] {
            Config::parse(&format!("{table}tool_choice = \"{word}\"\n")).expect(word);
        }
        for bad in
            ["tool_choice = \"any\"", "tool_choice = { function = \"\" }", "tool_call_content = \"nil\""]
        {
            let err = Config::parse(&format!("{table}{bad}\n")).expect_err(bad);
            assert!(err.starts_with("line 4, column "), "{err}");
        }
        for needed in ["model", "messages", "stream"] {
            let err = Config::parse(&format!("{table}body = {{ {needed} = \"x\" }}\n")).expect_err(needed);
            assert!(err.starts_with("line 4, column ") && err.contains("cannot be set"), "{err}");
        }
        let err = Config::parse("[providers.a]\nkind = \"anthropic\"\nbody = { top_k = 5 }\n")
            .expect_err("refused");
        assert!(err.contains("kind anthropic has its own"), "{err}");
    }

    #[test]
    fn an_openai_provider_without_base_url_is_refused() {
        let err = Config::parse("[providers.x]\nkind = \"openai\"\n").expect_err("refused");
        assert!(err.contains("base_url"), "{err}");
    }

    #[test]
    fn a_check_after_parsing_names_the_line_of_its_key_or_table() {
        let home = Home::at("/nonexistent-heron-home");
        let text = "default_model = \"x/m\"\n\n[providers.ok]\nkind = \"scripted\"\n\n[providers.x]\nkind = \"openai\"\n";
        let invalid = Config::from_text(&home, text).expect_err("refused");
        assert_eq!((invalid.line, invalid.column), (Some(6), None), "{invalid}");
        let invalid = Config::from_text(&home, "compact_at = 2.0\n").expect_err("refused");
        assert_eq!(invalid.line, Some(1), "{invalid}");
        let invalid = Config::from_text(&home, "\n\nbogus = 1\n").expect_err("refused");
        assert_eq!((invalid.line, invalid.column), (Some(3), Some(1)), "{invalid}");
        assert!(invalid.to_string().starts_with("line 3, column 1: "), "{invalid}");
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let err = Config::parse("max_turn_requests = 3\ndefualt_model = \"x/y\"\n").expect_err("refused");
        assert!(err.starts_with("line 2, column 1: ") && err.contains("defualt_model"), "{err}");
    }

    #[test]
    fn a_config_past_its_size_is_refused_naming_the_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let comment = format!("# {}\n", "x".repeat(usize::try_from(MAX_CONFIG_BYTES).unwrap_or(0)));
        std::fs::write(home.config_path(), comment).expect("write");
        let refused = Config::load(&home).expect_err("too large").to_string();
        assert!(refused.contains(&format!("read up to {MAX_CONFIG_BYTES}")), "{refused}");
    }

    #[cfg(unix)]
    #[test]
    fn a_config_that_is_a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let name = std::ffi::CString::new(home.config_path().as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path and a plain mode.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let refused = Config::load(&home).expect_err("not a file").to_string();
        assert!(refused.contains("not a regular file"), "{refused}");
    }
}
