//! One MCP server: starting it, what it offers, and stopping it. Its stderr goes to the
//! log, and its last lines (read within a budget: `stderr`) explain a failure to start.

mod stderr;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};

use super::tool::McpTool;
use super::{STARTUP_TIMEOUT, ServerSpec, ServerState, ServerStatus, TransportSpec};
use crate::sandbox::{self, Policy};
use crate::tools::Tool;
use crate::tools::local_process::ProcessGroup;

/// The longest failure report kept (and shown as `mcpStatus.error`), in bytes: the reason
/// and as much of the end of the server's stderr as fits.
const MAX_FAILURE: usize = 2048;

/// How long a failure report waits for the rest of the stderr of a server that exited.
const STDERR_SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// A server and what is known of it.
pub(super) struct Server {
    spec: ServerSpec,
    now: Mutex<Now>,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, ()>>>,
    stderr: Arc<Mutex<stderr::Tail>>,
    /// The server's process group: killed on stop, and when the server is dropped.
    group: Mutex<ProcessGroup>,
}

struct Now {
    state: ServerState,
    tools: Vec<Arc<McpTool>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    pub(super) fn new(spec: ServerSpec) -> Self {
        Self {
            spec,
            now: Mutex::new(Now { state: ServerState::Starting, tools: Vec::new() }),
            running: tokio::sync::Mutex::new(None),
            stderr: Arc::default(),
            group: Mutex::new(ProcessGroup(None)),
        }
    }

    pub(super) fn status(&self) -> ServerStatus {
        let now = lock(&self.now);
        let ready = now.state == ServerState::Ready;
        // A server that exited after it started is no longer ready.
        let exited = ready && now.tools.first().is_some_and(|t| t.is_closed());
        ServerStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport.kind(),
            state: if exited { ServerState::Failed("the server exited".into()) } else { now.state.clone() },
            tool_count: if ready && !exited { now.tools.len() } else { 0 },
        }
    }

    pub(super) fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let now = lock(&self.now);
        if now.state != ServerState::Ready {
            return Vec::new();
        }
        now.tools.iter().map(|t| t.clone() as Arc<dyn Tool>).collect()
    }

    fn fail(&self, reason: String) {
        let reason = failure_report(&reason, &lock(&self.stderr).lines());
        tracing::warn!(server = %self.spec.name, %reason, "an MCP server could not start");
        lock(&self.now).state = ServerState::Failed(reason);
    }

    /// Fails a server that stopped answering, once its stderr has ended (or a moment has
    /// passed), so the report has its last words.
    async fn fail_after(&self, reason: String, reader: Option<tokio::task::JoinHandle<()>>) {
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(STDERR_SETTLE, reader).await;
        }
        self.fail(reason);
    }

    /// Starts the server, confined by `sandbox`, and lists its tools, or records why it
    /// could not.
    pub(super) async fn connect(&self, cwd: &Path, sandbox: &Arc<Policy>) {
        let TransportSpec::Stdio { command, args, env } = &self.spec.transport else {
            let kind = self.spec.transport.kind();
            self.fail(format!(
                "Heron does not speak the {kind} transport; give the server as a stdio command"
            ));
            return;
        };
        let mut process = tokio::process::Command::new(command);
        process.args(args).envs(env.iter().map(|(k, v)| (k, v))).current_dir(cwd);
        if let Err(error) = sandbox::confine(&mut process, sandbox).await {
            return self.fail(format!("it was not started: {error}"));
        }
        // The command (and with it the sandbox's ruleset descriptor) is dropped by the spawn.
        let mut wrapped = process_wrap::tokio::CommandWrap::from(process);
        // Its own group, so stopping it also stops what it spawned (npx, uvx ...).
        #[cfg(unix)]
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        let (transport, stderr) = match TokioChildProcess::builder(wrapped).stderr(Stdio::piped()).spawn() {
            Ok(spawned) => spawned,
            Err(error) => return self.fail(format!("cannot start `{}`: {error}", command.display())),
        };
        // The leader's id is the group's; what it spawned stays in the group after it exits.
        #[cfg(unix)]
        {
            lock(&self.group).0 = transport.id().and_then(|id| i32::try_from(id).ok());
        }
        let reader = stderr
            .map(|stderr| tokio::spawn(stderr::read(stderr, self.spec.name.clone(), self.stderr.clone())));
        let started = tokio::time::timeout(STARTUP_TIMEOUT, async {
            let client = ().serve(transport).await.map_err(|e| format!("it did not initialize: {e}"))?;
            match client.list_all_tools().await {
                Ok(tools) => Ok((client, tools)),
                Err(e) => {
                    let _ = client.cancel().await;
                    Err(format!("it did not list its tools: {e}"))
                }
            }
        })
        .await;
        let (client, listed) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(reason)) => return self.fail_after(reason, reader).await,
            Err(_) => return self.fail(format!("it did not start within {} s", STARTUP_TIMEOUT.as_secs())),
        };
        let mut taken = std::collections::HashSet::new();
        let tools = listed
            .into_iter()
            .map(|tool| Arc::new(McpTool::new(&self.spec.name, tool, client.peer().clone(), &mut taken)))
            .collect();
        // `running` orders this against `stop`: a stop that came first wins.
        let mut running = self.running.lock().await;
        let stopped = {
            let mut now = lock(&self.now);
            let stopped = now.state != ServerState::Starting;
            if !stopped {
                *now = Now { state: ServerState::Ready, tools };
            }
            stopped
        };
        if stopped {
            drop(running);
            let _ = client.cancel().await;
        } else {
            *running = Some(client);
        }
    }

    /// Stops the server: the MCP connection, then its process group (when the transport
    /// is dropped).
    pub(super) async fn stop(&self) {
        let client = {
            let mut running = self.running.lock().await;
            *lock(&self.now) =
                Now { state: ServerState::Failed("stopped with its session".into()), tools: Vec::new() };
            running.take()
        };
        if let Some(client) = client {
            let _ = client.cancel().await;
        }
        lock(&self.group).kill();
    }
}

/// `reason`, then as much of the end of the server's stderr as fits in [`MAX_FAILURE`]
/// bytes: the last lines say most about why it stopped.
fn failure_report(reason: &str, stderr: &[String]) -> String {
    const JOIN: &str = "; its stderr ends: ";
    let reason = crate::secret::clip(reason, MAX_FAILURE / 2);
    if stderr.is_empty() {
        return reason;
    }
    let tail = stderr.join(" | ");
    let room = MAX_FAILURE.saturating_sub(reason.len() + JOIN.len());
    if tail.len() <= room {
        return format!("{reason}{JOIN}{tail}");
    }
    let marker = "…";
    let mut start = tail.len() - room.saturating_sub(marker.len());
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    format!("{reason}{JOIN}{marker}{}", &tail[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_report_keeps_the_end_of_a_long_stderr_within_its_budget() {
        let stderr: Vec<String> = (0..20).map(|i| format!("{i:02}{}", "é".repeat(200))).collect();
        let report = failure_report("it did not initialize", &stderr);
        assert!(report.len() <= MAX_FAILURE, "{} bytes", report.len());
        assert!(report.starts_with("it did not initialize; its stderr ends: …"), "{report}");
        assert!(report.ends_with(&stderr[19]), "the last line is whole");
    }
}
