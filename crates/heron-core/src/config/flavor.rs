//! Per-server request shaping: what each OpenAI-compatible server accepts differs (Mistral
//! refuses unknown fields with 422, Azure wants its key in `api-key`, DeepSeek wants its
//! reasoning back), so a provider carries a [`RequestShape`], preset by its [`Flavor`] and
//! overridden key by key from `config.toml`. Invariant: no field a streamed completion
//! cannot do without (`model`, `messages`, `stream`; a message's `role`, `content` and tool
//! call fields) can be dropped, or replaced by the `body` table.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

/// The server family a provider talks to, which presets its [`RequestShape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// OpenAI itself.
    Openai,
    /// Azure OpenAI deployments.
    Azure,
    /// Mistral's La Plateforme.
    Mistral,
    /// DeepSeek.
    Deepseek,
    /// OpenRouter.
    Openrouter,
    /// Ollama's OpenAI-compatible endpoint.
    Ollama,
    /// llama.cpp's `llama-server`.
    Llamacpp,
}

/// Which field carries the answer's token limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: what most compatible servers read (Mistral refuses the other).
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models require.
    MaxCompletionTokens,
}

/// How an assistant message's reasoning is passed back in later requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// Not at all (Mistral refuses reasoning fields in messages).
    #[default]
    None,
    /// As `reasoning_content` text (DeepSeek's thinking mode fails tool turns without it).
    ReasoningContent,
    /// As the `reasoning_details` array the server sent (OpenRouter, for Gemini and
    /// Anthropic models whose signed reasoning must come back).
    ReasoningDetails,
}

/// Which tool-call ids a server accepts in the history sent back to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CallIds {
    /// Any id, sent as it was recorded.
    #[default]
    AsRecorded,
    /// Exactly 9 letters and digits (Mistral, which refuses the `call_...` and `toolu_...`
    /// ids other servers gave earlier in a session that switched models). Other ids are
    /// mapped to such ids, the same one for a call and its result, and the same in every
    /// request, so the prompt cache still matches.
    NineAlphanumeric,
}

/// What the `content` of an assistant message that only calls tools is sent as. Servers
/// disagree: OpenAI documents `null`, and gateways in front of Bedrock or Anthropic refuse
/// an empty string (an empty text block); llama-cpp-python's server refuses `null` (its
/// request model wants a string) and answers 500, which would fail every later request of
/// the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallContent {
    /// `"content": null`, as OpenAI documents it.
    #[default]
    Null,
    /// `"content": ""`, which every llama.cpp server accepts.
    Empty,
    /// No `content` key at all (OpenAI's schema allows it beside `tool_calls`).
    Omitted,
}

/// The tokenizer a server serves beside its API, which counts a request's tokens as its model
/// will (`llm::openai::tokenize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCounter {
    /// llama.cpp's `POST /tokenize`, or llama-cpp-python's `POST /extras/tokenize/count`:
    /// people run both under the llamacpp flavor, and the first that answers is kept.
    Llamacpp,
}

/// Which tool the model must call, sent as `tool_choice` with a request that offers tools.
/// A choice that forces a call (`required`, or a named tool) holds until the turn's first
/// tool call: later requests of the turn leave the field out, so the model can answer in
/// words and the turn can end (a forced choice on every request would call tools until the
/// turn ran out of requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// `"auto"`: the model decides (some servers ignore `tools` unless this is said).
    Auto,
    /// `"required"`: some tool must be called.
    Required,
    /// `"none"`: no tool may be called.
    None,
    /// This tool must be called: `{"type": "function", "function": {"name": ...}}`.
    Function(String),
}

