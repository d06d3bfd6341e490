//! Builds the provider behind a `provider/model` id from `config.toml` and the keys in
//! `.env`, once per provider, and says plainly why a model cannot be used.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::anthropic::AnthropicProvider;
use super::http::HttpConfig;
use super::openai::OpenAiProvider;
use super::responses::ResponsesProvider;
use super::scripted::ScriptedProvider;
use super::tap::{ModelTap, Tapped};
use super::{Provider, ProviderError};
use crate::config::{Config, Home, Keys, Playback, Price, ProviderConfig, ProviderKind};

/// Why a model cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// No model was chosen and `config.toml` names no default.
    #[error("no model is configured: run `heron setup` in a terminal, or start Heron with --model")]
    NoModel,
    /// The id names no configured model.
    #[error("`{0}` is not a configured model")]
    UnknownModel(String),
    /// The provider needs a key that `.env` does not have.
    #[error(
        "provider `{provider}` needs the key `{key}` in HERON_HOME/.env: run `heron setup` in a terminal"
    )]
    MissingKey {
        /// The provider.
        provider: String,
        /// The key's name.
        key: String,
    },
    /// The provider could not be built (a bad script file, a bad URL).
    #[error("provider `{provider}` cannot start: {reason}")]
    Broken {
        /// The provider.
        provider: String,
        /// Why.
        reason: String,
    },
}

/// A model ready to take requests.
#[derive(Clone)]
pub struct ResolvedProvider {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The model name the provider knows.
    pub model: String,
    /// The context window, for usage reports and for compacting requests to fit it.
    pub context_window: Option<u64>,
    /// The share of the context window a request may fill before it is compacted.
    pub compact_at: f64,
    /// The model's price, when the config names one.
    pub price: Option<Price>,
}

impl std::fmt::Debug for ResolvedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedProvider").field("model", &self.model).finish_non_exhaustive()
    }
}

/// How to reach the HTTP provider `config`, with its key from `keys`: its endpoint (or
/// the kind's default), timeouts, retries and request shape.
pub fn http_config(config: &ProviderConfig, keys: &Keys) -> HttpConfig {
    HttpConfig {
        base_url: config.endpoint().unwrap_or_default().to_owned(),
        api_key: config.api_key_env.as_ref().and_then(|k| keys.get(k)).cloned(),
        request_timeout: Duration::from_secs(config.timeout_s.unwrap_or(120)),
        connect_timeout: Duration::from_secs(10),
        response_timeout: config
            .response_timeout_s
            .map_or(crate::llm::http::DEFAULT_RESPONSE_TIMEOUT, Duration::from_secs),
        max_retries: config.max_retries.unwrap_or(3),
        retry_base_delay: Duration::from_millis(500),
        shape: config.request_shape(),
    }
}

