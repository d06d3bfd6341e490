//! MCP servers a session is given: each is started (a stdio child process in its own
//! process group and the session's sandbox, through rmcp), initialized and asked for its tools in the background;
//! its tools join the session's as `mcp__<server>__<tool>`; a server that cannot start is
//! reported with the reason and its last stderr lines, never fatal to the session; all of
//! them stop with the session. Knows nothing of ACP.

mod server;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use self::tool::McpTool;
use super::Tool;
use crate::sandbox::Policy;

/// How long a server may take to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A server as the editor described it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name, unique within the session.
    pub name: String,
    /// How to reach it.
    pub transport: TransportSpec,
}

impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Environment values often hold tokens: only their names are shown.
        f.debug_struct("ServerSpec").field("name", &self.name).field("transport", &self.transport).finish()
    }
}

/// How to reach a server.
#[derive(Clone, PartialEq, Eq)]
pub enum TransportSpec {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables added to Heron's own (from which keys are withheld).
        env: Vec<(String, String)>,
    },
    /// A transport Heron does not speak (`http`, `sse`): the server is reported failed.
    Unsupported(&'static str),
}

impl std::fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportSpec::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish(),
            TransportSpec::Unsupported(kind) => write!(f, "Unsupported({kind})"),
        }
    }
}

impl TransportSpec {
    /// The transport's name: `stdio`, `http` or `sse`.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportSpec::Stdio { .. } => "stdio",
            TransportSpec::Unsupported(kind) => kind,
        }
    }
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Starting or listing its tools.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// It could not start, or it stopped; why.
    Failed(String),
}

/// One server's state, for status reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// Where it stands.
    pub state: ServerState,
    /// The tools it offers (0 unless ready).
    pub tool_count: usize,
}

/// The MCP servers of one session.
pub struct McpHub {
    servers: Vec<Arc<server::Server>>,
    changed: watch::Sender<u64>,
    stopped: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.statuses()).finish()
    }
}

impl McpHub {
    /// A hub with no servers.
    pub fn empty() -> Arc<McpHub> {
        Arc::new(McpHub { servers: Vec::new(), changed: watch::Sender::new(0), stopped: Default::default() })
    }

    /// Starts every server in the background, in `cwd` and confined by `sandbox`; returns
    /// at once. Needs a tokio runtime when there are servers.
    pub fn start(specs: Vec<ServerSpec>, cwd: PathBuf, sandbox: Arc<Policy>) -> Arc<McpHub> {
        let changed = watch::Sender::new(0);
        let servers: Vec<Arc<server::Server>> =
            unique_names(specs).into_iter().map(|spec| Arc::new(server::Server::new(spec))).collect();
        for server in &servers {
            let (server, cwd, changed, sandbox) =
                (server.clone(), cwd.clone(), changed.clone(), sandbox.clone());
            tokio::spawn(async move {
                server.connect(&cwd, &sandbox).await;
                changed.send_modify(|n| *n += 1);
            });
        }
        Arc::new(McpHub { servers, changed, stopped: Default::default() })
    }

    /// Every server's state, in the order given.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// Whether the hub has no servers.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// A receiver that changes whenever a server's state does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until no server is still starting (each gives up after [`STARTUP_TIMEOUT`]).
    pub async fn started(&self) {
        let mut changes = self.subscribe();
        while self.servers.iter().any(|s| s.status().state == ServerState::Starting) {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The tools of the servers that are ready.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers.iter().flat_map(|s| s.tools()).collect()
    }

    /// Whether [`McpHub::shutdown`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops every server (its whole process group).
    pub async fn shutdown(&self) {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        for server in &self.servers {
            server.stop().await;
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

/// Names made unique (`name`, `name-2`, ...), so tool names never collide across servers.
fn unique_names(specs: Vec<ServerSpec>) -> Vec<ServerSpec> {
    let mut taken = std::collections::HashSet::new();
    specs
        .into_iter()
        .map(|mut spec| {
            let base = spec.name.clone();
            let mut n = 1;
            while !taken.insert(spec.name.clone()) {
                n += 1;
                spec.name = format!("{base}-{n}");
            }
            spec
        })
        .collect()
}
