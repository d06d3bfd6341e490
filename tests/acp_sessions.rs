//! Session setup over ACP, end to end with the demo model: `session/new`, `load` and
//! `resume` (across a restart), `list` with its filter and pages, `close`, `delete`, `fork`.

use crate::support;
use std::collections::BTreeSet;

use crate::support::{Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

async fn initialize(editor: &mut Editor) {
    let answer = editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
}

/// The option `id` of a `configOptions` list.
fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .unwrap_or_else(|| panic!("no config option {id} in {options}"))
}

/// Every session id `session/list` returns with `params`, page after page.
async fn list_all(editor: &mut Editor, params: Value) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut params = params;
    for page in 1.. {
        let answer = editor.ask(json!(format!("list{page}")), "session/list", params.clone()).await;
        let result = &answer["result"];
        let sessions = result["sessions"].as_array().unwrap_or_else(|| panic!("no sessions: {answer}"));
        ids.extend(sessions.iter().map(|s| s["sessionId"].as_str().expect("sessionId").to_owned()));
        match result.get("nextCursor") {
            None => return (ids, page),
            Some(cursor) => {
                assert!(!sessions.is_empty(), "a page with a nextCursor is not empty: {answer}");
                params["cursor"] = cursor.clone();
            }
        }
    }
    unreachable!("pages are counted from 1 without end")
}

/// One update as (kind, what identifies its content): the text of a chunk, the id and
/// status of a tool call.
fn summary(update: &Value) -> (String, String) {
    let body = &update["params"]["update"];
    let kind = body["sessionUpdate"].as_str().unwrap_or("?").to_owned();
    let what = match kind.as_str() {
        "tool_call" | "tool_call_update" => {
            format!(
                "{} {}",
                body["toolCallId"].as_str().unwrap_or("?"),
                body["status"].as_str().unwrap_or("-")
            )
        }
        _ => body["content"]["text"].as_str().unwrap_or("").to_owned(),
    };
    (kind, what)
}

/// A live turn as the replay should show it: chunks of one message joined, live-only
/// updates (usage, tool calls still running) left out.
fn as_replayed(live: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut last_message: Option<Value> = None;
    for update in live.iter().filter(|m| update_kind(m).is_some()) {
        let body = &update["params"]["update"];
        let (kind, what) = summary(update);
        // Live only: progress, and the change a pending call shows before it is approved
        // (the completed update carries it again).
        let progress = body["status"] == "in_progress" || body["status"] == "pending";
        // The title is stored on the session, not replayed as an event.
        if kind == "usage_update" || kind == "session_info_update" || (kind == "tool_call_update" && progress)
        {
            continue;
        }
        let message_id = body.get("messageId").cloned();
        match out.last_mut() {
            Some((last_kind, text))
                if kind.ends_with("_chunk") && *last_kind == kind && message_id == last_message =>
            {
                text.push_str(&what)
            }
            _ => out.push((kind, what)),
        }
        last_message = message_id;
    }
    out
}

#[tokio::test]
async fn session_new_answers_the_session_with_its_modes_and_config_options() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let answer = editor.open_session(json!(1), &cwd).await;
    let result = &answer["result"];
    assert!(result["sessionId"].as_str().is_some_and(|id| !id.is_empty()), "{answer}");
    assert_eq!(result["modes"]["currentModeId"], "normal");
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .expect("availableModes")
        .iter()
        .map(|m| m["id"].as_str().expect("mode id"))
        .collect();
    assert_eq!(modes, ["normal", "plan", "goal"]);
    let options = &result["configOptions"];
    let ids: Vec<&str> =
        options.as_array().expect("configOptions").iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mode", "model", "effort", "agent_preset", "tool_approval"]);
    let current: Vec<&Value> = ids.iter().map(|id| &option(options, id)["currentValue"]).collect();
    assert_eq!(
        current,
        [&json!("normal"), &json!("demo/demo"), &json!("auto"), &json!("balanced"), &json!("ask")]
    );
    assert!(options.as_array().unwrap().iter().all(|o| o["type"] == "select"), "{options}");
    editor.close().await;
}

