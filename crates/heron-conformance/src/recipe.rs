//! A recipe (`conformance/agents/<agent>.toml`): how to start one known agent so that it gets
//! past "no model, no key" against the kit's model server, with no credentials. It names the
//! agent's command line, the environment and the files under the agent's HOME that point it
//! at the server, and the script the server plays. The runner starts the server beside the
//! agent, inside the agent's sandbox, on one loopback port the sandbox lets both use.
//!
//! In every string, `{model}` is the server's base URL (`http://127.0.0.1:PORT`, no path),
//! `{home}` the agent's HOME, `{ws}` its workspace and `{agents}` the folder the agents were
//! installed into (`--agents`), so a recipe can name its program by its own install prefix
//! where two packages install programs of the same name. A recipe is the caller's, like
//! `--agent`, so what it names is trusted; the files it writes stay under the agent's HOME.
//!
//! An agent that serves itself over a local TCP port names it in `ports`: the sandbox lets
//! it bind and connect there only on the loopback of its own network namespace.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

/// The script played when a recipe gives none: one answer, no tool call.
const DEFAULT_SCRIPT: &str = "{\"steps\": [{\"text\": \"Hello from the conformance kit.\"}, {\"usage\": {\"input\": 12, \"output\": 6}}]}\n";

/// The largest recipe read, in bytes.
const MAX_RECIPE: u64 = 256 * 1024;

/// The most ports a recipe may name for the agent's own servers.
const MAX_PORTS: usize = 8;

/// The placeholder for the agents' install folder.
const AGENTS: &str = "{agents}";

/// One agent's recipe.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The agent's name, as the matrix shows it.
    pub agent: String,
    /// The version the recipe was written for.
    #[serde(default)]
    pub version: Option<String>,
    /// How `scripts/conformance-matrix` installs it (a shell line; not run by the runner).
    #[serde(default)]
    pub install: Option<String>,
    /// The agent's command line, run with `sh -c` in its workspace.
    pub command: String,
    /// Variables set for the agent, beside the few the runner passes through.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files written under the agent's HOME before it starts, by path relative to it.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The script the model server plays (the scripted provider's format).
    #[serde(default)]
    pub script: Option<String>,
    /// TCP ports the agent binds for a server of its own and connects to itself. Granted
    /// only where the agent gets a private network namespace, whose loopback is its own.
    #[serde(default)]
    pub ports: Vec<u16>,
    /// The folder the agents were installed into, for `{agents}`: the caller's
    /// `--agents`, not the recipe's.
    #[serde(skip)]
    pub agents: Option<PathBuf>,
}

impl Recipe {
    /// Reads and checks the recipe at `path`.
    pub fn load(path: &Path) -> Result<Recipe, String> {
        let shown = path.display();
        let text = heron_core::whole_file::read_text(path, MAX_RECIPE)
            .map_err(|e| format!("cannot read the recipe {shown}: {e}"))?;
        Recipe::parse(&text).map_err(|e| format!("the recipe {shown}: {e}"))
    }

    /// Parses and checks a recipe's text.
    pub fn parse(text: &str) -> Result<Recipe, String> {
        let recipe: Recipe = toml::from_str(text).map_err(|e| e.to_string())?;
        if recipe.command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        for name in recipe.files.keys() {
            let path = Path::new(name);
            let outside = path.is_absolute() || path.components().any(|c| c == Component::ParentDir);
            if outside || name.is_empty() {
                return Err(format!("file `{name}` is not a path below the agent's HOME"));
            }
        }
        if let Some(name) = recipe.env.keys().find(|k| k.is_empty() || k.contains(['=', '\0'])) {
            return Err(format!("`{name}` is not a variable name"));
        }
        if recipe.ports.contains(&0) || recipe.ports.len() > MAX_PORTS {
            return Err(format!("`ports` names up to {MAX_PORTS} ports, none of them 0"));
        }
        Ok(recipe)
    }

    /// Whether any of its strings names `{agents}`, the install folder `--agents` gives.
    pub fn names_agents(&self) -> bool {
        let strings = [&self.command].into_iter().chain(self.env.values()).chain(self.files.values());
        strings.chain(&self.script).any(|text| text.contains(AGENTS))
    }

    /// The script the model server plays.
    pub fn script(&self) -> &str {
        self.script.as_deref().unwrap_or(DEFAULT_SCRIPT)
    }
}

