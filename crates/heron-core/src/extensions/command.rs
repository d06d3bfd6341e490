//! A custom slash command: a prompt template with a name, a description and an argument
//! hint, from a markdown file or a plugin's action. Running one is a prompt: the template
//! with `$ARGUMENTS` replaced by what followed the command (or, when the template never
//! says `$ARGUMENTS`, with that text added after it, so nothing typed is dropped).

use std::path::PathBuf;

/// The longest command name, in characters.
pub(super) const MAX_NAME: usize = 64;

/// The largest prompt a command expands to, in bytes: a template that repeats
/// `$ARGUMENTS` cannot multiply a long argument without bound.
pub(super) const MAX_EXPANDED: usize = 4 * 1024 * 1024;

/// Where a custom command comes from; it decides which wins a name clash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `.heron/commands/` of the session's project.
    Project,
    /// `HERON_HOME/commands/`.
    User,
    /// An action of the plugin so named.
    Plugin(String),
}

impl Origin {
    /// How it is named to the user: `project`, `user` or `plugin NAME`.
    pub fn label(&self) -> String {
        match self {
            Origin::Project => "project".to_owned(),
            Origin::User => "user".to_owned(),
            Origin::Plugin(name) => format!("plugin {name}"),
        }
    }
}

/// A custom slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// The name, without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// A hint for its argument, if the file or action gives one.
    pub hint: Option<String>,
    /// The prompt, with `$ARGUMENTS` where the argument goes.
    pub template: String,
    /// Where it comes from.
    pub origin: Origin,
    /// The file that defines it.
    pub file: PathBuf,
}

/// A command ready to run as a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expansion {
    /// The command's name.
    pub name: String,
    /// The line as the user typed it (`/name argument`): what the conversation shows.
    pub invoked: String,
    /// What the model is sent (empty for an MCP prompt, fetched when its turn starts).
    pub prompt: String,
    /// The MCP server's prompt it stands for, if it is one.
    pub mcp: Option<McpPromptCall>,
}

/// An MCP server's prompt, to fetch when its turn starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptCall {
    /// The server's name.
    pub server: String,
    /// The prompt's name on the server.
    pub name: String,
    /// Its arguments.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

impl CustomCommand {
    /// The prompt for `argument` (trimmed); an error says why it is refused.
    pub fn expand(&self, argument: &str) -> Result<Expansion, String> {
        let argument = argument.trim();
        let uses = self.template.matches("$ARGUMENTS").count();
        let size = if uses == 0 {
            self.template.len() + 2 + argument.len()
        } else {
            argument.len().saturating_mul(uses).saturating_add(self.template.len())
        };
        if size > MAX_EXPANDED {
            return Err(format!(
                "/{} would expand to more than {} MiB; give it a shorter argument",
                self.name,
                MAX_EXPANDED / (1024 * 1024)
            ));
        }
        let prompt = if uses > 0 {
            self.template.replace("$ARGUMENTS", argument)
        } else if argument.is_empty() {
            self.template.clone()
        } else {
            format!("{}\n\n{argument}", self.template.trim_end())
        };
        let invoked = if argument.is_empty() {
            format!("/{}", self.name)
        } else {
            format!("/{} {argument}", self.name)
        };
        Ok(Expansion { name: self.name.clone(), invoked, prompt, mcp: None })
    }
}

/// Checks a command name: 1 to [`MAX_NAME`] lowercase ASCII letters, digits, `-`, `_` and
/// `:`, starting with a letter or digit. An error says why, for the user.
pub fn valid_name(name: &str) -> Result<(), String> {
    check(name, true)
}

/// Checks a plugin's or an action's name: as [`valid_name`], without `:` (which joins them).
pub(super) fn valid_part(name: &str) -> Result<(), String> {
    check(name, false)
}

fn check(name: &str, colon: bool) -> Result<(), String> {
    let allowed =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || (colon && c == ':');
    let starts_well = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() || name.chars().count() > MAX_NAME || !starts_well || !name.chars().all(allowed) {
        let extra = if colon { ", `_` and `:`" } else { " and `_`" };
        return Err(format!(
            "`{name}` is not a usable name: at most {MAX_NAME} lowercase letters, digits, `-`{extra}, starting \
             with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(template: &str) -> CustomCommand {
        CustomCommand {
            name: "review".into(),
            description: "Review".into(),
            hint: None,
            template: template.into(),
            origin: Origin::Project,
            file: PathBuf::from("review.md"),
        }
    }

    #[test]
    fn arguments_replace_every_placeholder() {
        let expanded =
            command("Review $ARGUMENTS, then $ARGUMENTS again.").expand("  src/a.rs ").expect("ok");
        assert_eq!(expanded.prompt, "Review src/a.rs, then src/a.rs again.");
        assert_eq!(expanded.invoked, "/review src/a.rs");
    }

    #[test]
    fn a_template_without_the_placeholder_gets_the_argument_after_it() {
        assert_eq!(
            command("Review the diff.\n").expand("carefully").expect("ok").prompt,
            "Review the diff.\n\ncarefully"
        );
        assert_eq!(command("Review the diff.\n").expand("").expect("ok").prompt, "Review the diff.\n");
    }

    #[test]
    fn an_expansion_past_its_budget_is_refused() {
        let long = "x".repeat(MAX_EXPANDED / 2);
        assert!(command("$ARGUMENTS $ARGUMENTS $ARGUMENTS").expand(&long).is_err());
    }

    #[test]
    fn names_are_lowercase_words_with_dashes_underscores_and_colons() {
        assert!(valid_name("git:review_2-fast").is_ok());
        for bad in ["", "Review", "-x", "a b", "é", "a/b", &"a".repeat(MAX_NAME + 1)] {
            assert!(valid_name(bad).is_err(), "{bad}");
        }
        assert!(valid_part("a:b").is_err());
    }
}