#[tokio::test]
async fn a_new_sessions_commands_come_right_behind_its_answer_even_to_an_editor_that_pipelines() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    // The editor sends its next requests before it has read the answer to the first.
    editor.send_request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
    editor.send_request(json!("list"), "session/list", json!({})).await;
    editor.send_request(json!("again"), "session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
    let mut seen = Vec::new();
    let commands =
        |seen: &[Value]| seen.iter().filter(|m| update_kind(m) == Some("available_commands_update")).count();
    while seen.iter().filter(|m: &&Value| m.get("id").is_some()).count() < 3 || commands(&seen) < 2 {
        seen.push(editor.recv().await);
    }
    for id in ["new", "again"] {
        let at = seen.iter().position(|m| m["id"] == id).expect("answered");
        let session = &seen[at]["result"]["sessionId"];
        // No update of the session before its answer, and its commands right behind it.
        assert!(seen[..at].iter().all(|m| &m["params"]["sessionId"] != session), "{seen:#?}");
        let next = seen.get(at + 1).unwrap_or_else(|| panic!("nothing followed {id}: {seen:#?}"));
        assert_eq!(update_kind(next), Some("available_commands_update"), "{seen:#?}");
        assert_eq!(&next["params"]["sessionId"], session);
    }
    editor.close().await;
}

#[tokio::test]
async fn session_new_with_a_relative_cwd_is_invalid_params_naming_cwd() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let answer = editor.open_session(json!(1), "relative/dir").await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "cwd", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn session_new_without_any_model_is_auth_required_and_creates_nothing() {
    let mut editor = support::start_with(AcpArgs { validate: true, ..AcpArgs::default() });
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let answer = editor.open_session(json!(1), &cwd).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "auth_required", "{answer}");
    let listed = editor.ask(json!(2), "session/list", json!({})).await;
    assert_eq!(listed["result"], json!({ "sessions": [] }), "{listed}");
    editor.close().await;
}

/// Logging in cannot fix a model the config does not have, so it is not -32000 (which sends
/// an editor to its login screen): the error names the model.
#[tokio::test]
async fn session_new_with_an_unknown_model_names_it_and_is_not_auth_required() {
    let mut editor = support::start_with(AcpArgs { model: Some("nowhere/m".into()), ..support::demo_args() });
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let answer = editor.open_session(json!(1), &cwd).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "provider.unknown_model", "{answer}");
    assert_eq!(answer["error"]["data"]["model"], "nowhere/m", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("`nowhere/m` is not a configured model"), "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn load_after_a_restart_replays_the_whole_turn_before_answering() {
    let mut first = support::start();
    let id = first.new_session().await;
    let (live, answer) = first.prompt(json!("p"), &id, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let dirs = first.dirs.clone();
    first.close().await;

    let mut second = support::start_in(support::demo_args(), dirs);
    initialize(&mut second).await;
    let cwd = second.dirs.ws();
    let (mut replay, answer) = second
        .exchange(json!("load"), "session/load", json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] }))
        .await;
    assert!(answer["result"]["configOptions"].is_array(), "{answer}");
    // The replay ends with the session's context use (the demo reports usage).
    let usage = replay.pop().expect("a replay");
    assert_eq!(update_kind(&usage), Some("usage_update"), "{usage}");
    assert!(replay.iter().all(|m| m["params"]["sessionId"] == json!(id)), "{replay:#?}");
    let kinds: Vec<&str> = replay.iter().map(|m| update_kind(m).expect("only session updates")).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
    );
    assert_eq!(replay[0]["params"]["update"]["content"], json!({ "type": "text", "text": "Look around" }));
    let message_ids: Vec<&Value> =
        replay.iter().filter_map(|m| m["params"]["update"].get("messageId")).collect();
    assert_eq!(message_ids.len(), 5, "every replayed message has an id");
    let distinct: BTreeSet<String> = message_ids.iter().map(|id| id.to_string()).collect();
    assert_eq!(distinct.len(), 5, "one id per message: {message_ids:?}");
    for update in replay.iter().filter(|m| update_kind(m) == Some("tool_call_update")) {
        let status = &update["params"]["update"]["status"];
        assert!(status == "completed" || status == "failed", "a final status: {update}");
    }
    // Replay and live take one path: the replay shows what the editor saw live.
    let replayed: Vec<(String, String)> = replay.iter().map(summary).collect();
    // Live, the editor's own prompt was not echoed; the replay shows it first.
    assert_eq!(replayed[0], ("user_message_chunk".to_owned(), "Look around".to_owned()));
    assert_eq!(replayed[1..], as_replayed(&live));
    second.close().await;
}

