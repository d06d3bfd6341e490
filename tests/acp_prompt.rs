//! Prompt turns over ACP, end to end: what a turn streams and when it answers, which prompt
//! content is refused, queued prompts, cancellation (`session/cancel` and
//! `$/cancel_request`) and a turn whose provider fails.

use crate::support;
use std::time::{Duration, Instant};

use crate::support::{Dirs, Editor, update_kind};
use heron::cli::acp::AcpArgs;
use serde_json::{Value, json};

/// A scripted model `script/m` whose turn 0 streams a word, then waits five seconds.
const SLOW: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 5000}, {"text": "done."}]}
{"steps": [{"text": "Back again."}]}
"#;

/// A scripted model `script/m` whose turn 0 takes a second and a half.
const MEDIUM: &str = r#"{"steps": [{"text": "Working"}, {"delay_ms": 1500}, {"text": "done."}]}
{"steps": [{"text": "Back again."}]}
"#;

/// A scripted model `script/m` that answers each prompt with one short text.
const TWO_ANSWERS: &str = r#"{"steps": [{"text": "one"}]}
{"steps": [{"text": "two"}]}
"#;

fn scripted(script: &str) -> std::sync::Arc<Dirs> {
    support::scripted_home("script", "", script)
}

fn script_args() -> AcpArgs {
    support::scripted_args("script")
}

fn text_prompt(session: &str, text: &str) -> Value {
    json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] })
}

/// Sends `prompt` and waits until its first agent message chunk, so the turn is running.
async fn start_turn(editor: &mut Editor, id: Value, session: &str) {
    editor.send_request(id.clone(), "session/prompt", text_prompt(session, "Work slowly")).await;
    loop {
        let message = editor.recv().await;
        assert_ne!(message.get("id"), Some(&id), "the turn ended early: {message}");
        if update_kind(&message) == Some("agent_message_chunk") {
            return;
        }
    }
}

/// The error of a prompt with one content block.
async fn prompt_error(block: Value) -> Value {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (notes, answer) =
        editor.exchange(json!(1), "session/prompt", json!({ "sessionId": session, "prompt": [block] })).await;
    assert!(notes.is_empty(), "a refused prompt streams nothing: {notes:#?}");
    editor.close().await;
    answer["error"].clone()
}

#[tokio::test]
async fn every_update_of_a_demo_turn_arrives_before_its_end_turn_answer() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Look around").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let kinds: Vec<&str> = before.iter().filter_map(update_kind).collect();
    for kind in ["agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update"] {
        assert!(kinds.contains(&kind), "{kind} before the answer: {kinds:?}");
    }
    assert!(
        before
            .iter()
            .filter(|m| update_kind(m).is_some())
            .all(|m| m["params"]["sessionId"] == json!(session)),
        "{before:#?}"
    );
    editor.expect_silence().await;
    editor.close().await;
}

#[tokio::test]
async fn chunks_of_one_message_share_a_message_id() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (before, _) = editor.prompt(json!("p"), &session, "Look around").await;
    // Runs of consecutive chunks of one kind are one message each.
    let mut runs: Vec<(String, Vec<Value>)> = Vec::new();
    for update in before.iter().filter(|m| update_kind(m).is_some()) {
        let kind = update_kind(update).unwrap_or_default().to_owned();
        let id = update["params"]["update"]["messageId"].clone();
        match runs.last_mut() {
            Some((last, ids)) if *last == kind && kind.ends_with("_chunk") => ids.push(id),
            _ => runs.push((kind, vec![id])),
        }
    }
    let messages: Vec<&Value> = runs
        .iter()
        .filter(|(kind, _)| kind == "agent_message_chunk" || kind == "agent_thought_chunk")
        .map(|(kind, ids)| {
            assert!(ids[0].is_string(), "{kind} has a messageId");
            assert!(ids.iter().all(|id| *id == ids[0]), "one id per message: {kind} {ids:?}");
            &ids[0]
        })
        .collect();
    assert_eq!(messages.len(), 4, "a thought and three messages: {runs:?}");
    let distinct: std::collections::BTreeSet<String> = messages.iter().map(|id| id.to_string()).collect();
    assert_eq!(distinct.len(), messages.len(), "each message has its own id");
    editor.close().await;
}

