//! The instruction files a project and its user keep for coding agents: `AGENTS.md`, the
//! cross-agent name, or where a folder has none, `CLAUDE.md` or `GEMINI.md`, so a repository
//! written for another agent works unchanged. Read from the user's own (`HERON_HOME`), then
//! from the repository root down to the cwd, then in each additional directory; the ones in
//! folders below the cwd are offered once the model works there ([`below`]).
//!
//! Bounds: each file at most [`MAX_FILE_BYTES`], all of them together [`MAX_TOTAL_BYTES`],
//! each cut with a note saying so. A file is read only when it is, or its link leads to, a
//! regular file inside the folders it may come from (the workspace, the repository, Heron's
//! home for the user's own); anything else is named with why it was not read, never
//! followed silently.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::tools::protected::Protected;

/// The file names read, in order of preference within one folder.
pub const NAMES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"];

/// The most of one file given to the model, in bytes.
pub const MAX_FILE_BYTES: usize = 16 * 1024;

/// The most of all instruction files at one time, in bytes.
pub const MAX_TOTAL_BYTES: usize = 32 * 1024;

/// One instruction file as the model is given it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instruction {
    /// The file, absolute, as found (a link keeps its own name).
    pub path: String,
    /// What was read, within the bounds.
    pub text: String,
    /// Why it was cut or not read, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where instruction files may come from, and what no read may reach.
pub struct Sources<'a> {
    /// Folders whose files (and links' targets) may be read: the roots and the repository.
    pub allowed: Vec<PathBuf>,
    /// Heron's home: its `AGENTS.md` is the user's own; nothing else of it is read.
    pub home: &'a Path,
    /// What no tool may touch (Heron's home by any name).
    pub protected: &'a Protected,
}

/// The nearest folder at or above `cwd` that holds a `.git` (a folder, or a file naming one).
pub fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors().find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok()).map(Path::to_path_buf)
}

/// The folders whose instruction files apply from a session's start, in the order the
/// model reads them (general first): the repository root down to the cwd, then each
/// additional directory.
pub fn folders(cwd: &Path, additional: &[PathBuf], repository: Option<&Path>) -> Vec<PathBuf> {
    let top = repository.filter(|root| cwd.starts_with(root)).unwrap_or(cwd);
    let mut chain: Vec<PathBuf> =
        cwd.ancestors().take_while(|dir| dir.starts_with(top)).map(Path::to_path_buf).collect();
    chain.reverse();
    chain.extend(additional.iter().cloned());
    chain
}

/// The instruction files that apply from the start: the user's own, then those of
/// `folders`, within the total bound.
pub fn read_all(folders: &[PathBuf], sources: &Sources<'_>) -> Vec<Instruction> {
    let user = read_file(&sources.home.join("AGENTS.md"), sources, true);
    let found = user.into_iter().chain(folders.iter().filter_map(|dir| in_folder(dir, sources)));
    bounded(found.collect())
}

/// The instruction file of `dir`: its `AGENTS.md`, else a stand-in.
pub fn in_folder(dir: &Path, sources: &Sources<'_>) -> Option<Instruction> {
    NAMES.iter().find_map(|name| read_file(&dir.join(name), sources, false))
}

/// The folders strictly below `cwd` on the way to `touched` (a file or folder the model
/// works on), outermost first; none when `touched` is not below the cwd.
pub fn below(cwd: &Path, touched: &Path) -> Vec<PathBuf> {
    let Ok(rest) = touched.strip_prefix(cwd) else { return Vec::new() };
    let mut dirs = Vec::new();
    let mut at = cwd.to_path_buf();
    let components: Vec<_> = rest.components().collect();
    // A file's own folder counts; the file does not.
    let folders = if touched.is_dir() { components.len() } else { components.len().saturating_sub(1) };
    for component in &components[..folders] {
        at.push(component);
        dirs.push(at.clone());
    }
    dirs
}

