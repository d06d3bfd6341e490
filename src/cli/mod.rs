//! The `heron` command line: argument parsing and the commands it runs.

pub mod acp;
pub mod conformance;
pub mod doctor;
pub mod manifest;
pub mod model_server;
pub mod models;
pub mod run;
pub mod sandbox_exec;
pub mod setup;

use std::borrow::Cow;
use std::io::Write;

use clap::{Parser, Subcommand};

/// Heron, a coding agent for editors that speak the Agent Client Protocol.
#[derive(Debug, Parser)]
#[command(name = "heron", version, about)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Heron's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve ACP on stdin/stdout: what an editor launches.
    Acp(acp::AcpArgs),
    /// Run one prompt headless and print the turn (drives Heron, or any agent with --agent).
    Run(run::RunArgs),
    /// Add a model provider to HERON_HOME (config.toml and .env).
    Setup(setup::SetupArgs),
    /// Replay ACP conformance transcripts against Heron or another agent.
    Conformance(conformance::ConformanceArgs),
    /// Check that Heron can serve: home, config, keys, providers, store, sandbox.
    Doctor(doctor::DoctorArgs),
    /// List the configured models as provider/model, one per line.
    Models(models::ModelsArgs),
    /// Serve a script of the scripted model on 127.0.0.1 as the OpenAI and Anthropic APIs,
    /// for pointing another agent at a model with no network and no key.
    ModelServer(model_server::ModelServerArgs),
    /// Run a program behind the walls of a session's commands (what Heron asks an editor's
    /// terminal to run).
    SandboxExec(sandbox_exec::SandboxExecArgs),
    /// Print this build's ACP registry entry (agent.json); used when releasing.
    #[command(hide = true)]
    Manifest(manifest::ManifestArgs),
}

/// Sends logs to stderr, filtered by `HERON_LOG` (default `warn`). Stdout is the protocol's.
/// Every URL in a log line loses its password, query and fragment, whichever crate logged
/// it (a provider's `?key=`, an MCP server's signed URL).
pub fn init_logging() {
    let filter = log_filter(std::env::var("HERON_LOG").ok().as_deref());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Redacted(std::io::stderr()))
        .with_ansi(false)
        .try_init();
}

/// The filter `HERON_LOG` asks for (default `warn`). The MCP library logs every peer's
/// whole description and its traffic at info, which would bury Heron's own lines (one per
/// server state change) at the level the shipped editor setups use: it stays at warn unless
/// `HERON_LOG` names it (`HERON_LOG=info,rmcp=debug`).
fn log_filter(asked: Option<&str>) -> tracing_subscriber::EnvFilter {
    let asked = asked.map(str::trim).filter(|asked| !asked.is_empty()).unwrap_or("warn");
    let directives = if asked.contains("rmcp") { asked.to_owned() } else { format!("rmcp=warn,{asked}") };
    tracing_subscriber::EnvFilter::try_new(&directives)
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(asked))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
}

/// Values every log line is also redacted against: those a command was handed that it must
/// never show (the env and header values of the servers `heron doctor --mcp` starts, which
/// a failing server's stderr, logged with the failure, may repeat).
static LOG_SECRETS: std::sync::Mutex<Vec<heron_core::secret::Secret>> = std::sync::Mutex::new(Vec::new());

/// Adds `secrets` to those every later log line is redacted against.
pub(crate) fn hide_in_logs(secrets: impl IntoIterator<Item = heron_core::secret::Secret>) {
    LOG_SECRETS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(secrets);
}

/// A log writer (stderr) through which each formatted event passes with its URLs
/// redacted. The formatter writes an event in one call, so a URL is never split in two.
struct Redacted<W>(W);

impl<W: Write> Write for Redacted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let text = heron_core::secret::redact_urls(&text);
        let secrets = LOG_SECRETS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = if secrets.is_empty() {
            text
        } else {
            Cow::Owned(heron_core::secret::redact(&text, secrets.iter()))
        };
        self.0.write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Writes `text` to stdout and flushes it. A reader that went away before the end
/// (`heron models | head -1`, `heron doctor | true`) is not a failure: it took what it
/// wanted, so the rest is dropped without a word and the command's exit status stays what
/// its own work decided. Rust ignores SIGPIPE, so `print!` would panic there instead; the
/// status is not 141 (a shell's "ended by SIGPIPE") because nothing was cut short that the
/// status reports on. Any other failure to write (a full disk behind a redirect) is an
/// error, said on stderr.
pub(crate) fn write_stdout(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write to stdout: {err}"))
        }
        _ => Ok(()),
    }
}

/// `status`, unless writing the command's output failed (see [`write_stdout`]).
pub(crate) fn after_output(
    written: Result<(), String>,
    status: std::process::ExitCode,
) -> std::process::ExitCode {
    match written {
        Ok(()) => status,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "heron: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `text` with every control character (terminal escapes, carriage returns, newlines)
/// replaced by `?`, for printing text that came from outside (a server's answer, a config
/// value) on one line of a terminal.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if text.chars().any(char::is_control) {
        Cow::Owned(text.chars().map(|c| if c.is_control() { '?' } else { c }).collect())
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_loses_the_credentials_of_its_urls() {
        let mut log = Redacted(Vec::new());
        log.write_all(b"WARN connecting url=https://me:pw@mcp.example.com/mcp?token=abc123 failed\n")
            .expect("written");
        let written = String::from_utf8(log.0).expect("utf-8");
        assert_eq!(written, "WARN connecting url=https://me@mcp.example.com/mcp?\u{2026} failed\n");
    }

    #[test]
    fn a_log_line_loses_the_values_a_command_hid() {
        hide_in_logs([heron_core::secret::Secret::new("tok-hidden-4821")]);
        let mut log = Redacted(Vec::new());
        log.write_all(b"WARN server=x reason=bad token tok-hidden-4821\n").expect("written");
        assert_eq!(String::from_utf8(log.0).expect("utf-8"), "WARN server=x reason=bad token ***\n");
    }

    #[test]
    fn the_mcp_library_stays_at_warn_unless_named() {
        let shown = |asked: Option<&str>| log_filter(asked).to_string();
        assert!(shown(Some("info")).contains("rmcp=warn"), "{}", shown(Some("info")));
        assert!(shown(None).contains("rmcp=warn"));
        assert!(!shown(Some("info,rmcp=debug")).contains("rmcp=warn"));
        assert!(shown(Some("info,rmcp=debug")).contains("rmcp=debug"));
    }
}
