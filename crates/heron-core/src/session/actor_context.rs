//! What a session's actor is given beyond the session itself ([`ActorContext`]), apart from
//! the actor's loop so that a reload (`reload`, which runs in the actor) and the manager
//! (which makes it) can name it without depending on that loop. Invariant: it holds nothing
//! the config decides, which each turn reads from the session's runtime instead.

use std::path::PathBuf;
use std::sync::Arc;

use crate::extensions::{Runtime, Shared};
use crate::tools::Registry;
use crate::tools::mcp::McpHub;
use heron_store::Store;

/// What the actor needs beyond the session itself. What the config decides is read from
/// the session's runtime at each turn instead, so a reload reaches the next one.
pub(super) struct ActorContext {
    pub(super) store: Store,
    pub(super) tools: Arc<Registry>,
    pub(super) transcripts: PathBuf,
    /// How long a permission answer may take, when the command line says.
    pub(super) permission_timeout: Option<std::time::Duration>,
    pub(super) witness: Option<Arc<dyn crate::tools::FileWitness>>,
    pub(super) mcp: Arc<McpHub>,
    /// `--max-tokens`.
    pub(super) max_reply_tokens: Option<u32>,
    pub(super) append_system_prompt: Option<Arc<str>>,
    /// The manager's runtime, which a reload replaces too (for sessions opened later).
    pub(super) shared: Arc<Shared<Runtime>>,
    /// The bytes of history the session holds, against its budgets (`history_budget`).
    pub(super) history: Arc<super::history_budget::HistoryUse>,
}
