//! The OpenAI Responses provider: one streamed `{base_url}/responses` request per
//! [`ModelRequest`], stateless (`store: false`, the whole conversation every time, reasoning
//! carried back encrypted). Retries, timeouts, headers and redaction are the shared HTTP
//! layer's (`llm::http`); the body is `wire`'s and the stream's fold is `events`'.
//!
//! Every request asks for the encrypted reasoning (`include`), whatever the effort: a
//! reasoning model reasons at its default effort too, and without the encrypted copy it
//! starts each tool step from nothing. Models that do not reason (`gpt-4o`, `gpt-4.1`) refuse
//! that with 400 "Encrypted content is not supported with this model"; such a request is
//! sent once more without it, and the provider remembers the model so that its later
//! requests go without it from the start.
//!
//! Of a [`RequestShape`](super::openai::flavor::RequestShape) only what the HTTP layer reads
//! applies (extra headers, query parameters, the key's header); its body fields are Chat
//! Completions' and are ignored here.

mod events;
mod wire;

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::events::EventAssembler;
use super::http::{Api, HttpConfig, HttpProvider};
use super::openai::flavor::RequestShape;
use super::{ModelRequest, ModelStream, Provider, ProviderError};

/// Where OpenAI serves the Responses API; requests go to `{DEFAULT_BASE_URL}/responses`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The Responses API.
#[derive(Debug, Default)]
pub(crate) struct Responses {
    /// Models whose server refused encrypted reasoning: they are asked without it.
    plain: Mutex<BTreeSet<String>>,
}

impl Responses {
    fn asks_encrypted(&self, model: &str) -> bool {
        !self.plain.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(model)
    }
}

impl Api for Responses {
    type Fold = EventAssembler;

    fn path(&self) -> &'static [&'static str] {
        &["responses"]
    }

    fn body(&self, request: &ModelRequest, _shape: &RequestShape) -> Value {
        wire::request_body(request, self.asks_encrypted(&request.model))
    }

    fn without_refused(
        &self,
        request: &ModelRequest,
        _shape: &RequestShape,
        error: &ProviderError,
    ) -> Option<Value> {
        if !self.asks_encrypted(&request.model) || !refuses_encrypted_reasoning(error) {
            return None;
        }
        self.plain.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(request.model.clone());
        Some(wire::request_body(request, false))
    }
}

/// Whether the server refused the request for asking for encrypted reasoning, as OpenAI
/// does for models that do not reason. Other 400s that name encrypted content (an item
/// whose content "could not be verified") are about the input, which sending it again
/// would not change.
fn refuses_encrypted_reasoning(error: &ProviderError) -> bool {
    let ProviderError::Status { status: 400, message } = error else { return false };
    let message = message.to_ascii_lowercase();
    message.contains("encrypted content")
        && (message.contains("not supported") || message.contains("unsupported"))
}

/// A [`Provider`] for OpenAI's Responses API (and servers that speak it).
#[derive(Debug, Clone)]
pub struct ResponsesProvider(HttpProvider<Responses>);

impl ResponsesProvider {
    /// Checks the configuration and builds the HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, ProviderError> {
        HttpProvider::new(config, Responses::default()).map(Self)
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &str {
        self.0.endpoint()
    }
}

impl Provider for ResponsesProvider {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.0.stream(request, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn requests_go_to_responses_below_the_base_url() {
        let provider = ResponsesProvider::new(HttpConfig::new(DEFAULT_BASE_URL)).expect("valid");
        assert_eq!(provider.endpoint(), "https://api.openai.com/v1/responses");
        let trimmed = ResponsesProvider::new(HttpConfig::new("http://localhost:1234/v1/")).expect("valid");
        assert_eq!(trimmed.endpoint(), "http://localhost:1234/v1/responses");
        let refused = ResponsesProvider::new(HttpConfig::new("ftp://example.com"));
        assert!(matches!(refused, Err(ProviderError::Unreachable(_))));
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = HttpConfig::new("http://localhost:1").with_api_key(Secret::new("sk-secret-value"));
        let provider = ResponsesProvider::new(config).expect("valid");
        assert!(!format!("{provider:?}").contains("sk-secret-value"));
    }
}
