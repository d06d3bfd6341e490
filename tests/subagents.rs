//! Subagents (`task`) over the adapter: a parent model hands two jobs to children that
//! run at once, each with a model of its own playing a script, and the parent's calls show
//! what each child did and its answer; a child past its time ends with what it did; a
//! cancel stops children that are still working; `session/load` replays the parent's calls
//! as they were seen live; a child past its steps, its answer's size or the session's
//! places is held to them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Editor, update_kind};

/// The parent: two jobs in one reply (the second for a child of model `d/m`, allowed to
/// write), then a closing line.
fn parent(child: &str) -> String {
    let task = |description: &str| {
        json!({ "tool_call": { "name": "task", "arguments": {
            "prompt": "Count the files in the workspace and say how many.", "description": description, "model": child,
        } } })
    };
    let writer = json!({ "tool_call": { "name": "task", "arguments": {
        "prompt": "Leave a note in NOTE.md.", "description": "leave a note", "model": "d/m", "tools": ["write_file"],
    } } });
    format!(
        "{}\n{}\n",
        json!({ "steps": [task("count them"), writer] }),
        json!({ "steps": [{ "text": "Both subagents answered." }, { "usage": { "input": 100, "output": 5 } }] })
    )
}

/// A child that writes a note, then says so.
const WRITER: &str = r#"{"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "NOTE.md", "content": "from a subagent\n"}}}]}
{"steps": [{"text": "Wrote NOTE.md."}, {"usage": {"input": 700, "output": 7}}]}
"#;

/// A child that lists the files, then answers.
const CHILD: &str = r#"{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
{"steps": [{"text": "There are 2 files."}]}
"#;

/// A child that works for a long time.
const SLOW_CHILD: &str = r#"{"steps": [{"delay_ms": 60000}, {"text": "Late."}]}
"#;

fn editor(child_script: &str) -> Editor {
    let children = format!(
        "{}{}",
        support::scripted_provider("c", "c.jsonl"),
        support::scripted_provider("d", "d.jsonl")
    );
    let dirs = support::scripted_home("p", &children, &parent("c/m"));
    dirs.write_home("c.jsonl", child_script);
    dirs.write_home("d.jsonl", WRITER);
    std::fs::write(std::path::Path::new(&dirs.ws()).join("a.txt"), "a").expect("a file");
    std::fs::write(std::path::Path::new(&dirs.ws()).join("b.txt"), "b").expect("a file");
    support::start_in(support::scripted_args("p"), dirs)
}

fn updates_of<'a>(seen: &'a [Value], status: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == status)
        .collect()
}

/// Sends a prompt and allows every permission request; what came before the answer, and
/// the answer.
async fn prompt_allowing(editor: &mut Editor, session: &str) -> (Vec<Value>, Value) {
    prompt_answering(editor, session, "allow_once").await
}

/// Sends a prompt and answers every permission request with `option`.
async fn prompt_answering(editor: &mut Editor, session: &str, option: &str) -> (Vec<Value>, Value) {
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Count the files" }] });
    editor.send_request(json!("p"), "session/prompt", prompt).await;
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(30)).await;
        if message["id"] == "p" && message.get("method").is_none() {
            return (seen, message);
        }
        if message["method"] == "session/request_permission" {
            let result = json!({ "outcome": { "outcome": "selected", "optionId": option } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })).await;
        }
        seen.push(message);
    }
}

