//! Heron's headless ACP client, a crate of its own so the binary is a thin shell over it.
//!
//! What `heron run "prompt"` does: a one-shot headless ACP client. It starts an agent
//! (Heron's own, whose executable the caller names, or any agent command) in a process
//! group of its own, initializes, opens a session (or continues one), sends one prompt,
//! renders the turn on the terminal (or as JSON lines), asks permission questions there,
//! answers the agent's file and terminal requests inside the session's directory, and
//! exits with a status that reflects the stop reason. The command line that fills in
//! [`Options`] is the binary's (`src/cli/run.rs`).
//!
//! Interrupts: the first Ctrl-C sends `session/cancel`, ends open questions `cancelled` and
//! waits up to two seconds for the turn to end; then the agent's group is ended (SIGTERM,
//! then SIGKILL) and the exit status is 130. A stdout whose reader went away (a closed
//! pipe) is taken as that first Ctrl-C. A second Ctrl-C stops at once, killing the
//! group; SIGTERM and SIGHUP stop at once too, giving the agent its SIGTERM first. No agent
//! process or terminal command outlives the run, whatever the way out.
//!
//! Parts: `agent` (the child process), `client` (what the agent may ask of us), `view` and
//! `screen` (what is shown), `ask` (permission questions), `files` and `terminals` (the
//! confined workspace), `group` and `lines` (process groups, bounded line splitting).

mod agent;
mod ask;
mod client;
mod files;
mod group;
mod lines;
mod screen;
mod shown;
mod terminals;
mod view;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use heron_core::config::{Config, DEMO_MODEL, Home, Keys};
use heron_core::sandbox::Policy;
use heron_core::tools::protected::Protected;
use heron_core::tools::roots::validate_cwd;
use heron_protocol::Agent as _;
use heron_protocol::runtime::AgentPeer;
use heron_protocol::serve::ClientService;
use heron_protocol::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities, InitializeRequest,
    InitializeResponse, LoadSessionRequest, NewSessionRequest, PromptRequest, ProtocolVersion,
    ResumeSessionRequest, RpcError, SessionId, StopReason, TextContent,
};
use heron_rpc::{Connection, ConnectionOptions, Peer};

use self::agent::{AgentCommand, Ending};
use self::client::{Parts, RunClient};
use self::screen::{Paint, Screen, Stream};

/// How permission questions are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approve {
    /// Ask: a line read from stdin, a terminal or a pipe (end of input: reject).
    Ask,
    /// Allow everything once.
    All,
    /// Reject everything.
    None,
}

/// Which agent a run drives.
#[derive(Debug, Clone)]
pub enum Agent {
    /// Heron's own: its executable (the caller's to find), started as `EXE acp --model
    /// MODEL`.
    Heron(PathBuf),
    /// Another agent: a shell command line (`sh -c`), e.g. "other-agent --acp".
    Shell(String),
}

/// What one run does: the binary's `heron run` arguments, with Heron's executable found.
#[derive(Debug, Clone)]
pub struct Options {
    /// What to ask the agent.
    pub prompt: String,
    /// The agent to drive.
    pub agent: Agent,
    /// The session's working directory (default: the current one); the agent's file and
    /// terminal requests are confined to it.
    pub cwd: Option<PathBuf>,
    /// Continue this stored session (`session/load`, else `session/resume`) instead of
    /// opening a new one.
    pub session: Option<String>,
    /// How permission questions are answered.
    pub approve: Approve,
    /// Print every session update and the result as JSON lines.
    pub json: bool,
    /// The model, for Heron's own agent (default: the configured one, else demo/demo).
    pub model: Option<String>,
}

/// Why `heron run` failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The command line, the cwd or HERON_HOME cannot be used.
    #[error("{0}")]
    Usage(String),
    /// The agent could not be started or talked to.
    #[error("{0}")]
    Agent(String),
    /// The agent answered with an error.
    #[error("the agent answered {}: {}{}", .0.code, .0.message, detail(.0))]
    Rpc(RpcError),
}

