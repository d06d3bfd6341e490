//! `heron acp --record`: a session against a real (local) OpenAI-compatible endpoint, with
//! an editor that reads files for the agent and answers permission questions, is recorded
//! by the real binary and then replays, on the scripted model, as a passing conformance
//! transcript; keys and machine paths never reach the file; a cancelled turn replays too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use heron::conformance::runner::AgentCommand;
use heron::conformance::{Scenario, run_file};
use serde_json::{Value, json};

use crate::support::endpoint::{Reply, delta, endpoint, finish};
use crate::support::{Dirs, Launch, PROCESS_WAIT, Process};

const KEY: &str = "sk-recorded-0123456789abcdef";

/// Where the recording goes, beside the home and the workspace.
const RECORDING: &str = "recorded.ndjson";

/// A HERON_HOME whose default model is served by `url`, with its key in `.env`, and a
/// workspace holding a README.
fn dirs(url: &str) -> Arc<Dirs> {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws_path().join("README.md"), "# Project\n\nOn disk.\n").expect("readme");
    let config = format!(
        "default_model = \"fake/model-a\"\n[providers.fake]\nkind = \"openai\"\nbase_url = \"{url}\"\n\
         api_key_env = \"FAKE_KEY\"\nmodels = [\"model-a\", \"model-b\"]\nefforts = [\"low\", \"high\"]\n\
         context_window = 64000\nmax_retries = 0\n[providers.fake.prices.model-a]\ninput = 1.5\noutput = 6.0\n"
    );
    dirs.write_home("config.toml", &config);
    dirs.write_home(".env", &format!("FAKE_KEY={KEY}\n"));
    dirs
}

/// `heron acp --record` in the workspace, its log shown with the test's.
fn start(dirs: &Dirs) -> Process {
    let file = dirs.path(RECORDING);
    let file = file.to_str().expect("a UTF-8 temporary path");
    Launch::acp(&dirs.home(), &["--record", file]).current_dir(dirs.ws_path()).inherit_stderr().start()
}

/// Reads until the answer to request `id`, acting as the editor on the way: it reads files
/// from its "unsaved buffer", allows what it is asked, and calls `on` with each message.
fn until_answer(agent: &mut Process, id: u64, mut on: impl FnMut(&Value, &mut Process)) -> Value {
    agent.until_answer(&json!(id), |agent, message| {
        on(message, agent);
        let reply = match message["method"].as_str() {
            Some("fs/read_text_file") => json!({ "content": "# Project\n\nUnsaved buffer.\n" }),
            Some("session/request_permission") => {
                json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } })
            }
            _ => return,
        };
        agent.reply(message, reply);
    })
}

/// Closes stdin and waits for the agent to exit (it writes the recording last).
fn finish_recording(agent: Process) {
    let exited = agent.finish(PROCESS_WAIT);
    assert!(exited.status.success(), "heron acp exited with {}", exited.status);
}

fn open_session(agent: &mut Process, ws: &Path) -> String {
    agent.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true}}}}));
    until_answer(agent, 0, |_, _| {});
    agent.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {
        "cwd": ws, "mcpServers": []}}));
    let answer = until_answer(agent, 1, |_, _| {});
    answer["result"]["sessionId"].as_str().expect("a session id").to_owned()
}

fn replay(file: &Path) {
    let outcome = run_file(file, &AgentCommand::Heron(PathBuf::from(env!("CARGO_BIN_EXE_heron"))), false);
    if let Err(failure) = outcome.result {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        panic!("the recording does not replay:\n{failure}\n--- recording ---\n{text}");
    }
}

