//! How many tokens a request holds, before the server says: an estimate from its text that
//! errs high where text is dense, scaled by what the server counted, of an earlier request
//! (its usage) or of this one (its own tokenizer, where it serves one).
//!
//! The estimate weighs each byte by its kind, in quarter tokens: letters, spaces and other
//! plain ASCII a quarter (four bytes a token, as English prose and identifiers run), symbols
//! and punctuation a half, digits a whole token (some tokenizers split every digit: 6,500
//! digits were 6,559 tokens to a llama.cpp server, where four bytes a token said 1,625), and
//! each byte of a non-ASCII character a half (a CJK character, three bytes, counts a token
//! and a half; byte-level tokenizers give rare characters a token a byte). Prose comes out
//! close, code a little high, dense text at its worst case.
//!
//! A server's count scales every later estimate by the ratio it showed, both ways but within
//! [`MIN_SCALE`] and [`MAX_SCALE`] of the estimate: a count far outside that is not this
//! request's (a test script's made-up usage), and would compact every request or none.

use crate::llm::{ChatMessage, ToolSpec, UserPart};

/// What an image counts for, whatever its file size, in quarter tokens: providers bill
/// images by their pixels (about 1,500 tokens for a screenshot), not by their base64 length.
const IMAGE_QUARTERS: u64 = 1536 * 4;

/// What a message's framing (role, ids, the chat template's markers) counts for, in quarter
/// tokens: chat templates add four or five tokens a message.
const MESSAGE_QUARTERS: u64 = 6 * 4;

/// The least a server's count may scale an estimate by, as (numerator, denominator): the
/// estimate errs high on purpose, by up to about twice for digits that a tokenizer groups.
const MIN_SCALE: (u64, u64) = (1, 2);

/// The most a server's count may scale an estimate by: no tokenizer makes much more than a
/// token of a byte, which is four times the estimate of plain text.
const MAX_SCALE: (u64, u64) = (4, 1);

/// The weight of each byte value, in quarter tokens.
const WEIGHTS: [u8; 256] = {
    let mut weights = [2u8; 256];
    let mut byte = 0;
    while byte < 128 {
        weights[byte] = match byte as u8 {
            b'0'..=b'9' => 4,
            b'!'..=b'/' | b':'..=b'@' | b'['..=b'`' | b'{'..=b'~' => 2,
            _ => 1,
        };
        byte += 1;
    }
    weights
};

/// The estimate of `text`, in quarter tokens.
fn quarters(text: &str) -> u64 {
    text.bytes().map(|byte| u64::from(WEIGHTS[usize::from(byte)])).sum()
}

/// The estimated tokens of a text that is prose (a summary, say) of `bytes` bytes.
pub(super) fn prose(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

/// The estimated tokens of a request of `messages` and `tools`.
pub(super) fn estimate(messages: &[ChatMessage], tools: &[ToolSpec]) -> u64 {
    let (text, rest) = parts(messages, tools);
    text.iter().map(|piece| quarters(piece)).sum::<u64>().saturating_add(rest).div_ceil(4)
}

/// The text of a request, for a server's tokenizer, and the estimated tokens of what a
/// tokenizer is not shown: each message's framing, and its images.
pub(super) fn counted_apart(messages: &[ChatMessage], tools: &[ToolSpec]) -> (String, u64) {
    let (text, rest) = parts(messages, tools);
    (text.concat(), rest.div_ceil(4))
}

/// The pieces of text of a request, and the quarter tokens of the rest.
fn parts<'a>(messages: &'a [ChatMessage], tools: &[ToolSpec]) -> (Vec<std::borrow::Cow<'a, str>>, u64) {
    use std::borrow::Cow;
    let mut text: Vec<Cow<'a, str>> = Vec::new();
    if !tools.is_empty()
        && let Ok(json) = serde_json::to_string(tools)
    {
        text.push(Cow::Owned(json));
    }
    let mut rest = 0u64;
    for message in messages {
        rest += MESSAGE_QUARTERS;
        match message {
            ChatMessage::System { text: said } => text.push(Cow::Borrowed(said)),
            ChatMessage::User { parts } => {
                for part in parts {
                    match part {
                        UserPart::Text { text: said } => text.push(Cow::Borrowed(said)),
                        UserPart::Image { .. } => rest += IMAGE_QUARTERS,
                    }
                }
            }
            ChatMessage::Assistant { text: said, tool_calls, reasoning } => {
                text.push(Cow::Borrowed(said));
                for call in tool_calls {
                    rest += MESSAGE_QUARTERS;
                    text.extend([&call.id, &call.name, &call.arguments].map(|s| Cow::Borrowed(s.as_str())));
                }
                if let Some(reasoning) = reasoning {
                    text.push(Cow::Borrowed(&reasoning.text));
                    if let Some(details) = &reasoning.details {
                        text.push(Cow::Owned(details.to_string()));
                    }
                }
            }
            ChatMessage::Tool { call_id, content } => {
                text.extend([Cow::Borrowed(call_id.as_str()), Cow::Borrowed(content.as_str())]);
            }
        }
    }
    (text, rest)
}

