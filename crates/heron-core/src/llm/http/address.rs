//! Where a model request goes and what it carries besides its body: the endpoint URL
//! (`{base_url}/{path}`, a base URL's query kept as a query, configured parameters merged)
//! and the headers (the API's fixed ones, the configured ones, then the key, marked
//! sensitive so it is never printed).

use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::config::flavor::RequestShape;
use crate::llm::ProviderError;
use crate::secret::Secret;

/// `{base_url}/{path}`, with the base URL's query kept and `query` merged into it (a
/// configured parameter replaces one of the same name). A base URL that already ends in
/// the path is taken as the endpoint itself.
pub(crate) fn endpoint_url(base_url: &str, path: &[&str], query: &[(String, String)]) -> Option<Url> {
    let mut url = Url::parse(base_url.trim()).ok().filter(|url| matches!(url.scheme(), "http" | "https"))?;
    let suffix = format!("/{}", path.join("/"));
    if !url.path().trim_end_matches('/').ends_with(&suffix) {
        url.path_segments_mut().ok()?.pop_if_empty().extend(path);
    }
    if !query.is_empty() {
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(name, _)| !query.iter().any(|(set, _)| set == name))
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        url.query_pairs_mut().clear().extend_pairs(kept).extend_pairs(query);
    }
    Some(url)
}

/// The fixed headers, the configured ones (which replace fixed ones of the same name),
/// then the key: as `Authorization: Bearer` when `key_header` is `None`, else as it is
/// under that header. The key's value is marked sensitive, so it is never printed. A name
/// or value that is not a valid header is refused by name only.
pub(crate) fn request_headers(
    shape: &RequestShape,
    fixed: &[(&str, &str)],
    key_header: Option<&str>,
    key: Option<&Secret>,
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    let configured = shape.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    for (name, value) in fixed.iter().copied().chain(configured) {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ProviderError::Unreachable(format!("`{name}` is not a valid header name")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| ProviderError::Unreachable(format!("the value of header `{name}` is not valid")))?;
        headers.insert(header, value);
    }
    let Some(key) = key.filter(|key| !key.is_empty()) else { return Ok(headers) };
    let (name, value) = match key_header.filter(|h| !h.eq_ignore_ascii_case("authorization")) {
        None => (AUTHORIZATION, format!("Bearer {}", key.expose())),
        Some(name) => {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ProviderError::Unreachable(format!("key_header `{name}` is not a valid header name"))
            })?;
            (header, key.expose().to_owned())
        }
    };
    let mut value = HeaderValue::from_str(&value)
        .map_err(|_| ProviderError::Unreachable("the api key is not a valid header value".to_owned()))?;
    value.set_sensitive(true);
    headers.insert(name, value);
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &[&str] = &["chat", "completions"];

    #[test]
    fn a_query_in_the_base_url_stays_a_query_and_configured_parameters_merge() {
        let azure = "https://r.openai.azure.com/openai/deployments/gpt/?api-version=2024-10-21";
        assert_eq!(
            endpoint_url(azure, CHAT, &[]).expect("valid").as_str(),
            "https://r.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
        );
        let query = [("api-version".to_owned(), "2025-01-01".to_owned()), ("x".to_owned(), "a b".to_owned())];
        let merged = endpoint_url("https://h/v1?keep=1&api-version=old", CHAT, &query).expect("valid");
        assert_eq!(merged.as_str(), "https://h/v1/chat/completions?keep=1&api-version=2025-01-01&x=a+b");
        let full = endpoint_url("http://h:1/v1/chat/completions", CHAT, &[]).expect("valid");
        assert_eq!(full.as_str(), "http://h:1/v1/chat/completions");
        let messages = endpoint_url("https://api.anthropic.com/v1/", &["messages"], &[]).expect("valid");
        assert_eq!(messages.as_str(), "https://api.anthropic.com/v1/messages");
        assert!(endpoint_url("ftp://h/v1", CHAT, &[]).is_none());
    }

    #[test]
    fn the_key_goes_in_the_configured_header_marked_sensitive() {
        let key = Secret::new("sk-abc");
        let shape = RequestShape::default();
        let bearer = request_headers(&shape, &[], None, Some(&key)).expect("valid");
        assert_eq!(bearer.get(AUTHORIZATION).map(|v| v.is_sensitive()), Some(true));
        let shape =
            RequestShape { headers: vec![("X-Title".into(), "heron".into())], ..RequestShape::default() };
        let azure = request_headers(&shape, &[], Some("api-key"), Some(&key)).expect("valid");
        assert_eq!(azure.get("api-key").and_then(|v| v.to_str().ok()), Some("sk-abc"));
        assert!(azure.get(AUTHORIZATION).is_none() && azure.get("x-title").is_some());
        let bad = RequestShape { headers: vec![("bad name".into(), "v".into())], ..RequestShape::default() };
        assert!(request_headers(&bad, &[], None, None).is_err());
    }

    #[test]
    fn configured_headers_replace_fixed_ones() {
        let fixed = [("anthropic-version", "2023-06-01")];
        let plain = request_headers(&RequestShape::default(), &fixed, None, None).expect("valid");
        assert_eq!(plain.get("anthropic-version").and_then(|v| v.to_str().ok()), Some("2023-06-01"));
        let shape = RequestShape {
            headers: vec![("anthropic-version".into(), "2099".into())],
            ..RequestShape::default()
        };
        let set = request_headers(&shape, &fixed, None, None).expect("valid");
        assert_eq!(set.get("anthropic-version").and_then(|v| v.to_str().ok()), Some("2099"));
    }
}
