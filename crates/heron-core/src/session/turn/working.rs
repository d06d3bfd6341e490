//! A turn's working context: taken at its start and stored when it changed (the model reads
//! it with the turn's prompt), and the instruction files of folders below the cwd, given
//! once with the result of the first tool that works there.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use super::{Turn, TurnError};
use crate::session::event::Event;
use crate::session::working::instructions::{self, Instruction, Sources};
use crate::session::working::{self, Facts, WorkingContext};
use crate::tools::ToolEnv;

/// How long gathering the context may take; past it the turn goes on with what the model
/// was last given.
const GATHER_WAIT: Duration = Duration::from_secs(5);

/// Where instruction files may be read from for `env`: its roots and the repository.
fn sources_allowed(env: &ToolEnv, repository: Option<&PathBuf>) -> Vec<PathBuf> {
    env.roots.all().iter().cloned().chain(repository.cloned()).collect()
}

/// The context as it is now (blocks: reads files, may run `git status`).
fn gather(env: &ToolEnv, facts: Facts) -> WorkingContext {
    let repository = facts.git.as_ref().map(|git| git.root.clone());
    let folders = instructions::folders(&facts.cwd, &facts.additional, repository.as_deref());
    let allowed = sources_allowed(env, repository.as_ref());
    let sources = Sources { allowed, home: &env.sandbox.home, protected: env.roots.protected() };
    WorkingContext {
        environment: facts.environment(),
        instructions: instructions::read_all(&folders, &sources),
    }
}

/// The instruction files the model holds after `history`, in the order it read them: the
/// latest context's, then those tools' results gave it (what the status shows).
pub(crate) fn loaded(history: &[Event]) -> Vec<String> {
    let latest = history.iter().rev().find_map(|event| match event {
        Event::Context(context) => Some(context),
        _ => None,
    });
    let mut out: Vec<String> = latest
        .into_iter()
        .flat_map(|context| {
            context
                .instructions
                .iter()
                .filter(|i| i.note.as_deref().is_none_or(|n| !n.starts_with("not read")))
        })
        .map(|i| i.path.clone())
        .collect();
    for event in history {
        if let Event::ToolResult { instructions, .. } = event {
            for path in instructions {
                if !out.contains(path) {
                    out.push(path.clone());
                }
            }
        }
    }
    out
}

/// The instruction paths `history` gave the model: its contexts' and its tools' results'.
fn given(history: &[Event]) -> HashSet<String> {
    let mut given = HashSet::new();
    for event in history {
        match event {
            Event::Context(context) => given.extend(context.instructions.iter().map(|i| i.path.clone())),
            Event::ToolResult { instructions, .. } => given.extend(instructions.iter().cloned()),
            _ => {}
        }
    }
    given
}

impl Turn {
    /// Stores the working context before the turn's prompt when it is the session's first,
    /// or differs from the one the model was last given.
    pub(super) async fn refresh_context(&mut self) -> Result<(), TurnError> {
        let env = self.io.env.clone();
        let roots = env.roots.all().to_vec();
        let confined = env.sandbox.enabled && crate::sandbox::support().has_landlock();
        let editor = (env.editor.reads_files(), env.editor.writes_files(), env.editor.has_terminals());
        let (posture, mode) = (self.policy.settings.posture, self.policy.settings.mode);
        let gathering = tokio::task::spawn_blocking(move || {
            let cwd = roots.first().cloned().unwrap_or_default();
            let facts = Facts {
                git: working::git(&cwd),
                additional: roots.get(1..).unwrap_or_default().to_vec(),
                cwd,
                date: working::today(),
                posture,
                mode,
                confined,
                editor,
            };
            gather(&env, facts)
        });
        let now = match tokio::time::timeout(GATHER_WAIT, gathering).await {
            Ok(Ok(now)) => now,
            Ok(Err(err)) => {
                tracing::warn!(%err, "gathering the working context stopped; the model keeps the last one");
                return Ok(());
            }
            Err(_) => {
                tracing::warn!("gathering the working context took too long; the model keeps the last one");
                return Ok(());
            }
        };
        let last = self.carried.history.iter().rev().find_map(|event| match event {
            Event::Context(context) => Some(context),
            _ => None,
        });
        if last == Some(&now) {
            return Ok(());
        }
        self.record_shown(Event::Context(now), false).await?;
        let loaded = loaded(&self.carried.history);
        self.shared.status.change(|s| s.instructions = loaded);
        Ok(())
    }

    /// The instruction files of the folders below the cwd on the way to each of `touched`
    /// that the model has not been given yet: their text for the tool's result, and their
    /// paths. Empty when there are none.
    pub(super) async fn nested_instructions(&self, touched: Vec<PathBuf>) -> (String, Vec<String>) {
        if touched.is_empty() {
            return (String::new(), Vec::new());
        }
        let env = self.io.env.clone();
        let given = given(&self.carried.history);
        let reading = tokio::task::spawn_blocking(move || {
            let cwd = env.roots.cwd().to_path_buf();
            let mut dirs: Vec<PathBuf> = Vec::new();
            for path in &touched {
                for dir in instructions::below(&cwd, path) {
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
            let sources = Sources {
                allowed: sources_allowed(&env, None),
                home: &env.sandbox.home,
                protected: env.roots.protected(),
            };
            let found: Vec<Instruction> = dirs
                .iter()
                .filter_map(|dir| instructions::in_folder(dir, &sources))
                .filter(|file| !given.contains(&file.path))
                .collect();
            instructions::bounded(found)
        });
        match tokio::time::timeout(GATHER_WAIT, reading).await {
            Ok(Ok(found)) if !found.is_empty() => {
                let paths = found.iter().map(|file| file.path.clone()).collect();
                (working::nested_text(&found), paths)
            }
            _ => (String::new(), Vec::new()),
        }
    }
}
