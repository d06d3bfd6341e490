//! A session's title when nobody gave one: the first line of its first prompt, clipped,
//! cleaned of terminal escape sequences, bidi controls, other control characters and the
//! user's keys. Deterministic, so the same prompt always titles a session the same way.
//! Invariant: a title never carries a code a terminal or an editor would act on.

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
        UserContent::Text { text } => {
            text.lines().map(|line| clean(line).trim().to_owned()).find(|line| !line.is_empty())
        }
        _ => None,
    })?;
    let clean = crate::secret::redact(&line, secrets);
    let mut title: String = clean.chars().take(MAX_TITLE_CHARS).collect();
    if title.len() < clean.len() {
        title = title.trim_end().to_owned();
        title.push('…');
    }
    Some(title)
}

/// `line` without terminal escape sequences, whole (a colour code pasted from a terminal
/// would otherwise leave `[31m` behind), without the bidi overrides and isolates that make
/// a title read differently from what it is, and with every other control character as a
/// space. Sequences: CSI (`ESC [` or U+009B, parameters, a final byte), the string ones
/// (OSC, DCS, SOS, PM, APC: up to BEL or ST) and the two-character escapes.
fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Intermediate bytes, then the final one (`ESC ( B`).
                Some(' '..='/') => {
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next_if(|c| matches!(c, '0'..='~'));
                }
                // A two-character escape (`ESC c`, `ESC 7`), or ESC at the end.
                Some(_) | None => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Skips a CSI sequence after its introducer: parameter and intermediate bytes, then the
/// final byte. A malformed one ends at the first character that cannot belong to it.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars.next_if(|c| matches!(c, ' '..='?')).is_some() {}
    chars.next_if(|c| matches!(c, '@'..='~'));
}

/// Skips a string sequence's body up to its terminator: BEL, ST (`ESC \`) or U+009C.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
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
        assert_eq!(from_prompt(&[text("a\tb\u{7}c")], std::iter::empty()).as_deref(), Some("a b c"));
        assert_eq!(from_prompt(&[text("   \n")], std::iter::empty()), None);
        assert_eq!(from_prompt(&[], std::iter::empty()), None);
    }

    #[test]
    fn escape_sequences_go_whole_and_bidi_controls_go() {
        let title = |line: &str| from_prompt(&[text(line)], std::iter::empty());
        assert_eq!(title("\u{1b}[31mred\u{1b}[0m alert").as_deref(), Some("red alert"));
        assert_eq!(title("\u{9b}1;2Hmoved").as_deref(), Some("moved"));
        assert_eq!(title("\u{1b}]0;pwned\u{7}Fix it").as_deref(), Some("Fix it"));
        assert_eq!(
            title("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\ here").as_deref(),
            Some("link here")
        );
        assert_eq!(title("\u{1b}(Bplain\u{1b}c").as_deref(), Some("plain"));
        assert_eq!(title("evil\u{202e}gnp.exe\u{2066}x\u{2069}").as_deref(), Some("evilgnp.exex"));
        // A first line of nothing but codes gives way to the next.
        assert_eq!(title("\u{1b}[2J\u{1b}[H\nSecond line").as_deref(), Some("Second line"));
    }

    #[test]
    fn a_key_in_the_prompt_never_reaches_the_title() {
        let key = Secret::new("sk-live-abcdef123456");
        let title =
            from_prompt(&[text("use sk-live-abcdef123456 please")], [&key].into_iter()).expect("a title");
        assert!(!title.contains("sk-live-abcdef123456"), "{title}");
    }
}
