//! Agent skills: a folder holding a `SKILL.md` (front matter with `name`, `description` and
//! optionally `allowed-tools`, then markdown instructions) and whatever files those
//! instructions use. The model is shown each skill's name and description only
//! ([`listing`]) and loads the instructions when a task calls for them (`load_skill`), so
//! a hundred skills cost a few lines of the prompt, not their bodies.
//!
//! A skills folder is read like a command folder: every entry that cannot be a skill (a bad
//! name, a symlink, no `SKILL.md`, a front matter too large or without a description) is a
//! [`Problem`], and the rest load. At most [`MAX_SKILLS`] in all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::command::{Expansion, MAX_EXPANDED, Origin, valid_name};
use super::files::{self, Kind};
use super::{Problem, front_matter};
use crate::tools::protected::Protected;

/// The most skills a session offers, from every folder together.
pub const MAX_SKILLS: usize = 100;

/// The largest `SKILL.md`, in bytes: what one file read gives the model at most.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// The largest front matter, in bytes: it is read for every skill of every session, and
/// only its name and description reach the model.
pub const MAX_FRONT_MATTER: usize = 4 * 1024;

/// The most bytes the skills' names and descriptions take of the system prompt.
pub const MAX_LISTING: usize = 8 * 1024;

/// The longest description kept, in bytes (the format's own limit).
const MAX_DESCRIPTION: usize = 1024;

/// The longest `allowed-tools` kept, in bytes.
const MAX_TOOLS: usize = 256;

/// One skill, as its front matter describes it; its body is read when it is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name, which is its folder's.
    pub name: String,
    /// When to use it, for the model.
    pub description: String,
    /// The tools it says it uses (`allowed-tools`), as written: shown, never pre-approved.
    pub allowed_tools: Option<String>,
    /// Where it comes from: the project (asked about before its first load) or the user.
    pub origin: Origin,
    /// Its folder (absolute, canonical).
    pub folder: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
}

impl Skill {
    /// The prompt `/name argument` runs: use this skill, with the argument.
    pub fn expand(&self, argument: &str) -> Result<Expansion, String> {
        let argument = argument.trim();
        if argument.len() > MAX_EXPANDED {
            return Err(format!(
                "/{} would expand to more than {} MiB; give it a shorter argument",
                self.name,
                MAX_EXPANDED / (1024 * 1024)
            ));
        }
        let mut prompt = format!(
            "Use the skill `{}`: load it with `load_skill`, then follow its instructions.",
            self.name
        );
        let invoked = if argument.is_empty() {
            format!("/{}", self.name)
        } else {
            prompt.push_str("\n\nArguments: ");
            prompt.push_str(argument);
            format!("/{} {argument}", self.name)
        };
        Ok(Expansion { name: self.name.clone(), invoked, prompt, mcp: None })
    }
}

/// The skills of the folder `dir` (absolute, canonical): one per subfolder.
pub(super) fn load(
    dir: &Path,
    origin: &Origin,
    protected: &Protected,
    problems: &mut Vec<Problem>,
) -> Vec<Skill> {
    let Some(entries) = files::list(dir, problems) else { return Vec::new() };
    let mut skills = Vec::new();
    for entry in entries {
        match entry.kind {
            Kind::Dir => {}
            Kind::Symlink => {
                problems
                    .push(Problem::new(&entry.path, "is a symlink; skills are read only from real folders"));
                continue;
            }
            // A README beside the skills is no skill, and no problem.
            Kind::File | Kind::Other => continue,
        }
        if skills.len() == MAX_SKILLS {
            problems.push(Problem::new(
                dir,
                format!("holds more than {MAX_SKILLS} skills; the rest are not read"),
            ));
            break;
        }
        if let Err(reason) = valid_name(&entry.name) {
            problems.push(Problem::new(&entry.path, reason));
            continue;
        }
        let file = entry.path.join("SKILL.md");
        let parsed =
            read(&file, protected).and_then(|text| parse(&entry.name, &text, origin, &entry.path, &file));
        match parsed {
            Ok(skill) => skills.push(skill),
            Err(problem) => problems.push(problem),
        }
    }
    skills
}

