//! The conformance suite: every transcript in `conformance/` replayed against the real
//! `heron acp --validate` binary (one test per file, named after it), plus the suite's own
//! guarantees: every file has a test, every method Heron implements has a scenario, a broken
//! expectation fails with a readable diff, and the runner drives a second, unrelated agent.

use std::collections::BTreeSet;
use std::future::{Future, ready};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use heron::conformance::format::ScriptedAs;
use heron::conformance::matcher::Paths;
use heron::conformance::runner::{AgentCommand, Received, Transport};
use heron::conformance::{Item, Replayed, Scenario, replay, run_file, transcript_files};
use heron_protocol::runtime::{ClientPeer, Kind, Side};
use heron_protocol::serve::AgentService;
use heron_protocol::{
    Agent, CancelNotification, Client, InitializeRequest, InitializeResponse, Method, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, RpcError,
};
use heron_rpc::Policy;
use heron_rpc::{Connection, ConnectionOptions, Peer};
use serde_json::json;

use crate::support::conformance::{Canned, SHORT, replay_text};

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

fn heron() -> AgentCommand {
    AgentCommand::Heron(PathBuf::from(env!("CARGO_BIN_EXE_heron")))
}

/// `UPDATE_TRANSCRIPTS=1` rewrites transcripts whose expectations no longer hold.
fn refresh() -> bool {
    std::env::var("UPDATE_TRANSCRIPTS").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Replays `conformance/<name>.ndjson` against Heron and panics with the failure report.
fn replay_transcript(name: &str) {
    let path = conformance_dir().join(format!("{name}.ndjson"));
    let outcome = run_file(&path, &heron(), refresh());
    if let Err(failure) = outcome.result {
        panic!("conformance/{name}.ndjson failed:\n{failure}");
    }
}

/// One `#[test]` per transcript file, and the list the coverage test checks against.
macro_rules! transcripts {
    ($($name:ident),* $(,)?) => {
        const LISTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                replay_transcript(stringify!($name));
            }
        )*
    };
}

transcripts!(
    acp_cancel_request,
    acp_cancel_request_running,
    acp_initialize,
    acp_initialize_newer_version,
    acp_invalid_params,
    acp_invalid_request,
    acp_parse_error,
    acp_permission_request,
    acp_prompt_turn,
    acp_session_cancel,
    acp_session_close,
    acp_session_list,
    acp_session_load,
    acp_session_load_unadvertised,
    acp_session_resume,
    acp_unknown_method,
    acp_unknown_session,
    acp_unknown_session_load,
    acp_v2_cancel_request,
    acp_v2_initialize,
    acp_v2_prompt_turn,
    acp_v2_session_cancel,
    acp_v2_unknown_session,
    acp_v2_unsupported_version,
    acp_v2_v1_methods_gone,
    authenticate,
    cancel_prompt,
    cancel_request,
    checkpoint_rewind,
    checkpoint_undo,
    compact,
    compaction_automatic,
    compaction_too_big,
    compaction_update_failed,
    compaction_updates,
    cost_quote,
    custom_command,
    editor_fs,
    editor_question,
    editor_terminal,
    editor_terminal_timeout,
    error_above_ceiling,
    error_auth_required,
    error_invalid_params,
    error_invalid_request,
    error_parse,
    error_unknown_method,
    error_unknown_session,
    extensions_unknown_session,
    goal_mode,
    goal_pause_resume,
    inbox_cancel,
    inbox_edit,
    inbox_full,
    inbox_item_not_queued,
    inbox_run,
    inbox_steer,
    initialize,
    mcp_http_status,
    mcp_servers,
    notice_deferred,
    notice_live,
    permission_rejected,
    plugin_action,
    profile_economy,
    prompt_turn,
    reload_extensions,
    reload_extensions_failed,
    reload_extensions_queued,
    safe_mode,
    session_close_delete,
    session_fork,
    session_list,
    session_load,
    session_resume,
    session_settings,
    session_status,
    session_steer,
    skill_claude,
    status_updates_versioned,
    subagent_task,
    turn_outcome_completed,
    turn_outcome_paused,
    v2_config_option,
    v2_session,
);

