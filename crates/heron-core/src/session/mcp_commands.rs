//! The slash commands of a session's MCP servers: each prompt a ready server offers is
//! `/mcp:<server>:<prompt> [arguments]`, fetched from the server when its turn starts (so
//! it keeps its place among the prompts queued before it), and `/mcp` lists the servers
//! and turns one off or on for the rest of the session.
//!
//! Arguments: `name=value` sets one by name; other words fill the prompt's arguments in
//! order; a prompt with a single argument takes the whole rest of the line. Double quotes
//! keep spaces in a value.

use serde_json::{Map, Value};

use super::commands::Invocation;
use crate::extensions::{Expansion, McpPromptCall};
use crate::tools::mcp::{McpHub, McpPrompt, ServerState};

/// The expansion of `invocation` when it names one of `prompts`: `None` when it names
/// none, an `Err` (a reply for the user) when its arguments do not fit.
pub(super) fn expand(prompts: &[McpPrompt], invocation: &Invocation) -> Option<Result<Expansion, String>> {
    let prompt = prompts.iter().find(|p| p.command() == invocation.name)?;
    Some(arguments(prompt, &invocation.argument).map(|arguments| Expansion {
        name: invocation.name.clone(),
        invoked: if invocation.argument.is_empty() {
            format!("/{}", invocation.name)
        } else {
            format!("/{} {}", invocation.name, invocation.argument)
        },
        prompt: String::new(),
        mcp: Some(McpPromptCall { server: prompt.server.clone(), name: prompt.name.clone(), arguments }),
    }))
}

/// The line's words, with double quotes keeping spaces.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut started) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

fn usage(prompt: &McpPrompt) -> String {
    let arguments: Vec<String> = prompt
        .arguments
        .iter()
        .map(|a| if a.required { format!("<{}>", a.name) } else { format!("[{}]", a.name) })
        .collect();
    format!("/{} {}", prompt.command(), arguments.join(" ")).trim_end().to_owned()
}

/// The prompt's arguments from the command line.
fn arguments(prompt: &McpPrompt, line: &str) -> Result<Map<String, Value>, String> {
    let mut given = Map::new();
    let line = line.trim();
    let named = |word: &str| {
        let (key, value) = word.split_once('=')?;
        prompt.arguments.iter().any(|a| a.name == key).then(|| (key.to_owned(), value.to_owned()))
    };
    if let [only] = prompt.arguments.as_slice()
        && !line.is_empty()
        && named(line).is_none()
    {
        given.insert(only.name.clone(), Value::String(line.to_owned()));
    } else {
        let mut positional = prompt.arguments.iter();
        for word in words(line) {
            if let Some((key, value)) = named(&word) {
                given.insert(key, Value::String(value));
                continue;
            }
            let Some(next) = positional.find(|a| !given.contains_key(&a.name)) else {
                return Err(format!("Too many arguments. Usage: {}", usage(prompt)));
            };
            given.insert(next.name.clone(), Value::String(word));
        }
    }
    if let Some(missing) = prompt.arguments.iter().find(|a| a.required && !given.contains_key(&a.name)) {
        return Err(format!("/{} needs `{}`. Usage: {}", prompt.command(), missing.name, usage(prompt)));
    }
    Ok(given)
}

/// Runs `/mcp [list | disable NAME | enable NAME]`: the reply for the user, and whether a
/// server was turned off or on.
pub(super) async fn run(hub: &McpHub, argument: &str) -> (String, bool) {
    let words = words(argument);
    match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] | ["list"] => (list(hub), false),
        [action @ ("disable" | "enable"), name] => match hub.set_enabled(name, *action == "enable").await {
            Ok(()) if *action == "enable" => (format!("MCP server `{name}` is starting again."), true),
            Ok(()) => (
                format!(
                    "MCP server `{name}` is disabled for the rest of the session; `/mcp enable {name}` turns it back on."
                ),
                true,
            ),
            Err(why) => (why, false),
        },
        _ => ("Usage: /mcp, /mcp disable <server>, /mcp enable <server>".into(), false),
    }
}

fn list(hub: &McpHub) -> String {
    let statuses = hub.statuses();
    if statuses.is_empty() {
        return "This session has no MCP servers.".into();
    }
    let prompts = hub.prompts();
    let mut lines = vec!["MCP servers:".to_owned()];
    for status in statuses {
        let state = match &status.state {
            ServerState::Ready => {
                let offered = prompts.iter().filter(|p| p.server == status.name).count();
                format!("ready, {} tools, {offered} prompts", status.tool_count)
            }
            ServerState::Connecting => "starting".into(),
            ServerState::Disabled => "disabled".into(),
            ServerState::Failed(reason) => format!("failed: {reason}"),
        };
        lines.push(format!("- {} ({}): {state}", status.name, status.transport));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::mcp::PromptArgument;

    fn prompt(arguments: &[(&str, bool)]) -> McpPrompt {
        McpPrompt {
            server: "everything".into(),
            name: "args".into(),
            description: None,
            arguments: arguments
                .iter()
                .map(|(name, required)| PromptArgument {
                    name: (*name).into(),
                    description: None,
                    required: *required,
                })
                .collect(),
        }
    }

    fn run_line(prompt: &McpPrompt, line: &str) -> Result<Map<String, Value>, String> {
        arguments(prompt, line)
    }

    #[test]
    fn arguments_come_by_name_in_order_or_as_the_whole_line() {
        let two = prompt(&[("city", true), ("state", false)]);
        let by_order = run_line(&two, "Paris \"Île de France\"").expect("fits");
        assert_eq!(by_order["city"], "Paris");
        assert_eq!(by_order["state"], "Île de France");
        let by_name = run_line(&two, "state=Texas Austin").expect("fits");
        assert_eq!((by_name["city"].as_str(), by_name["state"].as_str()), (Some("Austin"), Some("Texas")));
        assert!(run_line(&two, "").unwrap_err().contains("needs `city`"));
        assert!(run_line(&two, "a b c").unwrap_err().contains("Too many"));
        let one = prompt(&[("topic", true)]);
        assert_eq!(run_line(&one, "the whole line here").expect("fits")["topic"], "the whole line here");
    }

    #[test]
    fn only_offered_prompts_expand() {
        let offered = [prompt(&[])];
        let call = |name: &str| Invocation { name: name.into(), argument: String::new() };
        let expansion = expand(&offered, &call("mcp:everything:args")).expect("offered").expect("fits");
        assert_eq!(expansion.invoked, "/mcp:everything:args");
        assert_eq!(expansion.mcp.expect("an MCP prompt").name, "args");
        assert!(expand(&offered, &call("mcp:everything:other")).is_none());
    }
}
