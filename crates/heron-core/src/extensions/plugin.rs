//! Plugins: `HERON_HOME/plugins/<name>/plugin.toml`, each declaring prompt actions (the
//! commands `/<plugin>:<action>`) and stdio MCP servers (started for every session like the
//! editor's, in the same sandbox, named `<plugin>:<server>`, unless `enabled = false` turns
//! one off: then it is listed `disabled` and never started). The file is read strictly: an
//! unknown key, a bad name or a missing prompt makes the plugin unusable, and the problem
//! names the file and line. A broken plugin is reported, never fatal; the others load.
//!
//! ```toml
//! description = "Helpers for the docs"
//!
//! [actions.summarize]
//! description = "Summarize a file"
//! argument_hint = "path"
//! prompt = "Summarize $ARGUMENTS in five bullet points."
//!
//! [mcp_servers.search]
//! command = "docs-search"
//! args = ["--stdio"]
//! env = { DOCS_INDEX = "/srv/docs" }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::command::{CustomCommand, Origin, valid_part};
use super::files::{self, Kind};
use super::{MAX_PLUGINS, Problem, line_at};
use crate::tools::protected::Protected;

/// The most actions one plugin declares.
const MAX_ACTIONS: usize = 64;
/// The most MCP servers one plugin declares.
const MAX_SERVERS: usize = 16;
/// The longest description or argument hint kept, in bytes.
const MAX_LABEL: usize = 256;

/// A plugin that loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    /// Its folder's name.
    pub name: String,
    /// Its actions, as commands named `<plugin>:<action>`.
    pub actions: Vec<CustomCommand>,
    /// Its MCP servers.
    pub servers: Vec<PluginServer>,
}

/// An MCP server a plugin declares, as Heron starts it.
#[derive(Clone, PartialEq, Eq)]
pub struct PluginServer {
    /// `<plugin>:<server>`.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to its environment (values may be tokens: never shown).
    pub env: Vec<(String, String)>,
    /// Whether it is started; a server turned off stays listed, as `disabled`.
    pub enabled: bool,
}

