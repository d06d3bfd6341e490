//! The openai provider against a real model server rather than a mock written from its
//! documentation: llama-cpp-python's OpenAI-compatible server (pinned, built portable by
//! `scripts/install-llama-server`) serving SmolLM2-135M-Instruct, and the real `heron acp`
//! driven as an editor drives it. The tests share one server (`support::llama`), one test
//! at a time.
//!
//! The tests assert what Heron does, never what the model says: a turn streams and ends
//! `end_turn`; a tool call forced with `tool_choice` runs, its result goes back and the turn
//! ends; a cancel mid-stream ends `cancelled` and the server sees the disconnect; a prompt
//! past the window is refused by the server's own count before it is sent, and the session
//! answers the next prompt. Sampling is greedy (`temperature = 0`) so a run repeats itself,
//! and `--max-tokens` bounds each answer.
//!
//! Without `HERON_LLAMA_PYTHON` and `HERON_LLAMA_MODEL` (which `.ci/run` sets) the tests
//! skip loudly, or fail where `HERON_REQUIRE_CLIENTS` requires them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llama::{self, Lease, WINDOW};
use crate::support::{Dirs, Launch, Process};

/// How long a message from Heron may take: the server reads Heron's system prompt at a few
/// dozen tokens a second on two busy cores, and writes about as fast.
const PATIENCE: Duration = Duration::from_secs(300);

/// How one prompt went, as the editor saw it.
struct Turn {
    /// The streamed agent text.
    text: String,
    /// How many `agent_message_chunk`s carried it.
    chunks: usize,
    /// Every `session/update` kind, in order.
    updates: Vec<String>,
    /// The prompt's answer.
    answer: Value,
}

/// A home whose default model is `server`'s, with the provider keys `extra`, the request
/// fields `body` and a workspace holding `notes.txt`.
fn home(server: &Lease, body: &str, extra: &str) -> std::sync::Arc<Dirs> {
    home_with(server, body, &format!("context_window = {WINDOW}\nmax_retries = 0\n{extra}"))
}

/// As [`home`], with no `context_window` and the default retries unless `extra` sets them.
fn home_with(server: &Lease, body: &str, extra: &str) -> std::sync::Arc<Dirs> {
    let dirs = Dirs::new();
    dirs.write_home(
        "config.toml",
        &format!(
            "default_model = \"llama/smollm2\"\n[providers.llama]\nkind = \"openai\"\nflavor = \"llamacpp\"\n\
             base_url = \"{}\"\nmodels = [\"smollm2\"]\ntimeout_s = 300\n\
             body = {{ {body} }}\n{extra}",
            server.base_url()
        ),
    );
    std::fs::write(dirs.ws_path().join("notes.txt"), "The herons nest by the river.\n").expect("notes");
    dirs
}

/// `heron acp` on `dirs`, answers capped at `max_tokens`, and a session in its workspace.
fn session(dirs: &Dirs, max_tokens: u32) -> (Process, String) {
    let mut heron =
        Launch::acp(&dirs.home(), &["--max-tokens", &max_tokens.to_string()]).patience(PATIENCE).start();
    let session = heron.new_session(&dirs.ws());
    (heron, session)
}

/// Sends `text` as prompt `id` without waiting.
fn send_prompt(heron: &mut Process, session: &str, id: &str, text: &str) {
    heron.send_prompt(json!(id), session, text);
}

/// Reads prompt `id` to its answer, allowing whatever the agent asks permission for.
fn until_answered(heron: &mut Process, id: &str) -> Turn {
    let mut turn = Turn { text: String::new(), chunks: 0, updates: Vec::new(), answer: Value::Null };
    turn.answer = heron.until_answer(&json!(id), |heron, message| {
        if message["method"] == "session/request_permission" {
            let options = message["params"]["options"].as_array().cloned().unwrap_or_default();
            let allow = options.iter().find(|o| o["kind"] == "allow_once").or(options.first());
            let chosen = allow.map(|o| o["optionId"].clone()).unwrap_or(Value::Null);
            heron.reply(message, json!({ "outcome": { "outcome": "selected", "optionId": chosen } }));
        }
        let update = &message["params"]["update"];
        if let Some(kind) = update["sessionUpdate"].as_str() {
            turn.updates.push(kind.to_owned());
        }
        if update["sessionUpdate"] == "agent_message_chunk" {
            turn.chunks += 1;
            turn.text.push_str(update["content"]["text"].as_str().unwrap_or(""));
        }
    });
    turn
}

/// Prompts `text` as `id` and reads it to its answer.
fn prompt(heron: &mut Process, session: &str, id: &str, text: &str) -> Turn {
    send_prompt(heron, session, id, text);
    until_answered(heron, id)
}

/// Checks that `turn` ended `end_turn`.
fn ended(turn: &Turn) {
    assert_eq!(turn.answer["result"]["stopReason"], "end_turn", "{}", turn.answer);
}

/// Checks that `turn` ended with the model's own stop: `end_turn`, or `max_tokens` when
/// what it wrote after a tool's result ran past the cap (a tiny model's words, greedy or
/// not, depend on the paths in its prompt). An error, a refusal or a turn that ran out of
/// requests is Heron's doing, and fails.
fn finished(turn: &Turn) {
    let stop = turn.answer["result"]["stopReason"].as_str();
    assert!(matches!(stop, Some("end_turn" | "max_tokens")), "{}", turn.answer);
}

/// Greedy sampling, so each run of a test asks the model the same and gets the same.
const GREEDY: &str = "temperature = 0.0, seed = 7";

