//! Secrets (API keys): a wrapper that never prints its value, and redaction of known
//! secrets from text that leaves the process (errors, logs, transcripts).

mod urls;

pub use self::urls::redact_urls;

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

/// [`redact`] for JSON text (a model's tool-call arguments): the text as written, and where
/// it is JSON whose decoded strings still hold a secret (written with escapes, such as
/// `\u0073k-...`), those strings too, the value then written anew. Text that is not JSON is
/// redacted as text.
pub(crate) fn redact_json_text(text: &str, secrets: &[Secret]) -> String {
    let written = redact(text, secrets);
    if secrets.iter().all(|s| s.0.len() < 4) {
        return written;
    }
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&written) else { return written };
    if scrub_strings(&mut value, secrets) { value.to_string() } else { written }
}

/// Redacts every string (and object key) of `value`; whether anything changed.
fn scrub_strings(value: &mut serde_json::Value, secrets: &[Secret]) -> bool {
    use serde_json::Value;
    let clean = |text: &str| {
        let redacted = redact(text, secrets);
        (redacted != text).then_some(redacted)
    };
    match value {
        Value::String(text) => match clean(text) {
            Some(redacted) => {
                *text = redacted;
                true
            }
            None => false,
        },
        Value::Array(items) => {
            // Every item is scrubbed: no short cut after the first change.
            let mut changed = false;
            for item in items {
                changed |= scrub_strings(item, secrets);
            }
            changed
        }
        Value::Object(map) => {
            let entries = std::mem::take(map);
            let mut changed = false;
            for (key, mut item) in entries {
                changed |= scrub_strings(&mut item, secrets);
                let key = match clean(&key) {
                    Some(redacted) => {
                        changed = true;
                        redacted
                    }
                    None => key,
                };
                map.insert(key, item);
            }
            changed
        }
        _ => false,
    }
}

/// Redacts secrets from output that arrives in pieces (a model's deltas, a command's
/// reads): it holds back the end of what it saw while that end could still be the start of
/// a secret, so a key split across pieces is caught too. Concatenating every piece it hands
/// back, then [`StreamRedactor::finish`], gives exactly [`redact`] of the whole.
#[derive(Debug, Clone, Default)]
pub struct StreamRedactor {
    secrets: Vec<Vec<u8>>,
    held: Vec<u8>,
}

