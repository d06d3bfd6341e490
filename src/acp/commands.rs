//! Slash commands on the wire: the `available_commands_update` a session's commands go out
//! as (Heron's own, then its custom ones, then its skills, then its MCP servers' prompts,
//! each custom, skill or MCP
//! one naming its source in `_meta.heron.source`, and the files that could not be used in `_meta.heron.problems`),
//! and the problems' shape, which `_heron/session/reloadExtensions` answers with and the
//! session status carries too.

use serde_json::{Map, Value, json};

use heron_core::extensions::{Catalog, Origin, Problem};
use heron_core::session::Session;
use heron_core::session::commands::{self, COMMANDS, Invocation};
use heron_core::session::settings::SettingError;
use heron_core::tools::mcp::{McpHub, McpPrompt};
use heron_protocol::{self as p, SessionUpdate};

/// The longest problem message sent, in bytes.
const MAX_PROBLEM: usize = 1024;

/// The most problems sent at once; the log has all of them.
const MAX_PROBLEMS: usize = 50;

fn hint(text: &str) -> p::AvailableCommandInput {
    p::AvailableCommandInput(p::UnstructuredCommandInput { hint: text.to_owned(), meta: None })
}

/// The slash command an MCP server's prompt is, with its arguments as the hint.
pub fn prompt_hint(prompt: &McpPrompt) -> Option<String> {
    let arguments: Vec<String> = prompt
        .arguments
        .iter()
        .map(|a| if a.required { format!("<{}>", a.name) } else { format!("[{}]", a.name) })
        .collect();
    (!arguments.is_empty()).then(|| arguments.join(" "))
}

/// The description an MCP server's prompt is advertised with.
pub fn prompt_description(prompt: &McpPrompt) -> String {
    match &prompt.description {
        Some(description) if !description.is_empty() => {
            format!("{description} (MCP server `{}`)", prompt.server)
        }
        _ => format!("The `{}` prompt of the MCP server `{}`", prompt.name, prompt.server),
    }
}

/// Heron's own commands a session offers: `/mcp` only where there are MCP servers.
pub fn builtins(mcp: &McpHub) -> impl Iterator<Item = &'static commands::CommandSpec> {
    let has_servers = !mcp.is_empty();
    COMMANDS.iter().filter(move |c| has_servers || c.name != commands::MCP)
}

/// Every command of a session with `catalog` and the MCP servers of `mcp` (with their
/// prompts), Heron's own first.
pub fn available(catalog: &Catalog, mcp: &McpHub) -> Vec<p::AvailableCommand> {
    let prompts = mcp.prompts();
    let builtin = builtins(mcp).map(|c| p::AvailableCommand {
        description: c.description.to_owned(),
        input: c.hint.map(hint),
        meta: None,
        name: c.name.to_owned(),
    });
    let custom = catalog.commands().map(|c| {
        let source = match &c.origin {
            Origin::Project => json!({ "source": "project" }),
            Origin::User => json!({ "source": "user" }),
            Origin::Plugin(name) => json!({ "source": "plugin", "plugin": name }),
        };
        p::AvailableCommand {
            description: c.description.clone(),
            input: c.hint.as_deref().map(hint),
            meta: json!({ "heron": source }).as_object().cloned(),
            name: c.name.clone(),
        }
    });
    let skills = catalog.skill_commands().map(|skill| p::AvailableCommand {
        description: skill.description.clone(),
        input: Some(hint("[arguments]")),
        meta: json!({ "heron": { "source": "skill", "origin": skill.origin.label() } }).as_object().cloned(),
        name: skill.name.clone(),
    });
    let mcp = prompts.iter().map(|prompt| p::AvailableCommand {
        description: prompt_description(prompt),
        input: prompt_hint(prompt).as_deref().map(hint),
        meta: json!({ "heron": { "source": "mcp", "server": prompt.server } }).as_object().cloned(),
        name: prompt.command(),
    });
    builtin.chain(custom).chain(skills).chain(mcp).collect()
}