/// `path` as an instruction, if it exists: read when it (or its link's target) is a regular
/// file inside the allowed folders (or, for the user's own, is the home's file itself);
/// otherwise named with why it was not read.
fn read_file(path: &Path, sources: &Sources<'_>, users_own: bool) -> Option<Instruction> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.is_dir() {
        return None;
    }
    let shown = path.display().to_string();
    let skipped =
        |why: String| Some(Instruction { path: shown.clone(), text: String::new(), note: Some(why) });
    let Ok(real) = std::fs::canonicalize(path) else {
        return skipped("not read: it is a link that leads nowhere".to_owned());
    };
    // The user's own file may lead anywhere of theirs, but never to another file of
    // Heron's home (the keys); a project's must stay inside the project.
    let own_file =
        sources.home.canonicalize().unwrap_or_else(|_| sources.home.to_path_buf()).join("AGENTS.md");
    let allowed = if users_own {
        real == own_file || !sources.protected.is_home(&real)
    } else {
        sources.allowed.iter().any(|dir| real.starts_with(dir)) && !sources.protected.is_home(&real)
    };
    if !allowed {
        return skipped(format!(
            "not read: it is a link to {}, outside the folders instructions are read from",
            real.display()
        ));
    }
    let opened = match crate::tools::fsio::open_regular(&real) {
        Ok(Some(opened)) => opened,
        Ok(None) => return None,
        Err(err) => return skipped(format!("not read: {err}")),
    };
    let (file, meta) = opened;
    if real != own_file && sources.protected.is_home_file(&meta) {
        return skipped("not read: it is another name for a file of Heron's home".to_owned());
    }
    let mut bytes = Vec::new();
    // One byte past the bound tells a file cut from one exactly at it.
    if let Err(err) = file.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes) {
        return skipped(format!("not read: {err}"));
    }
    let cut = bytes.len() > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let note =
        cut.then(|| format!("cut at {} KiB; the rest of the file is not shown", MAX_FILE_BYTES / 1024));
    Some(Instruction { path: shown, text, note })
}

