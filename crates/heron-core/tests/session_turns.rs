//! The session API driven directly, without a protocol or pipes: what a turn streams and
//! stores, the order of queued prompts and their answers, cancellation, a tool call
//! refused at the permission gate, and the sandbox that no posture lifts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use heron_core::config::Home;
use heron_core::session::event::Event;
use heron_core::session::outbound::Kind;
use heron_core::session::update::TurnUpdate;
use heron_core::session::{
    Manager, ManagerOptions, OpenOptions, PromptError, Session, Submitted, queue_budget,
};
use heron_core::tools::editor::{
    Answer, Call, EditorError, EditorIo, NoEditor, PermissionAnswer, PermissionAsk,
};
use heron_core::types::{PromptInput, StopReason, ToolStatus, UserContent};

use crate::support::Dirs;
use crate::support::runs::Runs;

/// A manager over a fresh home whose model `script/m` plays `script`.
struct Harness {
    dirs: Dirs,
    manager: Manager,
}

impl Harness {
    async fn new(script: &str) -> Harness {
        Self::with(script, "", ManagerOptions::default()).await
    }

    /// A harness whose `config.toml` starts with `config` and whose manager has `options`.
    async fn with(script: &str, config: &str, options: ManagerOptions) -> Harness {
        let dirs = Dirs::new();
        let home = Home::at(dirs.home());
        std::fs::write(home.root().join("script.jsonl"), script).expect("script");
        let config = format!(
            "{config}default_model = \"script/m\"\n[providers.script]\nkind = \"scripted\"\nmodels = [\"m\"]\nscript = \"script.jsonl\"\n"
        );
        std::fs::write(home.config_path(), config).expect("config");
        std::fs::write(home.env_path(), "SESSION_TEST_KEY=sk-session-test-424242\n").expect(".env");
        let manager = crate::support::manager_for(&home, options).await;
        Harness { dirs, manager }
    }

    async fn session(&self) -> Arc<Session> {
        self.session_with(Arc::new(NoEditor)).await
    }

    async fn session_with(&self, editor: Arc<dyn EditorIo>) -> Arc<Session> {
        let options = OpenOptions {
            cwd: self.dirs.ws(),
            additional_directories: Vec::new(),
            editor,
            mcp_servers: Vec::new(),
        };
        self.manager.create(options).await.expect("a session")
    }
}

fn text(text: &str) -> Vec<PromptInput> {
    vec![PromptInput::Content(UserContent::Text { text: text.to_owned() })]
}

