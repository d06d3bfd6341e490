//! A tool call an MCP server refuses until the user opens a page (error -32042, "URL
//! elicitation required", MCP 2025-11-25): each page the error names is offered to the
//! editor as a URL elicitation, checked like any other; when the user accepts them all the
//! call is tried once more. An editor that cannot show pages, or a user who declines, ends
//! the call with a failure that tells the model what the server needs and why it was not
//! offered. The model is never given the URL: it is the user's (it may carry a one-time
//! token), and a model that relays it could be made to send the user elsewhere.

use serde_json::Value;

use super::EditorSlot;
use super::elicit::{checked, page};
use crate::tools::editor::{Elicitation, ElicitationAnswer};

/// The error code of a call that needs the user to open a page first.
pub(super) const URL_REQUIRED: i32 = -32042;
/// The most pages one refusal may ask for; more is a refusal of the call.
const MAX_PAGES: usize = 4;
/// The longest message a page comes with, in characters, as the model is told it.
const MAX_MESSAGE: usize = 500;

/// What became of the pages a refusal named.
#[derive(Debug, PartialEq)]
pub(super) enum Pages {
    /// The user opened every page: try the call again.
    Opened,
    /// Not offered, or not opened: the call fails with this text for the model.
    NotOpened(String),
}

/// Offers the pages of a -32042 refusal's `data` (`{"elicitations": [...]}`) to the editor.
pub(super) async fn offer(editor: &EditorSlot, server: &str, data: Option<&Value>) -> Pages {
    let asked: Vec<&Value> = data
        .and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
        .map(|list| list.iter().collect())
        .unwrap_or_default();
    let needs =
        format!("The MCP server `{server}` needs the user to open a page before this call can proceed");
    if asked.is_empty() || asked.len() > MAX_PAGES {
        return Pages::NotOpened(format!(
            "{needs}, but named {} pages; Heron offers 1 to {MAX_PAGES}.",
            asked.len()
        ));
    }
    let mut pages = Vec::new();
    for item in asked {
        let message = item.get("message").and_then(Value::as_str).unwrap_or_default();
        let shown = format!("MCP server asks: {message}");
        let url = item.get("url").and_then(Value::as_str).unwrap_or_default();
        match page(shown, url, item.get("elicitationId").and_then(Value::as_str)) {
            Ok(offered) => pages.push((offered, told(message))),
            Err(why) => return Pages::NotOpened(format!("{needs}, but its page was not offered: {why}.")),
        }
    }
    let Some(editor) = editor.get().filter(|e| e.elicitation_modes().url) else {
        let said = pages.iter().map(|(_, message)| message.as_str()).collect::<Vec<_>>().join("; ");
        return Pages::NotOpened(format!(
            "{needs} ({said}). The editor cannot show pages (it did not declare `elicitation.url`), so it was \
             not offered. Tell the user the server needs them to complete that step; do not retry the call until they have."
        ));
    };
    for (offered, message) in pages {
        let Elicitation::Url { .. } = offered else { continue };
        let answer = match editor.elicit(offered.clone()).await {
            Ok(answer) => checked(&offered, answer),
            Err(error) => {
                return Pages::NotOpened(format!(
                    "{needs} ({message}), but the editor could not show it: {error}."
                ));
            }
        };
        match answer {
            ElicitationAnswer::Accept(_) => {}
            ElicitationAnswer::Decline | ElicitationAnswer::Cancel => {
                return Pages::NotOpened(format!(
                    "{needs} ({message}); the user did not open it, so the call did not run."
                ));
            }
        }
    }
    Pages::Opened
}

/// A page's message as the model is told it: one line, capped.
fn told(message: &str) -> String {
    let line: String = message.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let line = line.trim();
    if line.is_empty() {
        return "it gave no reason".into();
    }
    crate::secret::clip(line, MAX_MESSAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asking(count: usize) -> Value {
        let pages: Vec<Value> = (0..count)
            .map(|n| {
                json!({ "mode": "url", "message": format!("Sign in {n}"), "elicitationId": format!("e{n}"),
                        "url": format!("https://auth.example/{n}") })
            })
            .collect();
        json!({ "elicitations": pages })
    }

    /// One page more than [`MAX_PAGES`] fails the call with the reason, before anything is
    /// offered; [`MAX_PAGES`] pages pass the count (and here stop at the editor that cannot
    /// show pages), as does one; none is refused too.
    #[tokio::test]
    async fn a_refusal_naming_more_than_four_pages_fails_the_call_saying_why() {
        let editor = EditorSlot::default();
        let Pages::NotOpened(past) = offer(&editor, "s", Some(&asking(MAX_PAGES + 1))).await else {
            panic!("five pages are not offered")
        };
        assert!(past.contains("named 5 pages; Heron offers 1 to 4"), "{past}");
        assert!(!past.contains("https://"), "the model is never given a URL: {past}");
        for fits in [1, MAX_PAGES] {
            let Pages::NotOpened(why) = offer(&editor, "s", Some(&asking(fits))).await else {
                panic!("no editor to open them")
            };
            assert!(why.contains("cannot show pages") && why.contains("Sign in 0"), "{fits}: {why}");
        }
        let Pages::NotOpened(none) = offer(&editor, "s", Some(&asking(0))).await else { panic!("none") };
        assert!(none.contains("named 0 pages"), "{none}");
    }
}
