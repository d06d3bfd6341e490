//! A folder of command files: each `NAME.md` is the command `/NAME`, its optional front
//! matter giving the description and argument hint, the rest its prompt. Files not ending
//! in `.md` are not commands and are passed over; every `.md` entry that cannot be a
//! command (a bad name, a symlink, too large, not text, bad front matter, no prompt) is a
//! problem. At most [`MAX_COMMANDS`] are read from one folder.

use std::path::Path;

use super::command::{CustomCommand, Origin, valid_name};
use super::files::{self, Kind};
use super::{MAX_COMMANDS, Problem, front_matter};
use crate::tools::protected::Protected;

/// The longest description or argument hint kept, in bytes.
const MAX_LABEL: usize = 256;

/// The commands of the folder `dir` (absolute, canonical), by name.
pub(super) fn load(
    dir: &Path,
    origin: &Origin,
    protected: &Protected,
    problems: &mut Vec<Problem>,
) -> Vec<CustomCommand> {
    let Some(entries) = files::list(dir, problems) else { return Vec::new() };
    let mut commands = Vec::new();
    for entry in entries {
        let Some(name) = entry.name.strip_suffix(".md") else { continue };
        if commands.len() == MAX_COMMANDS {
            problems.push(Problem::new(
                dir,
                format!("holds more than {MAX_COMMANDS} commands; the rest are not read"),
            ));
            break;
        }
        let refused = match entry.kind {
            Kind::File => None,
            Kind::Symlink => {
                Some("is a symlink; command files are read only when they are real files".to_owned())
            }
            Kind::Dir | Kind::Other => Some("is not a regular file".to_owned()),
        };
        if let Some(reason) = refused {
            problems.push(Problem::new(&entry.path, reason));
            continue;
        }
        if let Err(reason) = valid_name(name) {
            problems.push(Problem::new(&entry.path, reason));
            continue;
        }
        let parsed = files::read_text(&entry.path, protected)
            .map_err(|reason| Problem::new(&entry.path, reason))
            .and_then(|text| parse(name, &text, origin, &entry.path));
        match parsed {
            Ok(command) => commands.push(command),
            Err(problem) => problems.push(problem),
        }
    }
    commands
}

/// The command `name` that `text` (the file `file`) defines.
fn parse(name: &str, text: &str, origin: &Origin, file: &Path) -> Result<CustomCommand, Problem> {
    let (front, body) =
        front_matter::split(text).map_err(|(line, reason)| Problem::at(file, line, reason))?;
    let template = body.trim_start_matches(['\r', '\n']).to_owned();
    let Some(first_line) = template.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(Problem::new(file, "has no prompt after its front matter"));
    };
    let description =
        front.description.filter(|d| !d.trim().is_empty()).unwrap_or_else(|| first_line.to_owned());
    Ok(CustomCommand {
        name: name.to_owned(),
        description: crate::secret::clip(&description, MAX_LABEL),
        hint: front
            .argument_hint
            .filter(|h| !h.trim().is_empty())
            .map(|h| crate::secret::clip(&h, MAX_LABEL)),
        template,
        origin: origin.clone(),
        file: file.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_markdown_file_is_a_command_and_each_bad_one_a_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::write(
            root.join("review.md"),
            "---\ndescription: Review\nargument_hint: <files>\n---\nReview $ARGUMENTS\n",
        )
        .expect("write");
        std::fs::write(root.join("plain.md"), "\nSay hello.\n").expect("write");
        std::fs::write(root.join("Bad Name.md"), "x").expect("write");
        std::fs::write(root.join("empty.md"), "---\ndescription: nothing\n---\n\n").expect("write");
        std::fs::write(root.join("notes.txt"), "not a command").expect("write");
        let mut problems = Vec::new();
        let protected = Protected::new(&root.join("home"), None);
        let commands = load(&root, &Origin::User, &protected, &mut problems);
        let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["plain", "review"]);
        assert_eq!(commands[0].description, "Say hello.", "the first line stands in for a description");
        assert_eq!(commands[1].hint.as_deref(), Some("<files>"));
        assert_eq!(commands[1].template, "Review $ARGUMENTS\n");
        let files: Vec<String> = problems
            .iter()
            .map(|p| p.file.file_name().unwrap_or_default().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, ["Bad Name.md", "empty.md"], "{problems:?}");
    }

    #[test]
    fn a_folder_past_its_count_is_cut_and_said_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        for n in 0..=MAX_COMMANDS {
            std::fs::write(root.join(format!("c{n:03}.md")), "go").expect("write");
        }
        let mut problems = Vec::new();
        let commands = load(&root, &Origin::User, &Protected::default(), &mut problems);
        assert_eq!(commands.len(), MAX_COMMANDS);
        assert!(problems[0].message.contains("more than"), "{problems:?}");
    }
}
