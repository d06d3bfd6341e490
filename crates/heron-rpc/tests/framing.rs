//! The line reader: delimiters, blank lines, size limits and UTF-8 across reads.

use heron_rpc::{Frame, LineReader};
use proptest::prelude::*;
use tokio::io::AsyncWriteExt;

/// Reads every frame from `input`, fed in one piece.
async fn frames(input: &[u8], max_line: usize) -> Vec<Frame> {
    let mut reader = LineReader::new(input, max_line);
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame().await.expect("in-memory reads do not fail") {
        out.push(frame);
    }
    out
}

fn line(text: &str) -> Frame {
    Frame::Line(text.to_owned())
}

fn code(frame: &Frame) -> i32 {
    match frame {
        Frame::Rejected(error) => error.code,
        Frame::Line(text) => panic!("expected a rejection, got line {text}"),
    }
}

#[tokio::test]
async fn crlf_is_tolerated_and_blank_lines_are_skipped() {
    let got = frames(b"\n\r\n  \t\r\n{\"a\":1}\r\n\n\n{\"b\":2}\n   \n", 1024).await;
    assert_eq!(got, vec![line(r#"{"a":1}"#), line(r#"{"b":2}"#)]);
}

#[tokio::test]
async fn only_lf_splits_frames_so_u2028_stays_inside_a_string() {
    let text = "{\"t\":\"a\u{2028}b\u{2029}c\u{85}d\"}";
    let got = frames(format!("{text}\n").as_bytes(), 1024).await;
    assert_eq!(got, vec![line(text)]);
}

#[tokio::test]
async fn a_leading_byte_order_mark_is_dropped() {
    let got = frames("\u{feff}{\"a\":1}\r\n".as_bytes(), 1024).await;
    assert_eq!(got, vec![line(r#"{"a":1}"#)]);
}

#[tokio::test]
async fn a_lone_cr_in_the_middle_is_content() {
    let got = frames(b"{\"a\":\r1}\n", 1024).await;
    assert_eq!(got, vec![line("{\"a\":\r1}")]);
}

#[tokio::test]
async fn invalid_utf8_rejects_only_that_line() {
    let got = frames(b"{\"a\":\"\xff\xfe\"}\n{\"b\":2}\n", 1024).await;
    assert_eq!(got.len(), 2);
    assert_eq!(code(&got[0]), -32700);
    assert_eq!(got[1], line(r#"{"b":2}"#));
}

#[tokio::test]
async fn a_complete_final_line_without_lf_is_kept() {
    assert_eq!(frames(b"{\"a\":1}\n{\"b\":2}", 1024).await, vec![line(r#"{"a":1}"#), line(r#"{"b":2}"#)]);
}

#[tokio::test]
async fn a_truncated_final_line_is_reported() {
    let got = frames(b"{\"a\":1}\n{\"b\":", 1024).await;
    assert_eq!(got.len(), 2);
    assert_eq!(code(&got[1]), -32700);
}

#[tokio::test]
async fn a_line_at_the_limit_is_accepted_and_one_past_it_is_not() {
    let at_limit = format!("\"{}\"", "x".repeat(8));
    assert_eq!(frames(format!("{at_limit}\n").as_bytes(), 10).await, vec![line(&at_limit)]);
    let past = format!("\"{}\"\n{{}}\n", "x".repeat(9));
    let got = frames(past.as_bytes(), 10).await;
    assert_eq!(got.len(), 2);
    assert_eq!(code(&got[0]), -32600);
    assert_eq!(got[1], line("{}"));
}

#[tokio::test]
async fn an_oversized_line_is_reported_once_without_being_buffered() {
    const LIMIT: usize = 1024 * 1024;
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    let writer = tokio::spawn(async move {
        let chunk = vec![b'a'; 64 * 1024];
        // 5 MiB with no newline, then the end of the line and a valid message.
        for _ in 0..80 {
            tx.write_all(&chunk).await?;
        }
        tx.write_all(b"aaa\n{\"ok\":true}\n").await?;
        tx.shutdown().await
    });
    let mut reader = LineReader::new(rx, LIMIT);
    let first = reader.next_frame().await.expect("read").expect("a frame");
    match &first {
        Frame::Rejected(error) => {
            assert_eq!(error.code, -32600);
            assert_eq!(error.data.as_ref().map(|d| d["maxLineBytes"].clone()), Some(LIMIT.into()));
        }
        Frame::Line(_) => panic!("the oversized line was accepted"),
    }
    // Reported as soon as it passed the limit: most of the line is still unread, and the
    // reader holds nothing of it.
    assert!(!writer.is_finished());
    assert_eq!(reader.buffered_capacity(), 0);
    let next = reader.next_frame().await.expect("read").expect("a frame");
    assert_eq!(next, line(r#"{"ok":true}"#));
    assert!(reader.buffered_capacity() <= LIMIT);
    assert_eq!(reader.next_frame().await.expect("read"), None);
    writer.await.expect("writer task").expect("writes");
}

#[tokio::test]
async fn an_unterminated_oversized_line_at_eof_is_reported_once() {
    let got = frames(&vec![b'x'; 5000], 100).await;
    assert_eq!(got.len(), 1);
    assert_eq!(code(&got[0]), -32600);
}

/// A stream of several messages with multibyte text, CRLF and blank lines, and the lines
/// it must decode to.
fn sample_stream() -> (Vec<u8>, Vec<Frame>) {
    let messages = [
        r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"text":"日本語 ✓ 🦀"}}"#,
        "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"s\":\"\u{2028}é\u{2029}\"}}",
        r#"{"jsonrpc":"2.0","id":"two","result":{"emoji":"👩‍💻"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#,
    ];
    let stream = format!("{}\r\n\n{}\n  \n{}\r\n{}\n", messages[0], messages[1], messages[2], messages[3]);
    (stream.into_bytes(), messages.iter().map(|m| line(m)).collect())
}

/// Feeds `bytes` through a pipe in pieces cut at `cuts` and collects the frames.
async fn frames_in_pieces(bytes: Vec<u8>, mut cuts: Vec<usize>) -> Vec<Frame> {
    cuts.sort_unstable();
    let (mut tx, rx) = tokio::io::duplex(7);
    let writer = tokio::spawn(async move {
        let mut start = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            let cut = cut.min(bytes.len()).max(start);
            tx.write_all(&bytes[start..cut]).await?;
            tx.flush().await?;
            tokio::task::yield_now().await;
            start = cut;
        }
        tx.shutdown().await
    });
    let mut reader = LineReader::new(rx, 4096);
    let mut out = Vec::new();
    while let Some(frame) = reader.next_frame().await.expect("read") {
        out.push(frame);
    }
    writer.await.expect("writer task").expect("writes");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_splits_decode_to_the_same_messages(cuts in proptest::collection::vec(0usize..400, 0..12)) {
        let (bytes, expected) = sample_stream();
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let got = runtime.block_on(frames_in_pieces(bytes, cuts));
        prop_assert_eq!(got, expected);
    }
}

#[tokio::test]
async fn a_character_split_across_writes_is_decoded_whole() {
    let (bytes, expected) = sample_stream();
    // Cut inside every multibyte character of the first message.
    let cuts: Vec<usize> = (1..bytes.len()).filter(|&i| (bytes[i] & 0xC0) == 0x80).collect();
    assert!(!cuts.is_empty());
    assert_eq!(frames_in_pieces(bytes, cuts).await, expected);
}