#[tokio::test]
async fn resume_replays_nothing() {
    let mut first = support::start();
    let id = first.new_session().await;
    let (_, answer) = first.prompt(json!("p"), &id, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let dirs = first.dirs.clone();
    first.close().await;

    let mut second = support::start_in(support::demo_args(), dirs);
    initialize(&mut second).await;
    let cwd = second.dirs.ws();
    let (notes, answer) =
        second.exchange(json!("r"), "session/resume", json!({ "sessionId": id, "cwd": cwd })).await;
    assert!(notes.is_empty(), "resume replays nothing: {notes:#?}");
    assert_eq!(answer["result"]["modes"]["currentModeId"], "normal", "{answer}");
    second.close().await;
}

#[tokio::test]
async fn load_of_an_unknown_session_is_resource_not_found() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let params = json!({ "sessionId": "no-such-session", "cwd": cwd, "mcpServers": [] });
    let (notes, answer) = editor.exchange(json!(1), "session/load", params).await;
    assert!(notes.is_empty(), "{notes:#?}");
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], "no-such-session", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn list_shows_each_session_with_its_cwd_title_and_update_time() {
    let args = AcpArgs { title: Some("Refactor".into()), ..support::demo_args() };
    let mut editor = support::start_with(args);
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let a = editor.open_session(json!(1), &cwd).await["result"]["sessionId"].to_string();
    let b = editor.open_session(json!(2), &cwd).await["result"]["sessionId"].to_string();
    let listed = editor.ask(json!(3), "session/list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(sessions.len(), 2, "{listed}");
    let ids: BTreeSet<String> = sessions.iter().map(|s| s["sessionId"].to_string()).collect();
    assert_eq!(ids, BTreeSet::from([a, b]));
    for session in sessions {
        assert_eq!(session["cwd"], json!(cwd), "{session}");
        assert_eq!(session["title"], "Refactor", "{session}");
        let updated = session["updatedAt"].as_str().unwrap_or_else(|| panic!("updatedAt: {session}"));
        assert!(updated.len() >= 20 && updated.as_bytes()[10] == b'T', "ISO 8601: {updated}");
    }
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
    editor.close().await;
}

#[tokio::test]
async fn list_filters_by_exact_cwd() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let ws = editor.dirs.ws();
    let other = editor.dirs.other("other");
    editor.open_session(json!(1), &ws).await;
    let elsewhere = editor.open_session(json!(2), &other).await["result"]["sessionId"].clone();
    let listed = editor.ask(json!(3), "session/list", json!({ "cwd": other })).await;
    let sessions = listed["result"]["sessions"].as_array().unwrap_or_else(|| panic!("{listed}"));
    let ids: Vec<&Value> = sessions.iter().map(|s| &s["sessionId"]).collect();
    assert_eq!(ids, [&elsewhere], "{listed}");
    let none = editor.ask(json!(4), "session/list", json!({ "cwd": format!("{other}-not") })).await;
    assert_eq!(none["result"], json!({ "sessions": [] }), "{none}");
    editor.close().await;
}

#[tokio::test]
async fn list_pages_give_every_session_once_and_the_last_page_has_no_cursor() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let cwd = editor.dirs.ws();
    let mut created = BTreeSet::new();
    for n in 0..57 {
        let answer = editor.open_session(json!(n), &cwd).await;
        created.insert(answer["result"]["sessionId"].as_str().expect("sessionId").to_owned());
    }
    let (listed, pages) = list_all(&mut editor, json!({})).await;
    assert!(pages > 1, "57 sessions take more than one page");
    assert_eq!(listed.len(), created.len(), "no session twice");
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), created);
    editor.close().await;
}

#[tokio::test]
async fn list_with_a_bogus_cursor_is_invalid_params() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let answer = editor.ask(json!(1), "session/list", json!({ "cursor": "not-a-cursor" })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "cursor", "{answer}");
    editor.close().await;
}

/// A relative cwd filter names no folder: the core refuses it for either protocol version,
/// as it refuses one for `session/new`.
#[tokio::test]
async fn list_with_a_relative_cwd_is_invalid_params() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let answer = editor.ask(json!(1), "session/list", json!({ "cwd": "projects/heron" })).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "cwd", "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "cwd must be an absolute path", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn close_answers_empty_and_later_prompts_find_no_session_but_list_still_shows_it() {
    let mut editor = support::start();
    let id = editor.new_session().await;
    let closed = editor.ask(json!(1), "session/close", json!({ "sessionId": id })).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let (_, answer) = editor.prompt(json!(2), &id, "still there?").await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], json!(id), "{answer}");
    let listed = editor.ask(json!(3), "session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"][0]["sessionId"], json!(id), "{listed}");
    editor.close().await;
}

#[tokio::test]
async fn close_of_an_unknown_session_is_resource_not_found() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let answer = editor.ask(json!(1), "session/close", json!({ "sessionId": "nope" })).await;
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn delete_removes_the_session_from_list() {
    let mut editor = support::start();
    let id = editor.new_session().await;
    let cwd = editor.dirs.ws();
    let kept = editor.open_session(json!(1), &cwd).await["result"]["sessionId"].clone();
    let deleted = editor.ask(json!(2), "session/delete", json!({ "sessionId": id })).await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let listed = editor.ask(json!(3), "session/list", json!({})).await;
    let ids: Vec<&Value> =
        listed["result"]["sessions"].as_array().expect("sessions").iter().map(|s| &s["sessionId"]).collect();
    assert_eq!(ids, [&kept], "{listed}");
    editor.close().await;
}

