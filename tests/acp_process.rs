//! The real `heron acp` process, spawned and spoken to over its stdio as an editor does, for
//! what the in-process suites (`support::start_in`) cover in memory: MCP servers over
//! streamable HTTP and SSE with a server's elicitation, a reload of the extensions, a plugin
//! action, `--safe-mode`, the delivery preset's paused outcome under `verify_command`, the
//! status and its cost, the inbox's idempotent enqueue (across a restart too), and
//! `--profile` (economy, and an unknown one named under the flag that was typed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mcp_python::HttpServer;
use crate::support::server_mock::{Answer, MockServer, sse};
use crate::support::servers::{delta, finish};
use crate::support::{self, Dirs, Process, update_kind};

/// A home whose model `s/m` plays `script`, with `config` (top-level keys) first in its
/// `config.toml`.
fn scripted(config: &str, script: &str) -> Arc<Dirs> {
    support::scripted_home("s", config, script)
}

/// `heron acp --validate --model s/m ARGS` on `dirs`' home.
fn spawn(dirs: &Dirs, args: &[&str]) -> Process {
    let mut all = vec!["--validate", "--model", "s/m"];
    all.extend_from_slice(args);
    Process::spawn(&dirs.home(), &all)
}

/// `initialize` with `capabilities` as the client's.
fn initialize(heron: &mut Process, capabilities: Value) {
    let answer = heron.request(
        json!("init"),
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": capabilities }),
    );
    assert!(answer["result"].is_object(), "{answer}");
}

/// `session/new` in `cwd` with MCP `servers`: the session id and the commands update that
/// follows the answer.
fn open(heron: &mut Process, cwd: &str, servers: Value) -> (String, Value) {
    let answer = heron.request(json!("new"), "session/new", json!({ "cwd": cwd, "mcpServers": servers }));
    let session = answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned();
    (session, commands_update(heron))
}

/// The next `available_commands_update`, passing over what comes before it.
fn commands_update(heron: &Process) -> Value {
    loop {
        let message = heron.next();
        if update_kind(&message) == Some("available_commands_update") {
            return message["params"]["update"].clone();
        }
    }
}

/// The command names an `available_commands_update` lists.
fn names(update: &Value) -> Vec<String> {
    update["availableCommands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// Sends a prompt of `text` and plays the editor until its answer: each request Heron sends
/// is answered with `reply(request)`. Every message before the answer, and the answer.
fn turn(
    heron: &mut Process,
    id: &str,
    session: &str,
    text: &str,
    reply: impl Fn(&Value) -> Value,
) -> (Vec<Value>, Value) {
    let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
    heron.send(json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params }));
    let mut before = Vec::new();
    loop {
        let message = heron.next();
        if message["id"] == id && message.get("method").is_none() {
            return (before, message);
        }
        if message.get("method").is_some() && message.get("id").is_some() {
            let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": reply(&message) });
            heron.send(answer);
        }
        before.push(message);
    }
}

/// An editor that allows a permission question once and answers nothing else.
fn allowing(request: &Value) -> Value {
    assert_eq!(request["method"], "session/request_permission", "{request}");
    json!({ "outcome": { "outcome": "selected", "optionId": "allow_once" } })
}

