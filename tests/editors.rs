//! The editor snippets in `docs/editors/`: each parses in its own language, starts
//! `heron acp`, and is named by the README, so that none of them rots unseen.
//!
//! How each kind is checked:
//!
//! - JSON (`.json`): parsed with serde_json, so it must be plain JSON (no comments, no
//!   trailing commas); some object in it has `"command": "heron"` and `"args"` starting
//!   with `"acp"`.
//! - Lua (`.lua`): parsed by full_moon, a complete Lua 5.1 parser (Neovim runs LuaJIT, which
//!   is 5.1), so a missing comma or `end` fails, not only an unbalanced bracket.
//! - Emacs Lisp (`.el`): read by [`elisp_strings`] below, a reader written for this test:
//!   parentheses and brackets must balance and match, skipping `;` comments, strings (with
//!   their backslash escapes) and character literals such as `?(` and `?\)`. It is not a
//!   full Lisp reader; it catches the mistakes that unbalance a form.
//! - Shell (`.sh`): `bash -n`, which parses without running anything.
//!
//! For Lua and Emacs Lisp, "starts `heron acp`" means the string literal `"heron"` is
//! followed directly by the string literal `"acp"`; for shell, a command line passes
//! `--agent "heron acp` to acpx.

use std::path::{Path, PathBuf};
use std::process::Command;

use full_moon::node::Node;
use full_moon::tokenizer::TokenType;
use serde_json::Value;

fn snippets() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/editors");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("docs/editors").map(|entry| entry.expect("entry").path()).collect();
    files.sort();
    assert!(files.len() >= 6, "expected a snippet per editor in {}", dir.display());
    files
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).expect("a UTF-8 name")
}

#[test]
fn every_snippet_parses_and_starts_heron_acp() {
    for path in snippets() {
        let source = text(&path);
        let name = file_name(&path);
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => {
                let value: Value =
                    serde_json::from_str(&source).unwrap_or_else(|e| panic!("{name} is not plain JSON: {e}"));
                assert!(
                    json_starts_heron_acp(&value),
                    "{name}: no object with command `heron` and args [\"acp\", ...]"
                );
            }
            Some("lua") => {
                let strings =
                    lua_strings(&source).unwrap_or_else(|e| panic!("{name} does not parse as Lua: {e}"));
                assert!(heron_then_acp(&strings), "{name}: no \"heron\" followed by \"acp\" in {strings:?}");
            }
            Some("el") => {
                let strings = elisp_strings(&source).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(heron_then_acp(&strings), "{name}: no \"heron\" followed by \"acp\" in {strings:?}");
            }
            Some("sh") => {
                let check = Command::new("bash").arg("-n").arg(&path).output().expect("bash runs");
                assert!(check.status.success(), "{name}: {}", String::from_utf8_lossy(&check.stderr));
                let runs_heron = source
                    .lines()
                    .map(str::trim)
                    .any(|line| line.starts_with("acpx ") && line.contains("--agent \"heron acp"));
                assert!(runs_heron, "{name}: no `acpx --agent \"heron acp ...\"` line");
            }
            _ => panic!("{name}: no check for this kind of file; add one to tests/editors.rs"),
        }
    }
}

#[test]
fn the_readme_names_every_snippet() {
    let readme = text(&Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    for path in snippets() {
        let reference = format!("docs/editors/{}", file_name(&path));
        assert!(readme.contains(&reference), "README.md does not mention {reference}");
    }
}

/// Whether some object in `value` launches `heron` (by name or path) with `acp` first.
fn json_starts_heron_acp(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            let command = map.get("command").and_then(Value::as_str);
            let first_arg = map.get("args").and_then(|args| args.get(0)).and_then(Value::as_str);
            let is_heron = command.is_some_and(|c| c == "heron" || c.ends_with("/heron"));
            (is_heron && first_arg == Some("acp")) || map.values().any(json_starts_heron_acp)
        }
        Value::Array(items) => items.iter().any(json_starts_heron_acp),
        _ => false,
    }
}

fn heron_then_acp(strings: &[String]) -> bool {
    strings.windows(2).any(|pair| pair[0] == "heron" && pair[1] == "acp")
}

