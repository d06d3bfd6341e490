//! How `heron run` ends, over the real binary: Ctrl-C cancels the turn and then ends the
//! agent's whole process group (exit 130), a second Ctrl-C stops at once, an agent that
//! ignores everything is killed, none outlives the run; and `--session` continues a
//! stored session.

use serde_json::json;

use crate::support;
use crate::support::Dirs;
use crate::support::run::{Run, becomes_gone, run};

/// The pids the fake agent logged: its own, and its child's when it started one.
fn pids(dirs: &Dirs) -> Vec<u64> {
    ["started", "child"]
        .iter()
        .flat_map(|event| dirs.events(event))
        .filter_map(|e| e["pid"].as_u64())
        .collect()
}

#[test]
fn ctrl_c_cancels_the_turn_then_ends_the_agent_group() {
    let dirs = Dirs::new();
    let plan = json!({"child": true, "steps": [["wait_cancel"]], "stop": "cancelled"});
    let agent = dirs.fake_agent(&plan);
    let run = Run::start(&dirs, &["--agent", &agent, "go"], "");
    dirs.wait_for("waiting");
    run.signal(libc::SIGINT);
    let finished = run.finish();
    assert_eq!(finished.status.code(), Some(130), "{finished:?}");
    let cancels = dirs.events("cancel");
    assert_eq!(cancels.len(), 1, "{:?}", dirs.log());
    assert_eq!(cancels[0]["params"]["sessionId"], "sess-fake-1");
    assert!(finished.stdout.contains("[cancelled]"), "{finished:?}");
    let pids = pids(&dirs);
    assert_eq!(pids.len(), 2, "{:?}", dirs.log());
    for pid in pids {
        assert!(becomes_gone(pid), "process {pid} outlived heron run");
    }
}

