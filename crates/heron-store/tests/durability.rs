//! The store shared by several processes, and surviving a hard kill mid-write.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heron_store::{NewSession, Store};
use serde_json::json;

/// When set, the kill test runs as the child that writes and gets killed; the value is the
/// database path.
const CHILD_DB_ENV: &str = "HERON_STORE_KILL_CHILD_DB";
const VICTIM: &str = "victim";
const BEFORE_READY: u64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_interleave_appends_without_losing_or_repeating_seqs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let first = Store::open(&path).await.expect("open first");
    let second = Store::open(&path).await.expect("open second");
    let session = first.create_session(NewSession::in_dir("/w")).await.expect("create").id;

    const TASKS: u64 = 6;
    const PER_TASK: u64 = 40;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = if task % 2 == 0 { first.clone() } else { second.clone() };
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for n in 0..PER_TASK {
                seqs.push(
                    store.append_event(&session, "k", &json!({"task": task, "n": n})).await.expect("append"),
                );
            }
            seqs
        }));
    }
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.extend(task.await.expect("task"));
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=TASKS * PER_TASK).collect::<Vec<_>>(), "every seq handed out exactly once");

    let events = second.events(&session, 0, 10_000).await.expect("events");
    let written: HashSet<(u64, u64)> = events
        .iter()
        .map(|e| {
            (e.payload["task"].as_u64().unwrap_or(u64::MAX), e.payload["n"].as_u64().unwrap_or(u64::MAX))
        })
        .collect();
    assert_eq!(events.len() as u64, TASKS * PER_TASK);
    assert_eq!(written.len() as u64, TASKS * PER_TASK, "no event lost or duplicated");
}

#[tokio::test]
async fn events_appended_before_a_hard_kill_survive_it() {
    if let Ok(db) = std::env::var(CHILD_DB_ENV) {
        return write_until_killed(&db).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("heron.db");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "durability::events_appended_before_a_hard_kill_survive_it",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // libtest may print `test <name> ... ` on the same line first.
        .find_map(|line| line.rsplit_once("ready ").and_then(|(_, n)| n.trim().parse::<u64>().ok()));
    // `Child::kill` sends SIGKILL on unix: no destructor, no checkpoint, possibly mid-commit.
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    let ready = ready.expect("the child reported ready before dying");

    let store = Store::open(&path).await.expect("reopen after kill");
    let count = store.event_count(VICTIM).await.expect("count");
    assert!(count >= ready, "{count} events survived, {ready} were committed before ready");
    let events = store.events(VICTIM, 0, 100_000).await.expect("events");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=count).collect::<Vec<_>>(), "the log is dense and complete");
    for event in &events {
        assert_eq!(event.payload, json!({"n": event.seq}), "event {} is intact", event.seq);
    }
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
    assert_eq!(integrity, "ok");
}

/// The child side: commit events one by one, announce how many, then keep writing so the
/// kill lands mid-write. Gives up after a while in case the parent is gone.
async fn write_until_killed(db: &str) {
    let store = Store::open(db).await.expect("child open");
    let new = NewSession { id: Some(VICTIM.to_owned()), ..NewSession::in_dir("/w") };
    store.create_session(new).await.expect("child create");
    for n in 1..=BEFORE_READY {
        store.append_event(VICTIM, "k", &json!({"n": n})).await.expect("child append");
    }
    println!("ready {BEFORE_READY}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = BEFORE_READY;
    while Instant::now() < deadline {
        n += 1;
        store.append_event(VICTIM, "k", &json!({"n": n})).await.expect("child append");
    }
}
