//! ACP v2 end to end: the negotiation (`--protocol v1|v2|auto`), a turn the v2 way (the
//! prompt answered with its user message's id, `running`, output, `idle` with the stop
//! reason), an approval with the call shown, `tool_call/cancel` ending one call while the
//! turn goes on, a v1 session resumed over v2 with its history in v2's forms, and the two
//! official v2 clients (the TypeScript SDK's and the Rust SDK's one-shot client) completing
//! sessions against the binary (in `acp_v2_clients.rs`); slash commands over v2 are in
//! `acp_v2_commands.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use heron::acp::negotiate::Protocol;
use serde_json::{Value, json};

use crate::support::{self, Editor};

pub(crate) const WRITE: &str = r##"{"steps":[{"text":"I'll write a note."},{"tool_call":{"name":"write_file","arguments":{"path":"NOTES.md","content":"# Notes\n"}}}]}
{"steps":[{"text":"Done."}]}
"##;

pub(crate) fn v2_args(name: &str, protocol: Protocol) -> heron::cli::acp::AcpArgs {
    heron::cli::acp::AcpArgs { protocol, ..support::scripted_args(name) }
}

pub(crate) async fn v2_session(editor: &mut Editor) -> String {
    let init =
        json!({ "protocolVersion": 2, "info": { "name": "test", "version": "1" }, "capabilities": {} });
    let answer = editor.request(json!(0), "initialize", init).await;
    assert_eq!(answer["result"]["protocolVersion"], 2, "{answer}");
    let cwd = editor.dirs.ws();
    let answer = editor.request(json!(1), "session/new", json!({ "cwd": cwd })).await;
    answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_owned()
}

pub(crate) fn state(message: &Value) -> Option<&str> {
    let update = &message["params"]["update"];
    (update["sessionUpdate"] == "state_update").then(|| update["state"].as_str()).flatten()
}

/// Everything up to and including the turn's `idle`, answering permission requests with
/// `option` (when given).
pub(crate) async fn until_idle(editor: &mut Editor, option: Option<&str>) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        if message["method"] == "session/request_permission"
            && let Some(option) = option
        {
            let reply = json!({
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": { "outcome": { "outcome": "selected", "optionId": option } },
            });
            editor.send_json(reply).await;
        }
        let idle = state(&message) == Some("idle");
        seen.push(message);
        if idle {
            return seen;
        }
    }
}

pub(crate) fn position(seen: &[Value], what: impl Fn(&Value) -> bool) -> usize {
    seen.iter().position(what).unwrap_or_else(|| panic!("not seen in {seen:#?}"))
}

