//! The MCP servers users run, launched exactly as their READMEs say (`npx -y ...`,
//! `uvx ...`, versions pinned), given by the editor in `mcpServers`: with default settings
//! each starts, lists its tools, and a tool call that writes outside the session's cwd
//! succeeds and its result reaches the model. They are the user's own programs and run as
//! the user; `sandbox_mcp = true` confines them, and a refusal at start then names the
//! sandbox and the setting.
//!
//! These are the real servers, from the npm registry and PyPI: `.ci/run` installs uv
//! (pinned) and warms both caches, and sets `HERON_NPX` and `HERON_UVX`. Without them the
//! tests skip loudly, or fail where `HERON_REQUIRE_CLIENTS` requires them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{self, Editor, clients, update_kind};

/// The versions `.ci/run` warms the caches with.
const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";
const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
const GIT: &str = "mcp-server-git==2026.10.19";
const TIME: &str = "mcp-server-time==2026.10.19";
pub(crate) const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// `npx` or `uvx` as the environment names it, or `None` (the test skips or fails).
pub(crate) fn launcher(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(path) if !path.is_empty() => Some(path),
        _ => {
            clients::skip(var, what);
            None
        }
    }
}

/// A server entry as Zed writes one.
pub(crate) fn server(name: &str, command: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let env: Vec<Value> = env.iter().map(|(name, value)| json!({ "name": name, "value": value })).collect();
    json!({ "name": name, "command": command, "args": args, "env": env })
}

/// A model that calls `tool` with `arguments`, then ends the turn.
pub(crate) fn calling(tool: &str, arguments: Value) -> String {
    let call = json!({ "steps": [{ "tool_call": { "name": tool, "arguments": arguments } }] });
    format!("{call}\n{}\n", json!({ "steps": [{ "text": "Done." }] }))
}

/// An agent with `config` whose model plays `script`, and a session with `servers`.
async fn session(config: &str, script: &str, servers: Value) -> (Editor, String) {
    let dirs = support::scripted_home("s", config, script);
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}"));
    (editor, session.to_owned())
}

/// The servers' status once none is connecting (a first `npx` or `uvx` run downloads).
pub(crate) async fn settled(editor: &mut Editor, session: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let answer =
            editor.ask(json!("st"), "_heron/session/mcpStatus", json!({ "sessionId": session })).await;
        let servers = answer["result"]["servers"].as_array().cloned().unwrap_or_else(|| panic!("{answer}"));
        if servers.iter().all(|s| s["status"] != "connecting") || Instant::now() > deadline {
            return servers;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs one turn that calls `tool`; returns the text of the call's finished update.
async fn call_through(editor: &mut Editor, session: &str, tool: &str) -> String {
    let servers = settled(editor, session).await;
    assert!(servers.iter().all(|s| s["status"] == "ready"), "the server is ready: {servers:?}");
    assert!(servers.iter().all(|s| s["tools"].as_u64() > Some(0)), "it lists its tools: {servers:?}");
    let (before, answer) = editor.prompt(json!("p"), session, "Use the server").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let finished = before
        .iter()
        .filter(|m| update_kind(m) == Some("tool_call_update"))
        .find(|m| {
            m["params"]["update"]["status"].is_string() && m["params"]["update"]["status"] != "in_progress"
        })
        .unwrap_or_else(|| panic!("the call of {tool} finished: {before:?}"));
    let update = &finished["params"]["update"];
    assert_eq!(update["status"], "completed", "{tool} succeeded: {update}");
    update["content"].to_string()
}

/// A folder outside the session's cwd (and outside Heron's home).
fn outside() -> tempfile::TempDir {
    tempfile::tempdir().expect("a folder outside the workspace")
}

#[tokio::test]
async fn server_memory_by_npx_keeps_its_graph_in_a_file_outside_the_cwd() {
    let Some(npx) = launcher("HERON_NPX", "npx (Node.js)") else { return };
    let elsewhere = outside();
    let file = elsewhere.path().join("memory.jsonl");
    let memory =
        server("memory", &npx, &["-y", MEMORY], &[("MEMORY_FILE_PATH", &file.display().to_string())]);
    let entity =
        json!({ "entities": [{ "name": "Heron", "entityType": "agent", "observations": ["speaks ACP"] }] });
    let (mut editor, session) =
        session("", &calling("mcp__memory__create_entities", entity), json!([memory])).await;
    let content = call_through(&mut editor, &session, "create_entities").await;
    assert!(content.contains("Heron"), "the result reached the model: {content}");
    let kept = std::fs::read_to_string(&file).expect("the memory file was written");
    assert!(kept.contains("speaks ACP"), "{kept}");
}

#[tokio::test]
async fn server_filesystem_by_npx_writes_in_its_allowed_folder_outside_the_cwd() {
    let Some(npx) = launcher("HERON_NPX", "npx (Node.js)") else { return };
    let elsewhere = outside();
    let allowed = elsewhere.path().display().to_string();
    let note = elsewhere.path().join("note.txt");
    let fs = server("fs", &npx, &["-y", FILESYSTEM, &allowed], &[]);
    let write = json!({ "path": note, "content": "written by a real server" });
    let (mut editor, session) = session("", &calling("mcp__fs__write_file", write), json!([fs])).await;
    let content = call_through(&mut editor, &session, "write_file").await;
    assert!(content.contains("note.txt"), "the result reached the model: {content}");
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "written by a real server");
}

/// A repository with one commit, outside the cwd.
fn repository(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).expect("repo folder");
    std::fs::write(repo.join("README"), "hello\n").expect("a file");
    let git = |args: &[&str]| support::git(&repo, args);
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "README"]);
    git(&["commit", "-q", "-m", "first"]);
    repo
}

