//! Text shown for a permission question, with nothing hidden in plain sight: a long run of
//! spaces or tabs, or of line breaks (which push the rest of a command off the screen), is
//! shown as its length, and characters that print nothing, print as a blank other than a
//! space (a no-break or em space, which the shell reads as part of a word) or reorder text
//! (zero-width, bidi controls, tags, other control characters) by their code point. What runs is the text as the agent sent
//! it; only its picture changes.

/// A run of spaces and tabs longer than this is shown as its length.
const LONGEST_RUN: usize = 24;

/// More line breaks in a row than this are shown as their count.
const MOST_LINE_BREAKS: usize = 3;

/// Whether `c` prints nothing, prints as a blank that is not a space or tab (which the
/// shell reads as part of a word), breaks lines by other means, or changes how the text
/// around it prints.
fn invisible(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || (c.is_whitespace() && c != ' ' && c != '\t' && c != '\n')
        || matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180E}' | '\u{FEFF}')
        || ('\u{200B}'..='\u{200F}').contains(&c)
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2060}'..='\u{206F}').contains(&c)
        || ('\u{FE00}'..='\u{FE0F}').contains(&c)
        || ('\u{E0000}'..='\u{E0FFF}').contains(&c)
}

/// `text` as it is safe to show (see the module docs).
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\t' {
            let mut run = String::from(c);
            while let Some(&next) = chars.peek().filter(|n| **n == ' ' || **n == '\t') {
                run.push(next);
                chars.next();
            }
            if run.len() > LONGEST_RUN {
                out.push_str(&format!("⟨{} blanks⟩", run.len()));
            } else {
                out.push_str(&run);
            }
        } else if c == '\n' {
            let mut breaks = 1;
            while chars.next_if_eq(&'\n').is_some() {
                breaks += 1;
            }
            if breaks > MOST_LINE_BREAKS {
                out.push_str(&format!("\n⟨{breaks} line breaks⟩\n"));
            } else {
                out.push_str(&"\n".repeat(breaks));
            }
        } else if invisible(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` cut to `max` characters, and how many were left out.
pub fn clipped(text: &str, max: usize) -> (String, usize) {
    let total = text.chars().count();
    (text.chars().take(max).collect(), total.saturating_sub(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_and_invisible_characters_are_shown_for_what_they_are() {
        let padded = format!("echo safe{}; touch HIDDEN", " ".repeat(3000));
        assert_eq!(visible(&padded), "echo safe⟨3000 blanks⟩; touch HIDDEN");
        assert_eq!(visible("a\u{202E}b\u{200B}c\u{1b}[2J"), "a⟨U+202E⟩b⟨U+200B⟩c⟨U+001B⟩[2J");
        assert_eq!(visible("if x:\n        y\tz"), "if x:\n        y\tz", "ordinary indentation stays");
        let pushed = format!("echo top{}echo bottom", "\n".repeat(400));
        assert_eq!(visible(&pushed), "echo top\n⟨400 line breaks⟩\necho bottom");
        assert_eq!(visible("a\u{a0}b\u{2003}c\u{3000}d"), "a⟨U+00A0⟩b⟨U+2003⟩c⟨U+3000⟩d");
        assert_eq!(visible("x\u{2028}y\u{e0041}z"), "x⟨U+2028⟩y⟨U+E0041⟩z");
    }

    #[test]
    fn a_clip_says_how_much_it_left_out() {
        assert_eq!(clipped("héllo", 2), ("hé".to_owned(), 3));
        assert_eq!(clipped("hi", 5), ("hi".to_owned(), 0));
    }
}