/// What an error's `data` says beyond its message, for a person: its `reason` or
/// `message` text when it has one (an agent's explanation, such as why a provider cannot
/// start), clipped and stripped of control characters, in parentheses. A one-word code
/// (`auth_required`) explains nothing and is left out.
fn detail(err: &RpcError) -> String {
    let Some(data) = &err.data else { return String::new() };
    let text = ["reason", "message", "details"]
        .iter()
        .filter_map(|key| data.get(*key).and_then(serde_json::Value::as_str))
        .find(|text| text.contains(' ') && *text != err.message);
    match text {
        Some(text) => {
            let clean: String = text.chars().filter(|c| !c.is_control()).take(500).collect();
            format!(" ({clean})")
        }
        None => String::new(),
    }
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

/// The longest message line taken from the agent, and how many of its requests may run at
/// once: together they bound what a flooding agent can make us hold (the params of the
/// requests running). Past the limit the agent's next message waits, so the limit sits
/// well above what an honest agent keeps waiting at once (every terminal's
/// `wait_for_exit`, a question), and Ctrl-C unblocks questions whatever the agent does.
const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;
const MAX_IN_FLIGHT: usize = 64;
/// How long an agent may take to answer `initialize`.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// After the first Ctrl-C, how long the turn may take to end `cancelled`.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

fn options() -> ConnectionOptions {
    // A turn can take long; the agent's own timeouts bound it, and Ctrl-C ends it.
    ConnectionOptions {
        call_timeout: None,
        max_line_bytes: MAX_LINE_BYTES,
        max_in_flight: MAX_IN_FLIGHT,
        ..ConnectionOptions::default()
    }
}

/// Ctrl-C, SIGTERM and SIGHUP, as the run sees them.
#[derive(Clone)]
struct Signals {
    /// The first Ctrl-C: cancel the turn.
    interrupt: CancellationToken,
    /// Stop now; how the agent is then ended.
    stop: CancellationToken,
    ending: Arc<Mutex<Ending>>,
}

impl Signals {
    /// Installs the handlers; from now on these signals no longer end the process by
    /// themselves.
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let signals = Signals {
            interrupt: CancellationToken::new(),
            stop: CancellationToken::new(),
            ending: Arc::new(Mutex::new(Ending::Promptly)),
        };
        let seen = signals.clone();
        tokio::spawn(async move {
            loop {
                let ending = tokio::select! {
                    _ = interrupt.recv() => {
                        if !seen.interrupt.is_cancelled() {
                            seen.interrupt.cancel();
                            continue;
                        }
                        Ending::AtOnce
                    }
                    _ = terminate.recv() => Ending::Promptly,
                    _ = hangup.recv() => Ending::Promptly,
                };
                *seen.ending.lock().unwrap_or_else(PoisonError::into_inner) = ending;
                seen.interrupt.cancel();
                seen.stop.cancel();
            }
        });
        Ok(signals)
    }

    fn ending(&self) -> Ending {
        *self.ending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the conversation ended.
enum Ended {
    /// The prompt was answered.
    Stopped(StopReason),
    /// Ctrl-C: the turn was cancelled (or did not end in time).
    Interrupted,
}

/// Runs `heron run` and says how it ended: the exit status, after any error and, once a
/// session was opened, how to continue it. That line comes on every way out (a failed
/// turn, an error from the agent, an interrupt), since those are when it is wanted most.
pub async fn run(args: Options) -> u8 {
    let screen = Screen::for_process(!args.json);
    let opened = Mutex::new(None);
    let outcome = run_on(args, &screen, &opened).await;
    screen.finish();
    if let Err(err) = &outcome {
        screen.line(Stream::Err, Paint::Plain, &format!("heron: {err}"));
    }
    if let Some(session) = opened.into_inner().unwrap_or_else(PoisonError::into_inner) {
        let hint = format!("heron: continue this session with --session {session}");
        screen.line(Stream::Err, Paint::Dim, &hint);
    }
    match outcome {
        Ok(stop) => exit_code(stop),
        Err(_) => 1,
    }
}

/// [`run`] up to its last words; `opened` gets the session's id once it is open.
async fn run_on(
    args: Options,
    screen: &Screen,
    opened: &Mutex<Option<String>>,
) -> Result<StopReason, RunError> {
    // First, so that a Ctrl-C while the agent starts is ours to handle.
    let signals = Signals::install().map_err(|e| RunError::Usage(format!("cannot handle signals: {e}")))?;
    let home = Home::from_env().map_err(|e| RunError::Usage(e.to_string()))?;
    let config = Config::load(&home).map_err(|e| RunError::Usage(e.to_string()))?;
    let keys = Keys::load(&home).map_err(|e| RunError::Usage(e.to_string()))?;
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir).map_err(|e| RunError::Usage(format!("--cwd: {e}")))?,
        None => std::env::current_dir().map_err(|e| RunError::Usage(format!("no current directory: {e}")))?,
    };
    let cwd = validate_cwd(&cwd.display().to_string(), &Protected::for_home(home.root()))
        .map_err(|(_, reason)| RunError::Usage(format!("--cwd: {reason}")))?;

    // Nobody reads the turn any more (`heron run ... | head -3`): stop it as a Ctrl-C does,
    // rather than let the agent go on changing files unseen.
    let out_closed = screen.out_closed();
    let interrupt = signals.interrupt.clone();
    tokio::spawn(async move {
        out_closed.cancelled().await;
        interrupt.cancel();
    });
    let workspace = files::Workspace::new(cwd.clone(), home.root());
    let sandbox = Arc::new(Policy::from_config(&config, &home, &keys, vec![cwd.clone()]));
    let secrets = Arc::new(keys.all().cloned().collect::<Vec<_>>());
    let terminals = Arc::new(terminals::Terminals::new(workspace.clone(), sandbox, secrets));
    let parts = Arc::new(Parts {
        view: view::View::new(screen.clone(), args.json, Arc::clone(&terminals)),
        asker: ask::Asker::new(args.approve),
        terminals,
        workspace,
        interrupted: signals.interrupt.clone(),
        session: Mutex::new(args.session.clone()),
    });
    let command = match &args.agent {
        Agent::Shell(line) => {
            if args.model.is_some() {
                screen.line(
                    Stream::Err,
                    Paint::Plain,
                    "heron: --model is for Heron's own agent; ignored with --agent",
                );
            }
            AgentCommand::Shell(line.clone())
        }
        Agent::Heron(exe) => AgentCommand::Heron {
            exe: exe.clone(),
            model: args
                .model
                .clone()
                .or(config.default_model.clone())
                .unwrap_or_else(|| DEMO_MODEL.to_owned()),
        },
    };

    let spawned = agent::spawn(&command, screen)?;
    let connection = Connection::new(spawned.stdout, spawned.stdin, options());
    let peer = connection.peer();
    let service = Arc::new(ClientService::new(RunClient(Arc::clone(&parts)), client::policy));
    let served = tokio::spawn(connection.serve(service));
    screen.spin();

    let outcome = tokio::select! {
        outcome = converse(&peer, &args, &cwd, &parts, &signals, opened) => outcome.map(Some),
        () = signals.stop.cancelled() => Ok(None),
    };
    screen.finish();
    let ending = match &outcome {
        Ok(Some(Ended::Stopped(_))) | Err(_) => Ending::Gently,
        Ok(Some(Ended::Interrupted)) => Ending::Promptly,
        Ok(None) => signals.ending(),
    };
    parts.terminals.kill_all();
    peer.close();
    if ending == Ending::Gently {
        let _ = tokio::time::timeout(Duration::from_secs(2), served).await;
    }
    spawned.process.stop(ending).await;
    screen.finish();
    match outcome {
        Ok(Some(Ended::Stopped(stop))) => Ok(stop),
        Ok(Some(Ended::Interrupted) | None) => Ok(StopReason::Cancelled),
        Err(err) => Err(err),
    }
}

