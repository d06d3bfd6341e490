//! The MCP client features, driven by the reference server
//! `@modelcontextprotocol/server-everything` (pinned in `mcp_real`, installed from the npm
//! registry by `.ci/run`) over the real binary: its echo and sum tools; its form
//! elicitation with every primitive reaching the editor, and only a fitting answer the
//! server; its URL-required error (-32042) becoming a page the editor offers, the call run
//! again once it is opened; its sampling request approved by the user and answered by the
//! session's model; its prompts as slash commands and its resources read by the model; its
//! roots listing; its log messages as notices; and `/mcp` and the per-server config option
//! turning it off and on. (Its long-running operation's progress is in `mcp_real`.)

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_real::{EVERYTHING, calling, launcher, server, settled};
use crate::support::playing::play;
use crate::support::{self, Editor, update_kind};

/// An agent whose model plays `script`, a client that declares `capabilities`, and a
/// session with server-everything, just opened.
async fn starting(script: &str, capabilities: Value) -> Option<(Editor, String)> {
    let npx = launcher("HERON_NPX", "npx (Node.js)")?;
    let dirs = support::scripted_home("s", "", script);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let init = json!({ "protocolVersion": 1, "clientCapabilities": capabilities });
    editor.ask(json!("init"), "initialize", init).await;
    let cwd = editor.dirs.ws();
    let servers = json!([server("everything", &npx, &["-y", EVERYTHING], &[])]);
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    Some((editor, session))
}

/// [`starting`], once the server is ready.
async fn everything(script: &str, capabilities: Value) -> Option<(Editor, String)> {
    let (mut editor, session) = starting(script, capabilities).await?;
    let ready = settled(&mut editor, &session).await;
    assert!(ready.iter().all(|s| s["status"] == "ready"), "{ready:?}");
    Some((editor, session))
}

