//! `heron models`: the models `config.toml` offers, as `provider/model` one per line in
//! provider order (the offline `demo/demo` always among them), or one JSON array with
//! `--json`. It reads the config only: no key is read and nothing is asked of a server.

use std::process::ExitCode;

use clap::Args;
use heron_core::config::{Config, Home, ProviderKind};
use serde_json::json;

use super::printable;

/// Options of `heron models`.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelsArgs {
    /// Print a JSON array of {id, provider, model, kind, default} instead of one id a line.
    #[arg(long)]
    pub json: bool,
}

/// Runs `heron models`.
pub fn run(args: ModelsArgs) -> ExitCode {
    let config = match Home::from_env().and_then(|home| Config::load(&home)) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("heron: {err}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render(&config, args.json));
    ExitCode::SUCCESS
}

/// What `heron models` prints for `config`.
pub fn render(config: &Config, as_json: bool) -> String {
    let models = config.providers.iter().flat_map(|(provider, settings)| {
        settings.models.iter().map(move |model| (provider.as_str(), model.as_str(), settings.kind))
    });
    if !as_json {
        // Ids come from the user's config file; a stray escape must not reach the terminal.
        return models
            .map(|(provider, model, _)| format!("{}\n", printable(&format!("{provider}/{model}"))))
            .collect();
    }
    let entries: Vec<_> = models
        .map(|(provider, model, kind)| {
            let id = format!("{provider}/{model}");
            json!({
                "default": config.default_model.as_deref() == Some(id.as_str()),
                "id": id,
                "kind": match kind { ProviderKind::Openai => "openai", ProviderKind::Scripted => "scripted" },
                "model": model,
                "provider": provider,
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(entries))
}