#[tokio::test]
async fn two_subagents_run_at_once_one_asks_on_its_card_and_each_answers_through_its_call() {
    let mut editor = editor(CHILD);
    let session = editor.new_session().await;
    let (seen, answer) = prompt_allowing(&mut editor, &session).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The writer's call was asked about on its parent's card, naming the subagent.
    let asked: Vec<&Value> = seen.iter().filter(|m| m["method"] == "session/request_permission").collect();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let card = &asked[0]["params"]["toolCall"];
    assert!(
        card["title"].as_str().is_some_and(|t| t.starts_with("Subagent: leave a note: Create NOTE.md")),
        "{card}"
    );
    // `_meta` ties the request to both the parent's card and the child's own call.
    assert_eq!(card["_meta"]["heron"]["parentToolCallId"], card["toolCallId"], "{card}");
    assert!(card["_meta"]["heron"]["subagentToolCallId"].is_string(), "{card}");
    let writer_call = seen
        .iter()
        .find(|m| {
            update_kind(m) == Some("tool_call") && m["params"]["update"]["title"] == "Subagent: leave a note"
        })
        .expect("the writer's call");
    assert_eq!(card["toolCallId"], writer_call["params"]["update"]["toolCallId"], "on the parent's card");
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&editor.dirs.ws()).join("NOTE.md")).ok().as_deref(),
        Some("from a subagent\n")
    );
    // The child's tokens count in the session's, with the parent's next report (100 and 5).
    let status = editor.ask(json!("st"), "_heron/session/status", json!({ "sessionId": session })).await;
    let tokens = &status["result"]["status"]["costQuote"]["tokens"];
    assert_eq!(
        (tokens["inputTokens"].as_u64(), tokens["outputTokens"].as_u64()),
        (Some(800), Some(12)),
        "{status}"
    );
    let calls: Vec<&Value> = seen.iter().filter(|m| update_kind(m) == Some("tool_call")).collect();
    assert_eq!(calls.len(), 2, "one call per child: {calls:#?}");
    for call in &calls {
        let update = &call["params"]["update"];
        assert_eq!(update["kind"], "think", "{update}");
        assert!(update["title"].as_str().is_some_and(|t| t.starts_with("Subagent: ")), "{update}");
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
    let answers: Vec<&str> = updates_of(&seen, "completed")
        .iter()
        .map(|done| done["params"]["update"]["content"][0]["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(
        answers.iter().any(|t| t.contains("There are 2 files.") && t.contains("List the workspace: done")),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|t| t.contains("Wrote NOTE.md.") && t.contains("Create NOTE.md: done")),
        "{answers:?}"
    );
    for done in updates_of(&seen, "completed") {
        let raw = &done["params"]["update"]["rawOutput"];
        assert_eq!(raw["steps"][0]["status"], "done", "{done}");
        // The child's own transcript is kept beside the session's.
        let kept =
            std::fs::read_to_string(raw["transcript"].as_str().expect("a transcript")).expect("written");
        assert!(kept.lines().count() >= 4 && kept.contains("You are a subagent"), "{kept}");
    }
    editor.close().await;
}

/// A child that writes its note twice.
const WRITES_TWICE: &str = r#"{"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "NOTE.md", "content": "one\n"}}}]}
{"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "NOTE.md", "content": "two\n"}}}]}
{"steps": [{"text": "Wrote NOTE.md twice."}]}
"#;

#[tokio::test]
async fn allow_always_on_a_subagents_call_counts_for_the_rest_of_the_session() {
    let mut editor = editor(CHILD);
    editor.dirs.write_home("d.jsonl", WRITES_TWICE);
    let session = editor.new_session().await;
    let (seen, answer) = prompt_answering(&mut editor, &session, "allow_always").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = seen.iter().filter(|m| m["method"] == "session/request_permission").count();
    assert_eq!(asked, 1, "the second write of the same file was already allowed: {seen:#?}");
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&editor.dirs.ws()).join("NOTE.md")).ok().as_deref(),
        Some("two\n")
    );
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