/// Runs one of Heron's own commands on `session`, whichever protocol version asked: the
/// reply for the user, and whether the settings changed. A refused command changes nothing.
pub(super) async fn run_here(session: &Session, invocation: &Invocation) -> (String, bool) {
    if invocation.name == commands::MCP {
        return session.mcp_command(&invocation.argument).await;
    }
    let mut outcome = None;
    let custom = session.commands();
    let result = session
        .configure(|settings, choices| {
            outcome = Some(commands::run(invocation, settings, choices, &custom));
            // Failing the change rolls it back.
            match &outcome {
                Some(Err(reason)) => Err(SettingError::Refused(reason.clone())),
                _ => Ok(()),
            }
        })
        .await;
    match (outcome, result) {
        (Some(Ok(ran)), Ok(_)) if invocation.name == "help" && !session.mcp().is_empty() => {
            (ran.reply + &commands::mcp_help(&session.mcp().prompts()), ran.settings_changed)
        }
        (Some(Ok(ran)), Ok(_)) if invocation.name == "status" => {
            let loaded = session.status().1.instructions;
            (ran.reply + &commands::instructions_line(&loaded), ran.settings_changed)
        }
        (Some(Ok(ran)), Ok(_)) => (ran.reply, ran.settings_changed),
        (Some(Err(reason)), _) => (reason, false),
        (_, Err(err)) => (err.to_string(), false),
        (None, Ok(_)) => (String::new(), false),
    }
}

/// The update that advertises a session's commands.
pub fn update(catalog: &Catalog, mcp: &McpHub) -> SessionUpdate {
    SessionUpdate::AvailableCommandsUpdate(p::AvailableCommandsUpdate {
        available_commands: available(catalog, mcp),
        meta: meta(catalog),
    })
}

/// `_meta` with `heron.problems`, when there are any.
pub fn meta(catalog: &Catalog) -> Option<Map<String, Value>> {
    if catalog.problems().is_empty() {
        return None;
    }
    json!({ "heron": { "problems": problems(catalog.problems()) } }).as_object().cloned()
}

/// Problems as `{file, line?, message}` objects, at most [`MAX_PROBLEMS`].
pub fn problems(problems: &[Problem]) -> Value {
    serde_json::to_value(wire_problems(problems)).unwrap_or_default()
}

/// Problems as the session status shows them: at most [`MAX_PROBLEMS`], each message
/// clipped to [`MAX_PROBLEM`] bytes.
pub fn wire_problems(problems: &[Problem]) -> Vec<p::HeronExtensionProblem> {
    problems
        .iter()
        .take(MAX_PROBLEMS)
        .map(|problem| p::HeronExtensionProblem {
            file: problem.file.display().to_string(),
            line: problem.line.map(|line| u32::try_from(line).unwrap_or(u32::MAX)),
            message: heron_core::secret::clip(&problem.message, MAX_PROBLEM),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_come_first_and_problems_only_when_there_are_some() {
        let catalog = Catalog::default();
        let SessionUpdate::AvailableCommandsUpdate(update) = update(&catalog, &McpHub::empty()) else {
            panic!("not commands")
        };
        // `/mcp` is offered only where a session has MCP servers.
        assert_eq!(update.available_commands.len(), COMMANDS.len() - 1);
        assert!(update.available_commands.iter().all(|c| c.name != commands::MCP));
        assert_eq!(update.available_commands[0].name, "help");
        assert!(update.meta.is_none());
        let shown = problems(&[Problem::at("/x/a.md", 3, "bad"), Problem::new("/x/b.md", "worse")]);
        assert_eq!(
            shown,
            json!([{ "file": "/x/a.md", "line": 3, "message": "bad" }, { "file": "/x/b.md", "message": "worse" }])
        );
    }

    #[test]
    fn problems_past_the_limit_are_not_sent_and_long_messages_are_clipped() {
        let mut all: Vec<Problem> =
            (0..MAX_PROBLEMS + 10).map(|n| Problem::new(format!("/x/{n}.md"), "bad")).collect();
        all[0].message = "é".repeat(MAX_PROBLEM);
        let sent = wire_problems(&all);
        assert_eq!(sent.len(), MAX_PROBLEMS, "the first 50 are sent");
        assert_eq!(sent[MAX_PROBLEMS - 1].file, format!("/x/{}.md", MAX_PROBLEMS - 1));
        let clipped = &sent[0].message;
        assert!(clipped.len() <= MAX_PROBLEM && clipped.ends_with('…'), "{} bytes", clipped.len());
        assert_eq!(sent[1].message, "bad", "a short message is sent whole");
    }
}