#[tokio::test]
async fn delete_of_an_unknown_session_succeeds_silently() {
    let mut editor = support::start();
    initialize(&mut editor).await;
    let answer = editor.ask(json!(1), "session/delete", json!({ "sessionId": "nope" })).await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn fork_is_a_new_session_whose_load_replays_the_source_history() {
    let mut editor = support::start();
    let source = editor.new_session().await;
    let (_, answer) = editor.prompt(json!("p"), &source, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let cwd = editor.dirs.ws();
    let forked = editor.ask(json!("f"), "session/fork", json!({ "sessionId": source, "cwd": cwd })).await;
    let fork = forked["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{forked}")).to_owned();
    assert_ne!(fork, source);
    let load = |id: &str| json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
    let (of_source, _) = editor.exchange(json!("ls"), "session/load", load(&source)).await;
    let (of_fork, answer) = editor.exchange(json!("lf"), "session/load", load(&fork)).await;
    assert!(answer["result"].is_object(), "{answer}");
    assert!(!of_fork.is_empty());
    assert!(of_fork.iter().all(|m| m["params"]["sessionId"] == json!(fork)), "{of_fork:#?}");
    let summaries = |updates: &[Value]| updates.iter().map(summary).collect::<Vec<_>>();
    assert_eq!(summaries(&of_fork), summaries(&of_source));
    editor.close().await;
}

#[tokio::test]
async fn a_prompt_on_a_fork_leaves_the_source_unchanged() {
    let mut editor = support::start();
    let source = editor.new_session().await;
    let (_, answer) = editor.prompt(json!("p"), &source, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let cwd = editor.dirs.ws();
    let load = |id: &str| json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
    let (before, _) = editor.exchange(json!("l1"), "session/load", load(&source)).await;
    let forked = editor.ask(json!("f"), "session/fork", json!({ "sessionId": source, "cwd": cwd })).await;
    let fork = forked["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{forked}")).to_owned();
    let (_, answer) = editor.prompt(json!("p2"), &fork, "Only on the fork").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (after, _) = editor.exchange(json!("l2"), "session/load", load(&source)).await;
    let summaries = |updates: &[Value]| updates.iter().map(summary).collect::<Vec<_>>();
    assert_eq!(summaries(&after), summaries(&before));
    let (of_fork, _) = editor.exchange(json!("l3"), "session/load", load(&fork)).await;
    assert!(of_fork.len() > before.len(), "the fork has the new turn");
    editor.close().await;
}

/// A client that keeps opening sessions is refused once the process holds its most (half
/// its file descriptors, here with `ulimit -n 40`: 20), with a code and the limit in
/// `data`; the connection keeps serving, and closing one makes room for the next.
#[test]
fn opening_sessions_without_end_is_refused_at_the_limit_and_the_connection_serves_on() {
    let dirs = support::scripted_home("s", "", &format!("{}\n", json!({ "steps": [{ "text": "ok" }] })));
    let mut child = std::process::Command::new("sh");
    child
        .arg("-c")
        .arg("ulimit -n 40 && exec \"$0\" acp --model s/m")
        .arg(support::heron_bin())
        .env("HERON_HOME", dirs.home())
        .env("HERON_LOG", "error");
    let mut heron = support::Process::piped(child);
    let first = heron.new_session(&dirs.ws());
    let open = |heron: &mut support::Process, n: usize| {
        heron.request(json!(format!("new-{n}")), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }))
    };
    for n in 2..=20 {
        let answer = open(&mut heron, n);
        assert!(answer["result"]["sessionId"].is_string(), "session {n}: {answer}");
    }
    let refused = open(&mut heron, 21);
    assert_eq!(refused["error"]["data"]["code"], "session.too_many_open", "{refused}");
    assert_eq!(refused["error"]["data"]["max"], 20, "{refused}");
    let closed = heron.request(json!("close"), "session/close", json!({ "sessionId": first }));
    assert!(closed.get("result").is_some(), "{closed}");
    let again = open(&mut heron, 22);
    assert!(again["result"]["sessionId"].is_string(), "room was made: {again}");
    heron.close_input();
    assert!(heron.exited_within(support::PROCESS_WAIT).is_some(), "heron exits on EOF");
}