#[tokio::test]
async fn every_tool_call_is_followed_by_an_update_with_a_final_status() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (before, _) = editor.prompt(json!("p"), &session, "Look around").await;
    let updates: Vec<&Value> =
        before.iter().filter(|m| update_kind(m).is_some()).map(|m| &m["params"]["update"]).collect();
    let calls: Vec<&Value> = updates.iter().copied().filter(|u| u["sessionUpdate"] == "tool_call").collect();
    assert_eq!(calls.len(), 2, "the demo makes two calls");
    for (at, call) in updates.iter().enumerate().filter(|(_, u)| u["sessionUpdate"] == "tool_call") {
        let id = &call["toolCallId"];
        let last = updates[at..]
            .iter()
            .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == *id)
            .unwrap_or_else(|| panic!("no update for {id}"));
        assert!(last["status"] == "completed" || last["status"] == "failed", "final status: {last}");
    }
    editor.close().await;
}

#[tokio::test]
async fn the_answer_names_an_existing_transcript() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (_, answer) = editor.prompt(json!("p"), &session, "Look around").await;
    let path = answer["result"]["_meta"]["heron"]["transcriptPath"]
        .as_str()
        .unwrap_or_else(|| panic!("no transcriptPath: {answer}"));
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(text.contains("Look around"), "{text}");
    editor.close().await;
}

#[tokio::test]
async fn the_legacy_content_field_works_in_place_of_prompt() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let params = json!({ "sessionId": session, "content": [{ "type": "text", "text": "Look around" }] });
    let (before, answer) = editor.exchange(json!("p"), "session/prompt", params).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!before.iter().any(|m| update_kind(m) == Some("user_message_chunk")), "no echo: {before:?}");
    // The prompt was the `content` one: a load replays it.
    let load = json!({ "sessionId": session, "cwd": editor.dirs.ws(), "mcpServers": [] });
    let (replay, _) = editor.exchange(json!("load"), "session/load", load).await;
    let user = replay.iter().find(|m| update_kind(m) == Some("user_message_chunk"));
    assert_eq!(user.map(|m| &m["params"]["update"]["content"]["text"]), Some(&json!("Look around")));
    editor.close().await;
}

#[tokio::test]
async fn an_image_with_invalid_base64_is_invalid_params_naming_its_data() {
    let error =
        prompt_error(json!({ "type": "image", "mimeType": "image/png", "data": "not base64!" })).await;
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"]["path"], "prompt[0].data", "{error}");
}

#[tokio::test]
async fn an_unsupported_image_type_is_invalid_params() {
    let error = prompt_error(json!({ "type": "image", "mimeType": "image/x-tiff", "data": "AAAA" })).await;
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(error["data"]["path"], "prompt[0].mimeType", "{error}");
}

