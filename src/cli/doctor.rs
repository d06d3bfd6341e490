//! `heron doctor`: whether Heron can serve from this machine and home, one line per
//! finding (`ok`, `warn`, `fail`), then the Zed snippet to start it from an editor.
//!
//! A `fail` is something that stops Heron from serving its default setup; the exit status
//! is then 1, else 0. Fatal: no home can be found; `config.toml` or `.env` cannot be read
//! or parsed; `default_model` names no configured model, or its provider lacks its key,
//! cannot be reached, refuses the key or cannot load its script; `heron.db` is damaged,
//! unreadable or from a newer Heron. Warnings: `.env` readable by group or others; no
//! `default_model`; any other provider's problem; models a provider does not list; the OS
//! sandbox missing or turned off.
//!
//! With `--mcp FILE` it checks the MCP servers FILE defines instead, one line per server
//! (`mcp`); a server that fails, or a FILE that cannot be read, is a `fail`.
//!
//! Nothing here creates or changes a file (the MCP servers `--mcp` starts are the user's
//! own programs, and do what they do when an editor starts them). Every line is redacted against every key in
//! `.env` and loses its control characters before it is printed, so neither a key nor a
//! terminal escape sent by a server reaches the screen.

mod mcp;
mod providers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use heron_core::config::{Config, Home, Keys, SandboxSetting};
use heron_core::sandbox::Support;
use heron_store::{StoreError, StoreHealth};

use super::printable;

/// The Zed settings that start Heron, as `docs/editors/zed.json` has them.
pub const ZED_SNIPPET: &str = include_str!("../../docs/editors/zed.json");

/// The Zed snippet with `command` set to `exe`: an app started from the desktop (Zed on
/// macOS) may not see the shell's `PATH`, so the printed snippet names this very binary.
pub fn zed_snippet(exe: &std::path::Path) -> String {
    let Ok(mut settings) = serde_json::from_str::<serde_json::Value>(ZED_SNIPPET) else {
        return ZED_SNIPPET.to_owned();
    };
    if let Some(entry) = settings.pointer_mut("/agent_servers/Heron") {
        entry["command"] = serde_json::Value::String(exe.display().to_string());
    }
    serde_json::to_string_pretty(&settings).map_or_else(|_| ZED_SNIPPET.to_owned(), |text| text + "\n")
}

/// Options of `heron doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Seconds each provider has to answer its model list.
    #[arg(long, value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub timeout: u64,
    /// Instead of the setup, check the MCP servers FILE defines: Zed settings
    /// (`context_servers`), ACP `mcpServers` (a list, as `session/new` carries it) or an
    /// `mcpServers` map by name. Each is started as a session in this directory would start
    /// it (within 30 seconds) and stopped; one line per server.
    #[arg(long, value_name = "FILE")]
    pub mcp: Option<PathBuf>,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// All is well.
    Ok,
    /// Worth fixing; Heron still serves.
    Warn,
    /// Heron cannot serve its default setup until this is fixed.
    Fail,
}

/// The findings of one run, in the order they were made.
#[derive(Debug, Default)]
pub struct Report {
    findings: Vec<(Level, String)>,
}

impl Report {
    /// Adds a finding.
    pub fn push(&mut self, level: Level, text: impl Into<String>) {
        self.findings.push((level, text.into()));
    }

    /// Whether any finding is fatal.
    pub fn failed(&self) -> bool {
        self.findings.iter().any(|(level, _)| *level == Level::Fail)
    }

    /// One line per finding, redacted against `keys` and made printable.
    pub fn render(&self, keys: &Keys) -> String {
        let mut out = String::new();
        for (level, text) in &self.findings {
            let tag = match level {
                Level::Ok => "ok  ",
                Level::Warn => "warn",
                Level::Fail => "fail",
            };
            let text = heron_core::secret::redact(text, keys.all());
            out.push_str(&format!("{tag} {}\n", printable(&text)));
        }
        out
    }
}

