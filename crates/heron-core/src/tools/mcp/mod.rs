//! MCP servers a session is given: each is reached (a stdio child process in its own
//! process group and the session's sandbox, or a URL over streamable HTTP or legacy SSE,
//! through rmcp), initialized and asked for its tools in the background; its tools join the
//! session's as `mcp__<server>__<tool>`; a server that cannot be reached is reported with the
//! reason (its last stderr lines, or the HTTP status), never fatal to the session; a server's
//! elicitation goes to the session's editor, checked (`elicit`, `formats`), and its sampling
//! to the session's model (`sampling`); all of them stop with the
//! session. A status read never starts or contacts a server. Knows nothing of ACP.

mod client;
mod elicit;
mod formats;
mod offers;
mod pages;
mod progress;
mod remote;
mod resource;
mod said;
pub mod sampling;
mod server;
mod sse;
mod tool;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

pub use self::offers::{McpPrompt, McpResource, PromptArgument};
pub use self::remote::parse_url;
pub use self::said::ServerSaid;
pub use self::tool::McpTool;
use super::Tool;
use super::editor::EditorIo;
use crate::sandbox::Policy;

/// How long a server may take to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a hub waits on its servers; the default is what sessions use. A test passes
/// shorter times, so that crossing one takes a moment, not half a minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Starting a server: its process or connection (a URL that refuses connections is
    /// tried again until then), `initialize` and its tool list ([`STARTUP_TIMEOUT`]).
    pub startup: Duration,
    /// A ready server listing its prompts and resources; past it, it is ready with what
    /// it listed.
    pub offers: Duration,
    /// Closing a connection; past it, the server's process group is killed anyway.
    pub close: Duration,
    /// One POST of a message to a legacy SSE server (30 s); past it, the message fails.
    pub post: Duration,
    /// One attempt to connect to a remote server (10 s); past it, the attempt fails like a
    /// refused one and is tried again within `startup`.
    pub connect: Duration,
}

impl Default for McpLimits {
    fn default() -> Self {
        let (offers, close) = (server::OFFERS_WAIT, server::CLOSE_WAIT);
        Self { startup: STARTUP_TIMEOUT, offers, close, post: POST_TIMEOUT, connect: remote::CONNECT_TIMEOUT }
    }
}

// The bounds both remote transports (streamable HTTP in `server`, legacy SSE in `sse`) put
// on a server, here so that neither transport's module depends on the other's.

/// How long one POST of a message may take (the answer to a call may come later, on a
/// stream: tool calls have their own deadline, `mcp_timeout_s`).
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest JSON answer or SSE event taken from a server.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;
/// The most of an error body read (it is never shown; only its status is).
const MAX_ERROR_BODY: usize = 4 * 1024;

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
        // Environment and header values often hold tokens: only their names are shown.
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
    /// A URL speaking MCP's streamable HTTP transport.
    Http {
        /// The endpoint (http or https).
        url: String,
        /// Headers sent with every request, exactly as the editor gave them (secrets).
        headers: Vec<(String, String)>,
    },
    /// A URL speaking MCP's legacy transport: an SSE stream that names where to POST.
    Sse {
        /// The event stream's URL (http or https).
        url: String,
        /// Headers sent with every request, exactly as the editor gave them (secrets).
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| pairs.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        match self {
            TransportSpec::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &names(env))
                .finish(),
            TransportSpec::Http { url, headers } | TransportSpec::Sse { url, headers } => f
                .debug_struct(if matches!(self, TransportSpec::Http { .. }) { "Http" } else { "Sse" })
                .field("url", &remote::shown_url(url))
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

impl TransportSpec {
    /// The transport's name: `stdio`, `http` or `sse`.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportSpec::Stdio { .. } => "stdio",
            TransportSpec::Http { .. } => "http",
            TransportSpec::Sse { .. } => "sse",
        }
    }
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Starting, connecting (a URL that refuses connections is tried again until the
    /// startup timeout), initializing or listing its tools.
    Connecting,
    /// Connected; its tools are offered.
    Ready,
    /// It could not start, or it stopped; why.
    Failed(String),
    /// Configured but not started: `--safe-mode`, or a plugin's `enabled = false`.
    Disabled,
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
    /// The HTTP status that failed an http or sse server, when it answered one.
    pub http_status: Option<u16>,
}

/// What a session lends its servers: the editor they elicit through (set when the session
/// opens, replaced when another connection opens it) and the sampler that answers their
/// sampling requests. Until then, elicitations are declined and sampling refused.
#[derive(Clone, Default)]
pub(crate) struct EditorSlot {
    editor: Arc<Mutex<Option<Arc<dyn EditorIo>>>>,
    sampler: sampling::SamplerSlot,
}

