//! `heron run` as a client over the real binary: what it advertises, how it answers an
//! agent's `fs/*` and `terminal/*` requests (inside `--cwd` only, hostile paths refused
//! with the field named), what a permission question shows and accepts, and what it prints.

use serde_json::{Value, json};

use crate::support::Dirs;
use crate::support::run::{error_of, run, run_fake};

fn call(method: &str, params: Value) -> Value {
    json!(["call", method, params])
}

fn read(path: &str) -> Value {
    call("fs/read_text_file", json!({"sessionId": "$SESSION", "path": path}))
}

fn write(path: &str, content: &str) -> Value {
    call("fs/write_text_file", json!({"sessionId": "$SESSION", "path": path, "content": content}))
}

#[test]
fn initialize_advertises_files_and_terminals() {
    let dirs = Dirs::new();
    let finished = run_fake(&dirs, &json!({"steps": []}), "");
    assert!(finished.status.success(), "{finished:?}");
    let init = &dirs.events("initialize")[0]["params"]["clientCapabilities"];
    assert_eq!(init["fs"], json!({"readTextFile": true, "writeTextFile": true}), "{init}");
    assert_eq!(init["terminal"], true, "{init}");
}

#[test]
fn files_inside_the_cwd_are_written_atomically_and_read_by_lines() {
    let dirs = Dirs::new();
    let path = dirs.at("notes/a.txt");
    let plan = json!({"steps": [
        write(&path, "one\ntwo\nthree\n"),
        call("fs/read_text_file", json!({"sessionId": "$SESSION", "path": path, "line": 2, "limit": 1})),
        read(&path),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(replies[0]["result"], json!({}), "{replies:?}");
    assert_eq!(replies[1]["result"]["content"], "two\n", "{replies:?}");
    assert_eq!(replies[2]["result"]["content"], "one\ntwo\nthree\n", "{replies:?}");
    assert_eq!(
        std::fs::read_to_string(dirs.ws_path().join("notes/a.txt")).expect("written"),
        "one\ntwo\nthree\n"
    );
    let left: Vec<_> = std::fs::read_dir(dirs.ws_path().join("notes")).expect("dir").collect();
    assert_eq!(left.len(), 1, "no temp file is left behind");
}

#[test]
fn paths_outside_the_cwd_are_refused_naming_the_field() {
    let dirs = Dirs::new();
    let outside = dirs.path("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), "top secret").expect("secret");
    std::os::unix::fs::symlink(outside.join("secret.txt"), dirs.ws_path().join("link.txt"))
        .expect("file link");
    std::os::unix::fs::symlink(&outside, dirs.ws_path().join("dir")).expect("dir link");
    let plan = json!({"steps": [
        read(&outside.join("secret.txt").display().to_string()),
        read(&dirs.at("link.txt")),
        write(&dirs.at("dir/new.txt"), "x"),
        read(&dirs.at("../outside/secret.txt")),
        read("link.txt"),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(replies.len(), 5, "{replies:?}");
    for reply in &replies {
        let error = error_of(reply);
        assert_eq!(error["code"], -32602, "{reply}");
        assert_eq!(error["data"]["path"], "path", "{reply}");
        assert!(!reply.to_string().contains("top secret"), "{reply}");
    }
    assert!(!outside.join("new.txt").exists(), "the write went through the symlinked folder");
}

#[test]
fn heron_home_is_refused_even_inside_the_cwd() {
    let dirs = Dirs::new();
    // A home inside the workspace, as when the workspace is `~`.
    let home = dirs.ws_path().join(".heron");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(home.join(".env"), "KEY=sk-test-123456\n").expect("env");
    std::fs::hard_link(home.join(".env"), dirs.ws_path().join("alias")).expect("hard link");
    let plan = json!({"steps": [
        read(&dirs.at(".heron/.env")),
        write(&dirs.at(".heron/config.toml"), "x = 1\n"),
        read(&dirs.at("alias")),
    ]});
    let agent = dirs.fake_agent(&plan);
    let finished = crate::support::run::command(&dirs, &["--agent", &agent, "go"])
        .env("HERON_HOME", &home)
        .output()
        .expect("heron run");
    assert!(finished.status.success(), "{finished:?}");
    for reply in dirs.replies() {
        assert_eq!(error_of(&reply)["code"], -32602, "{reply}");
        assert!(!reply.to_string().contains("sk-test"), "{reply}");
    }
    assert!(!home.join("config.toml").exists());
}

#[test]
fn a_fifo_is_refused_and_a_missing_file_is_not_found() {
    let dirs = Dirs::new();
    let fifo = dirs.ws_path().join("pipe");
    let c = std::ffi::CString::new(fifo.display().to_string()).expect("c path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::create_dir_all(dirs.ws_path().join("sub")).expect("sub");
    let plan = json!({"steps": [
        read(&dirs.at("pipe")),
        write(&dirs.at("pipe"), "x"),
        read(&dirs.at("missing.txt")),
        read(&dirs.at("sub")),
        call("fs/read_text_file", json!({"sessionId": "$SESSION", "path": dirs.at("missing.txt"), "line": 0})),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(error_of(&replies[0])["code"], -32602, "{replies:?}");
    assert!(
        error_of(&replies[0])["data"]["reason"].as_str().is_some_and(|r| r.contains("FIFO")),
        "{replies:?}"
    );
    assert_eq!(error_of(&replies[1])["code"], -32602, "{replies:?}");
    assert_eq!(error_of(&replies[2])["code"], -32002, "{replies:?}");
    assert_eq!(error_of(&replies[2])["data"]["path"], dirs.at("missing.txt"), "{replies:?}");
    assert_eq!(error_of(&replies[3])["code"], -32602, "a directory: {replies:?}");
    assert_eq!(error_of(&replies[4])["data"]["path"], "line", "{replies:?}");
}

/// A NUL byte in the path is the agent's mistake, answered like any other bad path; it
/// is not a failure of the client.
#[test]
fn a_path_holding_a_nul_byte_is_invalid_params_naming_the_path() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws_path().join("a.txt"), "a").expect("fixture");
    let nul = format!("{}\u{0}x", dirs.at("a.txt"));
    let plan = json!({"steps": [read(&nul), write(&nul, "x")]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    for reply in &replies[..2] {
        let error = error_of(reply);
        assert_eq!(error["code"], -32602, "{replies:?}");
        assert_eq!(error["data"]["path"], "path", "{replies:?}");
        assert!(error["data"]["reason"].as_str().is_some_and(|r| r.contains("NUL byte")), "{replies:?}");
    }
    assert!(!finished.stderr.contains("ERROR"), "nothing failed inside the client: {}", finished.stderr);
}

#[test]
fn a_request_for_another_session_is_not_found() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws_path().join("a.txt"), "a").expect("file");
    let plan = json!({"steps": [
        call("fs/read_text_file", json!({"sessionId": "someone-else", "path": dirs.at("a.txt")})),
        call("fs/read_text_file", json!({"sessionId": "$SESSION"})),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(error_of(&replies[0])["code"], -32002, "{replies:?}");
    assert_eq!(error_of(&replies[1])["code"], -32602, "a missing field: {replies:?}");
}

fn terminal(params: Value) -> Value {
    let mut params = params;
    params["sessionId"] = json!("$SESSION");
    call("terminal/create", params)
}

fn on_terminal(method: &str, id: &str) -> Value {
    call(method, json!({"sessionId": "$SESSION", "terminalId": id}))
}

#[test]
fn a_terminal_gives_its_output_and_exit_code_and_is_gone_after_release() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.ws_path().join("sub")).expect("sub");
    let plan = json!({"steps": [
        terminal(json!({"command": "sh", "args": ["-c", "printf \"$GREETING in $(pwd)\"; exit 3"],
            "env": [{"name": "GREETING", "value": "hello"}], "cwd": dirs.at("sub")})),
        on_terminal("terminal/wait_for_exit", "term-1"),
        on_terminal("terminal/output", "term-1"),
        on_terminal("terminal/release", "term-1"),
        on_terminal("terminal/output", "term-1"),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(replies[0]["result"]["terminalId"], "term-1", "{replies:?}");
    assert_eq!(replies[1]["result"]["exitCode"], 3, "{replies:?}");
    let output = &replies[2]["result"];
    assert_eq!(output["output"], format!("hello in {}", dirs.ws_path().join("sub").display()), "{replies:?}");
    assert_eq!(output["truncated"], false, "{replies:?}");
    assert_eq!(output["exitStatus"]["exitCode"], 3, "{replies:?}");
    assert_eq!(replies[3]["result"], json!({}), "{replies:?}");
    assert_eq!(error_of(&replies[4])["code"], -32002, "{replies:?}");
}

#[test]
fn terminal_output_keeps_its_end_within_the_byte_limit() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [
        terminal(json!({"command": "sh", "args": ["-c", "printf 'aaaaaaaaaaé€end'"], "outputByteLimit": 8})),
        on_terminal("terminal/wait_for_exit", "term-1"),
        on_terminal("terminal/output", "term-1"),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let output = &dirs.replies()[2]["result"];
    let text = output["output"].as_str().expect("output");
    assert!(text.len() <= 8 && text.ends_with("€end"), "{output}");
    assert_eq!(output["truncated"], true, "{output}");
}

#[test]
fn a_terminal_outside_the_cwd_or_killed_is_answered_properly() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [
        terminal(json!({"command": "pwd", "cwd": dirs.path("home").display().to_string()})),
        terminal(json!({"command": "sleep", "args": ["600"]})),
        on_terminal("terminal/kill", "term-1"),
        on_terminal("terminal/wait_for_exit", "term-1"),
        terminal(json!({"command": "/no/such/program"})),
    ]});
    let finished = run_fake(&dirs, &plan, "");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(error_of(&replies[0])["code"], -32602, "{replies:?}");
    assert_eq!(error_of(&replies[0])["data"]["path"], "cwd", "{replies:?}");
    assert_eq!(replies[1]["result"]["terminalId"], "term-1", "{replies:?}");
    assert_eq!(replies[3]["result"]["signal"], "SIGKILL", "{replies:?}");
    assert_eq!(error_of(&replies[4])["data"]["path"], "command", "{replies:?}");
}

fn permission(options: Value) -> Value {
    call(
        "session/request_permission",
        json!({"sessionId": "$SESSION", "toolCall": {"toolCallId": "c1"}, "options": options}),
    )
}

fn offered(kinds: &[(&str, &str)]) -> Value {
    kinds
        .iter()
        .map(|(id, kind)| json!({"optionId": id, "name": format!("Choose {id}"), "kind": kind}))
        .collect()
}

fn chosen(dirs: &Dirs) -> Value {
    dirs.replies()[0]["result"]["outcome"].clone()
}

#[test]
fn the_diff_is_shown_before_the_question() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Edit a.txt", "kind": "edit",
            "status": "pending", "content": [{"type": "diff", "path": dirs.at("a.txt"),
            "oldText": "old line\n", "newText": "new line\n"}]}],
        permission(offered(&[("yes", "allow_once"), ("no", "reject_once")])),
    ]});
    let finished = run_fake(&dirs, &plan, "y\n");
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(chosen(&dirs), json!({"outcome": "selected", "optionId": "yes"}));
    let err = &finished.stderr;
    let diff = err.find("+new line").unwrap_or_else(|| panic!("no diff before the question:\n{err}"));
    let removed = err.find("-old line").unwrap_or_else(|| panic!("no removed line:\n{err}"));
    let question = err.find("[y] Choose yes").unwrap_or_else(|| panic!("no question:\n{err}"));
    assert!(removed < question && diff < question, "{err}");
    assert_eq!(
        finished.stdout.matches("+new line").count(),
        0,
        "the diff is shown once:\n{}",
        finished.stdout
    );
}

#[test]
fn an_execute_question_shows_the_command_and_its_folder() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run the build", "kind": "execute",
            "status": "pending", "rawInput": {"command": "cargo build --release", "cwd": dirs.at("")}}],
        permission(offered(&[("yes", "allow_once"), ("no", "reject_once")])),
    ]});
    let finished = run_fake(&dirs, &plan, "n\n");
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(chosen(&dirs)["optionId"], "no");
    assert!(finished.stderr.contains("$ cargo build --release"), "{}", finished.stderr);
    assert!(finished.stderr.contains(&format!("in {}", dirs.at(""))), "{}", finished.stderr);
}

