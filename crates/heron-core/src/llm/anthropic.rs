//! The native Anthropic provider: one streamed Messages API request per [`ModelRequest`]
//! (`{base_url}/messages`, key in `x-api-key`, `anthropic-version` pinned). Retries,
//! timeouts and redaction are the shared HTTP layer's (`llm::http`); the request body,
//! with its prompt-cache breakpoints, is `wire`, and the stream's fold is `events`.

mod events;
mod wire;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::events::MessageAssembler;
pub use self::wire::DEFAULT_MAX_TOKENS;
use super::http::{Api, HttpConfig, HttpProvider};
use super::{ModelRequest, ModelStream, Provider, ProviderError};
use crate::config::flavor::RequestShape;

/// The API version every request names unless the config sets `anthropic-version` itself.
/// It fixes the request and stream shapes this module reads, so it moves only with them.
const API_VERSION: &str = "2023-06-01";

/// The Messages API.
#[derive(Debug)]
pub(crate) struct Messages;

impl Api for Messages {
    type Fold = MessageAssembler;

    fn path(&self) -> &'static [&'static str] {
        &["messages"]
    }

    /// The OpenAI-specific parts of the shape (stream options, token field, reasoning
    /// field) mean nothing here; its headers, query and key header apply in the HTTP layer.
    fn body(&self, request: &ModelRequest, _shape: &RequestShape) -> Value {
        wire::request_body(request)
    }

    fn key_header(&self) -> Option<&'static str> {
        Some("x-api-key")
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", API_VERSION)]
    }
}

/// A [`Provider`] for Anthropic's Messages API (and servers that speak it).
#[derive(Debug, Clone)]
pub struct AnthropicProvider(HttpProvider<Messages>);

impl AnthropicProvider {
    /// Checks the configuration and builds the HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, ProviderError> {
        HttpProvider::new(config, Messages).map(Self)
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &str {
        self.0.endpoint()
    }
}

impl Provider for AnthropicProvider {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.0.stream(request, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    /// The endpoint the config gives this kind when it names none.
    fn default_base_url() -> &'static str {
        crate::config::ProviderKind::Anthropic.default_base_url().expect("a default endpoint")
    }

    #[test]
    fn requests_go_to_messages_below_the_base_url() {
        let provider = AnthropicProvider::new(HttpConfig::new(default_base_url())).expect("valid");
        assert_eq!(provider.endpoint(), "https://api.anthropic.com/v1/messages");
        let refused = AnthropicProvider::new(HttpConfig::new("ftp://example.com"));
        assert!(matches!(refused, Err(ProviderError::Unreachable(_))));
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = HttpConfig::new("http://localhost:1").with_api_key(Secret::new("sk-ant-secret"));
        let provider = AnthropicProvider::new(config).expect("valid");
        assert!(!format!("{provider:?}").contains("sk-ant-secret"));
    }
}
