//! Fuzzes the line reader: arbitrary bytes, cut into arbitrary reads, through
//! `rpc::LineReader` with a small line limit. It must never panic, never reserve more
//! than the limit, and frame the stream exactly as a plain model of the framing rules.
//!
//! Input layout: byte 0 picks the limit (1..=64), bytes 1..3 seed the read sizes and
//! where a read stalls; the rest is the stream. A stalled read drops the `next_frame`
//! future, as a `select!` picking another branch would, which checks its cancel safety.

#![no_main]

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use heron_rpc::{Frame, LineReader};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, ReadBuf};

/// What the model expects for one frame.
#[derive(Debug, PartialEq)]
enum Expected {
    Line(String),
    Rejected(i32),
}

/// An input that hands out `data` in small, seed-chosen pieces and sometimes stalls.
struct ChoppyInput<'a> {
    data: &'a [u8],
    seed: u32,
    stalled: bool,
}

impl ChoppyInput<'_> {
    /// xorshift32: cheap and deterministic for a given input.
    fn next(&mut self) -> u32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        self.seed
    }
}

impl AsyncRead for ChoppyInput<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let roll = self.next();
        // Never stall twice in a row, so every second poll makes progress.
        if !self.stalled && roll.is_multiple_of(4) {
            self.stalled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.stalled = false;
        let size = match roll % 8 {
            0 => 1,
            1..=5 => 1 + (roll >> 8) as usize % 7,
            _ => 1 + (roll >> 8) as usize % 200,
        };
        let size = size.min(self.data.len()).min(buf.remaining());
        let (now, rest) = self.data.split_at(size);
        buf.put_slice(now);
        self.data = rest;
        Poll::Ready(Ok(()))
    }
}

/// The framing rules of `rpc::framing`, written as plainly as possible.
fn model(stream: &[u8], max_line: usize) -> Vec<Expected> {
    let segments: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let last = segments.len() - 1;
    let mut out = Vec::new();
    for (index, segment) in segments.into_iter().enumerate() {
        if segment.len() > max_line {
            out.push(Expected::Rejected(-32600));
            continue;
        }
        let bytes = segment.strip_suffix(b"\r").unwrap_or(segment);
        // A line of only a byte-order mark and whitespace is blank.
        let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            out.push(Expected::Rejected(-32700));
            continue;
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if index == last && serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
            out.push(Expected::Rejected(-32700));
            continue;
        }
        out.push(Expected::Line(text.to_owned()));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [limit, seed_a, seed_b, stream @ ..] = data else { return };
    let max_line = 1 + usize::from(*limit % 64);
    let seed = 1 + (u32::from(*seed_a) << 8 | u32::from(*seed_b));
    let mut reader = LineReader::new(ChoppyInput { data: stream, seed, stalled: false }, max_line);
    let mut cx = Context::from_waker(Waker::noop());
    let mut got = Vec::new();
    loop {
        let polled = {
            let mut next = pin!(reader.next_frame());
            next.as_mut().poll(&mut cx)
        };
        assert!(
            reader.buffered_capacity() <= max_line,
            "reserved {} bytes with a limit of {max_line}",
            reader.buffered_capacity()
        );
        match polled {
            Poll::Pending => {}
            Poll::Ready(Ok(None)) => break,
            Poll::Ready(Ok(Some(Frame::Line(text)))) => {
                assert!(text.len() <= max_line, "a {}-byte line passed a {max_line}-byte limit", text.len());
                got.push(Expected::Line(text));
            }
            Poll::Ready(Ok(Some(Frame::Rejected(error)))) => {
                if error.code == -32600 {
                    let data = error.data.as_ref().expect("a too-long line names the limit");
                    assert_eq!(data["maxLineBytes"], max_line);
                }
                got.push(Expected::Rejected(error.code));
            }
            Poll::Ready(Err(err)) => panic!("the in-memory input never fails, got {err}"),
        }
    }
    assert_eq!(got, model(stream, max_line));
});