impl std::fmt::Debug for PluginServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("PluginServer")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &names)
            .field("enabled", &self.enabled)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// For people reading the file; Heron shows each action's own description instead.
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    actions: BTreeMap<String, Action>,
    #[serde(default)]
    mcp_servers: BTreeMap<String, Server>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    description: Option<String>,
    #[serde(alias = "argument-hint")]
    argument_hint: Option<String>,
    prompt: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Server {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// `false` keeps the server's definition without starting it.
    #[serde(default = "enabled_by_default")]
    enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

/// Every plugin under `dir` (absolute, canonical), by name, and the plugins that could not
/// load with the reason (also added to `problems`).
pub(super) fn load_all(
    dir: &Path,
    protected: &Protected,
    problems: &mut Vec<Problem>,
) -> (Vec<Plugin>, Vec<(String, Problem)>) {
    let (mut loaded, mut broken) = (Vec::new(), Vec::new());
    let Some(entries) = files::list(dir, problems) else { return (loaded, broken) };
    for entry in entries {
        match entry.kind {
            Kind::Dir => {}
            Kind::Symlink => {
                problems
                    .push(Problem::new(&entry.path, "is a symlink; plugins are read from real folders only"));
                continue;
            }
            // A README beside the plugins is not one.
            Kind::File | Kind::Other => continue,
        }
        if loaded.len() + broken.len() == MAX_PLUGINS {
            problems.push(Problem::new(
                dir,
                format!("holds more than {MAX_PLUGINS} plugins; the rest are not read"),
            ));
            break;
        }
        if let Err(reason) = valid_part(&entry.name) {
            problems.push(Problem::new(&entry.path, reason));
            continue;
        }
        let file = entry.path.join("plugin.toml");
        let parsed = files::read_text(&file, protected)
            .map_err(|reason| Problem::new(&file, reason))
            .and_then(|text| parse(&entry.name, &text, &file));
        match parsed {
            Ok(plugin) => loaded.push(plugin),
            Err(problem) => {
                problems.push(problem.clone());
                broken.push((entry.name.clone(), problem));
            }
        }
    }
    (loaded, broken)
}

/// The plugin `name` that `text` (the file `file`) declares.
fn parse(name: &str, text: &str, file: &Path) -> Result<Plugin, Problem> {
    let parsed: File = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => Problem::at(file, line_at(text, span.start), e.message().to_owned()),
        None => Problem::new(file, e.message().to_owned()),
    })?;
    // Where a key is declared, for problems found after parsing.
    let line_of = |table: &str, key: &str| -> Option<usize> {
        let header = format!("[{table}.{key}]");
        text.lines().position(|l| l.trim() == header).map(|i| i + 1)
    };
    let fail = |table: &str, key: &str, message: String| match line_of(table, key) {
        Some(line) => Problem::at(file, line, message),
        None => Problem::new(file, message),
    };
    if parsed.actions.len() > MAX_ACTIONS {
        return Err(Problem::new(file, format!("declares more than {MAX_ACTIONS} actions")));
    }
    if parsed.mcp_servers.len() > MAX_SERVERS {
        return Err(Problem::new(file, format!("declares more than {MAX_SERVERS} MCP servers")));
    }
    let mut actions = Vec::new();
    for (action, spec) in parsed.actions {
        valid_part(&action).map_err(|reason| fail("actions", &action, format!("action {reason}")))?;
        if spec.prompt.trim().is_empty() {
            return Err(fail("actions", &action, format!("action `{action}` has an empty prompt")));
        }
        let label = |text: Option<String>| {
            text.filter(|t| !t.trim().is_empty()).map(|t| crate::secret::clip(&t, MAX_LABEL))
        };
        actions.push(CustomCommand {
            name: format!("{name}:{action}"),
            description: label(spec.description)
                .unwrap_or_else(|| format!("The {action} action of the {name} plugin")),
            hint: label(spec.argument_hint),
            template: spec.prompt,
            origin: Origin::Plugin(name.to_owned()),
            file: file.to_path_buf(),
        });
    }
    let mut servers = Vec::new();
    for (server, spec) in parsed.mcp_servers {
        valid_part(&server).map_err(|reason| fail("mcp_servers", &server, format!("server {reason}")))?;
        if spec.command.trim().is_empty() {
            return Err(fail("mcp_servers", &server, format!("server `{server}` needs a command")));
        }
        if let Some((key, _)) = spec.env.iter().find(|(k, _)| k.is_empty() || k.contains(['=', '\0'])) {
            return Err(fail(
                "mcp_servers",
                &server,
                format!("server `{server}`: `{key}` cannot name a variable"),
            ));
        }
        servers.push(PluginServer {
            name: format!("{name}:{server}"),
            command: spec.command,
            args: spec.args,
            env: spec.env.into_iter().collect(),
            enabled: spec.enabled,
        });
    }
    Ok(Plugin { name: name.to_owned(), actions, servers })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "Docs"

[actions.summarize]
description = "Summarize a file"
argument-hint = "path"
prompt = "Summarize $ARGUMENTS"