/// Talks to the agent: initialize, open the session, prompt.
async fn converse(
    peer: &Peer,
    args: &Options,
    cwd: &std::path::Path,
    parts: &Parts,
    signals: &Signals,
    opened: &Mutex<Option<String>>,
) -> Result<Ended, RunError> {
    let agent = AgentPeer(peer.clone());
    let interrupted = &signals.interrupt;
    let init = tokio::select! {
        init = initialize(peer, INITIALIZE_TIMEOUT) => init?,
        () = interrupted.cancelled() => return Ok(Ended::Interrupted),
    };
    if init.protocol_version != ProtocolVersion(1) {
        return Err(RunError::Agent(format!(
            "the agent speaks ACP version {}; heron run speaks version 1",
            init.protocol_version.0
        )));
    }
    let session_id = tokio::select! {
        opened = open_session(&agent, args, cwd, &init, parts) => opened.map_err(|e| match e {
            RunError::Rpc(e) => closed_or(peer, e),
            other => other,
        })?,
        () = interrupted.cancelled() => return Ok(Ended::Interrupted),
    };
    *parts.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(session_id.0.clone());
    *opened.lock().unwrap_or_else(PoisonError::into_inner) = Some(session_id.0.clone());
    if args.session.is_some() {
        parts.view.new_turn(&args.prompt);
    }

    let screen = parts.view.screen();
    screen.set_busy(true);
    let prompt = agent.session_prompt(PromptRequest {
        meta: None,
        prompt: vec![ContentBlock::Text(TextContent {
            annotations: None,
            meta: None,
            text: args.prompt.clone(),
        })],
        session_id: session_id.clone(),
    });
    tokio::pin!(prompt);
    let (answer, ended) = tokio::select! {
        answer = &mut prompt => (answer, None),
        () = interrupted.cancelled() => {
            let why = if screen.out_closed().is_cancelled() {
                "heron: stdout was closed; cancelling the turn"
            } else {
                "heron: cancelling the turn (Ctrl-C again to stop at once)"
            };
            screen.line(Stream::Err, Paint::Plain, why);
            let _ = agent.session_cancel(CancelNotification { meta: None, session_id: session_id.clone() }).await;
            match tokio::time::timeout(CANCEL_GRACE, &mut prompt).await {
                Ok(answer) => (answer, Some(Ended::Interrupted)),
                Err(_) => {
                    screen.line(Stream::Err, Paint::Plain, "heron: the turn did not end in time; stopping the agent");
                    return Ok(Ended::Interrupted);
                }
            }
        }
    };
    screen.set_busy(false);
    let stop = answer.map_err(|e| closed_or(peer, e))?.stop_reason;
    if args.json {
        screen.line(Stream::Out, Paint::Plain, &json!({ "stopReason": stop }).to_string());
    } else {
        screen.line(Stream::Out, Paint::Dim, &format!("[{stop}]"));
    }
    Ok(ended.unwrap_or(Ended::Stopped(stop)))
}

