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

/// What Zed does with `terminal/create`: runs the program with the args in the cwd, with
/// its own environment (here, one holding a key the user exported), in its terminal panel.
struct ZedTerminal {
    output: String,
    code: i32,
}

impl ZedTerminal {
    fn run(params: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let args: Vec<String> = params["args"].as_array().into_iter().flatten().map(text).collect();
        let ran = Command::new(text(&params["command"]))
            .args(&args)
            .current_dir(text(&params["cwd"]))
            .env("EXPORTED_TEST_KEY", EXPORTED)
            .stdin(Stdio::null())
            .output()
            .expect("the terminal runs the program");
        let mut output = String::from_utf8_lossy(&ran.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&ran.stderr));
        Self { output, code: ran.status.code().unwrap_or(-1) }
    }
}

const EXPORTED: &str = "sk-exported-zed-4b9e1d";
const IN_ENV_FILE: &str = "sk-env-file-zed-7c2a55";

/// In Zed, `run_command` goes to Zed's terminal; what Heron asks Zed to run is its own
/// launcher, so the command there is as confined as a local one: it cannot read the home's
/// `.env`, holds no capabilities, inherits no key, and writes only in the workspace. The
/// card shows the model's command and the final update does not repeat the output.
#[test]
fn a_command_in_zeds_terminal_runs_behind_the_same_walls() {
    let dirs = crate::support::scripted_home("script", "default_model = \"script/m\"\n", "");
    std::fs::write(dirs.home().join(".env"), format!("OPENAI_API_KEY={IN_ENV_FILE}\n")).expect(".env");
    let outside = tempfile::tempdir().expect("a folder outside");
    // The command names the home's `.env` by path, as a model that guessed it would.
    let command = format!(
        "cat '{env}' 2>&1 | head -c 200; grep CapEff /proc/self/status; \
         env | grep -c -e EXPORTED_TEST_KEY -e OPENAI_API_KEY; \
         echo inside > mine.txt && echo wrote-inside; echo x > '{out}/escaped' 2>/dev/null || echo outside-refused",
        env = dirs.home().join(".env").display(),
        out = outside.path().display()
    );
    let call =
        json!({ "steps": [{ "tool_call": { "name": "run_command", "arguments": { "command": command } } }] });
    dirs.write_home("script.jsonl", &format!("{call}\n{}\n", json!({ "steps": [{ "text": "Done." }] })));
    let mut heron = Process::spawn(&dirs.home(), &["--permission-mode", "bypassPermissions"]);
    let init = heron.request(json!(0), "initialize", zed_initialize());
    assert_eq!(init["result"]["_meta"]["heron"]["sandbox"]["editorTerminals"], "launcher", "{init}");
    let opened = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = opened["result"]["sessionId"].as_str().expect("a session").to_owned();

    heron.send_prompt(json!("p"), &session, "Check the walls");
    let mut terminal: Option<ZedTerminal> = None;
    let mut created = Value::Null;
    let mut updates = Vec::new();
    let answer = heron.until_answer(&json!("p"), |heron, message| {
        let id = message["id"].clone();
        match message["method"].as_str() {
            Some("terminal/create") => {
                created = message["params"].clone();
                terminal = Some(ZedTerminal::run(&message["params"]));
                heron.send(json!({ "jsonrpc": "2.0", "id": id, "result": { "terminalId": "zed-1" } }));
            }
            Some("terminal/wait_for_exit") => {
                let code = terminal.as_ref().map_or(-1, |t| t.code);
                heron.send(json!({ "jsonrpc": "2.0", "id": id, "result": { "exitCode": code } }));
            }
            Some("terminal/output") => {
                let (output, code) =
                    terminal.as_ref().map_or((String::new(), -1), |t| (t.output.clone(), t.code));
                let result =
                    json!({ "output": output, "truncated": false, "exitStatus": { "exitCode": code } });
                heron.send(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
            }
            Some("terminal/release" | "terminal/kill") => {
                heron.send(json!({ "jsonrpc": "2.0", "id": id, "result": {} }));
            }
            Some("session/update") => updates.push(message["params"]["update"].clone()),
            _ => {}
        }
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(created["args"][0], "sandbox-exec", "Heron's launcher runs in the terminal: {created}");
    let output = terminal.map(|t| t.output).unwrap_or_default();
    assert!(!output.contains(IN_ENV_FILE), "the home's .env was read: {output}");
    assert!(output.contains("CapEff:\t0000000000000000"), "no capabilities: {output}");
    assert!(output.lines().any(|line| line == "0"), "no key inherited: {output}");
    assert!(output.contains("wrote-inside") && output.contains("outside-refused"), "{output}");
    assert!(!outside.path().join("escaped").exists());
    let call = updates.iter().find(|u| u["sessionUpdate"] == "tool_call").expect("the call");
    assert!(call["title"].as_str().is_some_and(|t| t.starts_with("Run cat")), "the model's command: {call}");
    let done = updates.iter().find(|u| u["status"] == "completed").expect("the call completed");
    let shown = done["content"][1]["content"]["text"].as_str().unwrap_or_default();
    assert!(shown.starts_with("$ cat") && shown.ends_with("Exit code: 0"), "{shown}");
    assert!(!shown.contains("CapEff:\t"), "the terminal already shows the output: {shown}");
    heron.finish(Duration::from_secs(10));
}

/// An editor that runs commands on another machine (where Heron's path does not exist)
/// cannot run the launcher: the command then runs in Heron's own process, behind the same
/// walls, and the model is told why.
#[test]
fn a_terminal_that_cannot_run_the_launcher_runs_the_command_here_instead() {
    let call = json!({ "steps": [{ "tool_call": { "name": "run_command", "arguments": { "command": "echo ran-here" } } }] });
    let script = format!("{call}\n{}\n", json!({ "steps": [{ "text": "Done." }] }));
    let dirs = crate::support::scripted_home("script", "default_model = \"script/m\"\n", &script);
    let mut heron = Process::spawn(&dirs.home(), &["--permission-mode", "bypassPermissions"]);
    heron.request(json!(0), "initialize", zed_initialize());
    let opened = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
    let session = opened["result"]["sessionId"].as_str().expect("a session").to_owned();
    heron.send_prompt(json!("p"), &session, "Run it");
    let mut program = String::new();
    let mut updates = Vec::new();
    let answer = heron.until_answer(&json!("p"), |heron, message| {
        let id = message["id"].clone();
        let result = match message["method"].as_str() {
            Some("terminal/create") => {
                program = message["params"]["command"].as_str().unwrap_or_default().to_owned();
                json!({ "terminalId": "remote-1" })
            }
            Some("terminal/wait_for_exit") => json!({ "exitCode": 127 }),
            Some("terminal/output") => {
                let output = format!("sh: 1: {program}: not found\n");
                json!({ "output": output, "truncated": false, "exitStatus": { "exitCode": 127 } })
            }
            Some("terminal/release" | "terminal/kill") => json!({}),
            Some("session/update") => {
                updates.push(message["params"]["update"].clone());
                return;
            }
            _ => return,
        };
        heron.send(json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let done = updates.iter().find(|u| u["status"] == "completed").expect("the call completed here");
    let text = done["content"].to_string();
    assert!(text.contains("ran-here"), "the command ran in Heron's process: {text}");
    assert!(text.contains("could not run Heron's sandbox launcher"), "the model is told why: {text}");
    heron.finish(Duration::from_secs(10));
}
