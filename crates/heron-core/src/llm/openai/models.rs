//! The model list of an OpenAI-compatible endpoint (`GET {base_url}/models`), asked for by
//! `heron doctor` to tell whether a provider is reachable, takes its key and serves the
//! configured models. Invariant: one request, bounded in time and in bytes, and no key in
//! any error it returns.

use std::time::Duration;

use reqwest::Url;
use reqwest::header::ACCEPT;
use serde_json::Value;
use tokio::time::timeout;

use crate::llm::ProviderError;
use crate::llm::http::{HttpConfig, describe, error_body_message, scrub, scrub_text};
use crate::secret::clip;

/// The most bytes of a model list read; real lists are a few hundred KiB at most.
const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// The most model ids kept from one list.
const MAX_MODELS: usize = 10_000;

/// The longest model id kept (longer ones are clipped).
const MAX_ID_BYTES: usize = 256;

/// Asks the endpoint of `config` for its models, with `config.api_key` when it has one.
/// The whole exchange (connecting, the answer, its body) must finish within `limit`;
/// `config`'s own timeouts and retries do not apply, since this is a check, not a turn.
pub async fn list_models(config: &HttpConfig, limit: Duration) -> Result<Vec<String>, ProviderError> {
    let key = config.api_key.as_ref();
    let url = format!("{}/models", config.base_url.trim_end_matches('/'));
    let url =
        Url::parse(&url).ok().filter(|url| matches!(url.scheme(), "http" | "https")).ok_or_else(|| {
            let shown = scrub_text(&config.base_url, key);
            ProviderError::Unreachable(format!("the base URL `{shown}` is not an http(s) URL"))
        })?;
    let client = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout.min(limit))
        .user_agent(concat!("heron/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| ProviderError::Unreachable(scrub_text(&describe(error), key)))?;
    let mut request = client.get(url).header(ACCEPT, "application/json");
    if let Some(key) = key.filter(|key| !key.is_empty()) {
        // `bearer_auth` marks the header sensitive, so it is never printed either.
        request = request.bearer_auth(key.expose());
    }
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
