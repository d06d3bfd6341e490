//! The model list of a provider's endpoint (`GET {base_url}/models`: OpenAI-compatible
//! servers, Anthropic and the Responses API all answer `{"data": [{"id": ...}]}`), asked
//! for by `heron doctor` and `heron models --remote`, and how a configured model is found in
//! it. Invariant: a bounded number of requests, bounded in time and in bytes, with the key
//! sent as the provider's kind sends it, and no key in any error it returns.
//!
//! Two servers list differently. Anthropic pages its list (`has_more`, `last_id`, asked for
//! with `after_id`) and lists dated snapshots (`claude-sonnet-4-5-20250929`) where a config
//! names the alias (`claude-sonnet-4-5`). An Azure deployment endpoint has no model list of
//! its own: the resource's (`/openai/models`) is asked instead, and it names the models the
//! resource may deploy, not the deployment.

use std::time::Duration;

use reqwest::Url;
use reqwest::header::{ACCEPT, HeaderMap};
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

/// The most bytes of a model list read, all pages together; real lists are a few hundred
/// KiB at most.
const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// The most model ids kept from one list.
const MAX_MODELS: usize = 10_000;

/// The longest model id kept (longer ones are clipped).
const MAX_ID_BYTES: usize = 256;

/// The most pages of a paged list followed; with [`ANTHROPIC_PAGE`] models a page, far more
/// than any account has.
const MAX_PAGES: usize = 10;

/// Models asked for per page of Anthropic's list: its maximum, so one page is the norm.
const ANTHROPIC_PAGE: &str = "1000";

/// The part of an Azure deployment endpoint's path that names the deployment.
const AZURE_DEPLOYMENTS: &str = "/openai/deployments/";

