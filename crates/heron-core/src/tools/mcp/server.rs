//! One MCP server: starting it, what it offers, and stopping it. Its stderr goes to the
//! log, and its last lines explain a failure to start.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::tool::McpTool;
use super::{STARTUP_TIMEOUT, ServerSpec, ServerState, ServerStatus, TransportSpec};
use crate::sandbox::{self, Policy};
use crate::tools::Tool;
use crate::tools::local_process::ProcessGroup;

/// How many stderr lines a failure report quotes.
const STDERR_LINES: usize = 5;

/// A server and what is known of it.
pub(super) struct Server {
    spec: ServerSpec,
    now: Mutex<Now>,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, ()>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
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
        let tail: Vec<String> = lock(&self.stderr).iter().cloned().collect();
        let reason =
            if tail.is_empty() { reason } else { format!("{reason}; its stderr ends: {}", tail.join(" | ")) };
        tracing::warn!(server = %self.spec.name, %reason, "an MCP server could not start");
        lock(&self.now).state = ServerState::Failed(reason);
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
        if let Some(stderr) = stderr {
            let (name, tail) = (self.spec.name.clone(), self.stderr.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %name, "{line}");
                    let mut tail = lock(&tail);
                    if tail.len() == STDERR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
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
            Ok(Err(reason)) => return self.fail(reason),
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