#[tokio::test]
async fn mcp_server_git_by_uvx_makes_a_branch_in_a_repository_outside_the_cwd() {
    let Some(uvx) = launcher("HERON_UVX", "uvx (uv, from PyPI)") else { return };
    let elsewhere = outside();
    let repo = repository(elsewhere.path());
    let repo_arg = repo.display().to_string();
    let git = server("git", &uvx, &[GIT, "--repository", &repo_arg], &[]);
    let branch = json!({ "repo_path": repo, "branch_name": "made-by-heron" });
    let (mut editor, session) =
        session("", &calling("mcp__git__git_create_branch", branch), json!([git])).await;
    let content = call_through(&mut editor, &session, "git_create_branch").await;
    assert!(content.contains("made-by-heron"), "the result reached the model: {content}");
    assert!(repo.join(".git/refs/heads/made-by-heron").exists(), "the branch was written");
}

#[tokio::test]
async fn mcp_server_time_by_uvx_answers_the_time() {
    let Some(uvx) = launcher("HERON_UVX", "uvx (uv, from PyPI)") else { return };
    let time = server("time", &uvx, &[TIME], &[]);
    let now = json!({ "timezone": "UTC" });
    let (mut editor, session) =
        session("", &calling("mcp__time__get_current_time", now), json!([time])).await;
    let content = call_through(&mut editor, &session, "get_current_time").await;
    assert!(
        content.contains("datetime") && content.contains("UTC"),
        "the result reached the model: {content}"
    );
}

/// With `sandbox_mcp = true` the server runs in the sandbox, where `npx` may not write its
/// own folder under `~/.npm`: the failure the user and the model read names the sandbox
/// and the setting, not only npm's advice.
#[tokio::test]
async fn a_confined_server_that_is_refused_at_start_names_the_sandbox_and_the_setting() {
    let Some(npx) = launcher("HERON_NPX", "npx (Node.js)") else { return };
    if !heron_core::sandbox::support().has_landlock() {
        clients::skip_wall("Landlock is unavailable here, so `sandbox_mcp` confines nothing");
        return;
    }
    let elsewhere = outside();
    let file = elsewhere.path().join("memory.jsonl");
    let memory =
        server("memory", &npx, &["-y", MEMORY], &[("MEMORY_FILE_PATH", &file.display().to_string())]);
    let script = calling("mcp__memory__read_graph", json!({}));
    let (mut editor, session) = session("sandbox_mcp = true\n", &script, json!([memory])).await;
    let servers = settled(&mut editor, &session).await;
    let memory = &servers[0];
    assert_eq!(memory["status"], "failed", "{servers:?}");
    let reason = memory["error"].as_str().unwrap_or_default();
    assert!(reason.contains("sandbox_mcp"), "the reason names the setting: {memory}");
    assert!(reason.contains("sandbox"), "{memory}");
}

/// Heron declares the session's roots: server-filesystem started without folders (it then
/// serves the client's roots) can write in the session's cwd.
#[tokio::test]
async fn server_filesystem_without_folders_serves_the_sessions_roots() {
    let Some(npx) = launcher("HERON_NPX", "npx (Node.js)") else { return };
    let fs = server("fs", &npx, &["-y", FILESYSTEM], &[]);
    let dirs = support::scripted_home("s", "", "");
    let note = dirs.ws_path().join("from-roots.txt");
    let write = json!({ "path": note, "content": "served from the client's roots" });
    dirs.write_home("s.jsonl", &calling("mcp__fs__write_file", write));
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    editor.ask(json!("init"), "initialize", json!({ "protocolVersion": 1 })).await;
    let cwd = editor.dirs.ws();
    let answer = editor.ask(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": [fs] })).await;
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    call_through(&mut editor, &session, "write_file").await;
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "served from the client's roots");
}

/// The reference server's long-running operation reports progress; it is shown on the
/// running call (the share done and the server's message) before the call completes.
#[tokio::test]
async fn server_everything_progress_is_shown_on_the_running_call() {
    let Some(npx) = launcher("HERON_NPX", "npx (Node.js)") else { return };
    let everything = server("everything", &npx, &["-y", EVERYTHING], &[]);
    let long = json!({ "duration": 3, "steps": 6 });
    let script = calling("mcp__everything__trigger-long-running-operation", long);
    let (mut editor, session) = session("", &script, json!([everything])).await;
    let servers = settled(&mut editor, &session).await;
    assert!(servers.iter().all(|s| s["status"] == "ready"), "{servers:?}");
    let (before, answer) = editor.prompt(json!("p"), &session, "Run the long operation").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let updates: Vec<&Value> = before
        .iter()
        .filter(|m| update_kind(m) == Some("tool_call_update"))
        .map(|m| &m["params"]["update"])
        .collect();
    let progressed = updates
        .iter()
        .position(|u| u["content"].to_string().contains("% ("))
        .unwrap_or_else(|| panic!("progress was shown: {updates:?}"));
    let completed = updates.iter().position(|u| u["status"] == "completed").expect("it completed");
    assert!(progressed < completed, "progress came while it ran: {updates:?}");
}
