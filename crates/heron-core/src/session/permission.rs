//! The permission gate: from the approval posture, the kind of a tool call, whether it
//! reaches outside the workspace, and what the user said before, decides whether a call
//! runs, is refused, or asks first.

use std::collections::HashMap;

use super::settings::Posture;
use crate::tools::editor::PermissionAnswer;
use crate::types::ToolKind;

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run without asking.
    Allow,
    /// Ask the user first.
    Ask,
    /// Refuse; the message tells the model why.
    Deny(String),
}

/// What the user said "always" to, for the rest of the session: by tool and kind, so an
/// always-allow for edits never covers commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvals {
    remembered: HashMap<(String, ToolKind), bool>,
}

impl Approvals {
    /// Remembers an always answer; once answers are not remembered.
    pub fn remember(&mut self, tool: &str, kind: ToolKind, answer: PermissionAnswer) {
        match answer {
            PermissionAnswer::AllowAlways => {
                self.remembered.insert((tool.to_owned(), kind), true);
            }
            PermissionAnswer::RejectAlways => {
                self.remembered.insert((tool.to_owned(), kind), false);
            }
            PermissionAnswer::AllowOnce | PermissionAnswer::RejectOnce | PermissionAnswer::Cancelled => {}
        }
    }

    fn get(&self, tool: &str, kind: ToolKind) -> Option<bool> {
        self.remembered.get(&(tool.to_owned(), kind)).copied()
    }
}

fn reads(kind: ToolKind) -> bool {
    matches!(kind, ToolKind::Read | ToolKind::Search)
}

/// Decides one call. `plan_mode` makes the session read-only whatever the posture.
pub fn decide(
    posture: Posture,
    plan_mode: bool,
    tool: &str,
    kind: ToolKind,
    outside_roots: bool,
    approvals: &Approvals,
) -> Decision {
    // Thinking (plans) and questions change nothing and are always allowed.
    if kind == ToolKind::Think || tool == "question" {
        return Decision::Allow;
    }
    let posture = if plan_mode { Posture::ReadOnly } else { posture };
    if posture == Posture::Yolo {
        return Decision::Allow;
    }
    match approvals.get(tool, kind) {
        Some(false) => {
            return Decision::Deny(format!("The user refused `{tool}` for the rest of this session."));
        }
        Some(true) if posture != Posture::ReadOnly => return Decision::Allow,
        _ => {}
    }
    let is_read = reads(kind);
    match posture {
        Posture::ReadOnly if is_read && !outside_roots => Decision::Allow,
        Posture::ReadOnly if plan_mode => {
            Decision::Deny(format!("Plan mode is read-only: `{tool}` was not run."))
        }
        Posture::ReadOnly => Decision::Deny(format!(
            "Tool approval is read-only: `{tool}` was not run{}.",
            if is_read { " (it reads outside the workspace)" } else { "" }
        )),
        Posture::DontAsk if is_read && !outside_roots => Decision::Allow,
        Posture::DontAsk => {
            Decision::Deny(format!("`{tool}` is not pre-allowed, and tool approval is don't-ask."))
        }
        Posture::Ask | Posture::Auto if is_read && !outside_roots => Decision::Allow,
        Posture::Auto if kind == ToolKind::Edit || kind == ToolKind::Delete || kind == ToolKind::Move => {
            // Write tools refuse anything outside the write roots themselves.
            Decision::Allow
        }
        Posture::Ask | Posture::Auto => Decision::Ask,
        Posture::Yolo => Decision::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(posture: Posture, kind: ToolKind, outside: bool) -> Decision {
        decide(posture, false, "t", kind, outside, &Approvals::default())
    }

    #[test]
    fn each_posture_against_each_kind() {
        use Decision::{Allow, Ask};
        let deny = |d: Decision| matches!(d, Decision::Deny(_));
        // read inside, read outside, edit, execute
        assert_eq!(d(Posture::ReadOnly, ToolKind::Read, false), Allow);
        assert!(deny(d(Posture::ReadOnly, ToolKind::Read, true)));
        assert!(deny(d(Posture::ReadOnly, ToolKind::Edit, false)));
        assert!(deny(d(Posture::ReadOnly, ToolKind::Execute, false)));
        assert_eq!(d(Posture::DontAsk, ToolKind::Search, false), Allow);
        assert!(deny(d(Posture::DontAsk, ToolKind::Read, true)));
        assert!(deny(d(Posture::DontAsk, ToolKind::Edit, false)));
        assert_eq!(d(Posture::Ask, ToolKind::Read, false), Allow);
        assert_eq!(d(Posture::Ask, ToolKind::Read, true), Ask);
        assert_eq!(d(Posture::Ask, ToolKind::Edit, false), Ask);
        assert_eq!(d(Posture::Ask, ToolKind::Execute, false), Ask);
        assert_eq!(d(Posture::Auto, ToolKind::Edit, false), Allow);
        assert_eq!(d(Posture::Auto, ToolKind::Execute, false), Ask);
        assert_eq!(d(Posture::Auto, ToolKind::Read, true), Ask);
        assert_eq!(d(Posture::Yolo, ToolKind::Execute, true), Allow);
    }

    #[test]
    fn always_allow_covers_the_tool_and_kind_only() {
        let mut approvals = Approvals::default();
        approvals.remember("write_file", ToolKind::Edit, PermissionAnswer::AllowAlways);
        assert_eq!(
            decide(Posture::Ask, false, "write_file", ToolKind::Edit, false, &approvals),
            Decision::Allow
        );
        assert_eq!(
            decide(Posture::Ask, false, "run_command", ToolKind::Execute, false, &approvals),
            Decision::Ask
        );
    }

    #[test]
    fn always_reject_refuses_without_asking() {
        let mut approvals = Approvals::default();
        approvals.remember("run_command", ToolKind::Execute, PermissionAnswer::RejectAlways);
        let decision = decide(Posture::Ask, false, "run_command", ToolKind::Execute, false, &approvals);
        assert!(matches!(decision, Decision::Deny(_)));
    }

    #[test]
    fn plan_mode_is_read_only_even_in_yolo() {
        let decision =
            decide(Posture::Yolo, true, "write_file", ToolKind::Edit, false, &Approvals::default());
        assert!(matches!(decision, Decision::Deny(m) if m.contains("Plan mode")));
    }

    #[test]
    fn thinking_is_always_allowed() {
        let decision =
            decide(Posture::ReadOnly, true, "todo_write", ToolKind::Think, false, &Approvals::default());
        assert_eq!(decision, Decision::Allow);
    }
}
