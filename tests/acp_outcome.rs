//! Turns that end honestly over ACP: with the `delivery` preset, a turn that changed files
//! and verified nothing afterwards ends `end_turn` with `_meta.heron.turnOutcome` `paused`
//! and a host-written `[paused]` line; a verified turn is `completed`; other presets say
//! nothing.

use crate::support::turns::{new_session, prompt_answering, start};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

/// Writes `note.txt`, then ends.
const WRITES: &str = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"note.txt","content":"hello\n"}}}]}
{"steps":[{"text":"Done."}]}
"#;

/// Writes `note.txt`, runs a passing check, then ends.
const WRITES_AND_CHECKS: &str = r#"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"note.txt","content":"hello\n"}}}]}
{"steps":[{"tool_call":{"name":"run_command","arguments":{"command":"test -f note.txt"}}}]}
{"steps":[{"text":"Done."}]}
"#;

fn args(preset: &str) -> AcpArgs {
    AcpArgs {
        preset: Some(preset.into()),
        permission_mode: Some("bypassPermissions".into()),
        ..crate::support::demo_args()
    }
}

/// The agent text of `messages`, joined.
fn text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

async fn run(script: &str, preset: &str) -> (String, Value) {
    let mut editor = start(script, "", args(preset));
    let session = new_session(&mut editor, json!({})).await;
    let (seen, answer) = prompt_answering(&mut editor, &session, |_| None).await;
    editor.close().await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    (text(&seen), answer["result"]["_meta"]["heron"]["turnOutcome"].clone())
}

#[tokio::test]
async fn a_delivery_turn_that_changed_files_unchecked_ends_paused_and_says_so() {
    let (text, outcome) = run(WRITES, "delivery").await;
    assert_eq!(outcome["kind"], "paused", "{outcome}");
    assert!(outcome["reason"].as_str().is_some_and(|r| r.contains("1 change")), "{outcome}");
    assert!(text.trim_end().lines().last().is_some_and(|l| l.starts_with("[paused] Not verified")), "{text}");
}

#[tokio::test]
async fn a_delivery_turn_checked_after_its_last_change_is_completed() {
    let (text, outcome) = run(WRITES_AND_CHECKS, "delivery").await;
    assert_eq!(outcome, json!({ "kind": "completed" }));
    assert!(!text.contains("[paused]"), "{text}");
}

#[tokio::test]
async fn other_presets_report_no_outcome_and_no_note() {
    let (text, outcome) = run(WRITES, "balanced").await;
    assert_eq!(outcome, Value::Null);
    assert!(!text.contains("[paused]"), "{text}");
}
