//! Agent skills over ACP: `SKILL.md` folders found in the project (`.heron`, `.agents` and
//! `.claude` skills folders) and in Heron's home, listed as slash commands and by name and
//! description in the system prompt, loaded with `load_skill` (a project's asking before its
//! first load, the user's never), bad ones reported in `_meta.heron.problems`, and a reload
//! picking up new ones.

use crate::acp_extensions::{home, open, write};
use crate::support::{self, update_kind};
use serde_json::{Value, json};

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}")
}

fn command<'a>(commands: &'a Value, name: &str) -> Option<&'a Value> {
    commands.as_array()?.iter().find(|c| c["name"] == name)
}

fn problems(update: &Value) -> Vec<Value> {
    update["_meta"]["heron"]["problems"].as_array().cloned().unwrap_or_default()
}

fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

fn permission_requests(messages: &[Value]) -> usize {
    messages.iter().filter(|m| m["method"] == "session/request_permission").count()
}

/// The session's stored events, from the transcript a prompt's answer names.
fn transcript(answer: &Value) -> Vec<Value> {
    let path = answer["result"]["_meta"]["heron"]["transcriptPath"].as_str().expect("a transcript path");
    std::fs::read_to_string(path)
        .expect("the transcript")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

fn told_the_model(answer: &Value) -> Vec<String> {
    transcript(answer)
        .into_iter()
        .filter(|event| event["kind"] == "tool_result")
        .map(|event| event["for_model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A script that loads the skill `name` `times` times, one call per model step, then ends.
fn loading(name: &str, times: usize) -> String {
    let call = json!({ "steps": [{ "tool_call": { "name": "load_skill", "arguments": { "name": name } } }] });
    let mut script = format!("{call}\n").repeat(times);
    script.push_str("{\"steps\": [{\"text\": \"Done.\"}]}\n");
    script
}

#[tokio::test]
async fn skills_of_all_four_folders_are_commands_and_named_in_the_system_prompt() {
    let dirs = home("{\"steps\": [{\"context\": true}]}\n");
    write(dirs.ws(), ".heron/skills/alpha/SKILL.md", &skill_md("alpha", "Heron's own", "A\n"));
    write(dirs.ws(), ".agents/skills/bravo/SKILL.md", &skill_md("bravo", "Shared with agents", "B\n"));
    write(dirs.ws(), ".claude/skills/charlie/SKILL.md", &skill_md("charlie", "Written for another", "C\n"));
    write(dirs.home(), "skills/delta/SKILL.md", &skill_md("delta", "The user's", "D\n"));
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    let commands = &update["availableCommands"];
    for (name, origin) in
        [("alpha", "project"), ("bravo", "project"), ("charlie", "project"), ("delta", "user")]
    {
        let found = command(commands, name).unwrap_or_else(|| panic!("no /{name}: {update}"));
        assert_eq!(found["_meta"]["heron"]["source"], "skill", "{found}");
        assert_eq!(found["_meta"]["heron"]["origin"], origin, "{found}");
    }
    assert_eq!(command(commands, "charlie").expect("charlie")["description"], "Written for another");
    assert!(problems(&update).is_empty(), "{update}");
    let (before, answer) = editor.prompt(json!("p"), &session, "Hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said = agent_text(&before);
    assert!(
        said.contains(
            "Skills I was offered: alpha: Heron's own; bravo: Shared with agents; charlie: Written for \
             another; delta: The user's."
        ),
        "{said}"
    );
    editor.close().await;
}

#[tokio::test]
async fn a_malformed_or_oversized_skill_is_reported_and_the_session_goes_on() {
    let dirs = home("{\"steps\": [{\"text\": \"Fine.\"}]}\n");
    write(dirs.ws(), ".heron/skills/good/SKILL.md", &skill_md("good", "Works", "Body\n"));
    write(dirs.ws(), ".heron/skills/broken/SKILL.md", "---\ndescription: x\nno pair here\n---\nBody\n");
    let huge = format!("---\nname: huge\ndescription: {}\n---\nBody\n", "x".repeat(8 * 1024));
    write(dirs.ws(), ".agents/skills/huge/SKILL.md", &huge);
    write(dirs.home(), "skills/nameless/SKILL.md", "Just a body, no front matter.\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    let commands = &update["availableCommands"];
    assert!(command(commands, "good").is_some(), "{update}");
    for bad in ["broken", "huge", "nameless"] {
        assert!(command(commands, bad).is_none(), "/{bad} is offered: {update}");
    }
    let problems = problems(&update);
    let about =
        |tail: &str| problems.iter().find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(tail))).cloned();
    let broken = about("broken/SKILL.md").unwrap_or_else(|| panic!("{problems:#?}"));
    assert_eq!(broken["line"], 3, "{broken}");
    let huge = about("huge/SKILL.md").unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(huge["message"].as_str().is_some_and(|m| m.contains("front matter larger")), "{huge}");
    assert!(about("nameless/SKILL.md").is_some(), "{problems:#?}");
    let (before, answer) = editor.prompt(json!("p"), &session, "Hello").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&before), "Fine.");
    editor.close().await;
}

#[tokio::test]
async fn a_project_skill_asks_before_its_first_load_and_not_again() {
    let dirs = home(&loading("review", 2));
    write(
        dirs.ws(),
        ".claude/skills/review/SKILL.md",
        &skill_md("review", "Review a change", "Read checklist.md, then review.\n"),
    );
    write(dirs.ws(), ".claude/skills/review/checklist.md", "- tests\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Review my change").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&before), 1, "asked once: {before:#?}");
    let told = told_the_model(&answer);
    assert_eq!(told.len(), 2, "{told:?}");
    let folder = std::fs::canonicalize(editor.dirs.ws_path().join(".claude/skills/review")).expect("folder");
    for result in &told {
        assert!(result.contains("Read checklist.md, then review."), "the body: {result}");
        assert!(result.contains(&folder.display().to_string()), "the folder: {result}");
    }
    editor.close().await;
}