impl ToolChoice {
    /// Whether the choice makes the model call a tool.
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Function(_))
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    /// `"auto"`, `"required"`, `"none"`, or `{ function = "NAME" }`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Word(String),
            Named { function: String },
        }
        let invalid = || {
            serde::de::Error::custom(
                "tool_choice: expected \"auto\", \"required\", \"none\" or { function = \"NAME\" }",
            )
        };
        match Written::deserialize(deserializer).map_err(|_| invalid())? {
            Written::Word(word) => match word.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "required" => Ok(ToolChoice::Required),
                "none" => Ok(ToolChoice::None),
                _ => Err(invalid()),
            },
            Written::Named { function } if !function.trim().is_empty() => Ok(ToolChoice::Function(function)),
            Written::Named { .. } => Err(invalid()),
        }
    }
}

/// Extra fields of every request body (`temperature`, `top_p`, `parallel_tool_calls`,
/// `chat_template_kwargs`, ...), set last, replacing whatever Heron put under the same key.
/// None of the keys no request works without may be set: Heron writes those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyFields(pub Vec<(String, Value)>);

impl<'de> Deserialize<'de> for BodyFields {
    /// Checked while the config is read, so a refused key is reported with its line.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = BTreeMap::<String, Value>::deserialize(deserializer)?;
        if let Some(key) = table.keys().find(|key| KEPT_BODY_FIELDS.contains(&key.as_str())) {
            return Err(serde::de::Error::custom(format!(
                "body: `{key}` cannot be set: Heron writes it, and no request works without it"
            )));
        }
        Ok(BodyFields(table.into_iter().collect()))
    }
}

/// A field left out of every request body, after everything else is built: the escape
/// hatch for a server that refuses a field no preset knows about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropField {
    /// A key of the body itself, e.g. `parallel_tool_calls`.
    Body(String),
    /// A key of every message, written `messages.KEY`, e.g. `messages.name`.
    Message(String),
}

/// Body keys without which no streamed completion can be asked for or read.
const KEPT_BODY_FIELDS: [&str; 3] = ["model", "messages", "stream"];

/// Message keys without which a conversation with tool calls means nothing.
const KEPT_MESSAGE_FIELDS: [&str; 4] = ["role", "content", "tool_calls", "tool_call_id"];

impl DropField {
    /// Reads `KEY` or `messages.KEY`; a key is letters, digits, `_` and `-`, and none of the
    /// ones every request needs.
    pub fn parse(text: &str) -> Result<DropField, String> {
        let is_key = |key: &str| {
            !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        let (field, key, kept) = match text.split_once('.') {
            None => (DropField::Body(text.to_owned()), text, &KEPT_BODY_FIELDS[..]),
            Some(("messages", key)) => (DropField::Message(key.to_owned()), key, &KEPT_MESSAGE_FIELDS[..]),
            Some(_) => {
                return Err(format!(
                    "drop_fields: `{text}` is neither a body key nor `messages.KEY` (a key of every message)"
                ));
            }
        };
        if !is_key(key) {
            return Err(format!("drop_fields: `{text}` is not a field name (letters, digits, `_`, `-`)"));
        }
        if kept.contains(&key) {
            return Err(format!("drop_fields: `{text}` cannot be dropped: no request works without it"));
        }
        Ok(field)
    }
}

impl fmt::Display for DropField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropField::Body(key) => f.write_str(key),
            DropField::Message(key) => write!(f, "messages.{key}"),
        }
    }
}

impl<'de> Deserialize<'de> for DropField {
    /// Checked while the config is read, so a bad entry is refused with its line.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DropField::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a provider's requests look like beyond the common body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestShape {
    /// Whether `stream_options: {include_usage: true}` is sent.
    pub stream_options: bool,
    /// The token limit's field.
    pub max_tokens_field: MaxTokensField,
    /// How reasoning goes back.
    pub reasoning_field: ReasoningField,
    /// Whether a chosen effort goes as `reasoning_effort` (Mistral has no such field).
    pub reasoning_effort: bool,
    /// Which tool-call ids the server accepts.
    pub call_ids: CallIds,
    /// The header carrying the key as it is; `None` sends `Authorization: Bearer KEY`.
    pub key_header: Option<String>,
    /// Extra headers, sent with every request.
    pub headers: Vec<(String, String)>,
    /// Query parameters added to the endpoint, replacing those of the same name in the
    /// base URL.
    pub query: Vec<(String, String)>,
    /// Fields removed from the body, after everything Heron adds.
    pub drop_fields: Vec<DropField>,
    /// What an assistant message that only calls tools carries as its `content`.
    pub tool_call_content: ToolCallContent,
    /// The `tool_choice` sent with requests that offer tools, if any.
    pub tool_choice: Option<ToolChoice>,
    /// Fields set last, after the dropped ones went.
    pub body: BodyFields,
    /// The server's own tokenizer, asked to count requests that come near the window.
    pub token_counter: Option<TokenCounter>,
}

