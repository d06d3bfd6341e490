//! The start of a connection: `initialize` is answered without the session manager, which
//! is built in the background once the answer is queued (or when a request needs sessions
//! first); what goes wrong while building it (a broken config, a locked store) reaches the
//! requests that need it, never `initialize`.

use std::time::Duration;

use serde_json::json;

use heron::cli::acp::AcpArgs;

use crate::support::{self, Dirs, Editor};

/// How long a request that needs the session manager may wait for it: a debug build on two
/// shared cores reads the store and the extensions slowly.
const BUILD_WAIT: Duration = Duration::from_secs(20);

/// The demo model without schema checks, whose validator would only slow the start.
fn args() -> AcpArgs {
    AcpArgs { model: Some("demo/demo".into()), ..AcpArgs::default() }
}

/// Sends a request and waits for its answer, as long as the manager may take.
async fn ask(editor: &mut Editor, id: u64, method: &str, params: serde_json::Value) -> serde_json::Value {
    editor.send_request(json!(id), method, params).await;
    let answer = editor.recv_within(BUILD_WAIT).await;
    assert_eq!(answer["id"], id, "{answer}");
    answer
}

#[tokio::test]
async fn a_broken_config_answers_initialize_and_fails_session_new_naming_the_home() {
    let dirs = Dirs::new();
    dirs.write_home("config.toml", "[providers.broken\nkind = \"openai\"\n");
    let mut editor = support::start_in(args(), dirs);

    let init = editor.request(json!(1), "initialize", json!({ "protocolVersion": 1 })).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");

    let cwd = editor.dirs.ws();
    let new = ask(&mut editor, 2, "session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
    assert_eq!(new["error"]["code"], -32603, "{new}");
    assert_eq!(new["error"]["data"]["code"], "home.unusable", "{new}");
    let message = new["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("config.toml"), "the reason names the file: {new}");
}

#[tokio::test]
async fn initialize_is_answered_while_the_store_is_locked_and_session_new_waits_for_it() {
    let dirs = Dirs::new();
    // A store in rollback-journal mode held by an exclusive transaction: nobody else can
    // even read it until the transaction ends (Heron waits up to its busy timeout, 5 s).
    let db = dirs.home().join("heron.db");
    let lock = rusqlite::Connection::open(&db).expect("open the store file");
    lock.execute_batch("CREATE TABLE held(x); BEGIN EXCLUSIVE; INSERT INTO held VALUES (1);")
        .expect("lock the store");
    let mut editor = support::start_in(args(), dirs);

    let init = editor.request(json!(1), "initialize", json!({ "protocolVersion": 1 })).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");

    let cwd = editor.dirs.ws();
    editor.send_request(json!(2), "session/new", json!({ "cwd": cwd, "mcpServers": [] })).await;
    editor.expect_silence().await;
    lock.execute_batch("COMMIT;").expect("release the store");
    drop(lock);
    let new = editor.recv_within(BUILD_WAIT).await;
    assert_eq!(new["id"], 2, "{new}");
    assert!(new["result"]["sessionId"].is_string(), "the session opens once the store is free: {new}");
}

#[tokio::test]
async fn a_request_needing_sessions_before_initialize_builds_the_manager_itself() {
    let mut editor = support::start_with(args());
    let listed = ask(&mut editor, 1, "session/list", json!({})).await;
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
}

#[tokio::test]
async fn after_initialize_the_store_is_opened_without_waiting_for_a_request() {
    let dirs = Dirs::new();
    let db = dirs.home().join("heron.db");
    let mut editor = support::start_in(args(), dirs);
    let init = editor.request(json!(1), "initialize", json!({ "protocolVersion": 1 })).await;
    assert!(init["result"].is_object(), "{init}");
    // Nothing else is sent: the build started when the answer was queued.
    let mut waited = Duration::ZERO;
    while !db.exists() {
        assert!(waited < BUILD_WAIT, "the store was never opened");
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
}

/// The kernel's bound on one environment string, name and `=` included (`MAX_ARG_STRLEN`:
/// 32 pages). The environment is the user's, set by whoever starts Heron; this is its bound.
const MAX_ARG_STRLEN: usize = 32 * 4096;

#[test]
fn variables_at_the_kernels_bound_are_served_and_past_it_heron_is_never_started() {
    let dirs = crate::support::Dirs::new();
    // As long as the kernel lets a variable be: a log filter and a shell that mean nothing.
    let near = |name: &str| "x".repeat(MAX_ARG_STRLEN - name.len() - 2);
    let mut heron = crate::support::process::Launch::acp(&dirs.home(), &["--model", "demo/demo"])
        .env("HERON_LOG", near("HERON_LOG"))
        .env("SHELL", near("SHELL"))
        .env("TERM", near("TERM"))
        .env("HOME", format!("/{}", near("HOME").get(1..).unwrap_or_default()))
        .start();
    let answer =
        heron.request(serde_json::json!(0), "initialize", serde_json::json!({ "protocolVersion": 1 }));
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    // A turn reads the shell and the terminal for its working context.
    let session = heron.new_session(&dirs.ws());
    heron.send_prompt(serde_json::json!("p"), &session, "Look around");
    let answer = heron.until_answer(&serde_json::json!("p"), |heron, message| {
        if message["method"] == "session/request_permission" {
            let no = serde_json::json!({ "outcome": { "outcome": "selected", "optionId": "reject_once" } });
            heron.reply(message, no);
        }
    });
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // One byte more and the kernel refuses to start the program at all.
    let refused = std::process::Command::new(crate::support::heron_bin())
        .arg("--version")
        .env("HERON_LOG", "x".repeat(MAX_ARG_STRLEN))
        .output()
        .expect_err("the kernel refuses the variable");
    assert_eq!(refused.raw_os_error(), Some(libc::E2BIG), "{refused}");
}

/// What the sandbox probe found is remembered in the home, and the next start in the same
/// state answers `initialize` with it at once, before its own probe is done; that probe
/// then writes what it found over the record. Shown by a record saying what the probe
/// would never say: the answer carries the record's word, and the record is mended after.
#[test]
fn the_next_start_reports_the_remembered_walls_and_its_probe_mends_the_record() {
    let dirs = Dirs::new();
    let record = dirs.home().join("sandbox-probe.json");
    let initialize = |heron: &mut support::Process| {
        let init = heron.request(json!("init"), "initialize", json!({ "protocolVersion": 1 }));
        init["result"]["_meta"]["heron"]["sandbox"].clone()
    };
    let mut first = support::Launch::acp(&dirs.home(), &[]).start();
    let probed = initialize(&mut first);
    // Written once the probe is done, which the answer waited for.
    let read = |deadline: std::time::Instant| loop {
        match std::fs::read_to_string(&record).ok().and_then(|text| serde_json::from_str(&text).ok()) {
            Some(value) => break value,
            None if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            None => panic!("no record of the probe at {}", record.display()),
        }
    };
    let written: serde_json::Value = read(std::time::Instant::now() + Duration::from_secs(10));
    first.finish(support::PROCESS_WAIT);
    assert!(written["context"].as_str().is_some_and(|c| !c.is_empty()), "{written}");
    let mut planted = written.clone();
    planted["found"]["landlock"] = json!({ "reason": "remembered, not probed" });
    std::fs::write(&record, planted.to_string()).expect("plant");
    // With the record of its state there, the second start probes only after its answer.
    let mut second = support::Launch::acp(&dirs.home(), &[]).start();
    let reported = initialize(&mut second);
    assert_eq!(reported["reason"], "remembered, not probed", "{reported}");
    assert_eq!(reported["walls"], probed["walls"], "{reported}");
    // Its own probe finds what the first did, and writes that back.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = read(deadline);
        if now == written {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the record was not mended: {now}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let third = initialize(&mut second);
    assert_eq!(third, probed, "once probed, the probe's finding is reported");
    second.finish(support::PROCESS_WAIT);
}
