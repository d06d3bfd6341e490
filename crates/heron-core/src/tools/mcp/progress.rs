//! A server's progress notifications, shown on the tool call they belong to: each request
//! carries a progress token of its own (`_meta.progressToken`, given by the MCP library),
//! and a notification that names a running call's token becomes that call's live content
//! ("40% (4 of 10): message"), at most every [`MIN_GAP`], so a server that reports in a
//! tight loop cannot flood the editor. A token no running call holds (a late or forged one)
//! is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};

use crate::tools::Progress;
use crate::types::ToolOutput;

/// The shortest time between two updates of one call.
const MIN_GAP: Duration = Duration::from_millis(250);
/// The most characters of a server's progress message shown.
const MAX_MESSAGE: usize = 200;

/// The running calls of one server that asked for progress, by token.
#[derive(Default)]
pub(crate) struct Routes {
    calls: Mutex<HashMap<String, Route>>,
}

struct Route {
    progress: Progress,
    shown: Option<Instant>,
}

/// A call's token, routed until it is dropped (the call ended).
pub(crate) struct Registered {
    routes: Arc<Routes>,
    key: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.routes.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

impl Routes {
    /// Routes the progress `token` names to a call that shows it on `progress`, until the
    /// returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, token: ProgressToken, progress: Progress) -> Registered {
        let key = key(&token);
        let route = Route { progress, shown: None };
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone(), route);
        Registered { routes: Arc::clone(self), key }
    }

    /// Shows `params` on the call its token names, unless it showed one a moment ago.
    pub(crate) fn report(&self, params: &ProgressNotificationParam) {
        self.report_at(params, Instant::now());
    }

    /// [`Routes::report`] as of `now`, so the gap can be tested without waiting it out.
    fn report_at(&self, params: &ProgressNotificationParam, now: Instant) {
        let key = key(&params.progress_token);
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(route) = calls.get_mut(&key) else { return };
        if route.shown.is_some_and(|shown| now.duration_since(shown) < MIN_GAP) {
            return;
        }
        route.shown = Some(now);
        route.progress.show(vec![ToolOutput::Text { text: line(params) }]);
    }
}

/// A token as a map key; a number and its digits as a string are one token, as servers
/// may echo either.
fn key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::String(key) => key.to_string(),
        NumberOrString::Number(n) => n.to_string(),
    }
}

/// "40% (4 of 10): message", or what of it is known.
fn line(params: &ProgressNotificationParam) -> String {
    let done = params.progress;
    let mut line = match params.total.filter(|total| *total > 0.0 && total.is_finite()) {
        Some(total) => {
            let percent = (done / total * 100.0).clamp(0.0, 100.0);
            format!("{percent:.0}% ({} of {})", number(done), number(total))
        }
        None => format!("{} done", number(done)),
    };
    if let Some(message) = params.message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        let message: String = message.chars().filter(|c| !c.is_control()).take(MAX_MESSAGE).collect();
        line.push_str(": ");
        line.push_str(&message);
    }
    line
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { format!("{value:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(
        token: &ProgressToken,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> ProgressNotificationParam {
        let mut value = serde_json::json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            value["total"] = serde_json::json!(total);
        }
        if let Some(message) = message {
            value["message"] = serde_json::json!(message);
        }
        serde_json::from_value(value).expect("params")
    }

    #[test]
    fn a_progress_line_says_the_share_done_and_the_message() {
        let token = ProgressToken(NumberOrString::String("t".into()));
        assert_eq!(line(&params(&token, 4.0, Some(10.0), Some("step 4"))), "40% (4 of 10): step 4");
        assert_eq!(line(&params(&token, 2.5, None, None)), "2.50 done");
        assert_eq!(line(&params(&token, 20.0, Some(10.0), Some("a\u{1b}b"))), "100% (20 of 10): ab");
    }

    /// What a call showed, in order.
    #[derive(Default)]
    struct Shown(Mutex<Vec<String>>);

    impl crate::tools::ProgressSink for Shown {
        fn show(&self, output: Vec<ToolOutput>) {
            for item in output {
                if let ToolOutput::Text { text } = item {
                    self.0.lock().expect("lock").push(text);
                }
            }
        }
        fn append(&self, _: ToolOutput) {}
    }

    /// A server reporting in a tight loop is shown once per [`MIN_GAP`] on its call, each
    /// line's message held to [`MAX_MESSAGE`] characters; a token no call holds shows nothing.
    #[test]
    fn a_flood_of_progress_is_shown_once_a_gap_and_clipped() {
        let routes = Arc::new(Routes::default());
        let shown = Arc::new(Shown::default());
        let token = ProgressToken(NumberOrString::String("t".into()));
        let _registered = routes.register(token.clone(), Progress::to(shown.clone()));
        let start = Instant::now();
        let long = "m".repeat(10 * MAX_MESSAGE);
        for n in 0..1000_u32 {
            let at = start + MIN_GAP * n / 1000;
            routes.report_at(&params(&token, f64::from(n), Some(1000.0), Some(&long)), at);
        }
        routes.report_at(&params(&token, 1000.0, Some(1000.0), None), start + MIN_GAP);
        let forged = ProgressToken(NumberOrString::String("u".into()));
        routes.report_at(&params(&forged, 1.0, None, None), start + MIN_GAP * 3);
        let lines = shown.0.lock().expect("lock").clone();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0], format!("0% (0 of 1000): {}", "m".repeat(MAX_MESSAGE)));
        assert_eq!(lines[1], "100% (1000 of 1000)");
    }

    #[test]
    fn only_a_running_calls_token_is_shown_and_a_dropped_one_no_more() {
        let routes = Arc::new(Routes::default());
        let token = ProgressToken(NumberOrString::Number(7));
        let registered = routes.register(token.clone(), Progress::default());
        routes.report(&params(&token, 1.0, Some(2.0), None));
        assert!(routes.calls.lock().expect("lock")[&registered.key].shown.is_some());
        let forged = ProgressToken(NumberOrString::String("999".into()));
        routes.report(&params(&forged, 1.0, None, None));
        drop(registered);
        assert!(routes.calls.lock().expect("lock").is_empty());
    }
}
