//! One MCP server: reaching it, what it offers, and stopping it. A stdio server's stderr
//! goes to the log, and its last lines (read within a budget: `stderr`) explain a failure
//! to start; an http or sse server's failure is told by `remote`, without secrets. A URL
//! that refuses connections is tried again until the startup timeout: editors often start
//! a local server and Heron together.

mod stderr;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::time::{Duration, Instant};

use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

use super::client::Client;
use super::remote::{self, RemoteFailure};
use super::tool::{Link, McpTool};
use super::{EditorSlot, McpLimits, ServerSpec, ServerState, ServerStatus, TransportSpec};
use crate::sandbox::{self, Policy};
use crate::tools::Tool;
use crate::tools::local_process::ProcessGroup;

/// The longest failure report kept (and shown as `mcpStatus.error`), in bytes: the reason
/// and as much of the end of the server's stderr as fits.
const MAX_FAILURE: usize = 2048;

/// How long a failure report waits for the rest of the stderr of a server that exited.
const STDERR_SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// The first wait before another try at a URL that refused the connection; it doubles up
/// to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(100);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// A connection to a server, over whichever transport.
type Running = RunningService<RoleClient, Client>;

/// A server and what is known of it.
pub(super) struct Server {
    spec: ServerSpec,
    editor: EditorSlot,
    now: Mutex<Now>,
    running: tokio::sync::Mutex<Option<Running>>,
    stderr: Arc<Mutex<stderr::Tail>>,
    /// The server's process group: killed on stop, and when the server is dropped.
    group: Mutex<ProcessGroup>,
    /// Its running calls that asked for progress.
    progress: Arc<super::progress::Routes>,
    /// What it logged for the user to see.
    said: Arc<super::said::Said>,
    /// Its prompts and resources.
    offers: Arc<super::offers::Offers>,
    /// Its requests waiting on the user, bounded across reconnections.
    asking: Arc<tokio::sync::Semaphore>,
    /// How long it is waited on.
    limits: McpLimits,
}

struct Now {
    state: ServerState,
    tools: Vec<Arc<McpTool>>,
    http_status: Option<u16>,
    /// Whether the server was started in the OS sandbox (`sandbox_mcp = true`), so that a
    /// refusal at start names the sandbox and the setting.
    confined: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    pub(super) fn new(spec: ServerSpec, editor: EditorSlot, limits: McpLimits) -> Self {
        Self::with_state(spec, editor, ServerState::Connecting, limits)
    }

    /// A server that starts out in `state`: connecting, or one that is never started
    /// (disabled, or failed before it could be).
    pub(super) fn with_state(
        spec: ServerSpec,
        editor: EditorSlot,
        state: ServerState,
        limits: McpLimits,
    ) -> Self {
        let said = Arc::new(super::said::Said::new(&spec.name));
        let offers = Arc::new(super::offers::Offers::new(&spec.name));
        Self {
            spec,
            editor,
            now: Mutex::new(Now { state, tools: Vec::new(), http_status: None, confined: false }),
            running: tokio::sync::Mutex::new(None),
            stderr: Arc::default(),
            group: Mutex::new(ProcessGroup(None)),
            progress: Arc::default(),
            offers,
            said,
            asking: super::client::asking(),
            limits,
        }
    }

    /// What it logged for the user to see.
    pub(super) fn said(&self) -> &super::said::Said {
        &self.said
    }

