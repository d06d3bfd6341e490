//! The acp conformance profile, what ACP v1 asks of any agent: the format's `requires` (a
//! scenario the agent does not advertise is skipped) and `ignore` (messages an agent may send
//! anywhere) in memory; then the real binary running its built-in profile against Heron (all
//! pass, reported as JUnit), against an echo agent on the ACP TypeScript SDK (its deviations
//! pinned), and against an agent named by a path relative to the caller's directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use heron::conformance::Replayed;
use heron::conformance::bundled;
use heron::conformance::format::requirement_met;
use heron::conformance::runner::{Received, Transport};
use serde_json::json;

use crate::support::conformance::replay_text;

const INITIALIZE: &str = concat!(
    r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}"#,
    "\n",
    r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "...": "..."}}}"#,
    "\n",
);

/// A scenario that loads a session once initialize is answered, if the agent advertises it.
fn needs_load_session() -> String {
    format!(
        "{}\n{INITIALIZE}{}\n{}\n",
        r#"{"scenario": "needs loadSession", "timeout_ms": 50, "requires": ["agentCapabilities.loadSession"]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": "{...}"}}"#,
    )
}

#[test]
fn a_scenario_the_agent_does_not_advertise_is_skipped_before_anything_more_is_sent() {
    let text = needs_load_session();
    // Nothing is canned for session/load: had it gone out, the replay would time out and fail.
    let refusing = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}}"#;
    assert_eq!(
        replay_text(&text, &[&[refusing]]).expect("skipped, not failed"),
        Replayed::Skipped("the agent does not advertise agentCapabilities.loadSession".into())
    );
    let silent = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
    assert!(matches!(replay_text(&text, &[&[silent]]), Ok(Replayed::Skipped(_))), "absent counts as not");
    let serving =
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
    let loaded = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    assert_eq!(replay_text(&text, &[&[serving], &[loaded]]).expect("runs"), Replayed::Passed);
}

#[test]
fn requirements_read_empty_objects_as_advertised_and_bang_as_must_not() {
    let init =
        json!({ "agentCapabilities": { "loadSession": false, "sessionCapabilities": { "list": {} } } });
    assert!(requirement_met("agentCapabilities.sessionCapabilities.list", &init));
    assert!(!requirement_met("agentCapabilities.sessionCapabilities.close", &init));
    assert!(!requirement_met("agentCapabilities.loadSession", &init));
    assert!(requirement_met("!agentCapabilities.loadSession", &init));
    assert!(!requirement_met("!agentCapabilities.sessionCapabilities.list", &init));
}

#[test]
fn a_requirement_that_is_not_a_dotted_path_is_a_header_error() {
    for bad in ["", "agentCapabilities..loadSession", "!", "agentCapabilities."] {
        let header = json!({ "scenario": "bad requires", "requires": [bad] });
        let err = heron::conformance::Scenario::parse("bad", &format!("{header}\n")).expect_err(bad);
        assert_eq!(err.line, 1, "{err}");
        assert!(err.reason.contains("not a dotted path"), "{bad}: {err}");
    }
}

#[test]
fn a_header_requiring_what_no_initialize_answered_fails() {
    let text = format!(
        "{}\n{}\n{}\n",
        r#"{"scenario": "no initialize", "timeout_ms": 50, "requires": ["agentCapabilities.loadSession"]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": "{...}"}}"#,
    );
    let failure =
        replay_text(&text, &[&[r#"{"jsonrpc":"2.0","id":1,"result":{}}"#]]).expect_err("unknowable");
    assert!(failure.summary.contains("no `initialize` request"), "{failure}");
}

#[test]
fn ignored_messages_are_passed_over_anywhere_and_others_still_fail() {
    let text = format!(
        "{}\n{}\n{}\n{}\n{}\n",
        r#"{"scenario": "an agent's own updates", "timeout_ms": 50, "ignore": [{"jsonrpc": "2.0", "method": "session/update", "params": "{...}"}]}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"text": "wanted"}}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "$ANY_STRING"}}}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}}}"#,
    );
    let update = |text: &str| {
        format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"update":{{"text":"{text}"}}}}}}"#)
    };
    let (other, wanted) = (update("other"), update("wanted"));
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#;
    // Before, between and after the expectations; an ignored kind is still matched when expected.
    let passes = replay_text(&text, &[&[&other, &wanted, &other, answer], &[&other]]);
    assert_eq!(passes.expect("the updates are passed over"), Replayed::Passed);
    let notice = r#"{"jsonrpc":"2.0","method":"_x/notice","params":{}}"#;
    let failure = replay_text(&text, &[&[notice, &wanted, answer], &[]]).expect_err("not ignored");
    assert!(failure.summary.contains("does not match"), "{failure}");
    let failure = replay_text(&text, &[&[&wanted, answer], &[notice]]).expect_err("not ignored");
    assert!(failure.summary.contains("does not expect"), "{failure}");
}