impl Default for RequestShape {
    /// What an unknown compatible server (vLLM, LM Studio, ...) gets: the common body.
    fn default() -> Self {
        Self {
            stream_options: true,
            max_tokens_field: MaxTokensField::MaxTokens,
            reasoning_field: ReasoningField::None,
            reasoning_effort: true,
            call_ids: CallIds::AsRecorded,
            key_header: None,
            headers: Vec::new(),
            query: Vec::new(),
            drop_fields: Vec::new(),
            tool_call_content: ToolCallContent::Null,
            tool_choice: None,
            body: BodyFields::default(),
            token_counter: None,
        }
    }
}

impl Flavor {
    /// The flavor a base URL's host names unambiguously, if any.
    pub fn detect(base_url: &str) -> Option<Flavor> {
        let url = reqwest::Url::parse(base_url.trim()).ok()?;
        let host = url.host_str()?.to_ascii_lowercase();
        let flavor = match host.as_str() {
            "api.openai.com" => Flavor::Openai,
            "api.mistral.ai" => Flavor::Mistral,
            "api.deepseek.com" => Flavor::Deepseek,
            "openrouter.ai" => Flavor::Openrouter,
            _ if host.ends_with(".openai.azure.com") || host.ends_with(".cognitiveservices.azure.com") => {
                Flavor::Azure
            }
            // Ollama's default port; llama.cpp's (8080) is shared by too much to tell.
            _ if url.port() == Some(11434) => Flavor::Ollama,
            _ => return None,
        };
        Some(flavor)
    }