/// The text of the `SKILL.md` `file`, or the problem with it.
fn read(file: &Path, protected: &Protected) -> Result<String, Problem> {
    match std::fs::symlink_metadata(file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Problem::new(file, "is missing; a skill's folder holds a SKILL.md"));
        }
        _ => {}
    }
    files::read_text_within(file, MAX_SKILL_BYTES, protected).map_err(|reason| Problem::new(file, reason))
}

/// The skill `text` (the `SKILL.md` of the folder `name`) describes.
fn parse(name: &str, text: &str, origin: &Origin, folder: &Path, file: &Path) -> Result<Skill, Problem> {
    let (front, body) =
        front_matter::split(text).map_err(|(line, reason)| Problem::at(file, line, reason))?;
    let front_len = text.len() - body.len();
    if front_len > MAX_FRONT_MATTER {
        return Err(Problem::new(
            file,
            format!("has a front matter larger than {} KiB; it is not read", MAX_FRONT_MATTER / 1024),
        ));
    }
    if front_len == 0 {
        return Err(Problem::at(
            file,
            1,
            "has no front matter; a skill opens with `---`, a name and a description",
        ));
    }
    if let Some(named) = front.name.as_deref().map(str::trim).filter(|n| *n != name) {
        return Err(Problem::new(
            file,
            format!("names itself `{named}` in a folder named `{name}`; a skill's name is its folder's"),
        ));
    }
    let Some(description) = front.description.filter(|d| !d.trim().is_empty()) else {
        return Err(Problem::new(file, "has no `description`, which tells the model when to use it"));
    };
    Ok(Skill {
        name: name.to_owned(),
        description: crate::secret::clip(description.trim(), MAX_DESCRIPTION),
        allowed_tools: front
            .allowed_tools
            .filter(|t| !t.trim().is_empty())
            .map(|t| crate::secret::clip(t.trim(), MAX_TOOLS)),
        origin: origin.clone(),
        folder: folder.to_path_buf(),
        file: file.to_path_buf(),
    })
}

/// The body of the skill whose `SKILL.md` is `file`, read afresh (it may have changed since
/// the session listed it), and why not when it cannot be.
pub(super) fn body(file: &Path, protected: &Protected) -> Result<String, String> {
    let text = files::read_text_within(file, MAX_SKILL_BYTES, protected)?;
    let (_, body) = front_matter::split(&text).map_err(|(line, reason)| format!("line {line}: {reason}"))?;
    Ok(body.trim_start_matches(['\r', '\n']).to_owned())
}

