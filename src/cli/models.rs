//! `heron models`: the models `config.toml` offers, as `provider/model` one per line in
//! provider order (the offline `demo/demo` always among them), or one JSON array with
//! `--json`. Plain, it reads the config only: no key is read and nothing is asked of a
//! server. With `--remote`, each HTTP provider's models endpoint is asked too (with its key,
//! within `--timeout`), and what it serves is shown next to what the config names: a
//! configured alias counts as served by its dated snapshots, and an Azure deployment, which
//! has no list of its own, leaves its models unknown.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use heron_core::config::{Config, Home, Keys, ProviderConfig};
use heron_core::llm::models::{azure_deployment, list_models, serves};
use heron_core::llm::registry::http_config;
use heron_core::secret::redact;
use serde_json::{Value, json};

use super::printable;

/// Options of `heron models`.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelsArgs {
    /// Print JSON instead of text: an array of {id, provider, model, kind, default}, or with
    /// --remote an object of `models` (each also `configured` and `served`) and `providers`.
    #[arg(long)]
    pub json: bool,
    /// Also ask each provider's models endpoint what it serves.
    #[arg(long)]
    pub remote: bool,
    /// Seconds each endpoint may take to answer (--remote).
    #[arg(long, default_value_t = 5)]
    pub timeout: u64,
}

