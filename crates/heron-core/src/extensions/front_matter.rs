//! The small `---` block a command file or a `SKILL.md` opens with: `key: value` lines
//! (`description`, `argument-hint` or `argument_hint`, and a skill's `name` and
//! `allowed-tools`), values optionally in quotes. An indented line continues the value
//! above it (a folded description, a list of tools), so a skill written for another agent
//! parses unchanged. Keys it does not know are passed over, so a file written for another
//! agent (with `model:`) still works; a line that is not `key: value`, or a block that
//! never closes, is an error naming its line.

/// What the front matter says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FrontMatter {
    pub(super) description: Option<String>,
    pub(super) argument_hint: Option<String>,
    pub(super) name: Option<String>,
    pub(super) allowed_tools: Option<String>,
}

impl FrontMatter {
    /// The value of `key`, if it is one this block keeps.
    fn slot(&mut self, key: &str) -> Option<&mut Option<String>> {
        match key {
            "description" => Some(&mut self.description),
            "argument-hint" | "argument_hint" => Some(&mut self.argument_hint),
            "name" => Some(&mut self.name),
            "allowed-tools" | "allowed_tools" => Some(&mut self.allowed_tools),
            _ => None,
        }
    }
}

/// Splits `text` into its front matter and its body; without a `---` first line, all of it
/// is the body. An error is (line, reason).
pub(super) fn split(text: &str) -> Result<(FrontMatter, &str), (usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else { return Ok((FrontMatter::default(), text)) };
    if first.trim_end() != "---" {
        return Ok((FrontMatter::default(), text));
    }
    let mut front = FrontMatter::default();
    let mut offset = first.len();
    // The key the last `key: value` line set, which an indented line continues.
    let mut last: Option<String> = None;
    for (index, line) in lines.enumerate() {
        let number = index + 2;
        offset += line.len();
        let content = line.trim_end();
        if content == "---" {
            return Ok((front, &text[offset..]));
        }
        if content.trim().is_empty() || content.trim_start().starts_with('#') {
            continue;
        }
        if content.starts_with([' ', '\t']) && last.is_some() {
            let piece = content.trim();
            let piece = unquote(piece.strip_prefix("- ").unwrap_or(piece));
            if let Some(slot) = last.as_deref().and_then(|key| front.slot(key)) {
                let value = slot.get_or_insert_with(String::new);
                if !value.is_empty() {
                    value.push(' ');
                }
                value.push_str(piece);
            }
            continue;
        }
        let Some((key, value)) = content.split_once(':') else {
            return Err((number, "a front matter line must be `key: value`".to_owned()));
        };
        let value = unquote(value.trim());
        // A block scalar's indicator (`>`, `|-`) says the value is on the lines below.
        let value = if matches!(value, ">" | ">-" | ">+" | "|" | "|-" | "|+") { "" } else { value };
        let key = key.trim();
        if let Some(slot) = front.slot(key) {
            *slot = Some(value.to_owned());
        }
        last = Some(key.to_owned());
    }
    Err((1, "the front matter opened here is never closed with `---`".to_owned()))
}

/// A value without the quotes around it, if it has a matching pair.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_gives_description_and_hint_and_the_rest_is_the_body() {
        let text = "---\r\ndescription: Review code\r\nargument-hint: \"<files>\"\r\nmodel: any\r\n---\r\nReview $ARGUMENTS\r\n";
        let (front, body) = split(text).expect("parses");
        assert_eq!(front.description.as_deref(), Some("Review code"));
        assert_eq!(front.argument_hint.as_deref(), Some("<files>"));
        assert_eq!(body, "Review $ARGUMENTS\r\n");
    }

    #[test]
    fn indented_lines_continue_the_value_above() {
        let text = "---\nname: pdf\ndescription: >\n  Fill forms\n  and read PDFs\nallowed-tools:\n  - Read\n  - Bash\n---\nBody\n";
        let (front, body) = split(text).expect("parses");
        assert_eq!(front.name.as_deref(), Some("pdf"));
        assert_eq!(front.description.as_deref(), Some("Fill forms and read PDFs"));
        assert_eq!(front.allowed_tools.as_deref(), Some("Read Bash"));
        assert_eq!(body, "Body\n");
    }

    #[test]
    fn without_a_block_everything_is_the_body() {
        assert_eq!(split("Just do it\n---\n").expect("parses").1, "Just do it\n---\n");
        assert_eq!(split("").expect("parses").1, "");
    }

    #[test]
    fn a_bad_line_and_an_unclosed_block_name_their_line() {
        assert_eq!(split("---\ndescription: x\nnot a pair\n---\n").expect_err("bad").0, 3);
        assert_eq!(split("---\ndescription: x\n").expect_err("unclosed").0, 1);
    }
}
