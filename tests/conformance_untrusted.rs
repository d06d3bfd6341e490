//! Transcripts are someone else's input: `heron conformance` refuses header arguments off
//! its allow-list and sessions opened outside the scenario's sandbox before anything runs,
//! what the agent's commands keep under HOME or TMPDIR stays in the sandbox, and they can
//! neither read the user's files nor reach the network.

use std::path::{Path, PathBuf};

use heron::conformance::run_file;
use heron::conformance::runner::AgentCommand;

fn heron() -> AgentCommand {
    AgentCommand::Heron(PathBuf::from(env!("CARGO_BIN_EXE_heron")))
}

/// Writes `text` as a transcript file in `dir` and returns its path.
fn transcript(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("shared.ndjson");
    std::fs::write(&path, text).expect("write the transcript");
    path
}

const HANDSHAKE: &str = concat!(
    r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}"#,
    "\n",
    r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": "{...}"}}"#,
    "\n",
);

/// A prompt whose turn may stream anything, as long as it ends `end_turn`, with `also`
/// (expectation lines) required among its messages.
fn prompt_turn(also: &str) -> String {
    format!(
        "{}\n{}\n{}\n{also}{}\n{}\n",
        r#"{"send": {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "$sid", "prompt": [{"type": "text", "text": "go"}]}}}"#,
        r#"{"unordered": "begin"}"#,
        r#"{"expect": {"jsonrpc": "2.0", "method": "session/update", "params": "{...}"}, "repeat": true}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn", "...": "..."}}}"#,
        r#"{"unordered": "end"}"#,
    )
}

#[test]
fn a_header_asking_to_record_is_refused_naming_its_line_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let victim = dir.path().join("notes.txt");
    std::fs::write(&victim, "mine\n").expect("write the user's file");
    let header = serde_json::json!({
        "scenario": "A shared transcript that records over a file.",
        "args": ["--model", "demo/demo", "--record", victim.display().to_string()],
    });
    let path = transcript(dir.path(), &format!("# Shared by someone.\n{header}\n{HANDSHAKE}"));

    let outcome = run_file(&path, &heron(), false);

    let failure = outcome.result.expect_err("the transcript is refused");
    assert_eq!(failure.line, 2, "the header's line: {failure}");
    assert!(failure.summary.contains("`--record` is refused"), "{failure}");
    assert!(failure.stderr.is_empty(), "no agent was started: {failure}");
    assert_eq!(std::fs::read_to_string(&victim).expect("still there"), "mine\n");
}

#[test]
fn a_header_with_flags_off_the_allow_list_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (args, says) in [
        (serde_json::json!(["--cwd", "/"]), "`--cwd` is refused"),
        (serde_json::json!(["--setup"]), "`--setup` is refused"),
        (serde_json::json!(["--no-such-flag"]), "not a flag a transcript may pass"),
        (serde_json::json!(["--title", "/etc/passwd"]), "outside the scenario's sandbox"),
    ] {
        let header = serde_json::json!({ "scenario": "Off the list.", "args": args });
        let path = transcript(dir.path(), &format!("{header}\n{HANDSHAKE}"));
        let failure = run_file(&path, &heron(), false).result.expect_err("refused");
        assert_eq!(failure.line, 1, "{failure}");
        assert!(failure.summary.contains(says), "{args}: {failure}");
    }
}

#[test]
fn home_files_land_in_the_scenarios_home_and_none_may_climb_out_or_replace_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, says) in [
        ("../escaped.md", "outside the home"),
        ("/tmp/escaped.md", "outside the home"),
        ("config.toml", "written from the header's `config`"),
    ] {
        let header = serde_json::json!({ "scenario": "A home file.", "home_files": { name: "x" } });
        let path = transcript(dir.path(), &format!("{header}\n{HANDSHAKE}"));
        let failure = run_file(&path, &heron(), false).result.expect_err("refused");
        assert!(failure.summary.contains(says), "{name}: {failure}");
    }
    assert!(!dir.path().join("escaped.md").exists());
}