/// A command padded so that its end would scroll off (or be cut) shows its padding as a
/// length and its end in the question; a diff longer than a question shows is said to be
/// cut, and `v` shows all of it before the answer.
#[test]
fn nothing_of_a_call_is_hidden_from_its_question() {
    let dirs = Dirs::new();
    let padded = format!("echo safe{}; touch HIDDEN\u{202e}", " ".repeat(3000));
    let long_command = format!("echo {}; rm -rf ./END", "x".repeat(3000));
    let new_text: String = (1..=200).map(|n| format!("line {n}\n")).collect();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Run", "kind": "execute",
            "status": "pending", "rawInput": {"command": padded}}],
        permission(offered(&[("yes", "allow_once"), ("no", "reject_once")])),
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c2", "title": "Run long", "kind": "execute",
            "status": "pending", "rawInput": {"command": long_command}}],
        call("session/request_permission", json!({"sessionId": "$SESSION", "toolCall": {"toolCallId": "c2"},
            "options": offered(&[("yes", "allow_once"), ("no", "reject_once")])})),
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c3", "title": "Write", "kind": "edit",
            "status": "pending", "content": [{"type": "diff", "path": dirs.at("b.txt"), "newText": new_text}]}],
        call("session/request_permission", json!({"sessionId": "$SESSION", "toolCall": {"toolCallId": "c3"},
            "options": offered(&[("yes", "allow_once"), ("no", "reject_once")])})),
    ]});
    let finished = run_fake(&dirs, &plan, "n\nv\nn\nv\ny\n");
    assert!(finished.status.success(), "{finished:?}");
    let err = &finished.stderr;
    assert!(err.contains("$ echo safe⟨3000 blanks⟩; touch HIDDEN⟨U+202E⟩"), "{err}");
    assert!(err.contains("! not shown above: 1019 more characters of the command; answer `v`"), "{err}");
    assert!(err.contains("rm -rf ./END"), "`v` shows the end of the command: {err}");
    assert!(err.contains("[v] view all"), "{err}");
    assert!(
        err.contains("… 123 more diff lines") && err.contains("not shown above: the rest of the diff"),
        "{err}"
    );
    assert!(err.contains("+line 200"), "`v` shows the whole diff: {err}");
    let replies = dirs.replies();
    let picked: Vec<_> = replies.iter().map(|r| r["result"]["outcome"]["optionId"].clone()).collect();
    assert_eq!(picked, [json!("no"), json!("no"), json!("yes")], "`v` is no answer: {replies:?}");
}