/// Asks the agent to initialize, waiting at most `wait` for its answer: an agent that
/// never answers is an error (the run then stops it), not a run that hangs.
async fn initialize(peer: &Peer, wait: Duration) -> Result<InitializeResponse, RunError> {
    let agent = AgentPeer(peer.clone());
    tokio::time::timeout(wait, agent.initialize(initialize_request()))
        .await
        .map_err(|_| RunError::Agent(format!("the agent did not answer initialize within {wait:?}")))?
        .map_err(|e| closed_or(peer, e))
}

/// A failed call, said as the agent having gone when its output ended: that fails the
/// pending calls before the connection itself closes, so `is_closed` alone races it.
fn closed_or(peer: &Peer, err: RpcError) -> RunError {
    if peer.calls_closed() {
        RunError::Agent("the agent stopped before it answered".to_owned())
    } else {
        RunError::Rpc(err)
    }
}

fn initialize_request() -> InitializeRequest {
    InitializeRequest {
        client_capabilities: Some(ClientCapabilities {
            fs: Some(FileSystemCapabilities {
                meta: None,
                read_text_file: Some(true),
                write_text_file: Some(true),
            }),
            terminal: Some(true),
            // Its terminals confine what they run (`terminals`): Heron's agent sends its
            // commands as they are rather than through its launcher, which cannot nest in them.
            meta: Some(serde_json::Map::from_iter([(
                "heron".to_owned(),
                serde_json::json!({ "confinedTerminals": true }),
            )])),
            ..ClientCapabilities::default()
        }),
        client_info: Some(heron_protocol::Implementation {
            meta: None,
            name: "heron-run".into(),
            title: None,
            version: env!("CARGO_PKG_VERSION").into(),
        }),
        meta: None,
        protocol_version: ProtocolVersion(1),
    }
}