/// The string literals of a Lua chunk, in order, once it parses.
fn lua_strings(source: &str) -> Result<Vec<String>, String> {
    // The first error is the one to fix; the rest usually follow from it.
    let ast = full_moon::parse(source).map_err(|errors| match errors.first() {
        Some(first) => format!("line {}: {}", first.range().0.line(), first.error_message()),
        None => "unparsable".to_owned(),
    })?;
    Ok(ast
        .nodes()
        .tokens()
        .filter_map(|token| match token.token_type() {
            TokenType::StringLiteral { literal, .. } => Some(literal.to_string()),
            _ => None,
        })
        .collect())
}

/// The string literals of Emacs Lisp source, in order, once its brackets balance.
fn elisp_strings(source: &str) -> Result<Vec<String>, String> {
    let mut open: Vec<(char, usize)> = Vec::new();
    let mut strings = Vec::new();
    let mut chars = source.chars().peekable();
    let mut line = 1;
    // Whether the last character ended a token, so that `?` starts a character literal.
    let mut at_token_start = true;
    while let Some(c) = chars.next() {
        let mut token_start = false;
        match c {
            '\n' => {
                line += 1;
                token_start = true;
            }
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
                token_start = true;
            }
            '"' => {
                let start = line;
                let mut literal = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("the string opened on line {start} is not closed")),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('\n') => line += 1,
                            Some(escaped) => literal.push(escaped),
                            None => return Err(format!("the string opened on line {start} is not closed")),
                        },
                        Some(other) => {
                            if other == '\n' {
                                line += 1;
                            }
                            literal.push(other);
                        }
                    }
                }
                strings.push(literal);
                token_start = true;
            }
            '?' if at_token_start => skip_character_literal(&mut chars),
            '\\' => {
                // An escaped character inside a symbol, such as `foo\(bar`.
                chars.next();
            }
            '(' | '[' => {
                open.push((c, line));
                token_start = true;
            }
            ')' | ']' => {
                let expected = if c == ')' { '(' } else { '[' };
                match open.pop() {
                    Some((opener, _)) if opener == expected => {}
                    Some((opener, opened)) => {
                        return Err(format!(
                            "line {line}: `{c}` closes the `{opener}` opened on line {opened}"
                        ));
                    }
                    None => return Err(format!("line {line}: `{c}` closes nothing")),
                }
                token_start = true;
            }
            '\'' | '`' | ',' | '@' => token_start = true,
            c if c.is_whitespace() => token_start = true,
            _ => {}
        }
        at_token_start = token_start;
    }
    match open.last() {
        Some((opener, opened)) => Err(format!("the `{opener}` opened on line {opened} is not closed")),
        None => Ok(strings),
    }
}

/// Skips the rest of a character literal after its `?`: `?x`, or `?\x` for the characters
/// that need escaping, such as `?\(`.
fn skip_character_literal(chars: &mut impl Iterator<Item = char>) {
    if chars.next() == Some('\\') {
        chars.next();
    }
}

#[test]
fn the_elisp_reader_catches_what_unbalances_a_form() {
    let read = |source: &str| elisp_strings(source).map(|strings| strings.len());
    assert_eq!(read("(a \"(\" ?\\) ?( b) ; a ( comment\n[c]"), Ok(1));
    assert_eq!(read("(message \"say \\\"hi\\\" (\")"), Ok(1));
    assert!(read("(a (b)").is_err(), "an unclosed form");
    assert!(read("(a))").is_err(), "a closer too many");
    assert!(read("(a [b)]").is_err(), "mismatched brackets");
    assert!(read("(a \"b)").is_err(), "an unclosed string");
    assert!(read("(a ; b)\n").is_err(), "a closer inside a comment does not count");
}

#[test]
fn the_lua_check_catches_a_missing_comma() {
    assert!(lua_strings("local t = { \"heron\", \"acp\" }").is_ok());
    assert!(lua_strings("local t = { \"heron\" \"acp\" }").is_err());
    assert!(lua_strings("local f = function() return 1").is_err(), "a missing `end`");
}
