//! A damaged `heron.db` is named as such on the wire: `session/list` and `session/load`
//! answer -32603 with `data.code` `store.corrupt` and the store's reason, not a bare
//! internal error; and deleting an unknown session touches nothing else.

use std::path::Path;

use crate::support::{self, Process};
use serde_json::json;

/// The page size of a fresh SQLite file.
const PAGE: usize = 4096;

/// Overwrites every page of the file after the first (the header and the schema) with
/// garbage, so any read of a table or an index finds a malformed page.
fn damage_every_page_but_the_first(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read heron.db");
    assert!(bytes.len() > PAGE, "heron.db has more than one page: {} bytes", bytes.len());
    bytes[PAGE..].iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8 ^ 0x5a);
    std::fs::write(path, bytes).expect("write the damage");
}

#[test]
fn a_damaged_store_answers_list_and_load_with_data_code_store_corrupt() {
    let dirs = support::Dirs::new();
    let mut heron = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    let session = heron.new_session(&dirs.ws());
    heron.close_input();
    assert!(heron.exited_within(support::PROCESS_WAIT).is_some(), "heron exits at EOF");
    let db = dirs.home().join("heron.db");
    // The last connection to close moves the write-ahead log into the file, so the damage
    // below is what SQLite reads.
    drop(heron_store::Store::open_blocking(&db).expect("a healthy store"));
    assert!(!dirs.home().join("heron.db-wal").exists(), "the log was checkpointed");
    damage_every_page_but_the_first(&db);

    let mut heron = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    heron.request(json!(0), "initialize", json!({ "protocolVersion": 1 }));
    let listed = heron.request(json!(1), "session/list", json!({}));
    let loaded = heron.request(
        json!(2),
        "session/load",
        json!({ "sessionId": session, "cwd": dirs.ws(), "mcpServers": [] }),
    );

    for answer in [listed, loaded] {
        let error = &answer["error"];
        assert_eq!(error["code"], -32603, "{answer}");
        assert_eq!(error["data"]["code"], "store.corrupt", "{answer}");
        let reason = error["data"]["reason"].as_str().unwrap_or_else(|| panic!("a reason: {answer}"));
        assert!(reason.contains("malformed") || reason.contains("not a database"), "{answer}");
        assert!(reason.len() <= 512, "the reason is clipped");
    }
}

#[test]
fn deleting_an_unknown_session_succeeds_and_deletes_nothing_else() {
    let dirs = support::Dirs::new();
    let mut heron = Process::spawn(&dirs.home(), &["--model", "demo/demo"]);
    let first = heron.new_session(&dirs.ws());
    let second =
        heron.request(json!("new2"), "session/new", json!({ "cwd": dirs.ws(), "mcpServers": [] }))["result"]
            ["sessionId"]
            .clone();

    let deleted = heron.request(json!(1), "session/delete", json!({ "sessionId": "no-such-session" }));
    let listed = heron.request(json!(2), "session/list", json!({}));

    assert!(deleted["result"].is_object(), "{deleted}");
    let ids: Vec<&serde_json::Value> =
        listed["result"]["sessions"].as_array().expect("sessions").iter().map(|s| &s["sessionId"]).collect();
    assert!(ids.contains(&&json!(first)) && ids.contains(&&second), "both are still listed: {listed}");
}
