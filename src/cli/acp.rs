//! `heron acp`: serves the Agent Client Protocol over stdin/stdout until stdin ends, or
//! until SIGTERM, SIGINT or SIGHUP asks it to stop, which it does exactly as at the end of
//! input: it stops serving, answers what is in flight, cancels every turn and kills the
//! process groups of the commands and MCP servers its sessions started, then exits (within
//! two seconds). Without the handlers a signal would end the process on the spot and leave
//! those children running.

use std::future::Future;
use std::sync::Arc;

use clap::Args;

use crate::acp::negotiate::{Negotiated, NegotiatedValidator, Negotiation, Protocol};
use crate::acp::policy::agent_policy;
use crate::acp::v2::HeronAgentV2;
use crate::acp::{HeronAgent, ManagerSlot, Unusable};
use crate::conformance::record::{Recorder, Sender, Setup, TeeReader, TeeWriter};
use heron_core::config::{Config, Home, Keys};
use heron_core::extensions::Runtime;
use heron_core::llm::registry::Providers;
use heron_core::session::history_budget::{HistoryBudget, SESSION_HISTORY_BYTES};
use heron_core::session::settings::{Posture, Preset};
use heron_core::session::{Manager, ManagerOptions};
use heron_protocol::runtime::Side;
use heron_protocol::serve::AgentService;
use heron_protocol::validate::SchemaValidator;
use heron_rpc::{Connection, ConnectionOptions, DEFAULT_MAX_LINE, Validate};
use heron_store::Store;

/// Options of `heron acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// Check every incoming and outgoing message against the ACP schema.
    #[arg(long, env = "HERON_VALIDATE", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub validate: bool,

    /// The largest message line accepted, in bytes; longer lines are discarded with an error.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE, value_name = "BYTES")]
    pub max_line_bytes: usize,

    /// The most bytes of stored history one open session holds in memory (the process
    /// holds at most 1 GiB, or this if more); a session past it does not open, or starts
    /// no more turns, and its history stays stored.
    #[arg(long, default_value_t = SESSION_HISTORY_BYTES, value_name = "BYTES")]
    pub max_history_bytes: u64,

    /// The model new sessions use (`provider/model`); `demo/demo` needs no key.
    #[arg(short = 'm', long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,

    /// Text added to the end of the system prompt of every request.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// The most tokens one model reply may take (sent to the provider).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,

    /// The agent preset of new sessions: light, balanced or delivery.
    #[arg(long)]
    pub preset: Option<String>,

    /// Legacy name of --preset (Reasonix's): economy (light), balanced or delivery.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,

    /// The starting approval posture and its ceiling: read-only, dontAsk, manual (ask),
    /// auto, acceptEdits or bypassPermissions.
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,

    /// The working directory Heron starts in (sessions still use the cwd they are given).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<std::path::PathBuf>,

    /// The title of new sessions.
    #[arg(long)]
    pub title: Option<String>,

    /// Sessions work in their cwd only: `additionalDirectories` are not advertised, and a
    /// request that gives some is refused.
    #[arg(long)]
    pub cwd_only: bool,

    /// Start without extensions: no plugins, no user or project commands, and the MCP
    /// servers the editor gives are reported `disabled` instead of started (for a setup that
    /// misbehaves; `--permission-mode read-only` is the read-only start).
    #[arg(long)]
    pub safe_mode: bool,

    /// Run the interactive provider setup instead of serving (the terminal auth method).
    #[arg(long)]
    pub setup: bool,

    /// The ACP version served: v1 (the default), v2 (the draft protocol; a client asking
    /// for another version is refused), or auto (what the client's `initialize` asks for).
    #[arg(long, value_enum, default_value_t = Protocol::V1, value_name = "VERSION")]
    pub protocol: Protocol,

    /// Record the session into FILE as a conformance transcript, model turns and workspace
    /// files included; replay it with `heron conformance FILE`.
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
}

impl Default for AcpArgs {
    fn default() -> Self {
        Self {
            validate: false,
            max_line_bytes: DEFAULT_MAX_LINE,
            max_history_bytes: SESSION_HISTORY_BYTES,
            model: None,
            append_system_prompt: None,
            max_tokens: None,
            preset: None,
            profile: None,
            permission_mode: None,
            cwd: None,
            title: None,
            cwd_only: false,
            safe_mode: false,
            setup: false,
            protocol: Protocol::V1,
            record: None,
        }
    }
}

