//! The provider checks of `heron doctor`: for an OpenAI-compatible provider, whether its key
//! is in `.env`, whether its endpoint answers its model list in time and takes the key, and
//! whether it lists the configured models (an alias listed as a dated snapshot counts; an
//! Azure deployment, which has no list of its own, is only asked whether it answers); for a
//! scripted one, whether its script loads.
//! Providers are asked all at once, so the slowest one bounds the wait, not their sum.
//! A problem is fatal only for the provider that serves `default_model`.

use std::time::Duration;

use heron_core::config::{Config, Home, Keys, ProviderConfig, ProviderKind};
use heron_core::llm::ProviderError;
use heron_core::llm::models::{azure_deployment, list_models, serves};
use heron_core::llm::registry::http_config;
use heron_core::llm::scripted::ScriptedProvider;

use super::{Level, Report};

/// What one provider's check found: problems carry no level yet, since that depends on
/// whether the provider serves the default model.
enum Found {
    Fine(String),
    /// Worth a warning whichever provider it is.
    Notice(String),
    Problem(String),
}

/// Checks every provider of `config` and adds what it found to `report`, in name order.
pub async fn check(config: &Config, home: &Home, keys: &Keys, limit: Duration, report: &mut Report) {
    let default_provider =
        config.default_model.as_deref().and_then(|model| model.split_once('/')).map(|(provider, _)| provider);
    let mut checks = tokio::task::JoinSet::new();
    for (index, (name, provider)) in config.providers.iter().enumerate() {
        let (name, provider, home, keys) = (name.clone(), provider.clone(), home.clone(), keys.clone());
        checks.spawn(async move { (index, check_one(&name, &provider, &home, &keys, limit).await) });
    }
    let mut results = Vec::new();
    while let Some(joined) = checks.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(err) => report.push(Level::Fail, format!("provider check failed to run: {err}")),
        }
    }
    results.sort_by_key(|(index, _)| *index);
    for ((name, _), (_, found)) in config.providers.iter().zip(results) {
        let serves_default = default_provider == Some(name.as_str());
        for finding in found {
            match finding {
                Found::Fine(text) => report.push(Level::Ok, text),
                Found::Notice(text) => report.push(Level::Warn, text),
                Found::Problem(text) if serves_default => {
                    report.push(Level::Fail, format!("{text} (it serves default_model)"))
                }
                Found::Problem(text) => report.push(Level::Warn, text),
            }
        }
    }
}

async fn check_one(
    name: &str,
    provider: &ProviderConfig,
    home: &Home,
    keys: &Keys,
    limit: Duration,
) -> Vec<Found> {
    match provider.kind {
        ProviderKind::Scripted => {
            // Loading a script reads a file: not on the async thread.
            let (owned, provider, home) = (name.to_owned(), provider.clone(), home.clone());
            match tokio::task::spawn_blocking(move || check_script(&owned, &provider, &home)).await {
                Ok(found) => vec![found],
                Err(err) => vec![Found::Problem(format!("provider {name}: the check failed to run: {err}"))],
            }
        }
        ProviderKind::Openai | ProviderKind::Anthropic | ProviderKind::OpenaiResponses => {
            check_endpoint(name, provider, keys, limit).await
        }
    }
}

fn check_script(name: &str, provider: &ProviderConfig, home: &Home) -> Found {
    let Some(script) = &provider.script else {
        return Found::Fine(format!("provider {name}: scripted, the built-in demo (offline, no key)"));
    };
    let path = home.root().join(script);
    match ScriptedProvider::from_path(&path) {
        Ok(_) => Found::Fine(format!("provider {name}: scripted, plays {}", path.display())),
        Err(err) => {
            Found::Problem(format!("provider {name}: the script {} does not load: {err}", path.display()))
        }
    }
}

async fn check_endpoint(name: &str, provider: &ProviderConfig, keys: &Keys, limit: Duration) -> Vec<Found> {
    let mut config = http_config(provider, keys);
    let shown = shown_url(&config.base_url);
    config.connect_timeout = limit;
    let key_note = match provider.api_key_env.as_deref() {
        None => "no key".to_owned(),
        Some(key_name) if config.api_key.is_some() => format!("key {key_name} set"),
        Some(key_name) => {
            return vec![Found::Problem(format!(
                "provider {name}: needs the key {key_name} in .env (`heron setup` adds it)"
            ))];
        }
    };
    let listed = match list_models(provider.kind, &config, limit).await {
        Ok(listed) => listed,
        // The server's words are left out: some quote part of the key they refused.
        Err(ProviderError::Status { status: status @ (401 | 403), .. }) => {
            return vec![Found::Problem(format!("provider {name}: {shown} refused the key (HTTP {status})"))];
        }
        // Some OpenAI-compatible servers have no model list; they answered, which is what
        // reachability means.
        Err(ProviderError::Status { status: 404, .. }) => {
            return vec![Found::Notice(format!(
                "provider {name}: {shown} answers ({key_note}) but has no model list, so its models are unchecked"
            ))];
        }
        Err(ProviderError::Timeout(secs)) => {
            return vec![Found::Problem(format!("provider {name}: {shown} did not answer within {secs} s"))];
        }
        Err(ProviderError::Unreachable(reason)) => {
            return vec![Found::Problem(format!("provider {name}: cannot reach {shown}: {reason}"))];
        }
        Err(err) => return vec![Found::Problem(format!("provider {name}: {shown}: {err}"))],
    };
    if let Some(deployment) = azure_deployment(&config.base_url) {
        return vec![Found::Fine(format!(
            "provider {name}: {shown} answers ({key_note}); deployment `{deployment}` has no model list, \
             so its models are unchecked"
        ))];
    }
    let mut found = vec![Found::Fine(format!(
        "provider {name}: {shown} answers ({key_note}) and lists {} model{}",
        listed.len(),
        if listed.len() == 1 { "" } else { "s" }
    ))];
    for model in provider.models.iter().filter(|model| !listed.iter().any(|id| serves(id, model))) {
        found.push(Found::Notice(format!("provider {name}: {shown} does not list the model `{model}`")));
    }
    found
}

/// `url` without its user info and query, either of which may carry a credential that is
/// not in `.env` (and so not redacted).
fn shown_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_urls_lose_user_info_and_query() {
        assert_eq!(shown_url("https://u:p@api.example.com/v1?key=abc"), "https://api.example.com/v1");
        assert_eq!(shown_url("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        assert_eq!(shown_url("not a url"), "not a url");
    }
}