    /// Its prompts and resources.
    pub(super) fn offers(&self) -> &Arc<super::offers::Offers> {
        &self.offers
    }

    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(super) fn status(&self) -> ServerStatus {
        let now = lock(&self.now);
        let ready = now.state == ServerState::Ready;
        // A server that exited after it started is no longer ready.
        let exited = ready && now.tools.first().is_some_and(|t| t.is_closed());
        ServerStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport.kind(),
            state: match (exited, &self.spec.transport) {
                (false, _) => now.state.clone(),
                (true, TransportSpec::Stdio { .. }) => ServerState::Failed("the server exited".into()),
                (true, _) => ServerState::Failed("the server closed the connection".into()),
            },
            tool_count: if ready && !exited { now.tools.len() } else { 0 },
            http_status: now.http_status,
        }
    }

    /// Whether the server was ready and has gone away since (see [`Server::status`]).
    pub(super) fn is_ready_but_gone(&self) -> bool {
        let now = lock(&self.now);
        now.state == ServerState::Ready && now.tools.first().is_some_and(|t| t.is_closed())
    }

    pub(super) fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let now = lock(&self.now);
        if now.state != ServerState::Ready {
            return Vec::new();
        }
        now.tools.iter().map(|t| t.clone() as Arc<dyn Tool>).collect()
    }

    fn fail(&self, reason: String) {
        let mut reason = failure_report(&reason, &lock(&self.stderr).lines());
        let mut now = lock(&self.now);
        if now.confined && looks_refused(&reason) {
            reason.push_str(SANDBOX_HINT);
        }
        tracing::warn!(server = %self.spec.name, %reason, "an MCP server could not start");
        now.state = ServerState::Failed(reason);
    }

    fn fail_remote(&self, failure: RemoteFailure) {
        tracing::warn!(server = %self.spec.name, reason = %failure.reason, "an MCP server could not be reached");
        let mut now = lock(&self.now);
        now.state = ServerState::Failed(failure.reason);
        now.http_status = failure.http_status;
    }

    /// Fails a server that stopped answering, once its stderr has ended (or a moment has
    /// passed), so the report has its last words.
    async fn fail_after(&self, reason: String, reader: Option<tokio::task::JoinHandle<()>>) {
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(STDERR_SETTLE, reader).await;
        }
        self.fail(reason);
    }

    /// Reaches the server (a stdio one started confined by `sandbox`) and lists its tools,
    /// or records why it could not.
    pub(super) async fn connect(&self, cwd: &Path, sandbox: &Arc<Policy>) {
        let started = match &self.spec.transport {
            TransportSpec::Stdio { .. } => match self.connect_stdio(cwd, sandbox).await {
                Some(client) => client,
                None => return,
            },
            TransportSpec::Http { url, headers } | TransportSpec::Sse { url, headers } => {
                let sse = matches!(self.spec.transport, TransportSpec::Sse { .. });
                let roots = Arc::new(sandbox.roots.clone());
                let startup = self.limits.startup;
                match tokio::time::timeout(startup, self.connect_remote(url, headers, sse, roots)).await {
                    Ok(Ok(client)) => client,
                    Ok(Err(failure)) => return self.fail_remote(failure),
                    Err(_) => {
                        let reason = format!("it did not answer within {}", shown(startup));
                        return self.fail_remote(RemoteFailure::new(reason));
                    }
                }
            }
        };
        self.adopt(started).await;
    }

    /// Starts a stdio server, initializes it and lists its tools; `None` once it failed.
    async fn connect_stdio(
        &self,
        cwd: &Path,
        sandbox: &Arc<Policy>,
    ) -> Option<(Running, Vec<rmcp::model::Tool>)> {
        let TransportSpec::Stdio { command, args, env } = &self.spec.transport else { return None };
        let mut process = tokio::process::Command::new(command);
        process.args(args).envs(env.iter().map(|(k, v)| (k, v))).current_dir(cwd);
        lock(&self.now).confined = sandbox.enabled;
        if let Err(error) = sandbox::confine(&mut process, sandbox).await {
            self.fail(format!("it was not started: {error}"));
            return None;
        }
        // The command (and with it the sandbox's ruleset descriptor) is dropped by the spawn.
        let mut wrapped = process_wrap::tokio::CommandWrap::from(process);
        // Its own group, so stopping it also stops what it spawned (npx, uvx ...).
        #[cfg(unix)]
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        let (transport, stderr) = match TokioChildProcess::builder(wrapped).stderr(Stdio::piped()).spawn() {
            Ok(spawned) => spawned,
            Err(error) => {
                self.fail(format!("cannot start `{}`: {error}", command.display()));
                return None;
            }
        };
        // The leader's id is the group's; what it spawned stays in the group after it exits.
        #[cfg(unix)]
        {
            lock(&self.group).0 = transport.id().and_then(|id| i32::try_from(id).ok());
        }
        let reader = stderr
            .map(|stderr| tokio::spawn(stderr::read(stderr, self.spec.name.clone(), self.stderr.clone())));
        let client = Client {
            server: self.spec.name.clone(),
            editor: self.editor.clone(),
            roots: Arc::new(roots_of(&sandbox.roots, args)),
            progress: self.progress.clone(),
            said: self.said.clone(),
            offers: self.offers.clone(),
            asking: self.asking.clone(),
        };
        let close = self.limits.close;
        let started = tokio::time::timeout(self.limits.startup, async {
            let client = client.serve(transport).await.map_err(|e| format!("it did not initialize: {e}"))?;
            list_tools(client, close).await
        })
        .await;
        match started {
            Ok(Ok(started)) => Some(started),
            Ok(Err(reason)) => {
                self.fail_after(reason, reader).await;
                None
            }
            Err(_) => {
                self.fail(format!("it did not start within {}", shown(self.limits.startup)));
                None
            }
        }
    }

    /// Connects to a URL (streamable HTTP, or legacy SSE when `sse`), initializes and lists
    /// the tools; a refused connection is tried again, with backoff, until the caller's
    /// deadline.
    async fn connect_remote(
        &self,
        url: &str,
        headers: &[(String, String)],
        sse: bool,
        roots: Arc<Vec<std::path::PathBuf>>,
    ) -> Result<(Running, Vec<rmcp::model::Tool>), RemoteFailure> {
        let parsed = remote::parse_url(url).map_err(|e| RemoteFailure::new(format!("the URL {e}")))?;
        let header_map = remote::header_map(headers).map_err(RemoteFailure::new)?;
        let http = remote::client(self.limits.connect)?;
        let began = Instant::now();
        let mut wait = FIRST_RETRY_WAIT;
        loop {
            let client = Client {
                server: self.spec.name.clone(),
                editor: self.editor.clone(),
                roots: roots.clone(),
                progress: self.progress.clone(),
                said: self.said.clone(),
                offers: self.offers.clone(),
                asking: self.asking.clone(),
            };
            let attempt = if sse {
                match super::sse::connect(http.clone(), parsed.clone(), header_map.clone(), self.limits.post)
                    .await
                {
                    Ok(transport) => {
                        client.serve(transport).await.map_err(|e| remote::failure_of(&e, url, headers))
                    }
                    Err((error, refused)) => {
                        let mut failure = remote::failure_of(&error, url, headers);
                        failure.refused = refused;
                        Err(failure)
                    }
                }
            } else {
                let config = StreamableHttpClientTransportConfig::with_uri(parsed.as_str())
                    .custom_headers(
                        header_map.clone().into_iter().filter_map(|(k, v)| Some((k?, v))).collect(),
                    )
                    .max_json_response_size(super::MAX_MESSAGE)
                    .max_sse_event_size(super::MAX_MESSAGE)
                    .max_error_response_size(super::MAX_ERROR_BODY);
                let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
                client.serve(transport).await.map_err(|e| remote::failure_of(&e, url, headers))
            };
            match attempt {
                Ok(client) => return list_tools(client, self.limits.close).await.map_err(RemoteFailure::new),
                Err(failure) if failure.refused && began.elapsed() + wait < self.limits.startup => {
                    tracing::debug!(server = %self.spec.name, "the MCP server refused the connection; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_RETRY_WAIT);
                }
                Err(failure) => return Err(failure),
            }
        }
    }

    /// Offers the tools of a connected server, unless it was stopped meanwhile.
    async fn adopt(&self, (client, listed): (Running, Vec<rmcp::model::Tool>)) {
        let mut taken = std::collections::HashSet::new();
        let tools: Vec<Arc<McpTool>> = listed
            .into_iter()
            .filter(|tool| {
                let size = serde_json::to_vec(&tool.input_schema).map_or(usize::MAX, |json| json.len());
                let fits = size <= super::tool::MAX_SCHEMA;
                if !fits {
                    tracing::warn!(server = %self.spec.name, tool = %tool.name, size, "an MCP tool's input schema is too large to offer");
                }
                fits
            })
            .map(|tool| {
                let peer = client.peer().clone();
                let link = Link { peer, progress: self.progress.clone(), editor: self.editor.clone() };
                Arc::new(McpTool::new(&self.spec.name, tool, link, &mut taken))
            })
            .collect();
        // Its prompts and resources are listed before it is ready, so the first turn that
        // sees its tools sees `read_mcp_resource` and its commands too.
        if tokio::time::timeout(self.limits.offers, self.offers.adopt(client.peer().clone())).await.is_err() {
            tracing::warn!(server = %self.spec.name, "an MCP server did not list its prompts and resources in time");
        }
        // `running` orders this against `stop`: a stop that came first wins.
        let mut running = self.running.lock().await;
        let stopped = {
            let mut now = lock(&self.now);
            let stopped = now.state != ServerState::Connecting;
            if !stopped {
                tracing::info!(server = %self.spec.name, tools = tools.len(), "an MCP server is ready");
                (now.state, now.tools, now.http_status) = (ServerState::Ready, tools, None);
            }
            stopped
        };
        if stopped {
            drop(running);
            self.offers.clear();
            closed(client, self.limits.close).await;
        } else {
            *running = Some(client);
        }
    }

    /// Stops the server: the MCP connection, then its process group (when the transport
    /// is dropped).
    pub(super) async fn stop(&self) {
        self.halt(ServerState::Failed("stopped with its session".into())).await;
    }

    /// Stops the server for the rest of the session, or until [`Server::restart`]: at once
    /// as far as the session is concerned; the connection closes and the process group is
    /// killed in the background (a server may take seconds to exit on its own).
    pub(super) async fn disable(&self) {
        let client = {
            let mut running = self.running.lock().await;
            let mut now = lock(&self.now);
            (now.state, now.tools, now.http_status) = (ServerState::Disabled, Vec::new(), None);
            running.take()
        };
        self.offers.clear();
        let mut group = ProcessGroup(lock(&self.group).0.take());
        let close = self.limits.close;
        tokio::spawn(async move {
            if let Some(client) = client {
                closed(client, close).await;
            }
            group.kill();
        });
    }

    /// Marks a stopped (disabled or failed) server as connecting again; false when it is
    /// running or starting already. The caller connects it.
    pub(super) fn restart(&self) -> bool {
        let mut now = lock(&self.now);
        if matches!(now.state, ServerState::Ready | ServerState::Connecting) {
            return false;
        }
        (now.state, now.tools, now.http_status) = (ServerState::Connecting, Vec::new(), None);
        true
    }

    /// Stops the server and leaves it in `state`.
    async fn halt(&self, state: ServerState) {
        let client = {
            let mut running = self.running.lock().await;
            let mut now = lock(&self.now);
            now.state = state;
            (now.tools, now.http_status) = (Vec::new(), None);
            drop(now);
            running.take()
        };
        self.offers.clear();
        if let Some(client) = client {
            closed(client, self.limits.close).await;
        }
        lock(&self.group).kill();
    }
}

