//! A signal stops `heron acp` the way the end of its input does: SIGTERM during a turn
//! whose command is still running ends the process within two seconds and kills the
//! command's whole process group.

use std::time::{Duration, Instant};

use crate::support::{self, Process};
use serde_json::json;

/// The live processes whose command line or environment carries `marker`. Both are read,
/// since the shell may run the command as a child or become it (and then only the
/// environment still names the marker).
fn marked(marker: &str) -> Vec<u32> {
    let carries = |pid: &str, file: &str| {
        std::fs::read(format!("/proc/{pid}/{file}"))
            .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(marker))
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .filter(|pid| pid.chars().all(|c| c.is_ascii_digit()))
        .filter(|pid| carries(pid, "cmdline") || carries(pid, "environ"))
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// Polls `check` until it holds or `limit` passes.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let began = Instant::now();
    while began.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    check()
}

/// Heron in a prompt turn whose model ran `command` (given the marker to carry), once at
/// least `started` processes carry the marker; the marker, and the home to keep.
fn running(
    command: impl Fn(&str) -> String,
    started: usize,
) -> (Process, String, std::sync::Arc<support::Dirs>) {
    let marker = format!("heron-signal-{}", uuid::Uuid::new_v4());
    let command = command(&marker);
    let script = format!(
        "{}\n{}\n",
        json!({"steps": [{"tool_call": {"name": "run_command", "arguments": {"command": command}}}]}),
        json!({"steps": [{"text": "Done."}]}),
    );
    let dirs = support::scripted_home("t", "", &script);
    let mut heron =
        Process::spawn(&dirs.home(), &["--model", "t/m", "--permission-mode", "bypassPermissions"]);
    let session = heron.new_session(&dirs.ws());
    heron.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}}));
    assert!(
        eventually(support::PROCESS_WAIT, || marked(&marker).len() >= started),
        "the command's {started} processes never started"
    );
    (heron, marker, dirs)
}

/// Sends `signal` to Heron.
fn signal(heron: &Process, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &heron.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} failed");
}

/// Whether every process carrying `marker` is gone within `limit`, and those that were
/// left; what is left is killed here, so a failure leaves nothing behind either.
fn all_gone(marker: &str, limit: Duration) -> (bool, Vec<u32>) {
    let left = marked(marker);
    let gone = eventually(limit, || marked(marker).is_empty());
    if !gone {
        for pid in &left {
            let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
    (gone, left)
}

#[test]
fn sigterm_during_a_running_command_exits_within_two_seconds_and_leaves_no_child() {
    let (mut heron, marker, _dirs) = running(|marker| format!("HERON_TEST_MARKER={marker} sleep 30"), 1);
    signal(&heron, "-TERM");
    let exited = heron.exited_within(Duration::from_secs(2));
    let (gone, left) = all_gone(&marker, Duration::from_millis(500));
    assert!(exited.is_some(), "heron still runs 2 s after SIGTERM");
    assert!(gone, "the command outlived heron: {left:?}");
}

/// Heron killed outright (SIGKILL: no cleanup of its own runs) still leaves no command
/// behind, not even one that left its process group: each command's keeper learns of
/// Heron's death from the kernel and ends what it holds.
#[test]
fn sigkill_of_heron_leaves_no_command_even_one_that_left_its_group() {
    let command = |marker: &str| {
        format!(
            "HERON_TEST_MARKER={marker} setsid sleep 31 >/dev/null 2>&1 </dev/null & \
             HERON_TEST_MARKER={marker} sleep 30"
        )
    };
    // The shell (its command line names the marker) and both sleeps.
    let (mut heron, marker, _dirs) = running(command, 3);
    signal(&heron, "-KILL");
    assert!(heron.exited_within(Duration::from_secs(2)).is_some(), "heron survived SIGKILL");
    let (gone, left) = all_gone(&marker, Duration::from_secs(2));
    assert!(gone, "the command outlived heron's SIGKILL: {left:?}");
}
