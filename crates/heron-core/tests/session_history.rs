//! The bytes of history open sessions hold (`history_budget`), crossed with budgets a test
//! can reach: a stored session past its budget is refused on opening and keeps every
//! event; a live one that grows past it finishes its turn and refuses the next; and the
//! sessions open together are held to the process's budget until one closes.

use std::sync::Arc;

use heron_core::config::Home;
use heron_core::session::event::Event;
use heron_core::session::history_budget::{HistoryBudget, HistoryFull};
use heron_core::session::{
    Manager, ManagerOptions, OpenOptions, PromptError, Session, SessionError, TurnError,
};
use heron_core::tools::editor::NoEditor;
use heron_core::types::{PromptInput, StopReason, UserContent};
use heron_store::Store;

use crate::support::Dirs;
use crate::support::runs::Runs;

/// A home whose model answers every prompt with a short text.
struct Setup {
    dirs: Dirs,
    home: Home,
}

impl Setup {
    fn new() -> Setup {
        Setup::with_script(&"{\"steps\": [{\"text\": \"Noted, and answered.\"}]}\n".repeat(8))
    }

    /// A home whose model plays `script`.
    fn with_script(script: &str) -> Setup {
        let dirs = Dirs::new();
        let home = Home::at(dirs.home());
        std::fs::write(home.root().join("script.jsonl"), script).expect("script");
        let config = "default_model = \"script/m\"\n[providers.script]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"script.jsonl\"\n";
        std::fs::write(home.config_path(), config).expect("config");
        Setup { dirs, home }
    }

    /// A manager over this home whose sessions' histories hold at most `budget`.
    async fn manager(&self, budget: HistoryBudget) -> Manager {
        crate::support::manager_for(&self.home, ManagerOptions { history: budget, ..Default::default() })
            .await
    }

    fn options(&self) -> OpenOptions {
        OpenOptions {
            cwd: self.dirs.ws(),
            additional_directories: Vec::new(),
            editor: Arc::new(NoEditor),
            mcp_servers: Vec::new(),
        }
    }

    /// The stored size of session `id`'s history, in bytes of its rows.
    async fn stored(&self, id: &str) -> (u64, u64) {
        let store = Store::open(self.home.db_path()).await.expect("store");
        let totals = store.event_totals(id).await.expect("totals");
        (totals.count, totals.bytes)
    }
}

fn wide() -> HistoryBudget {
    HistoryBudget::default()
}

/// Runs one prompt to its end; its result.
async fn prompt(runs: &mut Runs, session: &Session, text: &str) -> Result<StopReason, PromptError> {
    let input = vec![PromptInput::Content(UserContent::Text { text: text.to_owned() })];
    runs.next(session.prompt(input)).await.1
}

/// A session of two finished turns, closed; its id.
async fn two_turns(home: &Setup, manager: &Manager) -> String {
    let session = manager.create(home.options()).await.expect("a session");
    let mut runs = Runs::of(&session);
    for text in ["first", "second"] {
        assert_eq!(prompt(&mut runs, &session, text).await.expect("ran"), StopReason::EndTurn);
    }
    let id = session.id().to_owned();
    manager.close(&id).await.expect("closed");
    id
}

#[tokio::test]
async fn a_stored_history_past_the_budget_is_refused_on_load_and_every_event_stays() {
    let home = Setup::new();
    let id = two_turns(&home, &home.manager(wide()).await).await;
    let (count, bytes) = home.stored(&id).await;
    assert!(count >= 6, "two turns were stored: {count}");

    let tight = home.manager(HistoryBudget::for_session(bytes - 1)).await;
    let refused = tight.load(&id, home.options()).await.err().expect("refused");
    let full = HistoryFull { limit: bytes - 1, size: bytes, process: false };
    assert!(matches!(refused, SessionError::HistoryFull(got) if got == full), "{refused:?}");
    assert!(refused.to_string().contains("start a new session"), "{refused}");
    // Resume and fork are refused the same way, and the fork copies nothing.
    assert!(matches!(tight.open(&id, home.options()).await, Err(SessionError::HistoryFull(_))));
    assert!(matches!(tight.fork(&id, home.options()).await, Err(SessionError::HistoryFull(_))));
    assert!(tight.list(None, None).await.expect("list").sessions.len() == 1, "no fork was made");
    assert_eq!(home.stored(&id).await, (count, bytes), "nothing stored changed");
    drop(tight);

    // Opened with a budget it fits, every event replays.
    let roomy = home.manager(HistoryBudget::for_session(bytes)).await;
    let mut loading = roomy.load(&id, home.options()).await.expect("fits exactly");
    let mut replayed: Vec<Event> = Vec::new();
    while let Some(events) = loading.next_events().await.expect("a page") {
        replayed.extend_from_slice(events);
    }
    loading.open().await.expect("open");
    assert_eq!(replayed.len() as u64, count);
    assert_eq!(replayed, roomy.history(&id).await.expect("history"));
}