/// Image data is checked by its magic bytes, not only its `mimeType`: an empty image, text
/// sent as a PNG and a JPEG sent as a PNG are each refused naming the block, and nothing is
/// saved for any of them.
#[tokio::test]
async fn an_image_whose_bytes_are_not_what_it_claims_is_invalid_params_and_not_saved() {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let cases = [
        ("image/png", String::new(), "prompt[1].data", "the image is empty"),
        (
            "image/png",
            b64(b"hello, not an image"),
            "prompt[1].data",
            "the data is not an image of type `image/png`",
        ),
        (
            "image/png",
            b64(&[0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F', b'I', b'F']),
            "prompt[1].mimeType",
            "the image says `image/png` but its data is image/jpeg",
        ),
    ];
    let mut editor = support::start();
    let session = editor.new_session().await;
    for (i, (mime, data, path, reason)) in cases.into_iter().enumerate() {
        let prompt = json!({ "sessionId": session, "prompt": [
            { "type": "text", "text": "look" },
            { "type": "image", "mimeType": mime, "data": data }
        ] });
        let (notes, answer) = editor.exchange(json!(i), "session/prompt", prompt).await;
        assert!(notes.is_empty(), "a refused prompt streams nothing: {notes:#?}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["path"], path, "{answer}");
        let said = answer["error"]["data"]["reason"].as_str().unwrap_or_default();
        assert!(said.starts_with(reason), "{answer}");
    }
    let saved = std::path::Path::new(&editor.dirs.ws()).join(".heron").join("attachments");
    assert!(!saved.exists(), "nothing was saved");
    editor.close().await;
}

/// An image larger than Heron keeps, and one that would pass the workspace's attachment
/// budget, are refused before anything is saved, naming the limit; the session goes on.
#[tokio::test]
async fn attachments_past_their_bounds_are_refused_naming_the_limit() {
    use base64::Engine as _;
    let png = |size: usize| {
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.resize(size, 0);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    let mut editor = support::start();
    let session = editor.new_session().await;
    let saved = std::path::Path::new(&editor.dirs.ws()).join(".heron").join("attachments");
    let send = |id: &str, data: String| {
        (
            json!(id),
            json!({ "sessionId": session, "prompt": [{ "type": "image", "mimeType": "image/png", "data": data }] }),
        )
    };
    let (id, prompt) = send("big", png(20 * 1024 * 1024 + 1));
    let (_, answer) = editor.exchange(id, "session/prompt", prompt).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "prompt.attachment_refused", "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], 20 * 1024 * 1024, "{answer}");
    assert!(std::fs::read_dir(&saved).map_or(true, |mut d| d.next().is_none()), "nothing was saved");
    // The folder already holds its budget (a sparse file: no disk is used).
    std::fs::create_dir_all(&saved).expect("folder");
    let old = std::fs::File::create(saved.join("old.bin")).expect("old");
    old.set_len(heron_core::session::attachments::MAX_FOLDER_BYTES).expect("grow");
    let (id, prompt) = send("full", png(64));
    let (_, answer) = editor.exchange(id, "session/prompt", prompt).await;
    assert_eq!(answer["error"]["data"]["code"], "prompt.attachment_refused", "{answer}");
    assert_eq!(answer["error"]["data"]["scope"], "workspace", "{answer}");
    std::fs::remove_file(saved.join("old.bin")).expect("make room");
    let (id, prompt) = send("fits", png(64));
    let (_, answer) = editor.exchange(id, "session/prompt", prompt).await;
    assert!(answer["result"]["stopReason"].is_string(), "room was made: {answer}");
    editor.close().await;
}

#[tokio::test]
async fn audio_is_invalid_params() {
    let error = prompt_error(json!({ "type": "audio", "mimeType": "audio/wav", "data": "AAAA" })).await;
    assert_eq!(error["code"], -32602, "{error}");
}

#[tokio::test]
async fn a_prompt_to_an_unknown_session_is_resource_not_found() {
    let mut editor = support::start();
    editor.new_session().await;
    let (notes, answer) = editor.prompt(json!(1), "no-such-session", "hello").await;
    assert!(notes.is_empty(), "{notes:#?}");
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], "no-such-session", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn prompts_sent_back_to_back_are_answered_in_order_each_after_its_own_updates() {
    let mut editor = support::start_in(script_args(), scripted(TWO_ANSWERS));
    let session = editor.new_session().await;
    editor.send_request(json!("a"), "session/prompt", text_prompt(&session, "first")).await;
    editor.send_request(json!("b"), "session/prompt", text_prompt(&session, "second")).await;
    let (mut seen, _) = editor.until_answer(&json!("a")).await;
    seen.push(json!("answer a"));
    let (rest, answer) = editor.until_answer(&json!("b")).await;
    seen.extend(rest);
    seen.push(json!("answer b"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let shown: Vec<String> = seen
        .iter()
        // The title the first prompt gives the session is not part of either turn's order.
        .filter(|m| update_kind(m) != Some("session_info_update"))
        .map(|m| match update_kind(m) {
            Some(kind) => {
                format!("{kind} {}", m["params"]["update"]["content"]["text"].as_str().unwrap_or(""))
            }
            None => m.as_str().map_or_else(|| m.to_string(), str::to_owned),
        })
        .collect();
    // The editor shows its own prompts; they are not echoed back.
    assert_eq!(shown, ["agent_message_chunk one", "answer a", "agent_message_chunk two", "answer b"]);
    editor.close().await;
}

/// A slash command asked for while a turn streams is run at once, but its reply goes out
/// between runs: after the running turn's answer, before the prompt queued behind it. A
/// client without message ids would otherwise show the reply as part of the turn's text.
#[tokio::test]
async fn a_slash_commands_reply_waits_for_the_running_turn_not_for_the_queued_one() {
    let mut editor = support::start_in(script_args(), scripted(MEDIUM));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    editor.send_request(json!("next"), "session/prompt", text_prompt(&session, "again")).await;
    editor.send_request(json!("status"), "session/prompt", text_prompt(&session, "/status")).await;
    let (seen, answer) = editor.until_answer(&json!("next")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // What the editor shows: each answer, and the text streamed before it, chunks joined.
    let mut shown = Vec::new();
    let mut text = String::new();
    for message in seen.iter().chain([&answer]) {
        match update_kind(message) {
            Some("agent_message_chunk") => {
                text.push_str(message["params"]["update"]["content"]["text"].as_str().unwrap_or(""));
            }
            Some(_) => {}
            None => {
                let said = std::mem::take(&mut text);
                shown.push(if said.starts_with("Mode: ") { "the status".to_owned() } else { said });
                shown.push(format!("answer {}", message["id"]));
            }
        }
    }
    assert_eq!(
        shown,
        ["done.", "answer \"slow\"", "the status", "answer \"status\"", "Back again.", "answer \"next\""],
        "{seen:#?}"
    );
    editor.close().await;
}

#[tokio::test]
async fn cancel_answers_the_running_prompt_cancelled_within_a_second() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    let cancelled_at = Instant::now();
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let (_, answer) = editor.until_answer(&json!("slow")).await;
    assert!(cancelled_at.elapsed() < Duration::from_secs(1), "took {:?}", cancelled_at.elapsed());
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    editor.expect_silence().await;
    editor.close().await;
}

#[tokio::test]
async fn cancel_also_cancels_a_prompt_queued_behind_the_running_one() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    editor.send_request(json!("queued"), "session/prompt", text_prompt(&session, "next")).await;
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let (_, first) = editor.until_answer(&json!("slow")).await;
    assert_eq!(first["result"]["stopReason"], "cancelled", "{first}");
    let (between, second) = editor.until_answer(&json!("queued")).await;
    assert!(between.is_empty(), "a cancelled queued prompt streams nothing: {between:#?}");
    assert_eq!(second["result"]["stopReason"], "cancelled", "{second}");
    editor.close().await;
}

#[tokio::test]
async fn a_prompt_after_a_cancel_runs_normally() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    let (_, first) = editor.until_answer(&json!("slow")).await;
    assert_eq!(first["result"]["stopReason"], "cancelled", "{first}");
    let (before, answer) = editor.prompt(json!("after"), &session, "Again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text: String = before
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Back again.");
    editor.close().await;
}

#[tokio::test]
async fn a_prompt_sent_right_after_a_cancel_is_not_cancelled() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": session } }),
        )
        .await;
    editor.send_request(json!("after"), "session/prompt", text_prompt(&session, "Again")).await;
    let (_, first) = editor.until_answer(&json!("slow")).await;
    assert_eq!(first["result"]["stopReason"], "cancelled", "{first}");
    let (_, answer) = editor.until_answer(&json!("after")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn close_during_a_turn_answers_the_prompt_cancelled_then_closes() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    editor.send_request(json!("close"), "session/close", json!({ "sessionId": session })).await;
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let message = editor.recv_within(Duration::from_secs(1)).await;
        if message.get("method").is_none() {
            answers.push(message);
        }
    }
    let of = |id: &str| answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("{answers:?}"));
    assert_eq!(of("slow")["result"]["stopReason"], "cancelled", "{answers:?}");
    assert_eq!(of("close")["result"], json!({}), "{answers:?}");
    editor.close().await;
}

#[tokio::test]
async fn a_slow_turn_does_not_hold_up_another_session() {
    let config = support::scripted_provider("script", "script.jsonl")
        + &support::scripted_provider("fast", "fast.jsonl");
    let dirs =
        support::dirs_with(&[("config.toml", &config), ("script.jsonl", SLOW), ("fast.jsonl", TWO_ANSWERS)]);
    let mut editor = support::start_in(script_args(), dirs);
    let busy = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &busy).await;
    let cwd = editor.dirs.ws();
    let started = Instant::now();
    let created = editor.open_session(json!("new2"), &cwd).await;
    let idle = created["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    let params = json!({ "sessionId": idle, "configId": "model", "value": "fast/m" });
    let changed = editor.ask(json!("model"), "session/set_config_option", params).await;
    assert!(changed["result"].is_object(), "{changed}");
    let (_, answer) = editor.prompt(json!("quick"), &idle, "hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    editor
        .send_json(json!({ "jsonrpc": "2.0", "method": "session/cancel", "params": { "sessionId": busy } }))
        .await;
    let (_, answer) = editor.until_answer(&json!("slow")).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn cancel_request_on_a_prompt_gives_exactly_one_answer_and_the_session_still_works() {
    let mut editor = support::start_in(script_args(), scripted(SLOW));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("slow"), &session).await;
    let cancelled_at = Instant::now();
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "$/cancel_request", "params": { "requestId": "slow" } }),
        )
        .await;
    let (_, answer) = editor.until_answer(&json!("slow")).await;
    assert!(cancelled_at.elapsed() < Duration::from_secs(1), "took {:?}", cancelled_at.elapsed());
    let cancelled = answer["error"]["code"] == -32800 || answer["result"]["stopReason"] == "cancelled";
    assert!(cancelled, "-32800 or a cancelled result: {answer}");
    // No second answer for the same request, even once the turn has wound down.
    let (later, answer) = editor.prompt(json!("after"), &session, "Again").await;
    assert!(later.iter().all(|m| m.get("id") != Some(&json!("slow"))), "{later:#?}");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn cancel_request_on_a_queued_prompt_cancels_only_that_prompt() {
    let mut editor = support::start_in(script_args(), scripted(MEDIUM));
    let session = editor.new_session().await;
    start_turn(&mut editor, json!("running"), &session).await;
    editor.send_request(json!("queued"), "session/prompt", text_prompt(&session, "Never run")).await;
    editor
        .send_json(
            json!({ "jsonrpc": "2.0", "method": "$/cancel_request", "params": { "requestId": "queued" } }),
        )
        .await;
    let (_, queued) = editor.until_answer(&json!("queued")).await;
    assert!(queued["error"]["code"] == -32800 || queued["result"]["stopReason"] == "cancelled", "{queued}");
    let (_, running) = editor.until_answer(&json!("running")).await;
    assert_eq!(running["result"]["stopReason"], "end_turn", "the running turn goes on: {running}");
    // A prompt sent now runs after anything still queued: once it is answered, a wrongly
    // kept job would have run and been recorded.
    let (_, marker) = editor.prompt(json!("marker"), &session, "Marker").await;
    assert!(marker["result"]["stopReason"].is_string(), "{marker}");
    let cwd = editor.dirs.ws();
    let (replay, _) = editor
        .exchange(
            json!("load"),
            "session/load",
            json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] }),
        )
        .await;
    let prompts: Vec<&Value> = replay
        .iter()
        .filter(|m| update_kind(m) == Some("user_message_chunk"))
        .map(|m| &m["params"]["update"]["content"]["text"])
        .collect();
    assert_eq!(prompts, [&json!("Work slowly"), &json!("Marker")], "the cancelled prompt never ran");
    editor.close().await;
}