/// A transport that answers each line the client sends with canned lines, and keeps what
/// the client sent.
struct Recording {
    answers: std::collections::VecDeque<Vec<String>>,
    out: std::collections::VecDeque<String>,
    sent: Vec<serde_json::Value>,
}

impl Recording {
    fn new(answers: &[&[&str]]) -> Recording {
        Recording {
            answers: answers.iter().map(|a| a.iter().map(|s| (*s).to_owned()).collect()).collect(),
            out: Default::default(),
            sent: Vec::new(),
        }
    }
}

impl Transport for Recording {
    fn send(&mut self, line: &str) -> Result<(), String> {
        self.sent.push(serde_json::from_str(line).map_err(|e| e.to_string())?);
        self.out.extend(self.answers.pop_front().unwrap_or_default());
        Ok(())
    }

    fn recv(&mut self, _wait: std::time::Duration) -> Received {
        self.out.pop_front().map_or(Received::Timeout, Received::Line)
    }

    fn close_input(&mut self) {}
}

/// An acp-profile prompt turn: initialize (advertising no files or terminals), a session,
/// a prompt answered with any stop reason, the agent's updates ignored.
fn acp_turn(profile: &str) -> String {
    let header = json!({ "scenario": "a turn", "profile": profile, "timeout_ms": 50,
        "ignore": [{ "jsonrpc": "2.0", "method": "session/update", "params": "{...}" }] });
    [
        header.to_string(),
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}}}"#.into(),
        r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "...": "..."}}}"#.into(),
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "$WS", "mcpServers": []}}}"#.into(),
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid", "...": "..."}}}"#.into(),
        r#"{"send": {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "$sid", "prompt": []}}}"#.into(),
        r#"{"expect": {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "$ANY_STRING", "...": "..."}}}"#.into(),
    ]
    .join("\n")
        + "\n"
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#;
const OPENED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#;
const ENDED: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#;
const ASKS: &str = r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}}"#;
const READS: &str =
    r#"{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/x"}}"#;

#[test]
fn in_the_acp_profile_the_runner_answers_the_agents_requests_as_a_client_that_rejects() {
    let text = acp_turn("acp");
    let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}"#;
    // The prompt brings a permission question; its answer a read of a file the client never
    // offered; that answer the end of the turn.
    let answers: &[&[&str]] = &[&[INITIALIZED], &[OPENED], &[update, ASKS], &[READS], &[update, ENDED]];
    let mut transport = Recording::new(answers);
    let scenario = heron::conformance::Scenario::parse("memory", &text).expect("parses");
    let replayed = heron::conformance::replay(&scenario, &mut transport, &Default::default(), false);
    assert_eq!(replayed.expect("the agent's requests are no deviation"), Replayed::Passed);
    let answered: Vec<&serde_json::Value> =
        transport.sent.iter().filter(|m| m.get("method").is_none()).collect();
    assert_eq!(
        answered,
        [
            &json!({ "jsonrpc": "2.0", "id": "p1", "result": { "outcome": { "outcome": "selected", "optionId": "no" } } }),
            &json!({ "jsonrpc": "2.0", "id": "r1", "error": { "code": -32601,
                "message": "Method not found: the conformance client does not offer fs/read_text_file" } }),
        ]
    );
}

#[test]
fn in_the_acp_profile_an_agents_extension_notifications_are_passed_over() {
    // ACP lets an agent send `_`-prefixed notifications anywhere; a client ignores those it
    // does not know (claude-agent-acp sends `_auth/status_update` before its session).
    let status =
        r#"{"jsonrpc":"2.0","method":"_auth/status_update","params":{"authStatus":{"kind":"api_key"}}}"#;
    let answers: &[&[&str]] = &[&[INITIALIZED], &[status, OPENED], &[status, ENDED]];
    assert_eq!(replay_text(&acp_turn("acp"), answers).expect("no deviation"), Replayed::Passed);
    // A request is not passed over that way, nor is an unknown method without the `_`.
    let unknown = r#"{"jsonrpc":"2.0","method":"auth/status_update","params":{}}"#;
    assert!(replay_text(&acp_turn("acp"), &[&[INITIALIZED], &[unknown, OPENED], &[ENDED]]).is_err());
    // Heron's own transcripts say every message.
    assert!(replay_text(&acp_turn("heron"), answers).is_err());
}

