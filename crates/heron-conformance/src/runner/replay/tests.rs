//! The replay's waits on the agent: the start-up allowance, the scenario's timeout, the
//! grace that ends a run of messages and the wait for the agent's output to end, each
//! crossed by a transport whose waits run out.

use super::*;

/// Answers each line sent with `answers`' next line, and records how long each read
/// was allowed to wait.
struct Recording {
    answers: std::collections::VecDeque<String>,
    out: Option<String>,
    waits: Vec<Duration>,
}

impl Transport for Recording {
    fn send(&mut self, _line: &str) -> Result<(), String> {
        self.out = self.answers.pop_front();
        Ok(())
    }

    fn recv(&mut self, wait: Duration) -> Received {
        self.waits.push(wait);
        self.out.take().map_or(Received::Timeout, Received::Line)
    }

    fn close_input(&mut self) {}
}

/// Answers each line sent with its batch of lines, says when nothing is left (as a wait
/// that ran out), and records each wait and when the input was closed.
#[derive(Default)]
struct Scripted {
    batches: std::collections::VecDeque<Vec<&'static str>>,
    queued: std::collections::VecDeque<String>,
    waits: Vec<Duration>,
    closed_after: Option<usize>,
}

impl Transport for Scripted {
    fn send(&mut self, _line: &str) -> Result<(), String> {
        let batch = self.batches.pop_front().unwrap_or_default();
        self.queued.extend(batch.into_iter().map(str::to_owned));
        Ok(())
    }

    fn recv(&mut self, wait: Duration) -> Received {
        self.waits.push(wait);
        self.queued.pop_front().map_or(Received::Timeout, Received::Line)
    }

    fn close_input(&mut self) {
        self.closed_after = Some(self.waits.len());
    }
}

/// Two requests and their answers under `header`.
fn two_requests(header: &str) -> Scenario {
    let text = [
        header,
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 0, "result": {}}}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "id": 1, "result": {}}}"#,
    ]
    .join("\n");
    Scenario::parse("waits", &text).expect("parses")
}

fn scripted(header: &str, batches: Vec<Vec<&'static str>>) -> (Result<Replayed, Failure>, Scripted) {
    let scenario = two_requests(header);
    let mut transport = Scripted { batches: batches.into(), ..Scripted::default() };
    let replayed = replay(&scenario, &mut transport, &Paths::default(), false);
    (replayed, transport)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"result":{}}"#;

#[test]
fn an_agent_that_goes_quiet_fails_the_scenario_naming_the_wait_and_what_it_waited_for() {
    // Silent from the start: the start-up allowance ran out.
    let (failed, transport) = scripted(r#"{"scenario": "silent"}"#, vec![]);
    let failure = failed.expect_err("fails");
    assert_eq!((failure.line, failure.summary.as_str()), (3, "nothing arrived within 60s; expected:"));
    assert!(failure.detail.contains(r#""id": 0"#), "{}", failure.detail);
    assert_eq!(transport.waits, [STARTUP_TIMEOUT]);
    // Quiet after its first answer: the default timeout, or the scenario's own.
    let (failed, transport) = scripted(r#"{"scenario": "quiet"}"#, vec![vec![INIT]]);
    let failure = failed.expect_err("fails");
    assert_eq!((failure.line, failure.summary.as_str()), (5, "nothing arrived within 10s; expected:"));
    assert!(failure.detail.contains(r#""id": 1"#), "{}", failure.detail);
    assert_eq!(transport.waits, [STARTUP_TIMEOUT, DEFAULT_TIMEOUT]);
    let (failed, transport) = scripted(r#"{"scenario": "quick", "timeout_ms": 200}"#, vec![vec![INIT]]);
    assert_eq!(failed.expect_err("fails").summary, "nothing arrived within 200ms; expected:");
    assert_eq!(transport.waits, [STARTUP_TIMEOUT, Duration::from_millis(200)]);
}

#[test]
fn a_run_of_messages_ends_after_its_grace_and_the_closed_agent_gets_its_eof_wait() {
    let text = [
        r#"{"scenario": "a run at the end"}"#,
        r#"{"send": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}"#,
        r#"{"expect": {"jsonrpc": "2.0", "method": "chunk"}, "repeat": true}"#,
    ]
    .join("\n");
    let scenario = Scenario::parse("grace", &text).expect("parses");
    let chunk = r#"{"jsonrpc":"2.0","method":"chunk"}"#;
    let mut transport = Scripted { batches: vec![vec![chunk, chunk]].into(), ..Scripted::default() };
    let replayed = replay(&scenario, &mut transport, &Paths::default(), false).expect("passes");
    // An agent still quiet past its EOF wait is judged on what it sent (and then stopped).
    assert_eq!(replayed, Replayed::Passed);
    let waits = &transport.waits;
    assert_eq!(waits[..3], [STARTUP_TIMEOUT, GRACE, GRACE], "{waits:?}");
    assert_eq!(transport.closed_after, Some(3), "the input closes once the run is over: {waits:?}");
    let last = waits[3];
    assert!(last <= EOF_WAIT && last > EOF_WAIT / 2, "{waits:?}");
    assert_eq!(waits.len(), 4, "{waits:?}");
}

#[test]
fn the_first_message_may_take_the_start_up_allowance_and_later_ones_the_scenarios_timeout() {
    let scenario = two_requests(r#"{"scenario": "two requests", "timeout_ms": 200}"#);
    let answers = [r#"{"jsonrpc":"2.0","id":0,"result":{}}"#, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#];
    let mut transport = Recording {
        answers: answers.iter().map(|a| (*a).to_owned()).collect(),
        out: None,
        waits: Vec::new(),
    };
    let replayed = replay(&scenario, &mut transport, &Paths::default(), false).expect("passes");
    assert_eq!(replayed, Replayed::Passed);
    let timeout = Duration::from_millis(200);
    assert_eq!(transport.waits[..2], [STARTUP_TIMEOUT, timeout], "{:?}", transport.waits);
}
