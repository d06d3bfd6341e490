//! Custom slash commands and plugins over ACP: project and user command files listed in
//! `available_commands_update` with their hints and run as prompts of their expansion,
//! clashes and bad files reported in `_meta.heron.problems`, plugin actions and plugin MCP
//! servers, and a broken plugin reported failed in `_heron/session/mcpStatus` and kept in
//! the session status.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{self, Dirs, Editor, update_kind};
use serde_json::{Value, json};

const ONE_ANSWER: &str = "{\"steps\": [{\"text\": \"Done.\"}]}\n";

pub(crate) fn write(dir: impl AsRef<Path>, name: &str, text: &str) -> PathBuf {
    let path = dir.as_ref().join(name);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("folder");
    std::fs::write(&path, text).expect("write");
    path
}

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_server.py").display().to_string()
}

/// A home whose model `s/m` plays `script`, with a workspace.
pub(crate) fn home(script: &str) -> std::sync::Arc<Dirs> {
    support::scripted_home("s", "", script)
}

/// Opens a session and returns it with the `available_commands_update` that follows.
pub(crate) async fn open(editor: &mut Editor) -> (String, Value) {
    editor.request(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer = editor.request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    let update = editor.recv().await;
    assert_eq!(update_kind(&update), Some("available_commands_update"), "{update}");
    (session, update["params"]["update"].clone())
}

fn command<'a>(update: &'a Value, name: &str) -> Option<&'a Value> {
    update["availableCommands"].as_array()?.iter().find(|c| c["name"] == name)
}

fn problems(update: &Value) -> Vec<Value> {
    update["_meta"]["heron"]["problems"].as_array().cloned().unwrap_or_default()
}

/// The stored events of the session a prompt answered for, from its transcript.
fn transcript(answer: &Value) -> Vec<Value> {
    let path = answer["result"]["_meta"]["heron"]["transcriptPath"].as_str().expect("a transcript path");
    std::fs::read_to_string(path)
        .expect("the transcript")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

#[tokio::test]
async fn project_and_user_commands_are_listed_with_their_hints_and_sources() {
    let dirs = home(ONE_ANSWER);
    write(
        dirs.ws(),
        ".heron/commands/review.md",
        "---\ndescription: Review files\nargument-hint: <files>\n---\nReview $ARGUMENTS\n",
    );
    write(dirs.home(), "commands/standup.md", "Summarize what changed since yesterday.\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (_, update) = open(&mut editor).await;
    let review = command(&update, "review").unwrap_or_else(|| panic!("no /review: {update}"));
    assert_eq!(review["description"], "Review files");
    assert_eq!(review["input"]["hint"], "<files>");
    assert_eq!(review["_meta"]["heron"]["source"], "project");
    let standup = command(&update, "standup").expect("the user's command");
    assert_eq!(
        standup["description"], "Summarize what changed since yesterday.",
        "the first line describes it"
    );
    assert_eq!(standup["_meta"]["heron"]["source"], "user");
    assert!(standup.get("input").is_none(), "no hint was given: {standup}");
    assert!(command(&update, "help").is_some(), "the built-in commands stay");
    assert!(problems(&update).is_empty(), "{update}");
    editor.close().await;
}

#[tokio::test]
async fn a_custom_command_runs_as_its_expansion_and_is_stored_as_typed() {
    let dirs = home(ONE_ANSWER);
    write(
        dirs.ws(),
        ".heron/commands/review.md",
        "---\ndescription: Review\n---\nReview $ARGUMENTS with care.\n",
    );
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "/review src/lib.rs").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(before.iter().any(|m| update_kind(m) == Some("agent_message_chunk")), "the model answered");
    let events = transcript(&answer);
    let user = events.iter().find(|e| e["kind"] == "user_message").expect("a user message");
    assert_eq!(user["content"][0]["text"], "Review src/lib.rs with care.\n", "the model reads the expansion");
    assert_eq!(user["command"], "/review src/lib.rs", "the command line is kept");
    // Loading the session shows the command as typed, marked as one.
    editor.request(json!("close"), "session/close", json!({ "sessionId": session })).await;
    let cwd = editor.dirs.ws();
    let (replayed, _) = editor
        .exchange(
            json!("load"),
            "session/load",
            json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] }),
        )
        .await;
    let shown =
        replayed.iter().find(|m| update_kind(m) == Some("user_message_chunk")).expect("the prompt replays");
    assert_eq!(shown["params"]["update"]["content"]["text"], "/review src/lib.rs");
    assert_eq!(shown["params"]["update"]["_meta"]["heron"]["command"], "review");
    editor.close().await;
}