#[test]
fn outside_the_acp_profile_an_unexpected_request_of_the_agent_still_fails() {
    let answers: &[&[&str]] = &[&[INITIALIZED], &[OPENED], &[ASKS, ENDED]];
    let failure = replay_text(&acp_turn("heron"), answers).expect_err("a heron transcript says every answer");
    assert!(failure.summary.contains("does not match"), "{failure}");
}

#[test]
fn an_agent_that_needs_authentication_is_skipped_saying_so_not_failed() {
    let auth = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authentication required"}}"#;
    let answers: &[&[&str]] = &[&[INITIALIZED], &[auth]];
    assert_eq!(
        replay_text(&acp_turn("acp"), answers).expect("skipped"),
        Replayed::Skipped("the agent requires authentication".into())
    );
    // Heron's own transcripts pin their errors: there it is a failure like any other.
    assert!(replay_text(&acp_turn("heron"), answers).is_err());
    // Another error to session/new is a deviation, not a reason to skip.
    let broken = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}"#;
    assert!(replay_text(&acp_turn("acp"), &[&[INITIALIZED], &[broken]]).is_err());
}

#[test]
fn an_agent_that_asks_for_authentication_before_any_session_exists_is_skipped_too() {
    // The built-in unknown-session check sends session/prompt before any session/new.
    let (_, text) = heron::conformance::bundled::ACP
        .iter()
        .find(|(name, _)| *name == "acp_unknown_session")
        .expect("bundled");
    let auth = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authenticate first"}}"#;
    assert_eq!(
        replay_text(text, &[&[INITIALIZED], &[auth]]).expect("skipped"),
        Replayed::Skipped("the agent requires authentication".into())
    );
    // Any other error there is still the deviation it was.
    let wrong = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}"#;
    assert!(replay_text(text, &[&[INITIALIZED], &[wrong]]).is_err());
}

pub(crate) fn heron_conformance(args: &[&str], cwd: &Path) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_heron"))
        .arg("conformance")
        .args(args)
        .current_dir(cwd)
        .env_remove("UPDATE_TRANSCRIPTS")
        .output()
        .expect("heron runs");
    let shown =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), shown)
}

#[test]
fn a_recommendation_not_followed_fails_the_run_only_when_strict() {
    let cwd = tempfile::tempdir().expect("tempdir");
    // A check Heron does not meet (its unknown-method error is -32601, not -32000), marked
    // as one the spec only recommends.
    let scenario = [
        r#"{"scenario": "an advised check", "profile": "acp", "spec": "a recommendation", "recommendation": true}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "...": "..."}}}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/frobnicate", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "$ANY_STRING", "...": "..."}}}"#,
    ];
    std::fs::write(cwd.path().join("advised.ndjson"), scenario.join("\n") + "\n").expect("write");
    let (ok, table) = heron_conformance(&["advised.ndjson"], cwd.path());
    assert!(ok, "advice does not fail the run: {table}");
    assert!(table.contains("advice advised") && table.contains("1 recommendation not followed"), "{table}");
    let (ok, table) = heron_conformance(&["--strict", "advised.ndjson"], cwd.path());
    assert!(!ok, "--strict counts it: {table}");
    assert!(table.contains("FAIL   advised") && table.contains("1 failed"), "{table}");
}

