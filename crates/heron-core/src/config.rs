//! Heron's home directory (`HERON_HOME`, default `~/.heron`): `config.toml` (providers,
//! models, defaults), `.env` (API keys: the only place keys are read from) and `heron.db`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::llm::openai::flavor::{DropField, Flavor, MaxTokensField, ReasoningField, RequestShape};
use crate::secret::Secret;

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

/// The paths under Heron's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `HERON_HOME`, else `~/.heron`.
    pub fn from_env() -> Result<Self, ConfigError> {
        if let Some(dir) = std::env::var_os("HERON_HOME").filter(|d| !d.is_empty()) {
            return Ok(Self { root: PathBuf::from(dir) });
        }
        let home = std::env::var_os("HOME").filter(|d| !d.is_empty()).ok_or(ConfigError::NoHome)?;
        Ok(Self { root: PathBuf::from(home).join(".heron") })
    }

    /// A home at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `.env`, where keys live.
    pub fn env_path(&self) -> PathBuf {
        self.root.join(".env")
    }

    /// `heron.db`, the session store.
    pub fn db_path(&self) -> PathBuf {
        self.root.join("heron.db")
    }
}

/// The kind of a provider: the API it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// An OpenAI-compatible Chat Completions endpoint, streamed.
    Openai,
    /// Anthropic's Messages API, streamed.
    Anthropic,
    /// OpenAI's Responses API, streamed.
    #[serde(rename = "openai-responses", alias = "openai_responses")]
    OpenaiResponses,
    /// The deterministic scripted model.
    Scripted,
}

impl ProviderKind {
    /// The name `config.toml` uses.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// Whether it is reached over HTTP (and may need a key).
    pub fn is_http(self) -> bool {
        self != ProviderKind::Scripted
    }

    /// The endpoint used when `base_url` is not set; `openai` has none, since it names
    /// whatever compatible server the user runs.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some(crate::llm::anthropic::DEFAULT_BASE_URL),
            ProviderKind::OpenaiResponses => Some(crate::llm::responses::DEFAULT_BASE_URL),
            ProviderKind::Openai | ProviderKind::Scripted => None,
        }
    }
}

/// How the scripted model picks the turn it plays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Playback {
    /// The turn numbered by the assistant messages already in the conversation.
    #[default]
    Conversation,
    /// The next turn of the file, in the order requests arrive.
    Sequential,
}

/// A model's price, per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million input tokens read from the provider's prompt cache (default: `input`,
    /// which overstates rather than hides a cost).
    pub cached_input: Option<f64>,
    /// Per million input tokens written to the prompt cache (default: `input`).
    pub cache_write: Option<f64>,
    /// ISO 4217 currency, default USD.
    #[serde(default = "usd")]
    pub currency: String,
}

impl Price {
    /// What one request's `usage` cost: cached and cache-written input at their own
    /// prices, the rest of the input and all output at theirs.
    pub fn cost(&self, usage: &crate::llm::Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let written = usage.cache_write_input_tokens.min(usage.input_tokens - cached);
        let plain = usage.input_tokens - cached - written;
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
        per(plain, self.input)
            + per(cached, self.cached_input.unwrap_or(self.input))
            + per(written, self.cache_write.unwrap_or(self.input))
            + per(usage.output_tokens, self.output)
    }
}

fn usd() -> String {
    "USD".to_owned()
}