/// Runs `heron models`.
pub fn run(args: ModelsArgs) -> ExitCode {
    let loaded = Home::from_env().and_then(|home| {
        let config = Config::load(&home)?;
        // Keys are read only when a server is asked.
        let keys = if args.remote { Keys::load(&home)? } else { Keys::default() };
        Ok((config, keys))
    });
    let (config, keys) = match loaded {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("heron: {err}");
            return ExitCode::FAILURE;
        }
    };
    if !args.remote {
        return super::after_output(super::write_stdout(&render(&config, args.json)), ExitCode::SUCCESS);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("heron: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(ask_all(&config, &keys, Duration::from_secs(args.timeout.max(1))));
    let text = if args.json { render_remote_json(&config, &served) } else { render_remote(&config, &served) };
    super::after_output(super::write_stdout(&redact(&text, keys.all())), ExitCode::SUCCESS)
}

/// What `heron models` prints for `config`.
pub fn render(config: &Config, as_json: bool) -> String {
    let models = config.providers.iter().flat_map(|(provider, settings)| {
        settings.models.iter().map(move |model| (provider.as_str(), model.as_str(), settings))
    });
    if !as_json {
        // Ids come from the user's config file; a stray escape must not reach the terminal.
        return models
            .map(|(provider, model, _)| format!("{}\n", printable(&format!("{provider}/{model}"))))
            .collect();
    }
    let entries: Vec<_> =
        models.map(|(provider, model, settings)| entry(config, provider, model, settings)).collect();
    format!("{}\n", Value::Array(entries))
}

fn entry(config: &Config, provider: &str, model: &str, settings: &ProviderConfig) -> Value {
    let id = format!("{provider}/{model}");
    json!({
        "default": config.default_model.as_deref() == Some(id.as_str()),
        "id": id,
        "kind": settings.kind.name(),
        "model": model,
        "provider": provider,
    })
}

/// What one provider's endpoint said: the models it serves, or why it could not say.
/// Scripted providers are not asked.
pub type Served = Vec<(String, Option<Result<Vec<String>, String>>)>;

/// Asks every HTTP provider's endpoint at once, each within `limit`; answers come back in
/// provider order.
async fn ask_all(config: &Config, keys: &Keys, limit: Duration) -> Served {
    let mut asks = tokio::task::JoinSet::new();
    for (at, provider) in config.providers.values().enumerate() {
        if !provider.kind.is_http() {
            continue;
        }
        let mut http = http_config(provider, keys);
        http.connect_timeout = limit;
        let kind = provider.kind;
        asks.spawn(async move { (at, list_models(kind, &http, limit).await.map_err(|err| err.to_string())) });
    }
    let mut answers: Vec<Option<Result<Vec<String>, String>>> = vec![None; config.providers.len()];
    while let Some(done) = asks.join_next().await {
        if let Ok((at, answer)) = done {
            answers[at] = Some(answer);
        }
    }
    config.providers.keys().cloned().zip(answers).collect()
}

/// The text form of `--remote`: per provider, each configured model marked `served` or
/// `not served`, then what the endpoint serves beyond them.
pub fn render_remote(config: &Config, served: &Served) -> String {
    let mut out = String::new();
    for (name, answer) in served {
        let Some(provider) = config.providers.get(name) else { continue };
        let shown = |model: &str| printable(&format!("{name}/{model}")).into_owned();
        match answer {
            None => {
                out.push_str(&format!("{} ({}, not asked)\n", printable(name), provider.kind.name()));
                for model in &provider.models {
                    out.push_str(&format!("  {}\n", shown(model)));
                }
            }
            Some(Err(reason)) => {
                out.push_str(&format!(
                    "{} ({}): {}\n",
                    printable(name),
                    provider.kind.name(),
                    printable(reason)
                ));
                for model in &provider.models {
                    out.push_str(&format!("  {}  unknown\n", shown(model)));
                }
            }
            Some(Ok(listed)) => {
                if let Some(deployment) = deployment_of(provider) {
                    out.push_str(&format!(
                        "{} ({}): deployment `{}` has no model list; its resource offers {} model{}\n",
                        printable(name),
                        provider.kind.name(),
                        printable(&deployment),
                        listed.len(),
                        if listed.len() == 1 { "" } else { "s" }
                    ));
                    for model in &provider.models {
                        out.push_str(&format!("  {}  unknown\n", shown(model)));
                    }
                    continue;
                }
                out.push_str(&format!(
                    "{} ({}): the endpoint serves {} model{}\n",
                    printable(name),
                    provider.kind.name(),
                    listed.len(),
                    if listed.len() == 1 { "" } else { "s" }
                ));
                for model in &provider.models {
                    let mark = if is_served(listed, model) { "served" } else { "not served" };
                    out.push_str(&format!("  {}  {mark}\n", shown(model)));
                }
                for model in unconfigured(listed, provider) {
                    out.push_str(&format!("  {}  served, not configured\n", shown(model)));
                }
            }
        }
    }
    out
}

/// The JSON form of `--remote`: `models` (configured ones first, then those only served),
/// each with `configured` and `served` (null when unknown), and `providers`, each with its
/// `kind` and the count served or the `error`.
pub fn render_remote_json(config: &Config, served: &Served) -> String {
    let mut models = Vec::new();
    let mut providers = Vec::new();
    for (name, answer) in served {
        let Some(provider) = config.providers.get(name) else { continue };
        let deployment = deployment_of(provider);
        // A deployment's resource list says nothing of what the deployment serves.
        let listed = match answer {
            Some(Ok(listed)) if deployment.is_none() => Some(listed),
            _ => None,
        };
        for model in &provider.models {
            let mut value = entry(config, name, model, provider);
            value["configured"] = json!(true);
            value["served"] = listed.map_or(Value::Null, |listed| json!(is_served(listed, model)));
            models.push(value);
        }
        for model in listed.into_iter().flat_map(|listed| unconfigured(listed, provider)) {
            let mut value = entry(config, name, model, provider);
            value["configured"] = json!(false);
            value["served"] = json!(true);
            models.push(value);
        }
        let mut about = json!({ "name": name, "kind": provider.kind.name(), "asked": answer.is_some() });
        match (answer, &deployment) {
            (Some(Ok(all)), Some(deployment)) => {
                about["deployment"] = json!(deployment);
                about["resourceModels"] = json!(all.len());
            }
            (Some(Ok(all)), None) => about["served"] = json!(all.len()),
            (Some(Err(reason)), _) => about["error"] = json!(reason),
            (None, _) => {}
        }
        providers.push(about);
    }
    format!("{}\n", json!({ "models": models, "providers": providers }))
}

/// Whether the endpoint's list serves `model`, by its id or a dated snapshot of it.
fn is_served(listed: &[String], model: &str) -> bool {
    listed.iter().any(|id| serves(id, model))
}

/// What the endpoint lists that no configured model of `provider` is.
fn unconfigured<'a>(listed: &'a [String], provider: &'a ProviderConfig) -> impl Iterator<Item = &'a String> {
    listed.iter().filter(|id| !provider.models.iter().any(|model| serves(id, model)))
}

/// The Azure deployment `provider`'s endpoint names, if it is one.
fn deployment_of(provider: &ProviderConfig) -> Option<String> {
    provider.endpoint().and_then(azure_deployment)
}
