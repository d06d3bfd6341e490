//! The seeds' wire contract over the real binary: every transcript in
//! `conformance/seed_contract/` (one test each, named after the file), and the rows no
//! transcript can carry (command-line flags, a posture saved above a ceiling).
//! `conformance/seed_contract/README.md` maps each row of the contract to what pins it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use heron::conformance::runner::AgentCommand;
use heron::conformance::{run_file, transcript_files};
use serde_json::{Value, json};

use crate::support::process::Process;

fn group() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance").join("seed_contract")
}

/// Replays `conformance/seed_contract/<name>.ndjson` against the real binary.
fn replay(name: &str) {
    let heron = AgentCommand::Heron(PathBuf::from(env!("CARGO_BIN_EXE_heron")));
    let outcome = run_file(&group().join(format!("{name}.ndjson")), &heron, false);
    if let Err(failure) = outcome.result {
        panic!("conformance/seed_contract/{name}.ndjson failed:\n{failure}");
    }
}

macro_rules! transcripts {
    ($($name:ident),* $(,)?) => {
        const LISTED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*
    };
}

transcripts!(
    additional_directories,
    additional_directories_disabled,
    auth_required,
    config_options,
    goal_pause_resume,
    inbox,
    initialize,
    permission_mode_ceiling,
    prompt_content,
    reload_extensions,
    status_updates_declared,
    status_updates_not_declared,
    steer,
    tinycode_methods,
    tinycode_question,
    tinycode_question_unsupported,
    turn_failed,
    turn_paused,
);

#[test]
fn every_transcript_of_the_group_has_a_test_and_the_readme_names_it() {
    let files = transcript_files(&[group()]).expect("read conformance/seed_contract");
    let names: Vec<String> =
        files.iter().filter_map(|f| f.file_stem()).map(|s| s.to_string_lossy().into_owned()).collect();
    for name in &names {
        assert!(LISTED.contains(&name.as_str()), "{name}.ndjson has no test in tests/seed_contract.rs");
    }
    for name in LISTED {
        assert!(names.iter().any(|n| n == name), "{name} is listed but has no transcript");
    }
    let readme = std::fs::read_to_string(group().join("README.md")).expect("the group's README");
    for name in LISTED {
        assert!(readme.contains(&format!("`{name}`")), "README.md maps no row to {name}");
    }
}

/// A home whose default model, `script/m`, answers every prompt.
fn scripted_home() -> std::sync::Arc<crate::support::Dirs> {
    crate::support::scripted_home(
        "script",
        "default_model = \"script/m\"\n",
        "{\"steps\": [{\"text\": \"Done.\"}]}\n",
    )
}

/// The `tool_approval` option's current value in a `configOptions` array.
fn posture(config_options: &Value) -> String {
    config_options
        .as_array()
        .and_then(|options| options.iter().find(|o| o["id"] == "tool_approval"))
        .and_then(|o| o["currentValue"].as_str())
        .unwrap_or_else(|| panic!("no tool_approval option: {config_options}"))
        .to_owned()
}

#[test]
fn each_permission_mode_flag_starts_sessions_at_its_posture() {
    let dirs = scripted_home();
    // The Reasonix guide's values and what each starts at (acceptEdits: asks, with edits
    // allowed, which is Heron's `auto`).
    let cases = [
        ("read-only", "readOnly"),
        ("dontAsk", "dontAsk"),
        ("manual", "ask"),
        ("ask", "ask"),
        ("auto", "auto"),
        ("acceptEdits", "auto"),
        ("bypassPermissions", "yolo"),
    ];
    for (flag, expected) in cases {
        let mut heron = Process::spawn(&dirs.home(), &["--permission-mode", flag]);
        heron.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
        let answer = heron.request(json!(1), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }));
        assert_eq!(posture(&answer["result"]["configOptions"]), expected, "--permission-mode {flag}");
        heron.finish(Duration::from_secs(10));
    }
}

#[test]
fn plan_is_refused_as_a_permission_mode() {
    let dirs = scripted_home();
    let output = std::process::Command::new(crate::support::heron_bin())
        .args(["acp", "--permission-mode", "plan"])
        .env("HERON_HOME", dirs.home())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run heron");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--permission-mode plan"), "{stderr}");
    assert!(output.stdout.is_empty(), "stdout carries protocol messages only: {output:?}");
}

#[test]
fn a_session_saved_above_the_ceiling_opens_at_it_and_keeps_its_own_posture() {
    let dirs = scripted_home();
    let session = {
        let mut heron = Process::spawn(&dirs.home(), &[]);
        let session = heron.new_session(&dirs.ws());
        let params = json!({ "sessionId": session, "configId": "tool_approval", "value": "yolo" });
        let answer = heron.request(json!(2), "session/set_config_option", params);
        assert_eq!(posture(&answer["result"]["configOptions"]), "yolo", "{answer}");
        heron.finish(Duration::from_secs(10));
        session
    };
    let resume = |args: &[&str]| {
        let mut heron = Process::spawn(&dirs.home(), args);
        heron.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
        let params = json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] });
        let answer = heron.request(json!(1), "session/resume", params);
        heron.finish(Duration::from_secs(10));
        posture(&answer["result"]["configOptions"])
    };
    assert_eq!(resume(&["--permission-mode", "manual"]), "ask", "opened at the ceiling");
    // The session's file still holds the posture the client chose.
    assert_eq!(resume(&[]), "yolo", "the saved posture was kept");
}

#[test]
fn the_cwd_flag_takes_both_spellings() {
    let dirs = scripted_home();
    for flag in ["--cwd", "-cwd"] {
        let mut heron = Process::spawn(&dirs.home(), &[flag, &dirs.ws()]);
        let session = heron.new_session(&dirs.ws());
        assert!(!session.is_empty(), "{flag}");
        let exited = heron.finish(Duration::from_secs(10));
        assert!(exited.status.success(), "{flag}: {:?}", exited.status);
    }
}

/// The seed's MCP status values, spelled as the guide spells them: a client keys on each,
/// and only `ready` and `failed` are seen in the transcripts above.
#[test]
fn the_mcp_status_values_keep_the_seeds_spelling() {
    use heron_protocol::HeronMcpServerState as State;
    let seed = [
        (State::Ready, "ready"),
        (State::Connecting, "connecting"),
        (State::Failed, "failed"),
        (State::Pending, "pending"),
        (State::Disabled, "disabled"),
        (State::Standby, "standby"),
        (State::Idle, "idle"),
    ];
    for (state, spelled) in seed {
        assert_eq!(serde_json::to_value(state).expect("serializes"), serde_json::json!(spelled));
    }
}