#[tokio::test]
async fn a_load_replays_the_task_calls_with_their_answers() {
    let mut editor = editor(CHILD);
    let session = editor.new_session().await;
    let (live, answer) = prompt_allowing(&mut editor, &session).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let load = json!({ "sessionId": session, "cwd": editor.dirs.ws(), "mcpServers": [] });
    let (replayed, answer) = editor.exchange(json!("load"), "session/load", load).await;
    assert!(answer["result"].is_object(), "{answer}");
    let calls = |seen: &[Value]| -> Vec<Value> {
        seen.iter()
            .filter(|m| update_kind(m) == Some("tool_call"))
            .map(|m| {
                let update = &m["params"]["update"];
                json!([update["toolCallId"], update["title"], update["kind"]])
            })
            .collect()
    };
    assert_eq!(calls(&replayed).len(), 2, "{replayed:#?}");
    assert_eq!(calls(&replayed), calls(&live), "the same calls, titled and kinded as live");
    // Each ends as it ended live: completed, with the child's steps, answer and transcript.
    let ends = |seen: &[Value]| -> Vec<Value> {
        updates_of(seen, "completed").iter().map(|m| m["params"]["update"].clone()).collect()
    };
    assert_eq!(ends(&replayed).len(), 2, "{replayed:#?}");
    assert_eq!(ends(&replayed), ends(&live));
    for end in ends(&replayed) {
        assert_eq!(end["rawOutput"]["steps"][0]["status"], "done", "{end}");
        assert!(end["rawOutput"]["transcript"].is_string(), "{end}");
    }
    editor.close().await;
}

/// A child that lists the files, then works for a long time.
const STALLING_CHILD: &str = r#"{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
{"steps": [{"delay_ms": 60000}, {"text": "Late."}]}
"#;

#[tokio::test]
async fn a_child_past_its_time_ends_and_the_parent_learns_what_it_did() {
    let child = support::scripted_provider("c", "c.jsonl");
    let script = format!(
        "{}\n{}\n",
        json!({ "steps": [{ "tool_call": { "name": "task", "arguments": {
            "prompt": "Count the files.", "description": "count", "model": "c/m" } } }] }),
        json!({ "steps": [{ "text": "It ran out of time." }] })
    );
    let dirs = support::scripted_home("p", &format!("subagent_timeout_s = 1\n{child}"), &script);
    dirs.write_home("c.jsonl", STALLING_CHILD);
    let mut editor = support::start_in(support::scripted_args("p"), dirs);
    let session = editor.new_session().await;
    let (seen, answer) = editor.prompt(json!("p"), &session, "Count").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let failed = updates_of(&seen, "failed");
    assert_eq!(failed.len(), 1, "{seen:#?}");
    let text = failed[0]["params"]["update"]["content"][0]["content"]["text"].as_str().unwrap_or_default();
    assert!(text.contains("subagent_timeout_s") && text.contains("List the workspace: done"), "{text}");
    editor.close().await;
}

/// A parent that hands one job to a child of each of the models `c/m` and `d/m`, in one
/// reply, then closes.
fn two_jobs() -> String {
    let task = |model: &str| {
        json!({ "tool_call": { "name": "task", "arguments": {
            "prompt": "Count the files.", "description": format!("count with {model}"), "model": model } } })
    };
    format!(
        "{}\n{}\n",
        json!({ "steps": [task("c/m"), task("d/m")] }),
        json!({ "steps": [{ "text": "Done." }] })
    )
}

/// A child that lists the files at every request and never answers.
const LOOPING_CHILD: &str = r#"{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
{"steps": [{"tool_call": {"name": "list_files", "arguments": {"path": "."}}}]}
"#;

/// The text of the finished parent call titled `title`.
fn finished_text<'a>(seen: &'a [Value], title: &str) -> &'a str {
    let id = seen
        .iter()
        .find(|m| update_kind(m) == Some("tool_call") && m["params"]["update"]["title"] == title)
        .map(|m| &m["params"]["update"]["toolCallId"])
        .unwrap_or_else(|| panic!("no call {title}: {seen:#?}"));
    seen.iter()
        .filter(|m| update_kind(m) == Some("tool_call_update") && m["params"]["update"]["toolCallId"] == *id)
        .filter(|m| matches!(m["params"]["update"]["status"].as_str(), Some("completed" | "failed")))
        .find_map(|m| m["params"]["update"]["content"][0]["content"]["text"].as_str())
        .unwrap_or_else(|| panic!("{title} did not finish: {seen:#?}"))
}

