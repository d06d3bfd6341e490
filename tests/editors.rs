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
//!
//! Then each snippet's shape is checked against what its editor reads: Zed's
//! `agent_servers.<name>` of `"type": "custom"`, JetBrains' `acp.json` (Zed's shape without
//! `type`), the VS Code extension's `acp.agents`, CodeCompanion's ACP adapter (its Lua table
//! read as JSON by [`lua_value`]), agent-shell's configuration list, and acpx's flags and
//! permission policy.

use std::path::{Path, PathBuf};
use std::process::Command;

use full_moon::ast::{Expression, Field, LastStmt, Stmt};
use full_moon::node::Node;
use full_moon::tokenizer::TokenType;
use serde_json::{Map, Value, json};

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

fn snippet(name: &str) -> String {
    text(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/editors").join(name))
}

fn snippet_json(name: &str) -> Value {
    serde_json::from_str(&snippet(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The one entry under `key` of a settings object, by the name the editor shows.
fn only_entry<'a>(settings: &'a Value, key: &str, file: &str) -> &'a Map<String, Value> {
    let entries = settings[key].as_object().unwrap_or_else(|| panic!("{file}: no `{key}` object"));
    assert_eq!(entries.len(), 1, "{file}: one agent under `{key}`");
    let (name, entry) = entries.iter().next().expect("one entry");
    assert_eq!(name, "Heron", "{file}");
    entry.as_object().unwrap_or_else(|| panic!("{file}: `{key}.{name}` is not an object"))
}

/// `command` is `heron`, `args` is `["acp"]`, `env` (if any) maps names to strings, and
/// nothing else but `allowed` is there.
fn launches_heron(entry: &Map<String, Value>, allowed: &[&str], file: &str) {
    assert_eq!(entry.get("command"), Some(&json!("heron")), "{file}");
    assert_eq!(entry.get("args"), Some(&json!(["acp"])), "{file}");
    if let Some(env) = entry.get("env") {
        let env = env.as_object().unwrap_or_else(|| panic!("{file}: `env` is not an object"));
        assert!(env.values().all(Value::is_string), "{file}: `env` values are strings");
    }
    for key in entry.keys() {
        assert!(
            ["command", "args", "env"].contains(&key.as_str()) || allowed.contains(&key.as_str()),
            "{file}: `{key}` is not a key its editor reads"
        );
    }
}

#[test]
fn zed_defines_a_custom_agent_server() {
    let settings = snippet_json("zed.json");
    let entry = only_entry(&settings, "agent_servers", "zed.json");
    assert_eq!(entry.get("type"), Some(&json!("custom")), "Zed reads `command` only of a custom server");
    launches_heron(entry, &["type"], "zed.json");
}

#[test]
fn jetbrains_acp_json_is_zeds_shape_without_type() {
    let settings = snippet_json("jetbrains-acp.json");
    let entry = only_entry(&settings, "agent_servers", "jetbrains-acp.json");
    launches_heron(entry, &[], "jetbrains-acp.json");
}

#[test]
fn vscode_settings_add_heron_to_the_acp_client_agents() {
    let settings = snippet_json("vscode-settings.json");
    let keys: Vec<&String> = settings.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["acp.agents"], "the ACP Client extension's setting, a dotted key at the top");
    let entry = only_entry(&settings, "acp.agents", "vscode-settings.json");
    launches_heron(entry, &[], "vscode-settings.json");
}

#[test]
fn codecompanion_gets_an_acp_adapter_named_heron_and_chats_with_it() {
    let source = snippet("neovim-codecompanion.lua");
    let setup = codecompanion_setup(&source);
    let adapter = &setup["adapters"]["acp"]["heron"]["function returns"];
    assert_eq!(adapter["name"], "heron", "{adapter}");
    assert_eq!(adapter["type"], "acp", "{adapter}");
    let commands = adapter["commands"].as_object().expect("commands");
    assert_eq!(commands.get("default"), Some(&json!(["heron", "acp"])), "{adapter}");
    for (name, command) in commands {
        assert_eq!(command.get(0), Some(&json!("heron")), "commands.{name}");
        assert_eq!(command.get(1), Some(&json!("acp")), "commands.{name}");
    }
    assert_eq!(adapter["roles"], json!({ "llm": "assistant", "user": "user" }));
    assert_eq!(adapter["parameters"]["protocolVersion"], 1, "{adapter}");
    for handler in ["setup", "auth", "form_messages", "on_exit"] {
        assert!(
            adapter["handlers"][handler].get("function returns").is_some(),
            "handlers.{handler}: {adapter}"
        );
    }
    // Recent CodeCompanion reads `interactions`; older releases named it `strategies`.
    assert_eq!(setup["interactions"]["chat"]["adapter"], "heron", "{setup}");
}

#[test]
fn the_lua_reader_turns_tables_and_functions_into_json() {
    let source = r#"require("codecompanion").setup({ a = { "x", 2, true }, f = function() return { k = "v" } end, g = function(self) end, [ "q" ] = nil })"#;
    assert_eq!(
        codecompanion_setup(source),
        json!({ "a": ["x", 2, true], "f": { "function returns": { "k": "v" } }, "g": { "function returns": null }, "q": null })
    );
}

/// The table `require("codecompanion").setup(...)` is given, as JSON.
fn codecompanion_setup(source: &str) -> Value {
    let ast = full_moon::parse(source).unwrap_or_else(|e| panic!("not Lua: {e:?}"));
    let call = ast
        .nodes()
        .stmts()
        .find_map(|stmt| match stmt {
            // The text holds the comments before it too.
            Stmt::FunctionCall(call) if call.to_string().contains("require(\"codecompanion\").setup(") => {
                Some(call)
            }
            _ => None,
        })
        .expect("a require(\"codecompanion\").setup(...) call");
    let Some(full_moon::ast::Suffix::Call(full_moon::ast::Call::AnonymousCall(args))) =
        call.suffixes().last()
    else {
        panic!("setup is not called with arguments");
    };
    match args.as_ref() {
        full_moon::ast::FunctionArgs::Parentheses { arguments, .. } => {
            lua_value(arguments.iter().next().expect("one argument"))
        }
        full_moon::ast::FunctionArgs::TableConstructor(table) => {
            lua_value(&Expression::TableConstructor(table.clone()))
        }
        other => panic!("setup is given {other}"),
    }
}

/// A Lua expression as JSON, for checking a snippet's shape: strings, numbers, booleans and
/// nil as themselves; a table with keys as an object, without keys as an array; a function
/// as `{"function returns": what its last `return` gives, or null}`. Anything else (a call,
/// a variable) as its source text.
fn lua_value(expression: &Expression) -> Value {
    match expression {
        Expression::String(token) => match token.token_type() {
            TokenType::StringLiteral { literal, .. } => json!(literal.to_string()),
            _ => json!(token.to_string()),
        },
        Expression::Number(token) => {
            let text = token.token().to_string();
            text.parse::<i64>()
                .map(|n| json!(n))
                .or_else(|_| text.parse::<f64>().map(|n| json!(n)))
                .unwrap_or(Value::Null)
        }
        Expression::Symbol(token) => match token.token().to_string().as_str() {
            "true" => json!(true),
            "false" => json!(false),
            _ => Value::Null,
        },
        Expression::TableConstructor(table) => {
            let fields: Vec<&Field> = table.fields().iter().collect();
            if fields.iter().all(|field| matches!(field, Field::NoKey(_))) {
                return fields
                    .iter()
                    .filter_map(|field| match field {
                        Field::NoKey(value) => Some(lua_value(value)),
                        _ => None,
                    })
                    .collect();
            }
            let mut object = Map::new();
            for (at, field) in fields.iter().enumerate() {
                let (key, value) = match field {
                    Field::NameKey { key, value, .. } => (key.token().to_string(), lua_value(value)),
                    Field::ExpressionKey { key, value, .. } => match lua_value(key) {
                        Value::String(key) => (key, lua_value(value)),
                        other => (other.to_string(), lua_value(value)),
                    },
                    Field::NoKey(value) => ((at + 1).to_string(), lua_value(value)),
                    other => (other.to_string(), Value::Null),
                };
                object.insert(key, value);
            }
            Value::Object(object)
        }
        Expression::Function(function) => {
            let returned = match function.body().block().last_stmt() {
                Some(LastStmt::Return(ret)) => ret.returns().iter().next().map_or(Value::Null, lua_value),
                _ => Value::Null,
            };
            json!({ "function returns": returned })
        }
        Expression::Parentheses { expression, .. } => lua_value(expression),
        other => json!(other.to_string().trim()),
    }
}

#[test]
fn agent_shell_gets_a_configuration_not_its_maker() {
    let source = snippet("emacs-agent-shell.el");
    let flat = source.split_whitespace().collect::<Vec<_>>().join(" ");
    // Releases before makers were accepted read each entry as a configuration alist, so the
    // list gets the configuration the function makes; newer ones take either.
    assert!(
        flat.contains("(add-to-list 'agent-shell-agent-configs (heron-agent-shell-config))"),
        "emacs-agent-shell.el must add the configuration, not the function: {flat}"
    );
    assert!(!flat.contains("#'heron-agent-shell-config"), "a function in the list breaks older agent-shell");
    for part in [
        "(defun heron-agent-shell-config ()",
        "(agent-shell-make-agent-config",
        ":identifier 'heron",
        ":client-maker",
        "(acp-make-client :command \"heron\" :command-params '(\"acp\")",
        "(agent-shell-make-environment-variables :inherit-env t)",
        "(agent-shell-start :config (heron-agent-shell-config))",
    ] {
        assert!(flat.contains(part), "emacs-agent-shell.el lacks `{part}`");
    }
}

/// What a rule of an acpx permission policy may name for Heron: acpx matches a rule against
/// the request's `kind` and the first word of its `title` (lowercased), or `*`. It does not
/// read the tool's `name`, so `write_file` would match nothing.
const ACPX_MATCHABLE: &[&str] =
    &["*", "read", "search", "edit", "execute", "other", "create", "write", "run", "list"];

#[test]
fn acpx_lines_approve_all_and_use_policies_that_match_heron() {
    let source = snippet("acpx.sh");
    let lines: Vec<&str> = source.lines().map(str::trim).filter(|l| l.starts_with("acpx ")).collect();
    assert!(lines.iter().any(|l| l.contains("--approve-all")), "acpx.sh shows --approve-all");
    let policies: Vec<Value> = lines
        .iter()
        .filter_map(|line| line.split_once("--policy '").map(|(_, rest)| rest))
        .map(|rest| {
            let json = rest.split_once('\'').map_or(rest, |(json, _)| json);
            serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("acpx.sh: a policy that is not JSON ({e}): {json}"))
        })
        .collect();
    assert!(!policies.is_empty(), "acpx.sh shows a --policy");
    for policy in policies {
        for list in ["autoApprove", "autoDeny", "escalate"] {
            for rule in policy[list].as_array().into_iter().flatten() {
                let rule = rule.as_str().expect("a rule is a string").to_lowercase();
                assert!(
                    ACPX_MATCHABLE.contains(&rule.as_str()),
                    "acpx.sh: `{rule}` matches no request of Heron's"
                );
            }
        }
    }
}