#[tokio::test]
async fn a_live_session_past_its_budget_ends_its_turn_and_refuses_the_next_while_others_go_on() {
    let home = Setup::new();
    // Room for one turn's start, not for a second turn.
    let manager = home.manager(HistoryBudget::for_session(200)).await;
    let session = manager.create(home.options()).await.expect("a session");
    let mut runs = Runs::of(&session);
    assert_eq!(
        prompt(&mut runs, &session, "first").await.expect("the running turn finishes"),
        StopReason::EndTurn
    );
    let (count, bytes) = home.stored(session.id()).await;
    assert!(bytes > 200, "the first turn grew past the budget: {bytes}");

    let refused = prompt(&mut runs, &session, "second").await.expect_err("refused");
    let full = HistoryFull { limit: 200, size: bytes, process: false };
    assert!(matches!(refused, PromptError::HistoryFull(got) if got == full), "{refused:?}");
    // Compaction starts a turn too, and is refused before it records anything.
    let compacted = runs.next(session.compact(String::new())).await.1;
    assert!(matches!(compacted, Err(PromptError::HistoryFull(_))), "{compacted:?}");
    assert_eq!(home.stored(session.id()).await, (count, bytes), "nothing was recorded");

    let other = manager.create(home.options()).await.expect("another session");
    let mut other_runs = Runs::of(&other);
    assert_eq!(prompt(&mut other_runs, &other, "hello").await.expect("it runs"), StopReason::EndTurn);
}

/// A turn whose tool results take its session past the budget stops before its next model
/// request (a failed turn), so a session holds at most its budget and one request's worth;
/// the reply the model would have given is never asked for.
#[tokio::test]
async fn a_turn_that_grows_past_the_budget_stops_before_its_next_request() {
    let home = Setup::with_script(concat!(
        r#"{"steps": [{"tool_call": {"name": "read_file", "arguments": {"path": "big.txt"}}}]}"#,
        "\n",
        r#"{"steps": [{"text": "never asked"}]}"#,
        "\n"
    ));
    std::fs::write(home.dirs.ws().join("big.txt"), "a line of the file\n".repeat(2_000)).expect("big.txt");
    let manager = home.manager(HistoryBudget::for_session(16 * 1024)).await;
    let session = manager.create(home.options()).await.expect("a session");
    let mut runs = Runs::of(&session);
    let failed = prompt(&mut runs, &session, "read it").await.expect_err("stopped");
    let stopped = matches!(
        &failed,
        PromptError::Turn(TurnError::HistoryFull(HistoryFull { limit: 16_384, process: false, .. }))
    );
    assert!(stopped, "{failed:?}");
    let history = manager.history(session.id()).await.expect("history");
    assert!(history.iter().any(|e| matches!(e, Event::ToolResult { .. })), "the tool ran: {history:?}");
    let asked_again =
        history.iter().any(|e| matches!(e, Event::AgentMessage { text, .. } if text == "never asked"));
    assert!(!asked_again, "the model was asked again past the budget");
}

#[tokio::test]
async fn sessions_together_past_the_process_budget_open_one_at_a_time() {
    let home = Setup::new();
    let wide_manager = home.manager(wide()).await;
    let first = two_turns(&home, &wide_manager).await;
    let second = two_turns(&home, &wide_manager).await;
    drop(wide_manager);
    let (_, a) = home.stored(&first).await;
    let (_, b) = home.stored(&second).await;

    // Each fits a session's budget; together they pass the process's by one byte.
    let manager = home.manager(HistoryBudget { session: a.max(b), process: a + b - 1 }).await;
    manager.open(&first, home.options()).await.expect("the first fits");
    let refused = manager.open(&second, home.options()).await.expect_err("refused");
    let full = HistoryFull { limit: a + b - 1, size: a + b, process: true };
    assert!(matches!(refused, SessionError::HistoryFull(got) if got == full), "{refused:?}");
    assert!(refused.to_string().contains("close another session"), "{refused}");

    manager.close(&first).await.expect("closed");
    let opened = manager.open(&second, home.options()).await.expect("closing the first made room");
    let mut runs = Runs::of(&opened);
    assert_eq!(prompt(&mut runs, &opened, "again").await.expect("it runs"), StopReason::EndTurn);
}
