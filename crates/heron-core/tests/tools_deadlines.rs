//! Every tool call has a deadline: one that never finishes fails when it passes (and its
//! own cancel fires, so work it left behind stops), a cancelled turn ends it at once, a
//! question waits for the person, and `run_command` never runs past the configured limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use heron_core::BoxFuture;
use heron_core::llm::ToolSpec;
use heron_core::tools::deadline::{Deadlines, Pace, run_within};
use heron_core::tools::run_command::RunCommand;
use heron_core::tools::{Outcome, Prepared, Tool, ToolEnv};
use heron_core::types::{ToolKind, ToolStatus};
use serde_json::json;

use crate::support::{Dirs, call};

/// A tool that never finishes on its own, and notes when its call's cancel fires.
struct Stuck {
    pace: Pace,
    stopped: Arc<AtomicBool>,
}

impl Tool for Stuck {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "stuck".to_owned(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn pace(&self) -> Pace {
        self.pace
    }
    fn prepare(&self, _arguments: &str, _env: &ToolEnv) -> Result<Prepared, String> {
        Ok(Prepared {
            title: "Stuck".to_owned(),
            kind: ToolKind::Read,
            locations: Vec::new(),
            raw_input: json!({}),
            outside_roots: false,
            always_ask: None,
            content: Vec::new(),
            planned: None,
        })
    }
    fn run(&self, _prepared: Prepared, env: ToolEnv) -> BoxFuture<Outcome> {
        let stopped = Arc::clone(&self.stopped);
        // What a blocking walk does: it runs elsewhere and watches the call's token.
        tokio::spawn(async move {
            env.cancel.cancelled().await;
            stopped.store(true, Ordering::SeqCst);
        });
        Box::pin(std::future::pending())
    }
}

fn stuck(pace: Pace) -> (Stuck, Arc<AtomicBool>) {
    let stopped = Arc::new(AtomicBool::new(false));
    (Stuck { pace, stopped: Arc::clone(&stopped) }, stopped)
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_file_tool_that_never_finishes_fails_at_its_deadline_and_is_told_to_stop() {
    let dirs = Dirs::new();
    let mut env = dirs.env();
    env.deadlines = Deadlines { quick: Duration::from_secs(5), ..Deadlines::default() };
    let (tool, stopped) = stuck(Pace::Quick);
    let prepared = tool.prepare("{}", &env).expect("prepared");
    let started = tokio::time::Instant::now();
    let outcome = run_within(&tool, prepared, env.clone()).await;
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(outcome.status, ToolStatus::Failed);
    assert!(outcome.for_model.contains("did not finish within 5 s"), "{}", outcome.for_model);
    assert!(outcome.for_model.contains("tool_timeout_s"), "{}", outcome.for_model);
    settle().await;
    assert!(stopped.load(Ordering::SeqCst), "the call's own cancel fired");
    assert!(!env.cancel.is_cancelled(), "the turn goes on");
}

#[tokio::test(start_paused = true)]
async fn an_mcp_call_has_its_own_deadline() {
    let dirs = Dirs::new();
    let mut env = dirs.env();
    env.deadlines = Deadlines { external: Duration::from_secs(7), ..Deadlines::default() };
    let (tool, _) = stuck(Pace::External);
    let prepared = tool.prepare("{}", &env).expect("prepared");
    let started = tokio::time::Instant::now();
    let outcome = run_within(&tool, prepared, env).await;
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    assert!(outcome.for_model.contains("mcp_timeout_s"), "{}", outcome.for_model);
}

#[tokio::test(start_paused = true)]
async fn a_question_waits_for_the_person_until_the_turn_is_cancelled() {
    let dirs = Dirs::new();
    let env = dirs.env();
    let (tool, stopped) = stuck(Pace::Person);
    let prepared = tool.prepare("{}", &env).expect("prepared");
    let turn = env.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        turn.cancel();
    });
    let started = tokio::time::Instant::now();
    let outcome = run_within(&tool, prepared, env).await;
    assert_eq!(started.elapsed(), Duration::from_secs(3600), "no deadline cut the wait short");
    assert!(outcome.for_model.contains("cancelled"), "{}", outcome.for_model);
    settle().await;
    assert!(stopped.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_command_never_runs_past_the_configured_limit_whatever_it_asks_for() {
    let dirs = Dirs::new();
    let mut env = dirs.env();
    env.deadlines = Deadlines { command: Duration::from_secs(1), ..Deadlines::default() };
    let started = std::time::Instant::now();
    let outcome = call(&RunCommand, &env, json!({ "command": "sleep 30", "timeout_ms": 600000 })).await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(outcome.for_model.contains("Timed out after 1000 ms"), "{}", outcome.for_model);
}

#[test]
fn the_config_sets_each_deadline() {
    let config =
        heron_core::config::Config::parse("tool_timeout_s = 3\ncommand_timeout_s = 0\nmcp_timeout_s = 9\n")
            .expect("parses");
    let deadlines = config.deadlines();
    assert_eq!(deadlines.quick, Duration::from_secs(3));
    assert_eq!(deadlines.command, Duration::from_secs(1), "0 counts as 1 s");
    assert_eq!(deadlines.external, Duration::from_secs(9));
    assert_eq!(heron_core::config::Config::parse("").expect("parses").deadlines(), Deadlines::default());
}