#[tokio::test]
async fn a_failed_turn_is_an_internal_error_that_never_shows_the_key() {
    let dirs = support::dirs_with(&[
        (
            "config.toml",
            "[providers.dead]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             api_key_env = \"DEAD_KEY\"\nmodels = [\"m\"]\nmax_retries = 0\n",
        ),
        (".env", "DEAD_KEY=sk-secret-value-123\n"),
    ]);
    let mut editor =
        support::start_in(AcpArgs { model: Some("dead/m".into()), ..support::demo_args() }, dirs);
    let session = editor.new_session().await;
    let started = Instant::now();
    let (before, answer) = editor.prompt(json!("p"), &session, "hello").await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(answer["error"]["data"]["code"], "turn_failed", "{answer}");
    for message in before.iter().chain([&answer]) {
        assert!(!message.to_string().contains("sk-secret-value-123"), "the key leaked: {message}");
    }
    editor.close().await;
}

#[tokio::test]
async fn a_provider_whose_key_is_missing_makes_session_new_auth_required() {
    let dirs = support::dirs_with(&[(
        "config.toml",
        "[providers.keyless]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
         api_key_env = \"MISSING_KEY\"\nmodels = [\"m\"]\n",
    )]);
    let mut editor =
        support::start_in(AcpArgs { model: Some("keyless/m".into()), ..support::demo_args() }, dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer = editor.open_session(json!(1), &cwd).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    editor.close().await;
}
