//! Checkpoints: what a rewind would put back, read from the session's own history. Every
//! change Heron's file tools make is stored with its turn as a diff of the whole file
//! (`ToolOutput::Diff`, old text and new), so the history is the checkpoint: no second copy
//! of the files is kept. Turn `n` is everything after the `(n - 1)`th `TurnEnded`.
//!
//! What cannot be put back is said, never guessed: a change whose diff was clipped (a file
//! too large to keep whole) or whose result was dropped from the reply's budget, and what
//! commands did (Heron does not know which files a command changed).

use std::collections::BTreeMap;

use super::event::Event;
// How a clipped diff's marker ends: such a diff does not hold the whole file, so it cannot
// be put back from.
use crate::tools::shown_diff::LEFT_OUT as CLIPPED_MARKER;
use crate::types::{ToolOutput, ToolStatus};

/// The tools whose completed calls change files and record the change whole.
const FILE_TOOLS: [&str; 3] = ["write_file", "edit_file", crate::tools::restore_file::NAME];

/// What the turn a rewind goes back to was: a number the user gives, or the one before the
/// last (`/undo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Keep the changes of turns up to and including this one (0: none).
    Turn(usize),
    /// Undo the last finished turn's changes.
    Last,
}

impl Target {
    /// `/rewind N` or `/undo`'s argument, or why not.
    pub fn parse(command: &str, argument: &str) -> Result<Target, String> {
        match (command, argument.trim()) {
            ("undo", "") => Ok(Target::Last),
            ("undo", _) => Err("/undo takes no argument; /rewind N goes back to the end of turn N".into()),
            (_, "") => Err("/rewind needs the turn to go back to: /rewind 2 keeps turns 1 and 2".into()),
            (_, n) => {
                n.parse().map(Target::Turn).map_err(|_| format!("/rewind takes a turn number, not `{n}`"))
            }
        }
    }
}

/// What a file goes back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRewind {
    /// Absolute path.
    pub path: String,
    /// Its text before the first change after the target turn; `None`: it did not exist.
    pub before: Option<String>,
    /// Its text as Heron's last change left it: the file must still hold it, or someone
    /// changed it since.
    pub after: String,
}

/// What rewinding to a turn would do, and what it cannot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RewindPlan {
    /// The turn kept: changes after it go back.
    pub to: usize,
    /// The session's finished turns.
    pub turns: usize,
    /// Files Heron changed after `to`, each with what it goes back to.
    pub files: Vec<FileRewind>,
    /// Files changed after `to` that cannot be put back, each with why.
    pub lost: Vec<(String, String)>,
    /// The commands that ran after `to` (titles): what they changed is not undone.
    pub commands: Vec<String>,
    /// The files those commands changed, as the turns' workspace checks found them.
    pub command_files: Vec<String>,
    /// How many more files they changed than the turns listed.
    pub command_files_more: u64,
    /// Why a turn's workspace check was skipped, for each turn it was.
    pub unchecked: Vec<String>,
}

/// The files Heron's file tools changed in `events` (completed calls' diffs).
pub fn written_paths(events: &[Event]) -> Vec<&str> {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut paths = Vec::new();
    for event in events {
        match event {
            Event::ToolCall { call_id, name, .. } => {
                names.insert(call_id, name);
            }
            Event::ToolResult { call_id, status: ToolStatus::Completed, output, .. }
                if names.get(call_id.as_str()).is_some_and(|name| FILE_TOOLS.contains(name)) =>
            {
                paths.extend(output.iter().filter_map(|o| match o {
                    ToolOutput::Diff { path, .. } => Some(path.as_str()),
                    _ => None,
                }));
            }
            _ => {}
        }
    }
    paths
}

/// The turn each event belongs to, from 1.
fn turn_of(history: &[Event]) -> impl Iterator<Item = (usize, &Event)> {
    let mut turn = 1;
    history.iter().map(move |event| {
        let this = turn;
        if matches!(event, Event::TurnEnded { .. }) {
            turn += 1;
        }
        (this, event)
    })
}