fn all_scenarios() -> Vec<Scenario> {
    let files = transcript_files(&[conformance_dir()]).expect("conformance/ lists");
    files.iter().map(|f| Scenario::load(f).unwrap_or_else(|e| panic!("{e}"))).collect()
}

#[test]
fn every_transcript_file_has_a_test() {
    let files: BTreeSet<String> = transcript_files(&[conformance_dir()])
        .expect("conformance/ lists")
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let listed: BTreeSet<String> = LISTED.iter().map(|s| (*s).to_owned()).collect();
    let untested: Vec<&String> = files.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&files).collect();
    assert!(untested.is_empty(), "add these to transcripts!() in tests/conformance.rs: {untested:?}");
    assert!(missing.is_empty(), "tests without a transcript file: {missing:?}");
}

#[test]
fn every_error_path_named_in_the_issues_has_a_scenario() {
    for name in [
        "error_parse",
        "error_invalid_request",
        "error_unknown_method",
        "error_invalid_params",
        "error_auth_required",
        "error_unknown_session",
        "cancel_prompt",
        "cancel_request",
        "error_above_ceiling",
    ] {
        assert!(LISTED.contains(&name), "no scenario `{name}`");
    }
}

/// Strict for every method the generated table marks implemented: the moment a flag is
/// set, its method needs a transcript that sends (agent side) or expects (client side) it.
#[test]
fn every_implemented_method_has_a_scenario() {
    let mut used: BTreeSet<String> = BTreeSet::new();
    for scenario in all_scenarios() {
        used.extend(scenario.methods());
    }
    let mut missing = Vec::new();
    println!("{:<36} {:<12} {:<8} scenario", "method", "side", "heron");
    for info in heron_protocol::METHODS.iter() {
        let covered = used.contains(info.wire) || info.aliases.iter().any(|a| used.contains(*a));
        let side = match info.side {
            Side::Agent => "agent",
            Side::Client => "client",
            Side::Protocol => "either",
        };
        let kind = if info.kind == Kind::Request { "" } else { " (note)" };
        println!(
            "{:<36} {:<12} {:<8} {}",
            format!("{}{kind}", info.wire),
            side,
            if info.implemented { "yes" } else { "not yet" },
            if covered { "yes" } else { "-" }
        );
        if info.implemented && !covered {
            missing.push(info.wire);
        }
    }
    assert!(missing.is_empty(), "implemented methods without a conformance scenario: {missing:?}");
}

#[test]
fn every_method_served_over_v2_has_a_v2_scenario() {
    let mut used: BTreeSet<String> = BTreeSet::new();
    for scenario in all_scenarios() {
        if scenario.header.args.windows(2).any(|pair| pair == ["--protocol", "v2"]) {
            used.extend(scenario.methods());
        }
    }
    let missing: Vec<&str> = heron_protocol::v2::METHODS
        .iter()
        .filter(|info| info.implemented && !used.contains(info.wire))
        .map(|info| info.wire)
        .collect();
    assert!(missing.is_empty(), "methods served over v2 without a v2 scenario: {missing:?}");
}

#[test]
fn a_broken_expectation_fails_with_expected_and_actual_side_by_side() {
    let text = format!(
        "{SHORT}\n{}\n{}\n",
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "agentInfo": "{...}"}}}"#,
    );
    let answer = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"x"}}}"#;
    let failure = replay_text(&text, &[&[answer]]).expect_err("protocolVersion differs");
    let report = failure.to_string();
    println!("{report}");
    assert_eq!(failure.line, 3);
    assert!(report.contains("at $.result.protocolVersion: expected 2, got 1"), "{report}");
    assert!(report.lines().any(|l| l.starts_with("expected") && l.contains("actual")), "{report}");
    let marked: Vec<&str> = report.lines().filter(|l| l.contains(" | ")).collect();
    assert_eq!(marked.len(), 1, "only the differing line is marked: {report}");
    assert!(marked[0].contains("\"protocolVersion\": 2") && marked[0].contains("\"protocolVersion\": 1"));
}

