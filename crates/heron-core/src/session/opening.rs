//! What opening a session is asked with and how it fails: the [`OpenOptions`] an edge
//! gives (where, with which editor and MCP servers) and the [`SessionError`] every session
//! operation returns. Apart from the manager so that a session being loaded (`loading`) can
//! name them without depending on the manager. Invariant: a store failure keeps its kind
//! (damaged, unavailable, other), so the edge can tell the client which one it was.

use std::path::PathBuf;
use std::sync::Arc;

use super::goal::GoalError;
use super::settings::SettingError;
use crate::llm::registry::ModelError;
use crate::tools::editor::EditorIo;
use crate::tools::mcp::ServerSpec;
use heron_store::{StoreError, StoreErrorKind};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session has that id.
    #[error("session {0} not found")]
    NotFound(String),
    /// The session's model cannot be used (no provider, no key).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A setting change was refused.
    #[error(transparent)]
    Setting(SettingError),
    /// The goal cannot change that way.
    #[error(transparent)]
    Goal(GoalError),
    /// The session is open with another cwd or other additional directories; it must be
    /// closed first. Says which of the two differs (the cwd when both do).
    #[error("{}", other_roots_message(*.0))]
    OpenWithOtherRoots(OtherRoot),
    /// A list cursor was not one Heron issued.
    #[error("the cursor is not one this agent issued")]
    BadCursor,
    /// A path was not usable.
    #[error("{0}")]
    BadPath(String),
    /// Another process has the session open (it holds the session's lock).
    #[error("session {0} is open in another Heron process")]
    OpenElsewhere(String),
    /// The store failed: damaged, unavailable, or otherwise.
    #[error("the session store failed: {reason}")]
    Store {
        /// Which kind of failure.
        kind: StoreErrorKind,
        /// What the store said.
        reason: String,
    },
    /// `config.toml` or `.env` changed and cannot be used now; sessions keep what was read
    /// before.
    #[error("{0}")]
    Home(crate::extensions::ReloadError),
    /// The session's stored history, or the histories of the sessions open here with it,
    /// would pass their budget (`history_budget`); nothing was read.
    #[error("{0}")]
    HistoryFull(super::history_budget::HistoryFull),
    /// This process holds the most sessions it may open at once.
    #[error("{0} sessions are open in this process, the most it holds; close one first")]
    TooManyOpen(usize),
    /// Something else failed.
    #[error("{0}")]
    Internal(String),
}

/// Which of a session's roots differs from those it is open with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherRoot {
    /// Its working directory.
    Cwd,
    /// Its additional directories (the cwd is the same).
    AdditionalDirectories,
}

fn other_roots_message(which: OtherRoot) -> &'static str {
    match which {
        OtherRoot::Cwd => "the session is already open with another cwd; close it first",
        OtherRoot::AdditionalDirectories => {
            "the session is already open with other additional directories; close it first"
        }
    }
}

impl From<StoreError> for SessionError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { id, .. } => SessionError::NotFound(id),
            StoreError::BadCursor => SessionError::BadCursor,
            other => SessionError::Store { kind: other.kind(), reason: other.to_string() },
        }
    }
}

/// Where a session is opened.
#[derive(Clone)]
pub struct OpenOptions {
    /// The working directory (absolute).
    pub cwd: PathBuf,
    /// Extra workspace roots (absolute, validated).
    pub additional_directories: Vec<PathBuf>,
    /// What the editor of this connection does for tools.
    pub editor: Arc<dyn EditorIo>,
    /// The MCP servers the editor gives the session (started when it opens here).
    pub mcp_servers: Vec<ServerSpec>,
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenOptions")
            .field("cwd", &self.cwd)
            .field("additional_directories", &self.additional_directories)
            .field("mcp_servers", &self.mcp_servers)
            .finish_non_exhaustive()
    }
}
