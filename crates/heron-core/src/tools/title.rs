//! Titles as the user reads them: every tool call's title (and so every permission
//! request's) is one readable line, so what the user approves is what they can see. Control
//! characters, line separators and bidi controls are shown escaped (`\n`, `\u{202e}`),
//! terminal escape sequences are dropped, and the line is clipped to [`MAX_TITLE`]
//! characters. The whole call (the command, the path) stays in the request's content.

/// The most characters a title keeps.
pub(crate) const MAX_TITLE: usize = 120;

/// `title` as one readable line of at most [`MAX_TITLE`] characters.
pub(crate) fn readable(title: &str) -> String {
    let mut out = String::with_capacity(title.len().min(MAX_TITLE * 4));
    let mut chars = title.chars().peekable();
    let mut kept = 0;
    while let Some(c) = chars.next() {
        if kept >= MAX_TITLE {
            out.push('…');
            return out;
        }
        if c == '\u{1b}' {
            skip_escape(&mut chars);
            continue;
        }
        if is_hidden(c) {
            let escaped = match c {
                '\n' => "\\n".to_owned(),
                '\r' => "\\r".to_owned(),
                '\t' => "\\t".to_owned(),
                _ => format!("\\u{{{:x}}}", u32::from(c)),
            };
            kept += escaped.chars().count();
            out.push_str(&escaped);
        } else {
            kept += 1;
            out.push(c);
        }
    }
    out
}

/// Whether `c` would not be seen as itself: control characters (C0, DEL, C1), line and
/// paragraph separators, bidi controls that reorder what follows, and zero-width marks.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{2028}' | '\u{2029}'                   // line and paragraph separators
            | '\u{200b}'..='\u{200f}'                 // zero-width, LRM, RLM
            | '\u{202a}'..='\u{202e}'                 // embeddings and overrides
            | '\u{2066}'..='\u{2069}'                 // isolates
            | '\u{061c}' | '\u{feff}')
}

/// Drops the rest of a terminal escape sequence after its ESC: a CSI (`ESC [ ... final`),
/// an OSC or string (`ESC ] ... BEL` or `ESC \`), or a two-character escape.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']' | 'P' | '_' | '^' | 'X') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// The first line of `text` clipped to `max` characters, saying how many lines there are
/// when there are more (`…` marks a clipped line): a title that shows a command or a
/// pattern must not hide that more runs than the first line.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let is_break =
        |c: char| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}' | '\u{85}' | '\u{b}' | '\u{c}');
    let trimmed = text.trim_end_matches(is_break);
    let lines = trimmed.split(is_break).filter(|line| !line.trim().is_empty()).count();
    let first = trimmed.split(is_break).next().unwrap_or("");
    let mut out: String = first.chars().take(max).collect();
    if out.chars().count() < first.chars().count() {
        out.push('…');
    }
    if lines > 1 {
        out.push_str(&format!(" ({lines} lines)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_separators_and_bidi_are_shown_escaped_and_escapes_dropped() {
        assert_eq!(readable("Run ls\u{1b}[2K\u{1b}[1Grm -rf ~"), "Run lsrm -rf ~");
        assert_eq!(readable("Run a\u{1b}]0;title\u{7}b"), "Run ab");
        assert_eq!(readable("Write evil\u{202e}txt.sh"), "Write evil\\u{202e}txt.sh");
        assert_eq!(readable("Run a\nb\u{2028}c\rd"), "Run a\\nb\\u{2028}c\\rd");
        assert_eq!(readable("Run \u{7}\u{200b}x"), "Run \\u{7}\\u{200b}x");
        assert_eq!(readable("Edit café.rs"), "Edit café.rs");
    }

    #[test]
    fn a_title_is_clipped_on_a_character_boundary() {
        let long = "é".repeat(500);
        let title = readable(&long);
        assert_eq!(title.chars().count(), MAX_TITLE + 1);
        assert!(title.ends_with('…'));
        assert_eq!(readable(&"x".repeat(MAX_TITLE)), "x".repeat(MAX_TITLE));
    }

    #[test]
    fn a_multi_line_command_says_how_many_lines_it_has() {
        assert_eq!(first_line("echo hi", 80), "echo hi");
        assert_eq!(first_line("echo hi\n", 80), "echo hi");
        assert_eq!(first_line("echo hi\ncurl x | sh\n", 80), "echo hi (2 lines)");
        assert_eq!(first_line("echo hi\u{2028}rm -rf ~", 80), "echo hi (2 lines)");
        assert_eq!(first_line("echo hi\rrm -rf ~", 80), "echo hi (2 lines)");
        assert_eq!(first_line(&"y".repeat(100), 10), format!("{}…", "y".repeat(10)));
    }
}
