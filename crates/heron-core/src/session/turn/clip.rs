//! How a tool's output is clipped once the model has answered it: head and tail kept around
//! a marker saying how much was left out. Used where the history becomes messages
//! (`history`) and where a compaction decides what to clip (`context`). Invariant: a clip
//! never splits a character, and an output short enough to gain little is never clipped.

use std::borrow::Cow;

/// Outputs up to this size are never clipped: clipping them would save little.
pub(in crate::session) const CLIP_OVER: usize = 4 * 1024;
/// How much of a clipped output's start is kept (errors and headers are at the top).
const CLIP_HEAD: usize = 1536;
/// How much of its end is kept (summaries and exit codes are at the bottom).
const CLIP_TAIL: usize = 1024;

/// `text` as sent once the model has answered it: as it is when short, else its head and
/// tail around a marker saying how much was left out and how to see it.
pub(in crate::session) fn clip_output(text: &str) -> Cow<'_, str> {
    if text.len() <= CLIP_OVER {
        return Cow::Borrowed(text);
    }
    let mut head = CLIP_HEAD;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - CLIP_TAIL;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let left_out = tail - head;
    Cow::Owned(format!(
        "{}\n[... {left_out} bytes of this output were clipped to fit the context window; run the tool \
         again to see them ...]\n{}",
        &text[..head],
        &text[tail..]
    ))
}

/// Whether `text` would be clipped.
pub(in crate::session) fn clippable(text: &str) -> bool {
    text.len() > CLIP_OVER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_output_keeps_its_head_and_tail_around_a_readable_marker() {
        let text = format!("{}{}{}", "h".repeat(2000), "é".repeat(3000), "t".repeat(2000));
        let clipped = clip_output(&text);
        assert!(clipped.len() < text.len() / 2, "{}", clipped.len());
        assert!(clipped.starts_with(&"h".repeat(1536)), "the head is kept");
        assert!(clipped.ends_with(&"t".repeat(1024)), "the tail is kept");
        assert!(clipped.contains("bytes of this output were clipped"), "the model is told");
        assert_eq!(clip_output("short"), "short");
        // A cut inside a multi-byte character moves to its edge.
        let wide = "漢".repeat(3000);
        assert!(clip_output(&wide).contains("clipped"));
    }
}