impl EditorSlot {
    fn set(&self, editor: Arc<dyn EditorIo>) {
        *self.editor.lock().unwrap_or_else(PoisonError::into_inner) = Some(editor);
    }

    pub(crate) fn get(&self) -> Option<Arc<dyn EditorIo>> {
        self.editor.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// A server a plugin declares, as a session's hub takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginEntry {
    /// Start it like an editor's server.
    Start(ServerSpec),
    /// List it [`ServerState::Disabled`] without starting it: its plugin turned it off.
    Disabled(ServerSpec),
    /// Report it failed without starting it: its plugin did not load, or its definition
    /// reaches into Heron's home.
    Failed {
        /// The name it is reported under.
        name: String,
        /// Why.
        reason: String,
    },
}

/// The MCP servers of one session: the editor's, fixed when the session opens, and the
/// plugins', replaced whole by a reload.
pub struct McpHub {
    servers: Vec<Arc<server::Server>>,
    plugin_servers: Mutex<Vec<Arc<server::Server>>>,
    changed: watch::Sender<u64>,
    stopped: std::sync::atomic::AtomicBool,
    editor: EditorSlot,
    /// Where the editor's servers were started, and how confined, to start one again
    /// (`/mcp enable`); `None` when they may not be (`--safe-mode`).
    launch: Mutex<Option<(PathBuf, Arc<Policy>)>>,
    /// How long its servers are waited on.
    limits: McpLimits,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.statuses()).finish()
    }
}

impl McpHub {
    /// A hub with no servers.
    pub fn empty() -> Arc<McpHub> {
        Arc::new(McpHub {
            servers: Vec::new(),
            plugin_servers: Mutex::default(),
            changed: watch::Sender::new(0),
            stopped: Default::default(),
            editor: EditorSlot::default(),
            launch: Mutex::default(),
            limits: McpLimits::default(),
        })
    }

    /// Starts every server in the background, in `cwd` and confined by `sandbox`; returns
    /// at once. Needs a tokio runtime when there are servers.
    pub fn start(specs: Vec<ServerSpec>, cwd: PathBuf, sandbox: Arc<Policy>) -> Arc<McpHub> {
        Self::start_within(specs, cwd, sandbox, McpLimits::default())
    }

    /// [`McpHub::start`], waiting on the servers as long as `limits` says.
    pub fn start_within(
        specs: Vec<ServerSpec>,
        cwd: PathBuf,
        sandbox: Arc<Policy>,
        limits: McpLimits,
    ) -> Arc<McpHub> {
        let changed = watch::Sender::new(0);
        let editor = EditorSlot::default();
        let servers: Vec<Arc<server::Server>> = unique_names(specs)
            .into_iter()
            .map(|spec| Arc::new(server::Server::new(spec, editor.clone(), limits)))
            .collect();
        for server in &servers {
            connect(server, &cwd, &sandbox, &changed);
        }
        Arc::new(McpHub {
            servers,
            plugin_servers: Mutex::default(),
            changed,
            stopped: Default::default(),
            editor,
            launch: Mutex::new(Some((cwd, sandbox))),
            limits,
        })
    }

    /// The servers of `specs`, none started: each is reported [`ServerState::Disabled`].
    pub fn disabled(specs: Vec<ServerSpec>) -> Arc<McpHub> {
        let editor = EditorSlot::default();
        let servers = unique_names(specs)
            .into_iter()
            .map(|spec| {
                let state = ServerState::Disabled;
                Arc::new(server::Server::with_state(spec, editor.clone(), state, McpLimits::default()))
            })
            .collect();
        Arc::new(McpHub {
            servers,
            plugin_servers: Mutex::default(),
            changed: watch::Sender::new(0),
            stopped: Default::default(),
            editor,
            launch: Mutex::default(),
            limits: McpLimits::default(),
        })
    }