/// How long a ready server may take to list its prompts and resources; past it, it is
/// ready with what it listed ([`McpLimits::offers`]).
pub(super) const OFFERS_WAIT: Duration = Duration::from_secs(10);

/// How long closing a connection may take before its process group is killed anyway: a
/// server that never lets go must not hold a session's close, or Heron's exit, past the
/// 2 s it is given ([`McpLimits::close`]).
pub(super) const CLOSE_WAIT: Duration = Duration::from_millis(1500);

/// Closes `client`'s connection, within `wait`.
async fn closed(client: Running, wait: Duration) {
    let _ = tokio::time::timeout(wait, client.cancel()).await;
}

/// A wait as a failure names it: in seconds, or milliseconds when it is not whole ones.
fn shown(wait: Duration) -> String {
    if wait.subsec_millis() == 0 {
        format!("{} s", wait.as_secs())
    } else {
        format!("{} ms", wait.as_millis())
    }
}

/// The tools of a connected server, bounded like its other lists (pages and count), each
/// as rmcp reads it (one it cannot read is left out, and said in the log); the connection
/// is closed when the server cannot list them.
async fn list_tools(client: Running, close: Duration) -> Result<(Running, Vec<rmcp::model::Tool>), String> {
    let peer = client.peer().clone();
    let listed = super::offers::pages(
        |cursor| {
            let peer = peer.clone();
            async move { peer.list_tools(cursor).await.map(|r| serde_json::to_value(r).unwrap_or_default()) }
        },
        "tools",
    )
    .await;
    match listed {
        Ok(listed) => {
            let count = listed.len();
            let tools: Vec<rmcp::model::Tool> =
                listed.into_iter().filter_map(|tool| serde_json::from_value(tool).ok()).collect();
            if tools.len() < count {
                tracing::warn!(
                    listed = count,
                    read = tools.len(),
                    "an MCP server listed tools that cannot be read"
                );
            }
            Ok((client, tools))
        }
        Err(e) => {
            closed(client, close).await;
            Err(format!("it did not list its tools: {e}"))
        }
    }
}

