//! `heron run "prompt"`: a one-shot headless ACP client. It drives Heron's own agent (in
//! process) or any agent command, renders the turn on the terminal (or as JSON lines), asks
//! permission questions there, and exits with a status that reflects the stop reason.

use std::future::{Future, ready};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use clap::{Args, ValueEnum};
use serde_json::json;

use heron_protocol::runtime::AgentPeer;
use heron_protocol::serve::ClientService;
use heron_protocol::{
    Agent, Client, ClientCapabilities, ContentBlock, InitializeRequest, Method, NewSessionRequest,
    PermissionOptionKind, PromptRequest, ProtocolVersion, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, RpcError, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCallContent,
};
use heron_rpc::Policy;
use heron_rpc::{Connection, ConnectionOptions, Peer};

/// How permission questions are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Approve {
    /// Ask on the terminal (no terminal: reject).
    Ask,
    /// Allow everything once.
    All,
    /// Reject everything.
    None,
}

/// Options of `heron run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// What to ask the agent.
    pub prompt: String,
    /// An agent command to drive instead of Heron itself, e.g. "other-agent --acp".
    #[arg(long, value_name = "CMD")]
    pub agent: Option<String>,
    /// The session's working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// How permission questions are answered.
    #[arg(long, value_enum, default_value_t = Approve::Ask)]
    pub approve: Approve,
    /// Print every session update and the result as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// The model, for Heron's own agent (default: the configured one, else demo/demo).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
}

/// Renders what the agent sends and answers its questions.
#[derive(Clone)]
struct Terminal {
    json: bool,
    approve: Approve,
    /// The tool call titles seen, for permission questions.
    titles: Arc<Mutex<std::collections::HashMap<String, String>>>,
    /// Whether the last text printed was a message chunk (to end the line before others).
    in_message: Arc<Mutex<bool>>,
}

impl Terminal {
    fn out(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    fn line(&self, text: &str) {
        let mut in_message = self.in_message.lock().unwrap_or_else(PoisonError::into_inner);
        if *in_message {
            self.out("\n");
            *in_message = false;
        }
        self.out(&format!("{text}\n"));
    }

    fn render(&self, update: SessionUpdate) {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    *self.in_message.lock().unwrap_or_else(PoisonError::into_inner) = true;
                    self.out(&text.text);
                }
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    eprint!("{}", text.text);
                }
            }
            SessionUpdate::ToolCall(call) => {
                self.titles
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(call.tool_call_id.0.clone(), call.title.clone());
                self.line(&format!("» {}", call.title));
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let status = update.status.map(|s| format!("{s:?}").to_lowercase());
                for content in update.content.unwrap_or_default() {
                    match content {
                        ToolCallContent::Diff(diff) => self.line(&render_diff(
                            &diff.path,
                            diff.old_text.as_deref().unwrap_or(""),
                            &diff.new_text,
                        )),
                        ToolCallContent::Content(c) => {
                            if let ContentBlock::Text(text) = c.content {
                                let shown: String =
                                    text.text.lines().take(12).collect::<Vec<_>>().join("\n  ");
                                self.line(&format!("  {shown}"));
                            }
                        }
                        ToolCallContent::Terminal(t) => {
                            self.line(&format!("  (terminal {})", t.terminal_id.0))
                        }
                    }
                }
                if let Some(status) = status.filter(|s| s == "completed" || s == "failed") {
                    self.line(&format!("  [{status}]"));
                }
            }
            SessionUpdate::Plan(plan) => {
                self.line("Plan:");
                for entry in plan.entries {
                    self.line(&format!("  - [{:?}] {}", entry.status, entry.content));
                }
            }
            SessionUpdate::UsageUpdate(usage) => {
                let cost =
                    usage.cost.map(|c| format!(", {:.4} {}", c.amount, c.currency)).unwrap_or_default();
                eprintln!("\n[context {} / {} tokens{cost}]", usage.used, usage.size);
            }
            _ => {}
        }
    }

    fn decide(&self, request: &RequestPermissionRequest) -> Option<String> {
        let find = |kind: PermissionOptionKind| {
            request.options.iter().find(|o| o.kind == kind).map(|o| o.option_id.0.clone())
        };
        match self.approve {
            Approve::All => find(PermissionOptionKind::AllowOnce),
            Approve::None => find(PermissionOptionKind::RejectOnce),
            Approve::Ask => {
                let title = self
                    .titles
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&request.tool_call.tool_call_id.0)
                    .cloned()
                    .unwrap_or_else(|| request.tool_call.tool_call_id.0.clone());
                if !std::io::stdin().is_terminal() {
                    eprintln!("heron: not a terminal, so `{title}` is rejected (use --approve all)");
                    return find(PermissionOptionKind::RejectOnce);
                }
                eprint!("\nAllow {title}? [y]es / [n]o / [a]lways: ");
                let mut answer = String::new();
                let _ = std::io::stdin().read_line(&mut answer);
                match answer.trim() {
                    "y" | "yes" => find(PermissionOptionKind::AllowOnce),
                    "a" | "always" => find(PermissionOptionKind::AllowAlways),
                    _ => find(PermissionOptionKind::RejectOnce),
                }
            }
        }
    }
}

fn render_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let body = diff.unified_diff().context_radius(2).header(path, path).to_string();
    body.trim_end().to_owned()
}