#[test]
fn an_answer_the_agent_did_not_offer_is_asked_again() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [permission(offered(&[("ok", "allow_once"), ("nope", "reject_once")]))]});
    let finished = run_fake(&dirs, &plan, "a\nN\nn\n");
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(chosen(&dirs), json!({"outcome": "selected", "optionId": "nope"}));
    assert!(finished.stderr.contains("`a` is not one of the answers offered"), "{}", finished.stderr);
    assert!(!finished.stderr.contains("Always"), "only offered answers are listed: {}", finished.stderr);
}

#[test]
fn answers_that_never_match_reject_once_and_never_always() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [permission(offered(&[("ok", "allow_once"), ("never", "reject_always")]))]});
    let finished = run_fake(&dirs, &plan, "x\nmaybe\n7\n");
    assert!(finished.status.success(), "{finished:?}");
    // No reject-once was offered, and an "always" is never picked for the user.
    assert_eq!(chosen(&dirs), json!({"outcome": "cancelled"}));
}

#[test]
fn numbers_choose_any_offered_option_and_end_of_input_rejects() {
    let dirs = Dirs::new();
    let two =
        permission(offered(&[("first", "allow_once"), ("second", "allow_once"), ("no", "reject_once")]));
    let plan = json!({"steps": [two.clone(), two]});
    let finished = run_fake(&dirs, &plan, "2\n");
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(replies[0]["result"]["outcome"]["optionId"], "second", "{replies:?}");
    assert_eq!(replies[1]["result"]["outcome"]["optionId"], "no", "{replies:?}");
}