#[test]
fn a_message_the_transcript_does_not_expect_fails() {
    let text = format!(
        "{SHORT}\n{}\n{}\n",
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": "{...}"}}"#,
    );
    let extra = r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#;
    let failure = replay_text(&text, &[&[r#"{"jsonrpc":"2.0","id":0,"result":{}}"#, extra]])
        .expect_err("the extra notification fails");
    assert!(failure.summary.contains("does not expect"), "{failure}");
}

#[test]
fn an_unordered_block_accepts_any_order_and_ids_must_stay_consistent() {
    let text = format!(
        "{SHORT}\n{}\n{}\n{}\n{}\n{}\n{}\n",
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}}"#,
        r#"{"unordered": "begin"}"#,
        r#"{"expect": {"jsonrpc": "2.0", "method": "n", "params": {"s": "$sid", "text": "$ANY_STRING"}}, "repeat": true}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid"}}}"#,
        r#"{"unordered": "end"}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 2, "method": "x", "params": {"sessionId": "$sid"}}}"#,
    );
    let note = |s: &str| format!(r#"{{"jsonrpc":"2.0","method":"n","params":{{"s":"{s}","text":"a"}}}}"#);
    let good =
        [note("abc"), r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"abc"}}"#.to_owned(), note("abc")];
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    replay_text(&text, &[&good, &[]]).expect("any order passes");
    let bad = [note("abc"), r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"other"}}"#.to_owned()];
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let failure = replay_text(&text, &[&bad, &[]]).expect_err("a second session id fails");
    assert!(failure.to_string().contains("matches none"), "{failure}");
}

