//! An `--agent` command line as the caller typed it, made to work where the agent runs: the
//! agent starts in the scenario's temporary workspace, so a program named by a relative path
//! (`./my-agent`, `bin/agent --acp`) is resolved against the caller's directory first. Only
//! that first word changes; the rest of the line goes to `sh -c` as typed.

use std::path::Path;

/// `line` with its first word made absolute against `cwd` when that word is a relative path
/// (it holds a `/`, does not start with one) to something that exists there. A word the shell
/// would expand or unquote (`~`, `$`, quotes, backslashes, globs) is left for the shell.
pub fn resolve_program(line: &str, cwd: &Path) -> String {
    let start = line.len() - line.trim_start().len();
    let rest_of_line = &line[start..];
    let end = rest_of_line.find(char::is_whitespace).unwrap_or(rest_of_line.len());
    let (word, rest) = rest_of_line.split_at(end);
    let shell_syntax = |c: char| "~$'\"\\`*?[]{}();&|<>!#=".contains(c);
    if !word.contains('/') || word.starts_with('/') || word.contains(shell_syntax) {
        return line.to_owned();
    }
    let program = cwd.join(word);
    match program.to_str() {
        Some(path) if program.exists() => format!("{}{}{rest}", &line[..start], quoted(path)),
        _ => line.to_owned(),
    }
}

/// `text` as one shell word: single-quoted, each `'` closed, escaped and reopened.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_program_that_exists_is_made_absolute_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("bin")).expect("mkdir");
        std::fs::write(dir.path().join("bin/agent"), "").expect("write");
        let resolved = resolve_program("./bin/agent --acp 'two words'", dir.path());
        let expected = format!("'{}' --acp 'two words'", dir.path().join("./bin/agent").display());
        assert_eq!(resolved, expected);
        assert_eq!(
            resolve_program("bin/agent", dir.path()),
            format!("'{}'", dir.path().join("bin/agent").display())
        );
    }

    #[test]
    fn programs_on_path_absolute_missing_or_shell_words_are_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("agent"), "").expect("write");
        for line in [
            "agent --acp",
            "/usr/bin/env agent",
            "./missing --acp",
            "~/agent",
            "$HOME/agent",
            "'./agent'",
            "",
        ] {
            assert_eq!(resolve_program(line, dir.path()), line, "{line}");
        }
    }

    #[test]
    fn a_quote_in_the_directory_is_quoted_for_the_shell() {
        assert_eq!(quoted("/tmp/it's here"), r"'/tmp/it'\''s here'");
    }
}
