//! Heron's slash commands: typed as a prompt (`/mode plan`), run by the agent itself, and
//! advertised to the editor. All but [`COMPACT`] change settings here, without a model
//! request; `/compact` asks the model for a summary, so it queues in the session like a
//! prompt ([`super::Session::compact`]).

use super::settings::{Choices, ConfigId, Settings};
use crate::extensions::Catalog;

/// A slash command as advertised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    /// The name, without the slash.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// A hint for its argument, if it takes one.
    pub hint: Option<&'static str>,
}

/// The command that lists, disables and enables MCP servers.
pub const MCP: &str = "mcp";

/// The command that compacts the conversation.
pub const COMPACT: &str = "compact";

/// The command that undoes the last turn's file changes.
pub const UNDO: &str = "undo";

/// The command that puts the files back as they were at the end of a turn.
pub const REWIND: &str = "rewind";

/// Every slash command.
pub const COMMANDS: [CommandSpec; 9] = [
    CommandSpec { name: "help", description: "List Heron's slash commands", hint: None },
    CommandSpec { name: "status", description: "Show the session's mode, model and settings", hint: None },
    CommandSpec {
        name: "mode",
        description: "Switch mode: normal, plan or goal",
        hint: Some("normal | plan | goal"),
    },
    CommandSpec { name: "model", description: "Switch the model", hint: Some("provider/model") },
    CommandSpec {
        name: "approval",
        description: "Set tool approval: readOnly, dontAsk, ask, auto or yolo",
        hint: Some("readOnly | dontAsk | ask | auto | yolo"),
    },
    CommandSpec {
        name: MCP,
        description: "List the MCP servers, or turn one off or on for this session",
        hint: Some("disable <server> | enable <server>"),
    },
    CommandSpec { name: UNDO, description: "Put back the files the last turn changed", hint: None },
    CommandSpec {
        name: REWIND,
        description: "Put back the files as they were at the end of a turn",
        hint: Some("turn number (0: before the first)"),
    },
    CommandSpec {
        name: COMPACT,
        description: "Summarize the conversation so far to free the model's context",
        hint: Some("what the summary should focus on (optional)"),
    },
];

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The command name.
    pub name: String,
    /// The rest of the line, trimmed.
    pub argument: String,
}

/// Parses a prompt that is exactly one slash command of Heron's; anything else (including
/// `/unknown` or a path like `/usr/bin`) is an ordinary prompt for the model, or a custom
/// command ([`split`], then the session's catalog).
pub fn parse(text: &str) -> Option<Invocation> {
    split(text).filter(|invocation| COMMANDS.iter().any(|c| c.name == invocation.name))
}

/// Splits a prompt that starts with `/` into the command name and the rest, trimmed,
/// whatever the name.
pub fn split(text: &str) -> Option<Invocation> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, argument) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    Some(Invocation { name: name.to_owned(), argument: argument.trim().to_owned() })
}

/// What running a command changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The reply shown to the user.
    pub reply: String,
    /// Whether settings changed (the editor is told).
    pub settings_changed: bool,
}

/// Runs `invocation` against `settings`, with `custom` the session's own commands (which
/// `/help` lists); an `Err` is a reply explaining the mistake.
pub fn run(
    invocation: &Invocation,
    settings: &mut Settings,
    choices: &Choices,
    custom: &Catalog,
) -> Result<Ran, String> {
    let arg = invocation.argument.as_str();
    let changed = |reply: String| Ok(Ran { reply, settings_changed: true });
    match invocation.name.as_str() {
        "help" => Ok(Ran { reply: help(custom), settings_changed: false }),
        "status" => Ok(Ran {
            reply: format!(
                "Mode: {}. Model: {}. Effort: {}. Preset: {}. Tool approval: {}.",
                settings.mode.id(),
                settings.model,
                settings.effort,
                settings.preset.id(),
                settings.posture.id()
            ),
            settings_changed: false,
        }),
        "mode" if !arg.is_empty() => {
            settings.apply(ConfigId::Mode, arg, choices).map_err(|e| e.to_string())?;
            changed(format!("Mode is now {}.", settings.mode.id()))
        }
        "model" if !arg.is_empty() => {
            settings.apply(ConfigId::Model, arg, choices).map_err(|e| e.to_string())?;
            changed(format!("Model is now {}.", settings.model))
        }
        "approval" if !arg.is_empty() => {
            settings.apply(ConfigId::ToolApproval, arg, choices).map_err(|e| e.to_string())?;
            changed(format!("Tool approval is now {}.", settings.posture.id()))
        }
        COMPACT => Err("/compact runs in the session, after the prompts before it".to_owned()),
        MCP => Err("/mcp runs in the session, with its servers".to_owned()),
        UNDO | REWIND => {
            Err("/undo and /rewind run in the session, after the prompts before them".to_owned())
        }
        name => Err(format!("/{name} needs an argument: try /help")),
    }
}