/// `found` within [`MAX_TOTAL_BYTES`]: the file that crosses it is cut, the rest left out
/// with a note on the last one given.
pub fn bounded(found: Vec<Instruction>) -> Vec<Instruction> {
    let mut room = MAX_TOTAL_BYTES;
    let mut out: Vec<Instruction> = Vec::with_capacity(found.len());
    let total = found.len();
    for (index, mut file) in found.into_iter().enumerate() {
        if room == 0 {
            let left = total - index;
            if let Some(last) = out.last_mut() {
                last.note = Some(format!(
                    "{}{left} more instruction files are left out: all of them together may hold {} KiB",
                    last.note.as_ref().map(|n| format!("{n}; ")).unwrap_or_default(),
                    MAX_TOTAL_BYTES / 1024
                ));
            }
            break;
        }
        if file.text.len() > room {
            let mut end = room;
            while !file.text.is_char_boundary(end) {
                end -= 1;
            }
            file.text.truncate(end);
            file.note =
                Some(format!("cut: all instruction files together may hold {} KiB", MAX_TOTAL_BYTES / 1024));
        }
        room -= file.text.len();
        out.push(file);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        home: PathBuf,
        protected: Protected,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let home = root.join("heron-home");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join(".env"), "KEY=sk-secret\n").expect("keys");
        let protected = Protected::new(&home, None);
        Tree { _dir: dir, root, home, protected }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn agents_md_wins_and_the_other_agents_files_stand_in_for_it() {
        let t = tree();
        let (repo, app) = (t.root.join("repo"), t.root.join("repo/app"));
        write(&repo.join("AGENTS.md"), "root");
        write(&repo.join("CLAUDE.md"), "ignored beside AGENTS.md");
        write(&app.join("GEMINI.md"), "app");
        write(&t.home.join("AGENTS.md"), "mine");
        let sources = Sources { allowed: vec![repo.clone()], home: &t.home, protected: &t.protected };
        let folders = folders(&app, &[], Some(&repo));
        assert_eq!(folders, [repo.clone(), app.clone()]);
        let read: Vec<(String, String)> =
            read_all(&folders, &sources).into_iter().map(|i| (i.path, i.text)).collect();
        assert_eq!(
            read,
            [
                (t.home.join("AGENTS.md").display().to_string(), "mine".to_owned()),
                (repo.join("AGENTS.md").display().to_string(), "root".to_owned()),
                (app.join("GEMINI.md").display().to_string(), "app".to_owned()),
            ]
        );
    }

    #[test]
    fn a_link_out_of_the_workspace_is_named_not_followed() {
        let t = tree();
        let ws = t.root.join("ws");
        write(&t.root.join("elsewhere/secret.md"), "do evil");
        std::fs::create_dir_all(&ws).expect("ws");
        std::os::unix::fs::symlink(t.root.join("elsewhere/secret.md"), ws.join("AGENTS.md")).expect("link");
        let sources = Sources { allowed: vec![ws.clone()], home: &t.home, protected: &t.protected };
        let found = in_folder(&ws, &sources).expect("named");
        assert!(found.text.is_empty(), "{found:?}");
        assert!(found.note.as_deref().is_some_and(|n| n.contains("outside the folders")), "{found:?}");
        // A link inside the workspace (CLAUDE.md to AGENTS.md, as many repositories keep) is read.
        std::fs::remove_file(ws.join("AGENTS.md")).expect("unlink");
        write(&ws.join("docs/AGENTS.md"), "shared");
        std::os::unix::fs::symlink(ws.join("docs/AGENTS.md"), ws.join("CLAUDE.md")).expect("link");
        assert_eq!(in_folder(&ws, &sources).map(|i| i.text), Some("shared".to_owned()));
    }

    #[test]
    fn the_users_own_file_never_leads_to_herons_keys() {
        let t = tree();
        std::os::unix::fs::symlink(t.home.join(".env"), t.home.join("AGENTS.md")).expect("link");
        let sources = Sources { allowed: Vec::new(), home: &t.home, protected: &t.protected };
        let read = read_all(&[], &sources);
        assert_eq!(read.len(), 1);
        assert!(!read[0].text.contains("sk-secret"), "{read:?}");
        assert!(read[0].note.as_deref().is_some_and(|n| n.starts_with("not read")), "{read:?}");
    }

    #[test]
    fn files_and_their_sum_are_bounded_with_a_note() {
        let t = tree();
        let ws = t.root.join("ws");
        write(&ws.join("AGENTS.md"), &"a".repeat(MAX_FILE_BYTES + 100));
        let sources = Sources { allowed: vec![ws.clone()], home: &t.home, protected: &t.protected };
        let one = in_folder(&ws, &sources).expect("read");
        assert_eq!(one.text.len(), MAX_FILE_BYTES);
        assert!(one.note.as_deref().is_some_and(|n| n.starts_with("cut at 16 KiB")), "{one:?}");
        let many: Vec<Instruction> = (0..4)
            .map(|n| Instruction { path: format!("/f{n}"), text: "b".repeat(MAX_FILE_BYTES), note: None })
            .collect();
        let kept = bounded(many);
        assert_eq!(kept.iter().map(|i| i.text.len()).sum::<usize>(), MAX_TOTAL_BYTES);
        assert_eq!(kept.len(), 2);
        assert!(
            kept[1].note.as_deref().is_some_and(|n| n.contains("2 more instruction files are left out")),
            "{kept:?}"
        );
    }

    #[test]
    fn only_folders_below_the_cwd_on_the_way_to_a_path_are_offered() {
        let t = tree();
        let ws = t.root.join("ws");
        write(&ws.join("a/b/file.rs"), "x");
        assert_eq!(below(&ws, &ws.join("a/b/file.rs")), [ws.join("a"), ws.join("a/b")]);
        assert_eq!(below(&ws, &ws.join("a/b")), [ws.join("a"), ws.join("a/b")]);
        assert!(below(&ws, &ws).is_empty());
        assert!(below(&ws, &t.root.join("elsewhere")).is_empty());
    }
}