#[test]
fn a_session_opened_outside_the_sandbox_is_refused_before_its_tools_can_write_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("a directory of the user's");
    let write = serde_json::json!({"steps": [{"tool_call": {"name": "write_file", "arguments": {"path": "pwned.txt", "content": "x"}}}]});
    let header = serde_json::json!({
        "scenario": "A shared transcript whose session works in the user's directory.",
        "args": ["--model", "script/m", "--permission-mode", "bypassPermissions"],
        "script": [write, {"steps": [{"text": "Done."}]}],
    });
    let new = serde_json::json!({"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": outside.path().display().to_string(), "mcpServers": []}}});
    let text = format!(
        "{header}\n{HANDSHAKE}{new}\n{}\n{}",
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid", "...": "..."}}}"#,
        prompt_turn("")
    );
    let path = transcript(dir.path(), &text);

    let failure = run_file(&path, &heron(), false).result.expect_err("refused");

    assert_eq!(failure.line, 4, "the session/new line: {failure}");
    assert!(failure.summary.contains("session/new's params.cwd"), "{failure}");
    assert!(!outside.path().join("pwned.txt").exists(), "the write_file call never ran");
}

#[test]
fn what_a_command_keeps_under_home_or_tmpdir_stays_in_the_sandbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("heron-untrusted-{}", uuid::Uuid::new_v4());
    let command = format!(r#"echo x > "$HOME/{marker}" && echo x > "${{TMPDIR:-/tmp}}/{marker}""#);
    let run = serde_json::json!({"steps": [{"tool_call": {"name": "run_command", "arguments": {"command": command}}}]});
    let header = serde_json::json!({
        "scenario": "A shared transcript whose command writes into HOME and TMPDIR.",
        "args": ["--model", "script/m", "--permission-mode", "bypassPermissions"],
        "script": [run, {"steps": [{"text": "Done."}]}],
        "timeout_ms": 20000,
    });
    let completed = r#"{"expect": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "$sid", "update": {"sessionUpdate": "tool_call_update", "status": "completed", "toolCallId": "call_0_0", "...": "..."}}}}"#;
    let text = format!(
        "{header}\n{HANDSHAKE}{}\n{}\n{}",
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "$WS", "mcpServers": []}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid", "...": "..."}}}"#,
        prompt_turn(&format!("{completed}\n")),
    );
    let path = transcript(dir.path(), &text);

    let outcome = run_file(&path, &heron(), false);

    // Where the command would have written without the sandbox's HOME and TMPDIR; removed
    // first, so a failure leaves nothing behind either.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let escaped: Vec<PathBuf> = [home, Some(std::env::temp_dir()), Some(PathBuf::from("/tmp"))]
        .into_iter()
        .flatten()
        .map(|dir| dir.join(&marker))
        .filter(|path| std::fs::remove_file(path).is_ok())
        .collect();
    assert!(escaped.is_empty(), "the command wrote outside the sandbox: {escaped:?}");
    outcome.result.unwrap_or_else(|failure| panic!("the command ran and succeeded:\n{failure}"));
}