/// Merges `skills` in the order given: on a name clash the first wins and the later one is
/// reported; past [`MAX_SKILLS`] the rest are reported once and left out.
pub(super) fn merge(
    skills: impl IntoIterator<Item = Skill>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, Skill> {
    let mut merged: BTreeMap<String, Skill> = BTreeMap::new();
    let mut full = false;
    for skill in skills {
        if let Some(winner) = merged.get(&skill.name) {
            let message = format!(
                "the skill `{}` is already the {} one of {}, which wins",
                skill.name,
                winner.origin.label(),
                winner.folder.display()
            );
            problems.push(Problem::new(&skill.file, message));
            continue;
        }
        if merged.len() == MAX_SKILLS {
            if !full {
                let message = format!("more than {MAX_SKILLS} skills; this one and later ones are left out");
                problems.push(Problem::new(&skill.file, message));
                full = true;
            }
            continue;
        }
        merged.insert(skill.name.clone(), skill);
    }
    merged
}

/// What the system prompt says of `skills`: each one's name and description, within
/// [`MAX_LISTING`] bytes, and how many were left out past it. `None` without skills.
pub(super) fn listing<'a>(skills: impl ExactSizeIterator<Item = &'a Skill>) -> Option<String> {
    let total = skills.len();
    if total == 0 {
        return None;
    }
    let mut text = String::from(
        "<skills>\nSkills are instructions for particular tasks, with files beside them. When a task \
         matches a skill's description, load the skill with `load_skill` before you start, and follow it.\n",
    );
    let mut listed = 0;
    for skill in skills {
        let line = format!("- {}: {}\n", skill.name, skill.description.replace(['\r', '\n'], " "));
        // Room is kept for the closing note and tag, so the whole stays within the budget.
        if text.len() + line.len() + 100 > MAX_LISTING {
            break;
        }
        text.push_str(&line);
        listed += 1;
    }
    if listed < total {
        text.push_str(&format!("({} more skills are not listed: the list is full.)\n", total - listed));
    }
    text.push_str("</skills>");
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::fs::canonicalize(dir.path()).expect("canonical");
        (dir, path)
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn each_folder_with_a_skill_md_is_a_skill_and_each_bad_one_a_problem() {
        let (_keep, root) = root();
        write(
            &root,
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: Read PDFs\nallowed-tools: Read\n---\nSteps\n",
        );
        write(&root, "plain/SKILL.md", "---\ndescription: No name given\n---\nBody\n");
        write(&root, "Bad Name/SKILL.md", "---\ndescription: x\n---\n");
        write(&root, "empty/notes.md", "no SKILL.md");
        write(&root, "other/SKILL.md", "---\nname: elsewhere\ndescription: x\n---\n");
        write(&root, "nodesc/SKILL.md", "---\nname: nodesc\n---\nBody\n");
        write(&root, "big/SKILL.md", &format!("---\ndescription: {}\n---\n", "x".repeat(MAX_FRONT_MATTER)));
        write(&root, "README.md", "not a skill");
        let mut problems = Vec::new();
        let skills = load(&root, &Origin::Project, &Protected::default(), &mut problems);
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pdf", "plain"]);
        assert_eq!(skills[0].allowed_tools.as_deref(), Some("Read"));
        assert_eq!(skills[0].folder, root.join("pdf"));
        let faulty: Vec<String> = problems
            .iter()
            .map(|p| p.file.strip_prefix(&root).unwrap_or(&p.file).display().to_string())
            .collect();
        assert_eq!(
            faulty,
            ["Bad Name", "big/SKILL.md", "empty/SKILL.md", "nodesc/SKILL.md", "other/SKILL.md"],
            "{problems:?}"
        );
        assert!(problems[1].message.contains("front matter larger"), "{problems:?}");
        assert_eq!(body(&root.join("pdf/SKILL.md"), &Protected::default()).as_deref(), Ok("Steps\n"));
    }

    fn skill(name: &str, origin: Origin) -> Skill {
        Skill {
            name: name.into(),
            description: format!("{name} things"),
            allowed_tools: None,
            folder: PathBuf::from(format!("/{}/{name}", origin.label())),
            file: PathBuf::from(format!("/{}/{name}/SKILL.md", origin.label())),
            origin,
        }
    }

    #[test]
    fn the_first_of_a_name_wins_and_the_listing_is_bounded() {
        let mut problems = Vec::new();
        let merged = merge([skill("a", Origin::Project), skill("a", Origin::User)], &mut problems);
        assert_eq!(merged["a"].origin, Origin::Project);
        assert!(problems[0].message.contains("project one"), "{problems:?}");
        let many: Vec<Skill> = (0..MAX_SKILLS)
            .map(|n| Skill { description: "d".repeat(200), ..skill(&format!("s{n:03}"), Origin::User) })
            .collect();
        let text = listing(many.iter()).expect("a listing");
        assert!(text.len() <= MAX_LISTING, "{}", text.len());
        assert!(text.contains("more skills are not listed"), "{text}");
        assert!(listing([].iter()).is_none());
    }

    #[test]
    fn a_slash_command_asks_for_the_skill_with_the_arguments() {
        let expanded = skill("pdf", Origin::User).expand(" form.pdf ").expect("expands");
        assert_eq!(expanded.invoked, "/pdf form.pdf");
        assert!(expanded.prompt.contains("`load_skill`") && expanded.prompt.ends_with("Arguments: form.pdf"));
    }
}