    /// Replaces the plugins' servers with `entries`: the old ones stop (in the background),
    /// the new ones start in `cwd`, confined by `sandbox`, named apart from every other
    /// server of the session. Needs a tokio runtime when there are servers.
    pub fn replace_plugin_servers(&self, entries: Vec<PluginEntry>, cwd: PathBuf, sandbox: Arc<Policy>) {
        if self.is_stopped() {
            return;
        }
        let mut taken: std::collections::HashSet<String> =
            self.servers.iter().map(|s| s.name().to_owned()).collect();
        let fresh: Vec<Arc<server::Server>> = entries
            .into_iter()
            .map(|entry| match entry {
                PluginEntry::Start(mut spec) => {
                    spec.name = unique_name(&spec.name, &mut taken);
                    let server = Arc::new(server::Server::new(spec, self.editor.clone(), self.limits));
                    connect(&server, &cwd, &sandbox, &self.changed);
                    server
                }
                PluginEntry::Disabled(mut spec) => {
                    spec.name = unique_name(&spec.name, &mut taken);
                    let state = ServerState::Disabled;
                    Arc::new(server::Server::with_state(spec, self.editor.clone(), state, self.limits))
                }
                PluginEntry::Failed { name, reason } => {
                    let spec = ServerSpec {
                        name: unique_name(&name, &mut taken),
                        transport: TransportSpec::Stdio {
                            command: PathBuf::new(),
                            args: Vec::new(),
                            env: Vec::new(),
                        },
                    };
                    let state = ServerState::Failed(reason);
                    Arc::new(server::Server::with_state(spec, self.editor.clone(), state, self.limits))
                }
            })
            .collect();
        let old = std::mem::replace(
            &mut *self.plugin_servers.lock().unwrap_or_else(PoisonError::into_inner),
            fresh,
        );
        if !old.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                for server in old {
                    server.stop().await;
                }
            });
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// Every server, the editor's first.
    fn all(&self) -> Vec<Arc<server::Server>> {
        let plugins = self.plugin_servers.lock().unwrap_or_else(PoisonError::into_inner);
        self.servers.iter().chain(plugins.iter()).cloned().collect()
    }

    /// Sends the servers' elicitations to `editor` from now on.
    pub fn attach(&self, editor: Arc<dyn EditorIo>) {
        self.editor.set(editor);
    }

    /// Answers the servers' sampling requests with `sampler` from now on.
    pub fn attach_sampler(&self, sampler: Arc<dyn sampling::Sampler>) {
        self.editor.sampler.set(sampler);
    }

    /// Turns server `name` off (it stops, its tools and prompts go) or on again (it starts
    /// as it did when the session opened). An `Err` says why not, for the user.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), String> {
        let server = self.all().into_iter().find(|s| s.name() == name).ok_or_else(|| {
            let names: Vec<String> = self.all().iter().map(|s| s.name().to_owned()).collect();
            format!("There is no MCP server `{name}`; the session has: {}.", names.join(", "))
        })?;
        if !enabled {
            server.disable().await;
            self.changed.send_modify(|n| *n += 1);
            return Ok(());
        }
        let launch = self.launch.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((cwd, sandbox)) = launch.filter(|_| !self.is_stopped()) else {
            return Err("MCP servers cannot be started in this session (safe mode, or it is closing).".into());
        };
        if !server.restart() {
            return Err(format!("MCP server `{name}` is already running or starting."));
        }
        connect(&server, &cwd, &sandbox, &self.changed);
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Every server's state, in the order given.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.all().iter().map(|s| s.status()).collect()
    }

    /// What the servers logged at warning or above since the last call, for the user.
    pub fn take_said(&self) -> Vec<ServerSaid> {
        self.all().iter().flat_map(|server| server.said().take()).collect()
    }

    /// For each server whose tools are not offered, the prefix its tools' names would have
    /// and what the model is told when it calls one: that the server failed (and why), is
    /// still starting or is disabled, rather than that no such tool exists.
    pub fn unavailable(&self) -> Vec<(String, String)> {
        self.statuses()
            .into_iter()
            .filter_map(|status| {
                let why = match &status.state {
                    ServerState::Ready => return None,
                    ServerState::Connecting => format!("the MCP server `{}` is still starting", status.name),
                    ServerState::Disabled => format!("the MCP server `{}` is disabled", status.name),
                    ServerState::Failed(reason) => {
                        format!("the MCP server `{}` is not running: {reason}", status.name)
                    }
                };
                Some((tool::model_prefix(&status.name), format!("{why}. Its tools cannot be called now.")))
            })
            .collect()
    }

    /// Whether the hub has no servers.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
            && self.plugin_servers.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    /// A receiver that changes whenever a server's state does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Waits until no server is still starting (each gives up after [`McpLimits::startup`]).
    pub async fn started(&self) {
        let mut changes = self.subscribe();
        while self.all().iter().any(|s| s.status().state == ServerState::Connecting) {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The prompts of the servers that are ready, each a slash command.
    pub fn prompts(&self) -> Vec<McpPrompt> {
        self.all()
            .iter()
            .filter(|s| s.status().state == ServerState::Ready)
            .flat_map(|s| s.offers().prompts())
            .collect()
    }

    /// The text prompt `name` of `server` expands to with `arguments`.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, String> {
        let server = self
            .all()
            .into_iter()
            .find(|s| s.name() == server)
            .ok_or_else(|| format!("there is no MCP server `{server}`"))?;
        server.offers().get_prompt(name, arguments).await
    }

    /// The tools of the servers that are ready, and `read_mcp_resource` when any of them
    /// lists resources.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let servers = self.all();
        let mut tools: Vec<Arc<dyn Tool>> = servers.iter().flat_map(|s| s.tools()).collect();
        let shelf = servers
            .iter()
            .filter(|s| s.status().state == ServerState::Ready)
            .map(|s| (s.name().to_owned(), s.offers().clone()))
            .collect();
        if let Some(read) = resource::ReadResource::over(shelf) {
            tools.push(Arc::new(read));
        }
        tools
    }

    /// Whether [`McpHub::shutdown`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops every server (its whole process group).
    pub async fn shutdown(&self) {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        for server in self.all() {
            server.stop().await;
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

/// Starts connecting `server` in the background; `changed` moves when it is done.
fn connect(
    server: &Arc<server::Server>,
    cwd: &std::path::Path,
    sandbox: &Arc<Policy>,
    changed: &watch::Sender<u64>,
) {
    let (server, cwd, changed, sandbox) =
        (server.clone(), cwd.to_path_buf(), changed.clone(), sandbox.clone());
    server.said().wake(changed.clone());
    server.offers().wake(changed.clone());
    tokio::spawn(async move {
        server.connect(&cwd, &sandbox).await;
        changed.send_modify(|n| *n += 1);
        watch_exit(Arc::downgrade(&server), changed).await;
    });
}

/// How often a ready server is looked at for having gone away.
const EXIT_CHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// Moves `changed` once a ready server goes away (its process exited, its connection
/// closed), so the session's watchers tell the user then, not at the next call. The MCP
/// library reports a closed transport only when asked; a look twice a second costs nothing.
/// Ends when the server is stopped, failed for another reason, or dropped with its hub.
async fn watch_exit(server: std::sync::Weak<server::Server>, changed: watch::Sender<u64>) {
    loop {
        tokio::time::sleep(EXIT_CHECK).await;
        let Some(server) = server.upgrade() else { return };
        match server.status().state {
            ServerState::Ready => continue,
            ServerState::Failed(_) if server.is_ready_but_gone() => {
                changed.send_modify(|n| *n += 1);
                return;
            }
            _ => return,
        }
    }
}

/// Names made unique (`name`, `name-2`, ...), so tool names never collide across servers.
fn unique_names(specs: Vec<ServerSpec>) -> Vec<ServerSpec> {
    let mut taken = std::collections::HashSet::new();
    specs
        .into_iter()
        .map(|mut spec| {
            spec.name = unique_name(&spec.name, &mut taken);
            spec
        })
        .collect()
}

/// `base`, or `base-2`, `base-3` ... whichever `taken` does not hold yet (and now does).
fn unique_name(base: &str, taken: &mut std::collections::HashSet<String>) -> String {
    let mut name = base.to_owned();
    let mut n = 1;
    while !taken.insert(name.clone()) {
        n += 1;
        name = format!("{base}-{n}");
    }
    name
}

/// The field of a stdio server's definition (`command`, `args[i]`) that names a path in
/// Heron's home, with that text: a server started there could read the user's keys. A
/// path is what starts with `/`, `./`, `../` or `~` (after `=`, for `--flag=/x`),
/// resolved against `cwd`.
pub fn reaches_home(
    command: &str,
    args: &[String],
    cwd: &std::path::Path,
    protected: &crate::tools::protected::Protected,
) -> Option<(String, String)> {
    let looks_like_path = |text: &str| {
        text.starts_with('/') || text.starts_with("./") || text.starts_with("../") || text.starts_with('~')
    };
    let named = std::iter::once(("command".to_owned(), command))
        .chain(args.iter().enumerate().map(|(at, arg)| (format!("args[{at}]"), arg.as_str())));
    for (field, text) in named {
        let candidate = text.rsplit_once('=').map_or(text, |(_, value)| value);
        if !looks_like_path(candidate) {
            continue;
        }
        let expanded = match (candidate.strip_prefix('~'), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => format!("{}{rest}", home.to_string_lossy()),
            _ => candidate.to_owned(),
        };
        if protected.is_home(&crate::paths::resolve_against(cwd, &expanded)) {
            return Some((field, text.to_owned()));
        }
    }
    None
}
