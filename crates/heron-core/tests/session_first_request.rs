//! The first request a session sends, as a reviewed snapshot (`snapshots/`): the system
//! prompt, the working context opening the prompt, and every tool offered. A change to any of
//! them shows in review as a diff of this file; `cargo insta review` (or `INSTA_UPDATE=always`)
//! accepts one. Paths, the date and what depends on the machine are replaced by names.

use serde_json::{Value, json};

use crate::support::served::Served;
use crate::support::server_mock::{Answer, MockServer, sse};
use crate::support::servers::{delta, finish};

/// The request as people read it: each message's role and text, then each tool.
fn readable(body: &Value) -> String {
    let mut out = String::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        let text = match &message["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => {
                parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n\n")
            }
            other => other.to_string(),
        };
        out.push_str(&format!("=== {}\n{text}\n\n", message["role"].as_str().unwrap_or("?")));
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        let function = &tool["function"];
        let parameters = serde_json::to_string_pretty(&function["parameters"]).unwrap_or_default();
        out.push_str(&format!(
            "=== tool {}\n{}\n{parameters}\n\n",
            function["name"].as_str().unwrap_or("?"),
            function["description"].as_str().unwrap_or("")
        ));
    }
    out
}

/// `text` with what differs between runs and machines named instead.
fn normalized(text: &str, ws: &std::path::Path) -> String {
    let mut text = text.replace(&ws.display().to_string(), "<WORKSPACE>");
    for (starts, shown) in [
        ("Platform: ", "Platform: <PLATFORM>"),
        ("Today's date: ", "Today's date: <DATE>"),
        ("Commands run ", "Commands run <SANDBOX>"),
    ] {
        text = text
            .lines()
            .map(|line| if line.starts_with(starts) { shown.to_owned() } else { line.to_owned() })
            .collect::<Vec<_>>()
            .join("\n");
    }
    text
}

#[tokio::test]
async fn the_first_request_is_the_reviewed_prompt_context_and_tools() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(sse(&[delta(json!({ "content": "Done." })), finish("stop")]))
    });
    let served = Served::open(&format!("kind = \"openai\"\nbase_url = \"{}/v1\"\n", server.origin)).await;
    std::fs::write(served.ws.join("AGENTS.md"), "Run `make check` before you say a change is done.\n")
        .expect("AGENTS.md");
    let (_, result) = served.prompt("Fix the failing test in a.txt").await;
    assert!(result.is_ok(), "{result:?}");
    let seen = server.seen();
    let ws = served.ws.canonicalize().expect("canonical");
    insta::assert_snapshot!("first_request", normalized(&readable(&seen[0].body), &ws));
}
