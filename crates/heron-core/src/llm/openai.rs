//! The OpenAI-compatible provider: one streamed Chat Completions request per
//! [`ModelRequest`] (`{base_url}/chat/completions`), shaped per server by its
//! [`RequestShape`] (`config::flavor`). Retries, timeouts and redaction are the shared HTTP layer's
//! (`llm::http`); the stream's quirks are `chunks`; the server's own token count, where it
//! serves one, is `tokenize`.

mod chunks;
mod tokenize;
mod wire;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use self::chunks::ChunkAssembler;
use super::http::{Api, HttpConfig, HttpProvider};
use super::{ModelRequest, ModelStream, Provider, ProviderError, TokenCount};
use crate::config::flavor::RequestShape;

/// The Chat Completions API.
#[derive(Debug)]
pub(crate) struct ChatCompletions;

impl Api for ChatCompletions {
    type Fold = ChunkAssembler;

    fn path(&self) -> &'static [&'static str] {
        &["chat", "completions"]
    }

    fn body(&self, request: &ModelRequest, shape: &RequestShape) -> Value {
        wire::request_body(request, shape)
    }
}

/// A [`Provider`] for OpenAI-compatible Chat Completions endpoints (OpenAI, OpenRouter,
/// DeepSeek, vLLM, Ollama, llama.cpp, ...).
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    http: HttpProvider<ChatCompletions>,
    /// The server's tokenizer, when its flavor serves one.
    counter: Option<Arc<tokenize::Counter>>,
}

impl OpenAiProvider {
    /// Checks the configuration and builds the HTTP client.
    pub fn new(config: HttpConfig) -> Result<Self, ProviderError> {
        let base_url = config.base_url.clone();
        let token_counter = config.shape.token_counter;
        let http = HttpProvider::new(config, ChatCompletions)?;
        let counter = token_counter.and_then(|kind| {
            let (client, headers) = http.client_and_headers();
            tokenize::Counter::new(kind, &base_url, client, headers)
        });
        Ok(Self { http, counter })
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &str {
        self.http.endpoint()
    }
}

impl Provider for OpenAiProvider {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.http.stream(request, cancel)
    }

    fn count_tokens(&self, text: String) -> TokenCount {
        match &self.counter {
            Some(counter) => counter.count(text),
            None => Box::pin(std::future::ready(None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn a_base_url_that_is_not_http_is_refused() {
        let refused = OpenAiProvider::new(HttpConfig::new("ftp://example.com"));
        assert!(matches!(refused, Err(ProviderError::Unreachable(_))));
        let trimmed = OpenAiProvider::new(HttpConfig::new("http://localhost:1234/v1/")).expect("valid");
        assert_eq!(trimmed.endpoint(), "http://localhost:1234/v1/chat/completions");
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = HttpConfig::new("http://localhost:1").with_api_key(Secret::new("sk-secret-value"));
        let provider = OpenAiProvider::new(config).expect("valid");
        assert!(!format!("{provider:?}").contains("sk-secret-value"));
    }
}
