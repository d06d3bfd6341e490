//! What a server says in its log notifications that the user should see: messages at
//! warning and above are kept for the session's watcher, which shows each as a notice;
//! the rest go to Heron's log at debug. Bounded whatever the server sends: at most
//! [`MAX_QUEUED`] wait at a time, each clipped to [`MAX_TEXT`] characters, and after
//! [`MAX_SHOWN`] shown in a session the server's further messages go to the log only.
#![expect(deprecated, reason = "server logging is in the MCP revision servers speak today (2025-06-18)")]

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::Value;
use tokio::sync::watch;

/// The most messages waiting to be shown at a time; past it the newest are dropped.
const MAX_QUEUED: usize = 8;
/// The most messages of one server shown in a session.
pub(crate) const MAX_SHOWN: usize = 20;
/// The most characters of a message shown.
const MAX_TEXT: usize = 300;

/// A message a server logged at warning or above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSaid {
    /// The server's name.
    pub server: String,
    /// Whether it is an error or worse (else a warning).
    pub error: bool,
    /// The message, clipped and without control characters.
    pub text: String,
    /// Whether this is the last message of this server shown in the session.
    pub last: bool,
}

/// One server's messages waiting to be shown, and how many were.
pub(crate) struct Said {
    server: String,
    queue: Mutex<(VecDeque<ServerSaid>, usize)>,
    changed: Mutex<Option<watch::Sender<u64>>>,
}

impl Said {
    pub(crate) fn new(server: &str) -> Self {
        Self { server: server.to_owned(), queue: Mutex::default(), changed: Mutex::default() }
    }

    /// Wakes `changed` whenever a message waits.
    pub(crate) fn wake(&self, changed: watch::Sender<u64>) {
        *self.changed.lock().unwrap_or_else(PoisonError::into_inner) = Some(changed);
    }

    /// Keeps a message at warning or above for the user; logs the rest at debug.
    pub(crate) fn heard(&self, params: &LoggingMessageNotificationParam) {
        let text = text_of(&params.data);
        let error = match params.level {
            LoggingLevel::Debug | LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::debug!(server = %self.server, level = ?params.level, %text, "an MCP server logged");
                return;
            }
            LoggingLevel::Warning => false,
            _ => true,
        };
        {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let (waiting, shown) = &mut *queue;
            if *shown >= MAX_SHOWN || waiting.len() >= MAX_QUEUED {
                tracing::debug!(server = %self.server, %text, "an MCP server logged (not shown: too many)");
                return;
            }
            *shown += 1;
            let last = *shown == MAX_SHOWN;
            waiting.push_back(ServerSaid { server: self.server.clone(), error, text, last });
        }
        if let Some(changed) = &*self.changed.lock().unwrap_or_else(PoisonError::into_inner) {
            changed.send_modify(|n| *n += 1);
        }
    }

    /// The messages waiting, oldest first; none wait after.
    pub(crate) fn take(&self) -> Vec<ServerSaid> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).0.drain(..).collect()
    }
}

/// A log message's data as one clipped line: a string as it is, anything else as JSON.
fn text_of(data: &Value) -> String {
    let text = match data {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut clean: String = text.chars().filter(|c| !c.is_control()).take(MAX_TEXT).collect();
    if text.chars().filter(|c| !c.is_control()).count() > MAX_TEXT {
        clean.push('…');
    }
    clean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(level: &str, data: Value) -> LoggingMessageNotificationParam {
        serde_json::from_value(serde_json::json!({ "level": level, "data": data })).expect("params")
    }

    #[test]
    fn warnings_and_worse_wait_bounded_and_the_rest_do_not() {
        let said = Said::new("everything");
        said.heard(&log("info", "started".into()));
        said.heard(&log("warning", "disk\u{1b}[31m low".into()));
        said.heard(&log("emergency", serde_json::json!({ "code": 7 })));
        let taken = said.take();
        assert_eq!(taken.len(), 2);
        assert_eq!((taken[0].error, taken[0].text.as_str()), (false, "disk[31m low"));
        assert_eq!((taken[1].error, taken[1].text.as_str()), (true, "{\"code\":7}"));
        assert!(said.take().is_empty());
        for _ in 0..100 {
            said.heard(&log("error", "x".repeat(1000).into()));
        }
        let queued = said.take();
        assert_eq!(queued.len(), MAX_QUEUED, "at most this many wait");
        assert_eq!(queued[0].text.chars().count(), MAX_TEXT + 1);
        let mut shown = 2 + queued.len();
        while shown < MAX_SHOWN {
            said.heard(&log("error", "again".into()));
            shown += said.take().len();
        }
        assert_eq!(shown, MAX_SHOWN);
        said.heard(&log("error", "one too many".into()));
        assert!(said.take().is_empty(), "past the budget, only the log");
    }
}