#[tokio::test]
async fn a_v2_turn_is_accepted_then_runs_asks_with_the_call_shown_and_ends_idle() {
    let dirs = support::scripted_home("s", "", WRITE);
    let mut editor = support::start_in(v2_args("s", Protocol::V2), dirs);
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Leave a note" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let seen = until_idle(&mut editor, Some("allow_once")).await;

    let answer = &seen[position(&seen, |m| m["id"] == 2 && m.get("method").is_none())];
    let message_id = answer["result"]["messageId"].as_str().unwrap_or_else(|| panic!("{answer}"));
    let user = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "user_message");
    assert_eq!(seen[user]["params"]["update"]["messageId"], message_id, "the echo carries the answer's id");
    assert_eq!(seen[user]["params"]["update"]["content"][0]["text"], "Leave a note");
    let running = position(&seen, |m| state(m) == Some("running"));
    assert!(running < user, "running comes before the turn's output");

    let call = position(&seen, |m| m["params"]["update"]["name"] == "write_file");
    let call = &seen[call]["params"]["update"];
    assert_eq!(call["sessionUpdate"], "tool_call_update");
    assert_eq!(call["capabilities"]["cancel"], json!({}), "a live call can be cancelled: {call}");
    let asked = position(&seen, |m| m["method"] == "session/request_permission");
    let asked = &seen[asked]["params"];
    assert_eq!(asked["subject"]["type"], "tool_call");
    assert_eq!(asked["subject"]["toolCall"]["name"], "write_file");
    let patch = asked["subject"]["toolCall"]["content"][0]["patch"]["text"].as_str().unwrap_or_default();
    assert!(patch.contains("+# Notes"), "the approval shows the diff: {asked}");
    let kinds: Vec<&Value> =
        asked["options"].as_array().map(|o| o.iter().map(|o| &o["kind"]).collect()).unwrap_or_default();
    assert!(kinds.contains(&&json!("allow_once")) && kinds.contains(&&json!("reject_once")), "{asked}");
    let waiting = position(&seen, |m| state(m) == Some("requires_action"));
    assert!(waiting < position(&seen, |m| m["method"] == "session/request_permission"));

    let last = seen.last().expect("idle");
    assert_eq!(last["params"]["update"]["stopReason"], "end_turn", "{last}");
    let kinds: Vec<&str> = seen.iter().filter_map(support::update_kind).collect();
    assert!(
        !kinds.contains(&"tool_call") && !kinds.contains(&"plan"),
        "v1's kinds never go out over v2: {kinds:?}"
    );
    let written = std::fs::read_to_string(Path::new(&editor.dirs.ws()).join("NOTES.md")).expect("written");
    assert_eq!(written, "# Notes\n");
    editor.close().await;
}

#[tokio::test]
async fn a_rejected_v2_call_leaves_the_file_untouched_and_the_turn_ends() {
    let dirs = support::scripted_home("s", "", WRITE);
    let mut editor = support::start_in(v2_args("s", Protocol::V2), dirs);
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Leave a note" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let seen = until_idle(&mut editor, Some("reject_once")).await;
    let failed = seen.iter().any(|m| m["params"]["update"]["status"] == "failed");
    assert!(failed, "the refused call ends failed: {seen:#?}");
    assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");
    assert!(!Path::new(&editor.dirs.ws()).join("NOTES.md").exists());
    editor.close().await;
}

const SLOW: &str = r##"{"steps":[{"tool_call":{"name":"run_command","arguments":{"command":"sleep 30"}}}]}
{"steps":[{"text":"The command was cancelled; moving on."}]}
"##;

#[tokio::test]
async fn tool_call_cancel_ends_one_running_call_and_the_turn_goes_on() {
    let dirs = support::scripted_home("s", "", SLOW);
    let args = heron::cli::acp::AcpArgs {
        permission_mode: Some("bypassPermissions".to_owned()),
        ..v2_args("s", Protocol::V2)
    };
    let mut editor = support::start_in(args, dirs);
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Wait" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let call_id = loop {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        let update = &message["params"]["update"];
        if update["status"] == "in_progress" {
            break update["toolCallId"].clone();
        }
    };
    let began = std::time::Instant::now();
    let cancel = json!({ "sessionId": session, "toolCallId": call_id });
    editor.send_request(json!(3), "tool_call/cancel", cancel.clone()).await;
    let seen = until_idle(&mut editor, None).await;
    assert!(began.elapsed() < Duration::from_secs(20), "the command did not run its 30 s");
    let answered = position(&seen, |m| m["id"] == 3);
    assert_eq!(seen[answered]["result"], json!({}), "{}", seen[answered]);
    let ended = position(&seen, |m| {
        m["params"]["update"]["toolCallId"] == call_id && m["params"]["update"]["status"] == "cancelled"
    });
    let update = &seen[ended]["params"]["update"];
    assert_eq!(update.get("capabilities"), Some(&Value::Null), "the cancel offer is withdrawn: {update}");
    let text = update["content"].to_string();
    assert!(text.contains("cancelled this tool call"), "the model reads why: {text}");
    let reply = position(&seen, |m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    assert!(reply > ended, "the turn went on after the cancel");
    assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");

    // The call is over: cancelling it again names the field.
    let again = editor.request(json!(4), "tool_call/cancel", cancel).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert_eq!(again["error"]["data"]["path"], "toolCallId", "{again}");
    editor.close().await;
}