/// The text of each agent message chunk, joined.
fn said(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == Some("agent_message_chunk"))
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// The text output of each tool call that completed, in order.
fn outputs(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| {
            update_kind(m) == Some("tool_call_update") && m["params"]["update"]["status"] == "completed"
        })
        .filter_map(|m| m["params"]["update"]["content"][0]["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// The session's MCP servers once none is connecting any more (40 s at most).
fn settled_servers(heron: &mut Process, session: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let answer = heron.request(json!("mcp"), "_heron/session/mcpStatus", json!({ "sessionId": session }));
        let servers = answer["result"]["servers"].clone();
        let connecting = servers.as_array().into_iter().flatten().any(|s| s["status"] == "connecting");
        if !connecting || Instant::now() > deadline {
            return servers;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn mcp_servers_over_http_and_sse_serve_the_model_and_a_servers_form_reaches_the_editor() {
    let Some(http) = HttpServer::start(&[]) else { return };
    let Some(legacy) = HttpServer::start(&["--transport", "sse"]) else { return };
    http.wait_listening();
    legacy.wait_listening();
    let script = [
        json!({ "steps": [{ "tool_call": { "name": "mcp__web__ask_color", "arguments": {} } }] }),
        json!({ "steps": [{ "tool_call": { "name": "mcp__old__echo", "arguments": { "text": "over sse" } } }] }),
        json!({ "steps": [{ "text": "Done." }] }),
    ]
    .map(|turn| turn.to_string() + "\n")
    .concat();
    let dirs = scripted("", &script);
    let mut heron = spawn(&dirs, &[]);
    initialize(&mut heron, json!({ "elicitation": { "form": {} } }));
    let servers = json!([
        { "type": "http", "name": "web", "url": http.url("/mcp"), "headers": [] },
        { "type": "sse", "name": "old", "url": legacy.url("/sse"), "headers": {} },
    ]);
    let (session, _) = open(&mut heron, &dirs.ws(), servers);
    let ready: Vec<(Value, Value)> = settled_servers(&mut heron, &session)
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["name"].clone(), s["status"].clone()))
        .collect();
    assert_eq!(ready, [(json!("web"), json!("ready")), (json!("old"), json!("ready"))]);
    let (before, answer) =
        turn(&mut heron, "p", &session, "Use the servers", |request| match request["method"].as_str() {
            Some("elicitation/create") => {
                assert_eq!(request["params"]["message"], "MCP server asks: Which color?", "{request}");
                json!({ "action": "accept", "content": { "color": "green", "note": "hi" } })
            }
            _ => allowing(request),
        });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(before.iter().filter(|m| m["method"] == "elicitation/create").count(), 1);
    let outputs = outputs(&before);
    let color: Value = serde_json::from_str(&outputs[0]).unwrap_or_else(|_| panic!("{outputs:?}"));
    assert_eq!(color, json!({ "action": "accept", "color": "green", "note": "hi" }));
    assert_eq!(outputs[1], "over sse");
}

#[test]
fn a_reload_reads_command_files_added_after_the_session_opened() {
    let dirs = scripted("", "");
    let mut heron = spawn(&dirs, &[]);
    initialize(&mut heron, json!({}));
    let (session, commands) = open(&mut heron, &dirs.ws(), json!([]));
    assert!(!names(&commands).contains(&"greet".to_owned()), "{commands}");
    let folder = std::path::Path::new(&dirs.ws()).join(".heron/commands");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(
        folder.join("greet.md"),
        "---\ndescription: Greet someone\n---\nSay hello to $ARGUMENTS.\n",
    )
    .expect("write");
    let answer =
        heron.request(json!("r"), "_heron/session/reloadExtensions", json!({ "sessionId": session }));
    let listed: Vec<&str> = answer["result"]["availableCommands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(listed.contains(&"greet"), "{answer}");
    // The editor's list follows the answer.
    assert!(names(&commands_update(&heron)).contains(&"greet".to_owned()));
}

#[test]
fn a_plugin_action_runs_as_its_prompt_template() {
    let server = MockServer::start(|_, _| {
        Answer::Stream(sse(&[delta(json!({ "content": "Five bullets." })), finish("stop")]))
    });
    let dirs = Dirs::new();
    let config = format!(
        "[providers.net]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\nmax_retries = 0\n",
        server.origin
    );
    dirs.write_home("config.toml", &config);
    let plugin = dirs.home().join("plugins/docs");
    std::fs::create_dir_all(&plugin).expect("mkdir");
    std::fs::write(
        plugin.join("plugin.toml"),
        "[actions.summarize]\ndescription = \"Summarize a file\"\nargument_hint = \"path\"\n\
         prompt = \"Summarize $ARGUMENTS in five bullet points.\"\n",
    )
    .expect("write");
    let mut heron = Process::spawn(&dirs.home(), &["--validate", "--model", "net/m"]);
    initialize(&mut heron, json!({}));
    let (session, commands) = open(&mut heron, &dirs.ws(), json!([]));
    let action = commands["availableCommands"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "docs:summarize")
        .unwrap_or_else(|| panic!("{commands}"));
    assert_eq!(action["_meta"]["heron"], json!({ "source": "plugin", "plugin": "docs" }));
    let (before, answer) = turn(&mut heron, "p", &session, "/docs:summarize README.md", allowing);
    assert_eq!(
        (answer["result"]["stopReason"].as_str(), said(&before).as_str()),
        (Some("end_turn"), "Five bullets.")
    );
    let asked = server.seen().last().cloned().expect("a model request");
    let prompt = asked.messages().last().cloned().expect("a message");
    assert!(prompt.to_string().contains("Summarize README.md in five bullet points."), "{prompt}");
}

#[test]
fn safe_mode_reads_no_extensions_and_starts_no_mcp_server_but_serves_as_usual() {
    let dirs = scripted("", &json!({ "steps": [{ "text": "Hello." }] }).to_string());
    std::fs::create_dir_all(dirs.home().join("commands")).expect("mkdir");
    dirs.write_home("commands/mine.md", "Do my thing.\n");
    let plugin = dirs.home().join("plugins/docs");
    std::fs::create_dir_all(&plugin).expect("mkdir");
    std::fs::write(plugin.join("plugin.toml"), "[actions.summarize]\nprompt = \"Summarize.\"\n")
        .expect("write");
    let project = std::path::Path::new(&dirs.ws()).join(".heron/commands");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(project.join("review.md"), "Review $ARGUMENTS.\n").expect("write");
    // A server that leaves a mark if it is ever started.
    let marker = std::path::Path::new(&dirs.ws()).join("started");
    let servers = json!([{ "name": "tools", "command": "/bin/sh", "args": ["-c", format!("touch '{}'", marker.display())], "env": [] }]);

    let mut heron = spawn(&dirs, &["--safe-mode"]);
    initialize(&mut heron, json!({}));
    let (session, commands) = open(&mut heron, &dirs.ws(), servers);
    let listed = names(&commands);
    for extension in ["mine", "review", "docs:summarize"] {
        assert!(!listed.contains(&extension.to_owned()), "{extension}: {listed:?}");
    }
    assert!(listed.contains(&"help".to_owned()), "Heron's own commands stay: {listed:?}");
    let status = heron.request(json!("mcp"), "_heron/session/mcpStatus", json!({ "sessionId": session }));
    assert_eq!(status["result"]["servers"][0]["status"], "disabled", "{status}");
    let snapshot = heron.request(json!("st"), "_heron/session/status", json!({ "sessionId": session }));
    assert_eq!(snapshot["result"]["status"]["approvalPosture"], "ask", "safe mode changes no permission");
    let (_, answer) = turn(&mut heron, "p", &session, "Hi", allowing);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!marker.exists(), "the server was never started");
}

#[test]
fn with_a_verify_command_only_its_run_verifies_a_delivery_turns_changes() {
    let call = |name: &str, arguments: Value| json!({ "steps": [{ "tool_call": { "name": name, "arguments": arguments } }] });
    let script = [
        // The first turn changes a file and runs a command, not the verify command.
        call("write_file", json!({ "path": "note.txt", "content": "hello\n" })),
        call("run_command", json!({ "command": "true" })),
        json!({ "steps": [{ "text": "Done." }] }),
        // The second changes it again and runs the verify command.
        call("write_file", json!({ "path": "note.txt", "content": "hello again\n" })),
        call("run_command", json!({ "command": "test -s note.txt" })),
        json!({ "steps": [{ "text": "Done and checked." }] }),
    ]
    .map(|turn| turn.to_string() + "\n")
    .concat();
    let dirs = scripted("verify_command = \"test -s note.txt\"\n", &script);
    let mut heron = spawn(&dirs, &["--preset", "delivery", "--permission-mode", "bypassPermissions"]);
    initialize(&mut heron, json!({}));
    let (session, _) = open(&mut heron, &dirs.ws(), json!([]));

    let (before, answer) = turn(&mut heron, "p1", &session, "Leave a note", allowing);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["heron"]["turnOutcome"],
        json!({ "kind": "paused", "reason": "1 change to files since the last successful check: `test -s note.txt` did not run" })
    );
    assert!(said(&before).ends_with("[paused] Not verified, 1 change to files since the last successful check: `test -s note.txt` did not run. Run the checks, or ask me to."), "{}", said(&before));

    let (before, answer) = turn(&mut heron, "p2", &session, "Change it and check", allowing);
    assert_eq!(answer["result"]["_meta"]["heron"]["turnOutcome"], json!({ "kind": "completed" }), "{answer}");
    assert!(!said(&before).contains("[paused]"), "{}", said(&before));
}

/// A home whose model `s/m` costs 2.0 in and 8.0 out per million tokens (EUR), with a
/// context window of `window` when given, and reports 1,000 in and 100 out per turn.
fn priced(window: Option<u64>) -> Arc<Dirs> {
    let turn =
        json!({ "steps": [{ "text": "Ok." }, { "usage": { "input": 1000, "output": 100 } }] }).to_string();
    let dirs = scripted("", &format!("{turn}\n{turn}\n"));
    let config = std::fs::read_to_string(dirs.home().join("config.toml")).expect("config");
    let window = window.map(|w| format!("context_window = {w}\n")).unwrap_or_default();
    let prices = "[providers.s.prices.m]\ninput = 2.0\noutput = 8.0\ncurrency = \"EUR\"\n";
    dirs.write_home("config.toml", &format!("{config}{window}{prices}"));
    dirs
}

/// What one turn of [`priced`] costs.
const TURN_COST: f64 = (1000.0 * 2.0 + 100.0 * 8.0) / 1e6;

#[test]
fn the_status_and_each_usage_update_carry_the_sessions_cost() {
    let dirs = priced(Some(50_000));
    let mut heron = spawn(&dirs, &[]);
    initialize(&mut heron, json!({ "_meta": { "heron": { "statusUpdates": { "supported": true } } } }));
    let (session, _) = open(&mut heron, &dirs.ws(), json!([]));
    for (id, turns) in [("p1", 1.0), ("p2", 2.0)] {
        let (before, _) = turn(&mut heron, id, &session, "go", allowing);
        let usage = before.iter().rfind(|m| update_kind(m) == Some("usage_update")).expect("a usage_update");
        let cost = &usage["params"]["update"]["cost"];
        assert_eq!(cost["currency"], "EUR", "{usage}");
        assert!((cost["amount"].as_f64().unwrap_or(0.0) - turns * TURN_COST).abs() < 1e-12, "{usage}");
        let idle =
            before.iter().rfind(|m| m["method"] == "_heron/session/status_update").expect("a status update");
        let quote = &idle["params"]["status"]["costQuote"];
        assert!((quote["totalCost"].as_f64().unwrap_or(0.0) - turns * TURN_COST).abs() < 1e-12, "{quote}");
        assert_eq!((quote["currency"].as_str(), quote["costComplete"].as_bool()), (Some("EUR"), Some(true)));
        assert_eq!(idle["params"]["status"]["contextUsage"], json!({ "used": 1100, "size": 50_000 }));
    }
    // Without a window the meter has nothing to show, and the cost still adds up.
    let dirs = priced(None);
    let mut heron = spawn(&dirs, &[]);
    initialize(&mut heron, json!({}));
    let (session, _) = open(&mut heron, &dirs.ws(), json!([]));
    let (before, _) = turn(&mut heron, "p", &session, "go", allowing);
    assert!(!before.iter().any(|m| update_kind(m) == Some("usage_update")), "{before:#?}");
    let status = heron.request(json!("st"), "_heron/session/status", json!({ "sessionId": session }));
    let quote = &status["result"]["status"]["costQuote"];
    assert!((quote["totalCost"].as_f64().unwrap_or(0.0) - TURN_COST).abs() < 1e-12, "{status}");
    assert!(status["result"]["status"].get("contextUsage").is_none(), "{status}");
}

#[test]
fn an_enqueue_retried_with_its_idempotency_key_returns_the_first_item_also_after_a_restart() {
    let dirs = scripted("", "");
    let enqueue = |heron: &mut Process, id: &str, session: &str, text: &str| {
        let params = json!({ "sessionId": session, "idempotencyKey": "deploy-42",
            "prompt": [{ "type": "text", "text": text }] });
        heron.request(json!(id), "_heron/inbox/enqueue", params)["result"].clone()
    };
    let mut first = spawn(&dirs, &[]);
    initialize(&mut first, json!({}));
    let (session, _) = open(&mut first, &dirs.ws(), json!([]));
    // Paused, so the item waits and its status stays `queued` across the restart.
    first.request(json!("pause"), "_heron/inbox/setPaused", json!({ "sessionId": session, "paused": true }));
    let made = enqueue(&mut first, "e1", &session, "Ship it");
    assert_eq!(
        (made["idempotent"].as_bool(), made["disposition"].as_str()),
        (Some(false), Some("queued_followup")),
        "{made}"
    );
    let again = enqueue(&mut first, "e2", &session, "Something else");
    assert_eq!(
        (again["itemId"].clone(), again["idempotent"].as_bool()),
        (made["itemId"].clone(), Some(true)),
        "{again}"
    );
    first.close_input();
    assert!(first.exited_within(Duration::from_secs(10)).is_some(), "heron exits at the end of its input");

    let mut second = spawn(&dirs, &[]);
    initialize(&mut second, json!({}));
    let loaded = second.request(
        json!("load"),
        "session/load",
        json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] }),
    );
    assert!(loaded["result"].is_object(), "{loaded}");
    let after = enqueue(&mut second, "e3", &session, "Ship it");
    assert_eq!(
        (after["itemId"].clone(), after["idempotent"].as_bool()),
        (made["itemId"].clone(), Some(true)),
        "{after}"
    );
    let list = second.request(json!("l"), "_heron/inbox/list", json!({ "sessionId": session }));
    assert_eq!(list["result"]["items"].as_array().map(Vec::len), Some(1), "nothing more was added: {list}");
}

#[test]
fn the_legacy_profile_economy_starts_sessions_light_and_an_unknown_profile_is_named_as_typed() {
    let dirs = Dirs::new();
    let mut heron =
        Process::spawn(&dirs.home(), &["--validate", "--model", "demo/demo", "--profile", "economy"]);
    initialize(&mut heron, json!({}));
    let answer = heron.request(json!("new"), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let preset = answer["result"]["configOptions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["id"] == "agent_preset")
        .unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(preset["currentValue"], "light", "{preset}");

    let refused = std::process::Command::new(support::heron_bin())
        .args(["acp", "--profile", "bogus"])
        .env("HERON_HOME", dirs.home())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("heron runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("--profile bogus is not one of economy, balanced, delivery"), "{stderr}");
    assert!(!stderr.contains("--preset"), "the flag typed is the flag named: {stderr}");
    let help = std::process::Command::new(support::heron_bin())
        .args(["acp", "--help"])
        .output()
        .expect("heron runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--profile <PROFILE>") && help.contains("Legacy name of --preset"), "{help}");
}