#[test]
fn ctrl_c_during_a_question_answers_it_cancelled() {
    let dirs = Dirs::new();
    let permission = json!(["call", "session/request_permission", {"sessionId": "$SESSION",
        "toolCall": {"toolCallId": "c1", "title": "Delete everything"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]}]);
    let plan = json!({"steps": [permission], "stop": "cancelled"});
    let agent = dirs.fake_agent(&plan);
    // Stdin stays open and silent: the question waits for an answer that never comes.
    let run = Run::start(&dirs, &["--agent", &agent, "go"], "");
    dirs.wait_for("call");
    run.signal(libc::SIGINT);
    let finished = run.finish();
    assert_eq!(finished.status.code(), Some(130), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(replies[0]["result"]["outcome"], json!({"outcome": "cancelled"}), "{replies:?}");
}

#[test]
fn an_agent_ignoring_cancel_and_sigterm_is_killed_with_its_group() {
    let dirs = Dirs::new();
    let plan = json!({"child": true, "ignore_term": true, "steps": [["hang"]]});
    let agent = dirs.fake_agent(&plan);
    let run = Run::start(&dirs, &["--agent", &agent, "go"], "");
    dirs.wait_for("waiting");
    run.signal(libc::SIGINT);
    let finished = run.finish();
    assert_eq!(finished.status.code(), Some(130), "{finished:?}");
    assert!(finished.stderr.contains("did not end in time"), "{}", finished.stderr);
    assert_all_gone(&dirs);
}

#[test]
fn a_second_ctrl_c_stops_at_once() {
    let dirs = Dirs::new();
    let plan = json!({"ignore_term": true, "steps": [["hang"]]});
    let agent = dirs.fake_agent(&plan);
    let run = Run::start(&dirs, &["--agent", &agent, "go"], "");
    dirs.wait_for("waiting");
    run.signal(libc::SIGINT);
    dirs.wait_for("cancel");
    run.signal(libc::SIGINT);
    let finished = run.finish();
    assert_eq!(finished.status.code(), Some(130), "{finished:?}");
    assert!(!finished.stderr.contains("did not end in time"), "it did not wait: {}", finished.stderr);
    assert_all_gone(&dirs);
}

#[test]
fn an_agent_that_lingers_after_the_turn_is_ended() {
    let dirs = Dirs::new();
    let plan = json!({"child": true, "ignore_term": true, "linger": true, "steps": []});
    let agent = dirs.fake_agent(&plan);
    let finished = run(&dirs, &["--agent", &agent, "go"], "");
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(dirs.events("eof").len(), 1, "its stdin was closed first: {:?}", dirs.log());
    assert_all_gone(&dirs);
}

#[test]
fn an_agent_that_exits_at_once_is_an_error() {
    let dirs = Dirs::new();
    let finished = run(&dirs, &["--agent", "exit 0", "go"], "");
    assert_eq!(finished.status.code(), Some(1), "{finished:?}");
    assert!(finished.stderr.contains("the agent stopped before it answered"), "{}", finished.stderr);
}

#[test]
fn a_session_is_continued_by_its_id() {
    let script = concat!(
        r#"{"steps": [{"text": "First answer."}]}"#,
        "\n",
        r#"{"steps": [{"text": "Second answer, after the first."}]}"#,
        "\n"
    );
    let dirs = Dirs::new();
    let config = support::scripted_provider("s", "s.jsonl");
    std::fs::write(dirs.home().join("config.toml"), config).expect("config");
    std::fs::write(dirs.home().join("s.jsonl"), script).expect("script");

    let first = run(&dirs, &["--model", "s/m", "one"], "");
    assert!(first.status.success(), "{first:?}");
    assert!(first.stdout.contains("First answer."), "{}", first.stdout);
    let id = first
        .stderr
        .split("--session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session id: {}", first.stderr))
        .to_owned();

    let second = run(&dirs, &["--model", "s/m", "--session", &id, "two"], "");
    assert!(second.status.success(), "{second:?}");
    // The model plays turn 1 only when the conversation holds turn 0: the load carried it.
    let out = &second.stdout;
    assert!(out.contains("Second answer, after the first."), "{out}");
    // The replay shows both sides of the first turn, then a line marks where the new turn
    // starts, with its prompt.
    let at = |text: &str| out.find(text).unwrap_or_else(|| panic!("no {text:?} in {out}"));
    let (asked, answered, marked, answered_again) =
        (at("> one\n"), at("First answer."), at("──── new turn ────\n> two\n"), at("Second answer"));
    assert!(asked < answered && answered < marked && marked < answered_again, "{out}");
}

/// The id in a run's "continue this session with --session ID" line, which must be its
/// last line on stderr.
fn continue_with(stderr: &str) -> String {
    let last = stderr.lines().last().unwrap_or_default();
    let id = last.strip_prefix("heron: continue this session with --session ");
    id.unwrap_or_else(|| panic!("the last line says how to continue: {stderr}")).to_owned()
}

#[test]
fn a_failed_turn_still_ends_saying_how_to_continue_and_the_session_goes_on() {
    let script = concat!(
        // Its first words are stored, so the next run's conversation plays the next turn.
        r#"{"steps": [{"text": "Starting."}, {"error": "upstream overloaded"}]}"#,
        "\n",
        r#"{"steps": [{"text": "Back again."}]}"#,
        "\n"
    );
    let dirs = Dirs::new();
    let config = support::scripted_provider("s", "s.jsonl");
    std::fs::write(dirs.home().join("config.toml"), config).expect("config");
    std::fs::write(dirs.home().join("s.jsonl"), script).expect("script");

    let failed = run(&dirs, &["--model", "s/m", "one"], "");
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(failed.stderr.contains("upstream overloaded"), "{}", failed.stderr);
    let id = continue_with(&failed.stderr);
    let second = run(&dirs, &["--model", "s/m", "--session", &id, "two"], "");
    assert!(second.status.success(), "{second:?}");
    assert!(second.stdout.contains("Back again."), "{}", second.stdout);
    assert_eq!(continue_with(&second.stderr), id);
}

