//! Compaction over the real binary: `/compact` is advertised, runs in the session with the
//! user's instructions, streams the summary as a thought marked `_meta.heron.compaction`,
//! and the next prompt starts from it; `session/load` in a new process replays the whole
//! history with the marker where the compaction happened. One long turn of tool calls is
//! compacted between its steps, with markers the editor sees live. A prompt too big for the
//! window fails as `turn_failed`, naming the window, and the next prompt is not failed by it.

use serde_json::{Value, json};

use crate::support::server_mock::MockServer;
use crate::support::servers::{KEY, NOTES};
use crate::support::windowed::{self, READ, READ_ALL, READ_ALL_OF, SUMMARY, is_summary_request, text_of};
use crate::support::{Dirs, Process};

/// A home whose default model `net/m` is the windowed mock (its table ending with `keys`),
/// with `a.txt` and `b.txt`.
fn home(server: &MockServer, keys: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home(
        "config.toml",
        &format!(
            "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\n\
             api_key_env = \"NET_KEY\"\nmax_retries = 0\n{keys}",
            server.origin
        ),
    );
    dirs.write_home(".env", &format!("NET_KEY={KEY}\n"));
    let ws = std::path::Path::new(&dirs.ws()).to_owned();
    std::fs::write(ws.join("a.txt"), NOTES).expect("a.txt");
    std::fs::write(ws.join("b.txt"), "bee").expect("b.txt");
    dirs
}

/// Sends `text` as a prompt; returns the updates before its answer, and the answer.
fn prompt(heron: &mut Process, session: &str, id: &str, text: &str) -> (Vec<Value>, Value) {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params }));
    let mut updates = Vec::new();
    loop {
        let message = heron.next();
        if message["id"] == id && message.get("method").is_none() {
            return (updates, message);
        }
        if message["method"] == "session/request_permission" {
            panic!("reading a file in the workspace asks nothing: {message}");
        }
        if message["method"] == "session/update" {
            updates.push(message["params"]["update"].clone());
        }
    }
}

fn kind(update: &Value) -> &str {
    update["sessionUpdate"].as_str().unwrap_or("")
}

fn text(updates: &[Value], of: &str) -> String {
    updates.iter().filter(|u| kind(u) == of).filter_map(|u| u["content"]["text"].as_str()).collect()
}

/// A session that read `a.txt`, was compacted with instructions, then read `b.txt`; the
/// updates of the `/compact` prompt and the session id.
fn compacted_session(heron: &mut Process, dirs: &Dirs) -> (String, Vec<Value>, Value) {
    let session = heron.new_session(&dirs.ws());
    let (_, answer) = prompt(heron, &session, "p1", "please read a.txt");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (updates, answer) = prompt(heron, &session, "c", "/compact focus on the parser");
    let (_, next) = prompt(heron, &session, "p2", "please read b.txt");
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    (session, updates, answer)
}

#[test]
fn compact_streams_a_marked_summary_and_the_next_prompt_starts_from_it() {
    let server = windowed::start(1 << 20, None);
    let dirs = home(&server, "");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let (_, updates, answer) = compacted_session(&mut heron, &dirs);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(text(&updates, "agent_thought_chunk").contains(SUMMARY), "{updates:?}");
    let marker = updates
        .iter()
        .find_map(|u| u["_meta"]["heron"]["compaction"].as_object().cloned())
        .unwrap_or_else(|| panic!("no compaction marker: {updates:?}"));
    assert_eq!(
        (marker["stage"].as_str(), marker["instructions"].as_str()),
        (Some("summarized"), Some("focus on the parser"))
    );
    assert!(text(&updates, "agent_message_chunk").starts_with("Compacted the conversation"), "{updates:?}");

    let seen = server.seen();
    let asked = seen.iter().find(|s| is_summary_request(s)).expect("a summary request");
    assert!(text_of(asked.messages().last().expect("a message")).contains("focus on the parser"));
    let next = seen.last().expect("the next prompt's requests");
    assert!(text_of(&next.messages()[1]).contains(SUMMARY), "the next prompt starts from the summary");
    assert!(!next.raw.contains(NOTES), "the summarized turn is not sent again");
}

#[test]
fn compact_is_advertised_among_the_slash_commands() {
    let server = windowed::start(1 << 20, None);
    let dirs = home(&server, "");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.new_session(&dirs.ws());
    let advertised = loop {
        let message = heron.next();
        if message["params"]["update"]["sessionUpdate"] == "available_commands_update" {
            break message["params"]["update"]["availableCommands"].clone();
        }
    };
    let compact = advertised.as_array().and_then(|all| all.iter().find(|c| c["name"] == "compact")).cloned();
    let compact = compact.unwrap_or_else(|| panic!("{advertised}"));
    assert!(compact["input"]["hint"].as_str().is_some_and(|h| h.contains("optional")), "{compact}");
}

