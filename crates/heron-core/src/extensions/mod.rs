//! What a user adds to Heron without rebuilding it: custom slash commands written as
//! markdown files (`.heron/commands/*.md` in a project, `HERON_HOME/commands/*.md` for the
//! user), skills (`SKILL.md` folders in `.heron/skills`, `.agents/skills` and
//! `.claude/skills` of a project, and `HERON_HOME/skills`), plugins
//! (`HERON_HOME/plugins/<name>/plugin.toml`: prompt actions and MCP servers), and the [`Runtime`] that holds them with the providers of `config.toml`, which
//! `_heron/session/reloadExtensions` rebuilds and swaps whole.
//!
//! Every file here is someone else's: read only as a regular file reached without a
//! symlink, within a byte budget, and never from inside Heron's home by another name. A
//! file that cannot be used is a [`Problem`] (named, with its line where there is one),
//! never a reason to stop: the rest still loads.

mod catalog;
mod command;
mod command_dir;
mod files;
mod front_matter;
mod plugin;
mod runtime;
mod skill;
mod skill_tool;

use std::path::PathBuf;

pub use self::catalog::Catalog;
pub use self::command::{CustomCommand, Expansion, McpPromptCall, Origin, valid_name};
pub use self::plugin::{Plugin, PluginServer};
pub use self::runtime::{ReloadError, Runtime, Shared};
pub use self::skill::{MAX_FRONT_MATTER, MAX_LISTING, MAX_SKILL_BYTES, MAX_SKILLS, Skill};
pub use self::skill_tool::{LoadSkill, LoadedSkills};

/// The most custom commands a session offers, from every source together; more are
/// reported and left out, so a folder of thousands cannot flood the editor's menu.
pub const MAX_COMMANDS: usize = 200;

/// The largest command file or `plugin.toml`, in bytes.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The most plugins read from `HERON_HOME/plugins`.
pub const MAX_PLUGINS: usize = 32;

/// A file that could not be used, and why: shown to the user, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (or folder) at fault.
    pub file: PathBuf,
    /// Its 1-based line, when the fault has one.
    pub line: Option<usize>,
    /// What is wrong, in a sentence.
    pub message: String,
}

impl Problem {
    /// A problem of `file` as a whole.
    pub fn new(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self { file: file.into(), line: None, message: message.into() }
    }

    /// A problem at `line` of `file`.
    pub fn at(file: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        Self { file: file.into(), line: Some(line), message: message.into() }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} line {line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Logs each of `problems` once, as it is found: the editor sees them too, but a user
/// running Heron from a terminal reads stderr.
fn log(problems: &[Problem]) {
    for problem in problems {
        tracing::warn!(%problem, "an extension file is not used");
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}