[mcp_servers.search]
command = "python3"
args = ["server.py"]
env = { TOKEN = "t" }
"#;

    #[test]
    fn actions_and_servers_are_named_after_the_plugin() {
        let plugin = parse("docs", GOOD, Path::new("plugin.toml")).expect("parses");
        assert_eq!(plugin.actions[0].name, "docs:summarize");
        assert_eq!(plugin.actions[0].hint.as_deref(), Some("path"));
        assert_eq!(plugin.actions[0].origin, Origin::Plugin("docs".into()));
        assert_eq!(plugin.servers[0].name, "docs:search");
        assert_eq!(plugin.servers[0].env, [("TOKEN".to_owned(), "t".to_owned())]);
        assert!(!format!("{:?}", plugin.servers[0]).contains("\"t\""), "env values stay out of logs");
    }

    #[test]
    fn a_server_is_enabled_unless_turned_off() {
        assert!(parse("docs", GOOD, Path::new("plugin.toml")).expect("parses").servers[0].enabled);
        let off = "[mcp_servers.search]\ncommand = \"search\"\nenabled = false\n";
        assert!(!parse("docs", off, Path::new("plugin.toml")).expect("parses").servers[0].enabled);
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line() {
        let text = "[mcp_servers.search]\ncomand = \"python3\"\n";
        let problem = parse("docs", text, Path::new("plugin.toml")).expect_err("refused");
        assert_eq!(problem.line, Some(2), "{problem}");
        assert!(problem.message.contains("comand"), "{problem}");
    }

    #[test]
    fn a_bad_action_name_or_empty_prompt_names_its_table() {
        let text = "[actions.ok]\nprompt = \"x\"\n\n[actions.Bad]\nprompt = \"x\"\n";
        assert_eq!(parse("docs", text, Path::new("p")).expect_err("bad name").line, Some(4));
        let text = "[actions.empty]\nprompt = \"  \"\n";
        assert_eq!(parse("docs", text, Path::new("p")).expect_err("empty").line, Some(1));
    }

    #[test]
    fn a_broken_plugin_is_reported_beside_the_ones_that_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        for (name, text) in [("docs", GOOD), ("broken", "nonsense = 1\n")] {
            std::fs::create_dir(root.join(name)).expect("dir");
            std::fs::write(root.join(name).join("plugin.toml"), text).expect("write");
        }
        std::fs::create_dir(root.join("empty")).expect("dir");
        let mut problems = Vec::new();
        let (loaded, broken) = load_all(&root, &Protected::default(), &mut problems);
        assert_eq!(loaded.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["docs"]);
        let broken: Vec<&str> = broken.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(broken, ["broken", "empty"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn plugins_past_the_limit_are_not_read_and_said_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        for n in 0..=MAX_PLUGINS {
            let folder = root.join(format!("p{n:02}"));
            std::fs::create_dir(&folder).expect("dir");
            std::fs::write(folder.join("plugin.toml"), "[actions.go]\nprompt = \"go\"\n").expect("write");
        }
        let mut problems = Vec::new();
        let (loaded, broken) = load_all(&root, &Protected::default(), &mut problems);
        assert_eq!((loaded.len(), broken.len()), (MAX_PLUGINS, 0));
        assert_eq!(loaded.last().map(|p| p.name.as_str()), Some("p31"), "read in name order");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].message.contains("more than 32 plugins"), "{problems:?}");
    }

    #[test]
    fn a_plugin_past_its_action_or_server_limit_fails_and_long_labels_are_clipped() {
        let actions =
            |n: usize| -> String { (0..n).map(|i| format!("[actions.a{i}]\nprompt = \"x\"\n")).collect() };
        let servers = |n: usize| -> String {
            (0..n).map(|i| format!("[mcp_servers.s{i}]\ncommand = \"x\"\n")).collect()
        };
        let file = Path::new("plugin.toml");
        let full = format!("{}{}", actions(MAX_ACTIONS), servers(MAX_SERVERS));
        let plugin = parse("docs", &full, file).expect("at the limits a plugin loads");
        assert_eq!((plugin.actions.len(), plugin.servers.len()), (MAX_ACTIONS, MAX_SERVERS));

        let problem = parse("docs", &actions(MAX_ACTIONS + 1), file).expect_err("too many actions");
        assert!(problem.message.contains("more than 64 actions"), "{problem}");
        let problem = parse("docs", &servers(MAX_SERVERS + 1), file).expect_err("too many servers");
        assert!(problem.message.contains("more than 16 MCP servers"), "{problem}");

        let long = "d".repeat(MAX_LABEL + 100);
        let text =
            format!("[actions.a]\nprompt = \"x\"\ndescription = \"{long}\"\nargument_hint = \"{long}\"\n");
        let action = &parse("docs", &text, file).expect("parses").actions[0];
        for label in [action.description.as_str(), action.hint.as_deref().unwrap_or_default()] {
            assert!(label.len() <= MAX_LABEL && label.ends_with('…'), "{} bytes", label.len());
        }
    }
}