/// Providers built so far, by name.
pub struct Providers {
    home: Home,
    config: Arc<Config>,
    keys: Arc<Keys>,
    built: Mutex<HashMap<String, Arc<dyn Provider>>>,
    /// Scripts played in request order, by file: every provider playing one shares its place.
    sequential: Mutex<HashMap<PathBuf, ScriptedProvider>>,
    /// Sees every model request, when a session is being recorded.
    tap: Option<Arc<dyn ModelTap>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Providers {
    /// Providers from a loaded config and keys.
    pub fn new(home: Home, config: Arc<Config>, keys: Arc<Keys>) -> Self {
        Self {
            home,
            config,
            keys,
            built: Mutex::new(HashMap::new()),
            sequential: Mutex::new(HashMap::new()),
            tap: None,
        }
    }

    /// The same providers, with every model request shown to `tap`.
    pub fn with_tap(self, tap: Arc<dyn ModelTap>) -> Self {
        Self { tap: Some(tap), ..self }
    }

    /// Heron's home.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The config the providers come from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The keys, for redacting errors.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Checks that `model_id` can be used, without building anything.
    pub fn check(&self, model_id: &str) -> Result<(), ModelError> {
        let resolved =
            self.config.resolve(model_id).ok_or_else(|| ModelError::UnknownModel(model_id.to_owned()))?;
        if resolved.config.kind.is_http()
            && let Some(key) = &resolved.config.api_key_env
            && self.keys.get(key).is_none()
        {
            return Err(ModelError::MissingKey { provider: resolved.provider.to_owned(), key: key.clone() });
        }
        Ok(())
    }

    /// The provider for `model_id`, built on first use.
    pub fn resolve(&self, model_id: &str) -> Result<ResolvedProvider, ModelError> {
        self.check(model_id)?;
        let resolved =
            self.config.resolve(model_id).ok_or_else(|| ModelError::UnknownModel(model_id.to_owned()))?;
        let price = resolved.config.prices.get(resolved.model).cloned();
        let mut built = self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let provider = match built.get(resolved.provider) {
            Some(provider) => provider.clone(),
            None => {
                let provider = self.build(resolved.provider).map_err(|reason| ModelError::Broken {
                    provider: resolved.provider.to_owned(),
                    reason: crate::secret::redact(&reason.to_string(), self.keys.all()),
                })?;
                let provider = match &self.tap {
                    Some(tap) => Arc::new(Tapped::new(provider, tap.clone())),
                    None => provider,
                };
                built.insert(resolved.provider.to_owned(), provider.clone());
                provider
            }
        };
        Ok(ResolvedProvider {
            provider,
            model: resolved.model.to_owned(),
            context_window: resolved.config.context_window,
            compact_at: self.config.compact_at(resolved.config),
            price,
        })
    }

    /// The providers of `config` and `keys`, every one built now, so a provider that cannot
    /// start fails here rather than at its first request (a reload is all or nothing). A
    /// provider whose table and key are as they were in `self` is kept as it is: its
    /// connections, and its place in a script played in request order.
    pub fn rebuilt(&self, config: Arc<Config>, keys: Arc<Keys>) -> Result<Providers, ModelError> {
        let next = Providers {
            home: self.home.clone(),
            config,
            keys,
            built: Mutex::new(HashMap::new()),
            sequential: Mutex::new(HashMap::new()),
            tap: self.tap.clone(),
        };
        let old_built = self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let key_of = |providers: &Providers, config: &ProviderConfig| {
            config.api_key_env.as_ref().and_then(|k| providers.keys.get(k)).map(|s| s.expose().to_owned())
        };
        // Script places are shared by file; the files of kept providers keep theirs.
        let old_sequential =
            self.sequential.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        for (name, config) in &next.config.providers {
            let unchanged = self
                .config
                .providers
                .get(name)
                .is_some_and(|old| old == config && key_of(self, old) == key_of(&next, config));
            let provider = match old_built.get(name).filter(|_| unchanged) {
                Some(kept) => {
                    if let Some(path) = config.script.as_ref().map(|p| next.home.root().join(p))
                        && let Some(place) = old_sequential.get(&path)
                    {
                        next.sequential
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(path, place.clone());
                    }
                    kept.clone()
                }
                None => {
                    let provider = next.build(name).map_err(|reason| ModelError::Broken {
                        provider: name.clone(),
                        reason: crate::secret::redact(&reason.to_string(), next.keys.all()),
                    })?;
                    match &next.tap {
                        Some(tap) => Arc::new(Tapped::new(provider, tap.clone())),
                        None => provider,
                    }
                }
            };
            next.built
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.clone(), provider);
        }
        Ok(next)
    }

