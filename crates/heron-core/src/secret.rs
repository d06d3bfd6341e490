//! Secrets (API keys): a wrapper that never prints its value, and redaction of known
//! secrets from text that leaves the process (errors, logs, transcripts).

use std::fmt;

/// A secret value. `Debug` and `Display` print a placeholder; only [`Secret::expose`]
/// gives the value, at the one place that needs it (an HTTP header).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Call it only where the value must leave as itself.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Replaces every occurrence of each secret (of at least 4 bytes, so that short values do
/// not shred ordinary text) with `***`.
pub fn redact<'a>(text: &str, secrets: impl IntoIterator<Item = &'a Secret>) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        if secret.0.len() >= 4 && out.contains(&secret.0) {
            out = out.replace(&secret.0, "***");
        }
    }
    out
}

/// Clips `text` to at most `max` bytes on a character boundary, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let marker = "…";
    let mut end = max.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let key = Secret::new("sk-live-123456");
        assert_eq!(format!("{key:?} {key}"), "Secret(***) ***");
    }

    #[test]
    fn redact_replaces_every_occurrence() {
        let key = Secret::new("sk-live-123456");
        assert_eq!(redact("bad key sk-live-123456 (sk-live-123456)", [&key]), "bad key *** (***)");
    }

    #[test]
    fn clip_cuts_on_a_char_boundary_and_marks_it() {
        let clipped = clip("ééééé", 6);
        assert!(clipped.len() <= 6 && clipped.ends_with('…'), "{clipped}");
        assert_eq!(clip("short", 10), "short");
    }
}
