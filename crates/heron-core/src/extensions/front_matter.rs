//! The small `---` block a command file may open with: `key: value` lines (`description`,
//! `argument-hint` or `argument_hint`), values optionally in quotes. Keys it does not know
//! are passed over, so a file written for another agent (with `model:` or `allowed-tools:`)
//! still works; a line that is not `key: value`, or a block that never closes, is an error
//! naming its line.

/// What the front matter says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FrontMatter {
    pub(super) description: Option<String>,
    pub(super) argument_hint: Option<String>,
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
        let Some((key, value)) = content.split_once(':') else {
            return Err((number, "a front matter line must be `key: value`".to_owned()));
        };
        let value = unquote(value.trim());
        match key.trim() {
            "description" => front.description = Some(value.to_owned()),
            "argument-hint" | "argument_hint" => front.argument_hint = Some(value.to_owned()),
            _ => {}
        }
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
