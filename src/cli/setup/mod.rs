//! `heron setup` (and `heron acp --setup`, the terminal auth method): adds a provider to
//! `config.toml` and its key to `.env` (mode 0600), starting from a preset for the server
//! (`presets`). Values not given as flags are asked for on the terminal, with the preset's
//! as defaults.

mod presets;

use std::io::{BufRead, Write};
use std::path::Path;

use clap::Args;

use heron_core::config::{Config, Home};

/// Options of `heron setup`; anything left out is asked for.
#[derive(Debug, Clone, Default, Args)]
pub struct SetupArgs {
    /// The server: openai, openai-responses, anthropic, azure, mistral, deepseek,
    /// openrouter, ollama, llamacpp or custom (any other OpenAI-compatible server).
    #[arg(long)]
    pub preset: Option<String>,
    /// The provider's name (model ids become NAME/MODEL); the preset's name by default.
    #[arg(long)]
    pub provider: Option<String>,
    /// The endpoint, e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1; the
    /// preset's by default.
    #[arg(long)]
    pub base_url: Option<String>,
    /// The models it serves, comma-separated.
    #[arg(long)]
    pub models: Option<String>,
    /// The name of the key in HERON_HOME/.env (empty for a keyless local server).
    #[arg(long)]
    pub key_env: Option<String>,
    /// Read the key from the first line of stdin instead of asking.
    #[arg(long)]
    pub key_stdin: bool,
}

/// Why setup failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A value was not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The home could not be found or its config is broken.
    #[error(transparent)]
    Config(#[from] heron_core::config::ConfigError),
}

/// The longest answer read, in bytes: a key, a URL or a model list, with room to spare.
const MAX_ANSWER: u64 = 64 * 1024;

/// One line of `input`, at most [`MAX_ANSWER`] bytes; `None` when the input ended.
fn answer(input: &mut impl BufRead) -> Result<Option<String>, SetupError> {
    let mut line = String::new();
    let read = std::io::Read::take(&mut *input, MAX_ANSWER + 1).read_line(&mut line)?;
    if read == 0 {
        return Ok(None);
    }
    if line.len() as u64 > MAX_ANSWER {
        return Err(SetupError::Invalid(format!("an answer is longer than {MAX_ANSWER} bytes")));
    }
    Ok(Some(line))
}

/// The text of the setup file at `path` it is about to change: empty when there is none;
/// an error when it is there but cannot be read whole, so it is never replaced unseen.
fn held_text(path: &Path, cap: u64) -> Result<String, SetupError> {
    match heron_core::whole_file::read_text(path, cap) {
        Ok(text) => Ok(text),
        Err(heron_core::whole_file::WholeFileError::NotFound) => Ok(String::new()),
        Err(error) => Err(SetupError::Invalid(format!("{}: {error}; it was left as it is", path.display()))),
    }
}

fn ask(input: &mut impl BufRead, question: &str, default: &str) -> Result<String, SetupError> {
    let mut err = std::io::stderr();
    if default.is_empty() {
        write!(err, "{question}: ")?;
    } else {
        write!(err, "{question} [{default}]: ")?;
    }
    err.flush()?;
    let Some(line) = answer(input)? else {
        return Err(SetupError::Invalid("input ended before setup finished".to_owned()));
    };
    let line = line.trim();
    Ok(if line.is_empty() { default.to_owned() } else { line.to_owned() })
}

/// Writes `contents` to `path` readable by the owner only.
fn write_private(path: &Path, contents: &str) -> Result<(), SetupError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// Replaces or appends `NAME=value` in `.env` text.
fn set_env_line(text: &str, name: &str, value: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.split_once('=').map(|(k, _)| k.trim()) != Some(name))
        .map(str::to_owned)
        .collect();
    lines.push(format!("{name}={value}"));
    lines.join("\n") + "\n"
}

