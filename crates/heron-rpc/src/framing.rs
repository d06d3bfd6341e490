//! The line reader: splits an input byte stream into newline-delimited frames and never
//! holds more than one line of at most `max_line` bytes.
//!
//! Rules:
//! - LF is the only delimiter. U+2028 and U+2029 are content; a trailing CR is stripped.
//! - Lines that are empty or only whitespace are skipped; a leading byte-order mark is
//!   dropped.
//! - Bytes are framed before they are decoded, so a character split across reads is whole
//!   by the time the line is; a line that is not UTF-8 is rejected on its own (-32700).
//! - A line longer than `max_line` is reported once (-32600, `id: null`, the limit in
//!   `data`) the moment it passes the limit; the rest of it is read and dropped unbuffered
//!   up to the next LF, and the stream keeps going.
//! - At end of input, a final line without LF is kept if it is complete JSON, otherwise
//!   it is reported (-32700).

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::error::{INVALID_REQUEST, RpcError};

/// The default maximum size of one message line: 64 MiB, room for large pasted images.
pub const DEFAULT_MAX_LINE: usize = 64 * 1024 * 1024;

/// How many bytes one read asks for.
const READ_CHUNK: usize = 64 * 1024;

/// One frame read from the stream.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A line of UTF-8 text without its terminator; not yet known to be JSON.
    Line(String),
    /// A line that cannot become a message: answer this error with `id: null`.
    Rejected(RpcError),
}

/// Reads frames from any `AsyncRead`.
#[derive(Debug)]
pub struct LineReader<R> {
    input: BufReader<R>,
    max_line: usize,
    line: Vec<u8>,
    /// True while dropping the rest of a line that passed the limit.
    discarding: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader that rejects lines longer than `max_line` bytes (terminator excluded).
    pub fn new(input: R, max_line: usize) -> Self {
        Self {
            input: BufReader::with_capacity(READ_CHUNK, input),
            max_line,
            line: Vec::new(),
            discarding: false,
        }
    }

    /// The bytes currently reserved for the line being assembled; never more than about
    /// `max_line`, whatever the input.
    pub fn buffered_capacity(&self) -> usize {
        self.line.capacity()
    }

    /// Reads the next frame; `Ok(None)` at end of input.
    ///
    /// Cancel-safe: all state lives in `self` and the only await is `fill_buf`, so a
    /// `select!` that drops this future loses no bytes.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let chunk = self.input.fill_buf().await?;
            if chunk.is_empty() {
                return Ok(self.finish());
            }
            let (taken, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (at, true),
                None => (chunk.len(), false),
            };
            let mut report = None;
            if !self.discarding {
                if self.line.len() + taken > self.max_line {
                    // Release the partial line now, so an endless line costs nothing.
                    self.line = Vec::new();
                    self.discarding = true;
                    report = Some(self.too_long());
                } else {
                    grow(&mut self.line, taken, self.max_line);
                    self.line.extend_from_slice(&chunk[..taken]);
                }
            }
            self.input.consume(taken + usize::from(ends_line));
            if ends_line {
                self.discarding = false;
            }
            if report.is_some() {
                return Ok(report);
            }
            if ends_line && let Some(frame) = self.take_line(false) {
                return Ok(Some(frame));
            }
        }
    }

    /// Handles end of input: a pending partial line becomes the last frame.
    fn finish(&mut self) -> Option<Frame> {
        if self.discarding {
            // Already reported when it passed the limit.
            self.discarding = false;
            return None;
        }
        self.take_line(true)
    }

    /// Turns the assembled line into a frame; `None` for a blank line.
    fn take_line(&mut self, at_eof: bool) -> Option<Frame> {
        let mut bytes = std::mem::take(&mut self.line);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        // A byte-order mark (a Windows shell may add one) is never JSON: a line of only a
        // mark and whitespace is blank.
        let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
        if body.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let text = match String::from_utf8(bytes) {
            Ok(text) if text.starts_with('\u{feff}') => text['\u{feff}'.len_utf8()..].to_owned(),
            Ok(text) => text,
            Err(err) => {
                return Some(Frame::Rejected(RpcError::parse_error(format!(
                    "the message is not valid UTF-8: {}",
                    err.utf8_error()
                ))));
            }
        };
        if at_eof && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
            return Some(Frame::Rejected(RpcError::parse_error("the input ended inside a message")));
        }
        Some(Frame::Line(text))
    }

    fn too_long(&self) -> Frame {
        tracing::warn!(limit = self.max_line, "dropping a message line over the size limit");
        Frame::Rejected(RpcError::new(INVALID_REQUEST, "Invalid request").with_data(json!({
            "reason": "the message is larger than the maximum line size",
            "maxLineBytes": self.max_line,
        })))
    }
}

/// Reserves room for `extra` more bytes, doubling as `Vec` does but never past `max`, so
/// a line just under the limit does not hold twice the limit.
fn grow(line: &mut Vec<u8>, extra: usize, max: usize) {
    let needed = line.len() + extra;
    if needed > line.capacity() {
        let target = needed.max(line.capacity() * 2).min(max).max(needed);
        line.reserve_exact(target - line.len());
    }
}