fn streamed_text(updates: &[TurnUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            TurnUpdate::MessageChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_text_turn_streams_its_answer_and_stores_the_conversation() {
    let harness = Harness::new(r#"{"steps": [{"text": "Hello there, friend."}]}"#).await;
    let session = harness.session().await;
    let (seen, result) = Runs::of(&session).next(session.prompt(text("hi"))).await;
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
    assert_eq!(streamed_text(&seen), "Hello there, friend.");
    let history = harness.manager.history(session.id()).await.expect("history");
    let kinds: Vec<&str> = history.iter().map(Event::kind).collect();
    // The working context the model was given opens the session's first turn.
    assert_eq!(kinds, ["context", "user_message", "agent_message", "turn_ended"]);
}

/// A response's message is stored with the event after it; a turn that fails after
/// streaming has no such event, and what it streamed is stored all the same, in order,
/// as is a message followed by a tool call.
#[tokio::test]
async fn what_a_turn_streamed_is_stored_whether_it_ends_fails_or_calls_a_tool() {
    let script = concat!(
        r#"{"steps": [{"text": "Let me look."}, {"tool_call": {"name": "list_files", "arguments": {}}}]}"#,
        "\n",
        r#"{"steps": [{"text": "Half an answer"}, {"error": "the server went away"}]}"#,
        "\n"
    );
    let harness = Harness::new(script).await;
    let session = harness.session().await;
    let (seen, result) = Runs::of(&session).next(session.prompt(text("look around"))).await;
    assert!(result.is_err(), "the second request failed");
    assert_eq!(streamed_text(&seen), "Let me look.Half an answer");
    let history = harness.manager.history(session.id()).await.expect("history");
    let kinds: Vec<&str> = history.iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        ["context", "user_message", "agent_message", "tool_call", "tool_result", "agent_message"]
    );
    let last = history.last().expect("an event");
    assert!(matches!(last, Event::AgentMessage { text, .. } if text == "Half an answer"), "{last:?}");
}

/// The actor never waits on whoever serves the session: the second prompt's run starts
/// while the first's answer is still unsent, and its runs come in the order they ran. It
/// is the server that holds the second run back until the first's answer is out.
#[tokio::test]
async fn runs_come_in_order_and_the_next_starts_without_waiting_for_the_previous_answer() {
    let script = "{\"steps\": [{\"text\": \"one\"}]}\n{\"steps\": [{\"text\": \"two\"}]}\n";
    let harness = Harness::new(script).await;
    let session = harness.session().await;
    let mut runs = Runs::of(&session);
    let mut first = session.prompt(text("first"));
    // Answered at its end, as over ACP v1: nothing waits for an acceptance.
    drop(std::mem::take(&mut first.accepted));
    let second = session.prompt(text("second"));
    let mut one = runs.run().await;
    let mut seen = Vec::new();
    while let Some(update) = one.next().await {
        seen.push(update);
    }
    assert_eq!(streamed_text(&seen), "one");
    let (result, ended) = one.end().await;
    let handing = tokio::spawn(ended.hand_on(result));
    // Nobody has answered the first prompt yet: the second runs all the same.
    let two = runs.run().await;
    let (seen, result) = crate::support::runs::finish(two, second).await;
    assert_eq!(streamed_text(&seen), "two");
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
    assert!(!handing.is_finished(), "the first run is handed on only once its answer is out");
    let ending = first.result.await.expect("told");
    assert_eq!(ending.result.expect("ok"), StopReason::EndTurn);
    ending.sent.done();
    handing.await.expect("handed on");
}

/// A submitted prompt is recognised once, in the core, for both protocol versions: Heron's
/// own commands come back to run here, a refusal comes back with its reason, `/compact`
/// queues with its line to echo, and anything else (a path, an unknown command, more than
/// one block) is a prompt for the model.
#[tokio::test]
async fn a_submitted_prompt_is_a_command_a_refusal_or_a_queued_turn() {
    let harness = Harness::new("{\"steps\": [{\"text\": \"done\"}]}\n").await;
    let session = harness.session().await;
    let mut runs = Runs::of(&session);
    let submit = |input: Vec<PromptInput>| session.submit(input, None);
    match submit(text("/mcp list")) {
        Submitted::Local { invocation, line, .. } => {
            assert_eq!((invocation.name.as_str(), invocation.argument.as_str()), ("mcp", "list"));
            assert_eq!(line, "/mcp list");
        }
        other => panic!("/mcp is Heron's own command: {other:?}"),
    }
    match submit(text("/rewind soon")) {
        Submitted::Refused { line, reason, .. } => {
            assert_eq!(line, "/rewind soon");
            assert!(!reason.is_empty());
        }
        other => panic!("a rewind target that does not parse is refused: {other:?}"),
    }
    // Each reply took a place among the runs, left unanswered here: nothing waits on it.
    for _ in 0..2 {
        let placed = runs.run().await;
        assert_eq!(placed.kind(), Kind::Placed);
        let (result, ended) = placed.end().await;
        ended.hand_on(result).await;
    }
    let mut two = text("/compact");
    two.extend(text("and more"));
    for prompt in [text("/usr/bin/env"), text("/nosuch thing"), two] {
        let Submitted::Turn { queued } = submit(prompt) else { panic!("a prompt for the model") };
        session.cancel();
        let run = runs.run().await;
        assert_eq!(run.echo(), None, "a prompt records its own user message");
        let _ = crate::support::runs::finish(run, queued).await;
    }
    let Submitted::Turn { queued } = submit(text("/compact keep the parser")) else {
        panic!("/compact queues a turn");
    };
    let run = runs.run().await;
    assert_eq!(run.echo(), Some(("/compact keep the parser", None)), "a compaction records no user message");
    let (_, result) = crate::support::runs::finish(run, queued).await;
    assert!(result.is_ok(), "the compaction was answered");
}

/// A slash command's reply takes its place among the session's runs when it is asked for:
/// behind the turn going out, ahead of the prompt queued behind that turn, and what runs
/// after it waits until its answer is sent. Its reply so never lands inside a turn's stream.
#[tokio::test]
async fn a_commands_reply_goes_out_between_runs_at_the_place_it_was_asked_in() {
    let script = "{\"steps\": [{\"text\": \"Working\"}, {\"delay_ms\": 5000}, {\"text\": \"done\"}]}\n{\"steps\": [{\"text\": \"next\"}]}\n";
    let harness = Harness::new(script).await;
    let session = harness.session().await;
    let mut runs = Runs::of(&session);
    let mut running = session.prompt(text("slow"));
    drop(std::mem::take(&mut running.accepted));
    // The turn is going out when the command is asked for.
    let mut slow = runs.run().await;
    let queued = session.prompt(text("next"));
    let Submitted::Local { place, .. } = session.submit(text("/status"), None) else {
        panic!("/status is Heron's own command");
    };
    let reached = tokio::spawn(place.reached());
    loop {
        match slow.next().await.expect("the turn streams") {
            TurnUpdate::MessageChunk { .. } => break,
            TurnUpdate::Request(request) => request.send().await,
            _ => {}
        }
    }
    // This prompt alone ends; the one queued behind it runs next.
    running.cancel.cancel();
    let (_, result) = crate::support::runs::finish(slow, running).await;
    assert_eq!(result.expect("ok"), StopReason::Cancelled);
    assert!(!reached.is_finished(), "the place is reached only when the runs before it are out");
    let placed = runs.run().await;
    assert_eq!(placed.kind(), Kind::Placed, "the reply's place comes before the queued prompt's run");
    let (result, ended) = placed.end().await;
    let handing = tokio::spawn(ended.hand_on(result));
    let sent = reached.await.expect("the place is reached");
    tokio::task::yield_now().await;
    assert!(!handing.is_finished(), "what follows the reply waits for its answer");
    sent.done();
    handing.await.expect("handed on");
    let (seen, result) = runs.next(queued).await;
    assert_eq!(streamed_text(&seen), "next");
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
    // A closed session has nothing left to wait for: a place taken then is reached at once.
    session.close();
    let Submitted::Local { place, .. } = session.submit(text("/status"), None) else {
        panic!("/status is Heron's own command");
    };
    tokio::time::timeout(Duration::from_secs(10), place.reached()).await.expect("reached at once").done();
}

/// Replies waiting for their places count in the session's queue budget like queued
/// prompts, by their line and a share for the place: past it, a command is refused like a
/// prompt (`QueueFull`), and a place given up gives its bytes back.
#[tokio::test]
async fn replies_waiting_for_their_places_are_bounded_by_the_queue_budget() {
    let harness = Harness::new("{\"steps\": [{\"text\": \"done\"}]}\n").await;
    let session = harness.session().await;
    // Served, and never read here: every place waits.
    let _runs = Runs::of(&session);
    let line = format!("/status {}", "x".repeat(queue_budget::SESSION_BYTES / 4));
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let Submitted::Local { place, .. } = session.submit(text(&line), None) else {
            panic!("a quarter of the budget fits beside the others");
        };
        waiting.push(place);
    }
    let Submitted::Turn { queued } = session.submit(text(&line), None) else {
        panic!("past the budget, the command is refused like a prompt");
    };
    let ending = queued.result.await.expect("told at once");
    assert!(ending.refused(), "it never runs");
    assert!(
        matches!(ending.result, Err(PromptError::QueueFull(full)) if full.limit == queue_budget::SESSION_BYTES),
        "{:?}",
        ending.result
    );
    drop(waiting.pop());
    assert!(
        matches!(session.submit(text(&line), None), Submitted::Local { .. }),
        "a place given up gives its bytes back"
    );
}

#[tokio::test]
async fn cancel_ends_the_running_turn_and_the_queued_one() {
    let script = "{\"steps\": [{\"text\": \"Working\"}, {\"delay_ms\": 5000}, {\"text\": \"done\"}]}\n";
    let harness = Harness::new(script).await;
    let session = harness.session().await;
    let mut runs = Runs::of(&session);
    let mut running = session.prompt(text("slow"));
    // Answered at its end, as over ACP v1: nothing waits for an acceptance.
    drop(std::mem::take(&mut running.accepted));
    let queued = session.prompt(text("next"));
    // Wait until the slow turn has streamed its first words, then cancel.
    let mut slow = runs.run().await;
    loop {
        match slow.next().await.expect("the turn streams") {
            TurnUpdate::MessageChunk { .. } => break,
            TurnUpdate::Request(request) => request.send().await,
            _ => {}
        }
    }
    session.cancel();
    let (_, result) = crate::support::runs::finish(slow, running).await;
    assert_eq!(result.expect("ok"), StopReason::Cancelled);
    let (seen, result) = runs.next(queued).await;
    assert!(seen.is_empty(), "a cancelled queued prompt streams nothing");
    assert_eq!(result.expect("ok"), StopReason::Cancelled);
    let history = harness.manager.history(session.id()).await.expect("history");
    assert!(
        history.iter().any(|e| matches!(e, Event::AgentMessage { text, .. } if text == "Working")),
        "what streamed before the cancel is kept: {history:?}"
    );
}

#[tokio::test]
async fn a_write_the_gate_cannot_ask_about_fails_and_the_turn_goes_on() {
    let script = concat!(
        "{\"steps\": [{\"tool_call\": {\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"}}}]}\n",
        "{\"steps\": [{\"text\": \"It was not allowed.\"}]}\n",
    );
    let harness = Harness::new(script).await;
    let session = harness.session().await;
    let (seen, result) = Runs::of(&session).next(session.prompt(text("write it"))).await;
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
    let result = seen.iter().find_map(|u| match u {
        TurnUpdate::Event(Event::ToolResult { status, for_model, .. }) => Some((*status, for_model.clone())),
        _ => None,
    });
    let (status, told) = result.expect("the call has a result");
    assert_eq!(status, ToolStatus::Failed);
    assert!(told.contains("did not allow"), "{told}");
    assert!(!harness.dirs.ws().join("a.txt").exists(), "a refused write writes nothing");
    assert_eq!(streamed_text(&seen), "It was not allowed.");
}