/// One `[providers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// What speaks at the other end.
    pub kind: ProviderKind,
    /// The endpoint (required for `openai`; `anthropic` and `openai-responses` default to
    /// the vendor's own).
    pub base_url: Option<String>,
    /// The name of the key in `HERON_HOME/.env` (HTTP kinds; none for keyless servers).
    pub api_key_env: Option<String>,
    /// The models this provider serves; model ids are `NAME/MODEL`.
    #[serde(default)]
    pub models: Vec<String>,
    /// A script file, relative to `HERON_HOME` (`scripted` kind; the built-in demo otherwise).
    pub script: Option<PathBuf>,
    /// How a script picks its turn (`scripted` kind): by conversation (default) or in
    /// request order, shared by every provider playing the same file (recordings).
    #[serde(default)]
    pub playback: Playback,
    /// Reasoning effort levels the provider accepts, e.g. `["low", "medium", "high"]`.
    #[serde(default)]
    pub efforts: Vec<String>,
    /// Prices by model name.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// The context window in tokens: usage reports show it, and requests are compacted to
    /// stay within it.
    pub context_window: Option<u64>,
    /// The share of `context_window` past which a request is compacted first; overrides the
    /// top-level `compact_at` for this provider's models.
    pub compact_at: Option<f64>,
    /// Seconds without progress before a request fails (default 120).
    pub timeout_s: Option<u64>,
    /// Retries of a transient failure (default 3).
    pub max_retries: Option<u32>,
    /// The server family (`openai` kind), which presets the keys below; detected from the
    /// base URL's host when unambiguous.
    pub flavor: Option<Flavor>,
    /// Extra headers sent with every request (HTTP kinds).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Query parameters added to the endpoint (HTTP kinds), e.g. Azure's `api-version`.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// The header carrying the key as it is, e.g. `api-key` (default `Authorization: Bearer`).
    pub key_header: Option<String>,
    /// Whether `stream_options` is sent, for usage reports (Mistral refuses it).
    pub stream_options: Option<bool>,
    /// `max_tokens` or `max_completion_tokens`.
    pub max_tokens_field: Option<MaxTokensField>,
    /// How reasoning is passed back: `none`, `reasoning_content` or `reasoning_details`.
    pub reasoning_field: Option<ReasoningField>,
    /// Fields left out of every request, last: `KEY` of the body, `messages.KEY` of every
    /// message; for a server that refuses one no preset knows.
    pub drop_fields: Option<Vec<DropField>>,
}

impl ProviderConfig {
    /// The endpoint: `base_url`, else the kind's default.
    pub fn endpoint(&self) -> Option<&str> {
        self.base_url.as_deref().or(self.kind.default_base_url())
    }

    /// Whether a key that only Chat Completions requests know is set.
    fn shapes_chat_completions(&self) -> bool {
        self.flavor.is_some()
            || self.stream_options.is_some()
            || self.max_tokens_field.is_some()
            || self.reasoning_field.is_some()
            || self.drop_fields.is_some()
    }

    /// The flavor in effect (`openai` kind only): the configured one, else the one the
    /// base URL names.
    pub fn effective_flavor(&self) -> Option<Flavor> {
        if self.kind != ProviderKind::Openai {
            return None;
        }
        self.flavor.or_else(|| self.base_url.as_deref().and_then(Flavor::detect))
    }

    /// The request shape: the flavor's preset, then each key set here.
    pub fn request_shape(&self) -> RequestShape {
        let mut shape = self.effective_flavor().map_or_else(RequestShape::default, Flavor::shape);
        if let Some(set) = self.stream_options {
            shape.stream_options = set;
        }
        if let Some(set) = self.max_tokens_field {
            shape.max_tokens_field = set;
        }
        if let Some(set) = self.reasoning_field {
            shape.reasoning_field = set;
        }
        if let Some(set) = &self.key_header {
            shape.key_header = Some(set.clone());
        }
        if let Some(set) = &self.drop_fields {
            shape.drop_fields = set.clone();
        }
        shape.headers.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        shape.query.extend(self.query.iter().map(|(k, v)| (k.clone(), v.clone())));
        shape
    }
}

/// `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `provider/model` used when a session does not choose one.
    pub default_model: Option<String>,
    /// Whether commands and MCP servers run in the OS sandbox (`"on"`, the default, or
    /// `"off"`). Postures never change it: this is the only way out.
    #[serde(default)]
    pub sandbox: SandboxSetting,
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

/// The share of the context window a request may fill before Heron compacts it: room is
/// left for the answer and for the estimate being off.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;

/// Refuses a `compact_at` that is no share of a window (`where_` names the table).
fn check_compact_at(value: Option<f64>, where_: &str) -> Result<(), String> {
    match value {
        Some(share) if !(share > 0.0 && share <= 1.0) => Err(format!(
            "{where_}compact_at = {share}: it is the share of the context window a request may fill, \
             above 0 and at most 1 (e.g. 0.8)"
        )),
        _ => Ok(()),
    }
}

/// The reply cap when `config.toml` does not say: far beyond real answers, far below what
/// would hurt.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 * 1024 * 1024;

/// The tool calls of one reply that run when `config.toml` does not say: more than a real
/// step asks for at once, few enough that a runaway reply stops early.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 64;

