//! `heron doctor --mcp FILE`: starts the MCP servers FILE defines as a session opened in the
//! current directory would (the same checks of each definition, the same sandbox policy,
//! Heron's keys withheld), waits until each is ready or has failed, reports one line per
//! server, and stops them all.
//!
//! FILE's env and header values are secrets: every reason in the report (a failing
//! server's stderr, which it quotes, may repeat one) and the log are redacted against them;
//! the report as a whole is redacted against the keys of `.env`, as doctor's always is.
//! Names are not: a value as common as an env's `true` or `crash` would blank them.

mod file;
mod jsonc;

use std::path::Path;
use std::sync::Arc;

use heron_core::config::{Config, Home, Keys};
use heron_core::sandbox::Policy;
use heron_core::tools::mcp::{McpHub, ServerState, ServerStatus};
use heron_core::tools::protected::Protected;

use self::file::Found;
use super::{Level, Report, plural};

/// Checks the servers of `path` on `runtime`: the report, and the keys of `.env` to redact
/// it against.
pub fn examine(runtime: &tokio::runtime::Runtime, path: &Path) -> (Report, Keys) {
    let mut report = Report::default();
    let Some((home, keys, config)) = setup(&mut report) else {
        return (report, Keys::default());
    };
    // The servers start where a session opened here would: the editor's project is the
    // usual cwd, and doctor is run from it.
    let cwd = match std::env::current_dir().and_then(std::fs::canonicalize) {
        Ok(cwd) => cwd,
        Err(err) => {
            report.push(Level::Fail, format!("cwd: the current directory cannot be used: {err}"));
            return (report, keys);
        }
    };
    let shown = path.display();
    let servers = match file::read(path, &cwd, &Protected::for_home(home.root())) {
        Ok(servers) => servers,
        Err(err) => {
            report.push(Level::Fail, format!("{shown}: {err}"));
            return (report, keys);
        }
    };
    crate::cli::hide_in_logs(servers.secrets.iter().cloned().chain(keys.all().cloned()));
    let count = servers.entries.len();
    if count == 0 {
        report.push(Level::Warn, format!("{shown}: {}, naming no MCP server", servers.shape));
        return (report, keys);
    }
    let policy = Arc::new(Policy::for_mcp_servers(&config, &home, &keys, vec![cwd.clone()]));
    let how = if policy.enabled {
        "in Heron's OS sandbox (`sandbox_mcp = true`)"
    } else {
        "as you, without Heron's keys"
    };
    report.push(
        Level::Ok,
        format!(
            "{shown}: {}, {count} MCP server{}, started in {} {how}",
            servers.shape,
            plural(count),
            cwd.display()
        ),
    );
    let specs: Vec<_> = servers
        .entries
        .iter()
        .filter_map(|entry| match &entry.found {
            Found::Start(spec) => Some(spec.clone()),
            _ => None,
        })
        .collect();
    let statuses = if specs.is_empty() { Vec::new() } else { runtime.block_on(run(specs, cwd, policy)) };
    // The hub keeps the order it was given: the statuses come in the entries' order.
    let mut statuses = statuses.into_iter();
    let hide = |reason: &str| heron_core::secret::redact(reason, &servers.secrets);
    for entry in &servers.entries {
        let (name, transport) = (&entry.name, &entry.transport);
        match &entry.found {
            Found::Start(_) => match statuses.next() {
                Some(status) => push_status(&status, hide, &mut report),
                None => report.push(Level::Fail, format!("{name} ({transport}): it has no status")),
            },
            Found::Refused(reason) => {
                report.push(Level::Fail, format!("{name} ({transport}): {}", hide(reason)));
            }
            Found::Skipped(reason) => report.push(Level::Warn, format!("{name} ({transport}): {reason}")),
        }
    }
    (report, keys)
}

/// The home, keys and config a session would use, or `None` after saying which could not
/// be had: without them no session starts, and which sandbox its servers get is unknown.
fn setup(report: &mut Report) -> Option<(Home, Keys, Config)> {
    let home = Home::from_env().map_err(|err| report.push(Level::Fail, format!("home: {err}"))).ok()?;
    let keys = Keys::load(&home).map_err(|err| report.push(Level::Fail, format!(".env: {err}"))).ok()?;
    let config =
        Config::load(&home).map_err(|err| report.push(Level::Fail, format!("config.toml: {err}"))).ok()?;
    Some((home, keys, config))
}

/// Starts `specs` as a session does, waits until none is starting (each has
/// [`heron_core::tools::mcp::STARTUP_TIMEOUT`]), and stops them: where each stood.
async fn run(
    specs: Vec<heron_core::tools::mcp::ServerSpec>,
    cwd: std::path::PathBuf,
    policy: Arc<Policy>,
) -> Vec<ServerStatus> {
    let hub = McpHub::start(specs, cwd, policy);
    hub.started().await;
    let statuses = hub.statuses();
    hub.shutdown().await;
    statuses
}

/// The line of a server that was started; `hide` redacts a reason.
fn push_status(status: &ServerStatus, hide: impl Fn(&str) -> String, report: &mut Report) {
    let (name, transport) = (&status.name, status.transport);
    match &status.state {
        ServerState::Ready => report.push(
            Level::Ok,
            format!("{name} ({transport}): {} tool{}", status.tool_count, plural(status.tool_count)),
        ),
        ServerState::Failed(reason) => {
            report.push(Level::Fail, format!("{name} ({transport}): {}", hide(reason)));
        }
        ServerState::Connecting => report.push(Level::Fail, format!("{name} ({transport}): still starting")),
        ServerState::Disabled => report.push(Level::Warn, format!("{name} ({transport}): not started")),
    }
}
