//! Starting an agent by its recipe: the kit's model server and the agent in one confined
//! shell, the server on a loopback port the sandbox lets both use (in the agent's own
//! network namespace where it gets one, so nothing else can reach it), the recipe's files
//! written under the agent's HOME and its environment set, every `{model}` pointing at the
//! server. The ports the recipe names for the agent's own server are granted beside the
//! server's, on the agent's private loopback only (`Policy::private_ports`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::confine::{self, Kit};
use super::{Sandbox, agent_files};
use crate::recipe::{Places, Recipe};

/// The confined command that runs the model server, then `exec`s the recipe's agent. The
/// server plays the scenario's own model turns (`scenario_script`) when it has some, so a
/// scenario gets the model it was written for (a cancel needs a turn that lasts), else the
/// recipe's script.
pub(super) fn agent_command(
    recipe: &Recipe,
    sandbox: &Sandbox,
    scenario_script: &[serde_json::Value],
) -> Result<Command, String> {
    let port = free_port()?;
    let places = Places {
        model: format!("http://127.0.0.1:{port}"),
        home: sandbox.user_home().display().to_string(),
        ws: sandbox.ws().display().to_string(),
        agents: recipe.agents.as_ref().map(|dir| dir.display().to_string()),
    };
    if recipe.names_agents() && places.agents.is_none() {
        return Err(
            "the recipe names `{agents}`: pass --agents DIR, the folder its agent was installed into".into(),
        );
    }
    own_ports_possible(&recipe.ports)?;
    let script = sandbox.root().join("kit.jsonl");
    std::fs::write(&script, played(recipe, scenario_script))
        .map_err(|e| format!("cannot write the kit's script: {e}"))?;
    for (name, text) in &recipe.files {
        let path = sandbox.user_home().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot write `{name}`: {e}"))?;
        }
        std::fs::write(&path, places.fill(text)).map_err(|e| format!("cannot write `{name}`: {e}"))?;
    }
    let kit = std::env::current_exe().map_err(|e| format!("cannot find the kit's model server: {e}"))?;
    let agent = places.fill(&recipe.command);
    // The server's address line and its log go nowhere: the agent's stdout is the protocol.
    // `$$` is the shell's pid, which `exec` hands to the agent: the server ends with it.
    let line = format!(
        "{} model-server --script {} --listen 127.0.0.1:{port} --exit-with $$ >/dev/null 2>&1 &\nexec {agent}",
        quoted(&kit),
        quoted(&script),
    );
    let mut files: Vec<PathBuf> = agent_files::of_line(&agent);
    files.push(kit);
    let env = recipe.env.iter().map(|(key, value)| (key.clone(), places.fill(value))).collect();
    confine::agent_command(
        Path::new("sh"),
        &["-c".to_owned(), line],
        files,
        sandbox,
        Some(&Kit { port, env, own_ports: recipe.ports.clone() }),
    )
}

/// Refuses a recipe whose agent binds ports of its own where the sandbox would not let it:
/// Landlock refuses TCP, and the agent gets no network namespace of its own, in which
/// alone such ports are granted. Without Landlock nothing refuses the bind.
fn own_ports_possible(ports: &[u16]) -> Result<(), String> {
    let support = heron_core::sandbox::support();
    if ports.is_empty() || support.walls.network_namespace || support.landlock.is_err() {
        return Ok(());
    }
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    Err(format!(
        "the recipe's agent serves itself on port {}, which the sandbox grants only on a loopback of the agent's own, and this machine gives it no network namespace",
        ports.join(", ")
    ))
}

/// A port free on the host's loopback now: the server binds it in the agent's namespace, or
/// here where the agent gets none.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|e| format!("no free port: {e}"))
}

/// `path` as one shell word.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// The script the kit's model server plays: the scenario's own model turns, one a line,
/// when it has some, else the recipe's.
fn played(recipe: &Recipe, scenario_script: &[serde_json::Value]) -> String {
    if scenario_script.is_empty() {
        return recipe.script().to_owned();
    }
    scenario_script.iter().map(|turn| format!("{turn}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_plays_the_scenarios_own_turns_else_the_recipes_script() {
        let recipe = Recipe::parse("agent = \"a\"\ncommand = \"a\"\nscript = \"{}\\n\"\n").expect("a recipe");
        assert_eq!(played(&recipe, &[]), "{}\n");
        let turns = [
            serde_json::json!({"steps": [{"text": "Working"}, {"delay_ms": 30000}]}),
            serde_json::json!({"steps": [{"text": "done."}]}),
        ];
        assert_eq!(
            played(&recipe, &turns),
            "{\"steps\":[{\"text\":\"Working\"},{\"delay_ms\":30000}]}\n{\"steps\":[{\"text\":\"done.\"}]}\n"
        );
    }
}
