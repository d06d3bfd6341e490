//! `heron acp`: serves the Agent Client Protocol over stdin/stdout until stdin ends.

use std::sync::Arc;

use clap::Args;

use crate::acp::HeronAgent;
use crate::acp::policy::agent_policy;
use crate::protocol::runtime::Side;
use crate::protocol::serve::AgentService;
use crate::protocol::validate::SchemaValidator;
use crate::rpc::{Connection, ConnectionOptions, DEFAULT_MAX_LINE, Validate};

/// Options of `heron acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// Check every incoming and outgoing message against the ACP schema.
    #[arg(long, env = "HERON_VALIDATE", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub validate: bool,

    /// The largest message line accepted, in bytes; longer lines are discarded with an error.
    #[arg(long, default_value_t = DEFAULT_MAX_LINE, value_name = "BYTES")]
    pub max_line_bytes: usize,
}

/// Why `heron acp` stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
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

/// Serves ACP on the given streams until the input ends.
pub async fn serve<R, W>(reader: R, writer: W, args: &AcpArgs) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let connection = Connection::new(reader, writer, connection_options(args)?);
    let agent = HeronAgent::new(connection.peer());
    connection.serve(Arc::new(AgentService::new(agent, agent_policy))).await?;
    Ok(())
}

/// Runs `heron acp` on the process's stdin and stdout.
pub async fn run(args: AcpArgs) -> Result<(), AcpError> {
    serve(tokio::io::stdin(), tokio::io::stdout(), &args).await
}
