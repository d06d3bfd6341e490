//! run_command locally (exit codes, output caps, timeouts and cancels that kill the whole
//! process group) and through a fake editor's terminals (call order, kill on timeout,
//! release always).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{Dirs, FakeEditor, Script, call, wait_until_none_runs};
use heron_core::tools::Tool;
use heron_core::tools::run_command::RunCommand;
use heron_core::types::{ToolKind, ToolOutput, ToolStatus};
use serde_json::json;

/// A marker for the processes of one test, put in their command lines (`sleep 30.NNNN`):
/// a command in its own pid namespace reports pids and groups that mean nothing here.
fn marker() -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 1_000_000;
    format!("30.{n:06}")
}

/// Waits up to 5 s for a process with `marker` in its command line to run.
async fn wait_until_runs(marker: &str) {
    for _ in 0..250 {
        let found = std::fs::read_dir("/proc").expect("/proc").flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains(marker))
        });
        if found {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("nothing with {marker} ever ran");
}

/// A command that starts a background job and a foreground one, both marked.
fn two_sleeps(marker: &str, then: &str) -> String {
    format!("sleep {marker} & {then}")
}

#[tokio::test]
async fn local_command_reports_exit_code_and_output() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let prepared =
        RunCommand.prepare(r#"{"command":"echo out; echo err >&2; exit 3"}"#, &env).expect("prepared");
    assert_eq!(prepared.title, "Run echo out; echo err >&2; exit 3");
    let shown = format!("echo out; echo err >&2; exit 3\n(in {})", dirs.ws().display());
    assert_eq!(
        prepared.content,
        [ToolOutput::Text { text: shown }],
        "the request shows the line and its cwd"
    );
    assert_eq!(prepared.kind, ToolKind::Execute);
    let outcome = RunCommand.run(prepared, env).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.starts_with("Exit code: 3\n"), "{}", outcome.for_model);
    assert!(outcome.for_model.contains("out") && outcome.for_model.contains("err"), "{}", outcome.for_model);
    assert_eq!(outcome.raw_output, Some(json!({"exitCode": 3})));
}

#[tokio::test]
async fn local_command_runs_in_the_given_cwd() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.ws().join("sub")).expect("sub");
    let outcome = call(&RunCommand, &dirs.env(), json!({"command": "pwd", "cwd": "sub"})).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    assert!(
        outcome.for_model.contains(&dirs.ws().join("sub").display().to_string()),
        "{}",
        outcome.for_model
    );
}

#[tokio::test]
async fn local_output_is_capped_with_a_marker() {
    let dirs = Dirs::new();
    let outcome =
        call(&RunCommand, &dirs.env(), json!({"command": "head -c 300000 /dev/zero | tr '\\0' x"})).await;
    assert!(outcome.for_model.len() < 70 * 1024, "{}", outcome.for_model.len());
    assert!(outcome.for_model.contains("bytes of output omitted"), "marker missing");
}

#[tokio::test]
async fn local_timeout_kills_the_whole_group() {
    let dirs = Dirs::new();
    let started = Instant::now();
    let marker = marker();
    let args = json!({"command": two_sleeps(&marker, &format!("sleep {marker}")), "timeout_ms": 500});
    let outcome = call(&RunCommand, &dirs.env(), args).await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.starts_with("Timed out after 500 ms"), "{}", outcome.for_model);
    wait_until_none_runs(&marker, "a job of a command that timed out");
}

#[tokio::test]
async fn local_cancel_kills_the_whole_group() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let cancel = env.cancel.clone();
    let marker = marker();
    let command = two_sleeps(&marker, &format!("sleep {marker}"));
    let run = tokio::spawn(async move { call(&RunCommand, &env, json!({ "command": command })).await });
    wait_until_runs(&marker).await;
    cancel.cancel();
    let outcome =
        tokio::time::timeout(Duration::from_secs(5), run).await.expect("ends on cancel").expect("task");
    assert_eq!(outcome.raw_output, Some(json!({"cancelled": true})));
    wait_until_none_runs(&marker, "a job of a cancelled command");
}

#[tokio::test]
async fn local_dropped_call_kills_the_whole_group() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let marker = marker();
    let command = two_sleeps(&marker, &format!("sleep {marker}"));
    let run = tokio::spawn(async move { call(&RunCommand, &env, json!({ "command": command })).await });
    wait_until_runs(&marker).await;
    run.abort();
    let _ = run.await;
    wait_until_none_runs(&marker, "a job of a dropped call");
}