/// The text of a finished call's content.
fn text_of(finished: &Value) -> String {
    finished["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

const FORMS: &str = "mcp__everything__trigger-elicitation-request";

/// The server's form, as ACP's schema: every primitive is offered with its bounds, format
/// and default, and a fitting answer of each type reaches the server.
#[tokio::test]
async fn a_form_with_every_primitive_reaches_the_editor_and_a_fitting_answer_the_server() {
    let Some((mut editor, session)) =
        everything(&calling(FORMS, json!({})), json!({ "elicitation": { "form": {} } })).await
    else {
        return;
    };
    let answer = json!({ "action": "accept", "content": {
        "name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7, "number": 2.5,
        "birthdate": "1815-12-10", "untitledSingleSelectEnum": "Joey",
    }});
    let played = play(&mut editor, &session, |_| answer.clone()).await;
    assert_eq!(played.asked.len(), 1, "one form: {:?}", played.asked);
    let properties = &played.asked[0]["requestedSchema"]["properties"];
    assert_eq!(properties["check"]["type"], "boolean", "{properties}");
    assert_eq!(
        properties["integer"],
        json!({ "type": "integer", "title": "Integer",
        "description": "Your favorite integer (do not give us your phone number, pin, or other sensitive info)",
        "minimum": 1, "maximum": 100, "default": 42 })
    );
    assert_eq!(properties["number"]["type"], "number");
    assert_eq!(properties["number"]["default"].as_f64().map(|d| (d * 100.0).round()), Some(314.0));
    assert_eq!(properties["email"]["format"], "email");
    assert_eq!(properties["birthdate"]["format"], "date");
    assert_eq!(properties["untitledSingleSelectEnum"]["default"], "Monica");
    let text = text_of(&played.finished);
    assert_eq!(played.finished["status"], "completed", "{}", played.finished);
    for line in
        ["- Name: Ada Lovelace", "- Agreed to terms: true", "- Favorite Integer: 7", "- Favorite Number: 2.5"]
    {
        assert!(text.contains(line), "the answer reached the server ({line}): {text}");
    }
}

/// An answer of the wrong type (a string for the integer) declines the form: the server is
/// told decline, and the editor's values never reach it.
#[tokio::test]
async fn an_answer_that_does_not_fit_the_form_tells_the_server_decline() {
    let Some((mut editor, session)) =
        everything(&calling(FORMS, json!({})), json!({ "elicitation": { "form": {} } })).await
    else {
        return;
    };
    let answer = json!({ "action": "accept", "content": { "name": "Mallory", "integer": "7; drop table" } });
    let played = play(&mut editor, &session, |_| answer.clone()).await;
    let text = text_of(&played.finished);
    assert!(text.contains("User declined"), "the server was told decline: {text}");
    assert!(!text.contains("Mallory"), "nothing the editor sent reached the server: {text}");
}

const PAGES: &str = "mcp__everything__trigger-url-elicitation";

fn page_call() -> String {
    calling(PAGES, json!({ "url": "https://example.com/sign-in", "errorPath": true }))
}

/// A -32042 refusal offers the prerequisite page; once the user opens it, the call runs
/// again and reaches the server's own page request.
#[tokio::test]
async fn a_url_required_refusal_offers_the_page_and_retries_the_call_once_it_is_opened() {
    let capabilities = json!({ "elicitation": { "form": {}, "url": {} } });
    let Some((mut editor, session)) = everything(&page_call(), capabilities).await else { return };
    let played = play(&mut editor, &session, |_| json!({ "action": "accept" })).await;
    let urls: Vec<&str> = played.asked.iter().filter_map(|a| a["url"].as_str()).collect();
    assert_eq!(
        urls,
        ["https://modelcontextprotocol.io", "https://example.com/sign-in"],
        "{:?}",
        played.asked
    );
    assert!(played.asked.iter().all(|a| a["mode"] == "url"), "{:?}", played.asked);
    assert_eq!(played.finished["status"], "completed", "{}", played.finished);
    assert!(
        text_of(&played.finished).contains("User completed the URL elicitation flow"),
        "{}",
        played.finished
    );
}

/// Without `elicitation.url` the page is not offered: the call fails and the model is told
/// what the server needs and why it was not offered (without the URL).
#[tokio::test]
async fn without_pages_the_model_is_told_what_the_server_needs_and_why_it_was_not_offered() {
    let Some((mut editor, session)) =
        everything(&page_call(), json!({ "elicitation": { "form": {} } })).await
    else {
        return;
    };
    let played = play(&mut editor, &session, |_| json!({ "action": "accept" })).await;
    assert!(played.asked.is_empty(), "no page was offered: {:?}", played.asked);
    assert_eq!(played.finished["status"], "failed", "{}", played.finished);
    let text = text_of(&played.finished);
    assert!(text.contains("needs the user to open a page"), "{text}");
    assert!(text.contains("elicitation.url"), "why it was not offered: {text}");
    assert!(!text.contains("modelcontextprotocol.io"), "the URL is the user's, not the model's: {text}");
}

const SAMPLING: &str = "mcp__everything__trigger-sampling-request";

/// A model that says `sampled` and calls the sampling trigger, then ends the turn. The
/// scripted model plays by the request's assistant messages: the server's request has
/// none, so it is answered by the first turn's text.
fn sampling_script(sampled: &str) -> String {
    let arguments = json!({ "prompt": "Say hi", "maxTokens": 50 });
    let call = json!({ "steps": [{ "text": sampled }, { "tool_call": { "name": SAMPLING, "arguments": arguments } }] });
    format!("{call}\n{}\n", json!({ "steps": [{ "text": "Done." }] }))
}

/// Prompts and plays the editor until the answer: the tool call is allowed, and the
/// sampling request is answered with `option`. Returns the sampling permission request and
/// the finished call's update.
async fn play_sampling(editor: &mut Editor, session: &str, option: &str) -> (Value, Value) {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Use the server" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let (mut sampling, mut finished) = (Value::Null, Value::Null);
    loop {
        let message = editor.recv_within(Duration::from_secs(60)).await;
        if message["id"] == "p" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            return (sampling, finished);
        }
        if message["method"] == "session/request_permission" {
            let is_sampling =
                message["params"]["toolCall"]["title"].as_str().is_some_and(|t| t.contains("asks the model"));
            let chosen = if is_sampling {
                sampling = message["params"].clone();
                option
            } else {
                "allow_once"
            };
            let result = json!({ "outcome": { "outcome": "selected", "optionId": chosen } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })).await;
        }
        let update = &message["params"]["update"];
        if update_kind(&message) == Some("tool_call_update")
            && update["status"].as_str().is_some_and(|s| s != "in_progress" && s != "pending")
        {
            finished = update.clone();
        }
    }
}

/// The server's sampling request is shown to the user with the server's name and every
/// message; once approved, the session's model answers it and the answer reaches the
/// server.
#[tokio::test]
async fn a_sampling_request_is_approved_by_the_user_and_answered_by_the_sessions_model() {
    let script = sampling_script("Hello from the session's model");
    let Some((mut editor, session)) = everything(&script, json!({})).await else { return };
    let (asked, finished) = play_sampling(&mut editor, &session, "allow_once").await;
    let card = asked["toolCall"].to_string();
    assert!(card.contains("`everything`"), "the server is named: {card}");
    assert!(
        card.contains("Resource trigger-sampling-request context: Say hi"),
        "its message is shown: {card}"
    );
    assert!(card.contains("You are a helpful test server."), "its system prompt is shown: {card}");
    assert_eq!(finished["status"], "completed", "{finished}");
    let text = text_of(&finished);
    assert!(text.contains("Hello from the session's model"), "the model's answer reached the server: {text}");
}