impl StreamRedactor {
    /// A redactor for `secrets` (those under 4 bytes are left alone, as by [`redact`]).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Self {
        let secrets =
            secrets.into_iter().filter(|s| s.0.len() >= 4).map(|s| s.0.as_bytes().to_vec()).collect();
        Self { secrets, held: Vec::new() }
    }

    /// Takes the next piece and gives back what can be shown of it now.
    pub(crate) fn push_bytes(&mut self, piece: &[u8]) -> Vec<u8> {
        if self.secrets.is_empty() {
            return piece.to_vec();
        }
        let mut buffer = std::mem::take(&mut self.held);
        buffer.extend_from_slice(piece);
        let buffer = self.replace_all(&buffer);
        let hold = self.partial_tail(&buffer);
        self.held = buffer[buffer.len() - hold..].to_vec();
        buffer[..buffer.len() - hold].to_vec()
    }

    /// [`StreamRedactor::push_bytes`] for text; the pieces it gives back are whole characters.
    pub fn push(&mut self, piece: &str) -> String {
        // Held tails start where a secret starts, and a secret is whole UTF-8, so the cut
        // falls between characters.
        String::from_utf8_lossy(&self.push_bytes(piece.as_bytes())).into_owned()
    }

    /// The end held back, once no more pieces come.
    pub fn finish(&mut self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut self.held)).into_owned()
    }

    fn replace_all(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for secret in &self.secrets {
            let mut replaced = Vec::with_capacity(out.len());
            let mut at = 0;
            while let Some(found) = find(&out[at..], secret) {
                replaced.extend_from_slice(&out[at..at + found]);
                replaced.extend_from_slice(b"***");
                at += found + secret.len();
            }
            replaced.extend_from_slice(&out[at..]);
            out = replaced;
        }
        out
    }

    /// The length of the longest end of `bytes` that begins some secret without being all of it.
    fn partial_tail(&self, bytes: &[u8]) -> usize {
        self.secrets
            .iter()
            .map(|secret| {
                let longest = (secret.len() - 1).min(bytes.len());
                (1..=longest).rev().find(|&n| bytes[bytes.len() - n..] == secret[..n]).unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// Drops the start of `text` whose beginning was cut off (an editor terminal keeps only the
/// end of long output), as far as it could be the last part of a secret: that part alone
/// is not a whole secret, so redaction would miss it.
pub(crate) fn drop_cut_start<'t, 'a>(
    text: &'t str,
    secrets: impl IntoIterator<Item = &'a Secret>,
) -> &'t str {
    let bytes = text.as_bytes();
    let mut cut = secrets
        .into_iter()
        .filter(|secret| secret.0.len() >= 4)
        .map(|secret| {
            let secret = secret.0.as_bytes();
            let longest = (secret.len() - 1).min(bytes.len());
            (1..=longest).rev().find(|&n| bytes[..n] == secret[secret.len() - n..]).unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    &text[cut..]
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
    fn json_arguments_are_redacted_as_written_and_as_decoded() {
        let secrets = [Secret::new("sk-json-123456")];
        assert_eq!(
            redact_json_text(r#"{"content":"KEY=sk-json-123456"}"#, &secrets),
            r#"{"content":"KEY=***"}"#
        );
        // Escaped in the JSON text, the key is only visible once decoded.
        let escaped = r#"{"content":"\u0073k-json-123456","n":1}"#;
        assert_eq!(redact_json_text(escaped, &secrets), r#"{"content":"***","n":1}"#);
        assert_eq!(redact_json_text(r#"{"sk-json-123456":1}"#, &secrets), r#"{"***":1}"#);
        assert_eq!(redact_json_text("{not json sk-json-123456", &secrets), "{not json ***");
        let untouched = r#"{ "path" : "a.txt" }"#;
        assert_eq!(redact_json_text(untouched, &secrets), untouched, "unchanged text keeps its bytes");
    }

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
    fn a_key_split_across_pieces_is_still_redacted() {
        let key = Secret::new("sk-live-123456");
        let text = "here: sk-live-123456 and sk-li";
        for cut in 1..text.len() {
            let mut stream = StreamRedactor::new([&key]);
            let (a, b) = text.split_at(cut);
            let shown = format!("{}{}{}", stream.push(a), stream.push(b), stream.finish());
            assert_eq!(shown, redact(text, [&key]), "cut at {cut}");
            assert!(!shown.contains("sk-live-123456"));
        }
        let mut stream = StreamRedactor::new([&key]);
        let pieces: String = "sk-live-123456".chars().map(|c| stream.push(&c.to_string())).collect();
        assert_eq!(pieces + &stream.finish(), "***");
    }

    #[test]
    fn clip_cuts_on_a_char_boundary_and_marks_it() {
        let clipped = clip("ééééé", 6);
        assert!(clipped.len() <= 6 && clipped.ends_with('…'), "{clipped}");
        assert_eq!(clip("short", 10), "short");
    }

    #[test]
    fn the_end_of_a_secret_at_a_cut_start_is_dropped() {
        let key = Secret::new("sk-live-123456");
        assert_eq!(drop_cut_start("123456\nrest", [&key]), "\nrest");
        assert_eq!(drop_cut_start("live-123456 rest", [&key]), " rest");
        assert_eq!(drop_cut_start("plain output", [&key]), "plain output");
        assert_eq!(drop_cut_start("6 is a digit", [&key]), " is a digit", "any end of the key goes");
    }
}