#[test]
fn a_question_the_agent_withdraws_is_put_away_and_the_next_is_asked() {
    let dirs = Dirs::new();
    let options = offered(&[("ok", "allow_once"), ("no", "reject_once")]);
    let question = json!({"sessionId": "$SESSION", "toolCall": {"toolCallId": "c1"}, "options": options});
    let plan = json!({"steps": [
        ["withdraw", "session/request_permission", question],
        permission(options),
    ]});
    let agent = dirs.fake_agent(&plan);
    let mut run = crate::support::run::Run::start(&dirs, &["--agent", &agent, "go"], "");
    // The answer is typed only once the first question is gone.
    dirs.wait_for("reply");
    run.type_line("y");
    let finished = run.finish();
    assert!(finished.status.success(), "{finished:?}");
    let replies = dirs.replies();
    assert_eq!(error_of(&replies[0])["code"], -32800, "{replies:?}");
    assert_eq!(replies[1]["result"]["outcome"]["optionId"], "ok", "{replies:?}");
    assert!(finished.stderr.contains("the agent withdrew the question"), "{}", finished.stderr);
}

#[test]
fn output_carries_no_escape_codes_without_a_terminal_and_no_text_glued_to_stderr() {
    let dirs = Dirs::new();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "half a line"}}],
        ["update", {"sessionUpdate": "usage_update", "used": 5, "size": 100}],
        ["update", {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "\u{1b}[31mred\u{1b}[0m and \u{1b}]0;title\u{7} done"}}],
        ["update", {"sessionUpdate": "plan", "entries": [
            {"content": "look", "priority": "high", "status": "completed"},
            {"content": "write", "priority": "high", "status": "in_progress"},
            {"content": "check", "priority": "low", "status": "pending"}]}],
    ]});
    let agent = dirs.fake_agent(&plan);
    let combined = dirs.path("combined.txt");
    let file = std::fs::File::create(&combined).expect("combined output");
    let status = crate::support::run::command(&dirs, &["--agent", &agent, "go"])
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().expect("clone"))
        .stderr(file)
        .status()
        .expect("heron run");
    assert!(status.success());
    let out = std::fs::read_to_string(&combined).expect("read");
    assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
    assert!(out.contains("half a line\n[context 5 / 100 tokens]\n"), "{out:?}");
    assert!(!out.contains("working (Ctrl-C"), "no spinner off a terminal: {out:?}");
    assert!(out.contains("[completed] look\n  [in progress] write\n  [pending] check\n"), "{out:?}");
}