/// The posture `--permission-mode` names; `plan` is a mode, not a posture, and is refused.
/// The names are the ones other agents' command lines use.
fn permission_mode(flag: &str) -> Option<Posture> {
    match flag {
        "read-only" | "readOnly" => Some(Posture::ReadOnly),
        "dontAsk" | "dont-ask" => Some(Posture::DontAsk),
        "manual" | "ask" | "default" => Some(Posture::Ask),
        "auto" | "acceptEdits" => Some(Posture::Auto),
        "bypassPermissions" | "yolo" => Some(Posture::Yolo),
        _ => None,
    }
}

/// Checks the flags that need no I/O.
fn flags(args: &AcpArgs) -> Result<(Option<Posture>, Option<Preset>), AcpError> {
    let ceiling = match &args.permission_mode {
        None => None,
        Some(flag) => Some(permission_mode(flag).ok_or_else(|| {
            AcpError::Usage(format!(
                "--permission-mode {flag} is not one of read-only, dontAsk, manual, ask, auto, acceptEdits, \
                 bypassPermissions"
            ))
        })?),
    };
    // The error names the flag the user typed, with the names that flag takes.
    let named = match (&args.preset, &args.profile) {
        (Some(name), _) => Some(("--preset", name, "light, balanced, delivery")),
        (None, Some(name)) => Some(("--profile", name, "economy, balanced, delivery")),
        (None, None) => None,
    };
    let preset = match named {
        None => None,
        Some((flag, name, names)) => Some(
            crate::acp::preset(name)
                .ok_or_else(|| AcpError::Usage(format!("{flag} {name} is not one of {names}")))?,
        ),
    };
    Ok((ceiling, preset))
}

/// Builds the session manager from `HERON_HOME` and the flags; a recorder sees its model
/// requests and the files its tools use.
pub async fn manager(
    args: &AcpArgs,
    home: &Home,
    recorder: Option<Arc<Recorder>>,
) -> Result<Manager, AcpError> {
    let (ceiling, preset) = flags(args)?;
    let options = ManagerOptions {
        model: args.model.clone(),
        preset,
        ceiling,
        title: args.title.clone(),
        permission_timeout: None,
        start_posture: None,
        witness: recorder.clone().map(|r| r as Arc<dyn heron_core::tools::FileWitness>),
        append_system_prompt: args.append_system_prompt.clone(),
        max_tokens: args.max_tokens,
        history: HistoryBudget::for_session(args.max_history_bytes),
    };
    // Everything below reads files (the config, the keys, the store, the user's commands
    // and plugins) and may wait on a lock: it runs on one blocking thread, in order, so no
    // async worker waits on the disk.
    let transcripts = home.root().join("transcripts");
    let (home, safe_mode) = (home.clone(), args.safe_mode);
    let (store, runtime) = tokio::task::spawn_blocking(move || {
        let config = Arc::new(Config::load(&home)?);
        let keys = Arc::new(Keys::load(&home)?);
        let store = Store::open_blocking(&home.db_path()).map_err(AcpError::Store)?;
        let mut providers = Providers::new(home, config, keys);
        if let Some(recorder) = recorder {
            providers = providers.with_tap(recorder);
        }
        Ok::<_, AcpError>((store, Runtime::load(Arc::new(providers), safe_mode)))
    })
    .await
    .map_err(|e| AcpError::Io(std::io::Error::other(e)))??;
    Ok(Manager::new(store, runtime, Arc::new(heron_core::tools::builtin()), options, transcripts))
}