/// Runs `heron doctor` and prints its report.
pub fn run(args: DoctorArgs) -> ExitCode {
    super::init_logging();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("heron: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(file) = &args.mcp {
        let (report, keys) = mcp::examine(&runtime, file);
        let status = if report.failed() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        return super::after_output(super::write_stdout(&report.render(&keys)), status);
    }
    let (report, keys) = examine(&runtime, Duration::from_secs(args.timeout));
    let snippet = std::env::current_exe().map_or_else(|_| ZED_SNIPPET.to_owned(), |exe| zed_snippet(&exe));
    let text = format!(
        "{}\nTo start Heron from Zed, add this to its settings.json (other editors: README, Editors):\n{snippet}",
        report.render(&keys)
    );
    let status = if report.failed() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    super::after_output(super::write_stdout(&text), status)
}

/// Every check, in order; the keys come back for redacting the report. The file checks run
/// on this thread; only the providers' requests run on `runtime`.
fn examine(runtime: &tokio::runtime::Runtime, limit: Duration) -> (Report, Keys) {
    let mut report = Report::default();
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(err) => {
            report.push(Level::Fail, format!("home: {err}"));
            return (report, Keys::default());
        }
    };
    check_home(&home, &mut report);
    let keys = check_env(&home, &mut report);
    if let Some(config) = check_config(&home, &mut report) {
        check_default_model(&config, &keys, &mut report);
        runtime.block_on(providers::check(&config, &home, &keys, limit, &mut report));
        check_sandbox(Some(&config), &mut report);
    } else {
        check_sandbox(None, &mut report);
    }
    check_store(&home, &mut report);
    (report, keys)
}

fn check_home(home: &Home, report: &mut Report) {
    let root = home.root().display();
    match std::fs::metadata(home.root()) {
        Ok(metadata) if metadata.is_dir() => report.push(Level::Ok, format!("home: {root}")),
        Ok(_) => report.push(Level::Fail, format!("home: {root} is not a directory")),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => report.push(
            Level::Warn,
            format!(
                "home: {root} does not exist yet (`heron setup` creates it; only demo/demo works until then)"
            ),
        ),
        Err(err) => report.push(Level::Fail, format!("home: {root}: {err}")),
    }
}

/// Checks `.env`'s permissions and that it parses; the keys it holds, or none.
fn check_env(home: &Home, report: &mut Report) -> Keys {
    let path = home.env_path();
    match std::fs::metadata(&path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            report.push(Level::Ok, ".env: none (no keys: keyless providers and demo/demo only)");
            return Keys::default();
        }
        Err(err) => {
            report.push(Level::Fail, format!(".env: {}: {err}", path.display()));
            return Keys::default();
        }
        Ok(metadata) => check_env_mode(&path, &metadata, report),
    }
    match Keys::load(home) {
        Ok(keys) => {
            let count = keys.names().count();
            report.push(Level::Ok, format!(".env: {count} key{} (values never shown)", plural(count)));
            keys
        }
        // The error names the file and says what is wrong, never the line's text.
        Err(err) => {
            report.push(Level::Fail, format!(".env: {err}"));
            Keys::default()
        }
    }
}

#[cfg(unix)]
fn check_env_mode(path: &Path, metadata: &std::fs::Metadata, report: &mut Report) {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::fs::PermissionsExt;
    if metadata.nlink() > 1 {
        report.push(
            Level::Warn,
            format!(
                ".env: the file has {} names (hard links); the OS sandbox hides it only under HERON_HOME, so a \
                 command can read it through another name: find the others with `find / -xdev -samefile {}` \
                 and remove them",
                metadata.nlink(),
                path.display()
            ),
        );
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        report.push(
            Level::Warn,
            format!(
                ".env: readable by group or others (mode {mode:04o}); it holds API keys: chmod 600 {}",
                path.display()
            ),
        );
    }
}

#[cfg(not(unix))]
fn check_env_mode(_path: &Path, _metadata: &std::fs::Metadata, _report: &mut Report) {}