#[test]
fn a_text_turn_streams_from_the_real_server_and_ends_end_turn() {
    let Some(server) = llama::lease() else { return };
    let dirs = home(&server, GREEDY, "");
    let (mut heron, session) = session(&dirs, 128);
    let turn = prompt(&mut heron, &session, "p", "Say hello in one short sentence.");
    ended(&turn);
    assert!(!turn.text.trim().is_empty(), "the model's words reached the editor");
    assert!(turn.chunks > 1, "they came as a stream, not at once: {} chunk", turn.chunks);
    assert_eq!(server.requests("/v1/chat/completions"), 1);
}

#[test]
fn a_forced_tool_call_runs_its_result_goes_back_and_the_turn_ends() {
    let Some(server) = llama::lease() else { return };
    // The server ignores `tools` unless `tool_choice` says otherwise; forcing `read_file`
    // makes even a tiny model call it, with arguments its grammar keeps well-formed.
    let dirs = home(&server, GREEDY, "tool_choice = { function = \"read_file\" }\n");
    let (mut heron, session) = session(&dirs, 128);
    let turn = prompt(&mut heron, &session, "p", "Read notes.txt and tell me what it says.");
    finished(&turn);
    assert!(turn.updates.iter().any(|u| u == "tool_call"), "the call was shown: {:?}", turn.updates);
    let at_call = turn.updates.iter().position(|u| u == "tool_call").unwrap_or(0);
    assert!(
        turn.updates[at_call..].iter().any(|u| u == "tool_call_update"),
        "and its result: {:?}",
        turn.updates
    );
    // The call's request, and the one carrying its result back (an assistant message with
    // tool calls, which this server refuses unless its content is a string).
    assert_eq!(server.requests("/v1/chat/completions"), 2, "{}", server.log());
    // The session keeps working after the round trip.
    finished(&prompt(&mut heron, &session, "again", "Thanks."));
    assert_eq!(server.requests("/v1/chat/completions"), 4, "one call and its answer again");
}

#[test]
fn a_cancel_mid_stream_ends_cancelled_and_the_server_sees_the_disconnect() {
    let Some(server) = llama::lease() else { return };
    // The end tokens (`<|endoftext|>` 0, `<|im_end|>` 2) are banned, so the model writes
    // until it is stopped: the cancel cannot race the answer's end.
    let body = format!("{GREEDY}, logit_bias = {{ \"0\" = -100.0, \"2\" = -100.0 }}");
    let dirs = home(&server, &body, "");
    let (mut heron, session) = session(&dirs, 4096);
    send_prompt(&mut heron, &session, "p", "Tell me a long story about a heron.");
    heron.until(|message| message["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    heron.send(json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }));
    let turn = until_answered(&mut heron, "p");
    assert_eq!(turn.answer["result"]["stopReason"], "cancelled", "{}", turn.answer);
    assert!(
        server.prints_within("Disconnected from client", Duration::from_secs(20)),
        "the server stopped generating for a client that left:\n{}",
        server.log()
    );
}

#[test]
fn a_prompt_past_the_window_is_refused_by_the_servers_count_and_the_session_goes_on() {
    let Some(server) = llama::lease() else { return };
    let dirs = home(&server, GREEDY, "");
    let (mut heron, session) = session(&dirs, 64);
    // Digits: the densest text there is, a token each to this model's tokenizer.
    let digits = "7".repeat(WINDOW as usize + 500);
    let failed = prompt(&mut heron, &session, "big", &digits);
    let message = failed.answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("context window"), "a clear error: {}", failed.answer);
    assert!(server.requests("/extras/tokenize/count") >= 1, "the server counted it:\n{}", server.log());
    assert_eq!(server.requests("/v1/chat/completions"), 0, "and it was never sent");
    // The next prompt goes through as if the failed one had not been: one user message,
    // nothing of the digits, alternating roles the strict template wants. The model's own
    // stop either way: how long a tiny model goes on depends on the temporary paths in its
    // prompt, greedy or not.
    finished(&prompt(&mut heron, &session, "small", "Say hello."));
    assert_eq!(server.requests("/v1/chat/completions"), 1);
}

/// Without a `context_window` Heron cannot tell a prompt is too long before it is sent: the
/// server refuses it, and the session goes on without it, rather than sending it again
/// with every later prompt and failing each the same way.
#[test]
fn without_a_window_a_prompt_the_server_refuses_as_too_long_does_not_poison_the_session() {
    let Some(server) = llama::lease() else { return };
    // One retry: this server drops the connection after such a refusal, and the next
    // request meets the reset on the pooled connection, which a retry is for.
    let dirs = home_with(&server, GREEDY, "max_retries = 1\n");
    let (mut heron, session) = session(&dirs, 64);
    let digits = "7".repeat(WINDOW as usize + 500);
    let failed = prompt(&mut heron, &session, "big", &digits);
    // This server answers such a prompt 200 with an empty stream: refused, and said so.
    let cause = failed.answer["error"]["data"]["cause"].as_str().unwrap_or_default();
    assert!(cause.contains("empty stream"), "the server refused it: {}", failed.answer);
    let sent = server.requests("/v1/chat/completions");
    assert_eq!(sent, 1, "a deterministic refusal is not retried:\n{}", server.log());
    // Sent again with the digits, it would be refused again: the model's own stop shows it
    // was not.
    finished(&prompt(&mut heron, &session, "small", "Say hello."));
    assert!(server.requests("/v1/chat/completions") >= 2, "the small prompt was sent:\n{}", server.log());
}