/// Why `heron acp` stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// A flag was wrong.
    #[error("{0}")]
    Usage(String),
    /// `HERON_HOME` could not be read.
    #[error(transparent)]
    Config(#[from] heron_core::config::ConfigError),
    /// The session store could not be opened.
    #[error("cannot open the session store: {0}")]
    Store(heron_store::StoreError),
    /// The schema validator could not be built.
    #[error(transparent)]
    Schema(#[from] heron_protocol::validate::SchemaError),
    /// stdin or stdout failed.
    #[error("stdio failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Connection options for `args`, validating (`--validate`) against the schema of the
/// version `negotiation` settles on.
pub fn connection_options(
    args: &AcpArgs,
    negotiation: &Arc<Negotiation>,
) -> Result<ConnectionOptions, AcpError> {
    let validator: Option<Arc<dyn Validate>> = match (args.validate, args.protocol) {
        (false, _) => None,
        (true, Protocol::V1) => Some(Arc::new(SchemaValidator::new(Side::Agent)?)),
        (true, _) => Some(Arc::new(NegotiatedValidator::new(
            negotiation.clone(),
            Arc::new(SchemaValidator::new(Side::Agent)?),
            Arc::new(heron_protocol::v2::SchemaValidator::new(Side::Agent)?),
        ))),
    };
    Ok(ConnectionOptions {
        max_line_bytes: args.max_line_bytes.max(1),
        validator,
        ..ConnectionOptions::default()
    })
}

/// Serves ACP on the given streams until the input ends, with sessions under `home`; with
/// `--record`, the session is recorded too.
pub async fn serve<R, W>(reader: R, writer: W, args: &AcpArgs, home: &Home) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    serve_until(reader, writer, args, home, std::future::pending()).await
}

/// [`serve`], which also ends when `stop` resolves, the same way as when the input ends.
pub async fn serve_until<R, W>(
    reader: R,
    writer: W,
    args: &AcpArgs,
    home: &Home,
    stop: impl Future<Output = ()>,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    flags(args)?;
    let Some(path) = &args.record else {
        return serve_with(reader, writer, args, home, None, stop).await;
    };
    let recorder = Arc::new(recorder(args, home, path)?);
    let flushing = tokio::spawn(recorder.clone().keep_flushing());
    let reader = TeeReader::new(reader, recorder.clone());
    let writer = TeeWriter::new(writer, recorder.clone());
    let served = serve_with(reader, writer, args, home, Some(recorder.clone()), stop).await;
    flushing.abort();
    recorder.end_of(Sender::Agent);
    if let Err(error) = recorder.flush() {
        tracing::error!(path = %path.display(), %error, "cannot write the recording");
    }
    served
}

/// A recorder writing to `path`, which is written once at once so a bad path fails early.
fn recorder(args: &AcpArgs, home: &Home, path: &std::path::Path) -> Result<Recorder, AcpError> {
    let config = Config::load(home)?;
    let keys = Keys::load(home)?;
    let setup =
        Setup::new(replay_args(args), &config, home.root().to_path_buf(), keys.all().cloned().collect());
    let recorder = Recorder::new(path.to_path_buf(), setup);
    recorder.flush().map_err(|e| AcpError::Usage(format!("--record {}: {e}", path.display())))?;
    Ok(recorder)
}

/// The flags a recording replays with: those that shape behaviour, not where things are.
fn replay_args(args: &AcpArgs) -> Vec<String> {
    let mut replay = Vec::new();
    let mut pair = |flag: &str, value: Option<&String>| {
        if let Some(value) = value {
            replay.extend([flag.to_owned(), value.clone()]);
        }
    };
    pair("--model", args.model.as_ref());
    pair("--preset", args.preset.as_ref().or(args.profile.as_ref()));
    pair("--permission-mode", args.permission_mode.as_ref());
    pair("--title", args.title.as_ref());
    if args.max_line_bytes != DEFAULT_MAX_LINE {
        replay.extend(["--max-line-bytes".to_owned(), args.max_line_bytes.to_string()]);
    }
    if args.max_history_bytes != SESSION_HISTORY_BYTES {
        replay.extend(["--max-history-bytes".to_owned(), args.max_history_bytes.to_string()]);
    }
    if args.safe_mode {
        replay.push("--safe-mode".to_owned());
    }
    if args.cwd_only {
        replay.push("--cwd-only".to_owned());
    }
    if let Some(protocol) =
        clap::ValueEnum::to_possible_value(&args.protocol).filter(|_| args.protocol != Protocol::V1)
    {
        replay.extend(["--protocol".to_owned(), protocol.get_name().to_owned()]);
    }
    replay
}

async fn serve_with<R, W>(
    reader: R,
    writer: W,
    args: &AcpArgs,
    home: &Home,
    recorder: Option<Arc<Recorder>>,
    stop: impl Future<Output = ()>,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    // The store and config are read in the background, and only once `initialize` is
    // answered (or a request needs sessions first), so the first answer waits on nothing.
    let (fill, slot) = ManagerSlot::new();
    let building = {
        let (args, home, wanted) = (args.clone(), home.clone(), slot.clone());
        tokio::spawn(async move {
            wanted.wanted().await;
            // A probe left for after the first answer starts now (see `sandbox::prepare`).
            heron_core::sandbox::probe_in_background();
            let built = manager(&args, &home, recorder).await.map(Arc::new).map_err(|e| Unusable {
                reason: e.to_string(),
                store: match &e {
                    AcpError::Store(store) => Some(store.kind()),
                    _ => None,
                },
            });
            if let Err(unusable) = &built {
                tracing::error!(reason = %unusable.reason, "heron cannot use HERON_HOME");
            }
            let _ = fill.send(Some(built));
        })
    };
    let negotiation = Negotiation::new(args.protocol);
    let connection = Connection::new(reader, writer, connection_options(args, &negotiation)?);
    let peer = connection.peer();
    let agent = HeronAgent::new(connection.peer(), slot.clone(), home.root().to_path_buf(), args.cwd_only);
    let v1 = Arc::new(AgentService::new(agent, agent_policy));
    let served = if args.protocol == Protocol::V1 {
        connection.serve(v1)
    } else {
        // Both adapters share the manager: a session made over v1 resumes over v2.
        let agent =
            HeronAgentV2::new(connection.peer(), slot.clone(), home.root().to_path_buf(), args.cwd_only);
        let v2 = Arc::new(heron_protocol::v2::AgentService::new(agent, crate::acp::v2::policy::agent_policy));
        connection.serve(Arc::new(Negotiated::new(negotiation, v1, v2)))
    };
    tokio::pin!(served, stop);
    let served = tokio::select! {
        served = &mut served => served,
        () = &mut stop => {
            // As if the input had ended, without waiting for requests to finish: they are
            // answered -32800 and what is queued is flushed.
            peer.close();
            served.await
        }
    };
    // A connection that never asked for sessions ends without reading the home at all.
    if slot.is_wanted() {
        let _ = building.await;
    } else {
        building.abort();
    }
    // The editor is gone: stop every turn and tool.
    if let Some(manager) = slot.now() {
        manager.stop_all().await;
    }
    served?;
    Ok(())
}

/// Runs `heron acp` on the process's stdin and stdout, until stdin ends or a signal asks
/// it to stop.
pub async fn run(args: AcpArgs) -> Result<(), AcpError> {
    // First, so a signal that comes while Heron starts is handled too.
    let stop = stop_signal()?;
    if let Some(dir) = &args.cwd {
        std::env::set_current_dir(dir)
            .map_err(|e| AcpError::Usage(format!("--cwd {}: {e}", dir.display())))?;
    }
    let home = Home::from_env()?;
    serve_until(tokio::io::stdin(), tokio::io::stdout(), &args, &home, stop).await
}

/// Resolves at the first SIGTERM (a supervisor or the editor stopping Heron), SIGINT (^C
/// in a terminal) or SIGHUP (the terminal gone).
fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            _ = hangup.recv() => "SIGHUP",
        };
        tracing::info!(signal = name, "stopping as at the end of input");
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legacy_profile_names_the_presets_and_economy_is_light() {
        for (profile, preset) in
            [("economy", Preset::Light), ("balanced", Preset::Balanced), ("delivery", Preset::Delivery)]
        {
            let args = AcpArgs { profile: Some(profile.into()), ..AcpArgs::default() };
            assert_eq!(flags(&args).expect("valid").1, Some(preset), "{profile}");
        }
    }

    #[test]
    fn an_unknown_preset_is_reported_under_the_flag_that_was_typed() {
        let usage = |args: AcpArgs| match flags(&args) {
            Err(AcpError::Usage(message)) => message,
            other => panic!("expected a usage error, got {other:?}"),
        };
        let message = usage(AcpArgs { profile: Some("bogus".into()), ..AcpArgs::default() });
        assert_eq!(message, "--profile bogus is not one of economy, balanced, delivery");
        let message = usage(AcpArgs { preset: Some("bogus".into()), ..AcpArgs::default() });
        assert_eq!(message, "--preset bogus is not one of light, balanced, delivery");
    }
}
