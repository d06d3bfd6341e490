//! The model list of a provider's endpoint (`GET {base_url}/models`: OpenAI-compatible
//! servers, Anthropic and the Responses API all answer `{"data": [{"id": ...}]}`), asked
//! for by `heron doctor` and `heron models --remote`. Invariant: one request, bounded in time
//! and in bytes, with the key sent as the provider's kind sends it, and no key in any error
//! it returns.

use std::time::Duration;

use reqwest::header::ACCEPT;
use serde_json::Value;
use tokio::time::timeout;

use crate::config::ProviderKind;
use crate::llm::ProviderError;
use crate::llm::anthropic::Messages;
use crate::llm::http::{
    Api, HttpConfig, describe, endpoint_url, error_body_message, http_client, request_headers, scrub,
    scrub_text,
};
use crate::secret::clip;

/// The most bytes of a model list read; real lists are a few hundred KiB at most.
const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// The most model ids kept from one list.
const MAX_MODELS: usize = 10_000;

/// The longest model id kept (longer ones are clipped).
const MAX_ID_BYTES: usize = 256;

/// Asks the endpoint of `config`, a provider of `kind`, for its models, with
/// `config.api_key` when it has one. The whole exchange (connecting, the answer, its body)
/// must finish within `limit`; `config`'s own timeouts and retries do not apply, since this
/// is a check, not a turn.
pub async fn list_models(
    kind: ProviderKind,
    config: &HttpConfig,
    limit: Duration,
) -> Result<Vec<String>, ProviderError> {
    let key = config.api_key.as_ref();
    // Built as a URL, so a base URL's query (Azure's `api-version`) stays a query.
    let url = endpoint_url(&config.base_url, &["models"], &config.shape.query).ok_or_else(|| {
        let shown = scrub_text(&config.base_url, key);
        ProviderError::Unreachable(format!("the base URL `{shown}` is not an http(s) URL"))
    })?;
    let (key_header, fixed) = match kind {
        ProviderKind::Anthropic => (Messages.key_header(), Messages.fixed_headers()),
        ProviderKind::Openai | ProviderKind::OpenaiResponses | ProviderKind::Scripted => (None, &[][..]),
    };
    let key_header = config.shape.key_header.as_deref().or(key_header);
    let headers = request_headers(&config.shape, fixed, key_header, key)?;
    let client = http_client(config.connect_timeout.min(limit), key)?;
    let request = client.get(url).header(ACCEPT, "application/json").headers(headers);
    let exchange = async {
        let mut response =
            request.send().await.map_err(|error| ProviderError::Unreachable(describe(error)))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(bytes) =
            response.chunk().await.map_err(|error| ProviderError::Unreachable(describe(error)))?
        {
            if body.len() + bytes.len() > MAX_LIST_BYTES {
                if !status.is_success() {
                    break;
                }
                return Err(ProviderError::Protocol("the model list exceeded 4 MiB".to_owned()));
            }
            body.extend_from_slice(&bytes);
        }
        if !status.is_success() {
            let message = error_body_message(&body)
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("no message").to_owned());
            return Err(ProviderError::Status { status: status.as_u16(), message });
        }
        model_ids(&body)
    };
    let outcome = match timeout(limit, exchange).await {
        Ok(outcome) => outcome,
        // Rounded up, so a sub-second limit does not read as "after 0 s".
        Err(_) => Err(ProviderError::Timeout(limit.as_secs() + u64::from(limit.subsec_nanos() > 0))),
    };
    outcome.map_err(|error| scrub(error, key))
}

/// The ids of an OpenAI-style list, `{"data": [{"id": "..."}, ...]}`, in the server's order.
fn model_ids(body: &[u8]) -> Result<Vec<String>, ProviderError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| ProviderError::Protocol("the model list is not JSON".to_owned()))?;
    let Some(data) = value.get("data").and_then(Value::as_array) else {
        return Err(ProviderError::Protocol("the model list has no `data` array".to_owned()));
    };
    Ok(data
        .iter()
        .filter_map(|model| model.get("id").and_then(Value::as_str))
        .take(MAX_MODELS)
        .map(|id| clip(id, MAX_ID_BYTES))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_data_array_in_order() {
        let body = br#"{"object":"list","data":[{"id":"b"},{"id":"a"},{"name":"no id"}]}"#;
        assert_eq!(model_ids(body).expect("a list"), ["b", "a"]);
    }

    #[test]
    fn a_body_that_is_not_a_model_list_is_a_protocol_error() {
        assert!(matches!(model_ids(b"<html>"), Err(ProviderError::Protocol(_))));
        assert!(matches!(model_ids(br#"{"models":[]}"#), Err(ProviderError::Protocol(_))));
    }

    #[test]
    fn long_ids_are_clipped() {
        let body = format!(r#"{{"data":[{{"id":"{}"}}]}}"#, "m".repeat(1000));
        let ids = model_ids(body.as_bytes()).expect("a list");
        assert!(ids[0].len() <= MAX_ID_BYTES, "{}", ids[0].len());
    }
}
