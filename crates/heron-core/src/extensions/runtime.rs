//! The runtime a session's turns use: the providers of `config.toml` and `.env`, the user's
//! commands and the plugins, loaded together and replaced together.
//!
//! A reload is all or nothing. [`Runtime::reloaded`] reads and builds everything first
//! (the config, the keys, every provider, the commands, the plugins) and only a whole new
//! runtime comes out of it; a config or key file that does not parse, or a provider that
//! cannot start, is a [`ReloadError`] naming the file and line, and the caller keeps the
//! runtime it had. Command files and plugins are different: each bad one is a
//! [`Problem`], left out, as when Heron starts. With safe mode on, no command or plugin is
//! read at all.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use super::catalog::Catalog;
use super::command::{CustomCommand, Origin};
use super::plugin::Plugin;
use super::skill::{self, Skill};
use super::{Problem, command_dir, log, plugin};
use crate::config::{Config, ConfigError, Keys};
use crate::llm::registry::{ModelError, Providers};
use crate::tools::protected::Protected;

/// A value many readers share and one writer replaces whole: a reader keeps the `Arc` it
/// took, so a turn finishes with the runtime it started with.
#[derive(Debug)]
pub struct Shared<T>(RwLock<Arc<T>>);

impl<T> Shared<T> {
    /// Shares `value`.
    pub fn new(value: Arc<T>) -> Self {
        Self(RwLock::new(value))
    }

    /// The value now.
    pub fn get(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the value; readers see it from their next [`Shared::get`].
    pub fn set(&self, value: Arc<T>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = value;
    }
}

/// Why a reload kept the runtime it had: the file, where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {reason}", file.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct ReloadError {
    /// The file at fault.
    pub file: PathBuf,
    /// Its 1-based line, when known.
    pub line: Option<usize>,
    /// Its 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong (secrets redacted).
    pub reason: String,
}

/// `config.toml` and `.env` as a runtime found them: each one's size and modification time
/// (`None` when absent). Comparing two is a cheap way to tell that the user changed either
/// since (a setup finished in the editor's terminal), without reading them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HomeFiles([Option<(u64, std::time::SystemTime)>; 2]);

impl HomeFiles {
    /// The two files of `home` as they are now. Blocks (two `stat`s).
    pub(super) fn now(home: &crate::config::Home) -> Self {
        let seen = |path: PathBuf| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.len(), meta.modified().ok()?))
        };
        Self([seen(home.config_path()), seen(home.env_path())])
    }
}

/// Providers, commands and plugins, as one swap.
pub struct Runtime {
    providers: Arc<Providers>,
    /// The home's files as they were when this runtime was read.
    read: HomeFiles,
    user_commands: Vec<CustomCommand>,
    user_skills: Vec<Skill>,
    plugins: Vec<Plugin>,
    broken_plugins: Vec<(String, Problem)>,
    problems: Vec<Problem>,
    safe_mode: bool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("user_commands", &self.user_commands.len())
            .field("user_skills", &self.user_skills.len())
            .field("plugins", &self.plugins)
            .field("problems", &self.problems)
            .field("safe_mode", &self.safe_mode)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// `providers` alone, with no commands or plugins.
    pub fn bare(providers: Arc<Providers>) -> Self {
        Self {
            read: HomeFiles::now(providers.home()),
            providers,
            user_commands: Vec::new(),
            user_skills: Vec::new(),
            plugins: Vec::new(),
            broken_plugins: Vec::new(),
            problems: Vec::new(),
            safe_mode: false,
        }
    }

    /// `providers` with the user's commands and the plugins of their home, unless
    /// `safe_mode`; each problem is logged once. Blocks.
    pub fn load(providers: Arc<Providers>, safe_mode: bool) -> Self {
        let mut runtime = Self { safe_mode, ..Self::bare(providers) };
        if !safe_mode {
            runtime.read_home();
            log(&runtime.problems);
        }
        runtime
    }

    /// Whether `config.toml` or `.env` changed since this runtime read them. Blocks.
    pub fn home_changed(&self) -> bool {
        HomeFiles::now(self.providers.home()) != self.read
    }