#[tokio::test]
async fn help_lists_the_custom_commands_and_plugin_actions_with_their_sources() {
    let dirs = home(ONE_ANSWER);
    write(dirs.ws(), ".heron/commands/review.md", "---\nargument-hint: <files>\n---\nReview $ARGUMENTS\n");
    write(dirs.home(), "commands/standup.md", "Summarize what changed since yesterday.\n");
    docs_plugin(&dirs);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "/help").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let reply: String = before
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(reply.contains("- /compact"), "Heron's own come first: {reply}");
    let custom = reply.split("Custom commands:").nth(1).unwrap_or_else(|| panic!("{reply}"));
    assert!(custom.contains("- /review <files> — Review $ARGUMENTS (project)"), "{custom}");
    assert!(custom.contains("- /standup — Summarize what changed since yesterday. (user)"), "{custom}");
    assert!(custom.contains("- /docs:summarize path — Summarize a file (plugin docs)"), "{custom}");
    editor.close().await;
}

#[tokio::test]
async fn the_project_wins_over_the_user_and_built_ins_over_both_and_each_clash_is_reported() {
    let dirs = home(ONE_ANSWER);
    write(dirs.ws(), ".heron/commands/deploy.md", "Deploy from the project.\n");
    write(dirs.home(), "commands/deploy.md", "Deploy from the user.\n");
    write(dirs.home(), "commands/help.md", "Not Heron's help.\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (_, update) = open(&mut editor).await;
    assert_eq!(command(&update, "deploy").expect("deploy")["description"], "Deploy from the project.");
    assert_eq!(command(&update, "help").expect("help")["description"], "List Heron's slash commands");
    let problems = problems(&update);
    let about =
        |file: &str| problems.iter().find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(file))).cloned();
    let user = about("home/commands/deploy.md").unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(user["message"].as_str().is_some_and(|m| m.contains("project command")), "{user}");
    let help = about("home/commands/help.md").unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(help["message"].as_str().is_some_and(|m| m.contains("built-in")), "{help}");
    editor.close().await;
}