#[tokio::test]
async fn local_background_jobs_do_not_outlive_a_finished_command() {
    let dirs = Dirs::new();
    let marker = marker();
    let outcome =
        call(&RunCommand, &dirs.env(), json!({ "command": two_sleeps(&marker, "sleep 0.2; echo done") }))
            .await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    wait_until_none_runs(&marker, "a background job of a finished command");
}

/// A process that leaves the command's group (`setsid`, or a double fork that detaches) is
/// still ended with the command: when it finishes, when it times out, and when it fails.
#[tokio::test]
async fn a_process_that_leaves_the_group_does_not_outlive_the_command() {
    for ending in ["finished", "timed out", "failed"] {
        let (escaped, detached) = (marker(), marker());
        let escape = format!(
            "setsid sleep {escaped} >/dev/null 2>&1 </dev/null & \
             (setsid sh -c 'sleep {detached} & wait' >/dev/null 2>&1 </dev/null &)"
        );
        let args = match ending {
            "finished" => json!({ "command": format!("{escape}; sleep 0.2; echo done") }),
            "timed out" => json!({ "command": format!("{escape}; sleep 30"), "timeout_ms": 700 }),
            _ => json!({ "command": format!("{escape}; sleep 0.2; exit 4") }),
        };
        let dirs = Dirs::new();
        let outcome = call(&RunCommand, &dirs.env(), args).await;
        wait_until_none_runs(&escaped, &format!("a setsid process of a command that {ending}"));
        wait_until_none_runs(&detached, &format!("a detached grandchild of a command that {ending}"));
        match ending {
            "finished" => assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model),
            "timed out" => assert!(outcome.for_model.starts_with("Timed out"), "{}", outcome.for_model),
            _ => assert!(outcome.for_model.starts_with("Exit code: 4\n"), "{}", outcome.for_model),
        }
    }
}

/// The shell's own end is the command's: a signal that kills it is reported as that signal.
#[tokio::test]
async fn a_shell_killed_by_a_signal_is_reported_as_that_signal() {
    let dirs = Dirs::new();
    let outcome = call(&RunCommand, &dirs.env(), json!({ "command": "kill -TERM $$" })).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("SIGTERM"), "{}", outcome.for_model);
}

#[tokio::test]
async fn bad_run_command_arguments_are_refused() {
    let dirs = Dirs::new();
    let env = dirs.env();
    for bad in [
        "{}",
        r#"{"command":""}"#,
        r#"{"command":"ls","timeout_ms":0}"#,
        r#"{"command":"ls","timeout_ms":"5"}"#,
    ] {
        assert!(RunCommand.prepare(bad, &env).is_err(), "{bad}");
    }
}

fn terminal_editor(exit_after: Option<Duration>) -> FakeEditor {
    FakeEditor::new(Script { exit_after, exit_code: 0, ..Script::full() })
}

#[tokio::test]
async fn editor_terminal_runs_create_wait_output_release_in_order() {
    let dirs = Dirs::new();
    let fake = terminal_editor(Some(Duration::ZERO));
    let outcome =
        call(&RunCommand, &dirs.env_with(Arc::new(fake.clone())), json!({"command": "cargo test"})).await;
    assert_eq!(outcome.status, ToolStatus::Completed);
    // The final outcome keeps the terminal, which shows the output, and says what ran and
    // how it ended (released after it is shown; here nobody shows it).
    assert_eq!(
        outcome.output,
        [
            ToolOutput::Terminal { terminal_id: "term-1".into() },
            ToolOutput::Text { text: "$ cargo test\nExit code: 0".into() }
        ]
    );
    assert_eq!(outcome.for_model, "Exit code: 0\nOutput:\nfake output");
    assert_eq!(
        fake.methods(),
        ["terminal_create", "terminal_wait_for_exit", "terminal_output", "terminal_release"]
    );
    assert_eq!(fake.calls()[0], format!("terminal_create sh -c cargo test in {}", dirs.ws().display()));
}

#[tokio::test]
async fn editor_terminal_is_killed_then_released_on_timeout() {
    let dirs = Dirs::new();
    let fake = terminal_editor(None);
    let args = json!({"command": "sleep 100", "timeout_ms": 100});
    let outcome = call(&RunCommand, &dirs.env_with(Arc::new(fake.clone())), args).await;
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.starts_with("Timed out"), "{}", outcome.for_model);
    assert_eq!(
        fake.methods(),
        ["terminal_create", "terminal_wait_for_exit", "terminal_kill", "terminal_output", "terminal_release"]
    );
}

