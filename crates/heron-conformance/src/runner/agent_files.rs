//! What the agent a conformance run tests may read besides the system folders and the
//! scenario's own: the files of its program and of the interpreter that runs it, found from
//! the `--agent` command line. That line is the caller's, not the transcript's, so what it
//! names is trusted; what the agent then reads is not.
//!
//! A program's files are the folder it lies in, or for a Node package the folder holding
//! its outermost `node_modules` (where npm and npx put a package with its dependencies), or
//! for a Python virtual environment the environment's folder. A folder that holds the
//! user's home or the temp folder is never granted whole: the program file alone is.

use std::path::{Component, Path, PathBuf};

/// How deep interpreters are followed (`#!/usr/bin/env node`, and node's own, if a script).
const INTERPRETER_DEPTH: usize = 2;

/// What the shell command `line` needs to read: for its first word (found on `PATH` when it
/// has no `/`) and for every other word that names an existing absolute path, the files of
/// that program and its interpreter.
pub(super) fn of_line(line: &str) -> Vec<PathBuf> {
    let words = words(line);
    let mut files = Vec::new();
    for (index, word) in words.iter().enumerate() {
        let path = if index == 0 && !word.contains('/') { on_path(word) } else { Some(PathBuf::from(word)) };
        if let Some(path) = path.filter(|path| path.is_absolute() && path.exists()) {
            of_program(&path, INTERPRETER_DEPTH, &mut files);
        }
    }
    files
}

/// The files of the program at `path` and, `depth` levels down, of its interpreter.
fn of_program(path: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        push_folder(path, path, files);
        return;
    }
    if let Some(folder) = path.parent() {
        push_folder(&install_folder(folder), path, files);
    }
    let Ok(real) = std::fs::canonicalize(path) else { return };
    if let Some(folder) = real.parent() {
        push_folder(&install_folder(folder), &real, files);
    }
    if depth > 0
        && let Some(interpreter) = interpreter(&real)
    {
        of_program(&interpreter, depth - 1, files);
    }
}

/// Where a program in `folder` is installed with what it loads: the folder holding the
/// outermost `node_modules` on the way, a virtual environment's folder for its `bin`, or
/// else `folder` itself.
fn install_folder(folder: &Path) -> PathBuf {
    let mut above_modules = PathBuf::new();
    for component in folder.components() {
        if component == Component::Normal("node_modules".as_ref()) {
            return above_modules;
        }
        above_modules.push(component);
    }
    match folder.parent() {
        Some(environment) if folder.ends_with("bin") && environment.join("pyvenv.cfg").is_file() => {
            environment.to_path_buf()
        }
        _ => folder.to_path_buf(),
    }
}

/// Adds `folder`, or `program` alone when the folder would hold the user's home or the temp
/// folder (a script kept in `~` or `/tmp` must not open either to the agent).
fn push_folder(folder: &Path, program: &Path, files: &mut Vec<PathBuf>) {
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let folder = canonical(folder);
    let too_wide =
        [std::env::var_os("HOME").map(PathBuf::from), Some(std::env::temp_dir()), Some("/tmp".into())]
            .into_iter()
            .flatten()
            .any(|private| canonical(&private).starts_with(&folder));
    let granted = if too_wide { program.to_path_buf() } else { folder };
    if !files.contains(&granted) {
        files.push(granted);
    }
}

/// The interpreter a script's `#!` line names, found on `PATH` behind `env`.
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).and_then(|mut file| file.read(&mut head)).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let named = PathBuf::from(words.next()?);
    if named.file_name().is_some_and(|name| name == "env") {
        // `env -S node --flag`, `env NODE_OPTIONS=... node`: the first plain word.
        let program = words.find(|word| !word.starts_with('-') && !word.contains('='))?;
        return on_path(program);
    }
    Some(named)
}

/// The first executable file named `program` in a folder of `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|folder| folder.join(program)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// The words of a shell command line, unquoted the simple way (single quotes, double quotes
/// with `\"`, backslashes elsewhere). Good enough to find the paths a line names; the shell
/// still runs the line as typed.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let text = word.get_or_insert_with(String::new);
                text.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let text = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => text.extend(chars.next()),
                        c => text.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    #[test]
    fn words_are_unquoted_as_the_shell_would() {
        assert_eq!(
            words(r#"'/a b/it'\''s' --x "q \" r" plain\ word"#),
            ["/a b/it's", "--x", "q \" r", "plain word"]
        );
        assert!(words("  ").is_empty());
    }

    #[test]
    fn a_package_is_read_from_above_its_outermost_node_modules() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        let script = base.join("npx/abc/node_modules/@scope/agent/dist/index.js");
        // No `#!` line: the interpreter's folders would follow.
        executable(&script, "console.log()\n");
        std::fs::create_dir_all(base.join("npx/abc/node_modules/.bin")).expect(".bin");
        let link = base.join("npx/abc/node_modules/.bin/agent");
        std::os::unix::fs::symlink(&script, &link).expect("link");
        let files = of_line(&format!("'{}' --acp", link.display()));
        assert_eq!(files, [base.join("npx/abc")], "{files:?}");
    }

    #[test]
    fn an_interpreter_behind_env_is_found_on_path_with_its_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        let agent = base.join("agent/run.py");
        executable(&agent, "#!/usr/bin/env -S python3 -u\nprint()\n");
        let files = of_line(&format!("{} --flag /no/such/file", agent.display()));
        assert_eq!(files.first(), Some(&base.join("agent")), "{files:?}");
        let venv = base.join("venv");
        executable(&venv.join("bin/python3"), "");
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").expect("pyvenv.cfg");
        let files = of_line(&format!("{} {}", venv.join("bin/python3").display(), agent.display()));
        assert_eq!(files[..2], [venv, base.join("agent")], "{files:?}");
    }

    #[test]
    fn a_script_in_the_temp_folder_is_granted_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let temp = std::fs::canonicalize(std::env::temp_dir()).expect("temp");
        let script = std::fs::canonicalize(dir.path()).expect("canonical").join("agent.sh");
        executable(&script, "#!/bin/sh\n");
        let mut files = Vec::new();
        push_folder(&temp, &script, &mut files);
        assert_eq!(files, [script]);
    }

    #[test]
    fn a_shebang_is_read_within_256_bytes_and_followed_two_deep() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        // A `#!` line past 256 bytes is read only that far: the interpreter it names is cut.
        let long = format!("/{}", "d".repeat(300));
        executable(&base.join("long"), &format!("#!{long}/node\n"));
        let named = interpreter(&base.join("long")).expect("a name");
        assert!(named.as_os_str().len() <= 254, "{}", named.display());
        // A chain of scripts in folders of their own, each run by the next: the script's
        // interpreter and that one's are followed, not a third.
        executable(&base.join("c/run"), "#!/bin/sh\n");
        executable(&base.join("b/run"), &format!("#!{}\n", base.join("c/run").display()));
        executable(&base.join("a/run"), &format!("#!{}\n", base.join("b/run").display()));
        let files = of_line(&base.join("a/run").display().to_string());
        assert_eq!(files, [base.join("a"), base.join("b"), base.join("c")], "two deep, not three");
    }
}
