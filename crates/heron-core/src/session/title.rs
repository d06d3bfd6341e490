//! A session's title when nobody gave one: the first line of its first prompt, clipped,
//! cleaned of control characters and of the user's keys. Deterministic, so the same
//! prompt always titles a session the same way.

use crate::secret::Secret;
use crate::types::UserContent;

/// The most characters a derived title keeps.
pub(super) const MAX_TITLE_CHARS: usize = 80;

/// The title `prompt` gives a session, if it has any text.
pub(super) fn from_prompt<'a>(
    prompt: &[UserContent],
    secrets: impl Iterator<Item = &'a Secret>,
) -> Option<String> {
    let line = prompt.iter().find_map(|content| match content {
        UserContent::Text { text } => text.lines().map(str::trim).find(|line| !line.is_empty()),
        _ => None,
    })?;
    let clean: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let clean = crate::secret::redact(&clean, secrets);
    let mut title: String = clean.chars().take(MAX_TITLE_CHARS).collect();
    if title.len() < clean.len() {
        title = title.trim_end().to_owned();
        title.push('…');
    }
    Some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(text: &str) -> UserContent {
        UserContent::Text { text: text.to_owned() }
    }

    #[test]
    fn the_first_nonblank_line_of_the_first_text_is_the_title_clipped() {
        let none = std::iter::empty();
        assert_eq!(
            from_prompt(&[text("\n  Fix the build  \nthen more")], none).as_deref(),
            Some("Fix the build")
        );
        let long = "word ".repeat(40);
        let title = from_prompt(&[text(&long)], std::iter::empty()).expect("a title");
        assert!(title.ends_with('…') && title.chars().count() <= MAX_TITLE_CHARS + 1, "{title}");
        assert_eq!(from_prompt(&[text("a\tb\u{1b}c")], std::iter::empty()).as_deref(), Some("a b c"));
        assert_eq!(from_prompt(&[text("   \n")], std::iter::empty()), None);
        assert_eq!(from_prompt(&[], std::iter::empty()), None);
    }

    #[test]
    fn a_key_in_the_prompt_never_reaches_the_title() {
        let key = Secret::new("sk-live-abcdef123456");
        let title =
            from_prompt(&[text("use sk-live-abcdef123456 please")], [&key].into_iter()).expect("a title");
        assert!(!title.contains("sk-live-abcdef123456"), "{title}");
    }
}
