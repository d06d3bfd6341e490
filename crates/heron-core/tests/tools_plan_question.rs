//! todo_write, question, and the built-in registry.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{Dirs, FakeEditor, Script, call};
use heron_core::tools::Tool;
use heron_core::tools::editor::QuestionAnswer;
use heron_core::tools::question::Question;
use heron_core::tools::todo::TodoWrite;
use heron_core::types::{PlanItem, PlanPriority, PlanStatus, ToolKind, ToolStatus};
use serde_json::json;

fn item(content: &str, priority: PlanPriority, status: PlanStatus) -> PlanItem {
    PlanItem { content: content.to_owned(), priority, status }
}

#[tokio::test]
async fn todo_write_produces_the_full_plan() {
    let dirs = Dirs::new();
    let args = json!({"todos": [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Write the fix", "status": "in_progress"},
        {"content": "Run the tests", "status": "pending", "priority": "low"},
    ]});
    let prepared = TodoWrite.prepare(&args.to_string(), &dirs.env()).expect("prepared");
    assert_eq!(prepared.kind, ToolKind::Think);
    let outcome = TodoWrite.run(prepared, dirs.env()).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(
        outcome.plan,
        Some(vec![
            item("Read the code", PlanPriority::High, PlanStatus::Completed),
            item("Write the fix", PlanPriority::Medium, PlanStatus::InProgress),
            item("Run the tests", PlanPriority::Low, PlanStatus::Pending),
        ])
    );
    assert!(outcome.for_model.starts_with("Plan updated: 3 items (1 completed, 1 in progress, 1 pending)"));
}

#[tokio::test]
async fn todo_write_refuses_an_unknown_status() {
    let dirs = Dirs::new();
    let err = TodoWrite
        .prepare(r#"{"todos":[{"content":"x","status":"done"}]}"#, &dirs.env())
        .expect_err("unknown status");
    assert!(err.contains("unknown variant"), "{err}");
}

#[tokio::test]
async fn question_answer_goes_to_the_model() {
    let dirs = Dirs::new();
    let fake = FakeEditor::new(Script::full());
    let env = dirs.env_with(Arc::new(fake.clone()));
    let outcome = call(&Question, &env, json!({"question": "Which one?", "options": ["a", "yes"]})).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert_eq!(outcome.for_model, "The user answered: yes");
    assert_eq!(fake.calls(), vec!["ask Which one? [a|yes]"]);
    // An answer that is none of the choices offered is not passed on as one.
    let outcome = call(&Question, &env, json!({"question": "Which one?", "options": ["a", "b"]})).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("other than the choices offered"), "{}", outcome.for_model);
}

#[tokio::test]
async fn question_declined_or_dismissed_fails_clearly() {
    let dirs = Dirs::new();
    for (answer, words) in [(QuestionAnswer::Declined, "declined"), (QuestionAnswer::Cancelled, "dismissed")]
    {
        let fake = FakeEditor::new(Script { answer: Some(answer), ..Script::full() });
        let outcome = call(&Question, &dirs.env_with(Arc::new(fake)), json!({"question": "Go?"})).await;
        assert_eq!(outcome.status, ToolStatus::Failed);
        assert!(outcome.for_model.contains(words), "{}", outcome.for_model);
    }
}

#[tokio::test]
async fn question_without_the_capability_fails_at_once() {
    let dirs = Dirs::new();
    let fake = FakeEditor::new(Script { questions: false, answer: None, ..Script::full() });
    let env = dirs.env_with(Arc::new(fake.clone()));
    let run = call(&Question, &env, json!({"question": "Go?"}));
    let outcome = tokio::time::timeout(Duration::from_secs(2), run).await.expect("no hang");
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn question_unanswered_ends_on_cancel() {
    let dirs = Dirs::new();
    let fake = FakeEditor::new(Script { answer: None, ..Script::full() });
    let env = dirs.env_with(Arc::new(fake));
    let cancel = env.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let run = call(&Question, &env, json!({"question": "Go?"}));
    let outcome = tokio::time::timeout(Duration::from_secs(2), run).await.expect("cancel ends it");
    assert_eq!(outcome.status, ToolStatus::Failed);
}

#[test]
fn builtin_registry_offers_every_tool_and_read_only_leaves_out_changes() {
    let registry = heron_core::tools::builtin();
    let names: Vec<String> = registry.specs(false).into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "edit_file",
            "finish_goal",
            "grep",
            "list_files",
            "question",
            "read_file",
            "run_command",
            "todo_write",
            "write_file"
        ]
    );
    let read_only: Vec<String> = registry.specs(true).into_iter().map(|s| s.name).collect();
    assert_eq!(read_only, ["finish_goal", "grep", "list_files", "read_file", "todo_write"]);
    for spec in registry.specs(false) {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert!(spec.parameters.get("$schema").is_none());
    }
}

#[test]
fn todo_write_schema_names_the_allowed_statuses() {
    let spec = TodoWrite.spec();
    let item = &spec.parameters["properties"]["todos"]["items"];
    assert_eq!(
        item["properties"]["status"]["enum"],
        json!(["pending", "in_progress", "completed"]),
        "{item}"
    );
}
