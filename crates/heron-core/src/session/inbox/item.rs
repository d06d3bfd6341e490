//! One inbox item as the core shows it: its stored fields, its prompt decoded, and the
//! metadata a listing carries instead of the prompt (a preview of its first line and its
//! size), so a client can show a long queue without receiving every prompt.

use heron_store::{InboxIntent, InboxItem, InboxStatus};

use super::stored_prompt;
use crate::types::{PromptInput, UserContent};

/// The longest preview, in bytes (clipped on a character boundary, with an ellipsis).
pub const PREVIEW_BYTES: usize = 120;

/// Where an enqueued item went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// It waits in the queue and runs as a turn of its own.
    QueuedFollowup,
    /// The running turn will show it to the model before its next request.
    SteerAccepted,
}

impl Disposition {
    /// The disposition of an item with `intent`: a steer still marked as one was accepted
    /// for a turn (applied or about to be); every other item is a follow-up.
    pub fn of(intent: InboxIntent) -> Self {
        match intent {
            InboxIntent::Steer => Disposition::SteerAccepted,
            InboxIntent::Followup => Disposition::QueuedFollowup,
        }
    }
}

/// One item of a session's inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Its id.
    pub id: String,
    /// Its place in the queue, from 0.
    pub position: u32,
    /// Where it stands.
    pub status: InboxStatus,
    /// What it is for.
    pub intent: InboxIntent,
    /// The key its enqueue was given, if any.
    pub idempotency_key: Option<String>,
    /// The prompt, or why the stored one can no longer be read.
    pub prompt: Result<Vec<PromptInput>, String>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// When it was enqueued (RFC 3339 UTC).
    pub created_at: String,
    /// When it last changed (RFC 3339 UTC).
    pub updated_at: String,
}

impl From<InboxItem> for Item {
    fn from(item: InboxItem) -> Self {
        Self {
            prompt: stored_prompt::decode(&item.prompt),
            id: item.id,
            position: item.position,
            status: item.status,
            intent: item.intent,
            idempotency_key: item.idempotency_key,
            error: item.error,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

impl Item {
    /// The first non-blank line of the prompt's text, trimmed and clipped to
    /// [`PREVIEW_BYTES`]; empty when the prompt has no text or cannot be read.
    pub fn preview(&self) -> String {
        let Ok(input) = &self.prompt else { return String::new() };
        let line = input
            .iter()
            .filter_map(|part| match part {
                PromptInput::Content(UserContent::Text { text }) => Some(text.as_str()),
                _ => None,
            })
            .flat_map(str::lines)
            .map(str::trim)
            .find(|line| !line.is_empty());
        line.map(|line| crate::secret::clip(line, PREVIEW_BYTES)).unwrap_or_default()
    }

    /// The prompt's size in bytes: its text, embedded text resources and attachment data
    /// (links count their URI); 0 when it cannot be read.
    pub fn prompt_bytes(&self) -> u64 {
        let Ok(input) = &self.prompt else { return 0 };
        let bytes = input.iter().map(|part| match part {
            PromptInput::Content(content) => match content {
                UserContent::Text { text } | UserContent::Resource { text, .. } => text.len(),
                UserContent::Link { uri, .. } => uri.len(),
                UserContent::Image { .. } | UserContent::Blob { .. } => 0,
            },
            PromptInput::Attachment { data, .. } => data.len(),
        });
        bytes.map(|n| u64::try_from(n).unwrap_or(u64::MAX)).fold(0, u64::saturating_add)
    }
}

pub(super) fn items(stored: Vec<InboxItem>) -> Vec<Item> {
    stored.into_iter().map(Item::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(prompt: Vec<PromptInput>) -> Item {
        Item {
            id: "i".into(),
            position: 0,
            status: InboxStatus::Queued,
            intent: InboxIntent::Followup,
            idempotency_key: None,
            prompt: Ok(prompt),
            error: None,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    fn text(t: &str) -> PromptInput {
        PromptInput::Content(UserContent::Text { text: t.into() })
    }

    #[test]
    fn the_preview_is_the_first_non_blank_line_clipped() {
        assert_eq!(item(vec![text("\n  Fix the build  \nthen more")]).preview(), "Fix the build");
        let long = "x".repeat(500);
        let preview = item(vec![text(&long)]).preview();
        assert!(preview.len() <= PREVIEW_BYTES && preview.ends_with('…'), "{preview}");
        let image = PromptInput::Attachment {
            image: true,
            mime_type: "image/png".into(),
            data: vec![0; 9],
            uri: None,
        };
        assert_eq!(item(vec![image.clone(), text("after the image")]).preview(), "after the image");
        assert_eq!(item(vec![image]).preview(), "", "no text, no preview");
    }

    #[test]
    fn prompt_bytes_count_text_and_attachment_data() {
        let image = PromptInput::Attachment {
            image: true,
            mime_type: "image/png".into(),
            data: vec![0; 9],
            uri: None,
        };
        assert_eq!(item(vec![text("héllo"), image]).prompt_bytes(), 6 + 9);
        let unreadable = Item { prompt: Err("damaged".into()), ..item(vec![]) };
        assert_eq!((unreadable.preview(), unreadable.prompt_bytes()), (String::new(), 0));
    }

    #[test]
    fn a_steer_still_marked_so_was_accepted_and_anything_else_is_a_followup() {
        assert_eq!(Disposition::of(InboxIntent::Steer), Disposition::SteerAccepted);
        assert_eq!(Disposition::of(InboxIntent::Followup), Disposition::QueuedFollowup);
    }
}