/// What `/status` adds about the instruction files the model was given.
pub fn instructions_line(loaded: &[String]) -> String {
    if loaded.is_empty() {
        "\nInstruction files: none (AGENTS.md, or CLAUDE.md or GEMINI.md, from the repository root down to the \
         working directory, and HERON_HOME/AGENTS.md)."
            .to_owned()
    } else {
        format!("\nInstruction files the model was given: {}.", loaded.join(", "))
    }
}

/// The `/help` reply: Heron's commands, then the session's custom ones with where each
/// comes from, so the user sees every command the editor's menu offers.
/// What `/help` adds for a session with MCP servers: `/mcp` and each server's prompts.
pub fn mcp_help(prompts: &[crate::tools::mcp::McpPrompt]) -> String {
    let mut reply = String::new();
    if let Some(c) = COMMANDS.iter().find(|c| c.name == MCP) {
        let hint = c.hint.map(|h| format!(" <{h}>")).unwrap_or_default();
        reply.push_str(&format!("\nMCP:\n- /{}{hint} — {}\n", c.name, c.description));
    }
    for prompt in prompts {
        let about = prompt.description.as_deref().unwrap_or("a prompt of the server");
        reply.push_str(&format!("- /{} — {about}\n", prompt.command()));
    }
    reply
}

fn help(custom: &Catalog) -> String {
    let mut reply = String::from("Heron's commands:\n");
    // `/mcp` and the servers' prompts are the session's to list (`mcp_help`), where it has
    // servers.
    for c in COMMANDS.iter().filter(|c| c.name != MCP) {
        let hint = c.hint.map(|h| format!(" <{h}>")).unwrap_or_default();
        reply.push_str(&format!("- /{}{hint} — {}\n", c.name, c.description));
    }
    let mut commands = custom.commands().peekable();
    if commands.peek().is_some() {
        reply.push_str("\nCustom commands:\n");
    }
    for c in commands {
        let hint = c.hint.as_ref().map(|h| format!(" {h}")).unwrap_or_default();
        reply.push_str(&format!("- /{}{hint} — {} ({})\n", c.name, c.description, c.origin.label()));
    }
    let mut skills = custom.skill_commands().peekable();
    if skills.peek().is_some() {
        reply.push_str("\nSkills:\n");
    }
    for s in skills {
        reply.push_str(&format!(
            "- /{} [arguments] — {} ({} skill)\n",
            s.name,
            s.description,
            s.origin.label()
        ));
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::settings::{Effort, Mode, Posture, Preset};

    fn settings() -> Settings {
        Settings {
            mode: Mode::Normal,
            model: "demo/demo".into(),
            effort: Effort::Auto,
            preset: Preset::Balanced,
            posture: Posture::Ask,
        }
    }

    fn choices() -> Choices {
        Choices { models: vec![("demo/demo".into(), vec![])], ceiling: None }
    }

    #[test]
    fn only_known_commands_parse() {
        assert_eq!(parse(" /mode plan ").map(|i| i.argument), Some("plan".into()));
        assert_eq!(parse("/usr/bin/env is odd"), None);
        assert_eq!(parse("please /mode plan"), None);
    }

    #[test]
    fn compact_parses_with_or_without_instructions() {
        assert_eq!(parse("/compact").map(|i| (i.name, i.argument)), Some((COMPACT.into(), String::new())));
        let focused = parse("/compact  focus on the parser ").expect("parses");
        assert_eq!(focused.argument, "focus on the parser");
    }

    #[test]
    fn mode_switches_and_reports() {
        let mut s = settings();
        let ran = run(&parse("/mode plan").expect("parses"), &mut s, &choices(), &Catalog::default())
            .expect("runs");
        assert!(ran.settings_changed);
        assert_eq!(s.mode, Mode::Plan);
    }

    #[test]
    fn a_bad_value_is_explained_and_changes_nothing() {
        let mut s = settings();
        let err = run(&parse("/approval reckless").expect("parses"), &mut s, &choices(), &Catalog::default())
            .expect_err("refused");
        assert!(err.contains("reckless"), "{err}");
        assert_eq!(s.posture, Posture::Ask);
    }
}