/// What one reply's tool results may hold when `config.toml` does not say: more than any
/// context window takes in one step.
pub const DEFAULT_MAX_TOOL_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// `sandbox = "on" | "off"` in `config.toml`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxSetting {
    /// Commands and MCP servers are confined (where the kernel allows it).
    #[default]
    On,
    /// They run with Heron's own rights.
    Off,
}

/// The tool caches sandboxed commands may write when `sandbox_writable` is not set: where
/// cargo, npm, yarn, pnpm, pip, uv, Go, Maven and Gradle keep what they download and build,
/// so that builds work in the sandbox. Never a tool's programs (`~/.cargo/bin`,
/// `~/.local/bin`, `~/.rustup`, `~/go/bin`), Python's site-packages or a config file
/// (`~/.cargo/config.toml`): those run, or steer what runs, outside the sandbox later.
/// Cargo's three lock and tracking files are files, not folders; a path that does not
/// exist when a command starts is not granted.
pub const DEFAULT_SANDBOX_WRITABLE: [&str; 15] = [
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.cargo/.package-cache",
    "~/.cargo/.package-cache-mutate",
    "~/.cargo/.global-cache",
    "~/.cache",
    "~/.npm/_cacache",
    "~/.npm/_logs",
    "~/go/pkg/mod",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.gradle/daemon",
    "~/.yarn/berry/cache",
    "~/.pnpm-store",
    "~/.local/share/pnpm/store",
];

/// Continuations a goal-mode prompt may start when `config.toml` does not say.
pub const DEFAULT_GOAL_CONTINUATIONS: u32 = 10;

/// The name of the always-available offline demo provider and its one model.
pub const DEMO_PROVIDER: &str = "demo";
/// The demo model id.
pub const DEMO_MODEL: &str = "demo/demo";

