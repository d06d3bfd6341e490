//! How many bytes of prompts wait in memory: a session's queue holds at most
//! [`SESSION_BYTES`] and all sessions together [`PROCESS_BYTES`], counted from what each
//! prompt carries (text, attachments, names) until its turn ends. A prompt past either is
//! refused at once (`PromptError::QueueFull`), so a client that sends prompts faster than
//! turns end, or one session's flood, cannot grow the process without bound or starve the
//! others. A queue with nothing in it takes any one prompt the connection let through (the
//! line cap bounds it): a single large prompt is never refused for its size alone. A slash
//! command's reply waiting for its place behind a turn ([`super::outbound::Place`]) counts
//! the same way, by its line and a fixed share for the place itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::Work;
use crate::types::{PromptInput, UserContent};

/// The most bytes of prompts one session holds, running and waiting.
pub const SESSION_BYTES: usize = 16 * 1024 * 1024;
/// The most bytes of prompts all sessions hold together.
pub const PROCESS_BYTES: usize = 48 * 1024 * 1024;

/// What every session holds, together.
static PROCESS: AtomicUsize = AtomicUsize::new(0);

/// A prompt's place in the budget, given back when it is dropped.
#[derive(Debug)]
pub(super) struct Held {
    session: Arc<AtomicUsize>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.session.fetch_sub(self.bytes, Ordering::SeqCst);
        PROCESS.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Why a prompt was refused: which budget, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// The budget, in bytes.
    pub limit: usize,
    /// Whether it is the process's (all sessions) rather than the session's.
    pub process: bool,
}

/// Takes `bytes` from the budget of the session counted by `session` and of the process.
fn take(counter: &AtomicUsize, bytes: usize, limit: usize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
            (held == 0 || held.saturating_add(bytes) <= limit).then_some(held + bytes)
        })
        .is_ok()
}

/// What a reply's place holds beside its line: the run that stands for it, its channels
/// and the request waiting on it. Counted so that a flood of short commands is bounded by
/// the budget too, not only by the connection's handlers.
pub(super) const PLACE_BYTES: usize = 1024;

/// A place for `work` in the budgets, or which one it does not fit.
pub(super) fn admit(session: &Arc<AtomicUsize>, work: &Work) -> Result<Held, Full> {
    admit_bytes(session, bytes_of(work))
}

/// A place for `bytes` in the budgets, or which one they do not fit.
pub(super) fn admit_bytes(session: &Arc<AtomicUsize>, bytes: usize) -> Result<Held, Full> {
    if !take(session, bytes, SESSION_BYTES) {
        return Err(Full { limit: SESSION_BYTES, process: false });
    }
    if !take(&PROCESS, bytes, PROCESS_BYTES) {
        session.fetch_sub(bytes, Ordering::SeqCst);
        return Err(Full { limit: PROCESS_BYTES, process: true });
    }
    Ok(Held { session: session.clone(), bytes })
}

/// What a job holds in memory, near enough: its text, data and names.
fn bytes_of(work: &Work) -> usize {
    let inputs = |input: &[PromptInput]| input.iter().map(input_bytes).sum::<usize>();
    match work {
        Work::Prompt(input) => inputs(input),
        Work::Command { prompt, invoked } => inputs(prompt) + invoked.len(),
        Work::Compact(instructions) => instructions.len(),
        Work::Rewind(_) => 0,
        Work::McpPrompt { call, invoked } => {
            invoked.len()
                + call.name.len()
                + call.server.len()
                + serde_json::Value::Object(call.arguments.clone()).to_string().len()
        }
    }
}

fn input_bytes(input: &PromptInput) -> usize {
    match input {
        PromptInput::Attachment { mime_type, data, uri, .. } => {
            mime_type.len() + data.len() + uri.as_ref().map_or(0, String::len)
        }
        PromptInput::Content(content) => match content {
            UserContent::Text { text } => text.len(),
            UserContent::Resource { uri, mime_type, text } => {
                uri.len() + mime_type.as_ref().map_or(0, String::len) + text.len()
            }
            other => serde_json::to_string(other).map_or(0, |s| s.len()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: usize) -> Work {
        Work::Prompt(vec![PromptInput::Content(UserContent::Text { text: "x".repeat(bytes) })])
    }

    #[test]
    fn a_session_holds_its_budget_and_gets_it_back() {
        let session = Arc::new(AtomicUsize::new(0));
        let first = admit(&session, &text(SESSION_BYTES - 10)).expect("fits");
        assert_eq!(admit(&session, &text(11)).err(), Some(Full { limit: SESSION_BYTES, process: false }));
        let small = admit(&session, &text(10)).expect("fits exactly");
        drop((first, small));
        assert_eq!(session.load(Ordering::SeqCst), 0);
        // An empty queue takes one prompt whatever its size.
        let big = admit(&session, &text(SESSION_BYTES + 1)).expect("alone, it is taken");
        assert!(admit(&session, &text(1)).is_err());
        drop(big);
    }
}