    fn build(&self, name: &str) -> Result<Arc<dyn Provider>, ProviderError> {
        let Some(config) = self.config.providers.get(name) else {
            return Err(ProviderError::Protocol(format!("no provider `{name}`")));
        };
        match config.kind {
            ProviderKind::Scripted => {
                let Some(path) = config.script.as_ref().map(|p| self.home.root().join(p)) else {
                    return Ok(Arc::new(ScriptedProvider::demo()));
                };
                if config.playback == Playback::Conversation {
                    return Ok(Arc::new(ScriptedProvider::from_path(&path)?));
                }
                let mut shared = self.sequential.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let provider = match shared.get(&path) {
                    Some(provider) => provider.clone(),
                    None => {
                        let provider = ScriptedProvider::from_path(&path)?.sequential();
                        shared.insert(path, provider.clone());
                        provider
                    }
                };
                Ok(Arc::new(provider))
            }
            ProviderKind::Openai => Ok(Arc::new(OpenAiProvider::new(http_config(config, &self.keys))?)),
            ProviderKind::Anthropic => Ok(Arc::new(AnthropicProvider::new(http_config(config, &self.keys))?)),
            ProviderKind::OpenaiResponses => {
                Ok(Arc::new(ResponsesProvider::new(http_config(config, &self.keys))?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::llm::{ModelEvent, ModelRequest};

    async fn text(providers: &Providers, model: &str) -> String {
        let resolved = providers.resolve(model).expect("resolves");
        let request = ModelRequest {
            model: resolved.model,
            messages: Vec::new(),
            tools: Vec::new(),
            effort: None,
            max_tokens: None,
        };
        let mut stream = resolved.provider.stream(request, CancellationToken::new());
        let mut text = String::new();
        while let Some(Ok(event)) = stream.next().await {
            if let ModelEvent::TextDelta { text: piece } = event {
                text.push_str(&piece);
            }
        }
        text
    }

    #[tokio::test]
    async fn providers_playing_one_script_in_request_order_share_their_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("s.jsonl"),
            "{\"steps\": [{\"text\": \"one\"}]}\n{\"steps\": [{\"text\": \"two\"}]}\n",
        )
        .expect("script");
        let table = |name: &str| {
            format!(
                "[providers.{name}]\nkind = \"scripted\"\nscript = \"s.jsonl\"\nplayback = \"sequential\"\nmodels = [\"m\"]\n"
            )
        };
        let config = Config::parse(&format!("{}{}", table("a"), table("b"))).expect("config");
        let providers = Providers::new(Home::at(dir.path()), Arc::new(config), Arc::new(Keys::default()));
        assert_eq!(text(&providers, "a/m").await, "one");
        assert_eq!(text(&providers, "b/m").await, "two");
    }

    #[tokio::test]
    async fn a_rebuild_keeps_unchanged_providers_in_place_builds_the_rest_and_refuses_a_broken_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("s.jsonl"),
            "{\"steps\": [{\"text\": \"one\"}]}\n{\"steps\": [{\"text\": \"two\"}]}\n",
        )
        .expect("script");
        let table = "[providers.a]\nkind = \"scripted\"\nscript = \"s.jsonl\"\nplayback = \"sequential\"\nmodels = [\"m\"]\n";
        let config = |text: &str| Arc::new(Config::parse(text).expect("config"));
        let keys = Arc::new(Keys::default());
        let first = Providers::new(Home::at(dir.path()), config(table), keys.clone());
        assert_eq!(text(&first, "a/m").await, "one");
        let same = first.rebuilt(config(table), keys.clone()).expect("rebuilt");
        assert_eq!(text(&same, "a/m").await, "two", "an unchanged provider keeps its place");
        let changed = format!("{table}context_window = 1000\n");
        let fresh = same.rebuilt(config(&changed), keys.clone()).expect("rebuilt");
        assert_eq!(text(&fresh, "a/m").await, "one", "a changed provider starts over");
        let broken =
            format!("{table}[providers.b]\nkind = \"scripted\"\nscript = \"none.jsonl\"\nmodels = [\"m\"]\n");
        let refused = fresh.rebuilt(config(&broken), keys).expect_err("refused");
        assert!(matches!(&refused, ModelError::Broken { provider, .. } if provider == "b"), "{refused}");
    }
}