#[test]
fn the_built_in_acp_profile_passes_on_heron_and_reports_as_junit() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let (ok, xml) = heron_conformance(&["--profile", "acp", "--format", "junit"], cwd.path());
    assert!(ok, "{xml}");
    let suite = format!(
        r#"<testsuite name="acp" tests="{}" failures="0" errors="0" skipped="1""#,
        bundled::ACP.len()
    );
    assert!(xml.contains(&suite), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), bundled::ACP.len(), "{xml}");
    // Heron serves session/load, so only the scenario for agents that do not is skipped.
    let skipped = xml.split("<testcase ").find(|case| case.contains("<skipped ")).unwrap_or_default();
    assert!(skipped.starts_with(r#"name="acp_session_load_unadvertised""#), "{xml}");
    assert!(skipped.contains(r#"message="the agent advertises agentCapabilities.loadSession""#), "{xml}");
}

/// `heron acp ARGS` as an `--agent` command line: Heron tested like any other agent, without
/// the scenarios' own arguments.
fn heron_as_agent(args: &str) -> String {
    format!("'{}' acp {args}", env!("CARGO_BIN_EXE_heron").replace('\'', r"'\''"))
}

#[test]
fn heron_as_any_agent_passes_the_acp_profile_though_its_model_asks_permission_to_write() {
    // The demo model writes a note in every first turn, so Heron asks the client's
    // permission in the middle of acp_prompt_turn; the runner answers as the client.
    let cwd = tempfile::tempdir().expect("tempdir");
    let agent = heron_as_agent("-m demo/demo");
    let (ok, table) = heron_conformance(&["--profile", "acp", "--agent", &agent], cwd.path());
    println!("{table}");
    assert!(ok, "{table}");
    let rows = table_rows(&table);
    assert_eq!(rows.len(), bundled::ACP.len(), "{table}");
    for (name, result, reason) in &rows {
        match name.as_str() {
            "acp_session_load_unadvertised" => {
                assert_eq!(
                    (result.as_str(), reason.as_str()),
                    ("skip", "the agent advertises agentCapabilities.loadSession")
                );
            }
            _ => assert_eq!(result, "pass", "{name}: {reason}"),
        }
    }
}

#[test]
fn an_agent_that_cannot_open_sessions_without_credentials_is_reported_as_needing_them() {
    // No model and no key in the run's fresh HERON_HOME: Heron answers session/new -32000.
    let cwd = tempfile::tempdir().expect("tempdir");
    let (ok, table) = heron_conformance(&["--profile", "acp", "--agent", &heron_as_agent("")], cwd.path());
    println!("{table}");
    assert!(ok, "skips are no failures: {table}");
    let rows = table_rows(&table);
    let auth: Vec<&str> = rows
        .iter()
        .filter(|(_, result, reason)| result == "skip" && reason == "the agent requires authentication")
        .map(|(name, _, _)| name.as_str())
        .collect();
    for needs_a_session in
        ["acp_prompt_turn", "acp_permission_request", "acp_session_cancel", "acp_session_close"]
    {
        assert!(auth.contains(&needs_a_session), "{needs_a_session}: {table}");
    }
    // What needs no session is still tested.
    for sessionless in
        ["acp_initialize", "acp_initialize_newer_version", "acp_invalid_params", "acp_unknown_method"]
    {
        assert!(
            rows.iter().any(|(name, result, _)| name == sessionless && result == "pass"),
            "{sessionless}: {table}"
        );
    }
}

#[test]
fn the_built_in_acp_v2_profile_passes_on_heron() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let (ok, xml) = heron_conformance(&["--profile", "acp-v2", "--format", "junit"], cwd.path());
    assert!(ok, "{xml}");
    let suite = format!(
        r#"<testsuite name="acp-v2" tests="{}" failures="0" errors="0" skipped="0""#,
        bundled::ACP_V2.len()
    );
    assert!(xml.contains(&suite), "{xml}");
}

/// The echo agent on the ACP TypeScript SDK (`tests/agents/ts-echo`) with its pinned
/// dependencies installed: `HERON_TS_ECHO` names a directory `.ci/run` installed, else the
/// test installs it under the target directory with `npm ci`. `None`, said loudly, only when
/// node or npm is missing; an install that fails is a test failure, and so is a missing
/// `HERON_TS_ECHO` where `HERON_REQUIRE_CLIENTS` requires it.
fn ts_echo() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("HERON_TS_ECHO") {
            return Some(PathBuf::from(dir));
        }
        if crate::support::clients::required("HERON_TS_ECHO") {
            crate::support::clients::skip("HERON_TS_ECHO", "the TypeScript echo agent");
        }
        for tool in ["node", "npm"] {
            let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
            if !found {
                crate::support::clients::skipped(&format!(
                    "`{tool}` is missing, so the TypeScript echo agent cannot run"
                ));
                return None;
            }
        }
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/ts-echo");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ts-echo");
        std::fs::create_dir_all(&dir).expect("a directory for the echo agent");
        for file in ["package.json", "package-lock.json", "agent.mjs"] {
            std::fs::copy(source.join(file), dir.join(file)).expect("copy the echo agent");
        }
        // `npm ci`: exactly the lockfile's versions, or an error.
        let output = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .output()
            .expect("npm runs");
        assert!(output.status.success(), "npm ci failed: {}", String::from_utf8_lossy(&output.stderr));
        Some(dir)
    })
    .clone()
}