#[test]
fn a_recorded_session_replays_on_the_scripted_model_without_keys_or_paths() {
    let url = endpoint(vec![
        // Thinks, talks in pieces that are not words, reads the README through the editor.
        Reply::Events(vec![
            delta(json!({"role": "assistant", "reasoning_content": "Read it"})),
            delta(json!({"content": "Let me re"})),
            delta(json!({"content": "ad it."})),
            delta(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":"}}]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"README.md\"}"}}]})),
            finish("tool_calls"),
        ]),
        // Writes a note: a permission question.
        Reply::Events(vec![
            delta(json!({"tool_calls": [{"index": 0, "id": "call_b", "type": "function",
                "function": {"name": "write_file", "arguments": "{\"path\":\"NOTES.md\",\"content\":\"noted\\n\"}"}}]})),
            finish("tool_calls"),
        ]),
        // Echoes the key (a model can): the recording must not keep it.
        Reply::Events(vec![
            delta(json!({"content": format!("Done; the key was {KEY}.")})),
            json!({"choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}}),
            finish("stop"),
        ]),
    ]);
    let dirs = dirs(&url);
    let mut agent = start(&dirs);
    let session = open_session(&mut agent, &dirs.ws_path());
    agent.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "Read the README and take a note"}]}}));
    let answer = until_answer(&mut agent, 2, |_, _| {});
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(std::fs::read_to_string(dirs.ws_path().join("NOTES.md")).expect("note written"), "noted\n");
    finish_recording(agent);

    let text = std::fs::read_to_string(dirs.path(RECORDING)).expect("the recording");
    assert!(!text.contains(KEY), "the key leaked into the recording:\n{text}");
    let ws = dirs.ws_path();
    assert!(!text.contains(&*ws.to_string_lossy()), "a machine path is in the recording:\n{text}");
    assert!(!text.contains(&*dirs.home().to_string_lossy()), "HERON_HOME is in the recording:\n{text}");
    let scenario = Scenario::parse("recorded", &text).expect("the recording parses");
    let header = &scenario.header;
    // The model turns, as they streamed: odd pieces stay pieces, arguments stay JSON.
    assert_eq!(header.script.len(), 3, "{:?}", header.script);
    assert_eq!(header.script[0]["steps"][1], json!({"text": ["Let me re", "ad it."]}));
    assert_eq!(
        header.script[0]["steps"][2],
        json!({"tool_call": {"name": "read_file", "arguments": {"path": "README.md"}, "id": "call_a"}})
    );
    // The provider and its models as the editor saw them, without endpoint or key name.
    let fake = &header.providers["fake"];
    assert_eq!(fake.models, ["model-a", "model-b"]);
    assert_eq!(fake.efforts, ["low", "high"]);
    assert_eq!(fake.prices["model-a"], (1.5, 6.0, "USD".to_owned()));
    assert!(!text.contains(&url), "the endpoint is in the recording");
    assert_eq!(header.config.as_deref(), Some("default_model = \"fake/model-a\""));
    // The workspace as the tools first found it: the disk README, no NOTES.md yet.
    assert_eq!(header.files.get("README.md").map(String::as_str), Some("# Project\n\nOn disk.\n"));
    assert!(!header.files.contains_key("NOTES.md"));
    // The editor's answers refer to the agent's requests by placeholder.
    assert!(text.contains(r#""id":"$req1""#), "{text}");

    replay(&dirs.path(RECORDING));
}

#[test]
fn a_cancelled_turn_replays_with_the_cancel_arriving_mid_turn() {
    let url = endpoint(vec![Reply::Stall(vec![delta(json!({"role": "assistant", "content": "Working"}))])]);
    let dirs = dirs(&url);
    let mut agent = start(&dirs);
    let session = open_session(&mut agent, &dirs.ws_path());
    agent.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "Work slowly"}]}}));
    let session_id = session.clone();
    let answer = until_answer(&mut agent, 2, move |message, agent| {
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            agent.send(
                json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}),
            );
        }
    });
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    finish_recording(agent);

    let scenario = Scenario::load(&dirs.path(RECORDING)).expect("the recording parses");
    let steps = &scenario.header.script[0]["steps"];
    assert_eq!(steps[0], json!({"text": "Working"}));
    assert!(steps[1]["delay_ms"].as_u64().is_some_and(|ms| ms >= 10_000), "{steps}");
    replay(&dirs.path(RECORDING));
}

#[test]
fn a_path_that_cannot_be_written_fails_at_start_with_its_name() {
    let root = tempfile::tempdir().expect("tempdir");
    let file = root.path().join("missing-dir").join("x.ndjson");
    let output = Command::new(env!("CARGO_BIN_EXE_heron"))
        .args(["acp", "--record"])
        .arg(&file)
        .env("HERON_HOME", root.path())
        .stdin(Stdio::null())
        .output()
        .expect("run heron");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--record") && stderr.contains("x.ndjson"), "{stderr}");
    assert!(output.stdout.is_empty(), "stdout carries protocol messages only");
}

#[test]
fn an_editor_that_quits_mid_turn_replays_with_the_input_closed_at_that_point() {
    let url = endpoint(vec![Reply::Stall(vec![delta(json!({"role": "assistant", "content": "Working"}))])]);
    let dirs = dirs(&url);
    let mut agent = start(&dirs);
    let session = open_session(&mut agent, &dirs.ws_path());
    agent.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "Work slowly"}]}}));
    agent.until(|message| message["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    // The editor quits while the model is still streaming; the agent answers on its way out.
    agent.close_input();
    let answer = agent.next();
    assert_eq!(answer["id"], 2, "{answer}");
    finish_recording(agent);

    let text = std::fs::read_to_string(dirs.path(RECORDING)).expect("the recording");
    let close = text.find(r#"{"close_input":true}"#).expect("the input closes in the transcript");
    assert!(text[close..].contains(r#"{"expect":{"error":{"code":-32800"#), "{text}");
    replay(&dirs.path(RECORDING));
}