#[test]
fn session_load_replays_the_whole_history_with_the_compaction_marked() {
    let server = windowed::start(1 << 20, None);
    let dirs = home(&server, "");
    let session = {
        let mut heron = Process::spawn(&dirs.home(), &[]);
        let (session, _, _) = compacted_session(&mut heron, &dirs);
        heron.close_input();
        assert!(heron.exited_within(std::time::Duration::from_secs(10)).is_some(), "heron exits");
        session
    };
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.request(json!("init"), "initialize", json!({ "protocolVersion": 1 }));
    let load = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
    heron.send(json!({ "jsonrpc": "2.0", "id": "load", "method": "session/load", "params": load }));
    let mut replayed = Vec::new();
    loop {
        let message = heron.next();
        if message["id"] == "load" {
            assert!(message.get("result").is_some(), "{message}");
            break;
        }
        replayed.push(message["params"]["update"].clone());
    }
    // In order: the first turn whole, the marked summary, the turn after it.
    let shown: Vec<String> = replayed
        .iter()
        .map(|u| match kind(u) {
            "user_message_chunk" => format!("user: {}", u["content"]["text"].as_str().unwrap_or("")),
            "agent_message_chunk" => format!("agent: {}", u["content"]["text"].as_str().unwrap_or("")),
            "agent_thought_chunk" if u["_meta"]["heron"]["compaction"].is_object() => "compaction".to_owned(),
            other => other.to_owned(),
        })
        .collect();
    let expected = [
        "user: please read a.txt",
        "tool_call",
        "tool_call_update",
        &format!("agent: {READ}"),
        "compaction",
        "user: please read b.txt",
        "tool_call",
        "tool_call_update",
        &format!("agent: {READ}"),
    ];
    assert_eq!(shown, expected, "{replayed:?}");
    let marked = replayed.iter().find(|u| u["_meta"]["heron"]["compaction"].is_object()).expect("the marker");
    let thought = marked["content"]["text"].as_str().unwrap_or("");
    assert!(thought.contains(SUMMARY) && thought.contains("full history"), "{thought}");
}

#[test]
fn a_prompt_too_big_for_the_window_fails_naming_it() {
    let server = windowed::start(1 << 20, None);
    let dirs = home(&server, "context_window = 4000\n");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let session = heron.new_session(&dirs.ws());
    let (_, answer) = prompt(&mut heron, &session, "p", &"x".repeat(40_000));
    assert_eq!(answer["error"]["data"]["code"], "turn_failed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("context window") && message.contains("4000"), "{message}");
    assert!(server.seen().is_empty(), "nothing was sent");
}

#[test]
fn one_long_turn_is_compacted_between_its_steps_and_the_editor_sees_each_compaction() {
    // Sixteen files of about 5 KiB read in one prompt, for a window of 7,400 tokens (every request also carries the tools' schemas, `task` included).
    let server = windowed::start_reading_in_one_turn(1 << 20);
    let dirs = home(&server, "context_window = 7400\n");
    let ws = std::path::Path::new(&dirs.ws()).to_owned();
    let files: Vec<String> = (1..=16).map(|n| format!("big{n}.txt")).collect();
    for file in &files {
        let text: String =
            (0..100).map(|i| format!("line {i:04} of {file}: the quick brown fox\n")).collect();
        std::fs::write(ws.join(file), text).expect("file");
    }
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let session = heron.new_session(&dirs.ws());
    let (updates, answer) =
        prompt(&mut heron, &session, "p", &format!("please {READ_ALL_OF}{}", files.join(" ")));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(text(&updates, "agent_message_chunk"), READ_ALL);
    let completed =
        updates.iter().filter(|u| kind(u) == "tool_call_update" && u["status"] == "completed").count();
    assert_eq!(completed, 16, "every call of the turn ran");
    let stages: Vec<&str> =
        updates.iter().filter_map(|u| u["_meta"]["heron"]["compaction"]["stage"].as_str()).collect();
    assert!(stages.contains(&"clipped") && stages.contains(&"summarized"), "{stages:?}");
    assert!(text(&updates, "agent_thought_chunk").contains(SUMMARY), "the summary streamed as a thought");
    assert!(server.seen().iter().any(is_summary_request));
}

#[test]
fn after_a_prompt_too_big_for_the_window_the_next_prompt_is_answered() {
    let server = windowed::start(1 << 20, None);
    let dirs = home(&server, "context_window = 4000\n");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let session = heron.new_session(&dirs.ws());
    let (_, answer) = prompt(&mut heron, &session, "p1", "please read a.txt");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (updates, failed) = prompt(&mut heron, &session, "big", &"x".repeat(40_000));
    assert_eq!(failed["error"]["data"]["code"], "turn_failed", "{failed}");
    let marker = updates
        .iter()
        .find_map(|u| u["_meta"]["heron"]["compaction"].as_object().cloned())
        .unwrap_or_else(|| panic!("the editor is told the prompt is left out: {updates:?}"));
    assert_eq!(marker["stage"], "dropped", "{marker:?}");
    for (id, text) in [("p2", "please read b.txt"), ("p3", "hello")] {
        let (_, answer) = prompt(&mut heron, &session, id, text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{id}: {answer}");
    }
    assert!(!server.seen().iter().any(|s| s.raw.contains("xxxxxxxx")), "the big prompt was never sent");
}