/// What the acp profile finds in the TypeScript echo agent (SDK 2.4.0): scenario, result and
/// a piece of the reason. Its two failures are the SDK's own behaviour, not the echo code's:
/// it answers an invalid request with a null id even where the id could be read, and a
/// handler's thrown error (the SDK example's way to refuse an unknown session) is -32603.
const TS_ECHO_FINDINGS: &[(&str, &str, &str)] = &[
    ("acp_cancel_request", "pass", ""),
    ("acp_cancel_request_running", "pass", ""),
    ("acp_initialize", "pass", ""),
    ("acp_initialize_newer_version", "pass", ""),
    ("acp_invalid_params", "pass", ""),
    (
        "acp_invalid_request",
        "FAIL",
        "line 5: the agent's message does not match (at $.id: expected 1, got null)",
    ),
    ("acp_parse_error", "pass", ""),
    ("acp_permission_request", "pass", ""),
    ("acp_prompt_turn", "pass", ""),
    ("acp_session_cancel", "pass", ""),
    ("acp_session_close", "skip", "the agent does not advertise agentCapabilities.sessionCapabilities.close"),
    ("acp_session_list", "skip", "the agent does not advertise agentCapabilities.sessionCapabilities.list"),
    ("acp_session_load", "skip", "the agent does not advertise agentCapabilities.loadSession"),
    ("acp_session_load_unadvertised", "pass", ""),
    (
        "acp_session_resume",
        "skip",
        "the agent does not advertise agentCapabilities.sessionCapabilities.resume",
    ),
    ("acp_unknown_method", "pass", ""),
    ("acp_unknown_session", "FAIL", "(at $.error.code: expected -32002, got -32603)"),
    ("acp_unknown_session_load", "skip", "the agent does not advertise agentCapabilities.loadSession"),
];

/// The rows of a text table: scenario, result and reason (what follows the time).
pub(crate) fn table_rows(table: &str) -> Vec<(String, String, String)> {
    table
        .lines()
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().take(3).collect();
            let [result, name, time] = words[..] else { return None };
            let reason = line.split_once(&format!(" {time}")).map_or("", |(_, rest)| rest.trim());
            Some((name.to_owned(), result.to_owned(), reason.to_owned()))
        })
        .collect()
}

#[test]
fn the_acp_profile_reports_the_typescript_echo_agents_deviations() {
    let Some(dir) = ts_echo() else { return };
    // `./agent.mjs` is relative to the caller's directory, not the scenario's workspace.
    let (ok, table) = heron_conformance(&["--profile", "acp", "--agent", "./agent.mjs"], &dir);
    println!("{table}");
    assert!(!ok, "two scenarios fail, so the run fails:\n{table}");
    let rows = table_rows(&table);
    let names: Vec<&str> = rows.iter().map(|(name, _, _)| name.as_str()).collect();
    let expected: Vec<&str> = TS_ECHO_FINDINGS.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names, expected, "{table}");
    for ((name, result, reason), (_, want, why)) in rows.iter().zip(TS_ECHO_FINDINGS) {
        assert_eq!(result, want, "{name}:\n{table}");
        assert!(reason.contains(why), "{name}'s reason is `{reason}`, not `{why}`");
    }
    assert!(table.contains("11 passed, 2 failed, 5 skipped"), "{table}");
    assert!(
        table.contains("=== acp_unknown_session ===") && table.contains("Session no-such-session not found")
    );
}

#[test]
fn an_agent_named_by_a_relative_path_is_found_from_the_callers_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("bin")).expect("mkdir");
    let agent = dir.path().join("bin/agent.sh");
    let heron = env!("CARGO_BIN_EXE_heron").replace('\'', r"'\''");
    std::fs::write(&agent, format!("#!/bin/sh\nexec '{heron}' acp --validate \"$@\"\n")).expect("write");
    let mut permissions = std::fs::metadata(&agent).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&agent, permissions).expect("chmod");
    // A script handed to an interpreter by a relative path: the argument is resolved too.
    let heron_js = serde_json::to_string(env!("CARGO_BIN_EXE_heron")).expect("a JSON string");
    let script = format!(
        "import {{ spawn }} from \"node:child_process\";\n\
         const agent = spawn({heron_js}, [\"acp\", \"--validate\"], {{ stdio: \"inherit\" }});\n\
         agent.on(\"exit\", (code) => process.exit(code ?? 1));\n"
    );
    std::fs::write(dir.path().join("agent.mjs"), script).expect("write");
    let transcript = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/acp_initialize.ndjson");
    let transcript = transcript.to_string_lossy();
    let mut lines = vec!["./bin/agent.sh", "sh ./bin/agent.sh"];
    if Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success()) {
        lines.push("node ./agent.mjs");
    } else {
        crate::support::clients::skipped("`node` is missing, so `node ./agent.mjs` is not tried");
    }
    for line in lines {
        let (ok, table) = heron_conformance(&["--agent", line, &transcript], dir.path());
        assert!(ok, "{line}: {table}");
        assert!(table.contains("pass   acp_initialize"), "{line}: {table}");
    }
}
