//! `load_skill`: gives the model a skill's instructions (the body of its `SKILL.md`, read
//! afresh and bounded like a file read) and the folder its other files are in, which the
//! model reads with the ordinary file tools. It exists only in a session with skills.
//!
//! A project's skill comes with the repository, which may be hostile: the first load of
//! each in a session asks the user, in every posture ([`AlwaysAsk::ProjectSkill`]); once
//! loaded, it is not asked about again. The user's own skills never ask.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::Catalog;
use super::command::Origin;
use super::skill;
use crate::BoxFuture;
use crate::llm::ToolSpec;
use crate::tools::{AlwaysAsk, Outcome, Prepared, Tool, ToolEnv, call};
use crate::types::{ToolKind, ToolOutput, ToolStatus};

/// The tool's name.
const NAME: &str = "load_skill";

/// Arguments of `load_skill`.
#[derive(Debug, Deserialize, JsonSchema)]
struct LoadSkillArgs {
    /// The skill's name, as the list of skills gives it.
    name: String,
}

/// The `SKILL.md` files a session loaded, so a project's skill asks only before its first
/// load. Kept by the session across turns and reloads: a skill of the same name from
/// another file is another skill, and asks again.
#[derive(Debug, Default)]
pub struct LoadedSkills(Mutex<HashSet<PathBuf>>);

impl LoadedSkills {
    fn contains(&self, file: &std::path::Path) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains(file)
    }

    fn insert(&self, file: PathBuf) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(file);
    }
}

/// The `load_skill` tool over one session's skills.
pub struct LoadSkill {
    catalog: Arc<Catalog>,
    loaded: Arc<LoadedSkills>,
}

impl LoadSkill {
    /// The tool for the skills of `catalog`, `None` when it has none (the model is offered
    /// no tool it cannot use); `loaded` is the session's record of what it loaded.
    pub fn for_catalog(catalog: Arc<Catalog>, loaded: Arc<LoadedSkills>) -> Option<Self> {
        let has_skills = catalog.skills().next().is_some();
        has_skills.then_some(Self { catalog, loaded })
    }
}

impl Tool for LoadSkill {
    fn spec(&self) -> ToolSpec {
        call::spec::<LoadSkillArgs>(
            NAME,
            "Load one of the skills the system prompt lists: its instructions, and the folder its other \
             files are in (read those with the file tools when the instructions say to).",
        )
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn prepare(&self, arguments: &str, _env: &ToolEnv) -> Result<Prepared, String> {
        let (args, raw_input): (LoadSkillArgs, _) = call::parse(NAME, arguments)?;
        let Some(skill) = self.catalog.skill(args.name.trim()) else {
            return Err(format!(
                "There is no skill called `{}`; the system prompt lists the skills there are.",
                crate::secret::clip(&args.name, 80)
            ));
        };
        let first_of_project = skill.origin == Origin::Project && !self.loaded.contains(&skill.file);
        Ok(Prepared {
            title: format!("Load the {} skill {}", skill.origin.label(), skill.name),
            kind: ToolKind::Read,
            locations: vec![call::location(&skill.file, None)],
            raw_input,
            // Heron reads the file itself; the model is given what is in it.
            outside_roots: false,
            always_ask: first_of_project.then_some(AlwaysAsk::ProjectSkill),
            content: Vec::new(),
            planned: None,
        })
    }

    fn run(&self, prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        let name =
            prepared.raw_input.get("name").and_then(|n| n.as_str()).unwrap_or_default().trim().to_owned();
        let skill = self.catalog.skill(&name).cloned();
        let loaded = self.loaded.clone();
        Box::pin(async move {
            let Some(skill) = skill else {
                return Outcome::failed(format!("There is no skill called `{name}`."));
            };
            let (file, protected) = (skill.file.clone(), env.roots.protected().clone());
            let read = tokio::task::spawn_blocking(move || skill::body(&file, &protected)).await;
            let body = match read {
                Ok(Ok(body)) => body,
                Ok(Err(reason)) => {
                    return Outcome::failed(format!(
                        "The skill `{name}` cannot be read: its SKILL.md {reason}"
                    ));
                }
                Err(_) => return Outcome::failed("cancelled"),
            };
            loaded.insert(skill.file.clone());
            let folder = skill.folder.display().to_string();
            let mut text = format!(
                "The skill `{name}`. Its folder is {folder}: paths its instructions give are relative to it.\n"
            );
            if let Some(tools) = &skill.allowed_tools {
                text.push_str(&format!(
                    "It names the tools it uses ({tools}); each call still asks as any other does.\n"
                ));
            }
            text.push('\n');
            text.push_str(&body);
            let outcome = Outcome {
                status: ToolStatus::Completed,
                output: vec![ToolOutput::Text { text: format!("Loaded the skill `{name}` from {folder}") }],
                raw_output: Some(json!({ "name": name, "folder": folder, "bytes": body.len() })),
                for_model: text,
                plan: None,
            };
            call::scrub(&env, outcome)
        })
    }
}