#[test]
fn the_agent_under_test_runs_sandboxed_and_cannot_write_outside_the_scenario() {
    if let Err(reason) = &heron_core::sandbox::support().landlock {
        crate::support::clients::skip_wall(format!(
            "Landlock is not available here, so the agent may write anywhere: {reason}"
        ));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("pwned.txt");
    // The "agent" reads the first request, tries the write, then says on stderr whether it was refused and whether
    // it could write its own workspace, and leaves without answering.
    let agent = format!(
        r#"read -r _; if echo x > "{out}" 2>/dev/null; then echo escaped >&2; else echo refused >&2; fi; echo x > ./mine && echo inside >&2; exit 3"#,
        out = outside.display()
    );
    let path = transcript(
        dir.path(),
        &format!("{}\n{HANDSHAKE}", serde_json::json!({"scenario": "A hostile agent."})),
    );

    let failure = run_file(&path, &AgentCommand::Shell(agent), false).result.expect_err("it never answers");

    assert!(!outside.exists(), "the agent wrote outside its sandbox: {failure}");
    assert!(failure.stderr.contains("refused"), "{failure}");
    assert!(failure.stderr.contains("inside"), "it could still write its workspace: {failure}");
}

/// A transcript that runs commands (with `bypassPermissions`) cannot read the user's files
/// or send anything out: the agent it starts, and so its commands, read only the system
/// folders, their own program and the scenario, and reach no network but a loopback of
/// their own (TCP is refused by Landlock too; UDP, which Landlock does not cover, finds no
/// one listening). The scenario expects the three commands to fail, so it passes only when
/// each was refused, and nothing reaches the servers listening on the machine's loopback.
#[test]
fn a_transcripts_commands_can_neither_read_the_users_files_nor_reach_the_network() {
    let support = heron_core::sandbox::support();
    match &support.landlock {
        Err(reason) => {
            crate::support::clients::skip_wall(format!(
                "Landlock is not available here, so the agent reads anything: {reason}"
            ));
            return;
        }
        Ok(abi) if *abi < 4 && !support.walls.network_namespace => {
            crate::support::clients::skip_wall(format!(
                "no network namespace, and Landlock ABI {abi} cannot refuse TCP (needs 4)"
            ));
            return;
        }
        Ok(_) => {}
    }
    if !Path::new("/bin/bash").exists() {
        crate::support::clients::skipped("no /bin/bash to open a TCP connection with");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "conformance-secret-4f1d\n").expect("the user's file");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local server");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("a local UDP server");
    udp.set_read_timeout(Some(std::time::Duration::from_millis(300))).expect("timeout");
    let udp_port = udp.local_addr().expect("address").port();
    let read = format!("cat '{}'", secret.display());
    let send = format!("bash -c 'echo exfiltrated > /dev/tcp/127.0.0.1/{port}'");
    // Sending a datagram succeeds wherever a loopback is up; what tells is whether it arrives.
    let datagram = format!("bash -c 'echo exfiltrated > /dev/udp/127.0.0.1/{udp_port}'; exit 1");
    let call = |command: &str| serde_json::json!({"tool_call": {"name": "run_command", "arguments": {"command": command}}});
    let header = serde_json::json!({
        "scenario": "A shared transcript whose commands read a file of the user's and send it out.",
        "args": ["--model", "script/m", "--permission-mode", "bypassPermissions"],
        "script": [{"steps": [call(&read), call(&send), call(&datagram)]}, {"steps": [{"text": "Done."}]}],
        "timeout_ms": 20000,
    });
    let failed = |id: &str| {
        format!(
            r#"{{"expect": {{"jsonrpc": "2.0", "method": "session/update", "params": {{"sessionId": "$sid", "update": {{"sessionUpdate": "tool_call_update", "status": "failed", "toolCallId": "{id}", "...": "..."}}}}}}}}"#
        )
    };
    let text = format!(
        "{header}\n{HANDSHAKE}{}\n{}\n{}",
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "$WS", "mcpServers": []}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid", "...": "..."}}}"#,
        prompt_turn(&format!("{}\n{}\n{}\n", failed("call_0_0"), failed("call_0_1"), failed("call_0_2"))),
    );
    let path = transcript(dir.path(), &text);

    let outcome = run_file(&path, &heron(), false);

    let mut received = String::new();
    while let Ok((mut stream, _)) = listener.accept() {
        use std::io::Read;
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
        let _ = stream.read_to_string(&mut received);
        received.push_str("(a connection)");
    }
    assert!(received.is_empty(), "the transcript reached the local server: {received}");
    let mut datagram = [0u8; 64];
    let arrived = udp.recv(&mut datagram);
    assert!(arrived.is_err(), "a datagram reached the machine's loopback: {arrived:?}");
    outcome.result.unwrap_or_else(|failure| panic!("both commands were refused:\n{failure}"));
}