/// The update of call `call_id` that reports `status`.
fn update_of<'a>(seen: &'a [Value], call_id: &Value, status: &str) -> &'a Value {
    let at = position(seen, |m| {
        m["params"]["update"]["toolCallId"] == *call_id && m["params"]["update"]["status"] == status
    });
    &seen[at]["params"]["update"]
}

/// Everything up to the first permission question, and the question.
async fn until_asked(editor: &mut Editor) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        if message["method"] == "session/request_permission" {
            return (seen, message);
        }
        seen.push(message);
    }
}

const TWO_WRITES: &str = r##"{"steps":[{"tool_call":{"name":"write_file","arguments":{"path":"a.md","content":"a\n"}}},{"tool_call":{"name":"write_file","arguments":{"path":"b.md","content":"b\n"}}}]}
{"steps":[{"text":"Wrote one of them."}]}
"##;

#[tokio::test]
async fn a_call_cancelled_while_an_earlier_one_waits_for_approval_never_runs_and_ends_cancelled() {
    let mut editor =
        support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", TWO_WRITES));
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Write two notes" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let (seen, question) = until_asked(&mut editor).await;
    let pending: Vec<&Value> = seen
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["status"] == "pending" && u["name"] == "write_file")
        .collect();
    assert_eq!(pending.len(), 2, "both calls show before the first is asked about: {seen:#?}");
    assert!(pending.iter().all(|u| u["capabilities"]["cancel"] == json!({})), "{pending:?}");
    let (first, second) = (pending[0]["toolCallId"].clone(), pending[1]["toolCallId"].clone());
    assert_eq!(question["params"]["subject"]["toolCall"]["toolCallId"], first, "{question}");

    // The second call is offered cancel, so cancelling it while the first waits is taken.
    let cancel = json!({ "sessionId": session, "toolCallId": second });
    editor.send_request(json!(3), "tool_call/cancel", cancel).await;
    let answer = loop {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        if message["id"] == 3 {
            break message;
        }
    };
    assert_eq!(answer["result"], json!({}), "{answer}");
    let allow = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
    editor.send_json(json!({ "jsonrpc": "2.0", "id": question["id"], "result": allow })).await;
    let rest = until_idle(&mut editor, Some("allow_once")).await;

    assert!(!rest.iter().any(|m| m["method"] == "session/request_permission"), "never asked: {rest:#?}");
    let ran = rest.iter().any(|m| {
        m["params"]["update"]["toolCallId"] == second && m["params"]["update"]["status"] == "in_progress"
    });
    assert!(!ran, "the cancelled call never ran: {rest:#?}");
    let cancelled = update_of(&rest, &second, "cancelled");
    assert_eq!(cancelled.get("capabilities"), Some(&Value::Null), "no cancel offered any more: {cancelled}");
    assert!(cancelled["content"].to_string().contains("cancelled this tool call"), "{cancelled}");
    let done = update_of(&rest, &first, "completed");
    assert_eq!(done.get("capabilities"), Some(&Value::Null), "a finished call offers no cancel: {done}");
    assert_eq!(rest.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");
    let ws = PathBuf::from(editor.dirs.ws());
    assert_eq!(std::fs::read_to_string(ws.join("a.md")).expect("the first call wrote"), "a\n");
    assert!(!ws.join("b.md").exists(), "the cancelled call wrote nothing");
    editor.close().await;
}