/// A rejected sampling request never reaches the model: the server hears why.
#[tokio::test]
async fn a_rejected_sampling_request_never_reaches_the_model() {
    let script = sampling_script("THIS MUST NOT BE SENT");
    let Some((mut editor, session)) = everything(&script, json!({})).await else { return };
    let (asked, finished) = play_sampling(&mut editor, &session, "reject_once").await;
    assert!(!asked.is_null(), "the user was asked");
    let text = text_of(&finished);
    assert!(text.contains("declined"), "the server heard the user declined: {finished}");
    assert!(!text.contains("THIS MUST NOT BE SENT"), "{text}");
}

/// Waits for the `available_commands_update` that lists `command`; returns its commands.
async fn commands_with(editor: &mut Editor, command: &str) -> Vec<Value> {
    loop {
        let message = editor.recv_within(Duration::from_secs(30)).await;
        if update_kind(&message) != Some("available_commands_update") {
            continue;
        }
        let listed = message["params"]["update"]["availableCommands"].as_array().cloned().unwrap_or_default();
        if listed.iter().any(|c| c["name"] == command) {
            return listed;
        }
    }
}

/// The server's prompts are slash commands; one with arguments expands on the server, and
/// the model reads what it expanded to.
#[tokio::test]
async fn the_servers_prompts_are_slash_commands_that_expand_on_the_server() {
    let script = format!("{}\n", json!({ "steps": [{ "text": "Sunny." }] }));
    let Some((mut editor, session)) = starting(&script, json!({})).await else { return };
    let listed = commands_with(&mut editor, "mcp:everything:args-prompt").await;
    let args = listed.iter().find(|c| c["name"] == "mcp:everything:args-prompt").expect("listed");
    assert_eq!(args["input"]["hint"], "<city> [state]", "{args}");
    assert_eq!(args["_meta"]["heron"]["source"], "mcp", "{args}");
    assert!(listed.iter().any(|c| c["name"] == "mcp:everything:simple-prompt"), "{listed:?}");
    let (_, answer) =
        editor.prompt(json!("p"), &session, "/mcp:everything:args-prompt Paris state=Texas").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let transcript = answer["result"]["_meta"]["heron"]["transcriptPath"].as_str().expect("a transcript");
    let told = std::fs::read_to_string(transcript).expect("the transcript");
    assert!(told.contains("What's weather in Paris, Texas?"), "the model read the server's prompt: {told}");
    // A required argument left out is the user's to fix; the model is not asked.
    let (before, answer) = editor.prompt(json!("q"), &session, "/mcp:everything:args-prompt").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said = before.iter().map(|m| m.to_string()).collect::<String>();
    assert!(said.contains("needs `city`"), "{said}");
}

/// The model reads a resource the server lists through `read_mcp_resource`.
#[tokio::test]
async fn the_model_reads_a_listed_resource() {
    let uri = "demo://resource/static/document/architecture.md";
    let script = calling("read_mcp_resource", json!({ "server": "everything", "uri": uri }));
    let Some((mut editor, session)) = everything(&script, json!({})).await else { return };
    let played = play(&mut editor, &session, |_| json!({ "action": "decline" })).await;
    assert_eq!(played.finished["status"], "completed", "{}", played.finished);
    let text = text_of(&played.finished);
    assert!(text.to_lowercase().contains("architecture"), "the resource's text reached the model: {text}");
}

/// `/mcp disable` stops a server for the session: its tools and prompts go; `/mcp enable`
/// starts it again.
#[tokio::test]
async fn mcp_turns_a_server_off_and_on_without_losing_the_session() {
    let script = format!("{}\n", json!({ "steps": [{ "text": "ok" }] }));
    let Some((mut editor, session)) = starting(&script, json!({})).await else { return };
    commands_with(&mut editor, "mcp:everything:simple-prompt").await;
    let (before, _) = editor.prompt(json!("off"), &session, "/mcp disable everything").await;
    assert!(
        before.iter().any(|m| m.to_string().contains("is disabled for the rest of the session")),
        "{before:?}"
    );
    let off = settled(&mut editor, &session).await;
    assert_eq!(off[0]["status"], "disabled", "{off:?}");
    let (before, _) = editor.prompt(json!("list"), &session, "/mcp").await;
    assert!(before.iter().any(|m| m.to_string().contains("everything (stdio): disabled")), "{before:?}");
    editor.prompt(json!("on"), &session, "/mcp enable everything").await;
    let on = settled(&mut editor, &session).await;
    assert_eq!(on[0]["status"], "ready", "{on:?}");
    assert!(on[0]["tools"].as_u64() > Some(0), "{on:?}");
}

