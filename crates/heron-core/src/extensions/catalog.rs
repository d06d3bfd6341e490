//! The custom commands one session offers, merged from every source: on a name clash the
//! built-in command wins, then the project's, then the user's, then a plugin's, and each
//! command left out is reported with the one that won. At most [`MAX_COMMANDS`] in all.
//! The session's skills join it: each is also the slash command of its name, unless a
//! command of that name wins (then the skill is still loaded by name, and the clash reported).

use std::collections::{BTreeMap, BTreeSet};

use super::command::CustomCommand;
use super::plugin::Plugin;
use super::skill::{self, Skill};
use super::{MAX_COMMANDS, Problem};

/// A session's custom commands and skills, by name, and every problem found building them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    commands: BTreeMap<String, CustomCommand>,
    skills: BTreeMap<String, Skill>,
    /// The skills whose slash command another command's name takes.
    shadowed: BTreeSet<String>,
    /// What the system prompt says of the skills, made once: the prompt's prefix stays the
    /// same from request to request until a reload.
    listing: Option<String>,
    problems: Vec<Problem>,
}

impl Catalog {
    /// Merges the commands of each source (see the module docs); `builtin` are the names
    /// of Heron's own commands, `problems` those already found reading the sources.
    pub fn build(
        builtin: &[&str],
        project: Vec<CustomCommand>,
        user: &[CustomCommand],
        plugins: &[Plugin],
        mut problems: Vec<Problem>,
    ) -> Catalog {
        let mut commands: BTreeMap<String, CustomCommand> = BTreeMap::new();
        let plugin_actions = plugins.iter().flat_map(|p| p.actions.iter().cloned());
        let mut full = false;
        for command in project.into_iter().chain(user.iter().cloned()).chain(plugin_actions) {
            if builtin.contains(&command.name.as_str()) {
                let message = format!(
                    "`/{}` is one of Heron's built-in commands, which wins; rename this one",
                    command.name
                );
                problems.push(Problem::new(&command.file, message));
                continue;
            }
            if let Some(winner) = commands.get(&command.name) {
                let message = format!(
                    "`/{}` is already the {} command of {}, which wins",
                    command.name,
                    winner.origin.label(),
                    winner.file.display()
                );
                problems.push(Problem::new(&command.file, message));
                continue;
            }
            if commands.len() == MAX_COMMANDS {
                if !full {
                    let message = format!(
                        "more than {MAX_COMMANDS} custom commands; this one and later ones are left out"
                    );
                    problems.push(Problem::new(&command.file, message));
                    full = true;
                }
                continue;
            }
            commands.insert(command.name.clone(), command);
        }
        Catalog { commands, problems, ..Catalog::default() }
    }

    /// Adds `skills` (in order of precedence: the first of a name wins); a skill whose name
    /// is one of the `builtin` commands or a custom command keeps no slash command.
    pub(super) fn with_skills(mut self, builtin: &[&str], skills: Vec<Skill>) -> Catalog {
        self.skills = skill::merge(skills, &mut self.problems);
        for skill in self.skills.values() {
            let taken = if builtin.contains(&skill.name.as_str()) {
                Some("one of Heron's built-in commands".to_owned())
            } else {
                self.commands
                    .get(&skill.name)
                    .map(|c| format!("the {} command of {}", c.origin.label(), c.file.display()))
            };
            if let Some(taken) = taken {
                let message =
                    format!("`/{}` is {taken}, which wins; the skill is still loaded by name", skill.name);
                self.problems.push(Problem::new(&skill.file, message));
                self.shadowed.insert(skill.name.clone());
            }
        }
        self.listing = skill::listing(self.skills.values());
        self
    }

    /// The skills, by name.
    pub fn skills(&self) -> impl ExactSizeIterator<Item = &Skill> {
        self.skills.values()
    }

    /// The skill `name`, if there is one.
    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// The skill `/name` runs, if that slash command is a skill's.
    pub fn skill_command(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name).filter(|s| !self.shadowed.contains(&s.name))
    }

    /// The skills with a slash command of their own, by name.
    pub fn skill_commands(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values().filter(|s| !self.shadowed.contains(&s.name))
    }

    /// What the system prompt says of the skills, when there are any.
    pub fn skill_listing(&self) -> Option<&str> {
        self.listing.as_deref()
    }

    /// The commands, by name.
    pub fn commands(&self) -> impl Iterator<Item = &CustomCommand> {
        self.commands.values()
    }

    /// The command `name`, if there is one.
    pub fn find(&self, name: &str) -> Option<&CustomCommand> {
        self.commands.get(name)
    }

    /// What could not be used, and why.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::extensions::Origin;

    fn command(name: &str, origin: Origin) -> CustomCommand {
        CustomCommand {
            name: name.into(),
            description: format!("{name} from {}", origin.label()),
            hint: None,
            template: "go".into(),
            file: PathBuf::from(format!("{}/{name}.md", origin.label())),
            origin,
        }
    }

    #[test]
    fn built_ins_then_project_then_user_then_plugins_win_and_each_loser_is_reported() {
        let project = vec![command("help", Origin::Project), command("review", Origin::Project)];
        let user = [command("review", Origin::User), command("deploy", Origin::User)];
        let plugin = Plugin {
            name: "x".into(),
            actions: vec![
                command("deploy", Origin::Plugin("x".into())),
                command("x:go", Origin::Plugin("x".into())),
            ],
            servers: Vec::new(),
        };
        let catalog = Catalog::build(&["help"], project, &user, &[plugin], Vec::new());
        let names: Vec<(&str, Origin)> =
            catalog.commands().map(|c| (c.name.as_str(), c.origin.clone())).collect();
        assert_eq!(
            names,
            [("deploy", Origin::User), ("review", Origin::Project), ("x:go", Origin::Plugin("x".into()))]
        );
        let losers: Vec<String> = catalog.problems().iter().map(|p| p.file.display().to_string()).collect();
        assert_eq!(losers, ["project/help.md", "user/review.md", "plugin x/deploy.md"]);
        assert!(catalog.problems()[1].message.contains("project command of project/review.md"));
    }

    #[test]
    fn past_the_budget_commands_are_left_out_with_one_report() {
        let user: Vec<CustomCommand> =
            (0..MAX_COMMANDS + 5).map(|n| command(&format!("c{n:03}"), Origin::User)).collect();
        let catalog = Catalog::build(&[], Vec::new(), &user, &[], Vec::new());
        assert_eq!(catalog.commands().count(), MAX_COMMANDS);
        assert_eq!(catalog.problems().len(), 1);
    }
}