impl Config {
    /// Reads `config.toml`; a missing file is an empty config.
    pub fn load(home: &Home) -> Result<Self, ConfigError> {
        let path = home.config_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(ConfigError::Io { path: path.display().to_string(), reason: e.to_string() });
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
        check_compact_at(config.compact_at, "").map_err(|m| Invalid::at(text, "compact_at", m))?;
        for (name, provider) in &config.providers {
            let table = format!("[providers.{name}]");
            check_compact_at(provider.compact_at, &format!("provider `{name}`: "))
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
                        "provider `{name}`: flavor, stream_options, max_tokens_field, reasoning_field and \
                         drop_fields shape Chat Completions requests; kind {} has its own",
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
            max_retries: None,
            flavor: None,
            headers: BTreeMap::new(),
            query: BTreeMap::new(),
            key_header: None,
            stream_options: None,
            max_tokens_field: None,
            reasoning_field: None,
            drop_fields: None,
        });
    }

    /// How long tool calls may take; a setting of 0 counts as 1 s.
    pub fn deadlines(&self) -> crate::tools::deadline::Deadlines {
        let defaults = crate::tools::deadline::Deadlines::default();
        let secs = |set: Option<u64>, default: std::time::Duration| {
            set.map_or(default, |s| std::time::Duration::from_secs(s.max(1)))
        };
        crate::tools::deadline::Deadlines {
            quick: secs(self.tool_timeout_s, defaults.quick),
            command: secs(self.command_timeout_s, defaults.command),
            external: secs(self.mcp_timeout_s, defaults.external),
        }
    }

    /// The reply cap, in bytes.
    pub(crate) fn reply_cap(&self) -> usize {
        usize::try_from(self.max_reply_bytes.unwrap_or(DEFAULT_MAX_REPLY_BYTES)).unwrap_or(usize::MAX)
    }

    /// How many tool calls of one reply run (at least one).
    pub fn tool_call_cap(&self) -> usize {
        self.max_tool_calls_per_reply
            .map_or(DEFAULT_MAX_TOOL_CALLS, |n| usize::try_from(n).unwrap_or(usize::MAX))
            .max(1)
    }

    /// The bytes one reply's tool results may hold.
    pub fn tool_result_cap(&self) -> usize {
        self.max_tool_result_bytes
            .map_or(DEFAULT_MAX_TOOL_RESULT_BYTES, |n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The extra paths sandboxed commands may write, `~` expanded against `$HOME`. Without
    /// `HOME`, paths under `~` are left out (a configured one is refused at load).
    pub(crate) fn writable_paths(&self) -> Vec<PathBuf> {
        let user_home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        self.writable_entries().filter_map(|entry| expand_tilde(entry, user_home.as_deref())).collect()
    }

    fn writable_entries(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match &self.sandbox_writable {
            Some(paths) => Box::new(paths.iter().map(String::as_str)),
            None => Box::new(DEFAULT_SANDBOX_WRITABLE.into_iter()),
        }
    }

    /// Refuses a configured writable path inside Heron's home (whose keys the sandbox hides)
    /// or under `~` without `HOME`. Defaults are not checked: a home at `~` itself must not
    /// make every config invalid, and the sandbox never grants a path inside the home anyway.
    fn check_writable_outside(&self, heron_home: &Path) -> Result<(), String> {
        let user_home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let Some(configured) = &self.sandbox_writable else { return Ok(()) };
        for entry in configured {
            let Some(path) = expand_tilde(entry, user_home.as_deref()) else {
                return Err(format!("sandbox_writable: `{entry}` needs HOME to be set"));
            };
            if is_within(&path, heron_home) {
                return Err(format!(
                    "sandbox_writable: `{entry}` is inside HERON_HOME ({}), which holds the API keys that \
                     sandboxed commands must never see; list a path outside it",
                    heron_home.display()
                ));
            }
        }
        Ok(())
    }

    /// The share of `provider`'s context window past which requests are compacted.
    pub fn compact_at(&self, provider: &ProviderConfig) -> f64 {
        provider.compact_at.or(self.compact_at).unwrap_or(DEFAULT_COMPACT_AT)
    }

    /// Continuations one goal-mode prompt may start.
    pub(crate) fn goal_continuations(&self) -> u32 {
        self.max_goal_continuations.unwrap_or(DEFAULT_GOAL_CONTINUATIONS)
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

/// `~` or `~/rest` against the user's home; other paths as they are. `None` when `~` is
/// used and there is no home.
fn expand_tilde(entry: &str, user_home: Option<&Path>) -> Option<PathBuf> {
    match entry.strip_prefix('~') {
        Some("") => user_home.map(Path::to_path_buf),
        Some(rest) if rest.starts_with('/') => user_home.map(|home| home.join(rest.trim_start_matches('/'))),
        _ => Some(PathBuf::from(entry)),
    }
}

/// Whether `path` is `dir` or inside it, as written and after following symlinks (so that a
/// link into the home is caught too).
fn is_within(path: &Path, dir: &Path) -> bool {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let resolve = |p: &Path| crate::tools::roots::resolve_against(&cwd, &p.to_string_lossy());
    path.starts_with(dir) || resolve(path).starts_with(resolve(dir))
}

/// A `provider/model` id found in the config.
#[derive(Debug, Clone, Copy)]
pub struct ResolvedModel<'a> {
    /// The provider's name.
    pub provider: &'a str,
    /// Its configuration.
    pub config: &'a ProviderConfig,
    /// The model name as the provider knows it.
    pub model: &'a str,
}

/// API keys from `HERON_HOME/.env`. The process environment is never consulted.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    keys: BTreeMap<String, Secret>,
}

/// Says once per process, on stderr, that `.env` has another name (a hard link): the
/// sandbox hides the home by path, so a command could read the keys through that name.
fn warn_if_linked(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        static SAID: std::sync::Once = std::sync::Once::new();
        if let Ok(metadata) = std::fs::metadata(path)
            && metadata.nlink() > 1
        {
            SAID.call_once(|| {
                tracing::warn!(
                    path = %path.display(),
                    names = metadata.nlink(),
                    "the key file has another name (a hard link), through which commands could read it; \
                     `heron doctor` says how to find it"
                );
            });
        }
    }
}

impl Keys {
    /// Reads `.env`; a missing file means no keys.
    pub fn load(home: &Home) -> Result<Self, ConfigError> {
        let path = home.env_path();
        let iter = match dotenvy::from_path_iter(&path) {
            Ok(iter) => iter,
            Err(dotenvy::Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::default());
            }
            Err(e) => {
                return Err(ConfigError::Io { path: path.display().to_string(), reason: e.to_string() });
            }
        };
        let mut keys = BTreeMap::new();
        for item in iter {
            // The parser's message can quote the line, which may hold a key: say only where.
            let (name, value) = item.map_err(|_| ConfigError::Invalid {
                path: path.display().to_string(),
                reason: "a line is not NAME=value".to_owned(),
            })?;
            keys.insert(name, Secret::new(value));
        }
        warn_if_linked(&path);
        Ok(Self { keys })
    }

    /// Keys given directly (tests, `heron setup`).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { keys: pairs.into_iter().map(|(k, v)| (k, Secret::new(v))).collect() }
    }

    /// The key called `name`, if set and non-empty.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.keys.get(name).filter(|s| !s.is_empty())
    }

    /// The name of every key in `.env`, set or empty: what children must not inherit.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Every key, for redaction.
    pub fn all(&self) -> impl Iterator<Item = &Secret> {
        self.keys.values()
    }
}

