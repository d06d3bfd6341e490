//! The tool calls of a session that can be cancelled one at a time (ACP v2's
//! `tool_call/cancel`): each call's own token, registered from the moment the editor is
//! shown the call (pending, behind earlier calls of its step) until its result is recorded,
//! so a cancel ends that call, or keeps it from starting, and the turn goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// The calls now pending, waiting for approval or running, by call id.
#[derive(Debug, Default)]
pub(crate) struct RunningCalls(Mutex<HashMap<String, CancellationToken>>);

impl RunningCalls {
    /// Registers call `id` with `token` until the returned guard drops.
    pub(crate) fn register(self: &Arc<Self>, id: &str, token: CancellationToken) -> Registered {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(id.to_owned(), token);
        Registered { calls: self.clone(), id: id.to_owned() }
    }

    /// Cancels call `id`; false when no such call is pending, waiting or running.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        match self.0.lock().unwrap_or_else(PoisonError::into_inner).get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

/// Keeps a call registered; dropping it forgets the call.
#[derive(Debug)]
pub(crate) struct Registered {
    calls: Arc<RunningCalls>,
    id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_call_is_cancelled_alone_and_forgotten_when_done() {
        let calls = Arc::new(RunningCalls::default());
        let turn = CancellationToken::new();
        let first = turn.child_token();
        let guard = calls.register("a", first.clone());
        let _other = calls.register("b", turn.child_token());
        assert!(calls.cancel("a"));
        assert!(first.is_cancelled());
        assert!(!turn.is_cancelled(), "the turn goes on");
        drop(guard);
        assert!(!calls.cancel("a"), "a finished call is no longer cancellable");
        assert!(!calls.cancel("missing"));
    }
}
