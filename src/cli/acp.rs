//! `heron acp`: serves the Agent Client Protocol over stdin/stdout until stdin ends.

use std::sync::Arc;

use clap::Args;

use crate::acp::policy::agent_policy;
use crate::acp::{HeronAgent, ManagerSlot};
use crate::config::{Config, Home, Keys};
use crate::llm::registry::Providers;
use crate::protocol::runtime::Side;
use crate::protocol::serve::AgentService;
use crate::protocol::validate::SchemaValidator;
use crate::rpc::{Connection, ConnectionOptions, DEFAULT_MAX_LINE, Validate};
use crate::session::settings::{Posture, Preset};
use crate::session::{Manager, ManagerOptions};
use crate::store::Store;

/// Options of `heron acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// Check every incoming and outgoing message against the ACP schema.
    #[arg(long, env = "HERON_VALIDATE", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub validate: bool,

    /// The largest message line accepted, in bytes; longer lines are discarded with an error.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE, value_name = "BYTES")]
    pub max_line_bytes: usize,

    /// The model new sessions use (`provider/model`); `demo/demo` needs no key.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,

    /// The agent preset of new sessions: light, balanced or delivery.
    #[arg(long)]
    pub preset: Option<String>,

    /// Legacy name of --preset.
    #[arg(long, hide = true)]
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

    /// Start new sessions read-only (tool approval `readOnly`); they can be raised later.
    #[arg(long)]
    pub safe_mode: bool,

    /// Run the interactive provider setup instead of serving (the terminal auth method).
    #[arg(long)]
    pub setup: bool,
}

impl Default for AcpArgs {
    fn default() -> Self {
        Self {
            validate: false,
            max_line_bytes: DEFAULT_MAX_LINE,
            model: None,
            preset: None,
            profile: None,
            permission_mode: None,
            cwd: None,
            title: None,
            safe_mode: false,
            setup: false,
        }
    }
}

/// Checks the flags that need no I/O.
fn flags(args: &AcpArgs) -> Result<(Option<Posture>, Option<Preset>), AcpError> {
    let ceiling = match &args.permission_mode {
        None => None,
        Some(flag) => Some(Posture::from_permission_mode(flag).ok_or_else(|| {
            AcpError::Usage(format!(
                "--permission-mode {flag} is not one of read-only, dontAsk, manual, ask, auto, acceptEdits, \
                 bypassPermissions"
            ))
        })?),
    };
    let preset = match args.preset.as_deref().or(args.profile.as_deref()) {
        None => None,
        Some(name) => Some(Preset::from_id(name).ok_or_else(|| {
            AcpError::Usage(format!("--preset {name} is not one of light, balanced, delivery"))
        })?),
    };
    Ok((ceiling, preset))
}

/// Builds the session manager from `HERON_HOME` and the flags.
pub async fn manager(args: &AcpArgs, home: &Home) -> Result<Manager, AcpError> {
    let config = Arc::new(Config::load(home)?);
    let keys = Arc::new(Keys::load(home)?);
    let store = Store::open(home.db_path()).await.map_err(|e| AcpError::Store(e.to_string()))?;
    let (ceiling, preset) = flags(args)?;
    let options = ManagerOptions {
        model: args.model.clone(),
        preset,
        ceiling,
        title: args.title.clone(),
        permission_timeout: None,
        // Safe mode starts sessions read-only; the user can raise it (up to any ceiling).
        start_posture: args.safe_mode.then_some(Posture::ReadOnly),
    };
    let providers = Arc::new(Providers::new(home.clone(), config, keys));
    Ok(Manager::new(
        store,
        providers,
        Arc::new(crate::tools::builtin()),
        options,
        home.root().join("transcripts"),
    ))
}

/// Why `heron acp` stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// A flag was wrong.
    #[error("{0}")]
    Usage(String),
    /// `HERON_HOME` could not be read.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The session store could not be opened.
    #[error("cannot open the session store: {0}")]
    Store(String),
    /// The schema validator could not be built.
    #[error(transparent)]
    Schema(#[from] crate::protocol::validate::SchemaError),
    /// stdin or stdout failed.
    #[error("stdio failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Connection options for `args`.
pub fn connection_options(args: &AcpArgs) -> Result<ConnectionOptions, AcpError> {
    let validator: Option<Arc<dyn Validate>> =
        if args.validate { Some(Arc::new(SchemaValidator::new(Side::Agent)?)) } else { None };
    Ok(ConnectionOptions {
        max_line_bytes: args.max_line_bytes.max(1),
        validator,
        ..ConnectionOptions::default()
    })
}

/// Serves ACP on the given streams until the input ends, with sessions under `home`.
pub async fn serve<R, W>(reader: R, writer: W, args: &AcpArgs, home: &Home) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    // Flags are checked before anything is served; the store and config are read in the
    // background so `initialize` is answered at once.
    flags(args)?;
    let (fill, slot) = ManagerSlot::new();
    let building = {
        let (args, home) = (args.clone(), home.clone());
        tokio::spawn(async move {
            let built = manager(&args, &home).await.map(Arc::new).map_err(|e| e.to_string());
            if let Err(reason) = &built {
                tracing::error!(%reason, "heron cannot use HERON_HOME");
            }
            let _ = fill.send(Some(built));
        })
    };
    let connection = Connection::new(reader, writer, connection_options(args)?);
    let agent = HeronAgent::new(connection.peer(), slot.clone(), home.root().to_path_buf());
    let served = connection.serve(Arc::new(AgentService::new(agent, agent_policy))).await;
    let _ = building.await;
    // The editor is gone: stop every turn and tool.
    if let Some(manager) = slot.now() {
        manager.close_all();
    }
    served?;
    Ok(())
}

/// Runs `heron acp` on the process's stdin and stdout.
pub async fn run(args: AcpArgs) -> Result<(), AcpError> {
    if let Some(dir) = &args.cwd {
        std::env::set_current_dir(dir)
            .map_err(|e| AcpError::Usage(format!("--cwd {}: {e}", dir.display())))?;
    }
    let home = Home::from_env()?;
    serve(tokio::io::stdin(), tokio::io::stdout(), &args, &home).await
}