#[tokio::test]
async fn a_call_cancelled_during_its_question_ends_cancelled_and_the_turn_reports_running_again() {
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", WRITE));
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Leave a note" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let (seen, question) = until_asked(&mut editor).await;
    assert_eq!(seen.iter().rev().find_map(state), Some("requires_action"), "{seen:#?}");
    let call = question["params"]["subject"]["toolCall"]["toolCallId"].clone();
    let cancel = json!({ "sessionId": session, "toolCallId": call });
    editor.send_request(json!(3), "tool_call/cancel", cancel).await;
    let rest = until_idle(&mut editor, None).await;

    assert_eq!(rest[position(&rest, |m| m["id"] == 3)]["result"], json!({}), "{rest:#?}");
    let running = position(&rest, |m| state(m) == Some("running"));
    let ended = position(&rest, |m| {
        m["params"]["update"]["toolCallId"] == call && m["params"]["update"]["status"] == "cancelled"
    });
    let reply = position(&rest, |m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    assert!(running < ended && ended < reply, "requires_action, then running, then the turn: {rest:#?}");
    assert_eq!(rest[ended]["params"]["update"].get("capabilities"), Some(&Value::Null));
    assert_eq!(rest.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");
    assert!(!Path::new(&editor.dirs.ws()).join("NOTES.md").exists());
    editor.close().await;
}

/// A command that prints, then waits for the file `go` in its directory before it ends.
const WAITING: &str = r##"{"steps":[{"tool_call":{"name":"run_command","arguments":{"command":"echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished","timeout_ms":20000}}}]}
{"steps":[{"text":"It ran."}]}
"##;

#[tokio::test]
async fn a_running_command_streams_its_output_over_v2_and_over_v1_shows_it_with_the_result() {
    let bypass = |args: heron::cli::acp::AcpArgs| heron::cli::acp::AcpArgs {
        permission_mode: Some("bypassPermissions".to_owned()),
        ..args
    };
    let mut editor =
        support::start_in(bypass(v2_args("s", Protocol::V2)), support::scripted_home("s", "", WAITING));
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Run it" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    // The command cannot end before `go` exists: what arrives first arrives while it runs.
    let chunk = loop {
        let message = editor.recv_within(Duration::from_secs(20)).await;
        if support::update_kind(&message) == Some("tool_call_content_chunk") {
            break message["params"]["update"].clone();
        }
    };
    assert_eq!(chunk["content"]["type"], "content", "{chunk}");
    assert_eq!(chunk["content"]["content"]["text"], "started\n", "{chunk}");
    std::fs::write(Path::new(&editor.dirs.ws()).join("go"), "").expect("go");
    let rest = until_idle(&mut editor, None).await;
    let done = update_of(&rest, &chunk["toolCallId"], "completed");
    let whole = done["content"].to_string();
    assert!(
        whole.contains("started") && whole.contains("finished"),
        "the result replaces the chunks: {done}"
    );
    assert_eq!(rest.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");
    editor.close().await;

    // v1 has no chunks: the call's updates are its states, the output comes with the result.
    let dirs = support::scripted_home("s", "", WAITING);
    std::fs::write(Path::new(&dirs.ws()).join("go"), "").expect("go");
    let mut editor = support::start_in(bypass(support::scripted_args("s")), dirs);
    let session = editor.new_session().await;
    let (messages, answer) = editor.prompt(json!(2), &session, "Run it").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let calls: Vec<&Value> = messages
        .iter()
        .filter(|m| matches!(support::update_kind(m), Some("tool_call" | "tool_call_update")))
        .map(|m| &m["params"]["update"])
        .collect();
    let states: Vec<&str> = calls.iter().filter_map(|u| u["status"].as_str()).collect();
    assert_eq!(states, ["pending", "in_progress", "completed"], "{calls:#?}");
    assert_eq!(states.len(), calls.len(), "no update without a state: {calls:#?}");
    editor.close().await;
}

#[tokio::test]
async fn a_compaction_shows_as_a_compaction_update_live_and_on_replay() {
    let script = "{\"steps\":[{\"text\":\"Hello.\"}]}\n{\"steps\":[{\"text\":\"A summary.\"}]}\n";
    let dirs = support::scripted_home("s", "", script);
    let mut editor = support::start_in(v2_args("s", Protocol::V2), dirs.clone());
    let session = v2_session(&mut editor).await;
    let mut seen = Vec::new();
    for (id, line) in [(2, "hi"), (3, "/compact")] {
        let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": line }] });
        editor.send_request(json!(id), "session/prompt", prompt).await;
        seen = until_idle(&mut editor, None).await;
    }
    let marked = |m: &&Value| !m["params"]["update"]["_meta"]["heron"]["compaction"].is_null();
    let live: Vec<&Value> = seen.iter().filter(marked).collect();
    assert_eq!(live.len(), 1, "{seen:#?}");
    let live = &live[0]["params"]["update"];
    assert_eq!(live["sessionUpdate"], "compaction_update", "{live}");
    assert_eq!(live["status"], "completed", "{live}");
    assert!(live["summary"][0]["text"].as_str().is_some_and(|t| t.contains("A summary.")), "{live}");
    assert_eq!(live["_meta"]["heron"]["compaction"]["stage"], "summarized", "{live}");
    editor.close().await;

    let mut editor = support::start_in(v2_args("s", Protocol::V2), dirs);
    let init = json!({ "protocolVersion": 2, "info": { "name": "test", "version": "1" } });
    editor.request(json!(0), "initialize", init).await;
    let resume = json!({ "sessionId": session, "cwd": editor.dirs.ws(), "replayFrom": { "type": "start" } });
    let (replayed, answer) = editor.call(json!(1), "session/resume", resume).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let again: Vec<&Value> = replayed.iter().filter(marked).collect();
    assert_eq!(again.len(), 1, "{replayed:#?}");
    let again = &again[0]["params"]["update"];
    assert_eq!(again["sessionUpdate"], "compaction_update", "{again}");
    assert_eq!((&again["compactionId"], &again["summary"]), (&live["compactionId"], &live["summary"]));
    editor.close().await;
}

#[tokio::test]
async fn a_v2_command_cannot_write_outside_the_roots_or_read_heron_s_home() {
    let sandbox = heron_core::sandbox::support();
    if !sandbox.has_landlock() {
        crate::support::clients::skip_wall(format!("the sandbox is unavailable here: {sandbox:?}"));
        return;
    }
    const KEY: &str = "sk-v2-sandbox-5e8a1c";
    // Unconfined, the same command does both: the test would see the sandbox missing.
    for (config, confined) in [("", true), ("sandbox = \"off\"\n", false)] {
        // Outside the temp folder, which commands may write: "outside" must be out of reach.
        let dirs = support::Dirs::outside_temp();
        let escaped = Path::new(&dirs.other("outside")).join("escaped");
        let command = format!(
            "echo x > '{}'; echo wrote=$?; cat '{}/.env'; echo read=$?",
            escaped.display(),
            dirs.home().display()
        );
        let step = json!({ "steps": [{ "tool_call": { "name": "run_command", "arguments": { "command": command } } }] });
        dirs.write_home("config.toml", &format!("{config}{}", support::scripted_provider("s", "s.jsonl")));
        dirs.write_home("s.jsonl", &format!("{step}\n{}\n", json!({ "steps": [{ "text": "ok" }] })));
        dirs.write_home(".env", &format!("V2_SANDBOX_KEY={KEY}\n"));
        let args = heron::cli::acp::AcpArgs {
            permission_mode: Some("bypassPermissions".to_owned()),
            ..v2_args("s", Protocol::V2)
        };
        let mut editor = support::start_in(args, dirs);
        let session = v2_session(&mut editor).await;
        let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Try" }] });
        editor.send_request(json!(2), "session/prompt", prompt).await;
        let seen = until_idle(&mut editor, None).await;
        let ended = position(&seen, |m| m["params"]["update"]["status"] == "completed");
        let output = seen[ended]["params"]["update"]["content"].to_string();
        assert!(!serde_json::to_string(&seen).expect("json").contains(KEY), "the key reached the client");
        if confined {
            assert!(!escaped.exists() && !output.contains("wrote=0"), "wrote outside the roots: {output}");
            assert!(output.contains("read=") && !output.contains("read=0"), "read the home: {output}");
        } else {
            assert!(escaped.exists() && output.contains("read=0"), "sandbox off: {output}");
        }
        editor.close().await;
    }
}

#[tokio::test]
async fn a_session_made_over_v1_resumes_over_v2_with_its_history_in_v2_forms() {
    let dirs = support::scripted_home("s", "", WRITE);
    let mut v1 = support::start_in(support::scripted_args("s"), dirs.clone());
    let session = v1.new_session().await;
    let (_, answer) = v1.prompt(json!(2), &session, "Leave a note").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    v1.close().await;

    let mut editor = support::start_in(v2_args("s", Protocol::Auto), dirs);
    let init = json!({ "protocolVersion": 2, "info": { "name": "test", "version": "1" } });
    assert_eq!(editor.request(json!(0), "initialize", init).await["result"]["protocolVersion"], 2);
    let resume = json!({ "sessionId": session, "cwd": editor.dirs.ws(), "replayFrom": { "type": "start" } });
    let (replayed, answer) = editor.call(json!(1), "session/resume", resume).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let kinds: Vec<&str> = replayed.iter().filter_map(support::update_kind).collect();
    assert_eq!(kinds.first(), Some(&"user_message"), "{kinds:?}");
    assert!(kinds.contains(&"agent_message"), "finished messages replay whole: {kinds:?}");
    assert!(!kinds.contains(&"agent_message_chunk") && !kinds.contains(&"tool_call"), "{kinds:?}");
    let done =
        replayed.iter().find(|m| m["params"]["update"]["status"] == "completed").expect("the call's end");
    assert_eq!(done["params"]["update"]["content"][0]["type"], "diff", "{done}");
    assert_eq!(replayed.last().and_then(state), Some("idle"), "the state after the replay: {replayed:#?}");
    editor.close().await;
}

#[tokio::test]
async fn versions_are_negotiated_per_connection() {
    let v1_init = json!({ "protocolVersion": 1 });
    // The default stays v1 whatever is asked.
    let mut editor = support::start_in(support::scripted_args("s"), support::scripted_home("s", "", WRITE));
    let answer = editor.request(json!(0), "initialize", json!({ "protocolVersion": 2 })).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    editor.close().await;
    // auto: a v1 client gets v1, unchanged.
    let mut editor = support::start_in(v2_args("s", Protocol::Auto), support::scripted_home("s", "", WRITE));
    let answer = editor.request(json!(0), "initialize", v1_init.clone()).await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    assert!(answer["result"]["agentCapabilities"]["loadSession"] == true, "{answer}");
    editor.close().await;
    // v2: another version is refused with the versions served, and the connection serves on.
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", WRITE));
    let answer = editor.request(json!(0), "initialize", v1_init).await;
    assert_eq!(answer["error"]["code"], -32022, "{answer}");
    assert_eq!(answer["error"]["data"], json!({ "requested": 1, "supported": [2] }));
    let session = v2_session(&mut editor).await;
    assert!(!session.is_empty());
    // v1-only methods are not there.
    let load = editor.ask(json!(5), "session/load", json!({ "sessionId": session, "cwd": "/" })).await;
    assert_eq!(load["error"]["code"], -32601, "{load}");
    editor.close().await;
}

pub(crate) const LONG: &str = r##"{"steps":[{"text":"Working"},{"delay_ms":30000},{"text":"done."}]}
"##;

#[tokio::test]
async fn closing_a_v2_session_mid_turn_ends_the_turn_cancelled_before_the_answer() {
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", LONG));
    let session = v2_session(&mut editor).await;
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Work" }] });
    let answer = editor.ask(json!(2), "session/prompt", prompt).await;
    assert!(answer["result"]["messageId"].is_string(), "{answer}");
    let (before, closed) = editor.call(json!(3), "session/close", json!({ "sessionId": session })).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let idle = before.iter().find(|m| state(m) == Some("idle")).unwrap_or_else(|| panic!("{before:#?}"));
    assert_eq!(idle["params"]["update"]["stopReason"], "cancelled", "{idle}");
    editor.close().await;
}

const ECHO: &str = r#"{"steps": [{"tool_call": {"name": "mcp__fake__echo", "arguments": {"text": "ping"}}}]}
{"steps": [{"text": "Done."}]}
"#;

/// The absolute path of `python3` (v2 names a stdio server's command by absolute path).
fn python3() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .find(|candidate| candidate.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "/usr/bin/python3".to_owned())
}

#[tokio::test]
async fn a_v2_client_s_mcp_server_starts_and_the_model_uses_its_tool() {
    let mut editor = support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", ECHO));
    let init = json!({ "protocolVersion": 2, "info": { "name": "test", "version": "1" } });
    let answer = editor.request(json!(0), "initialize", init).await;
    assert_eq!(
        answer["result"]["capabilities"]["session"]["mcp"],
        json!({ "http": {}, "stdio": {} }),
        "{answer}"
    );
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py");
    let server =
        json!({ "type": "stdio", "name": "fake", "command": python3(), "args": [fixture], "env": [] });
    let new = json!({ "cwd": editor.dirs.ws(), "mcpServers": [server] });
    let answer = editor.request(json!(1), "session/new", new).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Use the server" }] });
    editor.send_request(json!(2), "session/prompt", prompt).await;
    let seen = until_idle(&mut editor, Some("allow_once")).await;
    let done = position(&seen, |m| m["params"]["update"]["status"] == "completed");
    assert_eq!(seen[done]["params"]["update"]["content"][0]["content"]["text"], "ping", "{}", seen[done]);
    assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");

    // A server type this version does not know is refused by name, not dropped.
    let odd = json!({ "cwd": editor.dirs.ws(), "mcpServers": [{ "type": "carrier-pigeon", "name": "x" }] });
    let answer = editor.request(json!(3), "session/new", odd).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["path"], "mcpServers[0].type", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn v2_prompts_take_checked_images_and_refuse_audio_by_index() {
    let text_only = r#"{"steps":[{"text":"Seen."}]}
"#;
    let mut editor =
        support::start_in(v2_args("s", Protocol::V2), support::scripted_home("s", "", text_only));
    let session = v2_session(&mut editor).await;
    let png = json!({ "type": "image", "mimeType": "image/png", "data": "iVBORw0KGgowMDAw" });
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Look" }, png] });
    let answer = editor.ask(json!(2), "session/prompt", prompt).await;
    assert!(answer["result"]["messageId"].is_string(), "{answer}");
    let seen = until_idle(&mut editor, None).await;
    assert_eq!(seen.last().expect("idle")["params"]["update"]["stopReason"], "end_turn");

    let lying = json!({ "type": "image", "mimeType": "image/jpeg", "data": "iVBORw0KGgowMDAw" });
    let answer =
        editor.ask(json!(3), "session/prompt", json!({ "sessionId": session, "prompt": [lying] })).await;
    assert_eq!(answer["error"]["data"]["path"], "prompt[0].mimeType", "{answer}");
    let audio = json!({ "type": "audio", "mimeType": "audio/wav", "data": "AAAA" });
    let prompt = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Hear" }, audio] });
    let answer = editor.ask(json!(4), "session/prompt", prompt).await;
    assert_eq!(answer["error"]["data"]["path"], "prompt[1]", "{answer}");
    editor.close().await;
}