impl Client for Terminal {
    fn session_update(
        &self,
        params: SessionNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        if self.json {
            self.out(&format!("{}\n", json!({ "update": params.update })));
        } else {
            self.render(params.update);
        }
        ready(Ok(()))
    }

    fn session_request_permission(
        &self,
        params: RequestPermissionRequest,
    ) -> impl Future<Output = Result<RequestPermissionResponse, RpcError>> + Send + 'static {
        let terminal = self.clone();
        async move {
            // Reading the terminal blocks: keep it off the async workers.
            let chosen = tokio::task::spawn_blocking(move || terminal.decide(&params)).await.ok().flatten();
            let outcome = match chosen {
                Some(option_id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome {
                    meta: None,
                    option_id: heron_protocol::PermissionOptionId(option_id),
                }),
                None => RequestPermissionOutcome::Cancelled,
            };
            Ok(RequestPermissionResponse { meta: None, outcome })
        }
    }
}

fn client_policy(method: Method) -> Policy {
    // Updates must render in arrival order; everything else may run alongside.
    if method == Method::SessionUpdate { Policy::Inline } else { Policy::Concurrent }
}

/// Why `heron run` failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The agent could not be started or talked to.
    #[error("{0}")]
    Agent(String),
    /// The agent answered with an error.
    #[error("the agent answered {}: {}", .0.code, .0.message)]
    Rpc(RpcError),
}

impl From<RpcError> for RunError {
    fn from(err: RpcError) -> Self {
        RunError::Rpc(err)
    }
}

/// The process exit status for a stop reason.
pub fn exit_code(stop: StopReason) -> u8 {
    match stop {
        StopReason::EndTurn => 0,
        StopReason::Cancelled => 130,
        StopReason::Refusal => 3,
        StopReason::MaxTokens | StopReason::MaxTurnRequests => 4,
    }
}

async fn drive(peer: Peer, args: &RunArgs, cwd: PathBuf) -> Result<StopReason, RunError> {
    let agent = AgentPeer(peer);
    agent
        .initialize(InitializeRequest {
            client_capabilities: Some(ClientCapabilities::default()),
            client_info: Some(heron_protocol::Implementation {
                meta: None,
                name: "heron-run".into(),
                title: None,
                version: env!("CARGO_PKG_VERSION").into(),
            }),
            meta: None,
            protocol_version: ProtocolVersion(1),
        })
        .await?;
    let session = agent
        .session_new(NewSessionRequest {
            additional_directories: Vec::new(),
            cwd: cwd.display().to_string(),
            mcp_servers: Vec::new(),
            meta: None,
        })
        .await?;
    let response = agent
        .session_prompt(PromptRequest {
            meta: None,
            prompt: vec![ContentBlock::Text(TextContent {
                annotations: None,
                meta: None,
                text: args.prompt.clone(),
            })],
            session_id: session.session_id,
        })
        .await?;
    if args.json {
        println!("{}", json!({ "stopReason": response.stop_reason }));
    } else {
        println!("\n[{}]", response.stop_reason);
    }
    Ok(response.stop_reason)
}

fn options() -> ConnectionOptions {
    // A turn can take long; its own timeouts bound it.
    ConnectionOptions { call_timeout: None, ..ConnectionOptions::default() }
}

/// Runs `heron run`.
pub async fn run(args: RunArgs) -> Result<StopReason, RunError> {
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir).map_err(|e| RunError::Agent(e.to_string()))?,
        None => std::env::current_dir().map_err(|e| RunError::Agent(e.to_string()))?,
    };
    let terminal = Terminal {
        json: args.json,
        approve: args.approve,
        titles: Arc::default(),
        in_message: Arc::default(),
    };
    let service = Arc::new(ClientService::new(terminal, client_policy));
    match &args.agent {
        Some(command) => {
            let mut child = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(command)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| RunError::Agent(format!("cannot start `{command}`: {e}")))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(RunError::Agent("the agent's stdio is not piped".into()));
            };
            let connection = Connection::new(stdout, stdin, options());
            let peer = connection.peer();
            let served = tokio::spawn(connection.serve(service));
            let outcome = drive(peer.clone(), &args, cwd).await;
            peer.close();
            let _ = served.await;
            let _ = child.kill().await;
            outcome
        }
        None => {
            let home = heron_core::config::Home::from_env().map_err(|e| RunError::Agent(e.to_string()))?;
            let config =
                heron_core::config::Config::load(&home).map_err(|e| RunError::Agent(e.to_string()))?;
            let model = args
                .model
                .clone()
                .or(config.default_model.clone())
                .unwrap_or_else(|| heron_core::config::DEMO_MODEL.to_owned());
            let agent_args = super::acp::AcpArgs { model: Some(model), ..super::acp::AcpArgs::default() };
            let (client_side, agent_side) = tokio::io::duplex(1 << 20);
            let (agent_read, agent_write) = tokio::io::split(agent_side);
            let (client_read, client_write) = tokio::io::split(client_side);
            let agent =
                tokio::spawn(
                    async move { super::acp::serve(agent_read, agent_write, &agent_args, &home).await },
                );
            let connection = Connection::new(client_read, client_write, options());
            let peer = connection.peer();
            let served = tokio::spawn(connection.serve(service));
            let outcome = drive(peer.clone(), &args, cwd).await;
            peer.close();
            let _ = served.await;
            agent.abort();
            outcome
        }
    }
}
