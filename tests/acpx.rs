//! A real ACP client, acpx (npm), drives the real binary through one approved write and one
//! command in acpx's terminal: no error lines, the diff and the command's output shown, the
//! file written; and acpx's permission policies match Heron's requests as docs/editors.md says.
//! `.ci/run` installs a pinned acpx and names it in `HERON_ACPX`; without it (and with no
//! `acpx` on PATH) the test says loudly that it was skipped, or fails where
//! `HERON_REQUIRE_CLIENTS` requires it.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{self, clients};

/// The acpx to run: `HERON_ACPX`, else (unless that one is required) `acpx` on PATH.
fn acpx() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("HERON_ACPX") {
        return Some(PathBuf::from(path));
    }
    if clients::required("HERON_ACPX") {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("acpx")).find(|candidate| candidate.is_file())
}

const SCRIPT: &str = r##"{"steps":[{"text":"I'll write a note."},{"tool_call":{"name":"write_file","arguments":{"path":"NOTES.md","content":"# Notes\n\nHeron was here.\n"}}}]}
{"steps":[{"text":"Now a command."},{"tool_call":{"name":"run_command","arguments":{"command":"echo hello from the terminal"}}}]}
{"steps":[{"text":"Done: wrote NOTES.md and ran a command."}]}
"##;

/// Runs `acpx --agent "heron acp" ... --approve-all [more...] exec` on the script in a fresh
/// workspace; what acpx printed (stdout, then stderr), whether it succeeded, and the
/// workspace. `None` when acpx is not installed.
fn run_acpx(more: &[&str]) -> Option<(String, bool, std::sync::Arc<support::Dirs>)> {
    let Some(acpx) = acpx() else {
        clients::skip("HERON_ACPX", "acpx");
        return None;
    };
    let dirs = support::scripted_home("s", "", SCRIPT);
    let client_home = tempfile::tempdir().expect("a home for acpx's own state");
    let agent = format!("{} acp --model s/m", support::heron_bin().display());
    let output = Command::new(&acpx)
        .args(["--agent", &agent, "--cwd", &dirs.ws(), "--approve-all", "--timeout", "60"])
        .args(more)
        .arg("exec")
        .arg("Leave a note, then run a command")
        .current_dir(dirs.ws())
        .env("HERON_HOME", dirs.home())
        .env("HOME", client_home.path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("acpx runs");
    let shown =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Some((shown, output.status.success(), dirs))
}

#[test]
fn acpx_completes_an_approved_write_and_a_command_in_its_terminal() {
    let Some((shown, succeeded, dirs)) = run_acpx(&[]) else { return };
    assert!(succeeded, "acpx failed:\n{shown}");
    assert!(!shown.contains("[error]"), "acpx reported an error:\n{shown}");
    assert!(shown.contains("diff "), "the write's diff is shown:\n{shown}");
    assert!(shown.contains("hello from the terminal") && shown.contains("Exit code: 0"), "{shown}");
    assert!(shown.contains("[done] end_turn"), "{shown}");
    let note = std::fs::read_to_string(std::path::Path::new(&dirs.ws()).join("NOTES.md")).expect("written");
    assert_eq!(note, "# Notes\n\nHeron was here.\n");
}

/// What docs/editors.md and `docs/editors/acpx.sh` say of acpx's policies: a rule matches the
/// request's kind (`execute`), not Heron's tool name (`write_file` matches nothing).
#[test]
fn acpx_policies_match_the_kind_not_the_tool_name() {
    let policy = r#"{"autoDeny": ["execute", "write_file"]}"#;
    let Some((shown, succeeded, dirs)) = run_acpx(&["--policy", policy]) else { return };
    assert!(succeeded, "acpx failed:\n{shown}");
    let note = std::path::Path::new(&dirs.ws()).join("NOTES.md");
    assert!(note.exists(), "`write_file` matched nothing, so the write was approved:\n{shown}");
    assert!(
        shown.contains("The user did not allow `run_command` to run."),
        "`execute` refused the command:\n{shown}"
    );
    assert!(!shown.contains("Exit code:"), "the command did not run:\n{shown}");
}