    /// The next runtime, from what the home holds now (see the module docs). Blocks.
    pub fn reloaded(&self) -> Result<Runtime, ReloadError> {
        let home = self.providers.home().clone();
        // Taken before the files are read: a change made while they are read is seen next time.
        let read = HomeFiles::now(&home);
        let config_path = home.config_path();
        // Read as at start, within the same bound: a file that loads at start reloads.
        let text = match crate::whole_file::read_text(&config_path, crate::config::MAX_CONFIG_BYTES) {
            Ok(text) => text,
            Err(crate::whole_file::WholeFileError::NotFound) => String::new(),
            Err(error) => return Err(whole_file(&config_path, error.to_string())),
        };
        let config = Config::from_text(&home, &text).map_err(|invalid| ReloadError {
            file: config_path.clone(),
            line: invalid.line,
            column: invalid.column,
            reason: invalid.message,
        })?;
        let keys = Keys::load(&home).map_err(|e| match e {
            ConfigError::Invalid { reason, .. } | ConfigError::Io { reason, .. } => {
                whole_file(&home.env_path(), reason)
            }
            ConfigError::NoHome => whole_file(&home.env_path(), e.to_string()),
        })?;
        let providers = self.providers.rebuilt(Arc::new(config), Arc::new(keys)).map_err(|e| {
            let line = match &e {
                ModelError::Broken { provider, .. } => {
                    let header = format!("[providers.{provider}]");
                    text.lines().position(|l| l.trim() == header).map(|i| i + 1)
                }
                _ => None,
            };
            ReloadError { file: config_path.clone(), line, column: None, reason: e.to_string() }
        })?;
        Ok(Self { read, ..Self::load(Arc::new(providers), self.safe_mode) })
    }

    fn read_home(&mut self) {
        let Ok(root) = std::fs::canonicalize(self.providers.home().root()) else { return };
        let protected = Protected::for_home(&root);
        self.user_commands =
            command_dir::load(&root.join("commands"), &Origin::User, &protected, &mut self.problems);
        self.user_skills = skill::load(&root.join("skills"), &Origin::User, &protected, &mut self.problems);
        let (plugins, broken) = plugin::load_all(&root.join("plugins"), &protected, &mut self.problems);
        self.plugins = plugins;
        self.broken_plugins = broken;
    }

    /// The providers (and through them the config and keys).
    pub fn providers(&self) -> &Arc<Providers> {
        &self.providers
    }

    /// The plugins that loaded.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// The plugins that did not load, by name, and why.
    pub fn broken_plugins(&self) -> &[(String, Problem)] {
        &self.broken_plugins
    }

    /// Whether commands, plugins and MCP servers are off (`--safe-mode`).
    pub fn safe_mode(&self) -> bool {
        self.safe_mode
    }

    /// The commands and skills a session in `cwd` offers: its project's
    /// (`.heron/commands/`, the skills folders of [`PROJECT_SKILLS`]), the user's and the
    /// plugins', past Heron's `builtin` ones. Problems the project or a clash adds are
    /// logged once. Blocks.
    pub fn catalog(&self, cwd: &Path, builtin: &[&str]) -> Catalog {
        let mut problems = self.problems.clone();
        let known = problems.len();
        let (project, project_skills) = if self.safe_mode {
            (Vec::new(), Vec::new())
        } else {
            (self.project_commands(cwd, &mut problems), self.project_skills(cwd, &mut problems))
        };
        let skills = project_skills.into_iter().chain(self.user_skills.iter().cloned()).collect();
        let catalog = Catalog::build(builtin, project, &self.user_commands, &self.plugins, problems)
            .with_skills(builtin, skills);
        log(&catalog.problems()[known..]);
        catalog
    }

    /// The skills of the project in `cwd`, from each folder of [`PROJECT_SKILLS`] in turn
    /// (the first of a name wins).
    fn project_skills(&self, cwd: &Path, problems: &mut Vec<Problem>) -> Vec<Skill> {
        let Ok(cwd) = std::fs::canonicalize(cwd) else { return Vec::new() };
        let protected = Protected::for_home(self.providers.home().root());
        let mut skills = Vec::new();
        for folder in PROJECT_SKILLS {
            let dir = cwd.join(folder).join("skills");
            // At the user's home, `.heron` is Heron's home: those skills are the user's.
            if protected.is_home(&dir) {
                continue;
            }
            skills.extend(skill::load(&dir, &Origin::Project, &protected, problems));
        }
        skills
    }

    fn project_commands(&self, cwd: &Path, problems: &mut Vec<Problem>) -> Vec<CustomCommand> {
        let Ok(cwd) = std::fs::canonicalize(cwd) else { return Vec::new() };
        let protected = Protected::for_home(self.providers.home().root());
        let dir = cwd.join(".heron").join("commands");
        // A project at the user's home has Heron's home as its `.heron`: those commands are
        // the user's, already read.
        if protected.is_home(&dir) {
            return Vec::new();
        }
        command_dir::load(&dir, &Origin::Project, &protected, problems)
    }
}

/// The folders of a project whose `skills/` hold its skills, first winning: Heron's own,
/// then those other agents read, so skills written for them work unchanged.
const PROJECT_SKILLS: [&str; 3] = [".heron", ".agents", ".claude"];

fn whole_file(file: &Path, reason: String) -> ReloadError {
    ReloadError { file: file.to_path_buf(), line: None, column: None, reason }
}