#[test]
fn the_demo_writes_its_note_after_a_piped_yes() {
    let dirs = Dirs::new();
    let finished = run(&dirs, &["--model", "demo/demo", "Look around and leave a note"], "y\n");
    assert!(finished.status.success(), "{finished:?}");
    assert_eq!(
        std::fs::read_to_string(dirs.ws_path().join("NOTES.md")).expect("the note"),
        "# Notes\n\nHeron was here.\n"
    );
    assert!(finished.stdout.contains("» Create NOTES.md"), "{}", finished.stdout);
    assert!(finished.stdout.ends_with("[end_turn]\n"), "{}", finished.stdout);
    assert!(finished.stderr.contains("[y] Allow once"), "{}", finished.stderr);
    // The question and its diff went to stderr; stdout, the record of the turn, still says
    // what was allowed.
    assert!(finished.stdout.contains("  approved (Allow once): Create NOTES.md\n"), "{}", finished.stdout);
    assert!(!finished.stdout.contains('\u{1b}') && !finished.stderr.contains('\u{1b}'));
}

#[test]
fn json_output_is_an_update_per_line_then_the_stop_reason() {
    let dirs = Dirs::new();
    let finished = run(&dirs, &["--model", "demo/demo", "--json", "--approve", "all", "Look around"], "");
    assert!(finished.status.success(), "{finished:?}");
    let lines: Vec<&str> = finished.stdout.lines().collect();
    let (last, updates) = lines.split_last().expect("output");
    assert_eq!(*last, r#"{"stopReason":"end_turn"}"#);
    for line in updates {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(value["update"]["sessionUpdate"].is_string(), "{line}");
        assert_eq!(value.as_object().map(|o| o.len()), Some(1), "{line}");
    }
    assert!(dirs.ws_path().join("NOTES.md").exists());
}

#[test]
fn heron_runs_its_commands_in_our_terminals_and_their_output_is_shown() {
    let dirs = Dirs::new();
    let script = concat!(
        r#"{"steps": [{"tool_call": {"name": "run_command", "arguments": {"command": "echo made in $(pwd)"}}}]}"#,
        "\n",
        r#"{"steps": [{"text": "Ran it."}]}"#,
        "\n"
    );
    std::fs::write(dirs.home().join("config.toml"), crate::support::scripted_provider("s", "s.jsonl"))
        .expect("config");
    std::fs::write(dirs.home().join("s.jsonl"), script).expect("script");
    let finished = run(&dirs, &["--model", "s/m", "--approve", "all", "run it"], "");
    assert!(finished.status.success(), "{finished:?}");
    let out = &finished.stdout;
    let made = format!("made in {}", dirs.ws_path().display());
    assert!(out.contains(&format!("  {made}\n  Exit code: 0\n  [completed]")), "{finished:?}");
    // Each once: the command in the title only, the output from the call's own account.
    assert_eq!(out.matches("echo made in").count(), 1, "{out}");
    assert_eq!(out.matches(&made).count(), 1, "{out}");
}

#[test]
fn an_agent_error_is_printed_with_its_reason() {
    let dirs = Dirs::new();
    let config = crate::support::scripted_provider("broken", "broken.jsonl");
    std::fs::write(dirs.home().join("config.toml"), config).expect("config");
    std::fs::write(dirs.home().join("broken.jsonl"), "{not a script\n").expect("script");
    let finished = run(&dirs, &["--model", "broken/m", "hello"], "");
    assert!(!finished.status.success(), "{finished:?}");
    assert!(finished.stderr.contains("provider `broken` cannot start: script line 1"), "{}", finished.stderr);
}

/// Runs `heron run args...` with stdout and stderr on a pseudo-terminal, as in a terminal
/// window, with `env` set; returns its exit status and everything the terminal showed.
fn run_on_a_terminal(dirs: &Dirs, args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty stores two new descriptors in the integers it is given; a null name,
    // terminal settings and window size are allowed.
    let opened = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null())
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened, and nothing else owns them.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut command = crate::support::run::command(dirs, args);
    command
        .stdin(std::process::Stdio::null())
        .stdout(slave.try_clone().expect("a second descriptor of the terminal"))
        .stderr(slave);
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("heron run");
    // Our copies of the terminal's side close here, so that the reader sees its end when
    // heron run's do.
    drop(command);
    let shown = std::thread::spawn(move || {
        let mut terminal = std::fs::File::from(master);
        let mut all = Vec::new();
        let mut buffer = [0u8; 4096];
        // Once every descriptor of the other side is closed, a read fails (EIO).
        while let Ok(n) = terminal.read(&mut buffer) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buffer[..n]);
        }
        all
    });
    let began = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(began.elapsed() < crate::support::run::RUN_WAIT, "heron run did not end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let shown = shown.join().expect("the terminal reader");
    (status, String::from_utf8_lossy(&shown).into_owned())
}

