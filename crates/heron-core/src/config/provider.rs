//! What a provider is in `config.toml`: its kind, models, prices and the keys that shape
//! its requests, and the model ids it serves. Invariant: the endpoint a kind defaults to is
//! written here once, so what the config says and what a provider sends cannot differ.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::flavor::{
    BodyFields, DropField, Flavor, MaxTokensField, ReasoningField, RequestShape, ToolCallContent, ToolChoice,
};
use crate::types::Usage;

/// Where Anthropic's own API lives; requests go to `{ANTHROPIC_BASE_URL}/messages`.
const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// Where OpenAI serves the Responses API; requests go to `{OPENAI_RESPONSES_BASE_URL}/responses`.
const OPENAI_RESPONSES_BASE_URL: &str = "https://api.openai.com/v1";

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
            ProviderKind::Anthropic => Some(ANTHROPIC_BASE_URL),
            ProviderKind::OpenaiResponses => Some(OPENAI_RESPONSES_BASE_URL),
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
    pub fn cost(&self, usage: &Usage) -> f64 {
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
    /// Seconds one response may stream in all (default 3600).
    pub response_timeout_s: Option<u64>,
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
    /// What an assistant message that only calls tools sends as its `content`: `null`,
    /// `empty` (`""`) or `omitted`.
    pub tool_call_content: Option<ToolCallContent>,
    /// The `tool_choice` of requests that offer tools: `auto`, `required`, `none` or
    /// `{ function = "NAME" }` (a forcing choice holds until the turn's first tool call).
    pub tool_choice: Option<ToolChoice>,
    /// Extra fields of every request body, set last (`temperature`, `top_p`,
    /// `chat_template_kwargs`, ...); `model`, `messages` and `stream` are refused.
    pub body: Option<BodyFields>,
}

impl ProviderConfig {
    /// The endpoint: `base_url`, else the kind's default.
    pub fn endpoint(&self) -> Option<&str> {
        self.base_url.as_deref().or(self.kind.default_base_url())
    }

    /// Whether a key that only Chat Completions requests know is set.
    pub(super) fn shapes_chat_completions(&self) -> bool {
        self.flavor.is_some()
            || self.stream_options.is_some()
            || self.max_tokens_field.is_some()
            || self.reasoning_field.is_some()
            || self.drop_fields.is_some()
            || self.tool_call_content.is_some()
            || self.tool_choice.is_some()
            || self.body.is_some()
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
        if let Some(set) = self.tool_call_content {
            shape.tool_call_content = set;
        }
        if let Some(set) = &self.tool_choice {
            shape.tool_choice = Some(set.clone());
        }
        if let Some(set) = &self.body {
            shape.body = set.clone();
        }
        shape.headers.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        shape.query.extend(self.query.iter().map(|(k, v)| (k.clone(), v.clone())));
        shape
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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
    fn cached_and_cache_written_input_cost_their_own_prices_and_default_to_input() {
        let usage = Usage {
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
        let odd = Usage { cached_input_tokens: 9_000_000, ..usage };
        assert!(plain.cost(&odd) >= 0.0);
    }
}