#[cfg(test)]
mod tests {
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
    fn explicit_keys_override_the_flavor_the_host_names() {
        let config = Config::parse(
            r#"
[providers.m]
kind = "openai"
base_url = "https://api.mistral.ai/v1"
models = ["x"]
[providers.d]
kind = "openai"
base_url = "https://api.deepseek.com"
reasoning_field = "none"
stream_options = false
[providers.l]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
flavor = "llamacpp"
max_tokens_field = "max_completion_tokens"
key_header = "x-key"
headers = { "X-Title" = "heron" }
query = { a = "1" }
"#,
        )
        .expect("parses");
        let mistral = config.providers["m"].request_shape();
        assert!(!mistral.stream_options);
        assert_eq!(config.providers["m"].effective_flavor(), Some(Flavor::Mistral));
        let deepseek = config.providers["d"].request_shape();
        assert_eq!((deepseek.reasoning_field, deepseek.stream_options), (ReasoningField::None, false));
        let local = &config.providers["l"];
        assert_eq!(local.effective_flavor(), Some(Flavor::Llamacpp), "the configured flavor wins");
        let shape = local.request_shape();
        assert_eq!(shape.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(shape.key_header.as_deref(), Some("x-key"));
        assert_eq!(shape.headers, [("X-Title".to_owned(), "heron".to_owned())]);
        assert_eq!(shape.query, [("a".to_owned(), "1".to_owned())]);
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
    fn compact_at_defaults_to_eighty_percent_and_a_provider_overrides_the_top_level() {
        let config = Config::parse(
            "compact_at = 0.6\n[providers.a]\nkind = \"scripted\"\n\
             [providers.b]\nkind = \"scripted\"\ncompact_at = 0.9\n",
        )
        .expect("parses");
        assert_eq!(config.compact_at(&config.providers["a"]), 0.6);
        assert_eq!(config.compact_at(&config.providers["b"]), 0.9);
        let plain = Config::parse("[providers.a]\nkind = \"scripted\"\n").expect("parses");
        assert_eq!(plain.compact_at(&plain.providers["a"]), DEFAULT_COMPACT_AT);
        for bad in ["compact_at = 0.0", "compact_at = 1.5", "compact_at = nan"] {
            let err = Config::parse(bad).expect_err(bad);
            assert!(err.contains("compact_at"), "{err}");
        }
        let err =
            Config::parse("[providers.a]\nkind = \"scripted\"\ncompact_at = -1.0\n").expect_err("negative");
        assert!(err.contains("provider `a`"), "{err}");
    }

    #[test]
    fn goal_continuations_default_to_ten_and_follow_the_config() {
        assert_eq!(Config::parse("").expect("parses").goal_continuations(), 10);
        let config = Config::parse("max_goal_continuations = 3\n").expect("parses");
        assert_eq!(config.goal_continuations(), 3);
    }

    #[test]
    fn native_kinds_default_their_endpoint_and_refuse_chat_completions_keys() {
        let config = Config::parse(
            "[providers.a]\nkind = \"anthropic\"\nmodels = [\"m\"]\n[providers.r]\nkind = \"openai-responses\"\n",
        )
        .expect("parses");
        assert_eq!(config.providers["a"].endpoint(), Some("https://api.anthropic.com/v1"));
        assert_eq!(config.providers["r"].kind, ProviderKind::OpenaiResponses);
        let err =
            Config::parse("[providers.a]\nkind = \"anthropic\"\nflavor = \"openai\"\n").expect_err("refused");
        assert!(err.contains("kind anthropic has its own"), "{err}");
        // A host that names a Chat Completions server says nothing about another kind.
        let responses = Config::parse(
            "[providers.r]\nkind = \"openai-responses\"\nbase_url = \"https://api.openai.com/v1\"\n",
        )
        .expect("parses");
        assert_eq!(responses.providers["r"].effective_flavor(), None);
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
    fn the_sandbox_is_on_by_default_and_off_only_when_said() {
        assert_eq!(Config::parse("").expect("parses").sandbox, SandboxSetting::On);
        assert_eq!(Config::parse("sandbox = \"off\"\n").expect("parses").sandbox, SandboxSetting::Off);
        let err = Config::parse("sandbox = \"ask\"\n").expect_err("refused");
        assert!(err.starts_with("line 1, column 11: ") && err.contains("`on` or `off`"), "{err}");
        let err = Config::parse("sandbox_writeable = [\"/x\"]\n").expect_err("refused");
        assert!(err.starts_with("line 1, column 1: ") && err.contains("sandbox_writeable"), "{err}");
    }

    #[test]
    fn writable_paths_default_to_the_tool_caches_and_expand_the_tilde() {
        let home = Path::new("/home/u");
        assert_eq!(expand_tilde("~/.cargo", Some(home)), Some(PathBuf::from("/home/u/.cargo")));
        assert_eq!(expand_tilde("~", Some(home)), Some(PathBuf::from("/home/u")));
        assert_eq!(expand_tilde("/opt/cache", None), Some(PathBuf::from("/opt/cache")));
        assert_eq!(expand_tilde("~/.npm", None), None);
        let unset = Config::parse("").expect("parses");
        let defaults: Vec<&str> = unset.writable_entries().collect();
        assert_eq!(defaults, DEFAULT_SANDBOX_WRITABLE);
        let listed = Config::parse("sandbox_writable = [\"/opt/cache\"]\n").expect("parses");
        assert_eq!(listed.writable_paths(), [PathBuf::from("/opt/cache")]);
        let err = Config::parse("sandbox_writable = [\"cache\"]\n").expect_err("relative");
        assert!(err.contains("`cache`"), "{err}");
    }

    #[test]
    fn a_writable_path_inside_the_home_is_refused_at_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path().join("heron"));
        std::fs::create_dir_all(home.root()).expect("home");
        let inside = home.root().join("cache");
        std::fs::write(
            home.config_path(),
            format!("sandbox_writable = [\"/tmp\", \"{}\"]\n", inside.display()),
        )
        .expect("config");
        let err = Config::load(&home).expect_err("refused").to_string();
        assert!(err.contains("inside HERON_HOME") && err.contains(&inside.display().to_string()), "{err}");
        // A link into the home is the home.
        std::os::unix::fs::symlink(home.root(), dir.path().join("link")).expect("link");
        let linked = dir.path().join("link/cache");
        std::fs::write(home.config_path(), format!("sandbox_writable = [\"{}\"]\n", linked.display()))
            .expect("config");
        assert!(Config::load(&home).is_err(), "a path through a link into the home is refused");
        std::fs::write(home.config_path(), "sandbox_writable = [\"/opt/elsewhere\"]\n").expect("config");
        assert!(Config::load(&home).is_ok());
    }

    #[test]
    fn cached_and_cache_written_input_cost_their_own_prices_and_default_to_input() {
        let usage = crate::llm::Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cached_input_tokens: 500_000,
            cache_write_input_tokens: 250_000,
            reasoning_tokens: 0,
        };
        let price = Price {
            input: 4.0,
            output: 10.0,
            cached_input: Some(0.4),
            cache_write: Some(5.0),
            currency: "USD".into(),
        };
        assert!((price.cost(&usage) - (1.0 + 0.2 + 1.25 + 10.0)).abs() < 1e-9);
        let plain = Price { cached_input: None, cache_write: None, ..price };
        assert!((plain.cost(&usage) - 14.0).abs() < 1e-9);
        // Counts a server got wrong (more cached than sent) never make a negative cost.
        let odd = crate::llm::Usage { cached_input_tokens: 9_000_000, ..usage };
        assert!(plain.cost(&odd) >= 0.0);
    }

    #[test]
    fn keys_come_from_the_env_file_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        std::fs::write(home.env_path(), "LOCAL_API_KEY=sk-test-1234\nEMPTY=\n").expect("write");
        let keys = Keys::load(&home).expect("loads");
        assert_eq!(keys.get("LOCAL_API_KEY").map(Secret::expose), Some("sk-test-1234"));
        assert!(keys.get("EMPTY").is_none());
        assert!(keys.get("PATH").is_none(), "the process environment is never read");
    }
}
