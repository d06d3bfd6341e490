//! JSON with comments and trailing commas (what Zed's `settings.json` holds) made plain
//! JSON for `serde_json`, every other byte where it was, so a syntax error's line and
//! column are those of the file the user has open.
//!
//! A few lines here instead of a JSON5 crate: Zed's files add only `//` and `/* */`
//! comments and trailing commas to JSON, and a crate would bring a parser of its own whose
//! errors and positions differ from `serde_json`'s, which reads the file after this.

/// `text` as plain JSON: comments and a comma that ends an object or array become spaces
/// (a comment's line breaks stay, so lines keep their numbers). A UTF-8 byte-order mark
/// becomes spaces too. An unterminated `/*` is left as it is, for `serde_json` to point at.
pub fn plain(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes[..3].fill(b' ');
    }
    // The last comma outside strings and comments, while only blanks and comments follow it.
    let mut comma: Option<usize> = None;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                comma = None;
                at = string_end(&bytes, at);
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                let end = bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| at + n);
                blank(&mut bytes[at..end]);
                at = end;
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let Some(close) = bytes[at + 2..].windows(2).position(|w| w == b"*/") else { break };
                let end = at + 2 + close + 2;
                blank(&mut bytes[at..end]);
                at = end;
                continue;
            }
            b',' => comma = Some(at),
            b'}' | b']' => {
                if let Some(trailing) = comma.take() {
                    bytes[trailing] = b' ';
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => comma = None,
        }
        at += 1;
    }
    // Only ASCII bytes were replaced, and only whole comments (whole characters) or a
    // byte-order mark, so the text is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// The index just past the string that starts at `start` (its closing quote), or the end.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Spaces in place of `bytes`, line breaks kept.
fn blank(bytes: &mut [u8]) {
    for byte in bytes.iter_mut().filter(|b| **b != b'\n' && **b != b'\r') {
        *byte = b' ';
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_become_spaces_in_place() {
        let text = "{\n  // a server\n  \"a\": [1, 2,], /* x\n y */ \"b\": {\"c\": 3,},\n}\n";
        let plain = plain(text);
        assert_eq!(plain.len(), text.len());
        assert_eq!(plain.lines().count(), text.lines().count());
        let value: serde_json::Value = serde_json::from_str(&plain).expect(&plain);
        assert_eq!(value, serde_json::json!({ "a": [1, 2], "b": { "c": 3 } }));
    }

    #[test]
    fn strings_keep_what_looks_like_comments_and_commas() {
        let text = r#"{"url": "http://x//y", "s": "a /* b */ ,}", "q": "say \"//\",]"}"#;
        let value: serde_json::Value = serde_json::from_str(&plain(text)).expect("parses");
        assert_eq!(value["url"], "http://x//y");
        assert_eq!(value["s"], "a /* b */ ,}");
        assert_eq!(value["q"], "say \"//\",]");
    }

    #[test]
    fn a_comma_between_values_stays_and_an_error_keeps_its_place() {
        // A comment between a comma and the next value does not make the comma trailing.
        let value: serde_json::Value = serde_json::from_str(&plain("[1, // one\n 2]")).expect("parses");
        assert_eq!(value, serde_json::json!([1, 2]));
        // A missing comma on line 3, after a multi-byte comment on line 2.
        let text = "{\n  // café ☕\n  \"a\": 1 \"b\": 2\n}";
        let error = serde_json::from_str::<serde_json::Value>(&plain(text)).expect_err("invalid");
        assert_eq!((error.line(), error.column()), (3, 10), "{error}");
    }

    #[test]
    fn an_unterminated_block_comment_is_left_for_the_parser_to_point_at() {
        let text = "{\"a\": 1, /* never closed\n}";
        assert_eq!(plain(text), text);
        let error = serde_json::from_str::<serde_json::Value>(&plain(text)).expect_err("invalid");
        assert_eq!(error.line(), 1, "{error}");
    }

    #[test]
    fn a_byte_order_mark_is_not_json() {
        let value: serde_json::Value = serde_json::from_str(&plain("\u{feff}[]")).expect("parses");
        assert_eq!(value, serde_json::json!([]));
    }
}