#[tokio::test]
async fn a_user_skill_loads_without_asking() {
    let dirs = home(&loading("notes", 1));
    write(dirs.home(), "skills/notes/SKILL.md", &skill_md("notes", "Take notes", "Write NOTES.md.\n"));
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let (before, answer) = editor.prompt(json!("p"), &session, "Take notes").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&before), 0, "{before:#?}");
    let told = told_the_model(&answer);
    assert!(told.first().is_some_and(|t| t.contains("Write NOTES.md.")), "{told:?}");
    editor.close().await;
}

#[tokio::test]
async fn a_skill_runs_as_a_slash_command_with_its_arguments() {
    let dirs = home("{\"steps\": [{\"text\": \"On it.\"}]}\n");
    write(dirs.home(), "skills/deploy/SKILL.md", &skill_md("deploy", "Deploy a service", "Steps\n"));
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, _) = open(&mut editor).await;
    let (_, answer) = editor.prompt(json!("p"), &session, "/deploy api --fast").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let events = transcript(&answer);
    let user = events.iter().find(|e| e["kind"] == "user_message").expect("a user message");
    let text = user["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("`deploy`") && text.contains("load_skill"), "{text}");
    assert!(text.ends_with("Arguments: api --fast"), "{text}");
    assert_eq!(user["command"], "/deploy api --fast");
    let (before, _) = editor.prompt(json!("h"), &session, "/help").await;
    let help = agent_text(&before);
    assert!(help.contains("- /deploy [arguments] — Deploy a service (user skill)"), "{help}");
    editor.close().await;
}

#[tokio::test]
async fn a_reload_picks_up_a_new_skill() {
    let dirs = home("{\"steps\": [{\"text\": \"Fine.\"}]}\n");
    let mut editor = support::start_in(support::scripted_args("s"), dirs);
    let (session, update) = open(&mut editor).await;
    assert!(command(&update["availableCommands"], "fresh").is_none());
    write(editor.dirs.ws(), ".agents/skills/fresh/SKILL.md", &skill_md("fresh", "New here", "Body\n"));
    let answer =
        editor.request(json!("r"), "_heron/session/reloadExtensions", json!({ "sessionId": session })).await;
    let fresh =
        command(&answer["result"]["availableCommands"], "fresh").unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(fresh["_meta"]["heron"]["source"], "skill");
    editor.close().await;
}