/// For a client that takes boolean config options, each server is one (`mcp:<name>`):
/// turning it off disables the server, on starts it again, and `/mcp` moves it too.
#[tokio::test]
async fn each_server_is_a_boolean_config_option_the_client_can_turn_off_and_on() {
    let script = format!("{}\n", json!({ "steps": [{ "text": "ok" }] }));
    let capabilities = json!({ "session": { "configOptions": { "boolean": {} } } });
    let Some((mut editor, session)) = everything(&script, capabilities).await else { return };
    let set = |value: bool| json!({ "sessionId": session, "configId": "mcp:everything", "type": "boolean", "value": value });
    let option = |answer: &Value| {
        answer["result"]["configOptions"]
            .as_array()
            .and_then(|o| o.iter().find(|o| o["id"] == "mcp:everything").cloned())
            .unwrap_or_else(|| panic!("the server's option: {answer}"))
    };
    let off = editor.ask(json!("off"), "session/set_config_option", set(false)).await;
    assert_eq!(option(&off)["type"], "boolean", "{off}");
    assert_eq!(option(&off)["currentValue"], false, "{off}");
    assert_eq!(settled(&mut editor, &session).await[0]["status"], "disabled");
    let on = editor.ask(json!("on"), "session/set_config_option", set(true)).await;
    assert_eq!(option(&on)["currentValue"], true, "{on}");
    let ready = settled(&mut editor, &session).await;
    assert_eq!(ready[0]["status"], "ready", "{ready:?}");
    let unknown = json!({ "sessionId": session, "configId": "mcp:nope", "type": "boolean", "value": false });
    let refused = editor.ask(json!("x"), "session/set_config_option", unknown).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let (before, _) = editor.prompt(json!("p"), &session, "/mcp disable everything").await;
    let told = before
        .iter()
        .filter(|m| update_kind(m) == Some("config_option_update"))
        .flat_map(|m| m["params"]["update"]["configOptions"].as_array().cloned().unwrap_or_default())
        .find(|o| o["id"] == "mcp:everything")
        .unwrap_or_else(|| panic!("/mcp tells the editor: {before:?}"));
    assert_eq!(told["currentValue"], false);
}

/// The reference server's own tools: echo and sum answer through a turn.
#[tokio::test]
async fn the_servers_echo_and_sum_tools_answer() {
    let calls = json!({ "steps": [
        { "tool_call": { "name": "mcp__everything__echo", "arguments": { "message": "from heron" } } },
        { "tool_call": { "name": "mcp__everything__get-sum", "arguments": { "a": 2, "b": 40 } } },
    ]});
    let script = format!("{calls}\n{}\n", json!({ "steps": [{ "text": "Done." }] }));
    let Some((mut editor, session)) = everything(&script, json!({})).await else { return };
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Use the server" }] });
    editor.send_request(json!("p"), "session/prompt", params).await;
    let mut texts = Vec::new();
    loop {
        let message = editor.recv_within(Duration::from_secs(60)).await;
        if message["method"] == "session/request_permission" {
            let allow = json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } });
            editor.send_json(json!({ "jsonrpc": "2.0", "id": message["id"], "result": allow })).await;
        }
        let update = &message["params"]["update"];
        if update_kind(&message) == Some("tool_call_update") && update["status"] == "completed" {
            texts.push(text_of(update));
        }
        if message["id"] == "p" && message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
    }
    assert!(texts.iter().any(|t| t.contains("Echo: from heron")), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("The sum of 2 and 40 is 42.")), "{texts:?}");
}

/// The server asks for the client's roots: it is given the session's cwd.
#[tokio::test]
async fn the_server_lists_the_sessions_roots() {
    let script = calling("mcp__everything__get-roots-list", json!({}));
    let Some((mut editor, session)) = everything(&script, json!({})).await else { return };
    let cwd = editor.dirs.ws();
    let played = play(&mut editor, &session, |_| json!({ "action": "decline" })).await;
    let text = text_of(&played.finished);
    assert!(text.contains(&format!("file://{cwd}")), "the cwd is a root: {text}");
}

/// The server's log messages at warning and above reach a client that shows notices.
#[tokio::test]
async fn the_servers_warnings_are_notices() {
    let script = calling("mcp__everything__toggle-simulated-logging", json!({}));
    let capabilities = json!({ "session": { "notices": {} } });
    let Some((mut editor, session)) = everything(&script, capabilities).await else { return };
    play(&mut editor, &session, |_| json!({ "action": "decline" })).await;
    // It logs a random level every 5 s; five of its eight levels are warning or above.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        assert!(std::time::Instant::now() < deadline, "no notice of the server's log came");
        let message = editor.recv_within(Duration::from_secs(90)).await;
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "notice" {
            let title = update["title"].as_str().unwrap_or_default();
            assert!(title.starts_with("The MCP server `everything` logged"), "{update}");
            break;
        }
    }
}