#[tokio::test]
async fn a_turn_waits_for_a_slow_editor_instead_of_queueing_its_stream() {
    // 4 MiB of text in 1 KiB deltas; the editor reads nothing for a while.
    let piece = "y".repeat(1024);
    let deltas: Vec<&str> = std::iter::repeat_n(piece.as_str(), 4096).collect();
    let script = serde_json::json!({ "steps": [{ "text": deltas }] }).to_string();
    let harness = Harness::new(&script).await;
    let session = harness.session().await;
    let mut runs = Runs::of(&session);
    let queued = session.prompt(text("stream"));
    let mut run = runs.run().await;
    // The wait is what is tested: an unbounded producer would fill the stream with the
    // whole 4 MiB in far less time than this.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = run.waiting();
    assert!(
        waiting <= heron_core::session::update::ChunkBudget::BYTES / 1024 + 64,
        "{waiting} updates queued for an editor that reads nothing"
    );
    drop(queued.accepted);
    let mut text_len = 0;
    while let Some(update) = run.next().await {
        match update {
            TurnUpdate::MessageChunk { text, .. } => text_len += text.len(),
            TurnUpdate::Request(request) => request.send().await,
            _ => {}
        }
    }
    assert_eq!(text_len, 4096 * 1024, "everything arrives once the editor reads");
    let (result, _) = run.end().await;
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
}

