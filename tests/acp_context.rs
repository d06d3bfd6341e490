//! What the model knows when it starts, read from the requests a loopback model server got
//! from the real binary: the working context and the instruction files (the user's own in
//! HERON_HOME, the repository root's, and a nested `CLAUDE.md` given only once a tool works in
//! its folder), and every request repeating the one before it byte for byte while the
//! context changes between turns.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::server_mock::{Answer, MockServer, Seen, sse};
use crate::support::servers::{delta, finish};
use crate::support::{Dirs, Process, git};

const USER_RULE: &str = "User rule: sign every answer with a heron.";
const ROOT_RULE: &str = "Root rule: run `make check` before you finish.";
const NESTED_RULE: &str = "Nested rule: the lib folder uses tabs.";

/// A model that lists `lib` on the first request, then answers "Listed." to every later
/// request.
fn model() -> MockServer {
    MockServer::start(|n, _| {
        if n == 0 {
            let arguments = json!({ "path": "lib" }).to_string();
            Answer::Stream(sse(&[
                delta(json!({ "tool_calls": [{ "index": 0, "id": "call_list", "type": "function",
                    "function": { "name": "list_files", "arguments": arguments } }] })),
                finish("tool_calls"),
            ]))
        } else {
            Answer::Stream(sse(&[delta(json!({ "content": "Listed." })), finish("stop")]))
        }
    })
}

/// The text of every message of `request` of `role`, joined.
fn said(request: &Seen, role: &str) -> String {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == role)
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => {
                parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
            }
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A repository `repo` with an `AGENTS.md` at its root and a nested `lib/CLAUDE.md`, the
/// session's cwd `repo/app`, and the user's own `AGENTS.md` in HERON_HOME.
fn project(dirs: &Dirs) -> std::path::PathBuf {
    let repo = Path::new(&dirs.ws()).join("repo");
    let app = repo.join("app");
    std::fs::create_dir_all(app.join("lib")).expect("folders");
    std::fs::create_dir_all(repo.join(".git")).expect(".git");
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    std::fs::write(repo.join("AGENTS.md"), format!("# Agents\n{ROOT_RULE}\n")).expect("root AGENTS.md");
    std::fs::write(app.join("lib/CLAUDE.md"), format!("{NESTED_RULE}\n")).expect("nested CLAUDE.md");
    std::fs::write(app.join("lib/code.rs"), "fn main() {}\n").expect("code");
    dirs.write_home("AGENTS.md", &format!("{USER_RULE}\n"));
    app
}

fn start(dirs: &Dirs, server: &MockServer) -> Process {
    let config = format!(
        "default_model = \"net/m\"\n[providers.net]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\nmax_retries = 0\n",
        server.origin
    );
    dirs.write_home("config.toml", &config);
    Process::spawn(&dirs.home(), &["--permission-mode", "bypassPermissions"])
}

fn prompt(heron: &mut Process, session: &str, id: &str) {
    heron.send_prompt(json!(id), session, "Look at lib");
    let answer = heron.until_answer(&json!(id), |_, _| {});
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[test]
fn instruction_files_reach_the_model_each_at_its_time_and_once() {
    let dirs = Dirs::new();
    let app = project(&dirs);
    let server = model();
    let mut heron = start(&dirs, &server);
    let session = heron.new_session(&app.display().to_string());
    prompt(&mut heron, &session, "p1");
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "the listing, then the answer");

    // The first request: the user's rules, then the repository's; not the nested folder's.
    let first = said(&seen[0], "user");
    let (user, root) =
        (first.find(USER_RULE).expect("the user's own"), first.find(ROOT_RULE).expect("the root's"));
    assert!(user < root, "general first: {first}");
    assert!(!first.contains(NESTED_RULE), "a nested folder's rules wait for work there: {first}");
    assert!(first.contains(&format!("Working directory: {}", app.display())), "{first}");
    assert!(first.contains(", on main"), "the branch: {first}");
    assert!(first.contains("Tool approval: yolo"), "{first}");

    // The listing of lib carried its folder's rules, as the tool's result.
    let tool = said(&seen[1], "tool");
    assert!(tool.contains(NESTED_RULE) && tool.contains("lib/CLAUDE.md"), "{tool}");

    // The status names all three.
    let status = heron.request(json!("s"), "_heron/session/status", json!({ "sessionId": session }));
    let loaded: Vec<String> =
        serde_json::from_value(status["result"]["status"]["instructions"].clone()).expect("a list");
    assert_eq!(loaded.len(), 3, "{loaded:?}");
    assert!(
        loaded[0].ends_with("AGENTS.md")
            && loaded[1].ends_with("repo/AGENTS.md")
            && loaded[2].ends_with("lib/CLAUDE.md"),
        "{loaded:?}"
    );

    // Once: the next turn's new messages repeat none of them.
    prompt(&mut heron, &session, "p2");
    let seen = server.seen();
    let third = &seen[2];
    let new = &third.messages()[seen[1].messages().len()..];
    let repeated: Vec<&Value> = new
        .iter()
        .filter(|m| m.to_string().contains(NESTED_RULE) || m.to_string().contains(ROOT_RULE))
        .collect();
    assert!(repeated.is_empty(), "given again: {repeated:?}");
    heron.finish(std::time::Duration::from_secs(10));
}