#[test]
fn a_session_is_resumed_when_the_agent_can_only_resume() {
    let setup = Dirs::new();
    let plan = json!({"resume": true, "steps": []});
    let agent = setup.fake_agent(&plan);
    let finished = run(&setup, &["--agent", &agent, "--session", "sess-fake-1", "go on"], "");
    assert!(finished.status.success(), "{finished:?}");
    let resumes = setup.events("session/resume");
    assert_eq!(resumes.len(), 1, "{:?}", setup.log());
    assert_eq!(resumes[0]["params"]["sessionId"], "sess-fake-1");
    assert_eq!(resumes[0]["params"]["cwd"], setup.ws_path().display().to_string());
    assert!(setup.events("session/load").is_empty() && setup.events("session/new").is_empty());
    assert!(finished.stderr.contains("resuming session sess-fake-1"), "{}", finished.stderr);
    assert!(finished.stdout.starts_with("──── new turn ────\n> go on\n"), "{}", finished.stdout);
}

/// A user message the agent shows (a steer, an inbox item) reads as the user's, apart from
/// the answer around it.
#[test]
fn user_messages_the_agent_shows_are_quoted() {
    let setup = Dirs::new();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Working"}}],
        ["update", {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "also fix\nthe docs"}}],
        ["update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Will do."}}],
    ]});
    let finished = crate::support::run::run_fake(&setup, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    assert!(finished.stdout.contains("Working\n> also fix\n> the docs\nWill do."), "{}", finished.stdout);
}

/// `heron run ... | head -3`: once nobody reads stdout, the turn is cancelled as by a
/// Ctrl-C (the agent is told), and the run ends quietly instead of panicking or going on.
#[test]
fn a_closed_stdout_cancels_the_turn_without_a_panic() {
    let setup = Dirs::new();
    let plan = json!({"stop": "cancelled", "steps": [
        ["update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "first line\n"}}],
        ["wait_cancel"],
    ]});
    let agent = setup.fake_agent(&plan);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    // Closed before heron starts: its first write to stdout finds nobody reading.
    drop(reader);
    let mut child = crate::support::run::command(&setup, &["--agent", &agent, "go"])
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("heron run");
    let began = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if began.elapsed() > crate::support::run::RUN_WAIT {
            let _ = child.kill();
            panic!("heron run went on with nobody reading its output");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stdout was closed; cancelling the turn"), "{stderr}");
    assert_eq!(setup.events("cancel").len(), 1, "the agent was told: {:?}", setup.log());
}

#[test]
fn a_session_is_loaded_when_the_agent_can_load() {
    let dirs = Dirs::new();
    let plan = json!({"load": true, "steps": []});
    let agent = dirs.fake_agent(&plan);
    let finished = run(&dirs, &["--agent", &agent, "--session", "sess-fake-1", "go"], "");
    assert!(finished.status.success(), "{finished:?}");
    let loads = dirs.events("session/load");
    assert_eq!(loads.len(), 1, "{:?}", dirs.log());
    assert_eq!(loads[0]["params"]["sessionId"], "sess-fake-1");
    assert!(dirs.events("session/new").is_empty());
}

#[test]
fn a_session_cannot_be_continued_by_an_agent_that_cannot_load() {
    let dirs = Dirs::new();
    let agent = dirs.fake_agent(&json!({"steps": []}));
    let finished = run(&dirs, &["--agent", &agent, "--session", "x", "go"], "");
    assert_eq!(finished.status.code(), Some(1), "{finished:?}");
    assert!(finished.stderr.contains("neither load nor resume"), "{}", finished.stderr);
}

/// Every process the fake agent reported (itself, its child) is gone.
fn assert_all_gone(dirs: &Dirs) {
    for pid in pids(dirs) {
        assert!(becomes_gone(pid), "process {pid} outlived heron run");
    }
}