/// Asks the endpoint of `config`, a provider of `kind`, for its models, with
/// `config.api_key` when it has one. The whole exchange (connecting, every page, their
/// bodies) must finish within `limit`; `config`'s own timeouts and retries do not apply,
/// since this is a check, not a turn.
pub async fn list_models(
    kind: ProviderKind,
    config: &HttpConfig,
    limit: Duration,
) -> Result<Vec<String>, ProviderError> {
    let key = config.api_key.as_ref();
    let url = models_url(kind, &config.base_url, &config.shape.query).ok_or_else(|| {
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
    let exchange = async {
        let mut ids = Vec::new();
        let mut read = 0;
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut page_url = url.clone();
            if let Some(cursor) = &after {
                page_url.query_pairs_mut().append_pair("after_id", cursor);
            }
            let body = get(&client, page_url, &headers, MAX_LIST_BYTES - read).await?;
            read += body.len();
            let page = page(&body)?;
            ids.extend(page.ids);
            // Only Anthropic's cursor is known; a cursor that does not move would loop.
            match page.next {
                Some(next) if kind == ProviderKind::Anthropic && after.as_ref() != Some(&next) => {
                    after = Some(next)
                }
                _ => break,
            }
        }
        ids.truncate(MAX_MODELS);
        Ok(ids)
    };
    let outcome = match timeout(limit, exchange).await {
        Ok(outcome) => outcome,
        // Rounded up, so a sub-second limit does not read as "after 0 s".
        Err(_) => Err(ProviderError::Timeout(limit.as_secs() + u64::from(limit.subsec_nanos() > 0))),
    };
    outcome.map_err(|error| scrub(error, key))
}

/// One GET of a list page: its body, or the server's error. At most `room` bytes are read
/// of a page that answers.
async fn get(
    client: &reqwest::Client,
    url: Url,
    headers: &HeaderMap,
    room: usize,
) -> Result<Vec<u8>, ProviderError> {
    let request = client.get(url).header(ACCEPT, "application/json").headers(headers.clone());
    let mut response = request.send().await.map_err(|error| ProviderError::Unreachable(describe(error)))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(bytes) =
        response.chunk().await.map_err(|error| ProviderError::Unreachable(describe(error)))?
    {
        if body.len() + bytes.len() > room {
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
    Ok(body)
}

/// Where the list of a provider of `kind` at `base_url` is asked for, built as a URL so a
/// base URL's query (Azure's `api-version`) stays a query: `{base_url}/models`, the
/// resource's `/openai/models` for an Azure deployment endpoint, and for Anthropic the
/// largest page it gives.
fn models_url(kind: ProviderKind, base_url: &str, query: &[(String, String)]) -> Option<Url> {
    let mut url = endpoint_url(base_url, &["models"], query)?;
    if let Some(at) = url.path().find(AZURE_DEPLOYMENTS) {
        let resource = format!("{}/openai/models", &url.path()[..at]);
        url.set_path(&resource);
    }
    if kind == ProviderKind::Anthropic && !url.query_pairs().any(|(name, _)| name == "limit") {
        url.query_pairs_mut().append_pair("limit", ANTHROPIC_PAGE);
    }
    Some(url)
}

/// The deployment an Azure deployment endpoint (`.../openai/deployments/NAME...`) names:
/// such an endpoint serves that one model whatever the request names, and has no model
/// list of its own.
pub fn azure_deployment(base_url: &str) -> Option<String> {
    let url = Url::parse(base_url.trim()).ok()?;
    let path = url.path();
    let rest = &path[path.find(AZURE_DEPLOYMENTS)? + AZURE_DEPLOYMENTS.len()..];
    let name = rest.split('/').next().filter(|name| !name.is_empty())?;
    Some(clip(name, MAX_ID_BYTES))
}

/// Whether the listed id `served` is the configured `model`: the same id, or a dated
/// snapshot of it (Anthropic lists `claude-sonnet-4-5-20250929` for the alias
/// `claude-sonnet-4-5`, and `...-latest` aliases name the newest snapshot).
pub fn serves(served: &str, model: &str) -> bool {
    if served == model {
        return true;
    }
    let base = model.strip_suffix("-latest").unwrap_or(model);
    served
        .strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|date| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()))
}

/// One page of a list: its ids in the server's order, and the cursor of the next page when
/// the server says there is one.
struct Page {
    ids: Vec<String>,
    next: Option<String>,
}

/// The ids of an OpenAI-style list, `{"data": [{"id": "..."}, ...]}`, in the server's
/// order, and (Anthropic) `has_more` with `last_id`, or the last id listed.
fn page(body: &[u8]) -> Result<Page, ProviderError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| ProviderError::Protocol("the model list is not JSON".to_owned()))?;
    let Some(data) = value.get("data").and_then(Value::as_array) else {
        return Err(ProviderError::Protocol("the model list has no `data` array".to_owned()));
    };
    let listed: Vec<&str> = data.iter().filter_map(|model| model.get("id").and_then(Value::as_str)).collect();
    let next = (value.get("has_more") == Some(&Value::Bool(true)))
        .then(|| value.get("last_id").and_then(Value::as_str).or(listed.last().copied()))
        .flatten()
        .map(str::to_owned);
    let ids = listed.into_iter().take(MAX_MODELS).map(|id| clip(id, MAX_ID_BYTES)).collect();
    Ok(Page { ids, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_ids(body: &[u8]) -> Result<Vec<String>, ProviderError> {
        page(body).map(|page| page.ids)
    }

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

    #[test]
    fn a_page_with_more_after_it_names_its_last_id_as_the_cursor() {
        let more = br#"{"data":[{"id":"a"},{"id":"b"}],"has_more":true,"first_id":"a","last_id":"b"}"#;
        assert_eq!(page(more).expect("a page").next.as_deref(), Some("b"));
        let unnamed = br#"{"data":[{"id":"a"},{"id":"c"}],"has_more":true}"#;
        assert_eq!(page(unnamed).expect("a page").next.as_deref(), Some("c"));
        let last = br#"{"data":[{"id":"a"}],"has_more":false,"last_id":"a"}"#;
        assert_eq!(page(last).expect("a page").next, None);
    }

    #[test]
    fn an_alias_is_served_by_its_dated_snapshots_and_nothing_else() {
        assert!(serves("claude-sonnet-4-5", "claude-sonnet-4-5"));
        assert!(serves("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"));
        assert!(serves("claude-3-5-haiku-20241022", "claude-3-5-haiku-latest"));
        assert!(!serves("claude-sonnet-4-5-20250929", "claude-sonnet-4"), "another model's snapshot");
        assert!(!serves("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"), "a snapshot is not its alias");
        assert!(!serves("gpt-4o-2024-08-06", "gpt-4o-2024"), "OpenAI dates are not snapshots of a prefix");
        assert!(!serves("gpt-4o-mini", "gpt-4o"));
    }

    #[test]
    fn an_azure_deployment_endpoint_asks_the_resources_list_and_anthropic_its_largest_page() {
        let azure = "https://r.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21";
        let url = models_url(ProviderKind::Openai, azure, &[]).expect("a URL");
        assert_eq!(url.as_str(), "https://r.openai.azure.com/openai/models?api-version=2024-10-21");
        assert_eq!(azure_deployment(azure).as_deref(), Some("gpt-4o"));
        let v1 = "https://r.openai.azure.com/openai/v1";
        assert_eq!(
            models_url(ProviderKind::Openai, v1, &[]).expect("a URL").as_str(),
            format!("{v1}/models")
        );
        assert_eq!(azure_deployment(v1), None);
        let anthropic =
            models_url(ProviderKind::Anthropic, "https://api.anthropic.com/v1", &[]).expect("a URL");
        assert_eq!(anthropic.as_str(), "https://api.anthropic.com/v1/models?limit=1000");
    }
}