#[tokio::test]
async fn an_invalid_command_file_is_reported_with_its_line_and_the_others_load() {
    let dirs = home(ONE_ANSWER);
    write(dirs.ws(), ".heron/commands/good.md", "Do the good thing.\n");
    write(
        dirs.ws(),
        ".heron/commands/broken.md",
        "---\ndescription: fine\nthis line is no pair\n---\nBody\n",
    );
    write(dirs.ws(), ".heron/commands/Shouting.md", "Loud.\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    assert!(command(&update, "good").is_some(), "{update}");
    assert!(command(&update, "broken").is_none() && command(&update, "Shouting").is_none());
    let problems = problems(&update);
    let broken = problems
        .iter()
        .find(|p| p["file"].as_str().is_some_and(|f| f.ends_with("broken.md")))
        .expect("broken");
    assert_eq!(broken["line"], 3, "{broken}");
    assert!(
        problems.iter().any(|p| p["file"].as_str().is_some_and(|f| f.ends_with("Shouting.md"))),
        "{problems:#?}"
    );
    // A name that is no command is an ordinary prompt.
    let (_, answer) = editor.prompt(json!("p"), &session, "/broken now").await;
    let events = transcript(&answer);
    let user = events.iter().find(|e| e["kind"] == "user_message").expect("a user message");
    assert_eq!(user["content"][0]["text"], "/broken now");
    assert!(user.get("command").is_none(), "{user}");
    editor.close().await;
}

#[tokio::test]
async fn a_command_file_that_links_to_heron_home_is_never_read() {
    let dirs = home(ONE_ANSWER);
    dirs.write_home(".env", "SECRET_KEY=hunter2-very-secret\n");
    let commands = Path::new(&dirs.ws()).join(".heron/commands");
    std::fs::create_dir_all(&commands).expect("folder");
    std::os::unix::fs::symlink(dirs.home().join(".env"), commands.join("leak.md")).expect("symlink");
    std::fs::hard_link(dirs.home().join(".env"), commands.join("hard.md")).expect("hard link");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (_, update) = open(&mut editor).await;
    assert!(command(&update, "leak").is_none() && command(&update, "hard").is_none(), "{update}");
    assert_eq!(problems(&update).len(), 2, "{update}");
    assert!(!update.to_string().contains("hunter2"), "the key never shows: {update}");
    editor.close().await;
}

/// A plugin `docs` with an action and the fake MCP server, which gets `PLUGIN_TOKEN`.
fn docs_plugin(dirs: &Dirs) {
    let toml = format!(
        "[actions.summarize]\ndescription = \"Summarize a file\"\nargument_hint = \"path\"\nprompt = \"Summarize $ARGUMENTS.\"\n\n\
         [mcp_servers.fake]\ncommand = \"python3\"\nargs = [{:?}]\nenv = {{ PLUGIN_TOKEN = \"from-the-plugin\" }}\n",
        fixture()
    );
    write(dirs.home(), "plugins/docs/plugin.toml", &toml);
}

/// Asks for the servers' status until none is connecting.
async fn settled(editor: &mut Editor, session: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer =
            editor.ask(json!("st"), "_heron/session/mcpStatus", json!({ "sessionId": session })).await;
        let servers = answer["result"]["servers"].as_array().cloned().unwrap_or_else(|| panic!("{answer}"));
        if servers.iter().all(|s| s["status"] != "connecting") || Instant::now() > deadline {
            return servers;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_plugin_action_is_a_command_named_after_its_plugin() {
    let dirs = home(ONE_ANSWER);
    docs_plugin(&dirs);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    let action = command(&update, "docs:summarize").unwrap_or_else(|| panic!("{update}"));
    assert_eq!(action["input"]["hint"], "path");
    assert_eq!(action["_meta"]["heron"], json!({ "source": "plugin", "plugin": "docs" }));
    let (_, answer) = editor.prompt(json!("p"), &session, "/docs:summarize README.md").await;
    let events = transcript(&answer);
    let user = events.iter().find(|e| e["kind"] == "user_message").expect("a user message");
    assert_eq!(user["content"][0]["text"], "Summarize README.md.");
    editor.close().await;
}

#[tokio::test]
async fn a_plugin_mcp_server_starts_for_the_session_with_its_env() {
    let script = r#"{"steps": [{"tool_call": {"name": "mcp__docs_fake__env", "arguments": {"name": "PLUGIN_TOKEN"}}}]}
{"steps": [{"text": "Done."}]}
"#;
    let dirs = home(script);
    docs_plugin(&dirs);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let servers = settled(&mut editor, &session).await;
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(
        (&servers[0]["name"], &servers[0]["status"]),
        (&json!("docs:fake"), &json!("ready")),
        "{servers:?}"
    );
    let (before, answer) = editor.prompt(json!("p"), &session, "Read the token").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let done = before
        .iter()
        .find(|m| {
            update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == "completed"
        })
        .unwrap_or_else(|| panic!("the call completes: {before:#?}"));
    assert!(done.to_string().contains("from-the-plugin"), "the server got its env: {done}");
    editor.close().await;
}

#[tokio::test]
async fn an_invalid_plugin_is_reported_failed_with_its_line_and_the_session_still_opens() {
    let dirs = home(ONE_ANSWER);
    write(dirs.home(), "plugins/broken/plugin.toml", "[mcp_servers.search]\ncomand = \"search\"\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    let problem = &problems(&update)[0];
    assert_eq!(problem["line"], 2, "{problem}");
    assert!(problem["message"].as_str().is_some_and(|m| m.contains("comand")), "{problem}");
    let servers = settled(&mut editor, &session).await;
    assert_eq!(
        (&servers[0]["name"], &servers[0]["status"]),
        (&json!("broken"), &json!("failed")),
        "{servers:?}"
    );
    let error = servers[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("plugin.toml line 2") && error.contains("comand"), "{error}");
    // The session status keeps it, for a client that missed the commands update.
    let status = editor.ask(json!("s"), "_heron/session/status", json!({ "sessionId": session })).await;
    let kept = &status["result"]["status"]["extensions"]["problems"][0];
    assert_eq!(kept, problem, "{status}");
    let (_, answer) = editor.prompt(json!("p"), &session, "Hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    editor.close().await;
}

#[tokio::test]
async fn a_plugin_server_turned_off_is_listed_disabled_and_a_status_read_never_starts_it() {
    let dirs = home(ONE_ANSWER);
    // Started, this program that does not exist would be `failed`.
    let toml = "[mcp_servers.search]\ncommand = \"no-such-mcp-server-program\"\nenabled = false\n";
    write(dirs.home(), "plugins/docs/plugin.toml", toml);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let expected = json!([{ "name": "docs:search", "status": "disabled", "tools": 0, "transport": "stdio" }]);
    for _ in 0..3 {
        assert_eq!(settled(&mut editor, &session).await, expected.as_array().cloned().unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    editor.close().await;
}

#[tokio::test]
async fn a_plugin_server_that_runs_from_heron_home_is_refused() {
    let dirs = home(ONE_ANSWER);
    let inside = dirs.home().join("plugins/sneaky/server.py");
    let toml =
        format!("[mcp_servers.local]\ncommand = \"python3\"\nargs = [{:?}]\n", inside.display().to_string());
    write(dirs.home(), "plugins/sneaky/plugin.toml", &toml);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let servers = settled(&mut editor, &session).await;
    assert_eq!(
        (&servers[0]["name"], &servers[0]["status"]),
        (&json!("sneaky:local"), &json!("failed")),
        "{servers:?}"
    );
    assert!(servers[0]["error"].as_str().is_some_and(|e| e.contains("Heron's home")), "{servers:?}");
    editor.close().await;
}