/// The result of the first tool call a prompt's turn makes.
async fn first_tool_result(harness: &Harness) -> (ToolStatus, String) {
    let session = harness.session().await;
    let (seen, result) = Runs::of(&session).next(session.prompt(text("look"))).await;
    assert_eq!(result.expect("ok"), StopReason::EndTurn);
    seen.iter()
        .find_map(|u| match u {
            TurnUpdate::Event(Event::ToolResult { status, for_model, .. }) => {
                Some((*status, for_model.clone()))
            }
            _ => None,
        })
        .expect("the call has a result")
}

#[tokio::test]
async fn no_posture_lets_a_command_read_the_home_only_the_config_can() {
    if !heron_core::sandbox::support().has_landlock() {
        crate::support::clients::skip_wall(format!(
            "the sandbox is unavailable here: {:?}",
            heron_core::sandbox::support()
        ));
        return;
    }
    // The workspace and the home are siblings: the command reads the key file by path.
    let script = concat!(
        "{\"steps\": [{\"tool_call\": {\"name\": \"run_command\", \"arguments\": {\"command\": \"cat ../home/.env\"}}}]}\n",
        "{\"steps\": [{\"text\": \"Done.\"}]}\n",
    );
    let yolo = || ManagerOptions {
        start_posture: Some(heron_core::session::settings::Posture::Yolo),
        ..Default::default()
    };
    let confined = Harness::with(script, "", yolo()).await;
    let (status, told) = first_tool_result(&confined).await;
    assert_eq!(status, ToolStatus::Failed, "{told}");
    assert!(!told.contains("SESSION_TEST_KEY") && !told.contains("sk-session"), "{told}");
    let unconfined = Harness::with(script, "sandbox = \"off\"\n", yolo()).await;
    let (status, told) = first_tool_result(&unconfined).await;
    // It read the file; the key itself is still scrubbed from what the model is told.
    assert_eq!(status, ToolStatus::Completed, "{told}");
    assert!(told.contains("SESSION_TEST_KEY=***"), "{told}");
}