/// Waits until the command runs in `fake`'s terminal (bounded).
async fn running_in(fake: &FakeEditor) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !fake.methods().iter().any(|m| m == "terminal_wait_for_exit") {
        assert!(Instant::now() < deadline, "the command never ran: {:?}", fake.methods());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn editor_terminal_is_released_on_cancel() {
    let dirs = Dirs::new();
    let fake = terminal_editor(None);
    let env = dirs.env_with(Arc::new(fake.clone()));
    let (cancel, watched) = (env.cancel.clone(), fake.clone());
    tokio::spawn(async move {
        running_in(&watched).await;
        cancel.cancel();
    });
    let outcome = call(&RunCommand, &env, json!({"command": "sleep 100"})).await;
    assert_eq!(outcome.raw_output, Some(json!({"cancelled": true})));
    assert_eq!(
        fake.methods(),
        ["terminal_create", "terminal_wait_for_exit", "terminal_kill", "terminal_output", "terminal_release"]
    );
}

#[tokio::test]
async fn editor_terminal_is_released_when_the_call_is_dropped() {
    let dirs = Dirs::new();
    let fake = terminal_editor(None);
    let env = dirs.env_with(Arc::new(fake.clone()));
    let run = tokio::spawn(async move { call(&RunCommand, &env, json!({"command": "sleep 100"})).await });
    running_in(&fake).await;
    run.abort();
    let _ = run.await;
    let deadline = Instant::now() + Duration::from_secs(2);
    while fake.methods().last().map(String::as_str) != Some("terminal_release") {
        assert!(Instant::now() < deadline, "never released: {:?}", fake.methods());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(fake.methods().contains(&"terminal_kill".to_owned()));
}

/// A command padding a key so that the output cap cuts through it, once at the end of the
/// head and once at the start of the tail: redaction runs before the cut, so neither half
/// reaches the model.
#[tokio::test]
async fn a_key_cut_by_the_output_cap_leaves_no_half_behind() {
    let dirs = Dirs::new();
    let key = "sk-live-0123456789abcdefghij";
    std::fs::write(dirs.ws().join("key.txt"), key).expect("key file");
    let mut env = dirs.env();
    env.secrets = Arc::new(vec![heron_core::secret::Secret::new(key)]);
    let half = heron_core::tools::run_command::OUTPUT_CAP / 2;
    let (first, second) = key.split_at(key.len() / 2);
    // Head: padding, then the key's first half ends exactly at the cap's half. Tail: the
    // key's second half starts exactly where the kept tail starts.
    let command = format!(
        "head -c {} /dev/zero | tr '\\0' a; cat key.txt; head -c 100000 /dev/zero | tr '\\0' b; \
         cat key.txt >&2; head -c {} /dev/zero | tr '\\0' c",
        half - first.len(),
        half - second.len(),
    );
    let outcome = call(&RunCommand, &env, json!({ "command": command })).await;
    assert_eq!(outcome.status, ToolStatus::Completed, "{}", outcome.for_model);
    assert!(outcome.for_model.contains("[truncated:"), "the cap cut the output");
    for part in [first, second] {
        assert!(!outcome.for_model.contains(part), "`{part}` of the key reached the model");
    }
}

/// An editor terminal keeps only the end of long output; where it cut, the end of a key
/// may start what it returns, and that end is dropped before the model sees it.
#[tokio::test]
async fn the_end_of_a_key_at_an_editor_terminals_cut_is_dropped() {
    let dirs = Dirs::new();
    let key = "sk-live-0123456789abcdefghij";
    let script = Script { output: ("9abcdefghij\nbuild ok\n".to_owned(), true), ..Script::full() };
    let mut env = dirs.env_with(Arc::new(FakeEditor::new(script)));
    env.secrets = Arc::new(vec![heron_core::secret::Secret::new(key)]);
    let outcome = call(&RunCommand, &env, json!({ "command": "make" })).await;
    assert!(outcome.for_model.contains("build ok"), "{}", outcome.for_model);
    assert!(!outcome.for_model.contains("9abcdefghij"), "{}", outcome.for_model);
}