/// On a terminal there is colour, and a spinner while the agent is quiet; `NO_COLOR` and
/// `TERM=dumb` ask for plain output, so neither shows then.
#[test]
fn colour_and_the_spinner_show_on_a_terminal_only_without_no_color_or_a_dumb_term() {
    let setup = Dirs::new();
    let plan = json!({"steps": [
        ["update", {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Looking.\n"}}],
        // Quiet for longer than the spinner waits before it turns.
        ["sleep", 1.2],
        ["update", {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "List src/", "kind": "read",
            "status": "completed"}],
    ]});
    let agent = setup.fake_agent(&plan);
    let args = ["--agent", agent.as_str(), "go"];
    let spinner = " working (Ctrl-C to cancel)";

    let (status, shown) = run_on_a_terminal(&setup, &args, &[("TERM", "xterm-256color")]);
    assert!(status.success(), "{shown:?}");
    assert!(shown.contains("\u{1b}[1m» List src/\u{1b}[0m"), "the title in bold: {shown:?}");
    assert!(shown.contains(spinner), "a spinner while the agent was quiet: {shown:?}");

    for plain in [[("TERM", "xterm-256color"), ("NO_COLOR", "1")], [("TERM", "dumb"), ("NO_COLOR", "")]] {
        let (status, shown) = run_on_a_terminal(&setup, &args, &plain);
        assert!(status.success(), "{plain:?}: {shown:?}");
        assert!(shown.contains("» List src/"), "{plain:?}: {shown:?}");
        assert!(!shown.contains('\u{1b}'), "{plain:?}: no escape codes: {shown:?}");
        assert!(!shown.contains(spinner), "{plain:?}: no spinner: {shown:?}");
    }
}