/// Runs setup against `home`, reading answers from `input`.
pub fn run(home: &Home, args: SetupArgs, input: &mut impl BufRead) -> Result<(), SetupError> {
    let preset = match args.preset {
        Some(name) => name,
        None => {
            eprint!("Servers Heron can set up:\n{}", presets::menu());
            ask(input, "Server", presets::PRESETS[0].name)?
        }
    };
    let preset = presets::find(&preset).ok_or_else(|| {
        SetupError::Invalid(format!(
            "`{preset}` is not a server Heron knows; pick one of {}",
            presets::names()
        ))
    })?;
    let provider = match args.provider {
        Some(p) => p,
        None => ask(input, "Provider name", preset.name)?,
    };
    if provider.is_empty() || provider.contains('/') || provider == heron_core::config::DEMO_PROVIDER {
        return Err(SetupError::Invalid(format!("`{provider}` cannot be a provider name")));
    }
    let base_url = match args.base_url {
        Some(u) => u,
        None => ask(input, &format!("Endpoint ({})", preset.kind.name()), preset.base_url.unwrap_or(""))?,
    };
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(SetupError::Invalid(format!("`{base_url}` is not an http(s) URL")));
    }
    let models = match args.models {
        Some(m) => m,
        None => ask(input, "Models, comma-separated", preset.model.unwrap_or(""))?,
    };
    let models: Vec<String> =
        models.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).collect();
    if models.is_empty() {
        return Err(SetupError::Invalid("at least one model is needed".to_owned()));
    }
    let default_key = match preset.key {
        presets::Key::Named(name) => name.to_owned(),
        presets::Key::AfterProvider => format!("{}_API_KEY", provider.to_ascii_uppercase().replace('-', "_")),
        presets::Key::Keyless => String::new(),
    };
    let key_env = match args.key_env {
        Some(k) => k,
        None => ask(input, "Key name in .env (empty for none)", &default_key)?,
    };
    let key = if key_env.is_empty() {
        None
    } else if args.key_stdin {
        Some(answer(input)?.unwrap_or_default().trim().to_owned())
    } else {
        Some(ask(input, "API key (shown as you type)", "")?)
    };

    // Merge into the existing config, keeping everything else as it is.
    let path = home.config_path();
    let existing = held_text(&path, heron_core::config::MAX_CONFIG_BYTES)?;
    let mut table: toml::Table = toml::from_str(&existing)
        .map_err(|e| SetupError::Invalid(format!("config.toml: {}", e.message())))?;
    let mut entry = toml::Table::new();
    entry.insert("kind".into(), preset.kind.name().into());
    if let Some(flavor) = preset.flavor {
        entry.insert("flavor".into(), presets::flavor_name(flavor).into());
    }
    entry.insert("base_url".into(), base_url.into());
    if !key_env.is_empty() {
        entry.insert("api_key_env".into(), key_env.clone().into());
    }
    entry.insert("models".into(), toml::Value::Array(models.iter().cloned().map(Into::into).collect()));
    let providers = table.entry("providers").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(providers) = providers.as_table_mut() else {
        return Err(SetupError::Invalid("config.toml: `providers` is not a table".to_owned()));
    };
    providers.insert(provider.clone(), toml::Value::Table(entry));
    table.entry("default_model").or_insert_with(|| format!("{provider}/{}", models[0]).into());
    let text = toml::to_string(&table).map_err(|e| SetupError::Invalid(e.to_string()))?;
    Config::parse(&text).map_err(SetupError::Invalid)?;
    write_private(&path, &text)?;

    if let (Some(key), false) = (key, key_env.is_empty()) {
        let env_path = home.env_path();
        // A .env that cannot be read whole is not replaced by one holding the new key alone.
        let current = held_text(&env_path, heron_core::config::MAX_ENV_BYTES)?;
        write_private(&env_path, &set_env_line(&current, &key_env, &key))?;
    }
    eprintln!("heron: provider `{provider}` saved; models: {}", models.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_writes_config_and_a_private_env_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let args = SetupArgs {
            preset: Some("custom".into()),
            provider: Some("local".into()),
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            models: Some("fast, smart".into()),
            key_env: Some("LOCAL_API_KEY".into()),
            key_stdin: true,
        };
        run(&home, args, &mut std::io::Cursor::new("sk-test-42\n")).expect("setup");
        let config = Config::load(&home).expect("config loads");
        assert_eq!(config.default_model.as_deref(), Some("local/fast"));
        assert!(config.resolve("local/smart").is_some());
        let keys = heron_core::config::Keys::load(&home).expect("keys");
        assert_eq!(keys.get("LOCAL_API_KEY").map(heron_core::secret::Secret::expose), Some("sk-test-42"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(home.env_path()).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn setup_keeps_other_providers_and_replaces_the_key_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        std::fs::write(home.config_path(), "[providers.other]\nkind = \"scripted\"\nmodels = [\"x\"]\n")
            .expect("w");
        std::fs::write(home.env_path(), "LOCAL_API_KEY=old\nOTHER=1\n").expect("w");
        let args = SetupArgs {
            preset: Some("custom".into()),
            provider: Some("local".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            models: Some("m".into()),
            key_env: Some("LOCAL_API_KEY".into()),
            key_stdin: true,
        };
        run(&home, args, &mut std::io::Cursor::new("new\n")).expect("setup");
        let config = Config::load(&home).expect("loads");
        assert!(config.resolve("other/x").is_some());
        let env = std::fs::read_to_string(home.env_path()).expect("env");
        assert_eq!(env, "OTHER=1\nLOCAL_API_KEY=new\n");
    }

    #[test]
    fn a_env_it_cannot_read_whole_is_left_as_it_is_and_an_endless_answer_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        // Not UTF-8: read as text it would be lost, and the new key written alone.
        std::fs::write(home.env_path(), b"OTHER=\xff\n").expect("w");
        let args = || SetupArgs {
            preset: Some("custom".into()),
            provider: Some("local".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            models: Some("m".into()),
            key_env: Some("LOCAL_API_KEY".into()),
            key_stdin: true,
        };
        let err = run(&home, args(), &mut std::io::Cursor::new("new\n")).expect_err("refused");
        assert!(err.to_string().contains("left as it is"), "{err}");
        assert_eq!(std::fs::read(home.env_path()).expect("env"), b"OTHER=\xff\n", "untouched");
        let endless = "k".repeat(2 * MAX_ANSWER as usize);
        let err = run(&home, args(), &mut std::io::Cursor::new(endless)).expect_err("refused");
        assert!(err.to_string().contains("longer than"), "{err}");
    }

    #[test]
    fn a_non_http_endpoint_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = SetupArgs {
            preset: Some("custom".into()),
            base_url: Some("ftp://x".into()),
            provider: Some("p".into()),
            ..SetupArgs::default()
        };
        let err = run(&Home::at(dir.path()), args, &mut std::io::Cursor::new("")).expect_err("refused");
        assert!(err.to_string().contains("ftp://x"));
    }

    #[test]
    fn a_preset_answers_everything_but_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let args = SetupArgs { preset: Some("anthropic".into()), key_stdin: true, ..SetupArgs::default() };
        // Enter takes the preset's name, endpoint, model and key name; then the key.
        run(&home, args, &mut std::io::Cursor::new("\n\n\n\nsk-ant-1\n")).expect("setup");
        let config = Config::load(&home).expect("config loads");
        let provider = &config.providers["anthropic"];
        assert_eq!(provider.kind, heron_core::config::ProviderKind::Anthropic);
        assert_eq!(provider.endpoint(), Some("https://api.anthropic.com/v1"));
        assert_eq!(provider.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(config.default_model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        let keys = heron_core::config::Keys::load(&home).expect("keys");
        assert_eq!(keys.get("ANTHROPIC_API_KEY").map(heron_core::secret::Secret::expose), Some("sk-ant-1"));
    }

    #[test]
    fn a_local_preset_names_its_flavor_and_asks_for_no_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        // The menu's default is taken by name here; every other answer is the preset's.
        run(&home, SetupArgs::default(), &mut std::io::Cursor::new("llamacpp\n\n\n\n\n")).expect("setup");
        let config = Config::load(&home).expect("config loads");
        let provider = &config.providers["llamacpp"];
        assert_eq!(provider.effective_flavor(), Some(heron_core::config::flavor::Flavor::Llamacpp));
        assert_eq!(provider.api_key_env, None);
        assert!(!home.env_path().exists(), "no key, no .env");
    }

    #[test]
    fn an_unknown_preset_is_refused_naming_the_known_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = SetupArgs { preset: Some("gpt".into()), ..SetupArgs::default() };
        let err = run(&Home::at(dir.path()), args, &mut std::io::Cursor::new("")).expect_err("refused");
        assert!(err.to_string().contains("openai-responses, anthropic"), "{err}");
    }
}