/// What rewinding `history` to `target` would put back.
pub fn plan(history: &[Event], target: Target) -> Result<RewindPlan, String> {
    let turns = history.iter().filter(|e| matches!(e, Event::TurnEnded { .. })).count();
    let to = match target {
        Target::Turn(n) if n > turns => {
            return Err(format!("the session has {turns} finished turns: /rewind takes 0 to {turns}"));
        }
        Target::Turn(n) => n,
        Target::Last if turns == 0 => return Err("no turn has finished yet: there is nothing to undo".into()),
        Target::Last => turns - 1,
    };
    // The calls of turns after `to`, by id: their tool and what they touched.
    let mut calls: BTreeMap<&str, (&str, &str, Vec<&str>)> = BTreeMap::new();
    let mut files: BTreeMap<String, FileRewind> = BTreeMap::new();
    let mut order = Vec::new();
    let mut plan = RewindPlan { to, turns, ..RewindPlan::default() };
    for (turn, event) in turn_of(history) {
        if turn <= to {
            continue;
        }
        match event {
            Event::CommandChanges { files, more, skipped } => {
                for path in files {
                    if !plan.command_files.contains(path) {
                        plan.command_files.push(path.clone());
                    }
                }
                plan.command_files_more += more;
                plan.unchecked.extend(skipped.iter().cloned());
            }
            Event::ToolCall { call_id, name, title, locations, .. } => {
                let paths = locations.iter().filter(|l| !l.folder).map(|l| l.path.as_str()).collect();
                calls.insert(call_id, (name, title, paths));
            }
            Event::ToolResult { call_id, status: ToolStatus::Completed, output, .. } => {
                let Some((name, title, paths)) = calls.get(call_id.as_str()) else { continue };
                if *name == "run_command" {
                    plan.commands.push((*title).to_owned());
                    continue;
                }
                if !FILE_TOOLS.contains(name) {
                    continue;
                }
                let diffs: Vec<_> = output
                    .iter()
                    .filter_map(|o| match o {
                        ToolOutput::Diff { path, old_text, new_text } => Some((path, old_text, new_text)),
                        _ => None,
                    })
                    .collect();
                if diffs.is_empty() {
                    for path in paths {
                        plan.lost.push(((*path).to_owned(), "its change was too large to keep".into()));
                    }
                }
                for (path, old_text, new_text) in diffs {
                    let clipped = |text: &str| text.contains(CLIPPED_MARKER);
                    if clipped(new_text) || old_text.as_deref().is_some_and(clipped) {
                        plan.lost
                            .push((path.clone(), "the file is too large to have been kept whole".into()));
                        continue;
                    }
                    match files.get_mut(path) {
                        Some(rewind) => rewind.after = new_text.clone(),
                        None => {
                            order.push(path.clone());
                            let rewind = FileRewind {
                                path: path.clone(),
                                before: old_text.clone(),
                                after: new_text.clone(),
                            };
                            files.insert(path.clone(), rewind);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // A file whose change could not be kept cannot be put back in part either.
    plan.lost.sort();
    plan.lost.dedup();
    plan.files = order
        .into_iter()
        .filter_map(|path| files.remove(&path))
        .filter(|file| !plan.lost.iter().any(|(lost, _)| *lost == file.path))
        .filter(|file| file.before.as_deref() != Some(file.after.as_str()))
        .collect();
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Location, StopReason, ToolKind};

    fn call(id: &str, name: &str, path: &str) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            name: name.into(),
            title: format!("{name} {path}"),
            tool_kind: ToolKind::Edit,
            arguments: "{}".into(),
            raw_input: serde_json::Value::Null,
            locations: vec![Location { path: path.into(), line: None, folder: false }],
        }
    }

    fn result(id: &str, output: Vec<ToolOutput>) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            status: ToolStatus::Completed,
            output,
            raw_output: None,
            for_model: String::new(),
            instructions: Vec::new(),
        }
    }

    fn diff(path: &str, old: Option<&str>, new: &str) -> ToolOutput {
        ToolOutput::Diff { path: path.into(), old_text: old.map(str::to_owned), new_text: new.into() }
    }

    fn end() -> Event {
        Event::TurnEnded { stop_reason: StopReason::EndTurn }
    }

    /// Turn 1 creates a.txt; turn 2 changes it twice and makes b.txt; turn 3 runs a command
    /// and writes c.txt, too large to keep whole.
    fn history() -> Vec<Event> {
        vec![
            call("1", "write_file", "/w/a.txt"),
            result("1", vec![diff("/w/a.txt", None, "one\n")]),
            end(),
            call("2", "edit_file", "/w/a.txt"),
            result("2", vec![diff("/w/a.txt", Some("one\n"), "two\n")]),
            call("3", "edit_file", "/w/a.txt"),
            result("3", vec![diff("/w/a.txt", Some("two\n"), "three\n")]),
            call("4", "write_file", "/w/b.txt"),
            result("4", vec![diff("/w/b.txt", None, "bee\n")]),
            end(),
            call("5", "run_command", "/w"),
            result("5", Vec::new()),
            call("6", "write_file", "/w/c.txt"),
            result("6", vec![diff("/w/c.txt", Some("x\n⋯ 9 unchanged lines not shown ⋯\n"), "y\n")]),
            end(),
        ]
    }

    #[test]
    fn a_rewind_puts_each_file_back_as_it_was_before_the_first_later_change() {
        let plan = plan(&history(), Target::Turn(1)).expect("a plan");
        assert_eq!(plan.files.len(), 2, "{plan:?}");
        assert_eq!(
            plan.files[0],
            FileRewind { path: "/w/a.txt".into(), before: Some("one\n".into()), after: "three\n".into() }
        );
        assert_eq!(
            plan.files[1],
            FileRewind { path: "/w/b.txt".into(), before: None, after: "bee\n".into() }
        );
        assert_eq!(
            plan.lost,
            [("/w/c.txt".to_owned(), "the file is too large to have been kept whole".to_owned())]
        );
        assert_eq!(plan.commands, ["run_command /w"]);
        assert_eq!((plan.to, plan.turns), (1, 3));
    }

    #[test]
    fn undo_is_the_last_turn_and_turns_are_checked() {
        let plan = plan(&history(), Target::Last).expect("a plan");
        assert_eq!(plan.to, 2);
        assert!(plan.files.is_empty() && plan.commands.len() == 1 && plan.lost.len() == 1, "{plan:?}");
        assert!(super::plan(&history(), Target::Turn(4)).is_err());
        assert!(super::plan(&[], Target::Last).is_err());
        assert_eq!(super::plan(&history(), Target::Turn(0)).expect("all").files[0].before, None);
        assert_eq!(Target::parse("rewind", " 2 "), Ok(Target::Turn(2)));
        assert!(Target::parse("rewind", "two").is_err() && Target::parse("undo", "1").is_err());
    }
}
