//! The files other programs run or obey later, outside the sandbox, whenever the user works:
//! git's hooks and config (in a `.git` folder, in any folder that is a git directory by its
//! contents, in `.husky/`, or where the repository's `core.hooksPath` points), direnv's
//! `.envrc`, editors' task and launch files, and the project scripts editors run when they
//! open a folder. A write to one is asked in every posture, with a title that says why.
//!
//! Judged on the resolved path, with a few bounded reads (the names beside it, the
//! repository's config up to 64 KiB), as the tools already check whether a file exists.

use std::path::{Path, PathBuf};

/// Why git's hooks and config matter (kept word for word: transcripts show it).
pub(crate) const GIT: &str = "in .git: git runs its hooks and obeys its config outside the sandbox";
const GIT_DIR: &str = "in a git directory: git runs its hooks and obeys its config outside the sandbox";
const HUSKY: &str = "a git hook: git runs it outside the sandbox";
const HOOKS_PATH: &str = "in the repository's hooks folder (core.hooksPath): git runs it outside the sandbox";
const ENVRC: &str = "direnv runs .envrc when you enter the folder, outside the sandbox";
const TASKS: &str = "an editor task or launch file: your editor runs what it names, outside the sandbox";
const EXRC: &str = "Neovim and Vim run this file when they open the folder (exrc), outside the sandbox";

/// Editor files, by their path's last components.
const EDITOR_FILES: [(&[&str], &str); 9] = [
    (&[".vscode", "tasks.json"], TASKS),
    (&[".vscode", "launch.json"], TASKS),
    (&[".vscode", "settings.json"], TASKS),
    (&[".zed", "tasks.json"], TASKS),
    (&[".zed", "settings.json"], TASKS),
    (&[".idea", "workspace.xml"], TASKS),
    (&[".nvim.lua"], EXRC),
    (&[".nvimrc"], EXRC),
    (&[".exrc"], EXRC),
];

/// How far up a git directory is looked for (`objects/ab/...` is two below it).
const GIT_DIR_DEPTH: usize = 4;

/// The most of a repository's config read for `core.hooksPath`.
const MAX_CONFIG: u64 = 64 * 1024;

/// Why a write of `path` (absolute, resolved) is asked in every posture, if it is.
pub(crate) fn why(path: &Path) -> Option<&'static str> {
    let names: Vec<&std::ffi::OsStr> = path.components().map(|c| c.as_os_str()).collect();
    if names.iter().any(|name| *name == ".git") {
        return Some(GIT);
    }
    if names.iter().any(|name| *name == ".husky") {
        return Some(HUSKY);
    }
    if path.file_name().is_some_and(|name| name == ".envrc") {
        return Some(ENVRC);
    }
    for (tail, reason) in EDITOR_FILES {
        if names.len() >= tail.len()
            && names[names.len() - tail.len()..].iter().zip(tail).all(|(a, b)| a == b)
        {
            return Some(reason);
        }
    }
    if in_git_dir(path) {
        return Some(GIT_DIR);
    }
    in_hooks_path(path).then_some(HOOKS_PATH)
}

/// Whether `path` lies in a folder that is (or becomes, with this write) a git directory:
/// `HEAD`, `config` and `objects/` side by side, whatever the folder is called.
fn in_git_dir(path: &Path) -> bool {
    path.ancestors().skip(1).take(GIT_DIR_DEPTH).any(|dir| {
        let has = |name: &str, is_dir: bool| {
            path.starts_with(dir.join(name))
                || std::fs::metadata(dir.join(name)).is_ok_and(|m| m.is_dir() == is_dir)
        };
        has("HEAD", false) && has("config", false) && has("objects", true)
    })
}

/// Whether `path` lies in the folder the enclosing repository's `core.hooksPath` names.
fn in_hooks_path(path: &Path) -> bool {
    let Some(repo) = path.ancestors().skip(1).find(|dir| dir.join(".git").exists()) else { return false };
    hooks_path(&repo.join(".git/config")).is_some_and(|hooks| path.starts_with(repo.join(hooks)))
}

/// The `hooksPath` of a git config's `[core]` section, read up to [`MAX_CONFIG`].
fn hooks_path(config: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(config).ok()?.take(MAX_CONFIG).read_to_string(&mut text).ok()?;
    let mut in_core = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line.trim_start_matches('[').trim_end_matches(']').trim().eq_ignore_ascii_case("core");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        if in_core && key.trim().eq_ignore_ascii_case("hookspath") {
            let value = value.trim().trim_matches('"');
            return (!value.is_empty()).then(|| PathBuf::from(value));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_folders_hooks_envrc_and_editor_tasks_are_named_with_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = std::fs::canonicalize(dir.path()).expect("canonical");
        assert_eq!(why(&ws.join(".git/hooks/pre-commit")), Some(GIT));
        assert_eq!(why(&ws.join(".husky/pre-push")), Some(HUSKY));
        assert_eq!(why(&ws.join("sub/.envrc")), Some(ENVRC));
        assert_eq!(why(&ws.join(".vscode/tasks.json")), Some(TASKS));
        assert_eq!(why(&ws.join(".zed/tasks.json")), Some(TASKS));
        assert_eq!(why(&ws.join(".nvim.lua")), Some(EXRC));
        assert_eq!(why(&ws.join("src/main.rs")), None);
        assert_eq!(why(&ws.join("docs/tasks.json")), None);
    }

    #[test]
    fn a_folder_that_is_a_git_directory_by_its_contents_is_one_whatever_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = std::fs::canonicalize(dir.path()).expect("canonical");
        let made = ws.join("innocent");
        std::fs::create_dir_all(made.join("objects")).expect("objects");
        std::fs::write(made.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        // The write that completes it is caught, and so is everything once it is one.
        assert_eq!(why(&made.join("config")), Some(GIT_DIR));
        std::fs::write(made.join("config"), "[core]\n").expect("config");
        assert_eq!(why(&made.join("hooks/post-checkout")), Some(GIT_DIR));
        assert_eq!(why(&ws.join("elsewhere/config")), None);
    }

    #[test]
    fn the_folder_core_hooks_path_names_is_a_hooks_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(repo.join(".git")).expect("git");
        std::fs::write(repo.join(".git/config"), "[core]\n\tbare = false\n\thooksPath = \"tools/hooks\"\n")
            .expect("config");
        assert_eq!(why(&repo.join("tools/hooks/pre-commit")), Some(HOOKS_PATH));
        assert_eq!(why(&repo.join("tools/build.sh")), None);
    }

    #[test]
    fn hooks_path_past_the_config_cap_and_git_folders_past_the_depth_are_not_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(repo.join(".git")).expect("git");
        let config = |padding: usize| {
            let text = format!("# {}\n[core]\n\thooksPath = tools/hooks\n", "x".repeat(padding));
            std::fs::write(repo.join(".git/config"), text).expect("config");
        };
        let hook = repo.join("tools/hooks/pre-commit");
        config(MAX_CONFIG as usize - 100);
        assert_eq!(why(&hook), Some(HOOKS_PATH), "within the cap the key is read");
        config(MAX_CONFIG as usize);
        assert_eq!(why(&hook), None, "the config past 64 KiB is not read");

        let made = repo.join("made");
        std::fs::create_dir_all(made.join("objects")).expect("objects");
        std::fs::write(made.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(made.join("config"), "[core]\n").expect("config");
        assert_eq!(why(&made.join("a/b/c/file")), Some(GIT_DIR), "four levels up is looked at");
        assert_eq!(why(&made.join("a/b/c/d/file")), None, "five levels up is not");
    }
}