    /// The preset shape of this flavor.
    pub fn shape(self) -> RequestShape {
        let common = RequestShape::default();
        match self {
            Flavor::Openai => {
                RequestShape { max_tokens_field: MaxTokensField::MaxCompletionTokens, ..common }
            }
            Flavor::Azure => RequestShape {
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
                key_header: Some("api-key".to_owned()),
                ..common
            },
            // Mistral answers 422 `extra_forbidden` to `stream_options` and to
            // `reasoning_effort`, and 400 to a tool-call id other than 9 letters and digits.
            Flavor::Mistral => RequestShape {
                stream_options: false,
                reasoning_effort: false,
                call_ids: CallIds::NineAlphanumeric,
                ..common
            },
            Flavor::Deepseek => RequestShape { reasoning_field: ReasoningField::ReasoningContent, ..common },
            Flavor::Openrouter => {
                RequestShape { reasoning_field: ReasoningField::ReasoningDetails, ..common }
            }
            Flavor::Ollama => common,
            // llama-server takes `null` or `""`; llama-cpp-python's server takes only `""`,
            // and people run both under this name. Both count tokens for a client, and
            // neither reports usage while streaming, so their count is the only one there is.
            Flavor::Llamacpp => RequestShape {
                tool_call_content: ToolCallContent::Empty,
                token_counter: Some(TokenCounter::Llamacpp),
                ..common
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_that_name_their_server_are_detected_and_others_are_not() {
        let cases = [
            ("https://api.openai.com/v1", Some(Flavor::Openai)),
            ("https://res.openai.azure.com/openai/deployments/d?api-version=2024-10-21", Some(Flavor::Azure)),
            ("https://api.mistral.ai/v1", Some(Flavor::Mistral)),
            ("https://api.deepseek.com", Some(Flavor::Deepseek)),
            ("https://openrouter.ai/api/v1", Some(Flavor::Openrouter)),
            ("http://localhost:11434/v1", Some(Flavor::Ollama)),
            ("http://127.0.0.1:8080/v1", None),
            ("https://mistral.ai.example.com/v1", None),
            ("not a url", None),
        ];
        for (url, flavor) in cases {
            assert_eq!(Flavor::detect(url), flavor, "{url}");
        }
    }

    /// Every flavor, in the order docs/configuration.md lists them. The match fails to compile when a
    /// flavor is added, until it is added here and to the table below.
    fn every_flavor() -> [Flavor; 7] {
        let _exhaustive = |flavor: Flavor| match flavor {
            Flavor::Openai
            | Flavor::Azure
            | Flavor::Mistral
            | Flavor::Deepseek
            | Flavor::Openrouter
            | Flavor::Ollama
            | Flavor::Llamacpp => (),
        };
        [
            Flavor::Openai,
            Flavor::Azure,
            Flavor::Mistral,
            Flavor::Deepseek,
            Flavor::Openrouter,
            Flavor::Ollama,
            Flavor::Llamacpp,
        ]
    }

    #[test]
    fn each_flavor_presets_the_request_shape_its_server_accepts() {
        use MaxTokensField::{MaxCompletionTokens, MaxTokens};
        use ReasoningField::{ReasoningContent, ReasoningDetails};
        use ToolCallContent::{Empty, Null};
        // name in config.toml, stream_options, token field, reasoning passed back as,
        // reasoning_effort sent, call ids, key header, a tool-only message's content
        let table = [
            (
                "openai",
                true,
                MaxCompletionTokens,
                ReasoningField::None,
                true,
                CallIds::AsRecorded,
                None,
                Null,
            ),
            (
                "azure",
                true,
                MaxCompletionTokens,
                ReasoningField::None,
                true,
                CallIds::AsRecorded,
                Some("api-key"),
                Null,
            ),
            ("mistral", false, MaxTokens, ReasoningField::None, false, CallIds::NineAlphanumeric, None, Null),
            ("deepseek", true, MaxTokens, ReasoningContent, true, CallIds::AsRecorded, None, Null),
            ("openrouter", true, MaxTokens, ReasoningDetails, true, CallIds::AsRecorded, None, Null),
            ("ollama", true, MaxTokens, ReasoningField::None, true, CallIds::AsRecorded, None, Null),
            ("llamacpp", true, MaxTokens, ReasoningField::None, true, CallIds::AsRecorded, None, Empty),
        ];
        assert_eq!(table.len(), every_flavor().len());
        for (flavor, row) in every_flavor().into_iter().zip(table) {
            let (name, stream_options, max_tokens_field, reasoning_field, effort, call_ids, key, content) =
                row;
            let named: Flavor = serde_json::from_value(serde_json::json!(name)).expect("a flavor name");
            assert_eq!(named, flavor, "{name}");
            let expected = RequestShape {
                stream_options,
                max_tokens_field,
                reasoning_field,
                reasoning_effort: effort,
                call_ids,
                key_header: key.map(str::to_owned),
                tool_call_content: content,
                // Only llama.cpp's servers serve their tokenizer.
                token_counter: (flavor == Flavor::Llamacpp).then_some(TokenCounter::Llamacpp),
                ..RequestShape::default()
            };
            assert_eq!(flavor.shape(), expected, "{name}");
        }
    }

    #[test]
    fn drop_fields_name_a_body_key_or_a_key_of_every_message_and_never_a_needed_one() {
        assert_eq!(
            DropField::parse("parallel_tool_calls"),
            Ok(DropField::Body("parallel_tool_calls".into()))
        );
        assert_eq!(DropField::parse("messages.name"), Ok(DropField::Message("name".into())));
        assert_eq!(DropField::parse("messages.name").map(|f| f.to_string()).as_deref(), Ok("messages.name"));
        for bad in
            ["", "model", "stream", "messages", "messages.role", "messages.tool_call_id", "tools.x", "a b"]
        {
            assert!(DropField::parse(bad).is_err(), "`{bad}` was accepted");
        }
    }
}