/// The roots a stdio server is given: the session's folders, then the folders its own
/// command line names (absolute paths of existing folders). A server that serves its
/// client's roots replaces the folders it was started with by them (server-filesystem
/// does), so leaving those out would take away what the user configured it for.
fn roots_of(session: &[std::path::PathBuf], args: &[String]) -> Vec<std::path::PathBuf> {
    let mut roots = session.to_vec();
    for arg in args {
        let path = std::path::Path::new(arg);
        if path.is_absolute() && path.is_dir() && !roots.iter().any(|root| root == path) {
            roots.push(path.to_path_buf());
        }
    }
    roots
}

/// What a failed start of a confined server adds when it looks like the sandbox refused it:
/// the user reads it in the status and the model in its tool list, and both learn the way
/// out, instead of a program's own advice (npm's `sudo chown`) that cannot help.
const SANDBOX_HINT: &str = " (this server runs in Heron's OS sandbox because `sandbox_mcp = true` in \
config.toml: it may write only the session's folders and the `sandbox_writable` caches; set \
`sandbox_mcp = false` to run it as you, as by default)";

/// Whether a failure reads like a refused file or system call (EACCES, EPERM, EROFS), the
/// way the sandbox refuses.
fn looks_refused(report: &str) -> bool {
    let report = report.to_ascii_lowercase();
    ["eacces", "eperm", "erofs", "permission denied", "operation not permitted", "read-only file system"]
        .iter()
        .any(|sign| report.contains(sign))
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

    #[test]
    fn refusals_read_as_the_sandbox_s_and_other_failures_do_not() {
        assert!(looks_refused("npm ERR! code EACCES"));
        assert!(looks_refused("OSError: [Errno 30] Read-only file system: '/x'"));
        assert!(looks_refused("error: failed to create directory: Permission denied (os error 13)"));
        assert!(!looks_refused("it did not initialize: connection closed"));
        assert!(!looks_refused("cannot start `nope`: No such file or directory (os error 2)"));
    }
}
