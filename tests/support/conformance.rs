//! Replaying conformance transcripts in memory, against canned answers instead of an agent,
//! for the tests of the runner itself.

use std::collections::VecDeque;
use std::time::Duration;

use heron::conformance::matcher::Paths;
use heron::conformance::runner::{Failure, Received, Transport};
use heron::conformance::{Replayed, Scenario, replay};

/// A transport that answers each line the client sends with canned lines.
pub struct Canned {
    answers: VecDeque<Vec<String>>,
    out: VecDeque<String>,
}

impl Canned {
    /// Answers the `n`th line sent with `answers[n]`.
    pub fn new(answers: &[&[&str]]) -> Canned {
        Canned {
            answers: answers.iter().map(|a| a.iter().map(|s| (*s).to_owned()).collect()).collect(),
            out: VecDeque::new(),
        }
    }
}

impl Transport for Canned {
    fn send(&mut self, _line: &str) -> Result<(), String> {
        self.out.extend(self.answers.pop_front().unwrap_or_default());
        Ok(())
    }

    fn recv(&mut self, _wait: Duration) -> Received {
        self.out.pop_front().map_or(Received::Timeout, Received::Line)
    }

    fn close_input(&mut self) {}
}

/// The header of an in-memory scenario whose waits are short.
pub const SHORT: &str = r#"{"scenario": "in memory", "timeout_ms": 50}"#;

/// Replays the transcript `text` against [`Canned`] `answers`.
pub fn replay_text(text: &str, answers: &[&[&str]]) -> Result<Replayed, Failure> {
    let scenario = Scenario::parse("memory", text).expect("the transcript parses");
    replay(&scenario, &mut Canned::new(answers), &Paths::default(), false)
}