#[test]
fn every_request_repeats_the_one_before_while_the_context_changes_between_turns() {
    let dirs = Dirs::new();
    let app = project(&dirs);
    let server =
        MockServer::start(|_, _| Answer::Stream(sse(&[delta(json!({ "content": "Ok." })), finish("stop")])));
    let mut heron = start(&dirs, &server);
    let session = heron.new_session(&app.display().to_string());
    let repo = app.parent().expect("repo").to_path_buf();
    for turn in 0..10 {
        // Between turns the branch moves and the root's instructions change, now and then.
        if turn == 3 {
            std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature\n").expect("HEAD");
        }
        if turn == 6 {
            std::fs::write(
                repo.join("AGENTS.md"),
                format!("# Agents\n{ROOT_RULE}\nAlso: keep commits small.\n"),
            )
            .expect("edit");
        }
        prompt(&mut heron, &session, &format!("p{turn}"));
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 10);
    for (n, pair) in seen.windows(2).enumerate() {
        let (before, after) = (pair[0].messages(), pair[1].messages());
        assert!(after.len() > before.len(), "request {} grew", n + 1);
        assert_eq!(&after[..before.len()], before, "request {} repeats request {n} byte for byte", n + 1);
        assert_eq!(pair[0].body["tools"], pair[1].body["tools"], "the tools too");
    }
    let changes: Vec<usize> = seen
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.messages().last().is_some_and(|m| m.to_string().contains("The working context changed"))
        })
        .map(|(n, _)| n)
        .collect();
    assert_eq!(changes, [3, 6], "the context is sent again only when it changed");
    assert!(said(&seen[3], "user").contains(", on feature"));
    assert!(seen[6].messages().last().is_some_and(|m| m.to_string().contains("keep commits small")));
    heron.finish(std::time::Duration::from_secs(10));
}

#[test]
fn each_turn_says_whether_tracked_files_changed_as_they_are_when_it_starts() {
    let dirs = Dirs::new();
    let repo = Path::new(&dirs.ws()).join("tracked");
    std::fs::create_dir_all(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("notes.txt"), "one\n").expect("a tracked file");
    git(&repo, &["add", "notes.txt"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let server =
        MockServer::start(|_, _| Answer::Stream(sse(&[delta(json!({ "content": "Ok." })), finish("stop")])));
    let mut heron = start(&dirs, &server);
    let session = heron.new_session(&repo.display().to_string());
    prompt(&mut heron, &session, "clean");
    std::fs::write(repo.join("notes.txt"), "two\n").expect("a change");
    prompt(&mut heron, &session, "changed");
    git(&repo, &["commit", "-q", "-am", "second"]);
    prompt(&mut heron, &session, "committed");
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    let told = |n: usize| said(&seen[n], "user");
    assert!(told(0).contains("on main; no uncommitted changes to tracked files"), "{}", told(0));
    assert!(told(1).contains("on main; tracked files have uncommitted changes"), "{}", told(1));
    let last = seen[2].messages().last().map(Value::to_string).unwrap_or_default();
    assert!(last.contains("no uncommitted changes to tracked files"), "clean again: {last}");
    heron.finish(std::time::Duration::from_secs(10));
}
