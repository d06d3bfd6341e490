//! How a turn that ended on its own ended, honestly: `completed`, or (with the `delivery`
//! preset) `paused` when it changed files and ran nothing that verified them afterwards.
//! Pure reading of the turn's events; the turn reports what this decides.

use super::event::Event;
use crate::types::{ToolKind, ToolStatus, TurnOutcome};

/// The tool whose successful run counts as verification.
const RUN_COMMAND: &str = "run_command";

/// The outcome of a turn whose events are `events`, all of them this turn's. A change is a
/// completed call of an edit, delete or move tool; verification is a completed
/// `run_command` after the last change (exit code 0), of `verify` when the project names its
/// verify command (the command line must contain it).
pub(super) fn assess(events: &[Event], verify: Option<&str>) -> TurnOutcome {
    // Calls by id: (its kind, whether it is a run_command that counts as verification).
    let mut calls: Vec<(&str, ToolKind, bool)> = Vec::new();
    let mut changed_unverified = 0usize;
    for event in events {
        match event {
            Event::ToolCall { call_id, name, tool_kind, arguments, .. } => {
                let verifies =
                    name == RUN_COMMAND && verify.is_none_or(|command| arguments.contains(command));
                calls.push((call_id.as_str(), *tool_kind, verifies));
            }
            Event::ToolResult { call_id, status: ToolStatus::Completed, .. } => {
                let Some((_, kind, verifies)) = calls.iter().find(|(id, ..)| id == call_id) else { continue };
                if matches!(kind, ToolKind::Edit | ToolKind::Delete | ToolKind::Move) {
                    changed_unverified += 1;
                } else if *verifies {
                    changed_unverified = 0;
                }
            }
            _ => {}
        }
    }
    if changed_unverified == 0 {
        return TurnOutcome::Completed;
    }
    let what = match verify {
        Some(command) => format!("`{command}` did not run"),
        None => "no command ran".to_owned(),
    };
    let changes =
        if changed_unverified == 1 { "1 change".to_owned() } else { format!("{changed_unverified} changes") };
    TurnOutcome::Paused { reason: format!("{changes} to files since the last successful check: {what}") }
}

/// The host-written line a paused turn's text ends with, on a line of its own even for a
/// client that runs messages together.
pub(super) fn paused_note(reason: &str) -> String {
    format!("\n\n[paused] Not verified, {reason}. Run the checks, or ask me to.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn call(id: &str, name: &str, kind: ToolKind, arguments: &str) -> Event {
        Event::ToolCall {
            call_id: id.into(),
            name: name.into(),
            title: String::new(),
            tool_kind: kind,
            arguments: arguments.into(),
            raw_input: Value::Null,
            locations: Vec::new(),
        }
    }

    fn result(id: &str, status: ToolStatus) -> Event {
        Event::ToolResult {
            call_id: id.into(),
            status,
            output: Vec::new(),
            raw_output: None,
            for_model: String::new(),
            instructions: Vec::new(),
        }
    }

    #[test]
    fn a_change_without_a_later_passing_command_is_paused() {
        let edited = [call("1", "write_file", ToolKind::Edit, "{}"), result("1", ToolStatus::Completed)];
        assert!(matches!(assess(&edited, None), TurnOutcome::Paused { .. }));
        let mut verified = edited.to_vec();
        verified.extend([
            call("2", RUN_COMMAND, ToolKind::Execute, "{\"command\":\"cargo test\"}"),
            result("2", ToolStatus::Completed),
        ]);
        assert_eq!(assess(&verified, None), TurnOutcome::Completed);
        let mut failed = edited.to_vec();
        failed.extend([call("2", RUN_COMMAND, ToolKind::Execute, "{}"), result("2", ToolStatus::Failed)]);
        assert!(
            matches!(assess(&failed, None), TurnOutcome::Paused { .. }),
            "a failing check verifies nothing"
        );
    }

    #[test]
    fn a_check_before_the_last_change_does_not_cover_it_and_a_failed_change_is_no_change() {
        let events = [
            call("1", "edit_file", ToolKind::Edit, "{}"),
            result("1", ToolStatus::Completed),
            call("2", RUN_COMMAND, ToolKind::Execute, "{}"),
            result("2", ToolStatus::Completed),
            call("3", "edit_file", ToolKind::Edit, "{}"),
            result("3", ToolStatus::Completed),
            call("4", "edit_file", ToolKind::Edit, "{}"),
            result("4", ToolStatus::Failed),
        ];
        let TurnOutcome::Paused { reason } = assess(&events, None) else { panic!("paused") };
        assert!(reason.starts_with("1 change"), "{reason}");
        assert_eq!(assess(&events[..4], None), TurnOutcome::Completed);
        let read_only = [call("1", "read_file", ToolKind::Read, "{}"), result("1", ToolStatus::Completed)];
        assert_eq!(assess(&read_only, None), TurnOutcome::Completed);
    }

    #[test]
    fn with_a_verify_command_only_that_command_verifies() {
        let events = [
            call("1", "write_file", ToolKind::Edit, "{}"),
            result("1", ToolStatus::Completed),
            call("2", RUN_COMMAND, ToolKind::Execute, "{\"command\":\"ls\"}"),
            result("2", ToolStatus::Completed),
        ];
        let TurnOutcome::Paused { reason } = assess(&events, Some("make check")) else { panic!("paused") };
        assert!(reason.contains("`make check` did not run"), "{reason}");
        let mut checked = events.to_vec();
        checked.extend([
            call("3", RUN_COMMAND, ToolKind::Execute, "{\"command\":\"make check\"}"),
            result("3", ToolStatus::Completed),
        ]);
        assert_eq!(assess(&checked, Some("make check")), TurnOutcome::Completed);
    }
}