/// L23: a child past `subagent_max_steps` model requests fails showing what it did, and a
/// child's answer past 32 KiB (`MAX_ANSWER_BYTES`) reaches the parent clipped.
#[tokio::test]
async fn a_child_past_its_steps_fails_with_what_it_did_and_a_long_answer_is_clipped() {
    let children = format!(
        "subagent_max_steps = 2\n{}{}",
        support::scripted_provider("c", "c.jsonl"),
        support::scripted_provider("d", "d.jsonl")
    );
    let dirs = support::scripted_home("p", &children, &two_jobs());
    dirs.write_home("c.jsonl", LOOPING_CHILD);
    dirs.write_home("d.jsonl", &format!("{}\n", json!({ "steps": [{ "text": "y".repeat(40 * 1024) }] })));
    let mut editor = support::start_in(support::scripted_args("p"), dirs);
    let session = editor.new_session().await;
    let (seen, answer) = editor.prompt(json!("p"), &session, "Count").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let looped = finished_text(&seen, "Subagent: count with c/m");
    assert!(looped.contains("made 2 model requests (subagent_max_steps)"), "{looped}");
    assert_eq!(looped.matches("List the workspace: done").count(), 2, "{looped}");
    let long = finished_text(&seen, "Subagent: count with d/m");
    assert!(
        long.len() <= 32 * 1024 && long.starts_with("yyy") && long.ends_with('…'),
        "{} bytes",
        long.len()
    );
    editor.close().await;
}

/// L23: with one place (`max_subagents = 1`) the second child waits for the first to end.
/// Unbounded, the steps the children show would interleave: `c/m` lists, waits 600 ms and
/// lists again, while `d/m` lists 300 ms in. (Finished calls are reported in call order,
/// so only the steps shown while running tell when each child ran.)
#[tokio::test]
async fn a_child_past_the_places_waits_for_one_to_end() {
    let children = format!(
        "max_subagents = 1\n{}{}",
        support::scripted_provider("c", "c.jsonl"),
        support::scripted_provider("d", "d.jsonl")
    );
    let list = json!({ "tool_call": { "name": "list_files", "arguments": { "path": "." } } });
    let c = [
        json!({ "steps": [list] }),
        json!({ "steps": [{ "delay_ms": 600 }, list] }),
        json!({ "steps": [{ "text": "C." }] }),
    ];
    let d = [json!({ "steps": [{ "delay_ms": 300 }, list] }), json!({ "steps": [{ "text": "D." }] })];
    let lines = |turns: &[Value]| turns.iter().map(|turn| format!("{turn}\n")).collect::<String>();
    let dirs = support::scripted_home("p", &children, &two_jobs());
    dirs.write_home("c.jsonl", &lines(&c));
    dirs.write_home("d.jsonl", &lines(&d));
    let mut editor = support::start_in(support::scripted_args("p"), dirs);
    let session = editor.new_session().await;
    let (seen, answer) = editor.prompt(json!("p"), &session, "Count").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Where each child's steps showed while it ran: the first and the last.
    let span = |title: &str| {
        let id = seen
            .iter()
            .find(|m| update_kind(m) == Some("tool_call") && m["params"]["update"]["title"] == title)
            .map(|m| m["params"]["update"]["toolCallId"].clone())
            .expect("a call");
        let shown: Vec<usize> = seen
            .iter()
            .enumerate()
            .map(|(n, m)| (n, &m["params"]["update"]))
            .filter(|(_, u)| {
                u["toolCallId"] == id && u["status"] == "in_progress" && u.get("content").is_some()
            })
            .map(|(n, _)| n)
            .collect();
        (shown[0], shown[shown.len() - 1])
    };
    let (c, d) = (span("Subagent: count with c/m"), span("Subagent: count with d/m"));
    assert!(c.1 < d.0 || d.1 < c.0, "one child ran at a time: {c:?} {d:?}");
    assert!(finished_text(&seen, "Subagent: count with c/m").ends_with("C."));
    assert!(finished_text(&seen, "Subagent: count with d/m").ends_with("D."));
    editor.close().await;
}
