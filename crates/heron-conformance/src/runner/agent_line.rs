//! An `--agent` command line as the caller typed it, made to work where the agent runs: the
//! agent starts in the scenario's temporary workspace, so paths relative to the caller's
//! directory are resolved there first: the program word when it is a relative path
//! (`./my-agent`, `bin/agent --acp`), and every other word that starts with `./` or `../`
//! (`node ./agent.mjs`). Everything else goes to `sh -c` as typed.

use std::path::Path;

/// Characters that make a word the shell's to expand or unquote, so it is left alone.
fn shell_syntax(c: char) -> bool {
    "~$'\"\\`*?[]{}();&|<>!#=".contains(c)
}

/// `line` with its relative paths made absolute against `cwd`: the first word when it holds
/// a `/` without starting with one, and any later word that starts with `./` or `../`, each
/// only when it names something that exists there. A word the shell would expand or unquote
/// (`~`, `$`, quotes, backslashes, globs) is left for the shell, and so is the whitespace.
pub fn resolve_paths(line: &str, cwd: &Path) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    let mut first = true;
    loop {
        let blank = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..blank]);
        rest = &rest[blank..];
        if rest.is_empty() {
            return out;
        }
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        let relative = if first {
            word.contains('/') && !word.starts_with('/')
        } else {
            word.starts_with("./") || word.starts_with("../")
        };
        let path = cwd.join(word);
        match path.to_str() {
            Some(absolute) if relative && !word.contains(shell_syntax) && path.exists() => {
                out.push_str(&quoted(absolute));
            }
            _ => out.push_str(word),
        }
        first = false;
        rest = after;
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
        let resolved = resolve_paths("./bin/agent --acp 'two words'", dir.path());
        let expected = format!("'{}' --acp 'two words'", dir.path().join("./bin/agent").display());
        assert_eq!(resolved, expected);
        assert_eq!(
            resolve_paths("bin/agent", dir.path()),
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
            assert_eq!(resolve_paths(line, dir.path()), line, "{line}");
        }
    }

    #[test]
    fn argument_words_starting_with_dot_slash_are_resolved_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("agent.mjs"), "").expect("write");
        std::fs::write(dir.path().join("sub/conf.json"), "").expect("write");
        let at = |name: &str| format!("'{}'", dir.path().join(name).display());
        assert_eq!(
            resolve_paths("node ./agent.mjs --acp", dir.path()),
            format!("node {} --acp", at("./agent.mjs"))
        );
        let nested = dir.path().join("sub");
        assert_eq!(
            resolve_paths("node  ../agent.mjs ./conf.json", &nested),
            format!(
                "node  '{}' '{}'",
                nested.join("../agent.mjs").display(),
                nested.join("./conf.json").display()
            )
        );
        // Not relative by the rule, missing, or the shell's: as typed.
        for line in [
            "node agent.mjs",
            "node ./missing.mjs",
            "node './agent.mjs'",
            "node ./*.mjs",
            "node sub/conf.json",
        ] {
            assert_eq!(resolve_paths(line, dir.path()), line, "{line}");
        }
    }

    #[test]
    fn a_quote_in_the_directory_is_quoted_for_the_shell() {
        assert_eq!(quoted("/tmp/it's here"), r"'/tmp/it'\''s here'");
    }
}