#[test]
fn refresh_rewrites_a_stale_expectation_into_a_passing_one() {
    let text = format!(
        "{SHORT}\n# a comment stays\n{}\n{}\n",
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": "$init", "result": {"protocolVersion": 2, "agentInfo": "{...}"}}}"#,
    );
    let answer = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"x"}}}"#;
    let scenario = Scenario::parse("memory", &text).expect("parses");
    let Replayed::Rewritten(rewritten) =
        replay(&scenario, &mut Canned::new(&[&[answer]]), &Paths::default(), true)
            .expect("refresh does not fail")
    else {
        panic!("the transcript changed");
    };
    assert!(rewritten.contains("# a comment stays"));
    assert!(rewritten.contains(r#""id": "$init""#), "placeholders are kept: {rewritten}");
    assert!(rewritten.contains(r#""agentInfo": "{...}""#), "wildcards are kept: {rewritten}");
    replay_text(&rewritten, &[&[answer]]).expect("the rewritten transcript passes");
}

#[test]
fn a_null_message_is_a_step_and_survives_refresh() {
    // Found by the transcript fuzz target: an agent that answered `null` was refreshed into
    // `{"expect": null}`, which read back as a line with no step on it.
    let send = r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}"#;
    let text =
        format!("{SHORT}\n{send}\n{}\n", r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": "{...}"}}"#);
    let scenario = Scenario::parse("memory", &text).expect("parses");
    let Replayed::Rewritten(rewritten) =
        replay(&scenario, &mut Canned::new(&[&["null"]]), &Paths::default(), true)
            .expect("refresh does not fail")
    else {
        panic!("the transcript changed");
    };
    assert!(rewritten.contains(r#"{"expect": null}"#), "{rewritten}");
    replay_text(&rewritten, &[&["null"]]).expect("the rewritten transcript passes");
    let sends_null = Scenario::parse("memory", &format!("{SHORT}\n{{\"send\": null}}\n")).expect("parses");
    assert_eq!(sends_null.items, [Item::Send { message: serde_json::Value::Null, line: 2 }]);
}

#[test]
fn a_raw_send_with_a_line_feed_is_refused() {
    // Found by the transcript fuzz target: the text went out as two lines, the second one
    // without waiting for the agent's answer to the first.
    let text = format!("{SHORT}\n{}\n", r#"{"send_raw": "{\"jsonrpc\": \"2.0\"\n\"id\": 1}"}"#);
    let err = Scenario::parse("memory", &text).expect_err("two lines in one send_raw");
    assert_eq!(err.line, 2, "{err}");
    assert!(err.reason.contains("one line"), "{err}");
}

#[test]
fn provider_tables_quote_names_the_toml_way() {
    // Found by the transcript fuzz target: names were quoted as JSON strings, which leave
    // DEL raw, and one raw DEL makes the whole config.toml unreadable.
    let provider = ScriptedAs { models: vec!["m\u{7f}".to_owned()], ..ScriptedAs::default() };
    let text = provider.toml("p\u{7f}");
    let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(table["providers"]["p\u{7f}"]["models"][0].as_str(), Some("m\u{7f}"), "{text}");
    // A price key may not be a multi-line string, which TOML's string quoting makes of a
    // name holding a line feed; found by the fuzz target too.
    let prices = [("m\n".to_owned(), (0.5, 1.5, "USD".to_owned()))].into();
    let provider = ScriptedAs {
        models: vec!["m\n".to_owned()],
        prices,
        context_window: Some(u64::MAX),
        ..ScriptedAs::default()
    };
    let text = provider.toml("p");
    let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(table["providers"]["p"]["prices"]["m\n"]["output"].as_float(), Some(1.5), "{text}");
    // The runner writes one table per provider into the same file, after the header's config.
    let both = format!("default_model = \"p/m\"\n{}{text}", provider.toml("q"));
    let table: toml::Table = toml::from_str(&both).unwrap_or_else(|e| panic!("{both}\n{e}"));
    assert!(table["providers"].get("q").is_some() && table["providers"].get("p").is_some(), "{both}");
}

/// A second ACP agent, unrelated to Heron's: it echoes each prompt back as one message
/// chunk. Built on Heron's rpc layer and the generated `Agent` trait.
#[derive(Clone)]
struct EchoAgent {
    client: ClientPeer<Peer>,
}

fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, RpcError> {
    serde_json::from_value(value).map_err(|e| RpcError::internal(&e))
}

#[allow(refining_impl_trait)] // concrete results, narrower than the trait on purpose
impl Agent for EchoAgent {
    fn initialize(
        &self,
        _params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        ready(decode(json!({ "protocolVersion": 1, "agentInfo": { "name": "echo", "version": "0.0.1" } })))
    }

    fn session_new(
        &self,
        _params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        ready(decode(json!({ "sessionId": format!("echo-{}", std::process::id()) })))
    }

    fn session_cancel(
        &self,
        _params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        ready(Ok(()))
    }

    fn session_prompt(
        &self,
        params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        let client = self.client.clone();
        async move {
            let text = serde_json::to_value(&params.prompt)
                .ok()
                .and_then(|p| p.pointer("/0/text").and_then(|t| t.as_str().map(str::to_owned)))
                .unwrap_or_default();
            let note = json!({
                "sessionId": params.session_id.0,
                "update": { "sessionUpdate": "agent_message_chunk", "content": { "type": "text", "text": text } },
            });
            client.session_update(decode(note)?).await?;
            decode(json!({ "stopReason": "end_turn" }))
        }
    }
}

fn echo_policy(_method: Method) -> Policy {
    Policy::Concurrent
}

/// The echo agent served in this process on in-memory pipes, behind the runner's
/// line-oriented [`Transport`].
struct InProcess {
    input: Option<Sender<String>>,
    output: Receiver<String>,
}

impl InProcess {
    fn start() -> InProcess {
        let (input, lines_in) = channel::<String>();
        let (lines_out, output) = channel::<String>();
        std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async move {
                use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
                let (client_side, agent_side) = tokio::io::duplex(1 << 16);
                let (agent_read, agent_write) = tokio::io::split(agent_side);
                let (client_read, mut client_write) = tokio::io::split(client_side);
                let connection = Connection::new(agent_read, agent_write, ConnectionOptions::default());
                let agent = EchoAgent { client: ClientPeer(connection.peer()) };
                let served = tokio::spawn(connection.serve(Arc::new(AgentService::new(agent, echo_policy))));
                let reader = tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(client_read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if lines_out.send(line).is_err() {
                            break;
                        }
                    }
                });
                let (bridge, mut from_test) = tokio::sync::mpsc::unbounded_channel::<String>();
                std::thread::spawn(move || {
                    while let Ok(line) = lines_in.recv() {
                        if bridge.send(line).is_err() {
                            break;
                        }
                    }
                });
                while let Some(line) = from_test.recv().await {
                    let _ = client_write.write_all(format!("{line}\n").as_bytes()).await;
                }
                drop(client_write);
                let _ = served.await;
                let _ = reader.await;
            });
        });
        InProcess { input: Some(input), output }
    }
}

impl Transport for InProcess {
    fn send(&mut self, line: &str) -> Result<(), String> {
        let input = self.input.as_ref().ok_or("closed")?;
        input.send(line.to_owned()).map_err(|e| e.to_string())
    }

    fn recv(&mut self, wait: Duration) -> Received {
        match self.output.recv_timeout(wait) {
            Ok(line) => Received::Line(line),
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
            Err(RecvTimeoutError::Disconnected) => Received::Closed,
        }
    }

    fn close_input(&mut self) {
        self.input = None;
    }
}

#[test]
fn the_runner_replays_against_a_second_agent_implementation() {
    let echo = r#"{"scenario": "The echo agent answers a prompt with the prompt's text."}
{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}
{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "echo", "version": "$ANY_STRING"}}}}
{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "$WS", "mcpServers": []}}}
{"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$sid"}}}
{"send": {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "$sid", "prompt": [{"type": "text", "text": "ping"}]}}}
{"expect": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "$sid", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ping"}}}}}
{"expect": {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}}
"#;
    let paths = Paths { ws: "/tmp/echo-ws".into(), home: "/tmp/echo-home".into() };
    let scenario = Scenario::parse("echo", echo).expect("parses");
    replay(&scenario, &mut InProcess::start(), &paths, false).unwrap_or_else(|f| panic!("{f}"));
    // A protocol-level transcript written for Heron holds for the echo agent too.
    let protocol = Scenario::load(&conformance_dir().join("error_unknown_method.ndjson")).expect("loads");
    replay(&protocol, &mut InProcess::start(), &paths, false).unwrap_or_else(|f| panic!("{f}"));
    // And Heron's prompt transcript does not: the runner tells the agents apart.
    let heron_only = Scenario::load(&conformance_dir().join("session_list.ndjson")).expect("loads");
    assert!(replay(&heron_only, &mut InProcess::start(), &paths, false).is_err());
}

#[test]
fn heron_conformance_prints_a_table_and_fails_on_a_failure() {
    let exe = env!("CARGO_BIN_EXE_heron");
    let ok = std::process::Command::new(exe)
        .args(["conformance", "--agent", &format!("'{exe}' acp --validate")])
        .arg(conformance_dir().join("error_unknown_method.ndjson"))
        .env_remove("UPDATE_TRANSCRIPTS")
        .output()
        .expect("heron runs");
    let table = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{table}");
    assert!(table.contains("pass") && table.contains("error_unknown_method"), "{table}");

    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.ndjson");
    std::fs::write(
        &broken,
        concat!(
            r#"{"scenario": "a wrong protocol version", "timeout_ms": 5000}"#,
            "\n",
            r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}}"#,
            "\n",
            r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 7, "...": "..."}}}"#,
            "\n"
        ),
    )
    .expect("write");
    let failed = std::process::Command::new(exe)
        .args(["conformance"])
        .arg(&broken)
        .env_remove("UPDATE_TRANSCRIPTS")
        .output()
        .expect("heron runs");
    let report = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success(), "{report}");
    assert!(report.contains("FAIL") && report.contains("expected 7, got 1"), "{report}");
}