/// Where a recipe's placeholders point, for one scenario.
#[derive(Debug, Clone)]
pub struct Places {
    /// The model server's base URL.
    pub model: String,
    /// The agent's HOME.
    pub home: String,
    /// The workspace.
    pub ws: String,
    /// The agents' install folder, when the caller named one.
    pub agents: Option<String>,
}

impl Places {
    /// `text` with its placeholders filled in (`{agents}` left as it is without a folder:
    /// the caller refuses such a recipe before it starts).
    pub fn fill(&self, text: &str) -> String {
        let text =
            text.replace("{model}", &self.model).replace("{home}", &self.home).replace("{ws}", &self.ws);
        match &self.agents {
            Some(agents) => text.replace(AGENTS, agents),
            None => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_names_its_command_environment_files_and_script() {
        let recipe = Recipe::parse(
            r#"
agent = "an-agent"
command = "an-agent --acp"
[env]
OPENAI_BASE_URL = "{model}/v1"
[files]
".config/agent/settings.json" = '{"home": "{home}"}'
"#,
        )
        .expect("a recipe");
        let places =
            Places { model: "http://127.0.0.1:9".into(), home: "/h".into(), ws: "/w".into(), agents: None };
        assert_eq!(places.fill(&recipe.env["OPENAI_BASE_URL"]), "http://127.0.0.1:9/v1");
        assert_eq!(places.fill(&recipe.files[".config/agent/settings.json"]), r#"{"home": "/h"}"#);
        assert!(recipe.script().contains("Hello from the conformance kit."));
    }

    #[test]
    fn a_recipe_names_its_program_by_the_agents_folder_and_its_own_ports() {
        let recipe = Recipe::parse(
            "agent = \"a\"\ncommand = \"{agents}/a-2/node_modules/.bin/a --port 4096\"\nports = [4096]\n",
        )
        .expect("a recipe");
        assert!(recipe.names_agents());
        assert_eq!(recipe.ports, [4096]);
        let places = Places {
            model: "http://127.0.0.1:9".into(),
            home: "/h".into(),
            ws: "/w".into(),
            agents: Some("/opt/agents".into()),
        };
        assert_eq!(places.fill(&recipe.command), "/opt/agents/a-2/node_modules/.bin/a --port 4096");
        let plain =
            Recipe::parse("agent = \"a\"\ncommand = \"a\"\n[env]\nA = \"{home}\"\n").expect("a recipe");
        assert!(!plain.names_agents() && plain.ports.is_empty());
        let named_in_env = Recipe::parse("agent = \"a\"\ncommand = \"a\"\n[env]\nP = \"{agents}/p\"\n");
        assert!(named_in_env.expect("a recipe").names_agents());
    }

    #[test]
    fn every_recipe_of_the_repository_parses() {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/agents");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&folder).expect("the recipes' folder") {
            let path = entry.expect("an entry").path();
            let recipe = Recipe::load(&path).unwrap_or_else(|e| panic!("{e}"));
            names.push(recipe.agent);
        }
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "each agent's name is its own in the matrix: {names:?}");
        for agent in ["codex-acp", "codex-acp-2", "heron", "opencode", "python-sdk-echo"] {
            assert!(names.iter().any(|name| name == agent), "{agent}: {names:?}");
        }
    }

    #[test]
    fn files_outside_the_home_unknown_keys_and_an_empty_command_are_refused() {
        let with = |extra: &str| Recipe::parse(&format!("agent = \"a\"\ncommand = \"a\"\n{extra}"));
        assert!(with("[files]\n\"../x\" = \"\"\n").is_err_and(|e| e.contains("below the agent's HOME")));
        assert!(with("[files]\n\"/etc/x\" = \"\"\n").is_err());
        assert!(with("colour = \"blue\"\n").is_err_and(|e| e.contains("unknown field")));
        assert!(Recipe::parse("agent = \"a\"\ncommand = \" \"\n").is_err_and(|e| e.contains("empty")));
        assert!(with("ports = [0]\n").is_err_and(|e| e.contains("none of them 0")));
        assert!(with(&format!("ports = [{}]\n", ["1"; 9].join(", "))).is_err());
        assert!(with("agents = \"/x\"\n").is_err(), "the folder is the caller's, never the recipe's");
    }
}
