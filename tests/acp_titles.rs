//! Session titles over the protocol: a session nobody titled is named by its first
//! prompt (its first line, clipped), told to the editor as `session_info_update` and shown
//! by `session/list`; `--title` wins and is never replaced.

use serde_json::{Value, json};

use crate::support::{self, update_kind};
use heron::cli::acp::AcpArgs;

fn info_updates(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("session_info_update"))
        .map(|m| &m["params"]["update"])
        .collect()
}

async fn listed_title(editor: &mut support::Editor, session: &str) -> Value {
    let listed = editor.ask(json!("list"), "session/list", json!({})).await;
    let sessions = listed["result"]["sessions"].as_array().cloned().unwrap_or_default();
    let entry =
        sessions.into_iter().find(|s| s["sessionId"] == session).unwrap_or_else(|| panic!("{listed}"));
    entry["title"].clone()
}

#[tokio::test]
async fn the_first_prompt_titles_the_session_once() {
    let mut editor = support::start();
    let session = editor.new_session().await;
    let (seen, answer) =
        editor.prompt(json!("p1"), &session, "\n  Fix the flaky build  \nand explain why").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let infos = info_updates(&seen);
    assert_eq!(infos.len(), 1, "{seen:#?}");
    assert_eq!(infos[0]["title"], "Fix the flaky build");
    let updated_at = infos[0]["updatedAt"].as_str().expect("updatedAt");
    assert!(updated_at.len() >= 20 && updated_at.as_bytes()[10] == b'T', "an RFC 3339 time: {updated_at}");
    assert_eq!(listed_title(&mut editor, &session).await, "Fix the flaky build");
    // Later prompts leave it alone.
    let (seen, _) = editor.prompt(json!("p2"), &session, "Something else").await;
    assert!(info_updates(&seen).is_empty(), "{seen:#?}");
    assert_eq!(listed_title(&mut editor, &session).await, "Fix the flaky build");
    editor.close().await;
}

#[tokio::test]
async fn a_title_given_with_the_flag_wins() {
    let mut editor = support::start_with(AcpArgs { title: Some("Mine".into()), ..support::demo_args() });
    let session = editor.new_session().await;
    let (seen, _) = editor.prompt(json!("p1"), &session, "Fix the flaky build").await;
    assert!(info_updates(&seen).is_empty(), "{seen:#?}");
    assert_eq!(listed_title(&mut editor, &session).await, "Mine");
    editor.close().await;
}
