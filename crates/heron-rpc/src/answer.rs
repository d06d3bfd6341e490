//! What a request's handler resolves to: its result, then what must follow it. The
//! notifications in [`Then`] are written in the same queue entry as the answer, so nothing
//! the connection sends and nothing the peer does about the answer can come between them,
//! and the reader never has to wait for them.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::RpcError;

/// A handler's answer: the encoded result, then what must follow it.
#[derive(Debug)]
pub struct Answer {
    /// The result or error the request is answered with.
    pub result: Result<Box<RawValue>, RpcError>,
    /// What follows the answer.
    pub then: Then,
}

impl From<Result<Box<RawValue>, RpcError>> for Answer {
    fn from(result: Result<Box<RawValue>, RpcError>) -> Self {
        Self { result, then: Then::default() }
    }
}

/// An action run once the answer and its notifications are queued.
type After = Box<dyn FnOnce() + Send>;

/// A notification that follows an answer: its method and params.
type Note = (String, Option<Box<RawValue>>);

/// What follows an answer, in order: notifications written right after it (in the same queue
/// entry), then actions run once they are queued (starting what may only start after the
/// peer could have seen the answer: the session's next turn, a watcher). When the request
/// is cancelled before its answer, none of it happens.
#[derive(Default)]
pub struct Then {
    notes: Vec<Note>,
    after: Vec<After>,
}

impl std::fmt::Debug for Then {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Then")
            .field("notes", &self.notes.iter().map(|(method, _)| method).collect::<Vec<_>>())
            .field("after", &self.after.len())
            .finish()
    }
}

impl Then {
    /// Nothing follows.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when nothing follows.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty() && self.after.is_empty()
    }

    /// Sends the notification `method` with `params` right after the answer.
    pub fn notify(&mut self, method: &str, params: Option<Box<RawValue>>) {
        self.notes.push((method.to_owned(), params));
    }

    /// Sends `params`, serialized, as the notification `method` right after the answer. A
    /// value that cannot be serialized is a bug: it is logged and left out.
    pub fn notify_serialized<P: Serialize + ?Sized>(&mut self, method: &str, params: &P) {
        match serde_json::value::to_raw_value(params) {
            Ok(raw) => self.notify(method, (raw.get() != "null").then_some(raw)),
            Err(err) => tracing::error!(method, %err, "a follow-up could not be encoded"),
        }
    }

    /// Runs `action` once the answer and its notifications are queued.
    pub fn after(&mut self, action: impl FnOnce() + Send + 'static) {
        self.after.push(Box::new(action));
    }

    /// Appends what `other` holds, after what this holds.
    pub fn extend(&mut self, other: Then) {
        self.notes.extend(other.notes);
        self.after.extend(other.after);
    }

    /// The notifications and the actions, in order.
    pub(crate) fn into_parts(self) -> (Vec<Note>, Vec<After>) {
        (self.notes, self.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_and_actions_keep_their_order_across_extend() {
        let mut first = Then::new();
        first.notify_serialized("a", &serde_json::json!({ "n": 1 }));
        first.after(|| {});
        let mut second = Then::new();
        second.notify("b", None);
        first.extend(second);
        let (notes, after) = first.into_parts();
        let methods: Vec<_> = notes.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(methods, ["a", "b"]);
        assert_eq!(notes[0].1.as_ref().map(|p| p.get()), Some(r#"{"n":1}"#));
        assert_eq!(after.len(), 1);
    }

    #[test]
    fn null_params_are_left_out() {
        let mut then = Then::new();
        then.notify_serialized("a", &());
        assert!(then.into_parts().0[0].1.is_none());
    }
}
