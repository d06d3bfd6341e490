//! Zed as its users run Heron, over the real binary: Zed's own `initialize` (the
//! capabilities Zed's ACP client sends: editor files and terminals, terminal auth, boolean
//! config options, form and url elicitation, `_meta.terminal_output`), and the first run
//! that ends in Zed's terminal panel.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Dirs, Process};

/// The `initialize` params Zed sends (its client capabilities, without beta features).
pub fn zed_initialize() -> Value {
    json!({
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": { "readTextFile": true, "writeTextFile": true },
            "terminal": true,
            "auth": { "terminal": true },
            "session": { "configOptions": { "boolean": {} } },
            "elicitation": { "form": {}, "url": {} },
            "_meta": { "terminal_output": true, "terminal-auth": true }
        },
        "clientInfo": { "name": "zed", "version": "0.220.0" }
    })
}

#[test]
fn a_setup_finished_in_zeds_terminal_counts_on_the_same_process() {
    let dirs = Dirs::new();
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let init = heron.request(json!(0), "initialize", zed_initialize());
    let method = &init["result"]["authMethods"][0];
    assert_eq!(
        (method["type"].as_str(), method["id"].as_str()),
        (Some("terminal"), Some("heron-setup")),
        "{init}"
    );
    let new = json!({ "cwd": dirs.ws(), "mcpServers": [] });
    let refused = heron.request(json!(1), "session/new", new.clone());
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    // Zed shows the message, and only when it is not the code's default text.
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("run `heron setup` in a terminal"), "{message}");

    // What Zed's terminal panel runs: this binary with the method's args, answered by a person.
    let args: Vec<String> = method["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let mut setup = Command::new(crate::support::heron_bin())
        .arg("acp")
        .args(&args)
        .env("HERON_HOME", dirs.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the setup");
    setup.stdin.take().expect("stdin").write_all(b"llamacpp\n\n\nlocal-model\n\n").expect("answer the setup");
    let done = setup.wait_with_output().expect("the setup ends");
    assert!(done.status.success(), "{done:?}");
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(said.contains("go back to your editor and continue"), "{said}");

    // The same process, as Zed retries it: the new config counts without a restart.
    let authenticated = heron.request(json!(2), "authenticate", json!({ "methodId": "heron-setup" }));
    assert_eq!(authenticated["result"], json!({}), "{authenticated}");
    let opened = heron.request(json!(3), "session/new", new);
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    let model = opened["result"]["configOptions"]
        .as_array()
        .and_then(|options| options.iter().find(|o| o["id"] == "model"))
        .map(|o| o["currentValue"].clone());
    assert_eq!(model, Some(json!("llamacpp/local-model")));
    heron.finish(Duration::from_secs(10));
}

#[test]
fn a_config_broken_while_heron_runs_is_named_and_the_old_one_kept() {
    let dirs = crate::support::scripted_home("script", "default_model = \"script/m\"\n", "{\"steps\": []}\n");
    let mut heron = Process::spawn(&dirs.home(), &[]);
    let first = heron.new_session(&dirs.ws());
    assert!(!first.is_empty());
    dirs.write_home("config.toml", "default_model = [\n");
    let new = json!({ "cwd": dirs.ws(), "mcpServers": [] });
    let refused = heron.request(json!(5), "session/new", new.clone());
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert_eq!(refused["error"]["data"]["code"], "home.unusable", "{refused}");
    assert!(
        refused["error"]["data"]["file"].as_str().is_some_and(|f| f.ends_with("config.toml")),
        "{refused}"
    );
    assert_eq!(refused["error"]["data"]["line"], 1, "{refused}");
    // Fixed again, it counts again.
    let fixed = format!(
        "default_model = \"script/m\"\n{}",
        crate::support::scripted_provider("script", "script.jsonl")
    );
    dirs.write_home("config.toml", &fixed);
    let opened = heron.request(json!(6), "session/new", new);
    assert!(opened["result"]["sessionId"].is_string(), "{opened}");
    heron.finish(Duration::from_secs(10));
}

/// The session updates of one prompt turn, and its answer.
fn turn(heron: &mut Process, session: &str, id: &str) -> (Vec<Value>, Value) {
    heron.send_prompt(json!(id), session, "Hello");
    let mut updates = Vec::new();
    let answer = heron.until_answer(&json!(id), |_, message| {
        if message["method"] == "session/update" {
            updates.push(message["params"]["update"].clone());
        }
    });
    (updates, answer)
}

#[test]
fn a_saved_yolo_default_zed_applies_is_said_before_the_first_answer() {
    let script = "{\"steps\": [{\"text\": \"Hi.\"}]}\n{\"steps\": [{\"text\": \"Hi again.\"}]}\n";
    let dirs = crate::support::scripted_home("script", "default_model = \"script/m\"\n", script);
    let mut heron = Process::spawn(&dirs.home(), &[]);
    heron.request(json!(0), "initialize", zed_initialize());
    let opened = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = opened["result"]["sessionId"].as_str().expect("a session").to_owned();
    // Zed applies the user's saved `default_config_options` right after the session opens.
    let params = json!({ "sessionId": session, "configId": "tool_approval", "value": "yolo" });
    let set = heron.request(json!(2), "session/set_config_option", params);
    assert!(set["result"]["configOptions"].is_array(), "{set}");
    let (updates, answer) = turn(&mut heron, &session, "p1");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(
        said.first()
            .is_some_and(|first| first.starts_with("[Warning] This session's tool approval is `yolo`")
                && first.contains("/approval ask")),
        "{said:?}"
    );
    assert_eq!(said.last(), Some(&"Hi."), "{said:?}");
    let (again, _) = turn(&mut heron, &session, "p2");
    assert!(
        !again.iter().any(|u| u["content"]["text"].as_str().is_some_and(|t| t.contains("tool approval"))),
        "once"
    );
    heron.finish(Duration::from_secs(10));
}