/// An editor that reads files and notes each request when it is sent, not when it is made.
#[derive(Default)]
struct SentLog(Arc<Mutex<Vec<String>>>);

impl EditorIo for SentLog {
    fn reads_files(&self) -> bool {
        true
    }

    fn read_text_file(&self, path: &std::path::Path) -> Call<Result<String, EditorError>> {
        let (sent, path) = (self.0.clone(), path.display().to_string());
        Call::new(async move {
            sent.lock().expect("sent").push(format!("read {path}"));
            Answer::ready(Ok("from the editor".to_owned()))
        })
    }

    fn request_permission(&self, _: &PermissionAsk, _: Duration) -> Call<PermissionAnswer> {
        Call::answered(PermissionAnswer::AllowOnce)
    }
}

/// A tool's request to the editor travels in its run and is sent by whoever forwards the
/// run, in its place (after the call it belongs to): nothing reaches the editor before. One
/// dropped unsent (the connection went away) fails plainly, and the turn goes on.
#[tokio::test]
async fn an_editor_request_is_sent_in_its_place_in_the_run_and_one_dropped_unsent_fails_plainly() {
    let script = concat!(
        "{\"steps\": [{\"tool_call\": {\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}}]}\n",
        "{\"steps\": [{\"text\": \"Read.\"}]}\n",
        "{\"steps\": [{\"tool_call\": {\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}}]}\n",
        "{\"steps\": [{\"text\": \"Read again.\"}]}\n",
    );
    let harness = Harness::new(script).await;
    std::fs::write(harness.dirs.ws().join("a.txt"), "on disk\n").expect("file");
    let editor = SentLog::default();
    let sent = editor.0.clone();
    let session = harness.session_with(Arc::new(editor)).await;
    let mut runs = Runs::of(&session);
    for drop_it in [true, false] {
        let mut queued = session.prompt(text("read a.txt"));
        drop(std::mem::take(&mut queued.accepted));
        let mut run = runs.run().await;
        let mut before = Vec::new();
        let request = loop {
            let update = tokio::time::timeout(Duration::from_secs(10), run.next()).await;
            match update.expect("the turn streams").expect("the run has a request") {
                TurnUpdate::Request(request) => break request,
                update => before.push(update),
            }
        };
        assert!(sent.lock().expect("sent").is_empty(), "nothing is sent before its place");
        assert!(
            before.iter().any(|u| matches!(u, TurnUpdate::Event(Event::ToolCall { .. }))),
            "the call it belongs to goes first: {before:?}"
        );
        if drop_it {
            drop(request);
        } else {
            request.send().await;
        }
        let (seen, result) = crate::support::runs::finish(run, queued).await;
        assert_eq!(result.expect("ok"), StopReason::EndTurn);
        let told = seen
            .iter()
            .find_map(|u| match u {
                TurnUpdate::Event(Event::ToolResult { for_model, .. }) => Some(for_model.clone()),
                _ => None,
            })
            .expect("the call has a result");
        let sent_now = sent.lock().expect("sent").clone();
        if drop_it {
            assert!(told.contains("connection closed before the request went out"), "{told}");
            assert!(told.contains("on disk"), "the read falls back to the disk copy: {told}");
            assert!(sent_now.is_empty(), "{sent_now:?}");
        } else {
            assert!(told.contains("from the editor"), "{told}");
            assert_eq!(sent_now.len(), 1, "{sent_now:?}");
        }
    }
}