fn check_config(home: &Home, report: &mut Report) -> Option<Config> {
    let exists = home.config_path().exists();
    match Config::load(home) {
        // The demo provider is always added; it is not the user's.
        Ok(config) if !exists => {
            report.push(Level::Ok, "config.toml: none (only demo/demo; `heron setup` adds a provider)");
            Some(config)
        }
        Ok(config) => {
            let (providers, models) = (config.providers.len(), config.model_ids().len());
            report.push(
                Level::Ok,
                format!(
                    "config.toml: {providers} provider{}, {models} model{} (with demo/demo)",
                    plural(providers),
                    plural(models)
                ),
            );
            Some(config)
        }
        // The error carries the path and, for a syntax or value error, its line and column.
        Err(err) => {
            report.push(Level::Fail, format!("config.toml: {err}"));
            None
        }
    }
}

fn check_default_model(config: &Config, keys: &Keys, report: &mut Report) {
    let Some(model) = config.default_model.as_deref() else {
        report.push(
            Level::Warn,
            "default_model: not set, so each editor must pass --model or choose a model (`heron models` lists them)",
        );
        return;
    };
    let Some(resolved) = config.resolve(model) else {
        report.push(
            Level::Fail,
            format!("default_model: `{model}` is not a configured model (see `heron models`)"),
        );
        return;
    };
    match resolved.config.api_key_env.as_deref() {
        Some(key) if keys.get(key).is_none() => {
            report.push(
                Level::Fail,
                format!("default_model: {model} needs the key {key} in .env (`heron setup`)"),
            );
        }
        _ => report.push(Level::Ok, format!("default_model: {model}")),
    }
}

fn check_store(home: &Home, report: &mut Report) {
    let path = home.db_path();
    let shown = path.display();
    match heron_store::inspect(&path) {
        Ok(StoreHealth::Missing) => {
            report.push(Level::Ok, format!("store: {shown} not created yet (Heron creates it on first use)"))
        }
        Ok(StoreHealth::Healthy { schema_version }) => {
            report.push(Level::Ok, format!("store: {shown} passes SQLite's check (schema {schema_version})"))
        }
        Err(err @ StoreError::TooNew { .. }) => report.push(Level::Fail, format!("store: {shown}: {err}")),
        Err(err) => report.push(
            Level::Fail,
            format!("store: {shown} cannot be used: {err} (move it aside to start a fresh one)"),
        ),
    }
}

fn check_sandbox(config: Option<&Config>, report: &mut Report) {
    if config.is_some_and(|config| config.sandbox == SandboxSetting::Off) {
        report
            .push(Level::Warn, "sandbox: off in config.toml; commands and MCP servers run with your rights");
        return;
    }
    sandbox_walls(heron_core::sandbox::support(), report);
}

/// One line per wall of the sandbox around the model's commands: standing, or missing and
/// what that leaves open.
fn sandbox_walls(support: &Support, report: &mut Report) {
    match &support.landlock {
        Ok(abi) => report.push(
            Level::Ok,
            format!("sandbox: Landlock ABI {abi}: writes only in the roots, HERON_HOME hidden"),
        ),
        Err(reason) => report.push(
            Level::Warn,
            format!("sandbox: no Landlock ({reason}): commands may write wherever your user may"),
        ),
    }
    for (name, stands, what) in support.walls.listed() {
        if stands {
            report.push(Level::Ok, format!("sandbox: {name}: {what}"));
        } else {
            report.push(
                Level::Warn,
                format!("sandbox: {name} missing on this machine ({what}: does not hold)"),
            );
        }
    }
    if support.inside {
        report.push(
            Level::Ok,
            "sandbox: Heron runs inside a sandbox of Heron's, whose walls its commands keep",
        );
    }
    if support.walls.user_namespace {
        report.push(Level::Ok, "sandbox: the namespaces are made in a user namespace of each command's own");
    }
    report.push(
        Level::Ok,
        "sandbox: commands an editor runs in its terminal (Zed, ...) run through `heron sandbox-exec`, behind \
         the same walls",
    );
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_redacts_keys_and_control_characters() {
        let keys = Keys::from_pairs([("K".to_owned(), "sk-secret-1234".to_owned())]);
        let mut report = Report::default();
        report.push(Level::Warn, "server said sk-secret-1234\x1b[2J\nbye");
        let text = report.render(&keys);
        assert_eq!(text, "warn server said ***?[2J?bye\n");
        assert!(!report.failed());
        report.push(Level::Fail, "x");
        assert!(report.failed());
    }
}
