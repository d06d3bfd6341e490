//! The two official ACP v2 clients, the TypeScript SDK's and the Rust SDK's one-shot
//! client, completing sessions against the binary. `.ci/run` installs them and names them
//! in `HERON_TS_V2` and `HERON_V2_ONE_SHOT`; without them these tests say loudly that they
//! were skipped, or fail where `HERON_REQUIRE_CLIENTS` requires them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::acp_v2::WRITE;
use crate::support;

/// A client test's binary: `var`, else skipped loudly (or failed, where
/// `HERON_REQUIRE_CLIENTS` requires it).
fn client(var: &str, what: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var).map(PathBuf::from).filter(|p| p.exists());
    if found.is_none() {
        support::clients::skip(var, what);
    }
    found
}

#[test]
fn the_typescript_sdk_v2_client_completes_a_session_with_an_approved_write() {
    let Some(dir) = client("HERON_TS_V2", "the TypeScript SDK v2 client") else { return };
    let dirs = support::scripted_home("s", "", WRITE);
    let output = Command::new("node")
        .arg(dir.join("client.mjs"))
        .args(["--cwd", &dirs.ws(), "--prompt", "Leave a note", "--timeout", "60", "--"])
        .arg(support::heron_bin())
        .args(["acp", "--protocol", "v2", "--model", "s/m", "--validate"])
        .env("HERON_HOME", dirs.home())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client failed:\n{stdout}\n{stderr}");
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no summary ({e}):\n{stdout}"));
    assert_eq!(summary["schemaErrors"], json!([]), "{summary}");
    assert_eq!(summary["violations"], json!([]), "{summary}");
    assert_eq!(summary["toolCalls"], 1, "{summary}");
    assert_eq!(summary["permissionRequests"], 1, "{summary}");
    assert_eq!(summary["stopReason"], "end_turn", "{summary}");
    let written = std::fs::read_to_string(Path::new(&dirs.ws()).join("NOTES.md")).expect("written");
    assert_eq!(written, "# Notes\n");
}

#[test]
fn the_rust_sdk_v2_one_shot_client_completes_a_prompt() {
    let Some(bin) = client("HERON_V2_ONE_SHOT", "the Rust SDK's v2_one_shot_client") else { return };
    let dirs = support::scripted_home("s", "", WRITE);
    let agent = format!(
        "HERON_HOME={} {} acp --protocol v2 --model s/m --validate",
        dirs.home().display(),
        support::heron_bin().display()
    );
    // The client waits forever on an agent that never goes idle: bound it here.
    let output = Command::new("timeout")
        .arg("120")
        .arg(bin)
        .args(["--command", &agent, "Leave a note"])
        .current_dir(dirs.ws())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client failed ({:?}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("Done."), "the agent's text reached it:\n{stdout}\n{stderr}");
    assert!(stderr.contains("Session is idle: Some(EndTurn)"), "{stderr}");
    // It rejects every permission request: the file is untouched.
    assert!(!Path::new(&dirs.ws()).join("NOTES.md").exists(), "{stderr}");
}