/// Opens a new session, or continues `--session`: `session/load` when the agent can load
/// (it replays the conversation, so the earlier turns are shown), else `session/resume`.
async fn open_session(
    agent: &AgentPeer<Peer>,
    args: &Options,
    cwd: &std::path::Path,
    init: &InitializeResponse,
    parts: &Parts,
) -> Result<SessionId, RunError> {
    let cwd = cwd.display().to_string();
    let Some(id) = &args.session else {
        let request = NewSessionRequest {
            additional_directories: Vec::new(),
            cwd,
            mcp_servers: Vec::new(),
            meta: None,
        };
        return Ok(agent.session_new(request).await?.session_id);
    };
    let capabilities = init.agent_capabilities.clone().unwrap_or_default();
    let session_id = SessionId(id.clone());
    let screen = parts.view.screen();
    if capabilities.load_session == Some(true) {
        screen.line(Stream::Err, Paint::Dim, &format!("heron: loading session {id}"));
        let request = LoadSessionRequest {
            additional_directories: Vec::new(),
            cwd,
            mcp_servers: Vec::new(),
            meta: None,
            session_id: session_id.clone(),
        };
        agent.session_load(request).await?;
    } else if capabilities.session_capabilities.and_then(|s| s.resume).is_some() {
        screen.line(Stream::Err, Paint::Dim, &format!("heron: resuming session {id}"));
        let request = ResumeSessionRequest {
            additional_directories: Vec::new(),
            cwd,
            mcp_servers: Vec::new(),
            meta: None,
            session_id: session_id.clone(),
        };
        agent.session_resume(request).await?;
    } else {
        return Err(RunError::Agent(
            "the agent can neither load nor resume sessions, so --session cannot work".into(),
        ));
    }
    Ok(session_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_rpc::{Dispatcher, NotificationFuture, Policy, ResponseFuture};
    use serde_json::value::RawValue;
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// The client side serves nothing in these tests.
    struct Nothing;

    impl Dispatcher for Nothing {
        fn dispatch_request(
            &self,
            method: &str,
            _: Option<&RawValue>,
        ) -> Result<(Policy, ResponseFuture), RpcError> {
            Err(RpcError::method_not_found(method))
        }

        fn dispatch_notification(
            &self,
            _: &str,
            _: Option<&RawValue>,
        ) -> Option<(Policy, NotificationFuture)> {
            None
        }
    }

    #[tokio::test]
    async fn an_agent_that_never_answers_initialize_is_an_error_at_the_wait() {
        // The production wait, pinned; the test crosses a short one on the same path.
        assert_eq!(INITIALIZE_TIMEOUT, Duration::from_secs(60));
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (reader, writer) = tokio::io::split(ours);
        let connection = Connection::new(reader, writer, options());
        let peer = connection.peer();
        let served = tokio::spawn(connection.serve(Arc::new(Nothing)));
        // The agent reads the request and never answers it.
        let mut agent = BufReader::new(theirs);
        let asked = tokio::spawn(async move {
            let mut line = String::new();
            agent.read_line(&mut line).await.map(|_| (line, agent))
        });
        let wait = Duration::from_millis(50);
        // Bounded here too, so that a wait that never ends fails the test instead of hanging it.
        let outcome = tokio::time::timeout(Duration::from_secs(10), initialize(&peer, wait))
            .await
            .expect("initialize gave up within its wait");
        let Err(RunError::Agent(message)) = outcome else { panic!("not an error of the agent: {outcome:?}") };
        assert_eq!(message, format!("the agent did not answer initialize within {wait:?}"));
        let (line, _agent) = asked.await.expect("the agent's task").expect("the agent reads");
        assert!(line.contains("\"method\":\"initialize\""), "{line}");
        peer.close();
        let _ = served.await;
    }
}