/// How a request's estimate turns into tokens: as it is, or scaled as the server's own count
/// of a request showed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Calibration {
    /// The estimate of the request in flight.
    sent: u64,
    /// The last count the server gave: (its tokens, the estimate of what it counted).
    seen: Option<(u64, u64)>,
}

impl Calibration {
    /// A request estimated at `estimate` tokens is being sent.
    pub(super) fn sending(&mut self, estimate: u64) {
        self.sent = estimate;
    }

    /// The server counted `input_tokens` for the request in flight (its usage).
    pub(super) fn reported(&mut self, input_tokens: u64) {
        self.counted(self.sent, input_tokens);
    }

    /// The server's tokenizer counted `tokens` of a request estimated at `estimate`.
    pub(super) fn counted(&mut self, estimate: u64, tokens: u64) {
        if tokens > 0 && estimate > 0 {
            let (least, most) = (scaled(estimate, MIN_SCALE), scaled(estimate, MAX_SCALE));
            self.seen = Some((tokens.clamp(least, most), estimate));
        }
    }

    /// The server refused the request in flight as longer than its window of `window`
    /// tokens: from now on a request that size counts as past it. `false` when nothing can
    /// be learnt (no window known, nothing in flight).
    pub(super) fn overflowed(&mut self, window: Option<u64>) -> bool {
        match window {
            Some(window) if self.sent > 0 => {
                let past = window.saturating_add(1);
                self.seen = Some((past.max(self.tokens(self.sent).saturating_add(1)), self.sent));
                true
            }
            _ => false,
        }
    }

    /// The tokens a request estimated at `estimate` is taken to hold.
    pub(super) fn tokens(&self, estimate: u64) -> u64 {
        match self.seen {
            Some((tokens, of)) if of > 0 => scaled(estimate, (tokens, of)),
            _ => estimate,
        }
    }
}

/// `value` times `ratio` (numerator, denominator), rounded up; a denominator of 0 leaves it.
fn scaled(value: u64, (numerator, denominator): (u64, u64)) -> u64 {
    if denominator == 0 {
        return value;
    }
    let product = (u128::from(value) * u128::from(numerator)).div_ceil(u128::from(denominator));
    u64::try_from(product).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::User { parts: vec![UserPart::Text { text: text.into() }] }]
    }

    fn framing() -> u64 {
        MESSAGE_QUARTERS / 4
    }

    #[test]
    fn digits_count_a_token_each_and_prose_about_four_bytes_a_token() {
        let digits = "7".repeat(6500);
        assert_eq!(estimate(&user(&digits), &[]), 6500 + framing());
        let prose = "the quick brown fox jumps over the lazy dog ".repeat(100);
        assert_eq!(estimate(&user(&prose), &[]), prose.len() as u64 / 4 + framing());
        let code = "fn main() { println!(\"{}\", 1); }";
        let plain = code.len() as u64 / 4;
        assert!(estimate(&user(code), &[]) > plain + framing(), "symbols weigh more than letters");
        let cjk = "鷺".repeat(100);
        assert_eq!(estimate(&user(&cjk), &[]), 150 + framing(), "a token and a half a character");
    }

    #[test]
    fn images_and_framing_count_apart_from_the_text_a_tokenizer_sees() {
        let messages = vec![
            ChatMessage::System { text: "be brief".into() },
            ChatMessage::User {
                parts: vec![
                    UserPart::Text { text: "look: ".into() },
                    UserPart::Image { mime_type: "image/png".into(), data: "AAAA".repeat(10_000) },
                ],
            },
        ];
        let (text, rest) = counted_apart(&messages, &[]);
        assert_eq!(text, "be brieflook: ");
        assert_eq!(rest, 1536 + 2 * framing(), "the image by its pixels, not its base64");
        assert_eq!(estimate(&messages, &[]), rest + quarters(&text).div_ceil(4));
    }

    #[test]
    fn a_servers_count_scales_later_estimates_both_ways_within_bounds() {
        let mut calibration = Calibration::default();
        assert_eq!(calibration.tokens(100), 100);
        calibration.sending(1000);
        calibration.reported(1500);
        assert_eq!(calibration.tokens(400), 600, "as the server counted");
        calibration.counted(1000, 800);
        assert_eq!(calibration.tokens(400), 320, "a tokenizer's count lowers it too");
        calibration.counted(1000, 10);
        assert_eq!(calibration.tokens(400), 200, "never below half the estimate");
        calibration.counted(1000, 1_000_000);
        assert_eq!(calibration.tokens(400), 1600, "never above four times it");
        calibration.counted(0, 50);
        calibration.counted(50, 0);
        assert_eq!(calibration.tokens(400), 1600, "a count of nothing teaches nothing");
    }

    #[test]
    fn a_refused_size_counts_as_past_the_window_from_then_on() {
        let mut calibration = Calibration::default();
        assert!(!calibration.overflowed(Some(2000)), "nothing in flight");
        calibration.sending(1000);
        assert!(!calibration.overflowed(None), "no window known");
        assert!(calibration.overflowed(Some(2000)));
        assert!(calibration.tokens(1000) > 2000);
        // Even when the estimate already said more than the window.
        calibration.sending(5000);
        assert!(calibration.overflowed(Some(2000)));
        assert!(calibration.tokens(5000) > 2000);
    }
}
