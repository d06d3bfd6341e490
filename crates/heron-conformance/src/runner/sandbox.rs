//! A scenario's private HERON_HOME and workspace, with a HOME and TMPDIR of its own for the
//! agent: created from the transcript's header (script, config, workspace and home files)
//! and removed afterwards. Everything the agent is meant to write lies under its root.

use std::path::{Path, PathBuf};

use crate::format::Header;
use crate::matcher::Paths;

/// A scenario's private directories under the system temp directory, removed when dropped:
/// `home` (HERON_HOME), `ws` (the workspace), `user` (the agent's HOME) and `tmp` (its
/// TMPDIR).
#[derive(Debug)]
pub struct Sandbox {
    root: PathBuf,
    /// The workspace and home paths, as the matcher sees them.
    pub paths: Paths,
}

impl Sandbox {
    /// Creates the directories and writes the header's script, config and workspace files.
    pub fn create(header: &Header) -> std::io::Result<Sandbox> {
        let root = std::env::temp_dir().join(format!("heron-conformance-{}", uuid::Uuid::new_v4()));
        for dir in ["home", "ws", "user", "tmp"] {
            std::fs::create_dir_all(root.join(dir))?;
        }
        // Canonical, so the paths the agent reports (after resolving symlinks) are `$WS`.
        let root = std::fs::canonicalize(&root)?;
        let sandbox = Sandbox {
            paths: Paths {
                ws: root.join("ws").display().to_string(),
                home: root.join("home").display().to_string(),
            },
            root,
        };
        let mut config = String::new();
        // Top-level keys go before the first table, or TOML reads them into that table.
        if let Some(extra) = &header.config {
            config.push_str(extra);
            config.push('\n');
        }
        if !header.script.is_empty() || !header.providers.is_empty() {
            let mut script = String::new();
            for turn in &header.script {
                script.push_str(&turn.to_string());
                script.push('\n');
            }
            std::fs::write(sandbox.home().join("script.jsonl"), script)?;
        }
        if header.providers.is_empty() && !header.script.is_empty() {
            config.push_str(
                "[providers.script]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"script.jsonl\"\n",
            );
        }
        for (name, provider) in &header.providers {
            config.push_str(&provider.toml(name));
        }
        if !config.is_empty() {
            std::fs::write(sandbox.home().join("config.toml"), config)?;
        }
        for (name, text) in &header.files {
            write_below(&sandbox.ws(), "workspace", name, text)?;
        }
        for (name, text) in &header.home_files {
            // The header's own keys say these two; a second say would be a silent overwrite.
            if ["config.toml", "script.jsonl"].contains(&name.as_str()) {
                return Err(std::io::Error::other(format!(
                    "home file `{name}` is written from the header's `config` and `script`"
                )));
            }
            write_below(&sandbox.home(), "home", name, text)?;
        }
        Ok(sandbox)
    }

    /// The folder holding everything of the scenario; the agent may write only here.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// HERON_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The workspace, the agent's working directory.
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// The agent's HOME, so what it or its commands keep under `~` stays in the sandbox.
    pub fn user_home(&self) -> PathBuf {
        self.root.join("user")
    }

    /// The agent's TMPDIR.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
}

/// Writes `text` to `name` below `dir` (the workspace or the home), creating its folders;
/// a name that is absolute or climbs with `..` is refused, so nothing lands outside.
fn write_below(dir: &Path, what: &str, name: &str, text: &str) -> std::io::Result<()> {
    let relative = Path::new(name);
    if relative.is_absolute() || relative.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(std::io::Error::other(format!("{what} file `{name}` is outside the {what}")));
    }
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
