//! Subagents (`task`) over the adapter: a parent model hands two jobs to children that
//! run at once, each with a model of its own playing a script, and the parent's calls show
//! what each child did and its answer; a cancel stops children that are still working.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Editor, update_kind};

/// The parent: two jobs in one reply, then a closing line.
fn parent(child: &str) -> String {
    let task = |description: &str| {
        json!({ "tool_call": { "name": "task", "arguments": {
            "prompt": "Count the files in the workspace and say how many.", "description": description, "model": child,
        } } })
    };
    format!(
        "{}\n{}\n",
        json!({ "steps": [task("count them"), task("count them again")] }),
        json!({ "steps": [{ "text": "Both subagents answered." }] })
    )
}

/// A child that lists the files, then answers.
const CHILD: &str = r#"{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
{"steps": [{"text": "There are 2 files."}]}
"#;

/// A child that works for a long time.
const SLOW_CHILD: &str = r#"{"steps": [{"delay_ms": 60000}, {"text": "Late."}]}
"#;

fn editor(child_script: &str) -> Editor {
    let child = support::scripted_provider("c", "c.jsonl");
    let dirs = support::scripted_home("p", &child, &parent("c/m"));
    dirs.write_home("c.jsonl", child_script);
    std::fs::write(std::path::Path::new(&dirs.ws()).join("a.txt"), "a").expect("a file");
    std::fs::write(std::path::Path::new(&dirs.ws()).join("b.txt"), "b").expect("a file");
    support::start_in(support::scripted_args("p"), dirs)
}

fn updates_of<'a>(seen: &'a [Value], status: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == status)
        .collect()
}

#[tokio::test]
async fn two_subagents_run_at_once_and_each_answers_through_its_call() {
    let mut editor = editor(CHILD);
    let session = editor.new_session().await;
    let (seen, answer) = editor.prompt(json!("p"), &session, "Count the files twice").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let calls: Vec<&Value> = seen.iter().filter(|m| update_kind(m) == Some("tool_call")).collect();
    assert_eq!(calls.len(), 2, "one call per child: {calls:#?}");
    for call in &calls {
        let update = &call["params"]["update"];
        assert_eq!(update["kind"], "think", "{update}");
        assert!(update["title"].as_str().is_some_and(|t| t.starts_with("Subagent: count them")), "{update}");
    }
    // Both children started before either finished.
    let position = |status: &str| {
        seen.iter()
            .enumerate()
            .filter(|(_, m)| {
                update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == status
            })
            // A start carries no content; the updates after it show the child's steps.
            .filter(|(_, m)| status != "in_progress" || m["params"]["update"].get("content").is_none())
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    let (started, finished) = (position("in_progress"), position("completed"));
    assert_eq!((started.len(), finished.len()), (2, 2), "{seen:#?}");
    assert!(
        started[1] < finished[0],
        "the second started before the first finished: {started:?} {finished:?}"
    );
    for done in updates_of(&seen, "completed") {
        let text = done["params"]["update"]["content"][0]["content"]["text"].as_str().unwrap_or_default();
        assert!(text.contains("There are 2 files.") && text.contains(": done"), "{text}");
        assert_eq!(done["params"]["update"]["rawOutput"]["steps"][0]["status"], "done", "{done}");
    }
    editor.close().await;
}

#[tokio::test]
async fn a_cancel_stops_the_children_and_the_turn_ends_cancelled() {
    let mut editor = editor(SLOW_CHILD);
    let session = editor.new_session().await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Count" }] });
    editor.send_request(json!("p"), "session/prompt", prompt).await;
    let mut running = 0;
    while running < 2 {
        let message = editor.recv_within(Duration::from_secs(30)).await;
        if update_kind(&message) == Some("tool_call_update")
            && message["params"]["update"]["status"] == "in_progress"
            && message["params"]["update"].get("content").is_none()
        {
            running += 1;
        }
    }
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let mut ended = Vec::new();
    let answer = loop {
        let message = editor.recv_within(Duration::from_secs(10)).await;
        if message["id"] == "p" && message.get("method").is_none() {
            break message;
        }
        ended.push(message);
    };
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let stopped = ended
        .iter()
        .filter(|m| update_kind(m) == Some("tool_call_update"))
        .filter(|m| matches!(m["params"]["update"]["status"].as_str(), Some("failed" | "cancelled")))
        .count();
    assert_eq!(stopped, 2, "both children ended, not run to the end: {ended:#?}");
    editor.close().await;
}
